// RUN: gerbil-opt %S/Inputs/block.mlir --pass-pipeline='builtin.module(func.func(gerbil-form-dispatches,gerbil-plan-memory{max-tokens=8}))' | FileCheck %s
// RUN: gerbil-opt %S/Inputs/block.mlir --pass-pipeline='builtin.module(func.func(gerbil-form-dispatches,gerbil-plan-memory{max-tokens=8 alignment=64}))' | FileCheck %s --check-prefix=ALIGN64
// RUN: gerbil-opt %S/Inputs/block.mlir --pass-pipeline='builtin.module(func.func(gerbil-group-qkv,gerbil-fuse-rope-kv-write,gerbil-form-dispatches,gerbil-plan-memory{max-tokens=8}))' | FileCheck %s --check-prefix=GROUP

// Rows of 8 f32 for 8 tokens are 256 bytes. Values that are never live together share bytes: the arena is
// 1280 bytes although the 13 activations total 4352.
// CHECK: func.func @forward{{.*}}attributes {gerbil.arena_bytes = 1280 : i64, gerbil.max_tokens = 8 : i64}
// CHECK: "embedding"{{.*}}arena_offsets = array<i64: 0>
// CHECK: "rms_norm"{{.*}}arena_offsets = array<i64: 256>
// CHECK: "matmul"{{.*}}arena_offsets = array<i64: 512>
// CHECK: "add"{{.*}}arena_offsets = array<i64: 768>
// The q projection's output is dead after the bias add, so the k projection reuses its bytes.
// CHECK: "matmul"{{.*}}arena_offsets = array<i64: 512>
// CHECK: "matmul"{{.*}}arena_offsets = array<i64: 1024>
// CHECK: "rope"{{.*}}arena_offsets = array<i64: 256>
// CHECK: "rope"{{.*}}arena_offsets = array<i64: 768>
// CHECK: "kv_append"{{.*}}arena_offsets = array<i64>
// CHECK: "attention"{{.*}}arena_offsets = array<i64: 512>
// The embedding stays live until the residual add reads it.
// CHECK: "add"(%{{.*}}) {{.*}}arena_offsets = array<i64: 256>
// CHECK: "rms_norm"{{.*}}arena_offsets = array<i64: 0>
// The logits (16 wide: 512 bytes) live to the end.
// CHECK: "matmul"{{.*}}arena_offsets = array<i64: 256>

// With 64-byte alignment the 128-byte k and v rows pack tighter.
// ALIGN64: gerbil.arena_bytes = 1024 : i64

// A fusion group's body passes q, q + bias, k, v and the rotated k between its ops when prefill runs them
// one by one: each gets bytes of its own (k and v rows are 128 bytes, aligned to 256), apart from the
// group's operands (the embedding at 0, the normed input at 256) and its result (the rotated q at 512).
// GROUP: "rms_norm"{{.*}}arena_offsets = array<i64: 256>
// GROUP: "linear_qkv"{{.*}}arena_offsets = array<i64: 512>{{.*}}internal_offsets = array<i64: 768, 1024, 1280, 1536, 1792>
// Once the group is done its internal bytes are free again: the attention reuses the norm's.
// GROUP: "attention"{{.*}}arena_offsets = array<i64: 256>
