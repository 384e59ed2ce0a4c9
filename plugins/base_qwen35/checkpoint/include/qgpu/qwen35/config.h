// Qwen3.5 config.json: the multimodal wrapper (model_type qwen3_5, text model
// under text_config) or a plain qwen3_5_text config, as published. Missing
// fields take the Hugging Face defaults of Qwen3_5TextConfig; present fields
// are type-checked and validated together (see docs/CHECKPOINTS.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qgpu/sdk/status.h"

namespace qgpu::qwen35 {

enum class LayerType : std::uint8_t { kLinearAttention, kFullAttention };
std::string_view layer_type_name(LayerType type);  // "linear_attention", "full_attention"

struct RopeParameters {
  std::string rope_type = "default";  // the only type the text model uses
  double rope_theta = 10000.0;        // HF default; every published checkpoint sets 1e7
  double partial_rotary_factor = 0.25;
  std::vector<std::int64_t> mrope_section;  // empty when absent; sums to rotary_dim / 2
  bool mrope_interleaved = false;
};

struct TextConfig {
  std::int64_t vocab_size = 248320;
  std::int64_t hidden_size = 4096;
  std::int64_t intermediate_size = 12288;
  std::int64_t num_hidden_layers = 32;
  std::int64_t num_attention_heads = 16;
  std::int64_t num_key_value_heads = 4;
  std::int64_t head_dim = 256;
  std::string hidden_act = "silu";
  std::int64_t max_position_embeddings = 32768;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  double attention_dropout = 0.0;
  RopeParameters rope;
  std::int64_t linear_conv_kernel_dim = 4;
  std::int64_t linear_key_head_dim = 128;
  std::int64_t linear_value_head_dim = 128;
  std::int64_t linear_num_key_heads = 16;
  std::int64_t linear_num_value_heads = 32;
  std::int64_t full_attention_interval = 4;
  std::vector<LayerType> layer_types;  // num_hidden_layers entries after parsing
  bool layer_types_derived = false;    // true when built from full_attention_interval
  std::vector<std::int64_t> eos_token_ids;
  std::optional<std::int64_t> bos_token_id;
  std::optional<std::int64_t> pad_token_id;
  std::string dtype;  // "bfloat16" etc. as written ("dtype" or legacy "torch_dtype"); empty if absent
  std::int64_t mtp_num_hidden_layers = 0;

  // Derived sizes (QWEN35.md §1.4).
  std::int64_t rotary_dim() const;        // head_dim * partial_rotary_factor
  std::int64_t linear_key_dim() const;    // K = nk * dk
  std::int64_t linear_value_dim() const;  // V = nv * dv
  std::int64_t conv_dim() const { return 2 * linear_key_dim() + linear_value_dim(); }
};

struct ModelConfig {
  std::string model_type;  // "qwen3_5" (wrapper) or "qwen3_5_text"
  bool multimodal_wrapper = false;
  std::vector<std::string> architectures;
  TextConfig text;
};

// The layer pattern HF derives when layer_types is absent: full attention at
// (i + 1) % interval == 0.
std::vector<LayerType> derive_layer_types(std::int64_t num_layers, std::int64_t full_attention_interval);

// Checks the consistency of a config (positive sizes, head divisibility,
// rotary and mrope sizes, layer_types length, token ids). `prefix` names the
// fields in messages ("text_config." for the wrapper).
sdk::Status validate_text_config(const TextConfig& config, std::string_view prefix = "");

// Parses config.json text; `file_name` labels errors ("<file>: error: text_config.hidden_size: ...").
sdk::Expected<ModelConfig> parse_config_json(std::string_view text, std::string_view file_name);
sdk::Expected<ModelConfig> load_config(const std::filesystem::path& file);

// generation_config.json as transformers saves it: the fields text generation uses. Fields absent
// or null keep transformers' global defaults (greedy; temperature 1, top_k 50, top_p 1 when
// sampling). When the file exists its eos_token_id alone decides (absent: no id ends a generation);
// transformers falls back to config.json's only when there is no file.
struct GenerationConfig {
  std::vector<std::int64_t> eos_token_ids;  // eos_token_id: an integer or a list
  bool do_sample = false;
  double temperature = 1.0;  // >= 0
  std::int64_t top_k = 50;   // >= 0; 0: no limit
  double top_p = 1.0;        // in (0, 1]
  std::vector<std::int64_t> suppress_tokens;  // never generated in text (transformers' suppress_tokens)
};

// Parses generation_config.json text; token ids must lie in [0, vocab_size). Errors name the file and
// the field ("<file>: error: eos_token_id[1]: expected an integer, got \"x\"").
sdk::Expected<GenerationConfig> parse_generation_config_json(std::string_view text, std::string_view file_name,
                                                             std::int64_t vocab_size);
sdk::Expected<GenerationConfig> load_generation_config(const std::filesystem::path& file, std::int64_t vocab_size);

// A config.json in the published wrapper shape (architectures, model_type
// qwen3_5, vision token ids, text_config, vision_config) for `text`.
std::string wrapper_config_json(const TextConfig& text);

}  // namespace qgpu::qwen35
