// Checkpoint-level checks: the tensors a config implies, against the files.
#include "qgpu/qwen35/checkpoint.h"

#include <set>

#include "util.h"

namespace qgpu::qwen35 {

using sdk::Expected;
using sdk::Status;

std::vector<ExpectedTensor> expected_text_tensors(const TextConfig& c, std::string_view prefix) {
  const std::string p(prefix);
  const auto h = c.hidden_size;
  std::vector<ExpectedTensor> out;
  auto add = [&](std::string name, std::vector<std::int64_t> shape, StDType dtype = StDType::kBF16) {
    out.push_back({std::move(name), std::move(shape), dtype});
  };
  add(p + "embed_tokens.weight", {c.vocab_size, h});
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string l = p + "layers." + std::to_string(i) + ".";
    add(l + "input_layernorm.weight", {h});
    add(l + "post_attention_layernorm.weight", {h});
    add(l + "mlp.gate_proj.weight", {c.intermediate_size, h});
    add(l + "mlp.up_proj.weight", {c.intermediate_size, h});
    add(l + "mlp.down_proj.weight", {h, c.intermediate_size});
    if (c.layer_types[static_cast<std::size_t>(i)] == LayerType::kLinearAttention) {
      const std::string a = l + "linear_attn.";
      const auto nv = c.linear_num_value_heads;
      add(a + "in_proj_qkv.weight", {c.conv_dim(), h});
      add(a + "in_proj_z.weight", {c.linear_value_dim(), h});
      add(a + "in_proj_b.weight", {nv, h});
      add(a + "in_proj_a.weight", {nv, h});
      add(a + "conv1d.weight", {c.conv_dim(), 1, c.linear_conv_kernel_dim});
      add(a + "dt_bias", {nv});
      add(a + "A_log", {nv}, StDType::kF32);
      add(a + "norm.weight", {c.linear_value_head_dim}, StDType::kF32);
      add(a + "out_proj.weight", {h, c.linear_value_dim()});
    } else {
      const std::string a = l + "self_attn.";
      const auto q = c.num_attention_heads * c.head_dim;
      const auto kv = c.num_key_value_heads * c.head_dim;
      add(a + "q_proj.weight", {2 * q, h});  // query and gate, interleaved per head
      add(a + "k_proj.weight", {kv, h});
      add(a + "v_proj.weight", {kv, h});
      add(a + "o_proj.weight", {h, q});
      add(a + "q_norm.weight", {c.head_dim});
      add(a + "k_norm.weight", {c.head_dim});
    }
  }
  add(p + "norm.weight", {h});
  if (!c.tie_word_embeddings) add(std::string(kLmHeadName), {c.vocab_size, h});
  return out;
}

Expected<std::string> detect_text_prefix(const TensorStore& tensors) {
  for (auto prefix : {kWrapperPrefix, kCausalLmPrefix}) {
    if (tensors.contains(std::string(prefix) + "embed_tokens.weight")) return std::string(prefix);
  }
  return sdk::not_found("no text embedding: neither '" + std::string(kWrapperPrefix) + "embed_tokens.weight' nor '" +
                        std::string(kCausalLmPrefix) + "embed_tokens.weight' is in the checkpoint");
}

Status check_text_tensors(const TextConfig& config, const TensorStore& tensors, std::string_view prefix,
                          const CheckOptions& options) {
  const auto expected = expected_text_tensors(config, prefix);
  std::vector<std::string> missing;
  std::set<std::string, std::less<>> known;
  for (const auto& e : expected) {
    known.insert(e.name);
    auto got = tensors.get(e.name);
    if (!got) {
      missing.push_back(e.name);
      continue;
    }
    const bool dtype_ok = options.exact_dtypes ? got->dtype() == e.dtype : st_dtype_is_float(got->dtype());
    if (got->shape() != e.shape || !dtype_ok) {
      return sdk::invalid_argument("tensor '" + e.name + "': expected " + shape_string(e.shape) + " " +
                                   std::string(st_dtype_name(e.dtype)) + ", got " + shape_string(got->shape()) + " " +
                                   std::string(st_dtype_name(got->dtype())));
    }
  }
  if (!missing.empty()) {
    std::string more = missing.size() > 1 ? " (and " + std::to_string(missing.size() - 1) + " more)" : "";
    return sdk::not_found("missing tensor '" + missing.front() + "'" + more);
  }
  // A tied checkpoint may still carry lm_head.weight (HF ignores it); its shape must fit.
  if (config.tie_word_embeddings && tensors.contains(kLmHeadName)) {
    auto got = *tensors.get(kLmHeadName);
    const std::vector<std::int64_t> shape{config.vocab_size, config.hidden_size};
    if (got.shape() != shape || !st_dtype_is_float(got.dtype())) {
      return sdk::invalid_argument("tensor 'lm_head.weight': expected " + shape_string(shape) + ", got " +
                                   shape_string(got.shape()) + " " + std::string(st_dtype_name(got.dtype())));
    }
  }
  for (const auto& name : tensors.names()) {
    if (!name.starts_with(prefix) || name.starts_with("model.visual.") || name.starts_with("mtp.")) continue;
    if (prefix == kCausalLmPrefix && name.starts_with(kWrapperPrefix)) continue;
    if (known.count(name) == 0) {
      return sdk::invalid_argument("unexpected tensor '" + printable(name) + "' for this config (" +
                                   std::to_string(config.num_hidden_layers) + " layers, layer_types as configured)");
    }
  }
  return Status::ok();
}

Expected<Checkpoint> Checkpoint::open(const std::filesystem::path& dir, const CheckOptions& options) {
  Checkpoint ckpt;
  ckpt.dir_ = dir;
  auto config = load_config(dir / "config.json");
  if (!config) return config.error();
  ckpt.config_ = std::move(*config);
  auto tensors = TensorStore::open_dir(dir);
  if (!tensors) return tensors.error();
  ckpt.tensors_ = std::move(*tensors);
  auto prefix = detect_text_prefix(ckpt.tensors_);
  if (!prefix) return prefix.error().with_context(dir.string());
  ckpt.prefix_ = *prefix;
  QGPU_RETURN_IF_ERROR(
      check_text_tensors(ckpt.config_.text, ckpt.tensors_, ckpt.prefix_, options).with_context(dir.string()));
  return ckpt;
}

Expected<TensorRef> Checkpoint::text_tensor(std::string_view name) const {
  return tensors_.get(prefix_ + std::string(name));
}

Expected<TensorRef> Checkpoint::lm_head() const {
  if (config_.text.tie_word_embeddings) return text_tensor("embed_tokens.weight");
  return tensors_.get(kLmHeadName);
}

}  // namespace qgpu::qwen35
