#include "runtime/weights/HalfConversion.h"

#include "runtime/weights/Safetensors.h"

#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define GERBIL_F16C_PATH 1
#endif

namespace gerbil::weights {

void halfsToFloatsPortable(const uint8_t *src, int64_t count, float *dst) {
  for (int64_t i = 0; i < count; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = halfToFloat(h);
  }
}

void floatsToHalfsPortable(const float *src, int64_t count, uint8_t *dst) {
  for (int64_t i = 0; i < count; ++i) {
    uint16_t h = floatToHalf(src[i]);
    std::memcpy(dst + 2 * i, &h, 2);
  }
}

#ifdef GERBIL_F16C_PATH
namespace {

bool hasF16C() {
  static const bool has = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  return has;
}

__attribute__((target("avx,f16c"))) void halfsToFloatsF16C(const uint8_t *src, int64_t count, float *dst) {
  int64_t i = 0;
  for (; i + 8 <= count; i += 8)
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src + 2 * i))));
  halfsToFloatsPortable(src + 2 * i, count - i, dst + i);
}

// vcvtps2ph with round to nearest even gives floatToHalf's results: overflow to infinity, subnormals kept
// (nothing here sets flush-to-zero), NaNs stay NaN.
__attribute__((target("avx,f16c"))) void floatsToHalfsF16C(const float *src, int64_t count, uint8_t *dst) {
  int64_t i = 0;
  for (; i + 8 <= count; i += 8)
    _mm_storeu_si128(
        reinterpret_cast<__m128i *>(dst + 2 * i),
        _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  floatsToHalfsPortable(src + i, count - i, dst + 2 * i);
}

} // namespace
#endif

void halfsToFloats(const uint8_t *src, int64_t count, float *dst) {
#ifdef GERBIL_F16C_PATH
  if (hasF16C()) return halfsToFloatsF16C(src, count, dst);
#endif
  halfsToFloatsPortable(src, count, dst);
}

void floatsToHalfs(const float *src, int64_t count, uint8_t *dst) {
#ifdef GERBIL_F16C_PATH
  if (hasF16C()) return floatsToHalfsF16C(src, count, dst);
#endif
  floatsToHalfsPortable(src, count, dst);
}

} // namespace gerbil::weights
