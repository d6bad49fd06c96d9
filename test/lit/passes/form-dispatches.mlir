// RUN: gerbil-opt %S/Inputs/block.mlir --pass-pipeline='builtin.module(func.func(gerbil-form-dispatches))' | FileCheck %s

// Every computation becomes one dispatch with its kernel family, workgroup and grid as a function of T.
// CHECK-DAG: #[[TOKENS:.*]] = affine_map<()[s0] -> (s0, 1, 1)>
// CHECK-DAG: #[[ROWS:.*]] = affine_map<()[s0] -> (1, s0, 1)>
// CHECK-DAG: #[[QPROJ:.*]] = affine_map<()[s0] -> (1, s0 ceildiv 64, 1)>
// CHECK-DAG: #[[HEADS:.*]] = affine_map<()[s0] -> (2, s0 ceildiv 16, 1)>
// CHECK-LABEL: func.func @forward
// CHECK: %[[E:.*]] = gerbil.weight_ref @embed_tokens.weight
// CHECK: %[[H:.*]] = gerbil.dispatch "embedding"(%arg0, %[[E]]) grid #[[TOKENS]] workgroup [64, 1, 1]
// CHECK-NEXT: ^bb0(%[[IDS:.*]]: tensor<?xi32>, %[[TABLE:.*]]: tensor<16x8xf32>):
// CHECK-NEXT: %[[R:.*]] = gerbil.embedding %[[IDS]], %[[TABLE]]
// CHECK-NEXT: gerbil.yield %[[R]] : tensor<?x8xf32>
// CHECK: gerbil.dispatch "rms_norm"(%[[H]], %{{.*}}) grid #[[ROWS]]
// CHECK: gerbil.dispatch "matmul"(%{{.*}}) grid #[[QPROJ]] workgroup [256, 1, 1]
// CHECK: gerbil.dispatch "add"(%{{.*}}) grid #[[ROWS]] workgroup [256, 1, 1]
// CHECK: gerbil.dispatch "rope"
// CHECK: gerbil.dispatch "kv_append"(%{{.*}}, %{{.*}}, %arg1) grid #[[TOKENS]]
// CHECK-NEXT: ^bb0
// CHECK-NEXT: gerbil.kv_append {{.*}} into @kv_cache.0
// CHECK: gerbil.dispatch "attention"(%{{.*}}, %arg1) grid #[[HEADS]] workgroup [128, 1, 1]
// CHECK: %[[LOGITS:.*]] = gerbil.dispatch "matmul"
// CHECK: return %[[LOGITS]]
// No computation is left outside a dispatch.
// CHECK-NOT: gerbil.matmul {{.*}}-> tensor<?x16xf32>{{$}}
