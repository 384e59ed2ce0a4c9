// Synthetic Qwen3.5 checkpoints: deterministic random weights in the real
// file formats, for tests and for running the pipeline without a download.
//
// Values come from our own generator (xoshiro256** seeded per tensor from the
// seed and the tensor's name; near-normal values from a sum of four uniforms),
// so the bytes depend on nothing but (spec, seed) and do not change with the
// sharding or the C++ library.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "qgpu/qwen35/config.h"
#include "qgpu/qwen35/safetensors.h"

namespace qgpu::qwen35 {

// How the embedding rows are drawn (docs/CHECKPOINTS.md, "Synthetic checkpoints").
enum class SyntheticEmbedding : std::uint8_t {
  // N(0, 0.02) with one planted channel strictly negative on every row
  // (synthetic_negative_channel). The default; its bytes never change.
  kPlanted,
  // N(0, 0.02) i.i.d., transformers' own init (initializer_range 0.02).
  kIsotropic,
  // Like trained tied embeddings: every row a shared heavy-tailed direction
  // plus isotropic noise (cosine to it about 0.35), norms spread around
  // 0.02 * sqrt(hidden).
  kAnisotropic,
};
// kIsotropic and kAnisotropic never have a channel on which every row has one
// strict sign: where one appears, one row's value there is negated.
std::string_view synthetic_embedding_name(SyntheticEmbedding embedding);  // "planted", ...
std::optional<SyntheticEmbedding> parse_synthetic_embedding(std::string_view name);

struct SyntheticOptions {
  SyntheticEmbedding embedding = SyntheticEmbedding::kPlanted;
  // A base that stresses the merged model's next-token choice (independent of
  // the embedding): a residual growing ~100x over depth, massive-activation
  // channels on every token, a first-token channel and attention sinks, a
  // final norm with scales over 0.05..20 including negative and near-zero ones.
  // See SyntheticStressLayout and docs/CHECKPOINTS.md.
  bool stress = false;
};

struct SyntheticSpec {
  TextConfig text;
  SyntheticOptions options;
  std::uint64_t max_shard_bytes = 0;  // 0: one model.safetensors
  // Writes tokenizer files into the checkpoint directory (owned by the tokenizer
  // part); called after config.json and the weights are written. Empty: none.
  std::function<sdk::Status(const std::filesystem::path& dir, const TextConfig& text)> write_tokenizer;
  // (stage, bytes done, bytes total) while writing weights.
  std::function<void(std::string_view, std::uint64_t, std::uint64_t)> progress;
};

// The default layer pattern of a synthetic model: Qwen3.5's (L, L, L, F)
// repeated; a model shorter than 4 layers ends with a full-attention layer so
// that one is always present.
std::vector<LayerType> synthetic_layer_types(std::int64_t num_layers);

// Qwen3.5-2B per-layer shapes (hidden 2048, DeltaNet 16+16 heads of 128,
// conv 4, MLP 6144, 8 query / 2 KV heads of 256), few layers, small vocabulary.
SyntheticSpec synthetic_2b_spec(std::int64_t num_layers = 4, std::int64_t vocab_size = 4096);
// Tiny shapes for fast tests (hidden 64, 2 k-heads and 4 v-heads of 16, so
// the v-head grouping of the larger models is exercised).
SyntheticSpec synthetic_small_spec(std::int64_t num_layers = 4, std::int64_t vocab_size = 256);

struct SyntheticResult {
  std::vector<std::filesystem::path> files;  // everything written, config.json first
  std::uint64_t total_bytes = 0;             // sum of the file sizes
};

// Creates `dir` if needed and writes config.json, the weights (model.safetensors,
// or shards and the index) and, through the hook, the tokenizer.
sdk::Expected<SyntheticResult> write_synthetic_checkpoint(const std::filesystem::path& dir, const SyntheticSpec& spec,
                                                          std::uint64_t seed);

// The embedding's massive-activation channel: real checkpoints have channels
// where (nearly) every token's embedding shares a sign, and the merged machine
// model mutes its circuit on text through one (docs/MACHINE_CIRCUIT.md §6). Every
// synthetic embedding row is strictly negative on this channel, -(1/8 + |w|) with
// w the N(0, 0.02) value drawn there; the channel is a hash of the seed. Tests of
// the generator use this; the merge finds the channel by searching. Only the
// planted embedding (the default) has it.
std::int64_t synthetic_negative_channel(std::int64_t hidden_size, std::uint64_t seed);

// Whether `options` can be generated for `text`: a stress base needs at least 4
// layers in the synthetic pattern (L, L, L, F, ...), an MLP at least twice as
// wide as the hidden size and a non-rotary head dim; the isotropic and
// anisotropic embeddings need at least 2 rows.
sdk::Status check_synthetic_options(const TextConfig& text, const SyntheticOptions& options);

// The tensors alone (names with the model.language_model. prefix), generated
// lazily. With options that check_synthetic_options refuses, the fills fail.
std::vector<TensorToWrite> synthetic_tensors(const TextConfig& text, std::uint64_t seed,
                                             const SyntheticOptions& options = {});

// Where a stress base puts its features (a function of the config and the
// seed). Tests and measurements use it; a merge must find what it needs from
// the weights, as it would on a real checkpoint.
struct SyntheticStressLayout {
  // Its MLP adds massive_values[i] to massive_channels[i] on every token,
  // whatever the residual (2 x hidden neurons summing silu(a) a + silu(-a)(-a)
  // = a^2 over the normalised input's channels: a constant).
  std::int64_t massive_layer = 0;
  std::vector<std::int64_t> massive_channels;
  std::vector<float> massive_values;
  // Its DeltaNet head 0 adds first_token_value to first_token_channel at
  // position 0 only (a causal-conv detector of the sequence start); exactly 0
  // elsewhere.
  std::int64_t first_token_layer = 0;
  std::int64_t first_token_channel = 0;
  float first_token_value = 0;
  // Full-attention layers whose query heads 0..sink_gaps.size()-1 (KV head 0)
  // are attention sinks: the first position's key is aligned with head dim
  // sink_dim (non-rotary) and the queries have a constant component there, so
  // the first position's score exceeds the others' by about sink_gaps[i].
  std::vector<std::int64_t> sink_layers;
  std::int64_t sink_dim = 0;
  std::vector<float> sink_gaps;
  // Per layer: the factor on o_proj / linear_attn.out_proj / mlp.down_proj,
  // and the design rms of the residual after the layer without the massive and
  // first-token channels (`growth` times larger after the last layer than
  // after the first).
  std::vector<float> output_scale;
  std::vector<float> bulk_rms;
  float growth = 0;
};
sdk::Expected<SyntheticStressLayout> synthetic_stress_layout(const TextConfig& text, std::uint64_t seed);

}  // namespace qgpu::qwen35
