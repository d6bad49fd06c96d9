// result[t, n] = sum_k x[t, k] · w[n, k] on workgroup-scope cooperative matrices (VK_NV_cooperative_matrix2:
// the driver stages the fragments through shared memory and splits the products between its subgroups).
// Written against GL_NV_cooperative_matrix with gl_ScopeWorkgroup, which Debian 12's glslang compiles; the
// SPIR-V is retargeted to SPV_KHR_cooperative_matrix (workgroup scope needs no other SPIR-V capability).
// Each workgroup computes one TILE_T × TILE_N block, stepping K by TILE_K, loading its slices of x (f16 rows)
// and of the weight rows straight from memory.
// Experimental (gerbil-kernel-bench --workgroup-scope): T a multiple of TILE_T, N of TILE_N, K of TILE_K.
#define FragA fcoopmatNV<16, gl_ScopeWorkgroup, TILE_T, TILE_K>
#define FragB fcoopmatNV<16, gl_ScopeWorkgroup, TILE_K, TILE_N>
#define FragC fcoopmatNV<32, gl_ScopeWorkgroup, TILE_T, TILE_N>

void main() {
  const uint t0 = gl_WorkGroupID.y * TILE_T, n0 = gl_WorkGroupID.x * TILE_N;
#if RESIDUAL
  // The sums start from the residual (an addition of matrices after the loop crashes SPIRV-Tools 2023.1's
  // optimiser).
  FragC acc;
  coopMatLoadNV(acc, residual_, t0 * N + n0, N, false);
#else
  FragC acc = FragC(0.0);
#endif
  for (uint k = 0; k < K; k += TILE_K) {
    FragA a;
    FragB b;
    coopMatLoadNV(a, x_v4, (t0 * K + k) / 8u, K / 8u, false);
    coopMatLoadNV(b, w_v4, (n0 * K + k) / 8u, K / 8u, true);
    acc = coopMatMulAddNV(a, b, acc);
  }
  coopMatStoreNV(acc, result_, t0 * N + n0, N, false);
}
