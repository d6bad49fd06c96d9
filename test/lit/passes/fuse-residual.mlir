// RUN: gerbil-opt %s --pass-pipeline='builtin.module(func.func(gerbil-fuse-residual))' | FileCheck %s

// add(h, matmul(x)) becomes one linear with h as its residual, whichever side the product is on; a product
// with another user, or a bias add, stays as it is.
// CHECK-LABEL: func.func @residuals
func.func @residuals(%h: tensor<?x8xf32>, %x: tensor<?x16xf32>, %w: tensor<8x16xf32>, %g: tensor<16xf32>, %b: tensor<8xf32>)
    -> (tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>) {
  // CHECK: %[[A:.*]] = gerbil.linear %arg1, %arg2 residual(%arg0) : (tensor<?x16xf32>, tensor<8x16xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  %p = gerbil.matmul %x, %w : (tensor<?x16xf32>, tensor<8x16xf32>) -> tensor<?x8xf32>
  %a = gerbil.add %h, %p : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  // CHECK: %[[B:.*]] = gerbil.linear %arg1, %arg2 norm(%arg3) residual(%[[A]]) {eps = 1.000000e-05 : f64}
  %q = gerbil.linear %x, %w norm(%g) {eps = 1.0e-5} : (tensor<?x16xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<?x8xf32>
  %c = gerbil.add %q, %a : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  // CHECK: %[[P:.*]] = gerbil.matmul %arg1, %arg2
  // CHECK: %[[D:.*]] = gerbil.add %[[B]], %[[P]]
  %r = gerbil.matmul %x, %w : (tensor<?x16xf32>, tensor<8x16xf32>) -> tensor<?x8xf32>
  %d = gerbil.add %c, %r : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  // CHECK: gerbil.add %[[P]], %arg4 : (tensor<?x8xf32>, tensor<8xf32>)
  %e = gerbil.add %r, %b : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  // CHECK: return %[[A]], %[[B]], %[[D]]
  return %a, %c, %d, %e : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>
}
