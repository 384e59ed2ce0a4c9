#include "qgpu/core/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace qgpu::core {

sdk::Status validate(const SamplingOptions& o) {
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature)) {
    return sdk::invalid_argument("--temperature must be a finite number >= 0, got " + std::to_string(o.temperature));
  }
  if (o.top_k < 0) return sdk::invalid_argument("--top-k must be >= 0, got " + std::to_string(o.top_k));
  if (!(o.top_p > 0 && o.top_p <= 1)) {
    return sdk::invalid_argument("--top-p must be in (0, 1], got " + std::to_string(o.top_p));
  }
  return sdk::Status::ok();
}

SamplingOptions resolve_sampling(const sdk::GenerationDefaults& d, const SamplingFlags& flags) {
  SamplingOptions out;  // greedy
  if (d.do_sample) {
    out.temperature = d.temperature;
    out.top_k = d.top_k;
    out.top_p = d.top_p;
  }
  if (flags.temperature) out.temperature = *flags.temperature;
  if (flags.top_k) out.top_k = *flags.top_k;
  if (flags.top_p) out.top_p = *flags.top_p;
  out.seed = flags.seed;
  return out;
}

Sampler::Sampler(const SamplingOptions& options) : options_(options), state_(options.seed) {}

double Sampler::uniform() {
  // splitmix64: fully specified, so a seed gives the same tokens on every platform.
  std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

sdk::Expected<std::int64_t> Sampler::next(std::span<const float> logits, std::int64_t allowed) {
  const std::int64_t n = std::min<std::int64_t>(allowed, static_cast<std::int64_t>(logits.size()));
  if (n <= 0) return sdk::invalid_argument("no token to choose from");
  for (std::int64_t i = 0; i < n; ++i) {
    if (std::isnan(logits[i])) return sdk::internal_error("the model produced a NaN logit at id " + std::to_string(i));
  }
  if (options_.temperature == 0) {
    return static_cast<std::int64_t>(std::max_element(logits.begin(), logits.begin() + n) - logits.begin());
  }
  // Candidates by descending logit (ties: lower id first), cut by top-k.
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return logits[a] > logits[b]; });
  if (options_.top_k > 0 && options_.top_k < n) order.resize(static_cast<std::size_t>(options_.top_k));
  // Softmax at the temperature, in double.
  std::vector<double> p(order.size());
  const double top = logits[order.front()];
  double total = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    p[i] = std::exp((logits[order[i]] - top) / options_.temperature);
    total += p[i];
  }
  for (double& v : p) v /= total;
  // Nucleus: the smallest prefix whose mass reaches top_p.
  if (options_.top_p < 1) {
    double mass = 0;
    std::size_t keep = 0;
    while (keep < p.size() && mass < options_.top_p) mass += p[keep++];
    p.resize(keep);
    order.resize(keep);
    for (double& v : p) v /= mass;
  }
  double r = uniform();
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (r < p[i]) return order[i];
    r -= p[i];
  }
  return order.back();  // rounding left r just above the last bucket
}

std::size_t complete_utf8_prefix(const std::string& bytes) {
  // Walk back over at most 3 continuation bytes to the last lead byte.
  std::size_t n = bytes.size();
  std::size_t i = n;
  int continuation = 0;
  while (i > 0 && continuation < 4) {
    const auto c = static_cast<unsigned char>(bytes[i - 1]);
    if ((c & 0xC0) != 0x80) {
      const std::size_t need = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
      return (n - (i - 1) >= need) ? n : i - 1;
    }
    --i;
    ++continuation;
  }
  return n;  // only continuation bytes: not ours to hold back
}

}  // namespace qgpu::core
