// RUN: gerbil-opt %s --pass-pipeline='builtin.module(func.func(gerbil-form-dispatches))' | FileCheck %s

// The row kernels (embedding, rope, kv_append) spread a token's row over workgroups of 64 invocations that
// take 4 elements each, their loads together: 1024 wide rows are 4 workgroups a token, 512 wide ones 2.
// CHECK-DAG: #[[WIDE:.*]] = affine_map<()[s0] -> (s0, 4, 1)>
// CHECK-DAG: #[[HALF:.*]] = affine_map<()[s0] -> (s0, 2, 1)>
// CHECK: gerbil.dispatch "embedding"({{.*}}) grid #[[WIDE]] workgroup [64, 1, 1]
// CHECK: gerbil.dispatch "rope"({{.*}}) grid #[[WIDE]] workgroup [64, 1, 1]
// CHECK: gerbil.dispatch "kv_append"({{.*}}) grid #[[HALF]] workgroup [64, 1, 1]
module attributes {gerbil.model = {architecture = "LlamaForCausalLM", family = "llama", hidden_size = 1024 : i64, num_layers = 1 : i64, vocab_size = 16 : i64, bos_token_ids = [1], eos_token_ids = [2], ignored_keys = [], max_position_embeddings = 64 : i64}} {
  gerbil.weight @embed_tokens.weight : tensor<16x1024xf32> {keys = ["model.embed_tokens.weight"]}
  gerbil.weight @k.weight : tensor<512x1024xf32> {keys = ["k"]}
  gerbil.kv_cache @kv_cache.0 {head_dim = 8 : i64, layer = 0 : i64, num_kv_heads = 64 : i64}
  func.func @forward(%ids: tensor<?xi32>, %pos: index) -> tensor<?x1024xf32> {
    %e = gerbil.weight_ref @embed_tokens.weight : tensor<16x1024xf32>
    %h = gerbil.embedding %ids, %e : (tensor<?xi32>, tensor<16x1024xf32>) -> tensor<?x1024xf32>
    %q = gerbil.rope %h, %pos {num_heads = 128 : i64, head_dim = 8 : i64, rotary_dim = 8 : i64, inv_freq = array<f64: 1.0, 0.1, 0.01, 0.001>, attention_scaling = 1.0} : tensor<?x1024xf32>
    %wk = gerbil.weight_ref @k.weight : tensor<512x1024xf32>
    %k = gerbil.matmul %h, %wk : (tensor<?x1024xf32>, tensor<512x1024xf32>) -> tensor<?x512xf32>
    gerbil.kv_append %k, %k, %pos into @kv_cache.0 : tensor<?x512xf32>, tensor<?x512xf32>
    return %q : tensor<?x1024xf32>
  }
}
