// RUN: gerbil-opt %S/Inputs/block.mlir --pass-pipeline='builtin.module(func.func(gerbil-fuse-norm-prologue,gerbil-group-qkv,gerbil-fuse-rope-kv-write,gerbil-fuse-embedding))' | FileCheck %s
// RUN: gerbil-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(gerbil-fuse-embedding))' | FileCheck %s --check-prefix=OTHER

// Before: the embedding's rows are the grouped q/k/v projection's input (with its norm prologue) and the
// residual's. After: the group takes the ids in their place and the table last, looks the rows up first,
// and yields them after the rotated q; the residual reads that result.
// CHECK-LABEL: func.func @forward
// CHECK: %[[TABLE:.*]] = gerbil.weight_ref @embed_tokens.weight
// CHECK-NOT: gerbil.embedding
// CHECK: %[[G:.*]]:2 = gerbil.dispatch "linear_qkv"(%arg0, {{.*}}, %arg1, %[[TABLE]]) grid {{.*}} -> (tensor<?x8xf32>, tensor<?x8xf32>) {
// CHECK-NEXT: ^bb0(%[[IDS:[^:]*]]: tensor<?xi32>, {{.*}}, %[[T:[^:]*]]: tensor<16x8xf32>):
// CHECK-NEXT: %[[ROWS:.*]] = gerbil.embedding %[[IDS]], %[[T]]
// CHECK-NEXT: gerbil.linear %[[ROWS]], {{.*}} norm
// CHECK: gerbil.kv_append
// CHECK-NEXT: gerbil.yield %{{.*}}, %[[ROWS]] : tensor<?x8xf32>, tensor<?x8xf32>
// CHECK-NOT: gerbil.embedding
// CHECK: gerbil.attention %[[G]]#0
// CHECK-NEXT: gerbil.add %[[G]]#1

// -----

// Rows changed before the projection reads them (GPT-2's learned positions added) stay where they are.
// OTHER-LABEL: func.func @positions
// OTHER: gerbil.embedding
// OTHER-NEXT: %[[X:.*]] = gerbil.add
// OTHER-NEXT: gerbil.dispatch "linear_qkv"(%[[X]], %arg3)
module {
  func.func @positions(%ids: tensor<?xi32>, %t: tensor<16x8xf32>, %p: tensor<?x8xf32>, %wq: tensor<8x8xf32>) -> tensor<?x8xf32> {
    %h = gerbil.embedding %ids, %t : (tensor<?xi32>, tensor<16x8xf32>) -> tensor<?x8xf32>
    %x = gerbil.add %h, %p : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    %q = gerbil.dispatch "linear_qkv"(%x, %wq) grid affine_map<()[s0] -> (1, 1, 1)> workgroup [64, 1, 1] {decode_grid = affine_map<()[s0] -> (1, 1, 1)>, decode_workgroup = array<i64: 64, 1, 1>} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32> {
    ^bb0(%a: tensor<?x8xf32>, %w: tensor<8x8xf32>):
      %m = gerbil.matmul %a, %w : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
      gerbil.yield %m : tensor<?x8xf32>
    }
    return %q : tensor<?x8xf32>
  }
}

// -----

// A reader of the rows before the group (here the group comes last) keeps the embedding outside.
// OTHER-LABEL: func.func @read_before
// OTHER: %[[H:.*]] = gerbil.embedding
// OTHER: gerbil.add %[[H]], %[[H]]
// OTHER: gerbil.dispatch "linear_qkv"(%[[H]],
module {
  func.func @read_before(%ids: tensor<?xi32>, %t: tensor<16x8xf32>, %wq: tensor<8x8xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
    %h = gerbil.embedding %ids, %t : (tensor<?xi32>, tensor<16x8xf32>) -> tensor<?x8xf32>
    %d = gerbil.add %h, %h : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    %q = gerbil.dispatch "linear_qkv"(%h, %wq) grid affine_map<()[s0] -> (1, 1, 1)> workgroup [64, 1, 1] {decode_grid = affine_map<()[s0] -> (1, 1, 1)>, decode_workgroup = array<i64: 64, 1, 1>} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32> {
    ^bb0(%a: tensor<?x8xf32>, %w: tensor<8x8xf32>):
      %m = gerbil.matmul %a, %w : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
      gerbil.yield %m : tensor<?x8xf32>
    }
    return %d, %q : tensor<?x8xf32>, tensor<?x8xf32>
  }
}
