// Qwen3.5 decoder stack over the SDK backend calls (QWEN35.md section 2.1).
#include "qgpu/qwen35/stack.h"

#include <utility>

namespace qgpu::qwen35 {

sdk::Expected<Qwen35Stack> Qwen35Stack::create(sdk::TensorBackend& backend, const Qwen35Config& config,
                                               const WeightLookup& weights) {
  Qwen35Stack stack(backend, config);
  std::string missing;
  auto get = [&](const std::string& name) {
    const sdk::Tensor* t = weights(name);
    if (t == nullptr && missing.empty()) missing = name;
    return t;
  };
  stack.embed_ = get("embed_tokens.weight");
  stack.final_norm_ = get("norm.weight");
  stack.lm_head_ = config.tie_word_embeddings ? stack.embed_ : get("lm_head.weight");
  for (std::size_t i = 0; i < config.layer_types.size(); ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    auto in_layer = [&](const std::string& suffix) { return get(p + suffix); };
    Layer layer;
    if (config.layer_types[i] == "linear_attention") {
      layer.delta_net = sdk::delta_net_weights(in_layer);
    } else if (config.layer_types[i] == "full_attention") {
      layer.linear = false;
      layer.attention = sdk::attention_weights(in_layer);
    } else {
      return sdk::unsupported("layer " + std::to_string(i) + " has type '" + config.layer_types[i] +
                              "' (expected linear_attention or full_attention)");
    }
    layer.mlp = sdk::mlp_weights(in_layer);
    layer.input_norm = get(p + "input_layernorm.weight");
    layer.post_norm = get(p + "post_attention_layernorm.weight");
    stack.layers_.push_back(std::move(layer));
  }
  if (!missing.empty()) return sdk::not_found("Qwen3.5 weight '" + missing + "' is missing");
  QGPU_ASSIGN_OR_RETURN(stack.own_, stack.create_state());
  return stack;
}

sdk::Expected<Qwen35Stack::State> Qwen35Stack::create_state() const {
  State state;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    QGPU_ASSIGN_OR_RETURN(auto layer, backend_->create_state());
    state.layers.push_back(std::move(layer));
  }
  return state;
}

sdk::Status Qwen35Stack::copy_state(const State& from, State& to) const {
  if (from.layers.size() != layers_.size() || to.layers.size() != layers_.size())
    return sdk::invalid_argument("copy_state: a sequence state of another stack");
  for (std::size_t i = 0; i < layers_.size(); ++i)
    QGPU_RETURN_IF_ERROR(
        backend_->copy_state(*from.layers[i], *to.layers[i]).with_context("layer " + std::to_string(i)));
  to.tokens = from.tokens;
  return sdk::Status::ok();
}

sdk::Status Qwen35Stack::truncate_state(State& state, std::int64_t tokens) const {
  if (state.layers.size() != layers_.size())
    return sdk::invalid_argument("truncate_state: a sequence state of another stack");
  if (tokens < 0 || tokens > state.tokens)
    return sdk::invalid_argument("the sequence holds " + std::to_string(state.tokens) + " tokens, not " +
                                 std::to_string(tokens));
  if (tokens == state.tokens) return sdk::Status::ok();
  if (tokens > 0)  // all or nothing: a Gated DeltaNet layer refuses before any layer changes
    for (std::size_t i = 0; i < layers_.size(); ++i)
      if (layers_[i].linear)
        return sdk::unsupported("the sequence cannot forget tokens " + std::to_string(tokens) + ".." +
                                std::to_string(state.tokens - 1) + ": layer " + std::to_string(i) +
                                " is a Gated DeltaNet layer, whose state keeps no history (copy the sequence at that "
                                "length and restore the copy instead)");
  for (std::size_t i = 0; i < layers_.size(); ++i)
    QGPU_RETURN_IF_ERROR(backend_->truncate_state(*state.layers[i], tokens).with_context("layer " + std::to_string(i)));
  state.tokens = tokens;
  return sdk::Status::ok();
}

sdk::Expected<sdk::Handle<sdk::Tensor>> Qwen35Stack::embed(std::span<const std::int64_t> ids) {
  return backend_->embed(*embed_, ids);
}

sdk::Expected<sdk::Handle<sdk::Tensor>> Qwen35Stack::run_layers(const sdk::Tensor& input, sdk::DeltaRule rule,
                                                                std::vector<sdk::Handle<sdk::Tensor>>* hidden,
                                                                State* state, std::size_t first_layer) {
  auto& be = *backend_;
  State& seq = state != nullptr ? *state : own_;
  if (seq.layers.size() != layers_.size())
    return sdk::invalid_argument("run_layers: a sequence state of another stack");
  sdk::Handle<sdk::Tensor> h;
  const sdk::Tensor* in = &input;
  if (first_layer > layers_.size())
    return sdk::invalid_argument("run_layers: from layer " + std::to_string(first_layer) + " of " +
                                 std::to_string(layers_.size()));
  for (std::size_t i = first_layer; i < layers_.size(); ++i) {
    const Layer& layer = layers_[i];
    sdk::LayerState& layer_state = *seq.layers[i];
    auto mixer = [&](const sdk::Tensor& normed) -> sdk::Expected<sdk::Handle<sdk::Tensor>> {
      if (layer.linear) return be.gated_delta_net(normed, layer.delta_net, config_.delta_net, layer_state, rule);
      return be.gated_attention(normed, layer.attention, config_.attention, layer_state);
    };
    QGPU_ASSIGN_OR_RETURN(
        h, sdk::decoder_layer(be, *in, *layer.input_norm, *layer.post_norm, layer.mlp, config_.rms_norm_eps, mixer));
    in = h.get();
    if (hidden != nullptr) {
      sdk::Handle<sdk::Tensor> copy;
      QGPU_ASSIGN_OR_RETURN(copy, be.rows(*h, 0, h->dim(0)));
      hidden->push_back(std::move(copy));
    }
  }
  seq.tokens += input.dim(0);
  if (!h) return be.rows(input, 0, input.dim(0));  // no layers: the input, as a tensor of our own
  return h;
}

sdk::Expected<sdk::Handle<sdk::Tensor>> Qwen35Stack::final_norm(const sdk::Tensor& h) {
  return backend_->rms_norm(h, *final_norm_, config_.rms_norm_eps);
}

sdk::Expected<sdk::Handle<sdk::Tensor>> Qwen35Stack::lm_head(const sdk::Tensor& normed) {
  return backend_->linear(normed, *lm_head_);
}

sdk::Expected<sdk::Handle<sdk::Tensor>> Qwen35Stack::forward(std::span<const std::int64_t> ids, bool all_logits,
                                                             sdk::DeltaRule rule,
                                                             std::vector<sdk::Handle<sdk::Tensor>>* hidden,
                                                             State* state) {
  auto& be = *backend_;
  sdk::Handle<sdk::Tensor> h, x;
  QGPU_ASSIGN_OR_RETURN(h, embed(ids));
  QGPU_ASSIGN_OR_RETURN(h, run_layers(*h, rule, hidden, state));
  if (!all_logits) {
    QGPU_ASSIGN_OR_RETURN(h, be.rows(*h, h->dim(0) - 1, h->dim(0)));
  }
  QGPU_ASSIGN_OR_RETURN(x, final_norm(*h));
  return lm_head(*x);
}

void Qwen35Stack::reset() {
  for (auto& layer : own_.layers) layer->reset();
  own_.tokens = 0;
}

}  // namespace qgpu::qwen35
