// BaseModel: a pretrained model family (config, weights, tokenizer) and its
// forward pass, run through a TensorBackend.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qgpu/sdk/plugin.h"
#include "qgpu/sdk/tensor_backend.h"

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
  std::string checkpoint;  // the directory it was loaded from
  std::int64_t num_layers = 0;
  std::int64_t vocab_size = 0;  // embedding rows
  std::int64_t tokenizer_size = 0;  // ids the tokenizer can produce
  bool tied_embeddings = true;
  std::vector<std::string> layer_types;  // e.g. "linear_attention", "full_attention"
  LayerShapes shapes;
  std::int64_t parameters = 0;  // number of text-model weights
};

struct ChatTurn {
  std::string role;  // "system", "user", "assistant", ...
  std::string content;
};

class QGPU_SDK_API BaseModel : public Plugin {
 public:
  using Interface = BaseModel;
  static constexpr QgpuPluginKind kKind = QGPU_PLUGIN_BASE_MODEL;

  ~BaseModel() override;
  // Opens the configured checkpoint (config, weights, tokenizer), checks it and
  // uploads the weights to `backend`, which must outlive this model.
  virtual Expected<ModelInfo> load(TensorBackend& backend) = 0;

  // --- Tokenizer (after load).
  virtual Expected<std::vector<std::int64_t>> encode(std::string_view text) = 0;
  // Bytes of the ids' text; a character cut at the end stays as raw bytes.
  virtual Expected<std::string> decode(std::span<const std::int64_t> ids) = 0;
  // The model's chat format for a conversation, ending with the assistant's turn opening.
  virtual Expected<std::vector<std::int64_t>> encode_chat(std::span<const ChatTurn> turns) = 0;
  // Ids that end a generation (end of text, end of turn).
  virtual std::vector<std::int64_t> stop_ids() const = 0;

  // --- Forward pass (after load). Runs `ids` after the tokens already seen and
  // returns the logits of the last position as f32, one per embedding row.
  virtual Expected<std::vector<float>> forward(std::span<const std::int64_t> ids) = 0;
  // Starts a new sequence.
  virtual void reset() = 0;
};

}  // namespace qgpu::sdk
