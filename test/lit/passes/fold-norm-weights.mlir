// RUN: gerbil-opt %S/Inputs/block.mlir --pass-pipeline='builtin.module(func.func(gerbil-fuse-norm-prologue),gerbil-fold-norm-weights)' | FileCheck %s
// RUN: gerbil-opt %S/Inputs/block.mlir --pass-pipeline='builtin.module(func.func(gerbil-fuse-norm-prologue,gerbil-group-qkv),gerbil-fold-norm-weights)' | FileCheck %s
// RUN: gerbil-opt %S/Inputs/block.mlir --pass-pipeline='builtin.module(gerbil-fold-norm-weights)' | FileCheck %s --check-prefix=UNFUSED

// After the norm prologue fusion, q, k and v normalise with the attention norm's weight: it is folded into
// their matrices (alone, or grouped in one dispatch whose body reads them through block arguments). The
// embedding table is also the LM head (tied), read unnormalised by the embedding: it keeps its values, and
// the LM head its final-norm weight. Vectors (norm weights, biases) are never scaled.
// CHECK-LABEL: gerbil.weight @embed_tokens.weight
// CHECK-NOT: scale_columns_by
// CHECK: gerbil.weight @layers.0.attn_norm.weight : tensor<8xf32> {keys
// CHECK-NEXT: gerbil.weight @layers.0.attn.q_proj.weight : tensor<8x8xf32> {keys = ["q"], scale_columns_by = @layers.0.attn_norm.weight}
// CHECK-NEXT: gerbil.weight @layers.0.attn.k_proj.weight : tensor<4x8xf32> {keys = ["k"], scale_columns_by = @layers.0.attn_norm.weight}
// CHECK-NEXT: gerbil.weight @layers.0.attn.v_proj.weight : tensor<4x8xf32> {keys = ["v"], scale_columns_by = @layers.0.attn_norm.weight}
// CHECK-NOT: scale_columns_by
// CHECK: func.func @forward
// The graph itself is unchanged: the projections still name their norm.
// CHECK: norm(

// Without the fusion the matmuls read the norm's output, not a norm prologue: nothing is folded.
// UNFUSED-NOT: scale_columns_by
