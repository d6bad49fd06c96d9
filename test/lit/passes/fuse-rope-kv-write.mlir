// RUN: gerbil-opt %S/Inputs/block.mlir --pass-pipeline='builtin.module(func.func(gerbil-group-qkv,gerbil-fuse-rope-kv-write))' | FileCheck %s
// RUN: gerbil-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(gerbil-group-qkv,gerbil-fuse-rope-kv-write))' | FileCheck %s --check-prefix=OTHER

// Before (the output of gerbil-group-qkv): the group yields q, k, v; RoPE of q and k and the kv_append
// follow outside. After: they are the group's epilogue, it takes the position and yields the rotated q,
// which the attention reads.
// CHECK-LABEL: func.func @forward
// CHECK: %[[G:.*]] = gerbil.dispatch "linear_qkv"({{.*}}, %arg1) grid {{.*}} -> tensor<?x8xf32> {
// CHECK-NEXT: ^bb0({{.*}}, %[[POS:.*]]: index):
// CHECK: %[[QB:.*]] = gerbil.add
// CHECK-NEXT: %[[K:.*]] = gerbil.matmul
// CHECK-NEXT: %[[V:.*]] = gerbil.matmul
// CHECK-NEXT: %[[QR:.*]] = gerbil.rope %[[QB]], %[[POS]] {{.*}}num_heads = 2
// CHECK-NEXT: %[[KR:.*]] = gerbil.rope %[[K]], %[[POS]] {{.*}}num_heads = 1
// CHECK-NEXT: gerbil.kv_append %[[KR]], %[[V]], %[[POS]] into @kv_cache.0
// CHECK-NEXT: gerbil.yield %[[QR]] : tensor<?x8xf32>
// CHECK-NOT: gerbil.rope
// CHECK-NOT: gerbil.kv_append
// CHECK: gerbil.attention %[[G]], %arg1 over @kv_cache.0

// -----

// Without RoPE (learned positions) the kv_append alone moves in.
// OTHER-LABEL: func.func @no_rope
// OTHER: %[[G:.*]] = gerbil.dispatch "linear_qkv"(%arg0, %arg1, %arg2, %arg3, %arg4)
// OTHER: gerbil.kv_append
// OTHER-NEXT: gerbil.yield
// OTHER: gerbil.attention %[[G]]
module {
  gerbil.kv_cache @kv_cache.0 {head_dim = 4 : i64, layer = 0 : i64, num_kv_heads = 1 : i64}
  func.func @no_rope(%x: tensor<?x8xf32>, %wq: tensor<8x8xf32>, %wk: tensor<4x8xf32>, %wv: tensor<4x8xf32>, %pos: index) -> tensor<?x8xf32> {
    %q = gerbil.matmul %x, %wq : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    %k = gerbil.matmul %x, %wk : (tensor<?x8xf32>, tensor<4x8xf32>) -> tensor<?x4xf32>
    %v = gerbil.matmul %x, %wv : (tensor<?x8xf32>, tensor<4x8xf32>) -> tensor<?x4xf32>
    gerbil.kv_append %k, %v, %pos into @kv_cache.0 : tensor<?x4xf32>, tensor<?x4xf32>
    %a = gerbil.attention %q, %pos over @kv_cache.0 {num_heads = 2 : i64, num_kv_heads = 1 : i64, head_dim = 4 : i64, scale = 0.5} : (tensor<?x8xf32>, index) -> tensor<?x8xf32>
    return %a : tensor<?x8xf32>
  }
}

// -----

// A per-head norm of k between the projection and RoPE (Qwen3's k_norm) keeps RoPE and the cache write
// outside: the group still yields q, k and v.
// OTHER-LABEL: func.func @k_norm
// OTHER: %[[G:.*]]:3 = gerbil.dispatch "linear_qkv"
// OTHER-NOT: gerbil.kv_append
// OTHER: gerbil.yield
// OTHER: %[[KN:.*]] = gerbil.rms_norm %[[G]]#1
// OTHER: gerbil.rope %[[G]]#0
// OTHER: %[[KR:.*]] = gerbil.rope %[[KN]]
// OTHER: gerbil.kv_append %[[KR]], %[[G]]#2
module {
  gerbil.kv_cache @kv_cache.0 {head_dim = 4 : i64, layer = 0 : i64, num_kv_heads = 1 : i64}
  func.func @k_norm(%x: tensor<?x8xf32>, %wq: tensor<8x8xf32>, %wk: tensor<4x8xf32>, %wv: tensor<4x8xf32>, %gk: tensor<4xf32>, %pos: index) -> tensor<?x8xf32> {
    %q = gerbil.matmul %x, %wq : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    %k = gerbil.matmul %x, %wk : (tensor<?x8xf32>, tensor<4x8xf32>) -> tensor<?x4xf32>
    %v = gerbil.matmul %x, %wv : (tensor<?x8xf32>, tensor<4x8xf32>) -> tensor<?x4xf32>
    %kn = gerbil.rms_norm %k, %gk {eps = 1.0e-6} : (tensor<?x4xf32>, tensor<4xf32>) -> tensor<?x4xf32>
    %qr = gerbil.rope %q, %pos {num_heads = 2 : i64, head_dim = 4 : i64, rotary_dim = 4 : i64, inv_freq = array<f64: 1.0, 0.01>, attention_scaling = 1.0} : tensor<?x8xf32>
    %kr = gerbil.rope %kn, %pos {num_heads = 1 : i64, head_dim = 4 : i64, rotary_dim = 4 : i64, inv_freq = array<f64: 1.0, 0.01>, attention_scaling = 1.0} : tensor<?x4xf32>
    gerbil.kv_append %kr, %v, %pos into @kv_cache.0 : tensor<?x4xf32>, tensor<?x4xf32>
    %a = gerbil.attention %qr, %pos over @kv_cache.0 {num_heads = 2 : i64, num_kv_heads = 1 : i64, head_dim = 4 : i64, scale = 0.5} : (tensor<?x8xf32>, index) -> tensor<?x8xf32>
    return %a : tensor<?x8xf32>
  }
}
