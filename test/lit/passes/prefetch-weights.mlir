// RUN: gerbil-opt %s --pass-pipeline='builtin.module(func.func(gerbil-group-gate-up,gerbil-form-dispatches,gerbil-prefetch-weights{bytes=8192 data-launches=4}))' | FileCheck %s --check-prefix=ALL
// RUN: gerbil-opt %s --pass-pipeline='builtin.module(func.func(gerbil-group-gate-up,gerbil-form-dispatches,gerbil-prefetch-weights{bytes=1040 data-launches=4}))' | FileCheck %s --check-prefix=SHARED
// RUN: gerbil-opt %s --pass-pipeline='builtin.module(func.func(gerbil-group-gate-up,gerbil-form-dispatches,gerbil-prefetch-weights{bytes=8192}))' | FileCheck %s --check-prefix=NEXT
// RUN: gerbil-opt %s --pass-pipeline='builtin.module(func.func(gerbil-group-gate-up,gerbil-form-dispatches,gerbil-prefetch-weights{bytes=100}))' | FileCheck %s --check-prefix=PART
// RUN: gerbil-opt %s --pass-pipeline='builtin.module(func.func(gerbil-group-gate-up,gerbil-form-dispatches,gerbil-prefetch-weights))' | FileCheck %s --check-prefix=NONE
// RUN: not gerbil-opt %s --pass-pipeline='builtin.module(func.func(gerbil-prefetch-weights{bytes=-1}))' 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not gerbil-opt %s --pass-pipeline='builtin.module(func.func(gerbil-prefetch-weights{page-bytes=100}))' 2>&1 | FileCheck %s --check-prefix=ODD
// RUN: not gerbil-opt %s --pass-pipeline='builtin.module(func.func(gerbil-prefetch-weights{data-launches=-2}))' 2>&1 | FileCheck %s --check-prefix=NO-LAUNCHES
// RUN: gerbil-opt %s --pass-pipeline='builtin.module(func.func(gerbil-group-gate-up,gerbil-form-dispatches,gerbil-prefetch-weights{bytes=1040 page-bytes=64 data-launches=4}))' | FileCheck %s --check-prefix=PAGES
// RUN: gerbil-opt %s --pass-pipeline='builtin.module(func.func(gerbil-group-gate-up,gerbil-form-dispatches,gerbil-prefetch-weights{page-bytes=64}))' | FileCheck %s --check-prefix=ONLY-PAGES
// RUN: gerbil-opt %s --pass-pipeline='builtin.module(func.func(gerbil-group-gate-up,gerbil-form-dispatches,gerbil-prefetch-weights{bytes=8192 data-launches=4 max-launch-bytes=1023}))' | FileCheck %s --check-prefix=MAX-LAUNCH
// RUN: gerbil-opt %s --pass-pipeline='builtin.module(func.func(gerbil-group-gate-up,gerbil-form-dispatches,gerbil-prefetch-weights{page-bytes=64 min-model-bytes=3584}))' | FileCheck %s --check-prefix=ONLY-PAGES
// RUN: gerbil-opt %s --pass-pipeline='builtin.module(func.func(gerbil-group-gate-up,gerbil-form-dispatches,gerbil-prefetch-weights{page-bytes=64 min-model-bytes=3585}))' | FileCheck %s --check-prefix=NONE
// RUN: gerbil-opt %s --pass-pipeline='builtin.module(func.func(gerbil-group-gate-up,gerbil-form-dispatches,gerbil-prefetch-weights{bytes=8192 data-launches=4 max-launch-bytes=1024}))' | FileCheck %s --check-prefix=MAX-LAUNCH-EQUAL
// RUN: not gerbil-opt %s --pass-pipeline='builtin.module(func.func(gerbil-prefetch-weights{max-launch-bytes=-1}))' 2>&1 | FileCheck %s --check-prefix=NEGATIVE-MAX
// RUN: gerbil-opt %s --pass-pipeline='builtin.module(func.func(gerbil-group-gate-up,gerbil-form-dispatches,gerbil-prefetch-weights{page-bytes=64 spread-pages=true}))' | FileCheck %s --check-prefix=SPREAD
// RUN: gerbil-opt %s --pass-pipeline='builtin.module(func.func(gerbil-group-gate-up,gerbil-form-dispatches,gerbil-prefetch-weights{bytes=1040 page-bytes=64 spread-pages=true}))' | FileCheck %s --check-prefix=SPREAD-DATA
// RUN: gerbil-opt %s --pass-pipeline='builtin.module(func.func(gerbil-group-gate-up,gerbil-form-dispatches,gerbil-prefetch-weights{spread-pages=true}))' | FileCheck %s --check-prefix=NONE
// RUN: gerbil-opt %s --pass-pipeline='builtin.module(func.func(gerbil-group-gate-up,gerbil-form-dispatches,gerbil-prefetch-weights{bytes=8192 data-launches=4 max-launch-bytes=1023 large-model-bytes=3584 large-model-budget=2000}))' | FileCheck %s --check-prefix=LARGE
// RUN: gerbil-opt %s --pass-pipeline='builtin.module(func.func(gerbil-group-gate-up,gerbil-form-dispatches,gerbil-prefetch-weights{bytes=8192 data-launches=4 max-launch-bytes=1023 large-model-bytes=3585 large-model-budget=2000}))' | FileCheck %s --check-prefix=MAX-LAUNCH
// RUN: gerbil-opt %s --pass-pipeline='builtin.module(func.func(gerbil-group-gate-up,gerbil-form-dispatches,gerbil-prefetch-weights{large-model-bytes=3584 large-model-budget=256}))' | FileCheck %s --check-prefix=LARGE-ONLY
// RUN: not gerbil-opt %s --pass-pipeline='builtin.module(func.func(gerbil-prefetch-weights{large-model-budget=-1}))' 2>&1 | FileCheck %s --check-prefix=NEGATIVE-LARGE

// Two layers' attention, o projection and MLP (f32 weights: o 8 × 8 is 256 bytes, gate and up 32 × 8 and
// down 8 × 32 1024 each). Before: no dispatch prefetches. After: each attention dispatch names the matrices
// of the dispatches after it, in their order, up to the budget and up to the next attention.

// With room for all of them and data-launches=4: o, gate, up and down (3328 bytes), not the next layer's o.
// ALL-LABEL: func.func @forward
// ALL: gerbil.dispatch "attention"{{.*}}prefetch_bytes = array<i64: 256, 1024, 1024, 1024>, prefetch_strides = array<i64: 16, 16, 16, 16>, prefetch_weights = [@l0.o, @l0.gate, @l0.up, @l0.down]
// ALL: gerbil.dispatch "attention"{{.*}}prefetch_bytes = array<i64: 256>, prefetch_strides = array<i64: 16>, prefetch_weights = [@l1.o]}
// ALL-NOT: prefetch_

// 1040 bytes: o (256), then the gate/up group's 2048 do not fit: what is left (784) is shared between gate
// and up, 384 bytes each (whole 16-byte words), from their first rows; nothing after them.
// SHARED: gerbil.dispatch "attention"{{.*}}prefetch_bytes = array<i64: 256, 384, 384>, prefetch_strides = array<i64: 16, 16, 16>, prefetch_weights = [@l0.o, @l0.gate, @l0.up]}

// By default only the next launch's data (o), however large the budget.
// NEXT: gerbil.dispatch "attention"{{.*}}prefetch_bytes = array<i64: 256>, prefetch_strides = array<i64: 16>, prefetch_weights = [@l0.o]}

// 100 bytes: the first 96 of o.
// PART: gerbil.dispatch "attention"{{.*}}prefetch_bytes = array<i64: 96>, prefetch_strides = array<i64: 16>, prefetch_weights = [@l0.o]}

// NONE-NOT: prefetch_

// A model of at least large-model-bytes (this one has 3584 bytes of weights) gets large-model-budget instead
// of bytes, with no max-launch-bytes limit, read beside the attention (prefetch_beside): 2000 bytes are o
// (256) and a share of the rest (1744) for gate and up, 864 bytes each, where max-launch-bytes would have
// left out the gate/up launch (as for a model of one byte more: o alone, in the attention's launch, no
// prefetch_beside before its bytes). Without bytes of its own, only large models prefetch.
// LARGE: gerbil.dispatch "attention"{{.*}}prefetch_beside, prefetch_bytes = array<i64: 256, 864, 864>, prefetch_strides = array<i64: 16, 16, 16>, prefetch_weights = [@l0.o, @l0.gate, @l0.up]}
// LARGE: gerbil.dispatch "attention"{{.*}}prefetch_beside, prefetch_bytes = array<i64: 256>, prefetch_strides = array<i64: 16>, prefetch_weights = [@l1.o]}
// LARGE-ONLY: gerbil.dispatch "attention"{{.*}}prefetch_beside, prefetch_bytes = array<i64: 256>, prefetch_strides = array<i64: 16>, prefetch_weights = [@l0.o]}

// With page-bytes, also a word every 64 bytes of each matrix up to the next attention that is not loaded
// whole: gate, up (partly loaded) and down.
// PAGES: gerbil.dispatch "attention"{{.*}}prefetch_bytes = array<i64: 256, 384, 384, 1024, 1024, 1024>, prefetch_strides = array<i64: 16, 16, 16, 64, 64, 64>, prefetch_weights = [@l0.o, @l0.gate, @l0.up, @l0.gate, @l0.up, @l0.down]}
// ONLY-PAGES: gerbil.dispatch "attention"{{.*}}prefetch_bytes = array<i64: 256, 1024, 1024, 1024>, prefetch_strides = array<i64: 64, 64, 64, 64>, prefetch_weights = [@l0.o, @l0.gate, @l0.up, @l0.down]}

// max-launch-bytes=1023: o (256 bytes) is loaded, gate/up (2048 for the launch) and down (1024) are too
// large; the second attention loads l1's o. (Sizes count whole launches.)
// MAX-LAUNCH: gerbil.dispatch "attention"{{.*}}decode_workgroup = array<i64: {{[0-9, ]+}}>, prefetch_bytes = array<i64: 256>, prefetch_strides = array<i64: 16>, prefetch_weights = [@l0.o]}
// MAX-LAUNCH: gerbil.dispatch "attention"{{.*}}decode_workgroup = array<i64: {{[0-9, ]+}}>, prefetch_bytes = array<i64: 256>, prefetch_strides = array<i64: 16>, prefetch_weights = [@l1.o]}
// At 1024, down (at most that) is loaded too; gate/up is still too large.
// MAX-LAUNCH-EQUAL: gerbil.dispatch "attention"{{.*}}prefetch_bytes = array<i64: 256, 1024>, prefetch_strides = array<i64: 16, 16>, prefetch_weights = [@l0.o, @l0.down]}
// The page words need a model of at least min-model-bytes (here 3584 bytes of weights: ONLY-PAGES above at
// 3584, NONE at 3585).

// spread-pages: each attention touches the pages of the launch after it only, and each gemv (a linear or
// grouped projection) those of the next launch that reads matrices, unless an attention comes first: o ->
// gate and up, gate/up -> down, down -> nothing (the next attention), the last o -> nothing.
// SPREAD-LABEL: func.func @forward
// SPREAD: gerbil.dispatch "attention"{{.*}}prefetch_bytes = array<i64: 256>, prefetch_strides = array<i64: 64>, prefetch_weights = [@l0.o]}
// SPREAD: gerbil.dispatch "linear"{{.*}}prefetch_bytes = array<i64: 1024, 1024>, prefetch_strides = array<i64: 64, 64>, prefetch_weights = [@l0.gate, @l0.up]}
// SPREAD: gerbil.dispatch "linear_gate_up"{{.*}}prefetch_bytes = array<i64: 1024>, prefetch_strides = array<i64: 64>, prefetch_weights = [@l0.down]}
// SPREAD: gerbil.dispatch "linear"{{.*}}decode_workgroup = array<i64: 128, 1, 1>} :
// SPREAD: gerbil.dispatch "attention"{{.*}}prefetch_bytes = array<i64: 256>, prefetch_strides = array<i64: 64>, prefetch_weights = [@l1.o]}
// SPREAD: gerbil.dispatch "linear"{{.*}}decode_workgroup = array<i64: 128, 1, 1>} :
// The data stays the attention's: o whole (no page words for it then); the gemvs touch pages only.
// SPREAD-DATA: gerbil.dispatch "attention"{{.*}}prefetch_bytes = array<i64: 256>, prefetch_strides = array<i64: 16>, prefetch_weights = [@l0.o]}
// SPREAD-DATA: gerbil.dispatch "linear"{{.*}}prefetch_bytes = array<i64: 1024, 1024>, prefetch_strides = array<i64: 64, 64>, prefetch_weights = [@l0.gate, @l0.up]}

// NEGATIVE: bytes, data-launches, max-launch-bytes, min-model-bytes, large-model-bytes and large-model-budget must not be negative and page-bytes must be a multiple of 16, got -1, 1, 0, 0, 0, 0 and 0
// ODD: must be a multiple of 16, got 0, 1, 0, 0, 0, 0 and 100
// NO-LAUNCHES: must be a multiple of 16, got 0, -2, 0, 0, 0, 0 and 0
// NEGATIVE-MAX: must be a multiple of 16, got 0, 1, -1, 0, 0, 0 and 0
// NEGATIVE-LARGE: must be a multiple of 16, got 0, 1, 0, 0, 0, -1 and 0

module {
  gerbil.weight @l0.o : tensor<8x8xf32> {keys = ["l0.o"]}
  gerbil.weight @l0.gate : tensor<32x8xf32> {keys = ["l0.gate"]}
  gerbil.weight @l0.up : tensor<32x8xf32> {keys = ["l0.up"]}
  gerbil.weight @l0.down : tensor<8x32xf32> {keys = ["l0.down"]}
  gerbil.weight @l1.o : tensor<8x8xf32> {keys = ["l1.o"]}
  gerbil.kv_cache @kv_cache.0 {head_dim = 4 : i64, layer = 0 : i64, num_kv_heads = 1 : i64}
  gerbil.kv_cache @kv_cache.1 {head_dim = 4 : i64, layer = 1 : i64, num_kv_heads = 1 : i64}
  func.func @forward(%q: tensor<?x8xf32>, %h: tensor<?x8xf32>, %pos: index) -> tensor<?x8xf32> {
    %a = gerbil.attention %q, %pos over @kv_cache.0 {num_heads = 2 : i64, num_kv_heads = 1 : i64, head_dim = 4 : i64, scale = 0.5} : (tensor<?x8xf32>, index) -> tensor<?x8xf32>
    %wo = gerbil.weight_ref @l0.o : tensor<8x8xf32>
    %o = gerbil.linear %a, %wo residual(%h) : (tensor<?x8xf32>, tensor<8x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    %wg = gerbil.weight_ref @l0.gate : tensor<32x8xf32>
    %wu = gerbil.weight_ref @l0.up : tensor<32x8xf32>
    %gate = gerbil.matmul %o, %wg : (tensor<?x8xf32>, tensor<32x8xf32>) -> tensor<?x32xf32>
    %up = gerbil.matmul %o, %wu : (tensor<?x8xf32>, tensor<32x8xf32>) -> tensor<?x32xf32>
    %act = gerbil.silu %gate : tensor<?x32xf32>
    %m = gerbil.mul %act, %up : tensor<?x32xf32>
    %wd = gerbil.weight_ref @l0.down : tensor<8x32xf32>
    %d = gerbil.linear %m, %wd residual(%o) : (tensor<?x32xf32>, tensor<8x32xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    %a1 = gerbil.attention %d, %pos over @kv_cache.1 {num_heads = 2 : i64, num_kv_heads = 1 : i64, head_dim = 4 : i64, scale = 0.5} : (tensor<?x8xf32>, index) -> tensor<?x8xf32>
    %wo1 = gerbil.weight_ref @l1.o : tensor<8x8xf32>
    %o1 = gerbil.linear %a1, %wo1 residual(%d) : (tensor<?x8xf32>, tensor<8x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    return %o1 : tensor<?x8xf32>
  }
}
