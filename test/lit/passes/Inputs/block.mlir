// A one-layer model in the gerbil dialect, small enough to read: the input of the pass tests.
module attributes {gerbil.model = {architecture = "LlamaForCausalLM", family = "llama", hidden_size = 8 : i64, num_layers = 1 : i64, vocab_size = 16 : i64, bos_token_ids = [1], eos_token_ids = [2], ignored_keys = [], max_position_embeddings = 64 : i64}} {
  gerbil.weight @embed_tokens.weight : tensor<16x8xf32> {keys = ["model.embed_tokens.weight"]}
  gerbil.weight @layers.0.attn_norm.weight : tensor<8xf32> {keys = ["model.layers.0.input_layernorm.weight"]}
  gerbil.weight @layers.0.attn.q_proj.weight : tensor<8x8xf32> {keys = ["q"]}
  gerbil.weight @layers.0.attn.k_proj.weight : tensor<4x8xf32> {keys = ["k"]}
  gerbil.weight @layers.0.attn.v_proj.weight : tensor<4x8xf32> {keys = ["v"]}
  gerbil.weight @layers.0.attn.q_proj.bias : tensor<8xf32> {keys = ["qb"]}
  gerbil.weight @final_norm.weight : tensor<8xf32> {keys = ["model.norm.weight"]}
  gerbil.kv_cache @kv_cache.0 {head_dim = 4 : i64, layer = 0 : i64, num_kv_heads = 1 : i64}
  func.func @forward(%ids: tensor<?xi32>, %pos: index) -> tensor<?x16xf32> {
    %e = gerbil.weight_ref @embed_tokens.weight : tensor<16x8xf32>
    %h = gerbil.embedding %ids, %e : (tensor<?xi32>, tensor<16x8xf32>) -> tensor<?x8xf32>
    %nw = gerbil.weight_ref @layers.0.attn_norm.weight : tensor<8xf32>
    %n = gerbil.rms_norm %h, %nw {eps = 1.0e-5} : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
    %wq = gerbil.weight_ref @layers.0.attn.q_proj.weight : tensor<8x8xf32>
    %q0 = gerbil.matmul %n, %wq : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    %bq = gerbil.weight_ref @layers.0.attn.q_proj.bias : tensor<8xf32>
    %q1 = gerbil.add %q0, %bq : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
    %wk = gerbil.weight_ref @layers.0.attn.k_proj.weight : tensor<4x8xf32>
    %k = gerbil.matmul %n, %wk : (tensor<?x8xf32>, tensor<4x8xf32>) -> tensor<?x4xf32>
    %wv = gerbil.weight_ref @layers.0.attn.v_proj.weight : tensor<4x8xf32>
    %v = gerbil.matmul %n, %wv : (tensor<?x8xf32>, tensor<4x8xf32>) -> tensor<?x4xf32>
    %q = gerbil.rope %q1, %pos {num_heads = 2 : i64, head_dim = 4 : i64, rotary_dim = 4 : i64, inv_freq = array<f64: 1.0, 0.01>, attention_scaling = 1.0} : tensor<?x8xf32>
    %kr = gerbil.rope %k, %pos {num_heads = 1 : i64, head_dim = 4 : i64, rotary_dim = 4 : i64, inv_freq = array<f64: 1.0, 0.01>, attention_scaling = 1.0} : tensor<?x4xf32>
    gerbil.kv_append %kr, %v, %pos into @kv_cache.0 : tensor<?x4xf32>, tensor<?x4xf32>
    %a = gerbil.attention %q, %pos over @kv_cache.0 {num_heads = 2 : i64, num_kv_heads = 1 : i64, head_dim = 4 : i64, scale = 0.5} : (tensor<?x8xf32>, index) -> tensor<?x8xf32>
    %r = gerbil.add %h, %a : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
    %fw = gerbil.weight_ref @final_norm.weight : tensor<8xf32>
    %f = gerbil.rms_norm %r, %fw {eps = 1.0e-5} : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
    %l = gerbil.matmul %f, %e : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
    return %l : tensor<?x16xf32>
  }
}
