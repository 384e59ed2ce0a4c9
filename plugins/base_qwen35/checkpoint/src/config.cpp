// config.json parsing and validation for Qwen3.5 text models.
#include "qgpu/qwen35/config.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "util.h"

namespace qgpu::qwen35 {

using nlohmann::json;
using sdk::ErrorCode;
using sdk::Expected;
using sdk::Status;

namespace {

std::string describe(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number()) return printable(v.dump());
  if (v.is_string()) return "\"" + printable(v.get<std::string>()) + "\"";
  if (v.is_array()) return "an array";
  return "an object";
}

// Reads typed fields of one JSON object; the first error wins and names the field.
class FieldReader {
 public:
  FieldReader(const json& object, std::string prefix, std::string file)
      : object_(object), prefix_(std::move(prefix)), file_(std::move(file)) {}

  const Status& status() const { return status_; }
  void merge(const Status& other) {
    if (status_) status_ = other;
  }
  bool has(const char* key) const { return object_.contains(key); }
  const json* find(const char* key) const {
    auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }
  std::string field(std::string_view key) const { return prefix_ + std::string(key); }

  void fail(std::string_view key, const std::string& message, ErrorCode code = ErrorCode::kInvalidArgument) {
    if (status_) status_ = sdk::error_at(file_, code, field(key) + ": " + message);
  }

  void get_int(const char* key, std::int64_t& out) {
    const json* v = find(key);
    if (!v) return;
    if (!v->is_number_integer() || (v->is_number_unsigned() && v->get<std::uint64_t>() > INT64_MAX)) {
      fail(key, "expected an integer, got " + describe(*v));
      return;
    }
    out = v->get<std::int64_t>();
  }
  void get_double(const char* key, double& out) {
    const json* v = find(key);
    if (!v) return;
    if (!v->is_number()) {
      fail(key, "expected a number, got " + describe(*v));
      return;
    }
    out = v->get<double>();
  }
  void get_bool(const char* key, bool& out) {
    const json* v = find(key);
    if (!v) return;
    if (!v->is_boolean()) {
      fail(key, "expected true or false, got " + describe(*v));
      return;
    }
    out = v->get<bool>();
  }
  void get_string(const char* key, std::string& out) {
    const json* v = find(key);
    if (!v) return;
    if (!v->is_string()) {
      fail(key, "expected a string, got " + describe(*v));
      return;
    }
    out = v->get<std::string>();
  }
  // null or absent leaves `out` empty.
  void get_optional_int(const char* key, std::optional<std::int64_t>& out) {
    const json* v = find(key);
    if (!v || v->is_null()) return;
    std::int64_t x = 0;
    get_int(key, x);
    if (status_) out = x;
  }
  // An integer or a list of integers (eos_token_id takes both forms).
  void get_int_list(const char* key, std::vector<std::int64_t>& out) {
    const json* v = find(key);
    if (!v || v->is_null()) return;
    if (v->is_number_integer()) {
      out = {v->get<std::int64_t>()};
      return;
    }
    if (!v->is_array()) {
      fail(key, "expected an integer or a list of integers, got " + describe(*v));
      return;
    }
    out.clear();
    for (std::size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_number_integer()) {
        fail(std::string(key) + "[" + std::to_string(i) + "]", "expected an integer, got " + describe((*v)[i]));
        return;
      }
      out.push_back((*v)[i].get<std::int64_t>());
    }
  }
  // Fields HF ignores for the text model: only their type is checked.
  void check_type(const char* key, json::value_t type, const char* what) {
    const json* v = find(key);
    if (v && !v->is_null() && v->type() != type && !(type == json::value_t::number_integer && v->is_number_integer())) {
      fail(key, std::string("expected ") + what + ", got " + describe(*v));
    }
  }

 private:
  const json& object_;
  std::string prefix_;
  std::string file_;
  Status status_;
};

void read_rope(FieldReader& top, TextConfig& c, const std::string& prefix, const std::string& file) {
  const json* rp = top.find("rope_parameters");
  const char* rope_key = "rope_parameters";
  if (!rp || rp->is_null()) {  // older configs: top-level rope_theta and rope_scaling
    top.get_double("rope_theta", c.rope.rope_theta);
    top.get_double("partial_rotary_factor", c.rope.partial_rotary_factor);
    rp = top.find("rope_scaling");
    rope_key = "rope_scaling";
    if (!rp || rp->is_null()) return;
  }
  if (!rp->is_object()) {
    top.fail(rope_key, "expected an object, got " + describe(*rp));
    return;
  }
  FieldReader r(*rp, prefix + rope_key + ".", file);
  std::string type = c.rope.rope_type;
  if (const json* t = r.find("rope_type"); t && t->is_string()) {
    r.get_string("rope_type", type);
  } else if (r.has("type")) {  // legacy spelling
    r.get_string("type", type);
  } else {
    r.get_string("rope_type", type);
  }
  // "mrope" is the legacy name of the default rotary with mrope sections.
  if (type == "mrope") type = "default";
  c.rope.rope_type = type;
  r.get_double("rope_theta", c.rope.rope_theta);
  r.get_double("partial_rotary_factor", c.rope.partial_rotary_factor);
  r.get_bool("mrope_interleaved", c.rope.mrope_interleaved);
  if (const json* s = r.find("mrope_section"); s && !s->is_null()) {
    if (!s->is_array()) {
      r.fail("mrope_section", "expected a list of integers, got " + describe(*s));
    } else {
      for (std::size_t i = 0; i < s->size(); ++i) {
        const json& x = (*s)[i];
        if (!x.is_number_unsigned() || x.get<std::uint64_t>() > (std::uint64_t{1} << 31)) {
          r.fail("mrope_section[" + std::to_string(i) + "]",
                 "expected an integer in [0, 2^31], got " + describe((*s)[i]));
          break;
        }
        c.rope.mrope_section.push_back((*s)[i].get<std::int64_t>());
      }
    }
  }
  if (r.status() && c.rope.rope_type != "default") {
    r.fail("rope_type", "'" + printable(c.rope.rope_type) + "' is not supported (only 'default')",
           ErrorCode::kUnsupported);
  }
  top.merge(r.status());
}

Status parse_text(const json& text, const std::string& prefix, const std::string& file, TextConfig& c) {
  FieldReader r(text, prefix, file);
  r.get_int("vocab_size", c.vocab_size);
  r.get_int("hidden_size", c.hidden_size);
  r.get_int("intermediate_size", c.intermediate_size);
  r.get_int("num_hidden_layers", c.num_hidden_layers);
  r.get_int("num_attention_heads", c.num_attention_heads);
  r.get_int("num_key_value_heads", c.num_key_value_heads);
  if (const json* hd = r.find("head_dim"); hd && !hd->is_null()) r.get_int("head_dim", c.head_dim);
  r.get_string("hidden_act", c.hidden_act);
  r.get_int("max_position_embeddings", c.max_position_embeddings);
  r.get_double("rms_norm_eps", c.rms_norm_eps);
  r.get_bool("tie_word_embeddings", c.tie_word_embeddings);
  r.get_bool("attention_bias", c.attention_bias);
  r.get_double("attention_dropout", c.attention_dropout);
  r.get_int("linear_conv_kernel_dim", c.linear_conv_kernel_dim);
  r.get_int("linear_key_head_dim", c.linear_key_head_dim);
  r.get_int("linear_value_head_dim", c.linear_value_head_dim);
  r.get_int("linear_num_key_heads", c.linear_num_key_heads);
  r.get_int("linear_num_value_heads", c.linear_num_value_heads);
  r.get_int("full_attention_interval", c.full_attention_interval);
  r.get_int_list("eos_token_id", c.eos_token_ids);
  r.get_optional_int("bos_token_id", c.bos_token_id);
  r.get_optional_int("pad_token_id", c.pad_token_id);
  if (r.has("dtype")) {
    r.get_string("dtype", c.dtype);
  } else {
    r.get_string("torch_dtype", c.dtype);
  }
  if (const json* m = r.find("mtp_num_hidden_layers"); m && !m->is_null())
    r.get_int("mtp_num_hidden_layers", c.mtp_num_hidden_layers);
  // Present in published configs, ignored by the HF text model: types only.
  r.check_type("attn_output_gate", json::value_t::boolean, "true or false");
  r.check_type("mamba_ssm_dtype", json::value_t::string, "a string");
  r.check_type("mlp_only_layers", json::value_t::array, "a list");
  r.check_type("mtp_use_dedicated_embeddings", json::value_t::boolean, "true or false");
  r.check_type("use_cache", json::value_t::boolean, "true or false");
  if (r.status()) read_rope(r, c, prefix, file);
  QGPU_RETURN_IF_ERROR(r.status());

  if (const json* lt = r.find("layer_types"); lt && !lt->is_null()) {
    if (!lt->is_array()) {
      return sdk::error_at(file, ErrorCode::kInvalidArgument,
                           prefix + "layer_types: expected a list of strings, got " + describe(*lt));
    }
    for (std::size_t i = 0; i < lt->size(); ++i) {
      const json& t = (*lt)[i];
      const std::string field = prefix + "layer_types[" + std::to_string(i) + "]";
      if (!t.is_string()) {
        return sdk::error_at(file, ErrorCode::kInvalidArgument, field + ": expected a string, got " + describe(t));
      }
      const auto& name = t.get_ref<const std::string&>();
      if (name == "linear_attention") {
        c.layer_types.push_back(LayerType::kLinearAttention);
      } else if (name == "full_attention") {
        c.layer_types.push_back(LayerType::kFullAttention);
      } else {
        return sdk::error_at(
            file, ErrorCode::kInvalidArgument,
            field + ": unknown layer type '" + printable(name) + "' (expected linear_attention or full_attention)");
      }
    }
  } else if (c.num_hidden_layers > 0 && c.full_attention_interval > 0) {
    c.layer_types = derive_layer_types(c.num_hidden_layers, c.full_attention_interval);
    c.layer_types_derived = true;
  }
  Status v = validate_text_config(c, prefix);
  if (!v) return sdk::error_at(file, v.code(), v.message());
  return Status::ok();
}

}  // namespace

std::string_view layer_type_name(LayerType type) {
  return type == LayerType::kFullAttention ? "full_attention" : "linear_attention";
}

std::int64_t TextConfig::rotary_dim() const {
  return static_cast<std::int64_t>(std::llround(static_cast<double>(head_dim) * rope.partial_rotary_factor));
}
std::int64_t TextConfig::linear_key_dim() const {
  return linear_num_key_heads * linear_key_head_dim;
}
std::int64_t TextConfig::linear_value_dim() const {
  return linear_num_value_heads * linear_value_head_dim;
}

std::vector<LayerType> derive_layer_types(std::int64_t num_layers, std::int64_t interval) {
  std::vector<LayerType> out;
  for (std::int64_t i = 0; i < num_layers; ++i) {
    out.push_back(interval > 0 && (i + 1) % interval == 0 ? LayerType::kFullAttention : LayerType::kLinearAttention);
  }
  return out;
}

Status validate_text_config(const TextConfig& c, std::string_view prefix) {
  const std::string p(prefix);
  auto bad = [&](std::string_view field, const std::string& message) {
    return sdk::invalid_argument(p + std::string(field) + ": " + message);
  };
  // Sizes multiply into tensor shapes: keep each below 2^31 so products stay in 64 bits.
  constexpr std::int64_t kMaxSize = std::int64_t{1} << 31;
  const std::pair<const char*, std::int64_t> sizes[] = {
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_hidden_layers},
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_key_value_heads},
      {"head_dim", c.head_dim},
      {"max_position_embeddings", c.max_position_embeddings},
      {"linear_conv_kernel_dim", c.linear_conv_kernel_dim},
      {"linear_key_head_dim", c.linear_key_head_dim},
      {"linear_value_head_dim", c.linear_value_head_dim},
      {"linear_num_key_heads", c.linear_num_key_heads},
      {"linear_num_value_heads", c.linear_num_value_heads},
      {"full_attention_interval", c.full_attention_interval},
  };
  for (const auto& [name, value] : sizes) {
    if (value <= 0) return bad(name, "must be positive, got " + std::to_string(value));
    if (value >= kMaxSize) {
      return bad(name, std::to_string(value) + " exceeds the limit of " + std::to_string(kMaxSize - 1) + " by " +
                           std::to_string(value - kMaxSize + 1));
    }
  }
  if (c.num_hidden_layers > 4096)
    return bad("num_hidden_layers", std::to_string(c.num_hidden_layers) + " exceeds the limit of 4096 by " +
                                        std::to_string(c.num_hidden_layers - 4096));
  if (c.mtp_num_hidden_layers < 0) return bad("mtp_num_hidden_layers", "must not be negative");
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    return bad("num_attention_heads", std::to_string(c.num_attention_heads) +
                                          " is not a multiple of num_key_value_heads (" +
                                          std::to_string(c.num_key_value_heads) + ")");
  }
  if (c.linear_num_value_heads % c.linear_num_key_heads != 0) {
    return bad("linear_num_value_heads", std::to_string(c.linear_num_value_heads) +
                                             " is not a multiple of linear_num_key_heads (" +
                                             std::to_string(c.linear_num_key_heads) + ")");
  }
  if (c.hidden_act != "silu" && c.hidden_act != "swish") {
    return sdk::unsupported(p + "hidden_act: '" + printable(c.hidden_act) + "' is not supported (only 'silu')");
  }
  if (c.attention_bias) return sdk::unsupported(p + "attention_bias: true is not supported (Qwen3.5 has no biases)");
  if (!(c.rms_norm_eps > 0) || !std::isfinite(c.rms_norm_eps) || c.rms_norm_eps >= 1) {
    return bad("rms_norm_eps", "must be in (0, 1), got " + std::to_string(c.rms_norm_eps));
  }
  if (!(c.attention_dropout >= 0 && c.attention_dropout < 1)) {
    return bad("attention_dropout", "must be in [0, 1), got " + std::to_string(c.attention_dropout));
  }
  const std::string rope = p + "rope_parameters.";
  if (!(c.rope.rope_theta > 0) || !std::isfinite(c.rope.rope_theta)) {
    return sdk::invalid_argument(rope + "rope_theta: must be positive, got " + std::to_string(c.rope.rope_theta));
  }
  const double prf = c.rope.partial_rotary_factor;
  if (!(prf > 0 && prf <= 1)) {
    return sdk::invalid_argument(rope + "partial_rotary_factor: must be in (0, 1], got " + std::to_string(prf));
  }
  const double rot = static_cast<double>(c.head_dim) * prf;
  if (rot != std::floor(rot) || static_cast<std::int64_t>(rot) % 2 != 0) {
    return sdk::invalid_argument(rope + "partial_rotary_factor: head_dim " + std::to_string(c.head_dim) + " x " +
                                 std::to_string(prf) + " is not an even number of rotary dims");
  }
  if (!c.rope.mrope_section.empty()) {
    std::int64_t sum = 0;
    for (auto s : c.rope.mrope_section) sum += s;
    if (2 * sum != c.rotary_dim()) {
      return sdk::invalid_argument(rope + "mrope_section: sums to " + std::to_string(sum) + ", but rotary dim " +
                                   std::to_string(c.rotary_dim()) + " needs " + std::to_string(c.rotary_dim() / 2));
    }
  }
  if (static_cast<std::int64_t>(c.layer_types.size()) != c.num_hidden_layers) {
    return bad("layer_types", "has " + std::to_string(c.layer_types.size()) + " entries but num_hidden_layers is " +
                                  std::to_string(c.num_hidden_layers));
  }
  for (std::size_t i = 0; i < c.eos_token_ids.size(); ++i) {
    const auto id = c.eos_token_ids[i];
    if (id < 0 || id >= c.vocab_size) {
      return bad("eos_token_id",
                 std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
    }
  }
  for (const auto& [name, id] :
       {std::pair{"bos_token_id", c.bos_token_id}, std::pair{"pad_token_id", c.pad_token_id}}) {
    if (id && (*id < 0 || *id >= c.vocab_size)) {
      return bad(name, std::to_string(*id) + " is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
    }
  }
  return Status::ok();
}

namespace {

Expected<ModelConfig> parse_config_impl(std::string_view text, const std::string& file) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    return sdk::error_at(line_col(file, text, e.byte), ErrorCode::kParseError, "invalid JSON");
  } catch (const json::exception& e) {  // out_of_range: a number beyond double
    return sdk::error_at(file, ErrorCode::kParseError, "invalid JSON: a number is out of range");
  }
  if (!root.is_object()) return sdk::error_at(file, ErrorCode::kParseError, "expected a JSON object");
  ModelConfig config;
  FieldReader top(root, "", file);
  top.get_string("model_type", config.model_type);
  QGPU_RETURN_IF_ERROR(top.status());
  if (const json* a = top.find("architectures"); a && !a->is_null()) {
    if (!a->is_array())
      return sdk::error_at(file, ErrorCode::kInvalidArgument, "architectures: expected a list of strings");
    for (const auto& s : *a) {
      if (!s.is_string()) {
        return sdk::error_at(file, ErrorCode::kInvalidArgument, "architectures: expected a list of strings");
      }
      config.architectures.push_back(s.get<std::string>());
    }
  }
  const json* text_config = top.find("text_config");
  if (config.model_type == "qwen3_5" || (config.model_type.empty() && text_config)) {
    if (!text_config)
      return sdk::error_at(file, ErrorCode::kInvalidArgument,
                           "text_config: missing (model_type qwen3_5 nests the text model there)");
    if (!text_config->is_object()) {
      return sdk::error_at(file, ErrorCode::kInvalidArgument,
                           "text_config: expected an object, got " + describe(*text_config));
    }
    config.multimodal_wrapper = true;
    std::string inner_type;
    FieldReader inner(*text_config, "text_config.", file);
    inner.get_string("model_type", inner_type);
    QGPU_RETURN_IF_ERROR(inner.status());
    if (!inner_type.empty() && inner_type != "qwen3_5_text") {
      return sdk::error_at(file, ErrorCode::kInvalidArgument,
                           "text_config.model_type: '" + printable(inner_type) + "' is not qwen3_5_text");
    }
    // The top-level flag is the one HF uses for the multimodal model; refuse a contradiction.
    bool top_tie = false, inner_tie = false;
    top.get_bool("tie_word_embeddings", top_tie);
    inner.get_bool("tie_word_embeddings", inner_tie);
    QGPU_RETURN_IF_ERROR(top.status());
    QGPU_RETURN_IF_ERROR(inner.status());
    QGPU_RETURN_IF_ERROR(parse_text(*text_config, "text_config.", file, config.text));
    if (top.has("tie_word_embeddings")) {
      if (inner.has("tie_word_embeddings") && top_tie != inner_tie) {
        return sdk::error_at(file, ErrorCode::kInvalidArgument,
                             std::string("tie_word_embeddings: top level says ") + (top_tie ? "true" : "false") +
                                 ", text_config says " + (inner_tie ? "true" : "false"));
      }
      config.text.tie_word_embeddings = top_tie;
    }
    if (config.model_type.empty()) config.model_type = "qwen3_5";
  } else if (config.model_type == "qwen3_5_text") {
    QGPU_RETURN_IF_ERROR(parse_text(root, "", file, config.text));
  } else if (config.model_type.empty()) {
    return sdk::error_at(file, ErrorCode::kInvalidArgument, "model_type: missing (expected qwen3_5 or qwen3_5_text)");
  } else {
    return sdk::error_at(file, ErrorCode::kUnsupported,
                         "model_type: '" + printable(config.model_type) +
                             "' is not a Qwen3.5 config (expected qwen3_5 or qwen3_5_text)");
  }
  return config;
}

}  // namespace

Expected<ModelConfig> parse_config_json(std::string_view text, std::string_view file_name) {
  const std::string file(file_name);
  try {
    return parse_config_impl(text, file);
  } catch (const std::exception& e) {  // a bug; never let it cross the plugin boundary
    return sdk::error_at(file, ErrorCode::kInternal, std::string("unexpected error while parsing: ") + e.what());
  }
}

namespace {

Expected<std::string> read_text_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::error_code ec;
    return sdk::error_at(file.string(), std::filesystem::exists(file, ec) ? ErrorCode::kIoError : ErrorCode::kNotFound,
                         "cannot open config");
  }
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

Expected<GenerationConfig> parse_generation_config_impl(std::string_view text, const std::string& file,
                                                        std::int64_t vocab_size) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    return sdk::error_at(line_col(file, text, e.byte), ErrorCode::kParseError, "invalid JSON");
  } catch (const json::exception& e) {
    return sdk::error_at(file, ErrorCode::kParseError, "invalid JSON: a number is out of range");
  }
  if (!root.is_object()) return sdk::error_at(file, ErrorCode::kParseError, "expected a JSON object");
  GenerationConfig g;
  FieldReader r(root, "", file);
  r.get_int_list("eos_token_id", g.eos_token_ids);
  // null means "unset" in transformers: the global default stays.
  if (const json* v = r.find("do_sample"); v && !v->is_null()) r.get_bool("do_sample", g.do_sample);
  if (const json* v = r.find("temperature"); v && !v->is_null()) r.get_double("temperature", g.temperature);
  if (const json* v = r.find("top_k"); v && !v->is_null()) r.get_int("top_k", g.top_k);
  if (const json* v = r.find("top_p"); v && !v->is_null()) r.get_double("top_p", g.top_p);
  if (const json* v = r.find("suppress_tokens"); v && !v->is_null()) r.get_int_list("suppress_tokens", g.suppress_tokens);
  QGPU_RETURN_IF_ERROR(r.status());
  for (std::size_t i = 0; i < g.suppress_tokens.size(); ++i)
    if (g.suppress_tokens[i] < 0 || g.suppress_tokens[i] >= vocab_size)
      return sdk::error_at(file, ErrorCode::kInvalidArgument,
                           "suppress_tokens[" + std::to_string(i) + "]: " + std::to_string(g.suppress_tokens[i]) +
                               " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
  const json* eos = r.find("eos_token_id");
  for (std::size_t i = 0; i < g.eos_token_ids.size(); ++i) {
    const auto id = g.eos_token_ids[i];
    if (id < 0 || id >= vocab_size) {
      const std::string field = eos->is_array() ? "eos_token_id[" + std::to_string(i) + "]" : "eos_token_id";
      return sdk::error_at(
          file, ErrorCode::kInvalidArgument,
          field + ": " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
    }
  }
  if (!(g.temperature >= 0) || !std::isfinite(g.temperature)) {
    return sdk::error_at(file, ErrorCode::kInvalidArgument,
                         "temperature: must be a finite number >= 0, got " + std::to_string(g.temperature));
  }
  if (g.top_k < 0) {
    return sdk::error_at(file, ErrorCode::kInvalidArgument, "top_k: must be >= 0, got " + std::to_string(g.top_k));
  }
  if (!(g.top_p > 0 && g.top_p <= 1)) {
    return sdk::error_at(file, ErrorCode::kInvalidArgument, "top_p: must be in (0, 1], got " + std::to_string(g.top_p));
  }
  return g;
}

}  // namespace

Expected<ModelConfig> load_config(const std::filesystem::path& file) {
  auto text = read_text_file(file);
  if (!text) return text.error();
  return parse_config_json(*text, file.string());
}

Expected<GenerationConfig> parse_generation_config_json(std::string_view text, std::string_view file_name,
                                                        std::int64_t vocab_size) {
  const std::string file(file_name);
  try {
    return parse_generation_config_impl(text, file, vocab_size);
  } catch (const std::exception& e) {  // a bug; never let it cross the plugin boundary
    return sdk::error_at(file, ErrorCode::kInternal, std::string("unexpected error while parsing: ") + e.what());
  }
}

Expected<GenerationConfig> load_generation_config(const std::filesystem::path& file, std::int64_t vocab_size) {
  auto text = read_text_file(file);
  if (!text) return text.error();
  return parse_generation_config_json(*text, file.string(), vocab_size);
}

std::string wrapper_config_json(const TextConfig& c) {
  // Key order follows the published files (nlohmann::ordered_json keeps insertion order).
  nlohmann::ordered_json t;
  t["attention_bias"] = c.attention_bias;
  t["attention_dropout"] = c.attention_dropout;
  t["attn_output_gate"] = true;
  t["dtype"] = c.dtype.empty() ? "bfloat16" : c.dtype;
  if (c.eos_token_ids.size() == 1) {
    t["eos_token_id"] = c.eos_token_ids[0];
  } else if (!c.eos_token_ids.empty()) {
    t["eos_token_id"] = c.eos_token_ids;
  }
  t["full_attention_interval"] = c.full_attention_interval;
  t["head_dim"] = c.head_dim;
  t["hidden_act"] = c.hidden_act;
  t["hidden_size"] = c.hidden_size;
  t["initializer_range"] = 0.02;
  t["intermediate_size"] = c.intermediate_size;
  auto types = nlohmann::ordered_json::array();
  for (auto lt : c.layer_types) types.push_back(std::string(layer_type_name(lt)));
  t["layer_types"] = types;
  t["linear_conv_kernel_dim"] = c.linear_conv_kernel_dim;
  t["linear_key_head_dim"] = c.linear_key_head_dim;
  t["linear_num_key_heads"] = c.linear_num_key_heads;
  t["linear_num_value_heads"] = c.linear_num_value_heads;
  t["linear_value_head_dim"] = c.linear_value_head_dim;
  t["mamba_ssm_dtype"] = "float32";
  t["max_position_embeddings"] = c.max_position_embeddings;
  t["mlp_only_layers"] = nlohmann::ordered_json::array();
  t["model_type"] = "qwen3_5_text";
  t["mtp_num_hidden_layers"] = c.mtp_num_hidden_layers;
  t["mtp_use_dedicated_embeddings"] = false;
  t["num_attention_heads"] = c.num_attention_heads;
  t["num_hidden_layers"] = c.num_hidden_layers;
  t["num_key_value_heads"] = c.num_key_value_heads;
  t["rms_norm_eps"] = c.rms_norm_eps;
  nlohmann::ordered_json rope;
  rope["mrope_interleaved"] = c.rope.mrope_interleaved;
  rope["mrope_section"] = c.rope.mrope_section;
  rope["rope_type"] = c.rope.rope_type;
  if (c.rope.rope_theta == std::floor(c.rope.rope_theta) && c.rope.rope_theta < 9e15) {
    rope["rope_theta"] = static_cast<std::int64_t>(c.rope.rope_theta);  // published as 10000000
  } else {
    rope["rope_theta"] = c.rope.rope_theta;
  }
  rope["partial_rotary_factor"] = c.rope.partial_rotary_factor;
  t["rope_parameters"] = rope;
  t["tie_word_embeddings"] = c.tie_word_embeddings;
  t["use_cache"] = true;
  t["vocab_size"] = c.vocab_size;

  nlohmann::ordered_json root;
  root["architectures"] = {"Qwen3_5ForConditionalGeneration"};
  root["image_token_id"] = 248056;
  root["model_type"] = "qwen3_5";
  root["text_config"] = t;
  root["tie_word_embeddings"] = c.tie_word_embeddings;
  root["transformers_version"] = "4.57.0.dev0";
  root["video_token_id"] = 248057;
  nlohmann::ordered_json vision;
  vision["deepstack_visual_indexes"] = nlohmann::ordered_json::array();
  vision["depth"] = 12;
  vision["hidden_act"] = "gelu_pytorch_tanh";
  vision["hidden_size"] = 768;
  vision["in_channels"] = 3;
  vision["initializer_range"] = 0.02;
  vision["intermediate_size"] = 3072;
  vision["model_type"] = "qwen3_5";
  vision["num_heads"] = 12;
  vision["num_position_embeddings"] = 2304;
  vision["out_hidden_size"] = c.hidden_size;
  vision["patch_size"] = 16;
  vision["spatial_merge_size"] = 2;
  vision["temporal_patch_size"] = 2;
  root["vision_config"] = vision;
  root["vision_end_token_id"] = 248054;
  root["vision_start_token_id"] = 248053;
  return root.dump(2) + "\n";
}

}  // namespace qgpu::qwen35
