// Choosing the next token from logits: greedy, or sampling with temperature,
// top-k and top-p, reproducible from a seed on every platform.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "qgpu/sdk/base_model.h"
#include "qgpu/sdk/status.h"

namespace qgpu::core {

struct SamplingOptions {
  double temperature = 0.0;  // 0: greedy (argmax, lowest id on ties)
  std::int64_t top_k = 0;    // 0: no limit
  double top_p = 1.0;        // 1: no nucleus cut
  std::uint64_t seed = 0;
};

// Checks ranges: temperature >= 0 and finite, top_k >= 0, 0 < top_p <= 1.
sdk::Status validate(const SamplingOptions& options);

// Sampling as asked on the command line; a field left empty takes the checkpoint's default.
struct SamplingFlags {
  std::optional<double> temperature = std::nullopt;
  std::optional<std::int64_t> top_k = std::nullopt;
  std::optional<double> top_p = std::nullopt;
  std::uint64_t seed = 0;
};

// The checkpoint's defaults (greedy unless do_sample; then its temperature, top_k and top_p, as
// transformers) with every given flag on top. Sampling happens when the result's temperature is > 0.
SamplingOptions resolve_sampling(const sdk::GenerationDefaults& defaults, const SamplingFlags& flags);

class Sampler {
 public:
  explicit Sampler(const SamplingOptions& options);
  // Picks an id among logits[0, allowed) (ids past `allowed` are never chosen; text generation
  // passes every logit row, as transformers does).
  // NaN logits are an error.
  sdk::Expected<std::int64_t> next(std::span<const float> logits, std::int64_t allowed);

 private:
  double uniform();  // [0, 1) from splitmix64: the same stream for a seed everywhere

  SamplingOptions options_;
  std::uint64_t state_;
};

// The length of the longest prefix of `bytes` that does not end inside a UTF-8
// sequence (for streaming text whose last token may cut a character).
std::size_t complete_utf8_prefix(const std::string& bytes);

}  // namespace qgpu::core
