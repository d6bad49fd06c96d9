// The gerbil dialect: the model-graph IR of a transformer language model, as MLIR.
#ifndef GERBIL_DIALECT_TD
#define GERBIL_DIALECT_TD

include "mlir/IR/OpBase.td"

def Gerbil_Dialect : Dialect {
  let name = "gerbil";
  let cppNamespace = "::mlir::gerbil";
  let summary = "Model-graph IR of transformer language models";
  let description = [{
    One `func.func @forward(%input_ids: tensor<?xi32>, %start_pos: index) -> tensor<?xVxf32>` computes the
    logits of T new tokens placed at positions [start_pos, start_pos + T). T is the dynamic dimension.
    Weights are module-level symbols (`gerbil.weight`) read with `gerbil.weight_ref`; KV caches are
    module-level state (`gerbil.kv_cache`) written by `gerbil.kv_append` and read by `gerbil.attention`.
    After dispatch formation every computation sits in a `gerbil.dispatch`: one kernel launch.
  }];
}

class Gerbil_Op<string mnemonic, list<Trait> traits = []> : Op<Gerbil_Dialect, mnemonic, traits>;

#endif // GERBIL_DIALECT_TD
