// RUN: gerbil-opt %s -split-input-file -verify-diagnostics

func.func @matmul_k(%x: tensor<?x8xf32>, %w: tensor<4x6xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{does not take inputs of 8}}
  %y = gerbil.matmul %x, %w : (tensor<?x8xf32>, tensor<4x6xf32>) -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

func.func @matmul_n(%x: tensor<?x8xf32>, %w: tensor<4x8xf32>) -> tensor<?x5xf32> {
  // expected-error @+1 {{does not give outputs of 5}}
  %y = gerbil.matmul %x, %w : (tensor<?x8xf32>, tensor<4x8xf32>) -> tensor<?x5xf32>
  return %y : tensor<?x5xf32>
}

// -----

func.func @bias(%x: tensor<?x8xf32>, %b: tensor<7xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{bias 'tensor<7xf32>' does not match rows of 8}}
  %y = gerbil.add %x, %b : (tensor<?x8xf32>, tensor<7xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

func.func @norm_group(%x: tensor<?x8xf32>, %w: tensor<3xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{weight of 3 does not divide the row of 8}}
  %y = gerbil.rms_norm %x, %w {eps = 1.0e-5} : (tensor<?x8xf32>, tensor<3xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

gerbil.kv_cache @kv0 {layer = 0 : i64, num_kv_heads = 3 : i64, head_dim = 4 : i64}
func.func @gqa(%q: tensor<?x16xf32>, %pos: index) -> tensor<?x16xf32> {
  // expected-error @+1 {{num_kv_heads (3) must divide num_heads (4)}}
  %a = gerbil.attention %q, %pos over @kv0 {num_heads = 4 : i64, num_kv_heads = 3 : i64, head_dim = 4 : i64, scale = 0.5} : (tensor<?x16xf32>, index) -> tensor<?x16xf32>
  return %a : tensor<?x16xf32>
}

// -----

func.func @heads(%q: tensor<?x12xf32>, %pos: index) -> tensor<?x12xf32> {
  // expected-error @+1 {{rows of 12 are not num_heads × head_dim = 16}}
  %a = gerbil.attention %q, %pos over @kv0 {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 4 : i64, scale = 0.5} : (tensor<?x12xf32>, index) -> tensor<?x12xf32>
  return %a : tensor<?x12xf32>
}

// -----

gerbil.kv_cache @kv0 {layer = 0 : i64, num_kv_heads = 1 : i64, head_dim = 4 : i64}
func.func @append(%k: tensor<?x8xf32>, %pos: index) {
  // expected-error @+1 {{rows of 8 do not match the cache's 1 kv heads × 4}}
  gerbil.kv_append %k, %k, %pos into @kv0 : tensor<?x8xf32>, tensor<?x8xf32>
  return
}

// -----

func.func @missing_cache(%k: tensor<?x8xf32>, %pos: index) {
  // expected-error @+1 {{refers to @nowhere, which is not a gerbil.kv_cache}}
  gerbil.kv_append %k, %k, %pos into @nowhere : tensor<?x8xf32>, tensor<?x8xf32>
  return
}

// -----

func.func @rope(%x: tensor<?x8xf32>, %pos: index) -> tensor<?x8xf32> {
  // expected-error @+1 {{inv_freq needs rotary_dim / 2 = 2 entries}}
  %r = gerbil.rope %x, %pos {num_heads = 2 : i64, head_dim = 4 : i64, rotary_dim = 4 : i64, inv_freq = array<f64: 1.0>, attention_scaling = 1.0} : tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

gerbil.weight @w : tensor<4x8xf32> {keys = ["w"]}
func.func @ref_type() -> tensor<4x4xf32> {
  // expected-error @+1 {{type 'tensor<4x4xf32>' differs from the weight's 'tensor<4x8xf32>'}}
  %w = gerbil.weight_ref @w : tensor<4x4xf32>
  return %w : tensor<4x4xf32>
}

// -----

// expected-error @+1 {{slice [0, 2, 3] does not match the weight shape}}
gerbil.weight @sliced : tensor<4x8xf32> {keys = ["w"], slice = array<i64: 0, 2, 3>}

// -----

// expected-error @+1 {{needs at least one checkpoint key}}
gerbil.weight @keyless : tensor<4xf32> {keys = []}

// -----

gerbil.weight @g : tensor<4xf32> {keys = ["g"]}
// expected-error @+1 {{scale_columns_by @g must be an unscaled vector of its row length (8), got 'tensor<4xf32>'}}
gerbil.weight @w : tensor<4x8xf32> {keys = ["w"], scale_columns_by = @g}

// -----

// expected-error @+1 {{refers to @missing, which is not a gerbil.weight}}
gerbil.weight @w : tensor<4x8xf32> {keys = ["w"], scale_columns_by = @missing}

// -----

func.func @argmax(%l: tensor<?x16xf32>) -> tensor<2xi32> {
  // expected-error @+1 {{gives one token: tensor<1xi32>}}
  %t = gerbil.argmax %l : tensor<?x16xf32> -> tensor<2xi32>
  return %t : tensor<2xi32>
}

// -----

func.func @linear_norm(%x: tensor<?x8xf32>, %w: tensor<4x8xf32>, %g: tensor<4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{norm weight 'tensor<4xf32>' does not match rows of 8}}
  %y = gerbil.linear %x, %w norm(%g) {eps = 1.0e-5} : (tensor<?x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

func.func @linear_eps(%x: tensor<?x8xf32>, %w: tensor<4x8xf32>, %g: tensor<8xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{a norm prologue needs a positive eps}}
  %y = gerbil.linear %x, %w norm(%g) : (tensor<?x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

// gerbil-prefetch-weights' attributes on a dispatch.
func.func @prefetch_without_bytes(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{prefetch_weights and prefetch_bytes go together}}
  %r = gerbil.dispatch "silu"(%x) grid affine_map<()[s0] -> (1, s0, 1)> workgroup [64, 1, 1] {decode_grid = affine_map<()[s0] -> (1, 1, 1)>, decode_workgroup = array<i64: 64, 1, 1>, prefetch_weights = [@w]} : (tensor<?x8xf32>) -> tensor<?x8xf32> {
  ^bb0(%a: tensor<?x8xf32>):
    %s = gerbil.silu %a : tensor<?x8xf32>
    gerbil.yield %s : tensor<?x8xf32>
  }
  return %r : tensor<?x8xf32>
}

// -----

// gerbil-prefetch-weights' attributes on a dispatch.
func.func @prefetch_without_decode(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{prefetches weights but has no decode variant}}
  %r = gerbil.dispatch "silu"(%x) grid affine_map<()[s0] -> (1, s0, 1)> workgroup [64, 1, 1] {prefetch_weights = [@w], prefetch_bytes = array<i64: 16>} : (tensor<?x8xf32>) -> tensor<?x8xf32> {
  ^bb0(%a: tensor<?x8xf32>):
    %s = gerbil.silu %a : tensor<?x8xf32>
    gerbil.yield %s : tensor<?x8xf32>
  }
  return %r : tensor<?x8xf32>
}

// -----

// gerbil-prefetch-weights' attributes on a dispatch.
func.func @prefetch_counts(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{needs one prefetch_bytes per prefetched weight}}
  %r = gerbil.dispatch "silu"(%x) grid affine_map<()[s0] -> (1, s0, 1)> workgroup [64, 1, 1] {decode_grid = affine_map<()[s0] -> (1, 1, 1)>, decode_workgroup = array<i64: 64, 1, 1>, prefetch_weights = [@w], prefetch_bytes = array<i64: 16, 32>} : (tensor<?x8xf32>) -> tensor<?x8xf32> {
  ^bb0(%a: tensor<?x8xf32>):
    %s = gerbil.silu %a : tensor<?x8xf32>
    gerbil.yield %s : tensor<?x8xf32>
  }
  return %r : tensor<?x8xf32>
}

// -----

// gerbil-prefetch-weights' attributes on a dispatch.
func.func @prefetch_words(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{prefetch_bytes must be positive multiples of 16, got 24}}
  %r = gerbil.dispatch "silu"(%x) grid affine_map<()[s0] -> (1, s0, 1)> workgroup [64, 1, 1] {decode_grid = affine_map<()[s0] -> (1, 1, 1)>, decode_workgroup = array<i64: 64, 1, 1>, prefetch_weights = [@w], prefetch_bytes = array<i64: 24>} : (tensor<?x8xf32>) -> tensor<?x8xf32> {
  ^bb0(%a: tensor<?x8xf32>):
    %s = gerbil.silu %a : tensor<?x8xf32>
    gerbil.yield %s : tensor<?x8xf32>
  }
  return %r : tensor<?x8xf32>
}

// -----

func.func @prefetch_beside_without_weights(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{prefetch_beside without prefetch_weights}}
  %r = gerbil.dispatch "silu"(%x) grid affine_map<()[s0] -> (1, s0, 1)> workgroup [64, 1, 1] {decode_grid = affine_map<()[s0] -> (1, 1, 1)>, decode_workgroup = array<i64: 64, 1, 1>, prefetch_beside} : (tensor<?x8xf32>) -> tensor<?x8xf32> {
  ^bb0(%a: tensor<?x8xf32>):
    %s = gerbil.silu %a : tensor<?x8xf32>
    gerbil.yield %s : tensor<?x8xf32>
  }
  return %r : tensor<?x8xf32>
}

// -----

// Codegen launches only an attention's prefetch beside it.
func.func @prefetch_beside_not_attention(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{prefetch_beside on a 'silu' dispatch (attentions only)}}
  %r = gerbil.dispatch "silu"(%x) grid affine_map<()[s0] -> (1, s0, 1)> workgroup [64, 1, 1] {decode_grid = affine_map<()[s0] -> (1, 1, 1)>, decode_workgroup = array<i64: 64, 1, 1>, prefetch_beside, prefetch_weights = [@w], prefetch_bytes = array<i64: 16>} : (tensor<?x8xf32>) -> tensor<?x8xf32> {
  ^bb0(%a: tensor<?x8xf32>):
    %s = gerbil.silu %a : tensor<?x8xf32>
    gerbil.yield %s : tensor<?x8xf32>
  }
  return %r : tensor<?x8xf32>
}

// -----

func.func @prefetch_stride_count(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{needs one prefetch_strides per prefetched weight}}
  %r = gerbil.dispatch "silu"(%x) grid affine_map<()[s0] -> (1, s0, 1)> workgroup [64, 1, 1] {decode_grid = affine_map<()[s0] -> (1, 1, 1)>, decode_workgroup = array<i64: 64, 1, 1>, prefetch_weights = [@w], prefetch_bytes = array<i64: 16>, prefetch_strides = array<i64: 16, 16>} : (tensor<?x8xf32>) -> tensor<?x8xf32> {
  ^bb0(%a: tensor<?x8xf32>):
    %s = gerbil.silu %a : tensor<?x8xf32>
    gerbil.yield %s : tensor<?x8xf32>
  }
  return %r : tensor<?x8xf32>
}

// -----

func.func @prefetch_stride_words(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{prefetch_strides must be positive multiples of 16, got 8}}
  %r = gerbil.dispatch "silu"(%x) grid affine_map<()[s0] -> (1, s0, 1)> workgroup [64, 1, 1] {decode_grid = affine_map<()[s0] -> (1, 1, 1)>, decode_workgroup = array<i64: 64, 1, 1>, prefetch_weights = [@w], prefetch_bytes = array<i64: 16>, prefetch_strides = array<i64: 8>} : (tensor<?x8xf32>) -> tensor<?x8xf32> {
  ^bb0(%a: tensor<?x8xf32>):
    %s = gerbil.silu %a : tensor<?x8xf32>
    gerbil.yield %s : tensor<?x8xf32>
  }
  return %r : tensor<?x8xf32>
}

// -----

func.func @prefetch_stride_alone(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{prefetch_strides without prefetch_weights}}
  %r = gerbil.dispatch "silu"(%x) grid affine_map<()[s0] -> (1, s0, 1)> workgroup [64, 1, 1] {decode_grid = affine_map<()[s0] -> (1, 1, 1)>, decode_workgroup = array<i64: 64, 1, 1>, prefetch_strides = array<i64: 16>} : (tensor<?x8xf32>) -> tensor<?x8xf32> {
  ^bb0(%a: tensor<?x8xf32>):
    %s = gerbil.silu %a : tensor<?x8xf32>
    gerbil.yield %s : tensor<?x8xf32>
  }
  return %r : tensor<?x8xf32>
}

// -----

// The cache holds f32 or f16 values on the device.
// expected-error @+1 {{element_type must be f32 or f16, not 'bf16'}}
gerbil.kv_cache @kv0 {layer = 0 : i64, num_kv_heads = 1 : i64, head_dim = 4 : i64, element_type = bf16}
