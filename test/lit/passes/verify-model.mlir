// RUN: gerbil-opt %S/Inputs/block.mlir --gerbil-verify-model | FileCheck %s --check-prefix=OK
// RUN: not gerbil-opt %S/Inputs/block.mlir --gerbil-verify-model=dispatched=1 2>&1 | FileCheck %s --check-prefix=UNDISPATCHED
// RUN: gerbil-opt %s -split-input-file -verify-diagnostics --gerbil-verify-model

// OK: func.func @forward
// UNDISPATCHED: 'gerbil.embedding' op is outside any gerbil.dispatch after dispatch formation

// expected-error @+1 {{the model has no func.func @forward}}
module {
  func.func @other() { return }
}

// -----

module {
  // expected-error @+1 {{@forward must be (tensor<?xi32>, index) -> (tensor<?xVxf32>[, tensor<1xi32>])}}
  func.func @forward(%ids: tensor<?xi32>) -> tensor<?xi32> {
    return %ids : tensor<?xi32>
  }
}

// -----

module {
  // expected-error @+1 {{'gerbil.weight' op is never used by @forward}}
  gerbil.weight @unused : tensor<4xf32> {keys = ["u"]}
  gerbil.weight @e : tensor<4x4xf32> {keys = ["e"]}
  func.func @forward(%ids: tensor<?xi32>, %pos: index) -> tensor<?x4xf32> {
    %w = gerbil.weight_ref @e : tensor<4x4xf32>
    %h = gerbil.embedding %ids, %w : (tensor<?xi32>, tensor<4x4xf32>) -> tensor<?x4xf32>
    return %h : tensor<?x4xf32>
  }
}

// -----

module {
  gerbil.kv_cache @kv {layer = 0 : i64, num_kv_heads = 1 : i64, head_dim = 4 : i64}
  gerbil.weight @e : tensor<4x4xf32> {keys = ["e"]}
  func.func @forward(%ids: tensor<?xi32>, %pos: index) -> tensor<?x4xf32> {
    %w = gerbil.weight_ref @e : tensor<4x4xf32>
    %h = gerbil.embedding %ids, %w : (tensor<?xi32>, tensor<4x4xf32>) -> tensor<?x4xf32>
    // expected-error @+1 {{attends over @kv before any gerbil.kv_append writes it}}
    %a = gerbil.attention %h, %pos over @kv {num_heads = 1 : i64, num_kv_heads = 1 : i64, head_dim = 4 : i64, scale = 0.5} : (tensor<?x4xf32>, index) -> tensor<?x4xf32>
    return %a : tensor<?x4xf32>
  }
}
