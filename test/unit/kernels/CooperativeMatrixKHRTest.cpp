// The retargeting of NV cooperative-matrix SPIR-V to SPV_KHR_cooperative_matrix (CooperativeMatrixKHR.h),
// checked on the words themselves: Debian 12's SPIRV-Tools cannot validate KHR matrices and lavapipe runs
// none. Every NV instruction must be gone, every matrix type must say its use, and every multiply-add must
// take an A, a B and an accumulator of shapes that fit. The kernel tests run both ways on a device that
// has the extensions.
#include "compiler/codegen/CooperativeMatrixKHR.h"
#include "compiler/codegen/AttentionKernel.h"
#include "compiler/codegen/KernelWriter.h"
#include "compiler/codegen/MatMulKernel.h"
#include "compiler/codegen/ShaderCompiler.h"
#include "gerbil/Passes/TargetProfile.h"

#define SPV_ENABLE_UTILITY_CODE
#include <spirv/unified1/spirv.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace gerbil;

namespace {

// SPV_KHR_cooperative_matrix's numbers, which Debian 12's SPIR-V headers do not have (from its
// specification, spelled here apart from the pass's own).
enum : uint32_t {
  OpTypeCooperativeMatrixKHR = 4456,
  OpCooperativeMatrixLoadKHR = 4457,
  OpCooperativeMatrixStoreKHR = 4458,
  OpCooperativeMatrixMulAddKHR = 4459,
  CapabilityCooperativeMatrixKHR = 6022,
};
using spv::CapabilityCooperativeMatrixNV, spv::OpCapability, spv::OpConstant, spv::OpConstantComposite,
    spv::OpCooperativeMatrixLengthNV, spv::OpCooperativeMatrixLoadNV, spv::OpCooperativeMatrixMulAddNV,
    spv::OpCooperativeMatrixStoreNV, spv::OpExtension, spv::OpTypeCooperativeMatrixNV;

struct Instruction {
  uint32_t opcode;
  std::vector<uint32_t> operands;
};

std::vector<Instruction> instructionsOf(const std::vector<uint32_t> &spirv) {
  std::vector<Instruction> out;
  for (size_t at = 5; at < spirv.size();) {
    const uint32_t count = spirv[at] >> 16;
    EXPECT_GT(count, 0u);
    EXPECT_LE(at + count, spirv.size());
    if (count == 0 || at + count > spirv.size()) break;
    out.push_back({spirv[at] & 0xffff, {spirv.begin() + at + 1, spirv.begin() + at + count}});
    at += count;
  }
  return out;
}

std::string literal(const std::vector<uint32_t> &words) {
  std::string text(words.size() * 4, '\0');
  std::memcpy(text.data(), words.data(), text.size());
  return text.substr(0, text.find('\0'));
}

size_t count(const std::vector<Instruction> &module, uint32_t opcode) {
  size_t n = 0;
  for (const Instruction &inst : module) n += inst.opcode == opcode;
  return n;
}

struct MatrixType {
  uint32_t component, rows, columns, use;
};

// Checks a retargeted module against the NV module it came from.
void expectRetargeted(const std::vector<uint32_t> &nv, const std::vector<uint32_t> &khr,
                      const std::string &name) {
  SCOPED_TRACE(name);
  const std::vector<Instruction> before = instructionsOf(nv), after = instructionsOf(khr);
  ASSERT_GT(count(before, OpCooperativeMatrixMulAddNV), 0u);
  for (uint32_t opcode : {OpTypeCooperativeMatrixNV, OpCooperativeMatrixLoadNV, OpCooperativeMatrixStoreNV,
                          OpCooperativeMatrixMulAddNV, OpCooperativeMatrixLengthNV})
    EXPECT_EQ(count(after, opcode), 0u) << "NV instruction " << opcode << " left";
  EXPECT_EQ(count(after, OpCooperativeMatrixLoadKHR), count(before, OpCooperativeMatrixLoadNV));
  EXPECT_EQ(count(after, OpCooperativeMatrixStoreKHR), count(before, OpCooperativeMatrixStoreNV));
  EXPECT_EQ(count(after, OpCooperativeMatrixMulAddKHR), count(before, OpCooperativeMatrixMulAddNV));

  std::set<uint32_t> capabilities;
  std::set<std::string> extensions;
  std::map<uint32_t, uint32_t> constants, typeOf;
  std::map<uint32_t, MatrixType> matrices;
  std::set<uint32_t> defined;
  for (const Instruction &inst : after) {
    const std::vector<uint32_t> &w = inst.operands;
    if (inst.opcode == OpCapability) capabilities.insert(w.at(0));
    if (inst.opcode == OpExtension) extensions.insert(literal(w));
    if (inst.opcode == OpConstant && w.size() == 3) constants[w[1]] = w[2];
    if (inst.opcode == OpTypeCooperativeMatrixKHR) {
      ASSERT_EQ(w.size(), 6u);
      for (size_t o = 1; o < 6; ++o)
        ASSERT_TRUE(defined.count(w[o])) << "operand " << o << " of a matrix type";
      ASSERT_TRUE(constants.count(w[3]) && constants.count(w[4]) && constants.count(w[5]));
      EXPECT_LE(constants[w[5]], 2u) << "a matrix use";
      EXPECT_FALSE(matrices.count(w[0])) << "a matrix type declared twice";
      matrices[w[0]] = {w[1], constants[w[3]], constants[w[4]], constants[w[5]]};
    }
    bool hasResult = false, hasResultType = false;
    spv::HasResultAndType(static_cast<spv::Op>(inst.opcode), &hasResult, &hasResultType);
    if (inst.opcode == OpTypeCooperativeMatrixKHR) hasResult = true;
    if (inst.opcode == OpCooperativeMatrixLoadKHR || inst.opcode == OpCooperativeMatrixMulAddKHR)
      hasResult = hasResultType = true;
    if (hasResult) {
      const uint32_t id = w.at(hasResultType ? 1 : 0);
      EXPECT_TRUE(defined.insert(id).second) << "id " << id << " defined twice";
      if (hasResultType) typeOf[id] = w[0];
    }
  }
  EXPECT_TRUE(capabilities.count(CapabilityCooperativeMatrixKHR));
  EXPECT_FALSE(capabilities.count(CapabilityCooperativeMatrixNV));
  EXPECT_TRUE(extensions.count("SPV_KHR_cooperative_matrix"));
  EXPECT_FALSE(extensions.count("SPV_NV_cooperative_matrix"));
  for (uint32_t id : defined) EXPECT_LT(id, khr[3]) << "an id past the module's bound";

  for (const Instruction &inst : after) {
    const std::vector<uint32_t> &w = inst.operands;
    if (inst.opcode == OpCooperativeMatrixMulAddKHR) {
      ASSERT_TRUE(matrices.count(w[0]));
      const MatrixType result = matrices[w[0]];
      ASSERT_TRUE(typeOf.count(w[2]) && typeOf.count(w[3]) && typeOf.count(w[4]))
          << "an operand not made here";
      ASSERT_TRUE(matrices.count(typeOf[w[2]]) && matrices.count(typeOf[w[3]]));
      const MatrixType a = matrices[typeOf[w[2]]], b = matrices[typeOf[w[3]]];
      EXPECT_EQ(a.use, 0u) << "the A operand's use";
      EXPECT_EQ(b.use, 1u) << "the B operand's use";
      EXPECT_EQ(result.use, 2u) << "the result's use";
      EXPECT_EQ(typeOf[w[4]], w[0]) << "the accumulator's type is the result's";
      EXPECT_EQ(a.rows, result.rows);
      EXPECT_EQ(b.columns, result.columns);
      EXPECT_EQ(a.columns, b.rows);
    }
    if (inst.opcode == OpCooperativeMatrixLoadKHR) {
      EXPECT_TRUE(matrices.count(w.at(0))) << "a load of a type that is not a KHR matrix";
      ASSERT_TRUE(constants.count(w.at(3)));
      EXPECT_LE(constants[w[3]], 1u) << "a load's layout";
    }
    if (inst.opcode == OpCooperativeMatrixStoreKHR) {
      ASSERT_TRUE(constants.count(w.at(2)));
      EXPECT_LE(constants[w[2]], 1u) << "a store's layout";
    }
  }
  // No matrix type that no value has: a device need not support every use of a shape.
  std::set<uint32_t> valueTypes;
  for (const auto &[value, type] : typeOf) valueTypes.insert(type);
  for (const auto &[type, matrix] : matrices) EXPECT_TRUE(valueTypes.count(type)) << "matrix type " << type;
  EXPECT_EQ(codegen::workgroupMemoryBytes(khr), codegen::workgroupMemoryBytes(nv));
}

class CooperativeMatrixKHRTest : public ::testing::Test {
protected:
  void expectBothWays(codegen::KernelSource source, const std::string &name) {
    const std::vector<uint32_t> nv = compiler_.compile(source, name);
    codegen::useKhrCooperativeMatrix(source);
    ASSERT_TRUE(source.khrCooperativeMatrix);
    EXPECT_EQ(source.deviceExtensions, std::vector<std::string>{"VK_KHR_cooperative_matrix"});
    expectRetargeted(nv, compiler_.compile(source, name), name);
  }
  std::vector<uint32_t> compileKhr(const std::string &body) {
    const std::string glsl = R"(#version 450
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
layout(local_size_x = 32) in;
layout(set = 0, binding = 0) buffer Halves { float16_t h[]; };
layout(set = 0, binding = 1) buffer Floats { float f[]; };
#define Half fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define Float fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
void main() {
)" + body + "}\n";
    return compiler_.compile(glsl, "test kernel",
                             codegen::ShaderCompiler::CooperativeMatrices::RetargetToKhr);
  }
  codegen::ShaderCompiler compiler_;
};

TEST_F(CooperativeMatrixKHRTest, EveryTensorCoreMatMulRetargets) {
  using codegen::MatMulMode;
  // The profile's tiling, the wide projections' (fragments a step ahead), 16 subgroups, two buffers with a
  // K split.
  for (const char *target :
       {"nvidia", "nvidia:128x128x64:2x4:1", "nvidia:128x128x32:4x4", "nvidia:64x64x32:2x2:2:4"})
    for (MatMulMode mode : {MatMulMode::Single, MatMulMode::GateUp, MatMulMode::QKV}) {
      codegen::MatMulSpec spec;
      spec.variant = codegen::MatMulVariant::Coop;
      spec.coopTiling = mlir::gerbil::parseTarget(target)->coopTiling;
      if (mode != MatMulMode::Single) spec.coopTiling.splitK = 1; // the grouped ones keep whole sums
      spec.weight = plan::DType::F16;
      spec.mode = mode;
      spec.k = 512, spec.n = 256, spec.nK = spec.nV = 64;
      spec.norm = mode == MatMulMode::Single;
      spec.residual = mode == MatMulMode::Single;
      spec.halfInput = mode != MatMulMode::Single;
      spec.halfResult = mode == MatMulMode::GateUp;
      spec.eps = 1e-5;
      expectBothWays(codegen::matmulKernel(spec), std::string(target) + " mode " + std::to_string(int(mode)));
    }
}

// A plain projection of f16 rows, K 512, N 256, in 128 x 128 tiles of workgroup-scope matrices.
codegen::MatMulSpec workgroupScopeSpec() {
  codegen::MatMulSpec spec;
  spec.variant = codegen::MatMulVariant::Coop;
  spec.coopTiling = mlir::gerbil::parseTarget("khr:128x128x32:2x2")->coopTiling;
  spec.weight = plan::DType::F16;
  spec.k = 512, spec.n = 256;
  spec.halfInput = true;
  spec.workgroupScope = true;
  return spec;
}

// matmul_coop_workgroup.glsl: workgroup-scope matrices of whole tiles (VK_NV_cooperative_matrix2) keep their
// scope through the retargeting, which is all that KHR SPIR-V needs of them.
TEST_F(CooperativeMatrixKHRTest, WorkgroupScopeMatMulRetargets) {
  for (bool residual : {false, true}) {
    codegen::MatMulSpec spec = workgroupScopeSpec();
    spec.residual = residual;
    codegen::KernelSource source = codegen::matmulKernel(spec);
    const std::vector<uint32_t> nv = compiler_.compile(source, "workgroup-scope matmul");
    codegen::useKhrCooperativeMatrix(source);
    EXPECT_EQ(source.deviceExtensions,
              (std::vector<std::string>{"VK_KHR_cooperative_matrix", "VK_NV_cooperative_matrix2"}));
    const std::vector<uint32_t> khr = compiler_.compile(source, "workgroup-scope matmul");
    expectRetargeted(nv, khr, "workgroup-scope matmul");
    std::map<uint32_t, uint32_t> constants;
    size_t matrices = 0;
    for (const Instruction &inst : instructionsOf(khr)) {
      if (inst.opcode == OpConstant && inst.operands.size() == 3)
        constants[inst.operands[1]] = inst.operands[2];
      if (inst.opcode == OpTypeCooperativeMatrixKHR) {
        ++matrices;
        EXPECT_EQ(constants.at(inst.operands.at(2)), 2u) << "scope Workgroup";
        EXPECT_GE(constants.at(inst.operands.at(3)), 32u) << "a whole tile's rows";
      }
    }
    EXPECT_EQ(matrices, 3u); // A, B and the accumulator (which the residual starts)
    EXPECT_EQ(codegen::workgroupMemoryBytes(khr), 0u);
  }
}

// What the workgroup-scope kernel cannot do is refused at codegen, naming it: a grouped projection, a norm
// prologue, f32 rows, a K split, outputs or a reduction that the tile does not divide.
TEST(WorkgroupScopeMatMul, RefusesWhatItCannotTile) {
  auto refusal = [](auto change) {
    codegen::MatMulSpec spec = workgroupScopeSpec();
    change(spec);
    try {
      codegen::matmulKernel(spec);
    } catch (const codegen::CodegenError &e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(refusal([](codegen::MatMulSpec &) {}), "");
  const std::string expected =
      "a workgroup-scope matmul is a plain projection of f16 rows, unsplit, in whole tiles";
  EXPECT_EQ(refusal([](codegen::MatMulSpec &s) { s.mode = codegen::MatMulMode::GateUp; }), expected);
  EXPECT_EQ(refusal([](codegen::MatMulSpec &s) { s.halfInput = false, s.norm = true, s.eps = 1e-5; }),
            expected);
  EXPECT_EQ(refusal([](codegen::MatMulSpec &s) { s.halfInput = false; }), expected);
  EXPECT_EQ(refusal([](codegen::MatMulSpec &s) { s.coopTiling.splitK = 2; }), expected);
  EXPECT_EQ(refusal([](codegen::MatMulSpec &s) { s.n = 192; }), expected);
  EXPECT_EQ(refusal([](codegen::MatMulSpec &s) { s.k = 528; }), expected);
}

TEST_F(CooperativeMatrixKHRTest, TensorCoreAttentionRetargets) {
  for (int64_t headDim : {64, 128})
    for (bool halfResult : {false, true}) {
      codegen::AttentionSpec spec{14, 2, headDim, 512, 0.125, 0};
      spec.halfResult = halfResult;
      expectBothWays(codegen::attentionKernel(spec, true), "attention, head dim " + std::to_string(headDim));
    }
}

TEST_F(CooperativeMatrixKHRTest, AModuleWithoutMatricesIsLeftAsItIs) {
  codegen::MatMulSpec spec; // the tiled matmul
  spec.k = 64, spec.n = 64;
  const std::vector<uint32_t> spirv = compiler_.compile(codegen::matmulKernel(spec), "tiled matmul");
  EXPECT_EQ(codegen::retargetToKhrCooperativeMatrix(spirv), spirv);
  codegen::KernelSource source = codegen::matmulKernel(spec);
  codegen::useKhrCooperativeMatrix(source); // no NV extension to move
  EXPECT_FALSE(source.khrCooperativeMatrix);
}

TEST_F(CooperativeMatrixKHRTest, OneMatrixAsBothOperandsIsRefused) {
  // In KHR an A and a B matrix are of different types, so one value cannot be both.
  try {
    compileKhr(R"(  Half a;
  coopMatLoadNV(a, h, 0, 16, false);
  Float c = coopMatMulAddNV(a, a, Float(0.0));
  coopMatStoreNV(c, f, 0, 16, false);
)");
    FAIL() << "no error";
  } catch (const codegen::CodegenError &e) {
    EXPECT_NE(std::string(e.what()).find("both an A and a B operand"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("test kernel"), std::string::npos) << e.what();
  }
}

TEST_F(CooperativeMatrixKHRTest, AConstantGetsACopyForEachUse) {
  // A constant matrix that is the A and the B operand (and a zero accumulator) is declared once a use. (A
  // variable that held it would be one matrix in both places, which is refused above.)
  const std::vector<uint32_t> spirv =
      compileKhr(R"(  Float c = coopMatMulAddNV(Half(1.0), Half(1.0), Float(0.0));
  coopMatStoreNV(c, f, 0, 16, false);
)");
  std::map<uint32_t, uint32_t> constants, uses;
  std::set<uint32_t> matrixConstantUses;
  for (const Instruction &inst : instructionsOf(spirv)) {
    const std::vector<uint32_t> &w = inst.operands;
    if (inst.opcode == OpConstant && w.size() == 3) constants[w[1]] = w[2];
    if (inst.opcode == OpTypeCooperativeMatrixKHR) uses[w[0]] = constants.at(w[5]);
    if (inst.opcode == OpConstantComposite && uses.count(w[0])) matrixConstantUses.insert(uses[w[0]]);
  }
  EXPECT_EQ(matrixConstantUses, (std::set<uint32_t>{0, 1, 2}));
}

TEST_F(CooperativeMatrixKHRTest, RefusesWhatIsNotSpirv) {
  EXPECT_THROW(codegen::retargetToKhrCooperativeMatrix({1, 2, 3}), codegen::CodegenError);
  std::vector<uint32_t> truncated =
      compiler_.compile(codegen::matmulKernel([] {
                          codegen::MatMulSpec spec;
                          spec.variant = codegen::MatMulVariant::Coop;
                          spec.coopTiling = mlir::gerbil::findTargetProfile("nvidia")->coopTiling;
                          spec.weight = plan::DType::F16;
                          spec.k = 64, spec.n = 64;
                          return spec;
                        }()),
                        "coop matmul");
  truncated.back() = (2u << 16) | (truncated.back() & 0xffff); // OpFunctionEnd claims a word past the end
  EXPECT_THROW(codegen::retargetToKhrCooperativeMatrix(truncated), codegen::CodegenError);
}

} // namespace
