// One elementwise op over [T, N]: OP(a, b) or OP(x). Grid (ceil(N / WORKGROUP), T, 1).
float gelu(float x) {
#if GELU_TANH
  // The argument is clamped: tanh saturates long before, and some drivers return NaN for huge inputs.
  float inner = clamp(0.7978845608028654 * (x + 0.044715 * x * x * x), -15.0, 15.0);
  return 0.5 * x * (1.0 + tanh(inner));
#else
  // erf by Abramowitz and Stegun 7.1.26 (|error| < 1.5e-7).
  float z = abs(x) * 0.7071067811865476;
  float k = 1.0 / (1.0 + 0.3275911 * z);
  float poly = k * (0.254829592 + k * (-0.284496736 + k * (1.421413741 + k * (-1.453152027 + k * 1.061405429))));
  float erfz = 1.0 - poly * exp(-z * z);
  return 0.5 * x * (1.0 + sign(x) * erfz);
#endif
}

void main() {
  uint i = gl_WorkGroupID.x * WORKGROUP + gl_LocalInvocationID.x;
  if (i >= N) return;
  uint index = gl_WorkGroupID.y * N + i;
#if OP_ADD
  store_result(index, load_a(index) + load_b(RHS_IS_BIAS ? i : index));
#elif OP_MUL
  store_result(index, load_a(index) * load_b(index));
#elif OP_SILU
  float x = load_x(index);
  store_result(index, x / (1.0 + exp(-x)));
#elif OP_GELU
  store_result(index, gelu(load_x(index)));
#endif
}
