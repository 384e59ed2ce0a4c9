// base_qwen35: Qwen3.5 checkpoints (config.json, safetensors, tokenizer.json).
//
// This build provides the descriptor, options and description. Checkpoint
// loading arrives with the base-model issue; until then load() answers "not
// available in this build".
#include <array>
#include <string>

#include "qgpu/sdk/sdk.h"

namespace qgpu::qwen35 {
namespace {

constexpr std::array kOptions = {
    sdk::option_path("checkpoint", "synthetic", "synthetic",
                     "Qwen3.5 checkpoint directory, or 'synthetic' for the generated 2B-shaped default"),
};

class Qwen35Base final : public sdk::BaseModel {
 public:
  explicit Qwen35Base(const sdk::PluginContext& context) : options_(context.options) {}

  sdk::Expected<sdk::Description> describe() const override {
    auto checkpoint = options_.get_string("checkpoint");
    if (!checkpoint) return checkpoint.error();
    sdk::Description d;
    d.properties = {
        {"family", "Qwen3.5 (Gated DeltaNet + gated full attention, SwiGLU, tied embeddings)"},
        {"checkpoint", *checkpoint},
    };
    d.capabilities = {
        {"load", false, "not available in this build (config.json + safetensors loader arrives with the base issue)"},
        {"tokenizer", false, "not available in this build"},
        {"forward", false, "not available in this build"},
    };
    return d;
  }

  sdk::Expected<sdk::ModelInfo> load() override {
    return sdk::not_available("loading checkpoint '" + options_.get_string("checkpoint").value() +
                              "' (base_qwen35)");
  }

 private:
  sdk::Options options_;
};

}  // namespace
}  // namespace qgpu::qwen35

QGPU_DEFINE_PLUGIN(qgpu::qwen35::Qwen35Base, "base_qwen35", "0.1.0",
                   "Qwen3.5 base model: config, safetensors weights, tokenizer, chat template", qgpu::qwen35::kOptions)
