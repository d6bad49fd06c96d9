// safetensors files, read by memory map: one file, or a sharded checkpoint described by
// model.safetensors.index.json. Every header is checked (size, JSON, dtypes, shapes, offsets inside the file,
// no overlaps) before any tensor is touched; errors name the file and the tensor.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace gerbil::weights {

class WeightError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

enum class TensorDType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };
const char *toString(TensorDType t);
size_t byteSize(TensorDType t);

struct TensorView {
  std::string name;
  TensorDType dtype = TensorDType::F32;
  std::vector<int64_t> shape;
  const uint8_t *data = nullptr;  // points into the mapped file
  uint64_t bytes = 0;
  std::string file;               // the file it lives in, for messages
  int64_t numElements() const;
};

// One memory-mapped safetensors file.
class SafetensorsFile {
public:
  explicit SafetensorsFile(const std::string &path);  // throws WeightError
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile &) = delete;
  SafetensorsFile &operator=(const SafetensorsFile &) = delete;

  const std::string &path() const { return path_; }
  const std::map<std::string, TensorView> &tensors() const { return tensors_; }
  const std::map<std::string, std::string> &metadata() const { return metadata_; }

private:
  std::string path_;
  void *map_ = nullptr;
  size_t mapSize_ = 0;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a checkpoint folder: model.safetensors, or the shards named by model.safetensors.index.json.
class Checkpoint {
public:
  static Checkpoint open(const std::string &folder);  // throws WeightError
  const TensorView *find(const std::string &name) const;
  std::vector<std::string> names() const;
  const std::vector<std::string> &files() const { return files_; }

private:
  std::vector<std::shared_ptr<SafetensorsFile>> shards_;
  std::map<std::string, const TensorView *> index_;
  std::vector<std::string> files_;
};

// Converts `count` elements of a tensor to f32 starting at element `first`.
void convertToF32(const TensorView &t, int64_t first, int64_t count, float *out);

// Writes a safetensors file (used by --dump-logits and by tests).
struct OwnedTensor {
  std::string name;
  TensorDType dtype = TensorDType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};
void writeSafetensors(const std::string &path, const std::vector<OwnedTensor> &tensors,
                      const std::map<std::string, std::string> &metadata = {});

// IEEE half and bfloat16 conversions.
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bfloat16ToFloat(uint16_t b);

} // namespace gerbil::weights
