// RUN: gerbil-opt %S/Inputs/block.mlir --gerbil-assign-layout=dtype=f16 | FileCheck %s --check-prefix=F16
// RUN: gerbil-opt %S/Inputs/block.mlir --gerbil-assign-layout | FileCheck %s --check-prefix=F32
// RUN: not gerbil-opt %S/Inputs/block.mlir --gerbil-assign-layout=dtype=q4 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: gerbil-opt %S/Inputs/block.mlir '--gerbil-assign-layout=dtype=f16 kv-dtype=f16' | FileCheck %s --check-prefix=KV16
// RUN: not gerbil-opt %S/Inputs/block.mlir --gerbil-assign-layout=kv-dtype=bf16 2>&1 | FileCheck %s --check-prefix=BADKV

// Matrices take the requested dtype; norm weights and biases stay f32.
// F16: gerbil.weight @embed_tokens.weight : tensor<16x8xf32> {device_dtype = f16
// F16: gerbil.weight @layers.0.attn_norm.weight : tensor<8xf32> {device_dtype = f32
// F16: gerbil.weight @layers.0.attn.q_proj.weight : tensor<8x8xf32> {device_dtype = f16
// F16: gerbil.weight @layers.0.attn.q_proj.bias : tensor<8xf32> {device_dtype = f32
// F32: gerbil.weight @embed_tokens.weight : tensor<16x8xf32> {device_dtype = f32
// F32: gerbil.weight @layers.0.attn.q_proj.weight : tensor<8x8xf32> {device_dtype = f32
// BAD: dtype must be f32 or f16, got 'q4'
// The KV cache holds f32 unless kv-dtype says f16.
// F16: gerbil.kv_cache @kv_cache.0 {element_type = f32
// F32: gerbil.kv_cache @kv_cache.0 {element_type = f32
// KV16: gerbil.kv_cache @kv_cache.0 {element_type = f16
// BADKV: kv-dtype must be f32 or f16, got 'bf16'
