// One elementwise op over [T, N]: OP(a, b) or OP(x). Grid (ceil(N / WORKGROUP), T, 1).
void main() {
  uint i = gl_WorkGroupID.x * WORKGROUP + gl_LocalInvocationID.x;
  if (i >= N) return;
  uint index = gl_WorkGroupID.y * N + i;
#if OP_ADD
  store_result(index, load_a(index) + load_b(RHS_IS_BIAS ? i : index));
#elif OP_MUL
  store_result(index, load_a(index) * load_b(index));
#elif OP_SILU
  store_result(index, silu(load_x(index)));
#elif OP_GELU
  store_result(index, gelu(load_x(index)));
#endif
}
