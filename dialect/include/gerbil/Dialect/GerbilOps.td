// Ops of the gerbil dialect. Activations are `tensor<?xNxf32>` (T rows); weights are static tensors.
#ifndef GERBIL_OPS_TD
#define GERBIL_OPS_TD

include "gerbil/Dialect/GerbilDialect.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

def Gerbil_Activation : TensorRankOf<[F32], [2]>;
def Gerbil_TokenIds : TensorRankOf<[I32], [1]>;
def Gerbil_Weight : TensorOf<[F32, F16, BF16]>;

//===----------------------------------------------------------------------===//
// State: weights and KV caches
//===----------------------------------------------------------------------===//

def Gerbil_WeightOp : Gerbil_Op<"weight", [Symbol, HasParent<"::mlir::ModuleOp">,
                                            DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "A weight of the model, loaded from the checkpoint";
  let description = [{
    `sym_name` is the canonical name. `keys` are the safetensors names it may have in a checkpoint (first is
    the usual one). `type` is the tensor as the graph sees it; `transpose` says the checkpoint stores it
    [in, out] (GPT-2 Conv1D); `slice = [dim, start, length]` takes part of a fused tensor (after transpose).
    The layout pass sets `device_dtype`: the element type the runtime converts it to at load.
    `scale_columns_by` (gerbil-fold-norm-weights) names a vector of the matrix's row length whose values
    multiply its columns on the device: the weight of the RMSNorm before every projection that reads this
    matrix, which their kernels then leave out. The graph's values are unchanged by it.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, TypeAttrOf<Gerbil_Weight>:$type, StrArrayAttr:$keys,
                       UnitAttr:$transpose, OptionalAttr<DenseI64ArrayAttr>:$slice,
                       OptionalAttr<TypeAttr>:$device_dtype,
                       OptionalAttr<FlatSymbolRefAttr>:$scale_columns_by);
  let assemblyFormat = "$sym_name `:` $type attr-dict";
  let hasVerifier = 1;
}

def Gerbil_WeightRefOp : Gerbil_Op<"weight_ref",
    [Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Reads a weight symbol as a tensor value";
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs Gerbil_Weight:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def Gerbil_KVCacheOp : Gerbil_Op<"kv_cache", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "The key/value cache of one attention layer (layout LHSd)";
  let description = [{
    `element_type` is the type the cache holds on the device: f32 (also when absent) or f16, which
    gerbil-assign-layout chooses (its `kv-dtype`); the kernels that read and write it compute in f32.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, I64Attr:$layer, I64Attr:$num_kv_heads, I64Attr:$head_dim,
                       OptionalAttr<TypeAttr>:$element_type);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    // The element type on the device: element_type, f32 where it is absent.
    ::mlir::Type deviceElementType();
  }];
}

//===----------------------------------------------------------------------===//
// Graph ops
//===----------------------------------------------------------------------===//

def Gerbil_EmbeddingOp : Gerbil_Op<"embedding", [Pure]> {
  let summary = "Rows of the embedding table for each token id";
  let arguments = (ins Gerbil_TokenIds:$ids, Gerbil_Weight:$table);
  let results = (outs Gerbil_Activation:$result);
  let assemblyFormat = "$ids `,` $table attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Gerbil_PositionEmbeddingOp : Gerbil_Op<"position_embedding", [Pure]> {
  let summary = "Learned position embeddings of positions [start_pos, start_pos + T)";
  let arguments = (ins Gerbil_TokenIds:$ids, Gerbil_Weight:$table, Index:$start_pos);
  let results = (outs Gerbil_Activation:$result);
  let assemblyFormat = "$ids `,` $table `,` $start_pos attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Gerbil_RMSNormOp : Gerbil_Op<"rms_norm", [Pure, SameOperandsAndResultElementType]> {
  let summary = "RMSNorm over groups of the last dimension";
  let description = [{
    y = x / sqrt(mean(x^2) + eps) * weight, over each group of `weight`'s size within a row: the whole row
    (a layer norm) or each head (Qwen3's q_norm / k_norm).
  }];
  let arguments = (ins Gerbil_Activation:$input, Gerbil_Weight:$weight, F64Attr:$eps);
  let results = (outs Gerbil_Activation:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Gerbil_LayerNormOp : Gerbil_Op<"layer_norm", [Pure]> {
  let summary = "LayerNorm with weight and bias over the last dimension";
  let arguments = (ins Gerbil_Activation:$input, Gerbil_Weight:$weight, Gerbil_Weight:$bias, F64Attr:$eps);
  let results = (outs Gerbil_Activation:$result);
  let assemblyFormat = "$input `,` $weight `,` $bias attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Gerbil_MatMulOp : Gerbil_Op<"matmul", [Pure]> {
  let summary = "x · Wᵀ: [T, K] × [N, K] → [T, N]";
  let arguments = (ins Gerbil_Activation:$input, Gerbil_Weight:$weight);
  let results = (outs Gerbil_Activation:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Gerbil_LinearOp : Gerbil_Op<"linear", [Pure, AttrSizedOperandSegments]> {
  let summary = "x · Wᵀ with an optional RMSNorm prologue and residual epilogue (made by the fusion passes)";
  let description = [{
    result = (norm ? rms_norm(input, norm, eps) : input) · weightᵀ + (residual ? residual : 0): one kernel
    that reads the weights once, normalises its input rows itself and adds the residual as it writes.
  }];
  let arguments = (ins Gerbil_Activation:$input, Gerbil_Weight:$weight, Optional<Gerbil_Weight>:$norm,
                       Optional<Gerbil_Activation>:$residual, OptionalAttr<F64Attr>:$eps);
  let results = (outs Gerbil_Activation:$result);
  let assemblyFormat = [{
    $input `,` $weight (`norm` `(` $norm^ `)`)? (`residual` `(` $residual^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Gerbil_AddOp : Gerbil_Op<"add", [Pure]> {
  let summary = "Elementwise sum; a rank-1 rhs (a bias) is broadcast over the rows";
  let arguments = (ins Gerbil_Activation:$lhs, AnyRankedTensor:$rhs);
  let results = (outs Gerbil_Activation:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Gerbil_MulOp : Gerbil_Op<"mul", [Pure, SameOperandsAndResultType]> {
  let summary = "Elementwise product";
  let arguments = (ins Gerbil_Activation:$lhs, Gerbil_Activation:$rhs);
  let results = (outs Gerbil_Activation:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def Gerbil_SiLUOp : Gerbil_Op<"silu", [Pure, SameOperandsAndResultType]> {
  let summary = "x · sigmoid(x)";
  let arguments = (ins Gerbil_Activation:$input);
  let results = (outs Gerbil_Activation:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Gerbil_GELUOp : Gerbil_Op<"gelu", [Pure, SameOperandsAndResultType]> {
  let summary = "GELU, exact (erf) or with the tanh approximation (gelu_new)";
  let arguments = (ins Gerbil_Activation:$input, BoolAttr:$tanh_approximation);
  let results = (outs Gerbil_Activation:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Gerbil_RoPEOp : Gerbil_Op<"rope", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "Rotary position embedding of each head (rotate-half form)";
  let description = [{
    Rotates the first `rotary_dim` dims of each of `num_heads` heads of `head_dim`, for the token at
    position start_pos + t, by angles position · inv_freq[i]; cos and sin are multiplied by
    `attention_scaling`. `inv_freq` holds rotary_dim / 2 frequencies with any rope scaling applied.
  }];
  let arguments = (ins Gerbil_Activation:$input, Index:$start_pos, I64Attr:$num_heads, I64Attr:$head_dim,
                       I64Attr:$rotary_dim, DenseF64ArrayAttr:$inv_freq, F64Attr:$attention_scaling);
  let results = (outs Gerbil_Activation:$result);
  let assemblyFormat = "$input `,` $start_pos attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Gerbil_KVAppendOp : Gerbil_Op<"kv_append",
    [MemoryEffects<[MemWrite]>, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Writes the keys and values of T tokens into the cache at positions [start_pos, start_pos + T)";
  let arguments = (ins Gerbil_Activation:$keys, Gerbil_Activation:$values, Index:$start_pos,
                       FlatSymbolRefAttr:$cache);
  let assemblyFormat = "$keys `,` $values `,` $start_pos `into` $cache attr-dict `:` type($keys) `,` type($values)";
}

def Gerbil_AttentionOp : Gerbil_Op<"attention",
    [MemoryEffects<[MemRead]>, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Causal grouped-query attention of T queries over the cache";
  let description = [{
    Query t (position p = start_pos + t) of head h attends to the cached keys of kv head
    h / (num_heads / num_kv_heads) at positions [max(0, p - sliding_window + 1), p], with scores scaled
    by `scale` and a softmax. The cache must already hold those positions (gerbil.kv_append).
  }];
  let arguments = (ins Gerbil_Activation:$queries, Index:$start_pos, FlatSymbolRefAttr:$cache,
                       I64Attr:$num_heads, I64Attr:$num_kv_heads, I64Attr:$head_dim, F64Attr:$scale,
                       OptionalAttr<I64Attr>:$sliding_window);
  let results = (outs Gerbil_Activation:$result);
  let assemblyFormat = "$queries `,` $start_pos `over` $cache attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Gerbil_ArgmaxOp : Gerbil_Op<"argmax", [Pure]> {
  let summary = "The greedy next token: the index of the largest logit of the last row";
  let description = [{
    Ties go to the lowest index, as torch.argmax. On the GPU this is what lets decode steps follow each
    other without the host: the token becomes the next step's input.
  }];
  let arguments = (ins Gerbil_Activation:$logits);
  let results = (outs TensorRankOf<[I32], [1]>:$token);
  let assemblyFormat = "$logits attr-dict `:` type($logits) `->` type($token)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Dispatches: one kernel launch each
//===----------------------------------------------------------------------===//

def Gerbil_DispatchOp : Gerbil_Op<"dispatch",
    [IsolatedFromAbove, SingleBlockImplicitTerminator<"YieldOp">, RecursiveMemoryEffects]> {
  let summary = "One kernel launch: the ops of its body run as one compute shader";
  let description = [{
    `kernel` names the kernel family, `grid` gives the workgroup counts as an affine map of the token count
    T (the one symbol), `workgroup` the workgroup size. The body's block arguments are the operands.
    `decode_grid` and `decode_workgroup`, where present, are the grid and workgroup size of the kernel's
    one-token variant, which decode steps run.
    Memory planning sets `arena_offsets`: where each result lives in the activation arena.

    A dispatch may hold several ops (a fusion group: grouped projections with their epilogues, made by the
    grouping passes). Decode runs it as one kernel; prefill runs each op of the body as a launch of its own,
    and memory planning gives the values passed between them `internal_offsets` (one per op result of the
    body that the yield does not return, in body order) — except that a group whose kernel ends in "_coop"
    runs its projections (with their bias adds and, for gate/up, the activation product) as one launch of
    `grid` and `workgroup`, and the rest of its body (RoPE, the KV-cache write) op by op after it.

    `prefetch_weights` and `prefetch_bytes` (gerbil-prefetch-weights), on a dispatch with a decode variant:
    its decode launch also reads the first `prefetch_bytes[i]` bytes of weight `prefetch_weights[i]` into the
    GPU's L2 cache, in workgroups of its own beside the kernel's, for the launches after it that read them:
    every 16-byte word, or with `prefetch_strides[i]` one every that many bytes (to cache its pages' address
    translations rather than its data). With `prefetch_beside` those reads are a launch of their own beside
    the kernel's, with no barrier between them, instead of workgroups of the kernel's launch.
  }];
  let arguments = (ins Variadic<AnyType>:$operands, StrAttr:$kernel, AffineMapAttr:$grid,
                       DenseI64ArrayAttr:$workgroup, OptionalAttr<DenseI64ArrayAttr>:$arena_offsets,
                       OptionalAttr<AffineMapAttr>:$decode_grid,
                       OptionalAttr<DenseI64ArrayAttr>:$decode_workgroup,
                       OptionalAttr<DenseI64ArrayAttr>:$internal_offsets,
                       OptionalAttr<SymbolRefArrayAttr>:$prefetch_weights,
                       OptionalAttr<DenseI64ArrayAttr>:$prefetch_bytes,
                       OptionalAttr<DenseI64ArrayAttr>:$prefetch_strides,
                       UnitAttr:$prefetch_beside);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $kernel `(` $operands `)` `grid` $grid `workgroup` $workgroup attr-dict `:` functional-type($operands, $results) $body
  }];
  let hasVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [
    OpBuilder<(ins "::mlir::TypeRange":$results, "::mlir::ValueRange":$operands, "::llvm::StringRef":$kernel,
                   "::mlir::AffineMap":$grid, "::llvm::ArrayRef<int64_t>":$workgroup)>
  ];
}

def Gerbil_YieldOp : Gerbil_Op<"yield", [Pure, Terminator, HasParent<"DispatchOp">]> {
  let summary = "Returns the results of a dispatch body";
  let arguments = (ins Variadic<AnyType>:$values);
  let builders = [OpBuilder<(ins), [{ /* nothing */ }]>];
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

#endif // GERBIL_OPS_TD
