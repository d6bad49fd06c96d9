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

// A q/k/v group gets its prefill launch from the target: on nvidia with f16 weights one cooperative-matrix
// matmul over the three weights ("linear_qkv_coop": 64-wide tiles, one for each of q, k and v, and 64-token
// ones); its decode kernel stays. With f32 weights (or the generic target) prefill runs the ops one by one.
// RUN: gerbil-opt %S/Inputs/block.mlir --pass-pipeline='builtin.module(gerbil-assign-layout{dtype=f16},func.func(gerbil-group-qkv,gerbil-form-dispatches{target=nvidia}))' | FileCheck %s --check-prefix=COOP
// RUN: gerbil-opt %S/Inputs/block.mlir --pass-pipeline='builtin.module(gerbil-assign-layout{dtype=f32},func.func(gerbil-group-qkv,gerbil-form-dispatches{target=nvidia}))' | FileCheck %s --check-prefix=APART
// COOP: #[[PREFILL:map[0-9]*]] = affine_map<()[s0] -> (3, s0 ceildiv 64, 1)>
// COOP: gerbil.dispatch "linear_qkv_coop"({{.*}}) grid #[[PREFILL]] workgroup [128, 1, 1] {decode_grid = #{{.*}}, decode_workgroup = array<i64: 128, 1, 1>}
// APART: gerbil.dispatch "linear_qkv"(

// The decode attention's grid: the profile's aim (generic's 512 workgroups over the 2 query heads: 64 splits,
// the most) unless the pass knows the KV cache's positions (gerbilc passes --max-seq), to which it cuts the
// splits as codegen cuts its kernel's: 512 positions, 256 a workgroup of 8 warps, 2 splits.
// RUN: gerbil-opt %S/Inputs/block.mlir --pass-pipeline='builtin.module(func.func(gerbil-form-dispatches))' | FileCheck %s --check-prefix=AIM
// RUN: gerbil-opt %S/Inputs/block.mlir --pass-pipeline='builtin.module(func.func(gerbil-form-dispatches{max-seq=512}))' | FileCheck %s --check-prefix=CUT
// AIM: #[[DECODE:map[0-9]*]] = affine_map<()[s0] -> (2, 64, 1)>
// AIM: gerbil.dispatch "attention"({{.*}}decode_grid = #[[DECODE]],
// CUT: #[[DECODE:map[0-9]*]] = affine_map<()[s0] -> (2, 2, 1)>
// CUT: gerbil.dispatch "attention"({{.*}}decode_grid = #[[DECODE]],
