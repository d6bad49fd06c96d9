// RUN: gerbil-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(gerbil-fuse-logits-argmax))' | FileCheck %s

// Before: the LM head (the final norm in its prologue) and the argmax of its logits, both returned. After:
// one "linear_argmax" dispatch holds both and yields the logits and the token. Its decode grid is the gemv's:
// one workgroup for 8 rows of Qwen2.5-0.5B's vocabulary.
// CHECK-DAG: #[[GRID:.*]] = affine_map<()[s0] -> (18992, 1, 1)>
// CHECK-LABEL: func.func @lm_head
// CHECK: %[[G:.*]]:2 = gerbil.dispatch "linear_argmax"(%arg0, %arg1, %arg2) grid #[[GRID]] workgroup [128, 1, 1]
// CHECK-SAME: decode_grid = #[[GRID]], decode_workgroup = array<i64: 128, 1, 1>
// CHECK-SAME: -> (tensor<?x151936xf32>, tensor<1xi32>)
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<?x64xf32>, %[[W:.*]]: tensor<151936x64xf32>, %[[N:.*]]: tensor<64xf32>):
// CHECK-NEXT: %[[L:.*]] = gerbil.linear %[[X]], %[[W]] norm(%[[N]])
// CHECK-NEXT: %[[T:.*]] = gerbil.argmax %[[L]]
// CHECK-NEXT: gerbil.yield %[[L]], %[[T]]
// CHECK: return %[[G]]#0, %[[G]]#1
func.func @lm_head(%x: tensor<?x64xf32>, %w: tensor<151936x64xf32>, %g: tensor<64xf32>) -> (tensor<?x151936xf32>, tensor<1xi32>) {
  %logits = gerbil.linear %x, %w norm(%g) {eps = 1.0e-6} : (tensor<?x64xf32>, tensor<151936x64xf32>, tensor<64xf32>) -> tensor<?x151936xf32>
  %token = gerbil.argmax %logits : tensor<?x151936xf32> -> tensor<1xi32>
  return %logits, %token : tensor<?x151936xf32>, tensor<1xi32>
}

// -----

// A plain matmul (no norm) joins too.
// CHECK-DAG: #[[GRID:.*]] = affine_map<()[s0] -> (64, 1, 1)>
// CHECK-LABEL: func.func @matmul
// CHECK: gerbil.dispatch "linear_argmax"{{.*}}grid #[[GRID]]
// CHECK-NEXT: ^bb0
// CHECK-NEXT: gerbil.matmul
// CHECK-NEXT: gerbil.argmax
func.func @matmul(%x: tensor<?x64xf32>, %w: tensor<512x64xf32>) -> (tensor<?x512xf32>, tensor<1xi32>) {
  %logits = gerbil.matmul %x, %w : (tensor<?x64xf32>, tensor<512x64xf32>) -> tensor<?x512xf32>
  %token = gerbil.argmax %logits : tensor<?x512xf32> -> tensor<1xi32>
  return %logits, %token : tensor<?x512xf32>, tensor<1xi32>
}

// -----

// Logits that are not a projection's, or a projection with a residual epilogue (which the token-picking
// gemv does not take), keep their argmax as it is.
// CHECK-LABEL: func.func @not_a_projection
// CHECK-NOT: gerbil.dispatch
// CHECK: gerbil.argmax
func.func @not_a_projection(%x: tensor<?x512xf32>, %b: tensor<512xf32>) -> tensor<1xi32> {
  %logits = gerbil.add %x, %b : (tensor<?x512xf32>, tensor<512xf32>) -> tensor<?x512xf32>
  %token = gerbil.argmax %logits : tensor<?x512xf32> -> tensor<1xi32>
  return %token : tensor<1xi32>
}

// CHECK-LABEL: func.func @residual
// CHECK-NOT: gerbil.dispatch
// CHECK: gerbil.linear {{.*}} residual(
// CHECK-NEXT: gerbil.argmax
func.func @residual(%x: tensor<?x64xf32>, %w: tensor<512x64xf32>, %r: tensor<?x512xf32>) -> tensor<1xi32> {
  %logits = gerbil.linear %x, %w residual(%r) : (tensor<?x64xf32>, tensor<512x64xf32>, tensor<?x512xf32>) -> tensor<?x512xf32>
  %token = gerbil.argmax %logits : tensor<?x512xf32> -> tensor<1xi32>
  return %token : tensor<1xi32>
}
