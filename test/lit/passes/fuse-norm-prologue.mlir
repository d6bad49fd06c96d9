// RUN: gerbil-opt %S/Inputs/block.mlir --pass-pipeline='builtin.module(func.func(gerbil-fuse-norm-prologue))' | FileCheck %s

// The attention norm feeds only the q, k and v matmuls: it disappears and each of them normalises its own
// input (the embedding) with the norm's weight. The final norm goes into the LM head the same way.
// CHECK-LABEL: func.func @forward
// CHECK: %[[H:.*]] = gerbil.embedding
// CHECK: %[[G:.*]] = gerbil.weight_ref @layers.0.attn_norm.weight
// CHECK-NOT: gerbil.rms_norm %[[H]]
// CHECK: %[[Q:.*]] = gerbil.linear %[[H]], %{{.*}} norm(%[[G]]) {eps = 1.000000e-05 : f64} : (tensor<?x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
// The bias add stays: it is not a matmul.
// CHECK: gerbil.add %[[Q]], %{{.*}} : (tensor<?x8xf32>, tensor<8xf32>)
// CHECK: gerbil.linear %[[H]], %{{.*}} norm(%[[G]]) {{.*}} -> tensor<?x4xf32>
// CHECK: gerbil.linear %[[H]], %{{.*}} norm(%[[G]]) {{.*}} -> tensor<?x4xf32>
// CHECK: %[[R:.*]] = gerbil.add
// CHECK: %[[F:.*]] = gerbil.weight_ref @final_norm.weight
// CHECK: gerbil.linear %[[R]], %{{.*}} norm(%[[F]]) {{.*}} -> tensor<?x16xf32>
// CHECK-NOT: gerbil.rms_norm
