// BaseModel: a pretrained model family (config, weights, tokenizer).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qgpu/sdk/plugin.h"

namespace qgpu::sdk {

// The shapes a machine's circuit must be compiled into (per-layer sizes of
// the base, which the added layers reuse).
struct LayerShapes {
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;  // SwiGLU width
  std::int64_t linear_num_key_heads = 0;
  std::int64_t linear_num_value_heads = 0;
  std::int64_t linear_key_head_dim = 0;
  std::int64_t linear_value_head_dim = 0;
  std::int64_t linear_conv_kernel = 0;
  double rms_norm_eps = 0;
};

struct ModelInfo {
  std::string checkpoint;  // where it was loaded from
  std::int64_t num_layers = 0;
  std::int64_t vocab_size = 0;
  std::vector<std::string> layer_types;  // e.g. "linear_attention", "full_attention"
  LayerShapes shapes;
};

class QGPU_SDK_API BaseModel : public Plugin {
 public:
  using Interface = BaseModel;
  static constexpr QgpuPluginKind kKind = QGPU_PLUGIN_BASE_MODEL;

  ~BaseModel() override;
  // Opens the configured checkpoint (config, weights, tokenizer) and reports its shape.
  virtual Expected<ModelInfo> load() = 0;
};

}  // namespace qgpu::sdk
