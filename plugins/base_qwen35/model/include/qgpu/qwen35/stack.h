// A whole Qwen3.5 text model run through sdk::TensorBackend calls only: the
// reference for how a base model drives the backend (prefill and decode), used
// by the tests and bench/base. No LibTorch here.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "qgpu/sdk/tensor_backend.h"

namespace qgpu::qwen35 {

struct Qwen35Config {
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;
  std::int64_t vocab_size = 0;
  std::vector<std::string> layer_types;  // "linear_attention" | "full_attention"
  sdk::DeltaNetShape delta_net;
  sdk::AttentionShape attention;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = true;
};

// Uploaded weights by Hugging Face name without the prefix, e.g.
// "layers.0.linear_attn.in_proj_qkv.weight"; nullptr when absent.
using WeightLookup = std::function<const sdk::Tensor*(const std::string& name)>;

class Qwen35Stack {
 public:
  // A sequence's state: every layer's (Gated DeltaNet conv window and recurrent state, or
  // attention KV cache) and the tokens it has consumed. The stack has one of its own (the
  // calls without a state use it); create_state() makes more, which run side by side.
  struct State {
    std::vector<sdk::Handle<sdk::LayerState>> layers;
    std::int64_t tokens = 0;
  };

  // Resolves every weight the config needs; an error names the first missing one.
  static sdk::Expected<Qwen35Stack> create(sdk::TensorBackend& backend, const Qwen35Config& config,
                                           const WeightLookup& weights);

  // A new, empty sequence state for this stack.
  sdk::Expected<State> create_state() const;
  // `to` becomes a copy of `from` (a fork, a snapshot or a restore).
  sdk::Status copy_state(const State& from, State& to) const;
  // Forgets the tokens at positions >= `tokens` (sdk::TensorBackend::truncate_state: the
  // attention layers can; a Gated DeltaNet layer only back to 0). Nothing changes on an error.
  sdk::Status truncate_state(State& state, std::int64_t tokens) const;

  // Runs `ids` after the tokens already seen. Returns logits [T, vocab] (or
  // [1, vocab] for the last position when all_logits is false), in the
  // compute dtype. With `hidden`, appends each layer's output [T, H].
  // `state`: the sequence to continue (nullptr: the stack's own).
  sdk::Expected<sdk::Handle<sdk::Tensor>> forward(std::span<const std::int64_t> ids, bool all_logits,
                                                  sdk::DeltaRule rule = sdk::DeltaRule::kAuto,
                                                  std::vector<sdk::Handle<sdk::Tensor>>* hidden = nullptr,
                                                  State* state = nullptr);
  // forward() in pieces (the same backend calls in the same order, so the
  // composition is bit-identical): embedding rows [T, H]; every decoder layer
  // on a [T, H] residual, continuing the sequence (with `hidden`, each layer's
  // output is appended); the final norm; the lm_head.
  sdk::Expected<sdk::Handle<sdk::Tensor>> embed(std::span<const std::int64_t> ids);
  sdk::Expected<sdk::Handle<sdk::Tensor>> run_layers(const sdk::Tensor& h, sdk::DeltaRule rule = sdk::DeltaRule::kAuto,
                                                     std::vector<sdk::Handle<sdk::Tensor>>* hidden = nullptr,
                                                     State* state = nullptr, std::size_t first_layer = 0);
  sdk::Expected<sdk::Handle<sdk::Tensor>> final_norm(const sdk::Tensor& h);
  sdk::Expected<sdk::Handle<sdk::Tensor>> lm_head(const sdk::Tensor& normed);
  // Forget the stack's own sequence (every layer state back to empty).
  void reset();
  std::int64_t tokens() const { return own_.tokens; }
  const State& own_state() const { return own_; }

 private:
  struct Layer {
    bool linear = true;
    const sdk::Tensor* input_norm = nullptr;
    const sdk::Tensor* post_norm = nullptr;
    sdk::DeltaNetWeights delta_net;
    sdk::AttentionWeights attention;
    sdk::MlpWeights mlp;
  };

  Qwen35Stack(sdk::TensorBackend& backend, Qwen35Config config) : backend_(&backend), config_(std::move(config)) {}

  sdk::TensorBackend* backend_;
  Qwen35Config config_;
  const sdk::Tensor* embed_ = nullptr;
  const sdk::Tensor* final_norm_ = nullptr;
  const sdk::Tensor* lm_head_ = nullptr;
  std::vector<Layer> layers_;
  State own_;
};

}  // namespace qgpu::qwen35
