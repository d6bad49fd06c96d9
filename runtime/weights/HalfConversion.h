#pragma once
// f16 <-> f32 for whole rows of weights, with the CPU's conversion instructions (F16C) where it has them:
// converting element by element took the 8B's load from 2.7 to 18.9 s on the GPU machine once its norm
// weights were folded into the f16 matrices (which makes the loader convert instead of copy). The results
// are those of halfToFloat and floatToHalf (round to nearest even) either way.
#include <cstdint>

namespace gerbil::weights {

// dst[i] = f32(src[i]); src holds f16 bits, not necessarily aligned.
void halfsToFloats(const uint8_t *src, int64_t count, float *dst);
// dst[i] = f16(src[i]) rounded to nearest even; dst need not be aligned.
void floatsToHalfs(const float *src, int64_t count, uint8_t *dst);

// The same one element at a time, never with F16C: what the fast paths are tested against.
void halfsToFloatsPortable(const uint8_t *src, int64_t count, float *dst);
void floatsToHalfsPortable(const float *src, int64_t count, uint8_t *dst);

} // namespace gerbil::weights
