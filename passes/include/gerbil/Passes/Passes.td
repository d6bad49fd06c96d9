// The gerbil pass pipeline: verification, layout, dispatch formation, memory planning.
#ifndef GERBIL_PASSES_TD
#define GERBIL_PASSES_TD

include "mlir/Pass/PassBase.td"

def GerbilVerifyModel : Pass<"gerbil-verify-model", "::mlir::ModuleOp"> {
  let summary = "Checks model-level invariants the op verifiers cannot see";
  let description = [{
    One `func.func @forward(tensor<?xi32>, index) -> tensor<?xVxf32>`; every weight and KV cache used;
    each cache appended to before it is attended over; with `dispatched`, no computation left outside a
    `gerbil.dispatch`.
  }];
  let options = [
    Option<"dispatched", "dispatched", "bool", "false",
           "Also require every computation to be inside a gerbil.dispatch">
  ];
}

def GerbilAssignLayout : Pass<"gerbil-assign-layout", "::mlir::ModuleOp"> {
  let summary = "Chooses the device dtype and layout of every weight";
  let description = [{
    Sets `device_dtype` on each `gerbil.weight`: the element type the runtime converts the checkpoint
    tensor to at load. Norm weights and biases stay f32 (they are small and precision-sensitive); matrices
    take the requested dtype. Sets `element_type` on each `gerbil.kv_cache`: `kv-dtype`.
  }];
  let options = [
    Option<"dtype", "dtype", "std::string", "\"f32\"", "Device dtype of weight matrices: f32 or f16">,
    Option<"kvDtype", "kv-dtype", "std::string", "\"f32\"", "What the KV cache holds: f32 or f16">
  ];
}

def GerbilFuseNormPrologue : Pass<"gerbil-fuse-norm-prologue", "::mlir::func::FuncOp"> {
  let summary = "Fuses an RMSNorm into the prologue of the matmuls that read it";
  let description = [{
    An RMSNorm over whole rows whose every user is a gerbil.matmul is removed; each matmul becomes a
    gerbil.linear with the norm's weight and eps, normalising its input rows itself.
  }];
}

def GerbilFuseResidual : Pass<"gerbil-fuse-residual", "::mlir::func::FuncOp"> {
  let summary = "Fuses a residual add into the epilogue of the projection it adds";
  let description = [{
    add(h, p) where p is a gerbil.matmul or gerbil.linear used only by the add becomes one gerbil.linear
    with h as its residual.
  }];
}

def GerbilGroupQKV : Pass<"gerbil-group-qkv", "::mlir::func::FuncOp"> {
  let summary = "Groups the q, k and v projections of one attention into one dispatch";
  let description = [{
    The three projections (gerbil.matmul or gerbil.linear, with the same input and the same norm prologue)
    whose results reach one gerbil.attention's queries and the keys and values its cache is appended with
    (through bias adds, RMSNorms and RoPE) become one `gerbil.dispatch "linear_qkv"`, with their bias adds.
    The body holds the projections in the order q, k, v, each followed by its bias add; the dispatch yields
    q, k and v. Decode runs it as one gemv over the three weights (kept as separate bindings); prefill runs
    the body op by op.
  }];
}

def GerbilFuseRopeKVWrite : Pass<"gerbil-fuse-rope-kv-write", "::mlir::func::FuncOp"> {
  let summary = "Moves RoPE and the KV-cache write into the epilogue of a grouped q/k/v projection";
  let description = [{
    When the k and v of a `linear_qkv` dispatch go only to one gerbil.kv_append (k through a gerbil.rope)
    and its q only to a gerbil.rope of the same frequencies, the ropes and the kv_append move into the
    dispatch, which then yields the rotated q alone: decode rotates q and k and writes k and v into the cache
    as it writes the projections. Models without RoPE move the kv_append alone.
  }];
}

def GerbilFuseEmbedding : Pass<"gerbil-fuse-embedding", "::mlir::func::FuncOp"> {
  let summary = "Moves the token embedding into the first grouped q/k/v projection that reads its rows";
  let description = [{
    A gerbil.embedding whose rows are the input of a `linear_qkv` dispatch (its first operand, read by its
    projections and their norm prologue) moves into that dispatch, which then takes the token ids and the
    table in its place and also yields the rows (as its last result) for the embedding's other readers (the
    residual of the layer's o projection). Decode reads the token's row of the table as the gemv's input and
    writes it out, one launch a token fewer; prefill runs the embedding first, as its own launch. Embeddings
    whose rows are changed first (GPT-2's positions added) are left alone. Only with gerbilc
    --fuse-embedding: on the H200 the decode wall time did not move (BENCHMARKS.md, 2026-12-05).
  }];
}

def GerbilGroupGateUp : Pass<"gerbil-group-gate-up", "::mlir::func::FuncOp"> {
  let summary = "Groups a gated MLP's gate and up projections, with act(gate) * up, into one dispatch";
  let description = [{
    mul(act(gate(x)), up(x)), with act a gerbil.silu or gerbil.gelu, the two projections of the same input
    and norm prologue (each with an optional bias add) used only there, becomes one
    `gerbil.dispatch "linear_gate_up"`: gate, its bias, up, its bias, the activation and the product, in
    that order; it yields the product. Decode computes both projections in one gemv and writes
    act(gate) * up; prefill runs the body op by op.
  }];
}

def GerbilFuseLogitsArgmax : Pass<"gerbil-fuse-logits-argmax", "::mlir::func::FuncOp"> {
  let summary = "Groups the logits projection with the greedy argmax of its logits into one dispatch";
  let description = [{
    argmax(p), with p a gerbil.matmul or gerbil.linear without a residual (the LM head, with the final norm
    in its prologue), becomes one `gerbil.dispatch "linear_argmax"` that yields the logits and the token:
    decode computes the logits row and picks the token in one gemv, instead of a launch of its own after it;
    prefill runs the two ops one by one. Only with gerbilc --fuse-logits-argmax: on the H200 the gemv with the
    argmax took longer than the two launches apart (docs/decode-latency.md).
  }];
}

def GerbilFoldNormWeights : Pass<"gerbil-fold-norm-weights", "::mlir::ModuleOp"> {
  let summary = "Folds an RMSNorm's weight into the matrices of the projections that normalise with it";
  let description = [{
    rms_norm(x, g) · Wᵀ = (x / rms(x)) · (W · diag(g))ᵀ: a matrix whose every reader is a `gerbil.linear`
    (alone or in a fusion group) with the same norm prologue gets `scale_columns_by` that norm's weight, and
    the runtime multiplies its columns by it at load; those projections' kernels then normalise without
    loading the norm weight (on the H200 its loads and products cost the 8B's decode gate/up 9%). A matrix
    read otherwise (a tied embedding: the LM head of Qwen2.5-0.5B reads the embedding table) is left as it is.
  }];
}

def GerbilFormDispatches : Pass<"gerbil-form-dispatches", "::mlir::func::FuncOp"> {
  let summary = "Wraps every computation into a gerbil.dispatch: one kernel launch each";
  let description = [{
    Each compute op becomes a `gerbil.dispatch` whose body holds the op, with the kernel family, the
    workgroup size and the grid as an affine map of the token count T chosen by the kernel catalog.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"generic\"",
           "Target profile (generic, nvidia): which kernel families the catalog chooses">,
    Option<"maxSequence", "max-seq", "int64_t", /*default=*/"0",
           "The KV cache's positions (gerbilc --max-seq), to which the decode attention's splits are cut "
           "as codegen cuts them; 0: not known">
  ];
}

def GerbilPrefetchWeights : Pass<"gerbil-prefetch-weights", "::mlir::func::FuncOp"> {
  let summary = "Has each decode attention load the next projections' weights into the L2 cache";
  let description = [{
    A decode step's attention reads a few hundred KB of cache on a few dozen workgroups and takes 7–13 µs
    on an H200, while the memory system idles; the o projection after it would take 8.6 µs instead of 12.5
    (Llama-3-8B) with its weights in the L2 (sweep au). Each attention dispatch with a decode variant gets
    `prefetch_weights` / `prefetch_bytes`: the matrices the next `data-launches` dispatches that read
    matrices read, in their order, up to `bytes` in all and at most 4, stopping at the next attention. A
    dispatch whose matrices do not all fit gets an equal share of what is left for each, from their first
    rows (the first workgroups read them). With `page-bytes`, it also reads one 16-byte word every
    `page-bytes` of each of those matrices that it does not load whole (at most 8 bindings in all): their
    address translations are then cached when the launches after it stream them (on an H200 the 8B's
    gemvs ran 5-12% slower with their weights spread over 16 GiB than over 512 MiB, sweep av). The
    attributes record, for each binding, the bytes from the matrix's start and the stride (16: every word).
    Where it pays, measured on the H200: the attention's own loads wait behind the prefetch's, about as
    long as the prefetched bytes take to stream; a mid-sized launch saves no more than that (Llama-3.2-1B's
    o, 8 MiB: -0.8 µs for +3.0 of attention), so launches over `max-launch-bytes` get no data; small ones
    cost the attention little and save their first loads' trip to memory (Qwen2.5-0.5B's o, 1.6 MiB: 5.7
    -> 4.7 µs for +0.2). A model whose weights stay within
    the address translations' reach (sweep ax: none lost at 3.5 GiB) gets no page reads under
    `min-model-bytes`. With `spread-pages`, the ~200 page walks a layer of the 8B takes are spread over the
    launches: every decode gemv (a linear or grouped projection) touches the pages of the next launch that
    reads matrices, unless an attention comes first, and an attention only those of the launch after it.
    A model of at least `large-model-bytes` of weights gets `large-model-budget` instead of `bytes`, with no
    `max-launch-bytes` limit, read by a launch beside the attention (`prefetch_beside`): Llama-3-8B's
    attention (11 µs on an H200, 16 workgroups of 2 query heads) leaves the memory idle long enough for 8 MiB
    of its o's 32, which a launch of its own reads without holding back the attention's workgroups (16 MiB
    in the attention's own launch lost 1.4% of decode on the H200 at 3b61124; 8 MiB beside it gained 0.3%
    on the H200 and 0.5% on H100s at a48cac9, where 12, 16 and 24 MiB gained less or lost).
  }];
  let options = [
    Option<"bytes", "bytes", "int64_t", "0", "Most weight bytes one attention launch prefetches">,
    Option<"pageBytes", "page-bytes", "int64_t", "0",
           "Stride of the words read to cache address translations (a multiple of 16; 0: none)">,
    Option<"dataLaunches", "data-launches", "int64_t", "1",
           "How many of the launches after it may have their data prefetched (on an H200 loading the MLP's "
           "weights too made the small models' attention slower than what it saved)">,
    Option<"maxLaunchBytes", "max-launch-bytes", "int64_t", "0",
           "Most bytes of matrices a launch reads for its data to be prefetched (0: no limit)">,
    Option<"minModelBytes", "min-model-bytes", "int64_t", "0",
           "Least bytes of weights the model has for page words to be read">,
    Option<"largeModelBytes", "large-model-bytes", "int64_t", "0",
           "Least bytes of weights of a model that gets large-model-budget instead of bytes">,
    Option<"largeModelBudget", "large-model-budget", "int64_t", "0",
           "A large model's budget (no max-launch-bytes limit), read by a launch beside the attention "
           "(0: large models get bytes as others do)">,
    Option<"spreadPages", "spread-pages", "bool", "false",
           "Page words: each decode gemv touches the next launch's pages in workgroups of its own, and an "
           "attention only its next launch's, instead of the attention all of them up to the next attention"
           " (slower on the H200: BENCHMARKS.md, 2026-12-05)">
  ];
}

def GerbilPlanMemory : Pass<"gerbil-plan-memory", "::mlir::func::FuncOp"> {
  let summary = "Places every activation in one arena, sharing space by liveness";
  let description = [{
    Each dispatch result gets an offset in the activation arena, sized for `max-tokens` rows; values whose
    live ranges do not overlap share bytes; the values a fusion group's body passes between its ops (which
    prefill runs one by one) get `internal_offsets`, live during that dispatch only. Sets `arena_offsets` on
    each dispatch and
    `gerbil.arena_bytes` / `gerbil.max_tokens` on the function.
  }];
  let options = [
    Option<"maxTokens", "max-tokens", "int64_t", "512", "Most tokens one step processes (the prefill chunk)">,
    Option<"alignment", "alignment", "int64_t", "256", "Byte alignment of every activation">
  ];
}

#endif // GERBIL_PASSES_TD
