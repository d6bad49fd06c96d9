// RUN: gerbil-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(gerbil-group-gate-up))' | FileCheck %s

// Before: gate and up projections of the same input and norm, silu(gate) * up. After: one
// "linear_gate_up" dispatch holds gate, its bias, up, silu and mul, and yields the product alone.
// CHECK-LABEL: func.func @mlp
// CHECK: %[[M:.*]] = gerbil.dispatch "linear_gate_up"(%arg0, %arg1, %arg3, %arg5, %arg2)
// CHECK-SAME: decode_grid = #{{.*}}, decode_workgroup = array<i64: 128, 1, 1>
// CHECK-SAME: -> tensor<?x16xf32>
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<?x8xf32>, %[[WG:.*]]: tensor<16x8xf32>, %[[G:.*]]: tensor<8xf32>, %[[B:.*]]: tensor<16xf32>, %[[WU:.*]]: tensor<16x8xf32>):
// CHECK-NEXT: %[[GATE:.*]] = gerbil.linear %[[X]], %[[WG]] norm(%[[G]])
// CHECK-NEXT: %[[GB:.*]] = gerbil.add %[[GATE]], %[[B]]
// CHECK-NEXT: %[[UP:.*]] = gerbil.linear %[[X]], %[[WU]] norm(%[[G]])
// CHECK-NEXT: %[[ACT:.*]] = gerbil.silu %[[GB]]
// CHECK-NEXT: %[[P:.*]] = gerbil.mul %[[ACT]], %[[UP]]
// CHECK-NEXT: gerbil.yield %[[P]]
// CHECK: return %[[M]]
func.func @mlp(%x: tensor<?x8xf32>, %wg: tensor<16x8xf32>, %wu: tensor<16x8xf32>, %g: tensor<8xf32>, %wd: tensor<8x16xf32>, %bg: tensor<16xf32>) -> tensor<?x16xf32> {
  %gate = gerbil.linear %x, %wg norm(%g) {eps = 1.0e-5} : (tensor<?x8xf32>, tensor<16x8xf32>, tensor<8xf32>) -> tensor<?x16xf32>
  %gb = gerbil.add %gate, %bg : (tensor<?x16xf32>, tensor<16xf32>) -> tensor<?x16xf32>
  %up = gerbil.linear %x, %wu norm(%g) {eps = 1.0e-5} : (tensor<?x8xf32>, tensor<16x8xf32>, tensor<8xf32>) -> tensor<?x16xf32>
  %act = gerbil.silu %gb : tensor<?x16xf32>
  %m = gerbil.mul %act, %up : tensor<?x16xf32>
  return %m : tensor<?x16xf32>
}

// -----

// The product's operands either way round; GELU as the activation.
// CHECK-LABEL: func.func @gelu_swapped
// CHECK: gerbil.dispatch "linear_gate_up"
// CHECK: gerbil.gelu
// CHECK-NEXT: gerbil.mul
func.func @gelu_swapped(%x: tensor<?x8xf32>, %wg: tensor<16x8xf32>, %wu: tensor<16x8xf32>) -> tensor<?x16xf32> {
  %gate = gerbil.matmul %x, %wg : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  %up = gerbil.matmul %x, %wu : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  %act = gerbil.gelu %gate {tanh_approximation = true} : tensor<?x16xf32>
  %m = gerbil.mul %up, %act : tensor<?x16xf32>
  return %m : tensor<?x16xf32>
}

// -----

// Not grouped: up is also used elsewhere, or gate and up read different norms.
// CHECK-LABEL: func.func @not_grouped
// CHECK-NOT: gerbil.dispatch
// CHECK: return
func.func @not_grouped(%x: tensor<?x8xf32>, %wg: tensor<16x8xf32>, %wu: tensor<16x8xf32>, %g1: tensor<8xf32>, %g2: tensor<8xf32>)
    -> (tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>) {
  %gate = gerbil.matmul %x, %wg : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  %up = gerbil.matmul %x, %wu : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  %act = gerbil.silu %gate : tensor<?x16xf32>
  %m = gerbil.mul %act, %up : tensor<?x16xf32>
  %gate2 = gerbil.linear %x, %wg norm(%g1) {eps = 1.0e-5} : (tensor<?x8xf32>, tensor<16x8xf32>, tensor<8xf32>) -> tensor<?x16xf32>
  %up2 = gerbil.linear %x, %wu norm(%g2) {eps = 1.0e-5} : (tensor<?x8xf32>, tensor<16x8xf32>, tensor<8xf32>) -> tensor<?x16xf32>
  %act2 = gerbil.silu %gate2 : tensor<?x16xf32>
  %m2 = gerbil.mul %act2, %up2 : tensor<?x16xf32>
  return %m, %up, %m2 : tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>
}
