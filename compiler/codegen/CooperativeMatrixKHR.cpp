#include "compiler/codegen/CooperativeMatrixKHR.h"

#include "compiler/codegen/ShaderCompiler.h"

#define SPV_ENABLE_UTILITY_CODE
#include <spirv/unified1/spirv.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <unordered_map>

namespace gerbil::codegen {
namespace {

// SPV_KHR_cooperative_matrix is newer than Debian 12's SPIR-V headers: its numbers, from its specification.
enum : uint32_t {
  OpTypeCooperativeMatrixKHR = 4456,
  OpCooperativeMatrixLoadKHR = 4457,
  OpCooperativeMatrixStoreKHR = 4458,
  OpCooperativeMatrixMulAddKHR = 4459,
  OpCooperativeMatrixLengthKHR = 4460,
  CapabilityCooperativeMatrixKHR = 6022,
};
// A KHR matrix's Use operand, which is also the index of a value's class here.
enum Use : uint32_t { MatrixA = 0, MatrixB = 1, Accumulator = 2 };
constexpr uint32_t kRowMajor = 0, kColumnMajor = 1; // MemoryLayout

struct Instruction {
  uint32_t opcode;
  std::vector<uint32_t> operands; // the words after the first
  size_t at;                      // word offset in the module, for messages
};

[[noreturn]] void fail(const std::string &why, const Instruction *where = nullptr) {
  throw CodegenError("cannot retarget the cooperative matrices to SPV_KHR_cooperative_matrix: " + why +
                     (where ? " (instruction " + std::to_string(where->opcode) + " at word " +
                                  std::to_string(where->at) + ")"
                            : ""));
}

std::string literalString(const std::vector<uint32_t> &words, size_t first) {
  std::string text;
  for (size_t i = first; i < words.size(); ++i)
    for (int byte = 0; byte < 4; ++byte) {
      char c = static_cast<char>((words[i] >> (8 * byte)) & 0xff);
      if (c == '\0') return text;
      text += c;
    }
  return text;
}

std::vector<uint32_t> stringWords(const std::string &text) {
  std::vector<uint32_t> words(text.size() / 4 + 1, 0);
  std::memcpy(words.data(), text.data(), text.size());
  return words;
}

bool isConstantLike(uint32_t opcode) {
  return opcode == spv::OpConstantComposite || opcode == spv::OpConstantNull || opcode == spv::OpUndef ||
         opcode == spv::OpSpecConstantComposite;
}

bool isAnnotation(uint32_t opcode) {
  return opcode == spv::OpName || opcode == spv::OpMemberName || opcode == spv::OpDecorate ||
         opcode == spv::OpMemberDecorate || opcode == spv::OpDecorateId || opcode == spv::OpDecorateString ||
         opcode == spv::OpMemberDecorateString;
}

// Instructions whose matrix result has the use of their matrix operands (every operand an id).
bool keepsUse(uint32_t opcode) {
  switch (opcode) {
  case spv::OpFNegate:
  case spv::OpSNegate:
  case spv::OpFAdd:
  case spv::OpIAdd:
  case spv::OpFSub:
  case spv::OpISub:
  case spv::OpFMul:
  case spv::OpIMul:
  case spv::OpFDiv:
  case spv::OpSDiv:
  case spv::OpUDiv:
  case spv::OpMatrixTimesScalar:
  case spv::OpFConvert:
  case spv::OpSConvert:
  case spv::OpUConvert:
  case spv::OpConvertFToU:
  case spv::OpConvertFToS:
  case spv::OpConvertSToF:
  case spv::OpConvertUToF:
  case spv::OpBitcast:
  case spv::OpCopyObject:
  case spv::OpCopyLogical:
    return true;
  default:
    return false;
  }
}

// The operands of a type declaration that are types: an array's length is a constant, a pointer's storage
// class a literal. Empty for declarations that cannot hold a matrix.
std::vector<size_t> typeOperands(const Instruction &inst) {
  switch (inst.opcode) {
  case spv::OpTypeArray:
  case spv::OpTypeRuntimeArray:
    return {1};
  case spv::OpTypePointer:
    return {2};
  case spv::OpTypeStruct:
  case spv::OpTypeFunction: {
    std::vector<size_t> all;
    for (size_t o = 1; o < inst.operands.size(); ++o) all.push_back(o);
    return all;
  }
  default:
    return {};
  }
}

class Retargeter {
public:
  explicit Retargeter(const std::vector<uint32_t> &spirv) : module_(spirv) {}

  std::vector<uint32_t> run() {
    parse();
    if (matrixTypes_.empty()) return module_;
    link();
    assignUses();
    planTypes();
    return emit();
  }

private:
  // What gives a value its use: another value (whose class it joins), or a fixed use (a multiply-add's
  // operand).
  struct Node {
    bool fixed;
    uint32_t id; // the value, or the Use
  };

  const std::vector<uint32_t> &module_;
  std::vector<Instruction> instructions_;
  uint32_t bound_ = 0;
  std::unordered_map<uint32_t, uint32_t> resultType_; // value id -> its type
  std::unordered_map<uint32_t, const Instruction *> definition_;
  std::set<uint32_t> matrixTypes_; // OpTypeCooperativeMatrixNV
  std::set<uint32_t> holding_;     // types that are or hold (arrays, structs, pointers, functions) matrices
  std::unordered_map<uint32_t, uint32_t> parent_;
  std::vector<std::pair<Node, std::pair<Use, const Instruction *>>> constraints_;
  // Constants (and undefs) that hold matrices get a copy per use: (instruction, operand) -> who uses it.
  std::map<std::pair<size_t, size_t>, Node> constantUses_;
  std::unordered_map<uint32_t, Use> useOfRoot_;
  std::map<std::pair<uint32_t, Use>, uint32_t> specialised_; // (type or constant, use) -> id in the output
  std::map<uint32_t, std::vector<Use>> usesOf_;              // type or constant -> its uses, in order

  bool holds(uint32_t type) const { return holding_.count(type) != 0; }
  bool holdsMatrices(uint32_t value) const {
    auto it = resultType_.find(value);
    return it != resultType_.end() && holds(it->second);
  }
  bool isMatrixConstant(uint32_t id) const {
    auto it = definition_.find(id);
    return it != definition_.end() && isConstantLike(it->second->opcode) && holdsMatrices(id);
  }

  void parse() {
    if (module_.size() < 5 || module_[0] != spv::MagicNumber) fail("not a SPIR-V module");
    bound_ = module_[3];
    instructions_.reserve(module_.size() / 4);
    for (size_t at = 5; at < module_.size();) {
      uint32_t count = module_[at] >> 16;
      if (count == 0 || at + count > module_.size())
        fail("truncated instruction at word " + std::to_string(at));
      instructions_.push_back(
          {module_[at] & 0xffff, {module_.begin() + at + 1, module_.begin() + at + count}, at});
      at += count;
    }
    for (const Instruction &inst : instructions_) {
      bool hasResult = false, hasResultType = false;
      spv::HasResultAndType(static_cast<spv::Op>(inst.opcode), &hasResult, &hasResultType);
      const std::vector<uint32_t> &w = inst.operands;
      if (hasResult && hasResultType && w.size() >= 2) {
        resultType_[w[1]] = w[0];
        definition_[w[1]] = &inst;
      }
      if (inst.opcode == spv::OpTypeCooperativeMatrixNV) {
        matrixTypes_.insert(w.at(0));
        holding_.insert(w.at(0));
      }
      for (size_t o : typeOperands(inst))
        if (holds(w.at(o))) holding_.insert(w.at(0));
    }
  }

  // Union-find over value ids: a class of values shares one use.
  uint32_t root(uint32_t id) {
    auto it = parent_.find(id);
    if (it == parent_.end()) return parent_[id] = id;
    if (it->second == id) return id;
    return it->second = root(it->second);
  }
  // `value` (operand `operand` of instruction `index`) and `other` hold matrices of one use.
  void join(size_t index, size_t operand, Node other) {
    uint32_t value = instructions_[index].operands[operand];
    if (isMatrixConstant(value)) {
      constantUses_[{index, operand}] = other;
      return;
    }
    if (other.fixed) {
      constraints_.push_back({{false, value}, {static_cast<Use>(other.id), &instructions_[index]}});
      return;
    }
    parent_[root(value)] = root(other.id);
  }

  void link() {
    for (size_t i = 0; i < instructions_.size(); ++i) {
      const Instruction &inst = instructions_[i];
      const std::vector<uint32_t> &w = inst.operands;
      bool hasResult = false, hasResultType = false;
      spv::HasResultAndType(static_cast<spv::Op>(inst.opcode), &hasResult, &hasResultType);
      const bool matrixResult = hasResultType && w.size() >= 2 && holds(w[0]);
      const Node result{false, matrixResult ? w[1] : 0};
      switch (inst.opcode) {
      case spv::OpCooperativeMatrixMulAddNV:
        join(i, 2, {true, MatrixA});
        join(i, 3, {true, MatrixB});
        join(i, 4, {true, Accumulator});
        join(i, 1, {true, Accumulator});
        break;
      case spv::OpLoad:
      case spv::OpAccessChain:
      case spv::OpInBoundsAccessChain:
      case spv::OpPtrAccessChain:
      case spv::OpInBoundsPtrAccessChain:
      case spv::OpCompositeExtract:
        if (matrixResult) join(i, 2, result);
        break;
      case spv::OpStore:
        if (holdsMatrices(w.at(0)) || holdsMatrices(w.at(1))) join(i, 1, {false, w[0]});
        break;
      case spv::OpCompositeConstruct:
        if (matrixResult)
          for (size_t o = 2; o < w.size(); ++o)
            if (holdsMatrices(w[o])) join(i, o, result);
        break;
      case spv::OpCompositeInsert:
        if (matrixResult) {
          join(i, 3, result);
          if (holdsMatrices(w.at(2))) join(i, 2, result);
        }
        break;
      case spv::OpPhi:
        if (matrixResult)
          for (size_t o = 2; o < w.size(); o += 2) join(i, o, result);
        break;
      case spv::OpSelect:
        if (matrixResult) {
          join(i, 3, result);
          join(i, 4, result);
        }
        break;
      case spv::OpVariable:
        if (matrixResult && w.size() > 3) join(i, 3, result);
        break;
      case spv::OpFunction:
      case spv::OpFunctionParameter:
      case spv::OpFunctionCall:
      case spv::OpReturnValue: {
        bool passesMatrices = matrixResult || (inst.opcode == spv::OpReturnValue && holdsMatrices(w.at(0)));
        if (inst.opcode == spv::OpFunctionCall)
          for (size_t o = 3; o < w.size(); ++o) passesMatrices = passesMatrices || holdsMatrices(w[o]);
        if (passesMatrices) fail("a function takes or returns cooperative matrices", &inst);
        break;
      }
      case spv::OpCooperativeMatrixLoadNV:
      case spv::OpCooperativeMatrixStoreNV:
      case spv::OpCooperativeMatrixLengthNV:
        break;
      default:
        if (!matrixResult || isConstantLike(inst.opcode)) break;
        if (!keepsUse(inst.opcode))
          fail("an instruction this pass does not know makes a cooperative matrix", &inst);
        for (size_t o = 2; o < w.size(); ++o)
          if (holdsMatrices(w[o])) join(i, o, result);
        break;
      }
    }
  }

  Use useOf(Node node) {
    if (node.fixed) return static_cast<Use>(node.id);
    auto it = useOfRoot_.find(root(node.id));
    return it == useOfRoot_.end() ? Accumulator : it->second; // loaded and stored only: any use will do
  }

  void assignUses() {
    for (const auto &[node, constraint] : constraints_) {
      const auto [use, where] = constraint;
      auto [it, inserted] = useOfRoot_.emplace(root(node.id), use);
      if (!inserted && it->second != use) {
        static const char *operands[] = {"an A", "a B", "an accumulator"};
        fail(std::string("one matrix would be both ") + operands[std::min(use, it->second)] + " and " +
                 operands[std::max(use, it->second)] + " operand",
             where);
      }
    }
  }

  void need(uint32_t id, Use use) {
    std::vector<Use> &uses = usesOf_[id];
    if (std::find(uses.begin(), uses.end(), use) != uses.end()) return;
    uses.push_back(use);
    auto it = definition_.find(id);
    if (it == definition_.end()) return;                   // a type: planTypes passes its uses on
    const std::vector<uint32_t> &w = it->second->operands; // a constant: its type and matrix constituents
    need(w[0], use);
    for (size_t o = 2; o < w.size(); ++o)
      if (isMatrixConstant(w[o])) need(w[o], use);
  }

  // Which copies each type and constant needs, and their ids: the first keeps the original id (so that
  // names and decorations still find it), the others get new ones.
  void planTypes() {
    for (const auto &[value, type] : resultType_)
      if (holds(type) && !isMatrixConstant(value)) need(type, useOf({false, value}));
    for (const auto &[place, user] : constantUses_)
      need(instructions_[place.first].operands[place.second], useOf(user));
    for (const auto &[id, definition] : definition_)
      if (isMatrixConstant(id) && !usesOf_.count(id)) need(id, Accumulator); // never used
    // Types, outermost first: every holding type's operand types need the same uses.
    for (auto it = instructions_.rbegin(); it != instructions_.rend(); ++it) {
      const std::vector<size_t> operands = typeOperands(*it);
      if (operands.empty() || !holds(it->operands[0])) continue;
      const uint32_t type = it->operands[0];
      if (!usesOf_.count(type)) need(type, existingUse(type)); // declared, never used
      for (Use use : std::vector<Use>(usesOf_[type]))
        for (size_t o : operands)
          if (holds(it->operands[o])) need(it->operands[o], use);
    }
    for (uint32_t type : matrixTypes_)
      if (!usesOf_.count(type)) need(type, Accumulator);
    for (const auto &[id, uses] : usesOf_)
      for (size_t k = 0; k < uses.size(); ++k) specialised_[{id, uses[k]}] = k == 0 ? id : bound_++;
  }

  // For a type no value has (a dead function's signature): a use its matrices already have, so that the
  // module declares no matrix type it does not need (a device may not support every use of a shape).
  Use existingUse(uint32_t type) const {
    for (auto it = instructions_.rbegin(); it != instructions_.rend(); ++it) {
      const bool declaration = it->opcode == spv::OpTypeCooperativeMatrixNV || !typeOperands(*it).empty();
      if (!declaration || it->operands.empty() || it->operands[0] != type) continue;
      if (it->opcode == spv::OpTypeCooperativeMatrixNV) {
        auto uses = usesOf_.find(type);
        return uses == usesOf_.end() ? Accumulator : uses->second.front();
      }
      for (size_t o : typeOperands(*it))
        if (holds(it->operands[o])) return existingUse(it->operands[o]);
    }
    return Accumulator;
  }

  uint32_t specialise(uint32_t id, Use use) const {
    auto it = specialised_.find({id, use});
    return it == specialised_.end() ? id : it->second;
  }

  std::vector<uint32_t> emit() {
    // The Use and MemoryLayout operands are ids of 32-bit integer constants, of the type of the matrices'
    // Rows (an existing constant where there is one).
    const Instruction *firstMatrix = nullptr;
    for (const Instruction &inst : instructions_)
      if (inst.opcode == spv::OpTypeCooperativeMatrixNV) {
        firstMatrix = &inst;
        break;
      }
    auto rows = definition_.find(firstMatrix->operands.at(3));
    if (rows == definition_.end() || rows->second->opcode != spv::OpConstant)
      fail("a matrix's rows are not a constant", firstMatrix);
    const uint32_t intType = rows->second->operands[0];
    std::map<uint32_t, uint32_t> intConstant; // declared before the first matrix type, which uses them
    for (const Instruction *inst = instructions_.data(); inst != firstMatrix; ++inst)
      if (inst->opcode == spv::OpConstant && inst->operands.size() == 3 && inst->operands[0] == intType)
        intConstant.emplace(inst->operands[2], inst->operands[1]);
    std::vector<std::vector<uint32_t>> newConstants;
    for (uint32_t value : {uint32_t{MatrixA}, uint32_t{MatrixB}, uint32_t{Accumulator}})
      if (!intConstant.count(value)) {
        intConstant[value] = bound_;
        newConstants.push_back({(4u << 16) | spv::OpConstant, intType, bound_++, value});
      }
    std::unordered_map<uint32_t, bool> booleans;
    for (const Instruction &inst : instructions_)
      if (inst.opcode == spv::OpConstantTrue || inst.opcode == spv::OpConstantFalse)
        booleans[inst.operands.at(1)] = inst.opcode == spv::OpConstantTrue;
    auto layout = [&](uint32_t columnMajor, const Instruction &inst) {
      auto it = booleans.find(columnMajor);
      if (it == booleans.end()) fail("a matrix load or store's layout is not a constant", &inst);
      return intConstant.at(it->second ? kColumnMajor : kRowMajor);
    };

    std::vector<uint32_t> out(module_.begin(), module_.begin() + 5);
    auto put = [&](uint32_t opcode, const std::vector<uint32_t> &operands) {
      out.push_back(static_cast<uint32_t>((operands.size() + 1) << 16) | opcode);
      out.insert(out.end(), operands.begin(), operands.end());
    };
    for (size_t i = 0; i < instructions_.size(); ++i) {
      const Instruction &inst = instructions_[i];
      std::vector<uint32_t> w = inst.operands;
      switch (inst.opcode) {
      case spv::OpCapability:
        if (w.at(0) == spv::CapabilityCooperativeMatrixNV) w[0] = CapabilityCooperativeMatrixKHR;
        put(inst.opcode, w);
        continue;
      case spv::OpExtension:
        if (literalString(w, 0) == "SPV_NV_cooperative_matrix") w = stringWords("SPV_KHR_cooperative_matrix");
        put(inst.opcode, w);
        continue;
      case spv::OpTypeCooperativeMatrixNV:
        if (&inst == firstMatrix)
          for (const std::vector<uint32_t> &constant : newConstants)
            out.insert(out.end(), constant.begin(), constant.end());
        for (Use use : usesOf_.at(w[0]))
          put(OpTypeCooperativeMatrixKHR,
              {specialise(w[0], use), w.at(1), w.at(2), w.at(3), w.at(4), intConstant.at(use)});
        continue;
      case spv::OpTypeArray:
      case spv::OpTypeRuntimeArray:
      case spv::OpTypePointer:
      case spv::OpTypeStruct:
      case spv::OpTypeFunction:
        if (!holds(w.at(0))) break;
        for (Use use : usesOf_.at(w[0])) {
          std::vector<uint32_t> copy = w;
          copy[0] = specialise(w[0], use);
          for (size_t o : typeOperands(inst))
            if (holds(copy[o])) copy[o] = specialise(copy[o], use);
          put(inst.opcode, copy);
        }
        continue;
      default:
        break;
      }
      if (isAnnotation(inst.opcode) && !w.empty() && usesOf_.count(w[0])) {
        for (Use use : usesOf_.at(w[0])) {
          std::vector<uint32_t> copy = w;
          copy[0] = specialise(w[0], use);
          put(inst.opcode, copy);
        }
        continue;
      }
      if (isConstantLike(inst.opcode) && w.size() >= 2 && holds(w[0])) {
        for (Use use : usesOf_.at(w[1])) {
          std::vector<uint32_t> copy = w;
          copy[0] = specialise(w[0], use);
          copy[1] = specialise(w[1], use);
          for (size_t o = 2; o < copy.size(); ++o)
            if (isMatrixConstant(copy[o])) copy[o] = specialise(copy[o], use);
          put(inst.opcode, copy);
        }
        continue;
      }
      bool hasResult = false, hasResultType = false;
      spv::HasResultAndType(static_cast<spv::Op>(inst.opcode), &hasResult, &hasResultType);
      if (hasResultType && w.size() >= 2 && holds(w[0])) w[0] = specialise(w[0], useOf({false, w[1]}));
      for (size_t o = 0; o < w.size(); ++o)
        if (auto it = constantUses_.find({i, o}); it != constantUses_.end())
          w[o] = specialise(w[o], useOf(it->second));
      switch (inst.opcode) {
      case spv::OpCooperativeMatrixLoadNV: { // type, result, pointer, stride, column-major, memory access...
        std::vector<uint32_t> khr = {w.at(0), w.at(1), w.at(2), layout(w.at(4), inst), w.at(3)};
        khr.insert(khr.end(), w.begin() + 5, w.end());
        put(OpCooperativeMatrixLoadKHR, khr);
        break;
      }
      case spv::OpCooperativeMatrixStoreNV: { // pointer, object, stride, column-major, memory access...
        std::vector<uint32_t> khr = {w.at(0), w.at(1), layout(w.at(3), inst), w.at(2)};
        khr.insert(khr.end(), w.begin() + 4, w.end());
        put(OpCooperativeMatrixStoreKHR, khr);
        break;
      }
      case spv::OpCooperativeMatrixMulAddNV:
        put(OpCooperativeMatrixMulAddKHR, w);
        break;
      case spv::OpCooperativeMatrixLengthNV: {
        const std::vector<Use> &uses = usesOf_.at(w.at(2));
        if (uses.size() != 1) fail("the length of a matrix type that has several uses", &inst);
        put(OpCooperativeMatrixLengthKHR, {w[0], w[1], specialise(w[2], uses[0])});
        break;
      }
      default:
        put(inst.opcode, w);
        break;
      }
    }
    out[3] = bound_;
    return out;
  }
};

} // namespace

std::vector<uint32_t> retargetToKhrCooperativeMatrix(const std::vector<uint32_t> &spirv) {
  return Retargeter(spirv).run();
}

} // namespace gerbil::codegen
