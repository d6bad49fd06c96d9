// RUN: gerbil-opt %S/Inputs/block.mlir --pass-pipeline='builtin.module(func.func(gerbil-group-qkv))' | FileCheck %s
// RUN: gerbil-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(gerbil-group-qkv))' | FileCheck %s --check-prefix=APART

// Before: three matmuls of the normed input, q with its bias add, then RoPE, the cache write and attention.
// After: one "linear_qkv" dispatch holds q, its bias, k and v in that order and yields q, k and v; the bias
// weight_ref moved up with it; RoPE and the cache write still follow outside.
// CHECK-LABEL: func.func @forward
// CHECK: %[[N:.*]] = gerbil.rms_norm
// CHECK: %[[WQ:.*]] = gerbil.weight_ref @layers.0.attn.q_proj.weight
// CHECK: %[[BQ:.*]] = gerbil.weight_ref @layers.0.attn.q_proj.bias
// CHECK: %[[WK:.*]] = gerbil.weight_ref @layers.0.attn.k_proj.weight
// CHECK: %[[WV:.*]] = gerbil.weight_ref @layers.0.attn.v_proj.weight
// CHECK: %[[G:.*]]:3 = gerbil.dispatch "linear_qkv"(%[[N]], %[[WQ]], %[[BQ]], %[[WK]], %[[WV]])
// CHECK-SAME: decode_grid = #{{.*}}, decode_workgroup = array<i64: 128, 1, 1>
// CHECK-SAME: -> (tensor<?x8xf32>, tensor<?x4xf32>, tensor<?x4xf32>)
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<?x8xf32>, %[[Q_W:.*]]: tensor<8x8xf32>, %[[Q_B:.*]]: tensor<8xf32>, %[[K_W:.*]]: tensor<4x8xf32>, %[[V_W:.*]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[Q:.*]] = gerbil.matmul %[[X]], %[[Q_W]]
// CHECK-NEXT: %[[QB:.*]] = gerbil.add %[[Q]], %[[Q_B]]
// CHECK-NEXT: %[[K:.*]] = gerbil.matmul %[[X]], %[[K_W]]
// CHECK-NEXT: %[[V:.*]] = gerbil.matmul %[[X]], %[[V_W]]
// CHECK-NEXT: gerbil.yield %[[QB]], %[[K]], %[[V]]
// CHECK: %[[QR:.*]] = gerbil.rope %[[G]]#0
// CHECK: %[[KR:.*]] = gerbil.rope %[[G]]#1
// CHECK: gerbil.kv_append %[[KR]], %[[G]]#2, %arg1 into @kv_cache.0
// CHECK: gerbil.attention %[[QR]]
// CHECK-NOT: gerbil.dispatch

// -----

// Projections of different inputs are not one group.
// APART-LABEL: func.func @apart
// APART-NOT: gerbil.dispatch
// APART: gerbil.matmul %arg0, %arg2
// APART: gerbil.matmul %arg1, %arg3
// APART: gerbil.matmul %arg0, %arg4
module {
  gerbil.kv_cache @kv_cache.0 {head_dim = 4 : i64, layer = 0 : i64, num_kv_heads = 1 : i64}
  func.func @apart(%x: tensor<?x8xf32>, %y: tensor<?x8xf32>, %wq: tensor<8x8xf32>, %wk: tensor<4x8xf32>, %wv: tensor<4x8xf32>, %pos: index) -> tensor<?x8xf32> {
    %q = gerbil.matmul %x, %wq : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    %k = gerbil.matmul %y, %wk : (tensor<?x8xf32>, tensor<4x8xf32>) -> tensor<?x4xf32>
    %v = gerbil.matmul %x, %wv : (tensor<?x8xf32>, tensor<4x8xf32>) -> tensor<?x4xf32>
    gerbil.kv_append %k, %v, %pos into @kv_cache.0 : tensor<?x4xf32>, tensor<?x4xf32>
    %a = gerbil.attention %q, %pos over @kv_cache.0 {num_heads = 2 : i64, num_kv_heads = 1 : i64, head_dim = 4 : i64, scale = 0.5} : (tensor<?x8xf32>, index) -> tensor<?x8xf32>
    return %a : tensor<?x8xf32>
  }
}
