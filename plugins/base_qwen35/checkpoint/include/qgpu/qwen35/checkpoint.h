// A Qwen3.5 checkpoint directory: config.json plus safetensors, checked
// tensor by tensor against the config (QWEN35.md §5).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "qgpu/qwen35/config.h"
#include "qgpu/qwen35/safetensors.h"

namespace qgpu::qwen35 {

// Text weights of the published multimodal checkpoints, and of
// Qwen3_5ForCausalLM-style ones.
inline constexpr std::string_view kWrapperPrefix = "model.language_model.";
inline constexpr std::string_view kCausalLmPrefix = "model.";
// An untied output head, under both naming schemes: at the top level, outside the text prefix.
inline constexpr std::string_view kLmHeadName = "lm_head.weight";

struct ExpectedTensor {
  std::string name;  // full name, prefix included
  std::vector<std::int64_t> shape;
  StDType dtype = StDType::kBF16;  // as published: BF16, except A_log and linear_attn.norm.weight (F32)
};

// Every text tensor the config implies, in model order: names under `prefix`, then
// kLmHeadName (no prefix) only when untied.
std::vector<ExpectedTensor> expected_text_tensors(const TextConfig& config, std::string_view prefix = kWrapperPrefix);

struct CheckOptions {
  // true: each tensor must have the published dtype. false: any of BF16/F16/F32
  // (for checkpoints exported at another precision).
  bool exact_dtypes = true;
};

// "model.language_model." or "model.", from the embedding's name.
sdk::Expected<std::string> detect_text_prefix(const TensorStore& tensors);

// Each expected tensor exists with the right shape and dtype; no unexpected
// tensor sits under the text prefix (model.visual.* and mtp.* are ignored).
sdk::Status check_text_tensors(const TextConfig& config, const TensorStore& tensors, std::string_view prefix,
                               const CheckOptions& options = {});

// An opened, checked checkpoint directory.
class Checkpoint {
 public:
  static sdk::Expected<Checkpoint> open(const std::filesystem::path& dir, const CheckOptions& options = {});

  const std::filesystem::path& dir() const { return dir_; }
  const ModelConfig& config() const { return config_; }
  const TensorStore& tensors() const { return tensors_; }
  const std::string& prefix() const { return prefix_; }
  // A text tensor by its name below the prefix ("layers.0.mlp.up_proj.weight").
  sdk::Expected<TensorRef> text_tensor(std::string_view name) const;
  // lm_head.weight, or the embedding when tied.
  sdk::Expected<TensorRef> lm_head() const;

 private:
  std::filesystem::path dir_;
  ModelConfig config_;
  TensorStore tensors_;
  std::string prefix_;
};

}  // namespace qgpu::qwen35
