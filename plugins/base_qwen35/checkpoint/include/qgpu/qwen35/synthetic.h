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
#include <string_view>
#include <vector>

#include "qgpu/qwen35/config.h"
#include "qgpu/qwen35/safetensors.h"

namespace qgpu::qwen35 {

struct SyntheticSpec {
  TextConfig text;
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
// the generator use this; the merge finds the channel by searching.
std::int64_t synthetic_negative_channel(std::int64_t hidden_size, std::uint64_t seed);

// The tensors alone (names with the model.language_model. prefix), generated lazily.
std::vector<TensorToWrite> synthetic_tensors(const TextConfig& text, std::uint64_t seed);

}  // namespace qgpu::qwen35
