// Reader for the golden files written by golden/make_golden.py: NAME.json (config,
// prompt, tensor manifest) and NAME.bin (raw little-endian f32 / bf16 tensors).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qgpu/sdk/tensor_view.h"
#include "qgpu/qwen35/stack.h"

namespace qgpu::torch_backend::testing {
using qwen35::Qwen35Config;

struct GoldenTensor {
  sdk::DType dtype = sdk::DType::kF32;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;  // as stored

  std::int64_t numel() const;
  std::vector<float> to_f32() const;
  // A view over `bytes` (valid while this object lives).
  sdk::TensorView view() const;
};

class Golden {
 public:
  // Loads golden/NAME.{json,bin}; throws std::runtime_error naming the file on failure.
  static Golden load(const std::string& name);

  bool has(const std::string& tensor) const { return tensors_.count(tensor) != 0; }
  // Throws when absent.
  const GoldenTensor& at(const std::string& tensor) const;
  const nlohmann::json& manifest() const { return manifest_; }
  Qwen35Config config() const;
  std::vector<std::int64_t> prompt() const;
  std::vector<std::int64_t> decode() const;
  // Weight names (without "model."), e.g. "layers.0.linear_attn.A_log".
  std::vector<std::string> weight_names() const;

 private:
  nlohmann::json manifest_;
  std::map<std::string, GoldenTensor> tensors_;
};

}  // namespace qgpu::torch_backend::testing
