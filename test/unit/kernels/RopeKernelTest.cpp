// Prefill's RoPE of queries and keys fused with the KV-cache write (rope_append.glsl), as codegen
// specialises it: against the rotate-half reference, partial rotary dims, grouped-query heads and a step
// that starts past position 0; cache slots outside the step stay as they were.
#include "compiler/codegen/RopeKernel.h"
#include "compiler/codegen/ShaderCompiler.h"
#include "test/unit/kernels/KernelTestBase.h"

#include <cmath>

using namespace gerbil;
using namespace gerbil::kerneltest;

namespace {

struct RopeCase {
  int64_t qHeads, kvHeads, headDim, rotaryDim;
  uint32_t tokens, start;
};

class RopeKernelTest : public KernelTestBase {
protected:
  // halfCache: the cache holds f16 (gerbilc --kv-dtype f16); the keys and values written must be the
  // reference's rounded to f16.
  void check(const RopeCase &c, bool halfCache = false) {
    const int64_t seq = 64, qRow = c.qHeads * c.headDim, kvRow = c.kvHeads * c.headDim;
    codegen::RotarySpec rotary;
    rotary.headDim = c.headDim;
    rotary.rotaryDim = c.rotaryDim;
    rotary.attentionScaling = 1.25;
    for (int64_t i = 0; i < c.rotaryDim / 2; ++i)
      rotary.invFreq.push_back(std::pow(10000.0, -2.0 * double(i) / double(c.rotaryDim)));
    std::mt19937 rng(static_cast<uint32_t>(c.headDim * 7 + c.rotaryDim + c.start));
    std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
    std::vector<float> q(c.tokens * qRow), k(c.tokens * kvRow), v(c.tokens * kvRow);
    for (float &x : q) x = uniform(rng);
    for (float &x : k) x = uniform(rng);
    for (float &x : v) x = uniform(rng);
    const std::vector<float> cacheBefore(c.kvHeads * seq * c.headDim, -7.0f);

    // Rotate-half: dims d and d + rotary/2 of each head turn together by position · inv_freq[d].
    auto rotate = [&](const float *head, int64_t d, uint32_t position) {
      if (d >= c.rotaryDim) return double(head[d]);
      const int64_t half = c.rotaryDim / 2, i = d % half;
      double angle = double(position) * float(rotary.invFreq[i]);
      double cs = std::cos(angle) * rotary.attentionScaling, sn = std::sin(angle) * rotary.attentionScaling;
      double partner = d < half ? -head[d + half] : head[d - half];
      return head[d] * cs + partner * sn;
    };

    codegen::KernelSource source = codegen::ropeAppendKernel(rotary, c.qHeads, c.kvHeads, seq);
    if (halfCache) {
      ASSERT_EQ(codegen::holdCacheInHalf(source), 2);
    }
    std::vector<uint32_t> spirv = compiler_.compile(codegen::writeKernel(source), "rope_append test kernel");
    std::vector<vk::Buffer> buffers;
    buffers.push_back(upload(q, "q"));
    buffers.push_back(upload(k, "k"));
    buffers.push_back(upload(v, "v"));
    buffers.push_back(output(q.size(), "result"));
    const std::vector<uint8_t> cacheBytes =
        packWeights(cacheBefore, halfCache ? plan::DType::F16 : plan::DType::F32);
    buffers.push_back(upload(cacheBytes.data(), cacheBytes.size(), "k_cache"));
    buffers.push_back(upload(cacheBytes.data(), cacheBytes.size(), "v_cache"));
    buffers.push_back(state(c.start));
    ASSERT_EQ(buffers.size(), source.bindings.size() + 1);
    const uint32_t columns = codegen::ropeAppendColumns(rotary, c.qHeads, c.kvHeads);
    run(spirv, buffers, {c.tokens, columns, 1}, c.tokens, "rope_append test kernel");

    std::vector<float> result = download(buffers[3], q.size()),
                       keys = download(buffers[4], cacheBefore.size(), halfCache),
                       values = download(buffers[5], cacheBefore.size(), halfCache);
    const double tolerance = 1e-4 * (1.0 + double(c.start + c.tokens) / 16.0);
    // What the cache holds of a value: itself, or with halfCache its f16 rounding (a rotated key's f32 result
    // may lie either side of a rounding boundary: one f16 step of 2 at most, 2^-10 · 2).
    auto cached = [&](double value) { return halfCache ? double(static_cast<_Float16>(value)) : value; };
    const double keyTolerance = halfCache ? tolerance + std::ldexp(2.0, -10) : tolerance;
    for (uint32_t t = 0; t < c.tokens; ++t) {
      const uint32_t position = c.start + t;
      for (int64_t h = 0; h < c.qHeads; ++h)
        for (int64_t d = 0; d < c.headDim; ++d)
          ASSERT_NEAR(result[t * qRow + h * c.headDim + d], rotate(&q[t * qRow + h * c.headDim], d, position),
                      tolerance)
              << "query token " << t << " head " << h << " dim " << d;
      for (int64_t h = 0; h < c.kvHeads; ++h)
        for (int64_t d = 0; d < c.headDim; ++d) {
          const size_t slot = (h * seq + position) * c.headDim + d;
          ASSERT_NEAR(keys[slot], cached(rotate(&k[t * kvRow + h * c.headDim], d, position)), keyTolerance)
              << "key token " << t << " head " << h << " dim " << d;
          ASSERT_EQ(values[slot], cached(v[t * kvRow + h * c.headDim + d]))
              << "value token " << t << " head " << h;
        }
    }
    // Positions outside the step are untouched.
    for (int64_t h = 0; h < c.kvHeads; ++h)
      for (uint32_t p = 0; p < seq; ++p) {
        if (p >= c.start && p < c.start + c.tokens) continue;
        for (int64_t d = 0; d < c.headDim; ++d)
          ASSERT_EQ(keys[(h * seq + p) * c.headDim + d], -7.0f) << "position " << p << " was written";
      }
  }
};

TEST_F(RopeKernelTest, RopeAppendMatchesTheReference) {
  const RopeCase cases[] = {
      {4, 2, 16, 16, 5, 0},   // whole heads rotate
      {14, 2, 64, 64, 3, 40}, // Qwen's heads, past position 0
      {8, 8, 32, 16, 4, 7},   // half of each head rotates (partial rotary dims)
      {3, 1, 24, 8, 9, 20},   // rows that end inside a workgroup
      {2, 1, 24, 12, 5, 3},   // a rotating half of 6 dims: units of one dim (the others move 4)
      {3, 2, 20, 20, 4, 11},  // heads of 20, half 10: units of one dim
  };
  for (const RopeCase &c : cases) {
    check(c);
    ASSERT_FALSE(HasFatalFailure());
  }
}

TEST_F(RopeKernelTest, RopeAppendWritesAHalfCache) {
  check({14, 2, 64, 64, 3, 40}, true);
  ASSERT_FALSE(HasFatalFailure());
  check({3, 1, 24, 8, 9, 20}, true); // 4 values to an 8-byte word
  ASSERT_FALSE(HasFatalFailure());
  check({2, 1, 24, 12, 5, 3}, true); // values written one at a time, two to a 32-bit word
}

// Where the rotating half and the head are multiples of 4 the kernel moves 4 dims a unit (16-byte loads),
// else one, and its grid follows: a token's units over 64 invocations of 2 (4 dims) or 4 (one dim) each.
TEST(RopeKernelShape, UnitsOfFourDimsWhereTheHalfAllows) {
  auto spec = [](int64_t headDim, int64_t rotaryDim) {
    codegen::RotarySpec rotary;
    rotary.headDim = headDim;
    rotary.rotaryDim = rotaryDim;
    rotary.invFreq.assign(rotaryDim / 2, 1.0);
    return rotary;
  };
  EXPECT_EQ(defineValue(codegen::ropeAppendKernel(spec(128, 128), 32, 8, 64), "UNIT_DIMS"), "4");
  EXPECT_EQ(defineValue(codegen::ropeAppendKernel(spec(24, 12), 2, 1, 64), "UNIT_DIMS"), "1");
  // Llama-3-8B: (40 heads of 64 pairs + 8 value heads of 128) / 4 = 896 units, 7 workgroups of 128.
  EXPECT_EQ(codegen::ropeAppendColumns(spec(128, 128), 32, 8), 7u);
  // 3 query and key heads of 24 - 6 units and 24 value dims: 78 units, one workgroup of 4 · 64.
  EXPECT_EQ(codegen::ropeAppendColumns(spec(24, 12), 2, 1), 1u);
}

// Heads of 256 (Gemma's): more cos/sin pairs than the workgroup has invocations.
TEST_F(RopeKernelTest, RopeAppendOfHeadsWiderThanTheWorkgroup) {
  check({2, 1, 256, 256, 3, 5});
  ASSERT_FALSE(HasFatalFailure());
  check({2, 2, 256, 160, 2, 60}); // partial rotary dims past the workgroup too
}

// A constant array indexed by a value the compiler does not know becomes a private copy of it in each
// invocation (the rotary kernels' frequency tables did until common.glsl's invFreqAt): compile() refuses
// it, and accepts the select chain that replaced it.
TEST(ShaderCompilerChecks, RefusesAPrivateCopyOfAConstantArray) {
  const std::string head = "#version 450\n#extension GL_EXT_control_flow_attributes : enable\n"
                           "layout(local_size_x = 64) in;\n"
                           "layout(set = 0, binding = 0) buffer Out { float values[]; };\n"
                           "const float TABLE[4] = float[](1.0, 0.5, 0.25, 0.125);\n";
  codegen::ShaderCompiler compiler;
  const std::string indexed = head + "void main() { uint i = gl_LocalInvocationID.x;\n"
                                     "  values[i] = TABLE[i % 4u]; }\n";
  try {
    compiler.compile(indexed, "indexed table", codegen::ShaderCompiler::CooperativeMatrices::AsWritten);
    ADD_FAILURE() << "a private copy of the table was accepted";
  } catch (const codegen::CodegenError &e) {
    EXPECT_NE(std::string(e.what()).find("'indexed table' indexes a constant array"), std::string::npos)
        << e.what();
  }
  const std::string selected = head +
                               "void main() { uint i = gl_LocalInvocationID.x % 4u;\n"
                               "  float v = TABLE[0];\n"
                               "  [[unroll]] for (uint j = 1u; j < 4u; ++j) v = i == j ? TABLE[j] : v;\n"
                               "  values[gl_LocalInvocationID.x] = v; }\n";
  EXPECT_EQ(codegen::privateConstantCopies(compiler.compile(
                selected, "selected table", codegen::ShaderCompiler::CooperativeMatrices::AsWritten)),
            0u);
}

TEST_F(RopeKernelTest, RefusesAnOddRotaryDim) {
  codegen::RotarySpec rotary;
  rotary.headDim = 16;
  rotary.rotaryDim = 7;
  rotary.invFreq = {1.0, 0.5, 0.25};
  EXPECT_THROW(codegen::ropeAppendKernel(rotary, 2, 1, 64), codegen::CodegenError);
}

} // namespace
