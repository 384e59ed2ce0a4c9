// base_qwen35: Qwen3.5 checkpoints as published (config.json, safetensors,
// tokenizer.json), their tokenizer and chat format, and the text model's
// forward pass through any TensorBackend.
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "qgpu/qwen35/checkpoint.h"
#include "qgpu/qwen35/export.h"
#include "qgpu/qwen35/stack.h"
#include "qgpu/qwen35/tokenizer.h"
#include "qgpu/sdk/sdk.h"

namespace qgpu::qwen35 {
namespace {
namespace fs = std::filesystem;

constexpr std::array kOptions = {
    sdk::option_path("checkpoint", "synthetic", "synthetic",
                     "Qwen3.5 checkpoint directory, or 'synthetic' for the generated 2B-shaped default"),
    sdk::option_bool("enable_thinking", "false", "chat: open the assistant turn in thinking mode"),
};

// <prefix>/share/qgpu/synthetic-qwen35-2b, found from this library's own path
// (<prefix>/<libdir>/qgpu/plugins/); the build tree has the same layout.
fs::path synthetic_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&synthetic_dir), &info) == 0 || info.dli_fname == nullptr) return {};
  return (fs::path(info.dli_fname).parent_path() / QGPU_DATA_FROM_PLUGIN_DIR / "synthetic-qwen35-2b")
      .lexically_normal();
}

// generation_config.json when present (its eos_token_id alone, as transformers), else config.json's eos.
sdk::Expected<sdk::GenerationDefaults> generation_defaults(const fs::path& dir, const TextConfig& text) {
  sdk::GenerationDefaults out;
  const fs::path file = dir / "generation_config.json";
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    out.source = (dir / "config.json").string();
    out.eos_token_ids = text.eos_token_ids;
    return out;
  }
  auto g = load_generation_config(file, text.vocab_size);
  if (!g) return g.error();
  out.source = file.string();
  out.eos_token_ids = g->eos_token_ids;
  out.do_sample = g->do_sample;
  out.temperature = g->temperature;
  out.top_k = g->top_k;
  out.top_p = g->top_p;
  out.suppress_token_ids = g->suppress_tokens;
  return out;
}

Qwen35Config stack_config(const TextConfig& t) {
  Qwen35Config c;
  c.hidden_size = t.hidden_size;
  c.intermediate_size = t.intermediate_size;
  c.vocab_size = t.vocab_size;
  for (LayerType type : t.layer_types) c.layer_types.emplace_back(layer_type_name(type));
  c.rms_norm_eps = t.rms_norm_eps;
  c.tie_word_embeddings = t.tie_word_embeddings;
  c.delta_net.num_key_heads = t.linear_num_key_heads;
  c.delta_net.num_value_heads = t.linear_num_value_heads;
  c.delta_net.key_head_dim = t.linear_key_head_dim;
  c.delta_net.value_head_dim = t.linear_value_head_dim;
  c.delta_net.conv_kernel = t.linear_conv_kernel_dim;
  c.delta_net.eps = t.rms_norm_eps;
  c.attention.num_heads = t.num_attention_heads;
  c.attention.num_kv_heads = t.num_key_value_heads;
  c.attention.head_dim = t.head_dim;
  c.attention.rotary_dim = t.rotary_dim();
  c.attention.rope_theta = t.rope.rope_theta;
  c.attention.eps = t.rms_norm_eps;
  return c;
}

class Qwen35Base;

// A sequence of one loaded Qwen35Base: its stack's per-layer states.
class Qwen35Sequence final : public sdk::Sequence {
 public:
  Qwen35Sequence(const Qwen35Base* owner, Qwen35Stack::State state) : owner(owner), state(std::move(state)) {}
  void release() noexcept override { delete this; }
  std::int64_t tokens() const override { return state.tokens; }
  const Qwen35Base* owner;
  Qwen35Stack::State state;
};

class Qwen35Base final : public sdk::BaseModel {
 public:
  using sdk::BaseModel::forward;
  using sdk::BaseModel::run_layers;
  explicit Qwen35Base(const sdk::PluginContext& context)
      : checkpoint_option_(context.options.get_string("checkpoint").value()),
        enable_thinking_(context.options.get_bool("enable_thinking").value()),
        logger_(context.logger) {}

  sdk::Expected<sdk::Description> describe() const override {
    sdk::Description d;
    d.properties = {
        {"family", "Qwen3.5 (Gated DeltaNet + gated full attention, SwiGLU, zero-centred RMSNorm)"},
        {"checkpoint",
         checkpoint_option_ == "synthetic" ? "synthetic (" + synthetic_dir().string() + ")" : checkpoint_option_},
    };
    d.capabilities = {
        {"load", true,
         "config.json (wrapper or text), safetensors (sharded or single; tied or untied head), tokenizer.json, "
         "generation_config.json"},
        {"tokenizer", true, "byte-level BPE, NFC, Qwen3.5 pre-tokenizer, ChatML"},
        {"forward", true, "through the configured tensor backend"},
        {"forward in pieces", true, "embed, run_layers, final_norm, lm_head (for the merged machine model)"},
        {"export", true, "the checkpoint written again with added layers and vocabulary rows (qgpu-host build)"},
    };
    return d;
  }

  sdk::Expected<sdk::ModelInfo> load(sdk::TensorBackend& backend) override {
    fs::path dir = checkpoint_option_;
    if (checkpoint_option_ == "synthetic") {
      dir = synthetic_dir();
      if (!fs::exists(dir / "config.json")) {
        return sdk::not_found("the synthetic checkpoint is missing at '" + dir.string() +
                              "' (the build writes it; or run: qgpu-synth-qwen35 --out " + dir.string() + ")");
      }
    }
    auto checkpoint = Checkpoint::open(dir, CheckOptions{/*exact_dtypes=*/false});
    if (!checkpoint) return checkpoint.error();
    const fs::path tokenizer_file = dir / "tokenizer.json";
    if (!fs::exists(tokenizer_file)) return sdk::not_found("no tokenizer.json in '" + dir.string() + "'");
    auto tokenizer = Tokenizer::load(tokenizer_file);
    if (!tokenizer) return tokenizer.error();
    const TextConfig& text = checkpoint->config().text;
    if (tokenizer->vocab_size() > text.vocab_size) {
      return sdk::invalid_argument("tokenizer.json has " + std::to_string(tokenizer->vocab_size()) +
                                   " ids but the model only " + std::to_string(text.vocab_size) + " embedding rows ('" +
                                   dir.string() + "')");
    }

    // Upload every text tensor straight from the mapping, once; the backend converts to its dtype.
    // Decoder tensors are keyed by their name below the text prefix ("layers.0.mlp.up_proj.weight");
    // an untied head sits outside it, at the top level ("lm_head.weight"), under either naming scheme.
    std::map<std::string, sdk::Handle<sdk::Tensor>> weights;
    std::int64_t parameters = 0;
    const std::string& prefix = checkpoint->prefix();
    for (const ExpectedTensor& e : expected_text_tensors(text, prefix)) {
      const bool head = e.name == kLmHeadName;
      if (!head && !e.name.starts_with(prefix)) {
        return sdk::internal_error("expected tensor '" + e.name + "' is outside the text prefix '" + prefix + "'");
      }
      const std::string name = head ? e.name : e.name.substr(prefix.size());
      auto ref = checkpoint->tensors().get(e.name);
      if (!ref) return ref.error().with_context(dir.string());
      auto view = ref->view();
      if (!view) return view.error().with_context(e.name);
      auto uploaded = backend.upload(*view);
      if (!uploaded) return uploaded.error().with_context("uploading " + e.name);
      parameters += ref->numel();
      if (!weights.emplace(name, std::move(*uploaded)).second) {
        return sdk::internal_error("tensor '" + e.name + "' is listed twice");
      }
    }
    auto generation = generation_defaults(dir, text);
    if (!generation) return generation.error();
    auto lookup = [&weights](const std::string& name) -> const sdk::Tensor* {
      auto it = weights.find(name);
      return it == weights.end() ? nullptr : it->second.get();
    };
    auto stack = Qwen35Stack::create(backend, stack_config(text), lookup);
    if (!stack) return stack.error();

    backend_ = &backend;
    dir_ = dir;
    weights_ = std::move(weights);
    stack_.emplace(std::move(*stack));
    tokenizer_.emplace(std::move(*tokenizer));
    eos_ = generation->eos_token_ids;
    vocab_rows_ = text.vocab_size;
    hidden_size_ = text.hidden_size;

    sdk::ModelInfo info;
    info.checkpoint = dir.string();
    info.num_layers = text.num_hidden_layers;
    info.vocab_size = text.vocab_size;
    info.tokenizer_size = tokenizer_->vocab_size();
    info.tied_embeddings = text.tie_word_embeddings;
    for (LayerType type : text.layer_types) info.layer_types.emplace_back(layer_type_name(type));
    info.shapes.hidden_size = text.hidden_size;
    info.shapes.intermediate_size = text.intermediate_size;
    info.shapes.linear_num_key_heads = text.linear_num_key_heads;
    info.shapes.linear_num_value_heads = text.linear_num_value_heads;
    info.shapes.linear_key_head_dim = text.linear_key_head_dim;
    info.shapes.linear_value_head_dim = text.linear_value_head_dim;
    info.shapes.linear_conv_kernel = text.linear_conv_kernel_dim;
    info.shapes.rms_norm_eps = text.rms_norm_eps;
    info.parameters = parameters;
    info.generation = std::move(*generation);
    logger_.debug("loaded " + dir.string() + ": " + std::to_string(parameters) + " parameters");
    return info;
  }

  sdk::Expected<std::vector<std::int64_t>> encode(std::string_view text) override {
    if (!tokenizer_) return sdk::invalid_argument("encode before load");
    auto ids = tokenizer_->encode(text);
    if (!ids) return ids.error();
    return std::vector<std::int64_t>(ids->begin(), ids->end());
  }

  sdk::Expected<std::string> decode(std::span<const std::int64_t> ids) override {
    if (!tokenizer_) return sdk::invalid_argument("decode before load");
    QGPU_RETURN_IF_ERROR(check_ids(ids));
    // Rows past the tokenizer's ids (padding of the embedding) have no text: they decode to nothing,
    // as in `tokenizers`. The model may still generate them (the host chooses over all logit rows).
    std::vector<TokenId> narrow;
    for (std::int64_t id : ids) {
      if (id < tokenizer_->vocab_size()) narrow.push_back(static_cast<TokenId>(id));
    }
    return tokenizer_->decode(narrow, InvalidUtf8::kKeep);
  }

  using sdk::BaseModel::encode_chat;
  sdk::Expected<std::vector<std::int64_t>> encode_chat(std::span<const sdk::ChatTurn> turns,
                                                       std::span<const sdk::ToolDeclaration> tools) override {
    if (!tokenizer_) return sdk::invalid_argument("encode_chat before load");
    const std::vector<ChatMessage> messages(turns.begin(), turns.end());
    const std::vector<sdk::ToolDeclaration> declared(tools.begin(), tools.end());
    ChatOptions options;
    options.enable_thinking = enable_thinking_;
    auto ids = tokenizer_->encode_chat(messages, options, declared);
    if (!ids) return ids.error();
    return std::vector<std::int64_t>(ids->begin(), ids->end());
  }

  sdk::Expected<std::optional<sdk::ToolCallMatch>> find_tool_call(std::string_view text) override {
    return qwen35::find_tool_call(text);
  }

  std::vector<std::int64_t> stop_ids() const override {
    std::vector<std::int64_t> out(eos_.begin(), eos_.end());
    if (tokenizer_) {
      const SpecialTokenIds special = tokenizer_->special_ids();
      for (TokenId id : {special.im_end, special.endoftext}) {
        if (id >= 0 && std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
      }
    }
    return out;
  }

  sdk::Expected<std::vector<float>> forward(std::span<const std::int64_t> ids) override {
    return forward_in(nullptr, ids);
  }

  sdk::Expected<sdk::Handle<sdk::Sequence>> create_sequence() override {
    if (!stack_) return sdk::invalid_argument("create_sequence before load");
    auto state = stack_->create_state();
    if (!state) return state.error();
    return sdk::Handle<sdk::Sequence>(new Qwen35Sequence(this, std::move(*state)));
  }

  sdk::Status copy_sequence(const sdk::Sequence& from, sdk::Sequence& to) override {
    const Qwen35Sequence* a = ours(from);
    Qwen35Sequence* b = ours(to);
    if (a == nullptr || b == nullptr) return sdk::invalid_argument("copy_sequence: a sequence of another model");
    return stack_->copy_state(a->state, b->state);
  }

  sdk::Status truncate_sequence(sdk::Sequence& sequence, std::int64_t tokens) override {
    Qwen35Sequence* s = ours(sequence);
    if (s == nullptr) return sdk::invalid_argument("truncate_sequence: a sequence of another model");
    return stack_->truncate_state(s->state, tokens);
  }

  sdk::Expected<std::vector<float>> forward(sdk::Sequence& sequence, std::span<const std::int64_t> ids) override {
    Qwen35Sequence* s = ours(sequence);
    if (s == nullptr) return sdk::invalid_argument("forward: a sequence of another model");
    return forward_in(&s->state, ids);
  }

  sdk::Expected<sdk::Handle<sdk::Tensor>> run_layers(sdk::Sequence& sequence, const sdk::Tensor& hidden) override {
    Qwen35Sequence* s = ours(sequence);
    if (s == nullptr) return sdk::invalid_argument("run_layers: a sequence of another model");
    QGPU_RETURN_IF_ERROR(check_rows("run_layers", hidden));
    return stack_->run_layers(hidden, sdk::DeltaRule::kAuto, nullptr, &s->state);
  }

  sdk::Expected<std::vector<float>> forward_in(Qwen35Stack::State* state, std::span<const std::int64_t> ids) {
    if (!stack_) return sdk::invalid_argument("forward before load");
    if (ids.empty()) return sdk::invalid_argument("forward needs at least one token");
    QGPU_RETURN_IF_ERROR(check_ids(ids));
    auto logits = stack_->forward(ids, /*all_logits=*/false, sdk::DeltaRule::kAuto, nullptr, state);
    if (!logits) return logits.error();
    std::vector<float> out(static_cast<std::size_t>((*logits)->dim((*logits)->rank() - 1)));
    auto view = sdk::make_view(out.data(), sdk::DType::kF32, {1, static_cast<std::int64_t>(out.size())});
    if (!view) return view.error();
    QGPU_RETURN_IF_ERROR(backend_->download(**logits, *view));
    return out;
  }

  void reset() override {
    if (stack_) stack_->reset();
  }

  sdk::Expected<sdk::Handle<sdk::Tensor>> embed(std::span<const std::int64_t> ids) override {
    if (!stack_) return sdk::invalid_argument("embed before load");
    if (ids.empty()) return sdk::invalid_argument("embed needs at least one token");
    QGPU_RETURN_IF_ERROR(check_ids(ids));
    return stack_->embed(ids);
  }

  sdk::Expected<sdk::Handle<sdk::Tensor>> run_layers(const sdk::Tensor& hidden) override {
    if (!stack_) return sdk::invalid_argument("run_layers before load");
    QGPU_RETURN_IF_ERROR(check_rows("run_layers", hidden));
    return stack_->run_layers(hidden);
  }

  sdk::Expected<sdk::Handle<sdk::Tensor>> final_norm(const sdk::Tensor& hidden) override {
    if (!stack_) return sdk::invalid_argument("final_norm before load");
    QGPU_RETURN_IF_ERROR(check_rows("final_norm", hidden));
    return stack_->final_norm(hidden);
  }

  sdk::Expected<sdk::Handle<sdk::Tensor>> lm_head(const sdk::Tensor& normed) override {
    if (!stack_) return sdk::invalid_argument("lm_head before load");
    QGPU_RETURN_IF_ERROR(check_rows("lm_head", normed));
    return stack_->lm_head(normed);
  }

  sdk::Expected<sdk::Handle<sdk::Tensor>> run_layers_from(const sdk::Tensor& hidden, std::int64_t first_layer) override {
    if (!stack_) return sdk::invalid_argument("run_layers_from before load");
    QGPU_RETURN_IF_ERROR(check_rows("run_layers_from", hidden));
    if (first_layer < 0) return sdk::invalid_argument("run_layers_from: layer " + std::to_string(first_layer));
    return stack_->run_layers(hidden, sdk::DeltaRule::kAuto, nullptr, nullptr, static_cast<std::size_t>(first_layer));
  }

  sdk::Status download_weight(std::string_view name, const sdk::TensorView& out) override {
    if (!stack_) return sdk::invalid_argument("download_weight before load");
    auto it = weights_.find(std::string(name));
    if (it == weights_.end()) return sdk::not_found("the base has no weight '" + std::string(name) + "'");
    return backend_->download(*it->second, out).with_context(std::string(name));
  }

  sdk::Expected<bool> download_layer_state(std::int64_t layer, const sdk::TensorView& out) override {
    if (!stack_) return sdk::invalid_argument("download_layer_state() before load()");
    const auto& layers = stack_->own_state().layers;
    if (layer < 0 || layer >= static_cast<std::int64_t>(layers.size()))
      return sdk::invalid_argument("download_layer_state: layer " + std::to_string(layer) + " of " +
                                   std::to_string(layers.size()));
    const sdk::Handle<sdk::LayerState>& state = layers[static_cast<std::size_t>(layer)];
    if (!state || state->tokens() == 0) return false;
    QGPU_RETURN_IF_ERROR(backend_->download_state(*state, out).with_context("layer " + std::to_string(layer)));
    return true;
  }

  sdk::Expected<std::vector<std::string>> export_checkpoint(const sdk::CheckpointExport& request,
                                                            sdk::ExportSource& source) override {
    if (!stack_) return sdk::internal_error("export_checkpoint() before load()");
    return qwen35::export_checkpoint(dir_, request, source);
  }

 private:
  // `s` as this model's own sequence type, or nullptr.
  Qwen35Sequence* ours(const sdk::Sequence& s) const {
    auto* q = dynamic_cast<const Qwen35Sequence*>(&s);
    return q != nullptr && q->owner == this && stack_ ? const_cast<Qwen35Sequence*>(q) : nullptr;
  }

  sdk::Status check_ids(std::span<const std::int64_t> ids) const {
    for (std::int64_t id : ids) {
      if (id < 0 || id >= vocab_rows_) {
        return sdk::invalid_argument("token id " + std::to_string(id) + " is outside the model's " +
                                     std::to_string(vocab_rows_) + " embedding rows");
      }
    }
    return sdk::Status::ok();
  }
  // A [T, H] tensor of this model's backend.
  sdk::Status check_rows(const char* what, const sdk::Tensor& x) const {
    if (x.owner() != backend_)
      return sdk::invalid_argument(std::string(what) + ": the tensor is not the load() backend's");
    if (x.rank() != 2 || x.dim(0) < 1 || x.dim(1) != hidden_size_) {
      std::string shape;
      for (std::int32_t i = 0; i < x.rank(); ++i) shape += (i ? ", " : "") + std::to_string(x.dim(i));
      return sdk::invalid_argument(std::string(what) + ": expected a [T, " + std::to_string(hidden_size_) +
                                   "] tensor, got [" + shape + "]");
    }
    return sdk::Status::ok();
  }

  std::string checkpoint_option_;
  bool enable_thinking_ = false;
  sdk::Logger logger_;
  sdk::TensorBackend* backend_ = nullptr;
  fs::path dir_;  // the loaded checkpoint
  std::map<std::string, sdk::Handle<sdk::Tensor>> weights_;
  std::optional<Qwen35Stack> stack_;
  std::optional<Tokenizer> tokenizer_;
  std::vector<std::int64_t> eos_;
  std::int64_t vocab_rows_ = 0;
  std::int64_t hidden_size_ = 0;
};

}  // namespace
}  // namespace qgpu::qwen35

QGPU_DEFINE_PLUGIN(qgpu::qwen35::Qwen35Base, "base_qwen35", "0.2.0",
                   "Qwen3.5 base model: config, safetensors weights, tokenizer, chat template, forward",
                   qgpu::qwen35::kOptions)
