// RUN: gerbil-opt %s | FileCheck %s
// RUN: gerbil-opt %s | gerbil-opt | FileCheck %s
// RUN: gerbil-opt %s --mlir-print-op-generic | gerbil-opt | FileCheck %s

// CHECK: gerbil.weight @embed_tokens.weight : tensor<16x8xf32> {keys = ["model.embed_tokens.weight"]}
// CHECK: gerbil.weight @q.weight : tensor<8x8xf32> {keys = ["q"], slice = array<i64: 0, 8, 8>, transpose}
// CHECK: gerbil.kv_cache @kv0 {head_dim = 4 : i64, layer = 0 : i64, num_kv_heads = 2 : i64}
// CHECK-LABEL: func.func @forward
// CHECK: gerbil.embedding %{{.*}}, %{{.*}} : (tensor<?xi32>, tensor<16x8xf32>) -> tensor<?x8xf32>
// CHECK: gerbil.rms_norm
// CHECK: gerbil.matmul
// CHECK: gerbil.rope %{{.*}}, %{{.*}} {attention_scaling = 1.000000e+00 : f64, head_dim = 4 : i64, inv_freq = array<f64: 1.000000e+00, 1.000000e-02>, num_heads = 2 : i64, rotary_dim = 4 : i64} : tensor<?x8xf32>
// CHECK: gerbil.kv_append %{{.*}}, %{{.*}}, %{{.*}} into @kv0 : tensor<?x8xf32>, tensor<?x8xf32>
// CHECK: gerbil.attention %{{.*}}, %{{.*}} over @kv0 {head_dim = 4 : i64, num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 5.000000e-01 : f64, sliding_window = 4 : i64}
// CHECK: gerbil.silu
// CHECK: gerbil.mul
// CHECK: gerbil.add
// CHECK: gerbil.linear %{{.*}}, %{{.*}} norm(%{{.*}}) residual(%{{.*}}) {eps = 1.000000e-05 : f64}
// CHECK: gerbil.argmax %{{.*}} : tensor<?x16xf32> -> tensor<1xi32>
module {
  gerbil.weight @"embed_tokens.weight" : tensor<16x8xf32> {keys = ["model.embed_tokens.weight"]}
  gerbil.weight @"q.weight" : tensor<8x8xf32> {keys = ["q"], transpose, slice = array<i64: 0, 8, 8>}
  gerbil.weight @"norm.weight" : tensor<8xf32> {keys = ["norm"]}
  gerbil.kv_cache @kv0 {layer = 0 : i64, num_kv_heads = 2 : i64, head_dim = 4 : i64}
  func.func @forward(%ids: tensor<?xi32>, %pos: index) -> (tensor<?x16xf32>, tensor<1xi32>) {
    %e = gerbil.weight_ref @"embed_tokens.weight" : tensor<16x8xf32>
    %q = gerbil.weight_ref @"q.weight" : tensor<8x8xf32>
    %nw = gerbil.weight_ref @"norm.weight" : tensor<8xf32>
    %h = gerbil.embedding %ids, %e : (tensor<?xi32>, tensor<16x8xf32>) -> tensor<?x8xf32>
    %n = gerbil.rms_norm %h, %nw {eps = 1.0e-5} : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
    %x = gerbil.matmul %n, %q : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    %r = gerbil.rope %x, %pos {num_heads = 2 : i64, head_dim = 4 : i64, rotary_dim = 4 : i64, inv_freq = array<f64: 1.0, 0.01>, attention_scaling = 1.0} : tensor<?x8xf32>
    gerbil.kv_append %x, %x, %pos into @kv0 : tensor<?x8xf32>, tensor<?x8xf32>
    %a = gerbil.attention %r, %pos over @kv0 {num_heads = 2 : i64, num_kv_heads = 2 : i64, head_dim = 4 : i64, scale = 0.5, sliding_window = 4 : i64} : (tensor<?x8xf32>, index) -> tensor<?x8xf32>
    %s = gerbil.silu %a : tensor<?x8xf32>
    %m = gerbil.mul %s, %a : tensor<?x8xf32>
    %o = gerbil.add %m, %h : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    %l = gerbil.matmul %o, %e : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
    %lin = gerbil.linear %o, %q norm(%nw) residual(%o) {eps = 1.0e-5} : (tensor<?x8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    %t = gerbil.argmax %l : tensor<?x16xf32> -> tensor<1xi32>
    return %l, %t : tensor<?x16xf32>, tensor<1xi32>
  }
}
