// Synthetic checkpoint writer (synthetic.h): every tensor's values from a seed, the embedding's
// shapes (isotropic, anisotropic, one negative channel) and the stress base's plan. Over 700 lines
// because they are one writer: the stress plan decides values the tensor loop writes.
#include "qgpu/qwen35/synthetic.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <numbers>
#include <numeric>

#include "qgpu/qwen35/checkpoint.h"

namespace qgpu::qwen35 {

using sdk::Expected;
using sdk::Status;

namespace {

std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

class Rng {  // xoshiro256**
 public:
  explicit Rng(std::uint64_t seed) {
    for (auto& w : s_) w = splitmix64(seed);
  }
  std::uint64_t next() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 24 random bits (exact in float).
  float uniform() { return static_cast<float>(next() >> 40) * 0x1p-24f; }
  // Mean 0, variance 1: the sum of four uniforms (16-bit each), rescaled. Only
  // integer arithmetic and one float multiply, so the result is exact and
  // portable; the tails stop at +-3.46 (fine for weights).
  float near_normal() {
    const std::uint64_t r = next();
    std::int64_t sum = 0;
    for (int i = 0; i < 4; ++i) sum += static_cast<std::int64_t>((r >> (16 * i)) & 0xffff);
    // (sum + 2) / 65536 - 2 has variance 1/3.
    const std::int64_t centered = sum + 2 - 2 * 65536;
    return static_cast<float>(centered) * (1.7320508075688772f / 65536.0f);
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

std::uint64_t tensor_seed(std::uint64_t seed, std::string_view name) {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the name
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  std::uint64_t x = seed ^ h;
  return splitmix64(x);
}

enum class Init { kNormal002, kZeroCentredNorm, kGatedNormWeight, kALog, kDtBias };

Init init_for(std::string_view name) {
  auto ends = [&](std::string_view s) { return name.ends_with(s); };
  if (ends(".A_log")) return Init::kALog;
  if (ends(".dt_bias")) return Init::kDtBias;
  if (ends("linear_attn.norm.weight")) return Init::kGatedNormWeight;
  if (ends("layernorm.weight") || ends("q_norm.weight") || ends("k_norm.weight") ||
      name == "model.language_model.norm.weight") {
    return Init::kZeroCentredNorm;
  }
  return Init::kNormal002;
}

// One value of a tensor. Scaled like a trained model so activations stay sane:
// projections N(0, 0.02); zero-centred norms (scale 1 + w) near 0; the gated
// norm (scale w) near 1; A = exp(A_log) uniform in [1, 16] as in HF's init;
// dt_bias = softplus^-1(dt) with dt log-uniform in [1e-3, 1e-1] (Mamba's init),
// so the per-token decay exp(-A softplus(a + dt_bias)) keeps some memory.
float sample(Init init, Rng& rng) {
  switch (init) {
    case Init::kNormal002: return 0.02f * rng.near_normal();
    case Init::kZeroCentredNorm: return 0.02f * rng.near_normal();
    case Init::kGatedNormWeight: return 1.0f + 0.02f * rng.near_normal();
    case Init::kALog: return static_cast<float>(std::log(1.0 + 15.0 * static_cast<double>(rng.uniform())));
    case Init::kDtBias: {
      const double dt = std::exp(std::log(1e-3) + (std::log(1e-1) - std::log(1e-3)) * rng.uniform());
      return static_cast<float>(dt + std::log(-std::expm1(-dt)));
    }
  }
  return 0;
}

float round_bf16(double v) {
  return bf16_to_f32(f32_to_bf16(static_cast<float>(v)));
}

// Regenerates a tensor's values as the generator draws them (before any
// stress change), rounded as they are stored.
std::vector<float> drawn_values(const std::string& name, std::int64_t count, std::uint64_t seed, bool bf16) {
  Rng rng(tensor_seed(seed, name));
  const Init init = init_for(name);
  std::vector<float> v(static_cast<std::size_t>(count));
  for (auto& x : v) x = bf16 ? round_bf16(sample(init, rng)) : sample(init, rng);
  return v;
}

// ---------------------------------------------------------------------------
// Embeddings other than the planted default.

// Anisotropic rows x_r = s_r (c_r u + sqrt(1 - c_r^2) n_r), n_r an isotropic
// unit vector, u a fixed unit "mean direction". Trained tied embeddings are
// anisotropic like this (a shared direction; random pairs of rows have a
// clearly positive mean cosine). These values give a cosine to u of 0.35 on
// average and a mean pairwise cosine of 0.12. Outlier dimensions carry much
// of the direction: u_i is a Gaussian times a log-normal scale exp(1.0 z_i),
// so at the 2B shapes the 8 largest of 2,048 channels hold ~28 % of |u|^2
// and the 64 largest ~70 %; still no channel comes near one sign on every row
// (|mean| / std per channel <= 2.4; at 248,320 rows the most one-sided channel
// has 696 rows of the other sign).
constexpr double kAnisoCosMean = 0.35;
constexpr double kAnisoCosStd = 0.10;
// c_r is clipped to [0.05, 0.9]; the noise can still take a row just below 0
// (1 of 248,320 rows at seed 0), so u itself separates nearly, not all, rows.
constexpr double kAnisoCosMin = 0.05;
constexpr double kAnisoCosMax = 0.9;
constexpr double kAnisoMeanLogSigma = 1.0;  // heavy tail of |u_i|
// Row norms: 0.02 sqrt(hidden) (what a N(0, 0.02) row has) times exp(0.2 z),
// so most rows lie within x0.67..x1.5 of it, as trained rows vary with frequency.
constexpr double kAnisoNormLogSigma = 0.2;

std::vector<double> anisotropic_mean_direction(std::int64_t hidden, std::uint64_t seed) {
  Rng rng(tensor_seed(seed, "anisotropic_mean_direction"));
  std::vector<double> u(static_cast<std::size_t>(hidden));
  double norm2 = 0;
  for (auto& x : u) {
    const double g = rng.near_normal();
    const double z = rng.near_normal();
    x = g * std::exp(kAnisoMeanLogSigma * z);
    norm2 += x * x;
  }
  const double inv = 1.0 / std::sqrt(norm2);
  for (auto& x : u) x *= inv;
  return u;
}

void put_bf16(std::span<std::byte> bytes, std::size_t index, float v) {
  const std::uint16_t b = f32_to_bf16(v);
  std::memcpy(bytes.data() + 2 * index, &b, 2);  // little-endian host (x86-64, aarch64)
}

// No channel on which every row has one strict sign: for each such channel the
// value of one row (a hash of the seed and the channel) is negated. Needs 2 rows.
void break_one_sign_channels(std::span<std::byte> bytes, std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  // Per channel: seen a value that is not > 0, seen a value that is not < 0.
  std::vector<std::uint8_t> not_pos(static_cast<std::size_t>(cols)), not_neg(static_cast<std::size_t>(cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::byte* row = bytes.data() + 2 * r * cols;
    for (std::int64_t c = 0; c < cols; ++c) {
      std::uint16_t b;
      std::memcpy(&b, row + 2 * c, 2);
      const bool zero = (b & 0x7fff) == 0;
      const bool negative = (b & 0x8000) != 0;
      not_pos[static_cast<std::size_t>(c)] |= static_cast<std::uint8_t>(zero || negative);
      not_neg[static_cast<std::size_t>(c)] |= static_cast<std::uint8_t>(zero || !negative);
    }
  }
  for (std::int64_t c = 0; c < cols; ++c) {
    if (not_pos[static_cast<std::size_t>(c)] && not_neg[static_cast<std::size_t>(c)]) continue;
    std::uint64_t x = seed ^ (0x5bd1e995ull * static_cast<std::uint64_t>(c + 1));
    const std::int64_t r = static_cast<std::int64_t>(splitmix64(x) % static_cast<std::uint64_t>(rows));
    std::byte* p = bytes.data() + 2 * (r * cols + c) + 1;  // high byte holds the sign
    *p ^= std::byte{0x80};
  }
}

Status fill_embedding(SyntheticEmbedding mode, std::span<std::byte> bytes, std::int64_t rows, std::int64_t cols,
                      std::uint64_t stream, std::uint64_t seed) {
  if (rows < 2) return sdk::invalid_argument("this embedding needs at least 2 rows");
  Rng rng(stream);
  if (mode == SyntheticEmbedding::kIsotropic) {
    // The planted default's stream without its planted channel.
    for (std::int64_t i = 0; i < rows * cols; ++i)
      put_bf16(bytes, static_cast<std::size_t>(i), 0.02f * rng.near_normal());
  } else {
    const std::vector<double> u = anisotropic_mean_direction(cols, seed);
    const double typical_norm = 0.02 * std::sqrt(static_cast<double>(cols));
    std::vector<double> n(static_cast<std::size_t>(cols));
    for (std::int64_t r = 0; r < rows; ++r) {
      const double c = std::clamp(kAnisoCosMean + kAnisoCosStd * rng.near_normal(), kAnisoCosMin, kAnisoCosMax);
      const double s = typical_norm * std::exp(kAnisoNormLogSigma * rng.near_normal());
      double n2 = 0;
      for (auto& x : n) {
        x = rng.near_normal();
        n2 += x * x;
      }
      const double along = s * c, across = s * std::sqrt(1 - c * c) / std::sqrt(n2);
      for (std::int64_t i = 0; i < cols; ++i) {
        const auto k = static_cast<std::size_t>(i);
        put_bf16(bytes, static_cast<std::size_t>(r * cols + i), static_cast<float>(along * u[k] + across * n[k]));
      }
    }
  }
  break_one_sign_channels(bytes, rows, cols, seed);
  return Status::ok();
}

// ---------------------------------------------------------------------------
// The stress base. Every number below is a design target; docs/CHECKPOINTS.md
// has what a forward pass measures.

// Residual growth over depth: layer l's output projections are scaled so that
// the residual's rms after it (massive channels aside) is R_0 G^(l / (L - 1)),
// R_0 what layer 0 of N(0, 0.02) weights leaves: 0.75 -> 75 at the 2B shapes
// (measured 0.76 -> 69), the one to two orders of magnitude trained models'
// residuals grow by over depth. (The default already ends ~180x above the
// embedding's rms, but grows only ~5x after its first layer.)
constexpr double kStressGrowth = 100;
// Massive activations: three channels of 1e3..1e4 with mixed signs (the size
// reported for LLaMA-2 and others, where they sit on the first and delimiter
// tokens) on EVERY token from layer 1 on, so nothing a merge appends escapes.
constexpr std::array<float, 3> kMassiveValues = {1500.0f, -3500.0f, 8000.0f};
constexpr std::int64_t kMassiveLayer = 1;
// Massive activations act as biases (Sun et al. 2024): every MLP after the
// massive layer reads them into its gates as a constant of N(0, 3^2) per
// neuron. That also makes the MLP about linear in the rest of its input
// (silu(b + g) ~ silu(b) for |b| >> |g|), which keeps the norm compensation
// below stable over depth.
constexpr double kGateBias = 3;
// The embedding rms the growth design assumes (N(0, 0.02) rows).
constexpr double kEmbeddingRms = 0.02;
// The massive MLP's 2 * hidden pair neurons sum s * |x_hat|^2 = s * hidden
// with s * hidden = 2048: pre-activations of size 1 at the 2B shapes.
constexpr double kMassivePairSum = 2048;
// The first token's own massive activation (real models put one on the
// first token; here it also marks the attention sinks' key).
constexpr float kFirstTokenValue = 5000.0f;
constexpr std::int64_t kFirstTokenLayer = 2;
// Pre-activations of the first-token detector: silu(-128) is exactly 0 in f32
// and bf16, so the detector is exact (the DeltaNet head reads exactly 0 after
// the first position). Beta and the output gate z of that head sit at 16:
// sigmoid(16) is 1 in bf16, silu(16) ~ 16.
constexpr double kDetectorPreact = 128;
constexpr double kFlagGate = 16;
// Sinks: the first position's key gets weight 128 from the first-token
// channel in head dim hd - 1, so after k_norm it points almost entirely along
// that dim; query head i of KV group 0 has a constant component there worth
// a score gap of 3 + 2i, at most 0.9 sqrt(hd): at the 2B shapes gaps 3, 5,
// 7, 9 put on average ~0.2, ~0.5, ~0.85 and ~0.97 of the weight of queries
// 1..255 on the first position (other heads ~0.02, uniform 0.024).
constexpr double kSinkKeyWeight = 128;
constexpr double kSinkGapFirst = 3, kSinkGapStep = 2;
// Final norm scales (1 + w): magnitudes log-uniform over [0.05, 20] (median 1),
// 10 % of the channels negative, and max(2, hidden / 256) near zero: bf16 holds
// only 2^-8, 2^-7 and -2^-7 below 0.01 in magnitude (w is stored, 1 + w used).
constexpr double kFinalScaleMin = 0.05, kFinalScaleMax = 20;
constexpr double kFinalNegativeShare = 0.10;
constexpr std::array<float, 3> kFinalNearZero = {0x1p-8f, -0x1p-7f, 0x1p-7f};

// E[silu(g)^2] for g ~ N(0, v) (trapezoid rule over +-10 sd).
double mean_silu_squared(double v) {
  const int steps = 4000;
  const double sd = std::sqrt(v), lo = -10 * sd, h = 20 * sd / steps;
  double sum = 0;
  for (int i = 0; i <= steps; ++i) {
    const double g = lo + h * i;
    const double silu = g / (1 + std::exp(-g));
    const double weight = (i == 0 || i == steps) ? 0.5 : 1.0;
    sum += weight * silu * silu * std::exp(-g * g / (2 * v));
  }
  return sum * h / std::sqrt(2 * std::numbers::pi * v);
}

struct StressPlan {
  SyntheticStressLayout layout;
  double massive_mean_square = 0;  // sum of massive_values^2 / hidden
  std::vector<float> reader;       // reads the massive channels: x_hat . reader ~ 1 after the massive layer
  std::vector<double> sink_query;  // per sink head: the constant query component
};

Expected<StressPlan> make_stress_plan(const TextConfig& t, std::uint64_t seed) {
  QGPU_RETURN_IF_ERROR(check_synthetic_options(t, SyntheticOptions{.stress = true}));
  StressPlan p;
  SyntheticStressLayout& l = p.layout;
  const std::int64_t h = t.hidden_size, layers = t.num_hidden_layers;
  // Distinct channels, never the planted channel.
  Rng rng(tensor_seed(seed, "stress_channels"));
  std::vector<std::int64_t> taken = {synthetic_negative_channel(h, seed)};
  auto pick = [&] {
    for (;;) {
      const auto c = static_cast<std::int64_t>(rng.next() % static_cast<std::uint64_t>(h));
      if (std::find(taken.begin(), taken.end(), c) == taken.end()) {
        taken.push_back(c);
        return c;
      }
    }
  };
  l.massive_layer = kMassiveLayer;
  for (float v : kMassiveValues) {
    l.massive_channels.push_back(pick());
    l.massive_values.push_back(v);
    p.massive_mean_square += static_cast<double>(v) * v / static_cast<double>(h);
  }
  l.first_token_layer = kFirstTokenLayer;
  l.first_token_channel = pick();
  l.first_token_value = kFirstTokenValue;
  for (std::int64_t i = kFirstTokenLayer + 1; i < layers; ++i)
    if (t.layer_types[static_cast<std::size_t>(i)] == LayerType::kFullAttention) l.sink_layers.push_back(i);
  l.sink_dim = t.head_dim - 1;
  const std::int64_t group = t.num_attention_heads / t.num_key_value_heads;
  const double sqrt_hd = std::sqrt(static_cast<double>(t.head_dim));
  // The random part of a query head after the compensated norm: hd - 1 dims of
  // variance 0.02^2 * hidden.
  const double random_energy = static_cast<double>(t.head_dim - 1) * 0.02 * 0.02 * static_cast<double>(h);
  for (std::int64_t i = 0; i < group; ++i) {
    const double gap = std::min(kSinkGapFirst + kSinkGapStep * static_cast<double>(i), 0.9 * sqrt_hd);
    l.sink_gaps.push_back(round_bf16(gap));
    // Normalised to sqrt(hd), a component a over random energy E gives
    // sqrt(hd) a / sqrt(a^2 + E) on the sink dim; the key is ~sqrt(hd) there.
    p.sink_query.push_back(round_bf16(gap * std::sqrt(random_energy) / std::sqrt(t.head_dim - gap * gap)));
  }
  // Growth. One MLP of N(0, 0.02) weights on a unit-rms input adds rho (0.75
  // at the 2B shapes; the DeltaNet layers add next to nothing, their outputs
  // sitting below the gated norm's eps); the massive layer has only
  // I - 2 hidden random neurons, the later ones their gate bias. Layer l's
  // output scale brings the residual to the target R_0 G^(l / (L - 1)), or as
  // near as its rho allows.
  const double var = 0.02 * 0.02 * static_cast<double>(h);  // a pre-activation's variance
  const double mlp = 0.02 * 0.02 * static_cast<double>(t.intermediate_size) * var;
  const double rho_plain = std::sqrt(mlp * mean_silu_squared(var));
  const double rho_massive = rho_plain * std::sqrt(static_cast<double>(t.intermediate_size - 2 * h) /
                                                   static_cast<double>(t.intermediate_size));
  const double rho_biased = std::sqrt(mlp * mean_silu_squared(var + kGateBias * kGateBias));
  l.growth = static_cast<float>(kStressGrowth);
  const double r0 = std::sqrt(kEmbeddingRms * kEmbeddingRms + rho_plain * rho_plain);
  double bulk = r0;
  for (std::int64_t i = 0; i < layers; ++i) {
    double scale = 1;
    if (i > 0) {
      const double rho = i < kMassiveLayer ? rho_plain : i == kMassiveLayer ? rho_massive : rho_biased;
      const double target = r0 * std::pow(kStressGrowth, static_cast<double>(i) / static_cast<double>(layers - 1));
      if (rho > 0 && target > bulk) scale = round_bf16(std::sqrt(target * target - bulk * bulk) / rho);
      bulk = std::sqrt(bulk * bulk + scale * scale * rho * rho);
    }
    l.output_scale.push_back(static_cast<float>(scale));
    l.bulk_rms.push_back(round_bf16(bulk));
  }
  p.reader.assign(static_cast<std::size_t>(h), 0.0f);
  const auto k = static_cast<float>(l.massive_channels.size());
  for (std::size_t i = 0; i < l.massive_channels.size(); ++i)
    p.reader[static_cast<std::size_t>(l.massive_channels[i])] = (l.massive_values[i] > 0 ? 1.0f : -1.0f) / k;
  return p;
}

// Layer index and the rest of a layer tensor's name ("layers.3.mlp.up_proj.weight" -> 3, "mlp.up_proj.weight").
bool split_layer_name(std::string_view local, std::int64_t& layer, std::string_view& rest) {
  if (!local.starts_with("layers.")) return false;
  local.remove_prefix(7);
  const auto dot = local.find('.');
  if (dot == std::string_view::npos) return false;
  auto [ptr, ec] = std::from_chars(local.data(), local.data() + dot, layer);
  if (ec != std::errc() || ptr != local.data() + dot) return false;
  rest = local.substr(dot + 1);
  return true;
}

// Zero-centred norm of a layer after the massive one. Its input's rms is
// dominated by the massive channels (~200 at the 2B shapes against a bulk of
// 1..60), which would shrink every other channel to ~1/200 and leave the
// later layers nearly the same on every token; trained models answer with
// larger weights, and so does this: bulk channels are scaled by
// rms(input) / rms(bulk), the massive (and first-token) channels by
// rms(input) / |value|, so every channel of the normalised input is ~1.
// (Without the gate bias below the MLPs, quadratic in their input, would make
// this open-loop scaling unstable over depth: a bulk 10 % too large gives
// outputs 20 % too large, and so on.)
void compensate_norm(std::vector<float>& w, const StressPlan& p, std::int64_t layer, bool sees_first_token) {
  const SyntheticStressLayout& l = p.layout;
  const double bulk = l.bulk_rms[static_cast<std::size_t>(layer - 1)];
  const double rms = std::sqrt(bulk * bulk + p.massive_mean_square);
  const std::vector<float> drawn = w;
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(rms / bulk * (1.0 + drawn[i]) - 1.0);
  auto set = [&](std::int64_t c, double value) {
    const auto i = static_cast<std::size_t>(c);
    w[i] = static_cast<float>(rms / std::fabs(value) * (1.0 + drawn[i]) - 1.0);
  };
  for (std::size_t i = 0; i < l.massive_channels.size(); ++i) set(l.massive_channels[i], l.massive_values[i]);
  if (sees_first_token) set(l.first_token_channel, l.first_token_value);
}

// The final norm's scales (replacing the drawn values).
void final_norm_scales(std::vector<float>& w, std::uint64_t seed) {
  const auto h = static_cast<std::int64_t>(w.size());
  Rng rng(tensor_seed(seed, "final_norm_scales"));
  std::vector<std::int64_t> order(static_cast<std::size_t>(h));
  std::iota(order.begin(), order.end(), 0);
  for (std::int64_t i = h - 1; i > 0; --i)
    std::swap(order[static_cast<std::size_t>(i)],
              order[static_cast<std::size_t>(rng.next() % static_cast<std::uint64_t>(i + 1))]);
  const std::int64_t near_zero = std::max<std::int64_t>(2, h / 256);
  const auto negative = static_cast<std::int64_t>(std::llround(kFinalNegativeShare * static_cast<double>(h)));
  for (std::int64_t k = 0; k < h; ++k) {
    double scale;
    if (k < near_zero) {
      scale = kFinalNearZero[static_cast<std::size_t>(k) % kFinalNearZero.size()];
    } else {
      const double u = rng.uniform();
      scale = std::exp(std::log(kFinalScaleMin) + u * (std::log(kFinalScaleMax) - std::log(kFinalScaleMin)));
      if (k < near_zero + negative) scale = -scale;
    }
    w[static_cast<std::size_t>(order[static_cast<std::size_t>(k)])] = static_cast<float>(scale - 1.0);
  }
}

// Applies the stress design to one tensor's drawn values (row-major [out, in]).
void apply_stress(const StressPlan& p, const TextConfig& t, std::uint64_t seed, std::string_view local,
                  std::vector<float>& v) {
  const SyntheticStressLayout& l = p.layout;
  const std::int64_t h = t.hidden_size;
  if (local == "norm.weight") return final_norm_scales(v, seed);
  std::int64_t layer = 0;
  std::string_view rest;
  if (!split_layer_name(local, layer, rest)) return;
  const auto at = [&](std::int64_t row, std::int64_t col, std::int64_t cols) -> float& {
    return v[static_cast<std::size_t>(row * cols + col)];
  };
  const auto set_row = [&](std::int64_t row, std::int64_t cols, double scale, const std::vector<float>& src) {
    for (std::int64_t c = 0; c < cols; ++c)
      at(row, c, cols) = static_cast<float>(scale * src[static_cast<std::size_t>(c)]);
  };
  const float alpha = l.output_scale[static_cast<std::size_t>(layer)];
  const std::int64_t m = l.massive_layer, f = l.first_token_layer;
  const std::int64_t dk = t.linear_key_head_dim, dv = t.linear_value_head_dim, kdim = t.linear_key_dim();

  if (rest == "input_layernorm.weight" || rest == "post_attention_layernorm.weight") {
    const bool post = rest.starts_with("post");
    if (layer > m) compensate_norm(v, p, layer, layer > f || (layer == f && post));
    return;
  }
  if (rest == "mlp.down_proj.weight" || rest == "self_attn.o_proj.weight" || rest == "linear_attn.out_proj.weight") {
    for (auto& x : v) x *= alpha;
  }
  if (layer == m && (rest == "mlp.gate_proj.weight" || rest == "mlp.up_proj.weight")) {
    // Neurons 2i and 2i+1: gate = up = +-sqrt(s) e_i / (1 + w_i), so their
    // products sum to s x_hat_i^2 whatever the input.
    const auto norm =
        drawn_values(std::string(kWrapperPrefix) + "layers." + std::to_string(m) + ".post_attention_layernorm.weight",
                     h, seed, true);
    const double root_s = std::sqrt(kMassivePairSum / static_cast<double>(h));
    for (std::int64_t i = 0; i < h; ++i) {
      const auto weight = static_cast<float>(root_s / (1.0 + norm[static_cast<std::size_t>(i)]));
      for (std::int64_t n : {2 * i, 2 * i + 1}) {
        for (std::int64_t c = 0; c < h; ++c) at(n, c, h) = 0;
        at(n, i, h) = n % 2 ? -weight : weight;
      }
    }
  } else if (layer > m && rest == "mlp.gate_proj.weight") {
    Rng bias(tensor_seed(seed, std::string(local) + ".bias"));
    for (std::int64_t n = 0; n < t.intermediate_size; ++n) {
      const double b = kGateBias * bias.near_normal();
      for (std::int64_t c = 0; c < h; ++c) at(n, c, h) += static_cast<float>(b * p.reader[static_cast<std::size_t>(c)]);
    }
  } else if (layer == m && rest == "mlp.down_proj.weight") {
    const std::int64_t inter = t.intermediate_size;
    for (std::int64_t n = 0; n < 2 * h; ++n) {
      for (std::int64_t r = 0; r < h; ++r) at(r, n, inter) = 0;
      for (std::size_t i = 0; i < l.massive_channels.size(); ++i)
        at(l.massive_channels[i], n, inter) = static_cast<float>(l.massive_values[i] / kMassivePairSum);
    }
  } else if (layer == f && rest == "linear_attn.in_proj_qkv.weight") {
    // Key head 0 / value head 0 only: q = [A, B], k = [A, C] as detectors
    // (below), v constant.
    for (std::int64_t r = 0; r < dk; ++r) set_row(r, h, 0, p.reader), set_row(kdim + r, h, 0, p.reader);
    for (std::int64_t r : {std::int64_t{0}, std::int64_t{1}, kdim, kdim + 2}) set_row(r, h, kDetectorPreact, p.reader);
    for (std::int64_t r = 0; r < dv; ++r) set_row(2 * kdim + r, h, kFlagGate, p.reader);
  } else if (layer == f && rest == "linear_attn.conv1d.weight") {
    // Causal taps (oldest .. current). On a constant input P: "first" gives
    // +P at position 0 and -P after, "later" the opposite; silu makes them 0
    // exactly. So q = e_A, k = e_A at the first position, q = e_B, k = e_C
    // after: only the first write is ever read, and only by the first token;
    // afterwards the head reads row B, which nothing writes: exactly 0.
    const std::int64_t kernel = t.linear_conv_kernel_dim;
    auto taps = [&](std::int64_t ch, double previous, double current) {
      for (std::int64_t j = 0; j < kernel; ++j) at(ch, j, kernel) = 0;
      at(ch, kernel - 2, kernel) = static_cast<float>(previous);
      at(ch, kernel - 1, kernel) = static_cast<float>(current);
    };
    for (std::int64_t r = 0; r < dk; ++r) taps(r, 0, 0), taps(kdim + r, 0, 0);
    taps(0, -2, 1), taps(kdim, -2, 1);      // A: first
    taps(1, 2, -1), taps(kdim + 2, 2, -1);  // q B, k C: later
    for (std::int64_t r = 0; r < dv; ++r) taps(2 * kdim + r, 0, 1);
  } else if (layer == f && rest == "linear_attn.in_proj_b.weight") {
    set_row(0, h, kFlagGate, p.reader);  // beta = 1
  } else if (layer == f && rest == "linear_attn.in_proj_z.weight") {
    for (std::int64_t r = 0; r < dv; ++r) set_row(r, h, kFlagGate, p.reader);  // silu(z) ~ 16
  } else if (layer == f && rest == "linear_attn.out_proj.weight") {
    // The head's normalised output is all ones (v constant), times w (the
    // gated norm's weight) and silu(16): write first_token_value to one channel.
    const auto w = drawn_values(
        std::string(kWrapperPrefix) + "layers." + std::to_string(f) + ".linear_attn.norm.weight", dv, seed, false);
    const double sum_w = std::accumulate(w.begin(), w.end(), 0.0);
    const std::int64_t vdim = t.linear_value_dim();
    for (std::int64_t c = 0; c < dv; ++c) {
      for (std::int64_t r = 0; r < h; ++r) at(r, c, vdim) = 0;
      at(l.first_token_channel, c, vdim) = static_cast<float>(l.first_token_value / (kFlagGate * sum_w));
    }
  } else if (std::find(l.sink_layers.begin(), l.sink_layers.end(), layer) != l.sink_layers.end()) {
    const std::int64_t hd = t.head_dim;
    if (rest == "self_attn.k_proj.weight") {
      at(l.sink_dim, l.first_token_channel, h) = static_cast<float>(kSinkKeyWeight);
    } else if (rest == "self_attn.q_proj.weight") {
      for (std::size_t i = 0; i < p.sink_query.size(); ++i) {
        const std::int64_t row = static_cast<std::int64_t>(i) * 2 * hd + l.sink_dim;  // query half of head i
        for (std::int64_t c = 0; c < h; ++c)
          at(row, c, h) += static_cast<float>(p.sink_query[i] * p.reader[static_cast<std::size_t>(c)]);
      }
    }
  }
}

}  // namespace

std::vector<LayerType> synthetic_layer_types(std::int64_t num_layers) {
  auto types = derive_layer_types(num_layers, 4);
  if (num_layers > 0 && num_layers < 4) types.back() = LayerType::kFullAttention;
  return types;
}

static TextConfig common_text(std::int64_t num_layers, std::int64_t vocab_size) {
  TextConfig t;
  t.vocab_size = vocab_size;
  t.num_hidden_layers = num_layers;
  t.layer_types = synthetic_layer_types(num_layers);
  t.full_attention_interval = 4;
  t.hidden_act = "silu";
  t.max_position_embeddings = 262144;
  t.rms_norm_eps = 1e-6;
  t.tie_word_embeddings = true;
  t.rope.rope_type = "default";
  t.rope.rope_theta = 1e7;
  t.rope.partial_rotary_factor = 0.25;
  t.rope.mrope_interleaved = true;
  t.linear_conv_kernel_dim = 4;
  // The real eos id (248044) lies outside a small vocabulary: use the last row.
  t.eos_token_ids = {vocab_size - 1};
  t.dtype = "bfloat16";
  t.mtp_num_hidden_layers = 0;  // no mtp.* tensors are written
  return t;
}

SyntheticSpec synthetic_2b_spec(std::int64_t num_layers, std::int64_t vocab_size) {
  SyntheticSpec spec;
  TextConfig& t = spec.text = common_text(num_layers, vocab_size);
  t.hidden_size = 2048;
  t.intermediate_size = 6144;
  t.num_attention_heads = 8;
  t.num_key_value_heads = 2;
  t.head_dim = 256;
  t.linear_key_head_dim = 128;
  t.linear_value_head_dim = 128;
  t.linear_num_key_heads = 16;
  t.linear_num_value_heads = 16;
  t.rope.mrope_section = {11, 11, 10};
  return spec;
}

SyntheticSpec synthetic_small_spec(std::int64_t num_layers, std::int64_t vocab_size) {
  SyntheticSpec spec;
  TextConfig& t = spec.text = common_text(num_layers, vocab_size);
  t.hidden_size = 64;
  t.intermediate_size = 128;
  t.num_attention_heads = 4;
  t.num_key_value_heads = 2;
  t.head_dim = 32;  // rotary dim 8
  t.linear_key_head_dim = 16;
  t.linear_value_head_dim = 16;
  t.linear_num_key_heads = 2;
  t.linear_num_value_heads = 4;
  t.rope.mrope_section = {2, 1, 1};
  return spec;
}

std::string_view synthetic_embedding_name(SyntheticEmbedding embedding) {
  switch (embedding) {
    case SyntheticEmbedding::kPlanted: return "planted";
    case SyntheticEmbedding::kIsotropic: return "isotropic";
    case SyntheticEmbedding::kAnisotropic: return "anisotropic";
  }
  return "?";
}

std::optional<SyntheticEmbedding> parse_synthetic_embedding(std::string_view name) {
  for (auto e : {SyntheticEmbedding::kPlanted, SyntheticEmbedding::kIsotropic, SyntheticEmbedding::kAnisotropic})
    if (synthetic_embedding_name(e) == name) return e;
  return std::nullopt;
}

Status check_synthetic_options(const TextConfig& t, const SyntheticOptions& options) {
  if (options.embedding != SyntheticEmbedding::kPlanted && t.vocab_size < 2) {
    return sdk::invalid_argument("the " + std::string(synthetic_embedding_name(options.embedding)) +
                                 " embedding needs at least 2 rows");
  }
  if (!options.stress) return Status::ok();
  auto refuse = [](const std::string& why) { return sdk::invalid_argument("a stress base needs " + why); };
  if (t.num_hidden_layers < 4 || t.layer_types.size() != static_cast<std::size_t>(t.num_hidden_layers))
    return refuse("at least 4 layers");
  for (std::int64_t i = 0; i < 3; ++i)
    if (t.layer_types[static_cast<std::size_t>(i)] != LayerType::kLinearAttention)
      return refuse("linear-attention layers 0..2 (the synthetic pattern)");
  if (std::find(t.layer_types.begin() + 3, t.layer_types.end(), LayerType::kFullAttention) == t.layer_types.end())
    return refuse("a full-attention layer after layer 2");
  if (t.intermediate_size < 2 * t.hidden_size) return refuse("intermediate_size >= 2 x hidden_size");
  if (t.hidden_size < 8) return refuse("hidden_size >= 8");
  if (t.linear_key_head_dim < 3 || t.linear_conv_kernel_dim < 2) return refuse("key heads of >= 3 and a conv of >= 2");
  if (t.rotary_dim() >= t.head_dim) return refuse("a head dim outside the rotary dims");
  return Status::ok();
}

Expected<SyntheticStressLayout> synthetic_stress_layout(const TextConfig& text, std::uint64_t seed) {
  auto plan = make_stress_plan(text, seed);
  if (!plan) return plan.error();
  return std::move(plan->layout);
}

std::int64_t synthetic_negative_channel(std::int64_t hidden_size, std::uint64_t seed) {
  if (hidden_size <= 0) return -1;
  return static_cast<std::int64_t>(tensor_seed(seed, "negative_channel") % static_cast<std::uint64_t>(hidden_size));
}

std::vector<TensorToWrite> synthetic_tensors(const TextConfig& text, std::uint64_t seed,
                                             const SyntheticOptions& options) {
  std::vector<TensorToWrite> out;
  const std::string embed_name = std::string(kWrapperPrefix) + "embed_tokens.weight";
  const Status valid = check_synthetic_options(text, options);
  std::shared_ptr<const Expected<StressPlan>> plan;
  if (options.stress && valid) plan = std::make_shared<const Expected<StressPlan>>(make_stress_plan(text, seed));
  for (auto& e : expected_text_tensors(text, kWrapperPrefix)) {
    TensorToWrite t{e.name, e.dtype, e.shape, nullptr};
    const Init init = init_for(e.name);
    const StDType dtype = e.dtype;
    const std::uint64_t s = tensor_seed(seed, e.name);
    const std::int64_t cols = e.shape.empty() ? 1 : e.shape.back();
    const bool embedding = e.name == embed_name;
    if (embedding && options.embedding != SyntheticEmbedding::kPlanted) {
      const std::int64_t rows = e.shape.front();
      t.fill = [valid, mode = options.embedding, rows, cols, s, seed](std::span<std::byte> bytes) {
        if (!valid) return valid;
        return fill_embedding(mode, bytes, rows, cols, s, seed);
      };
      out.push_back(std::move(t));
      continue;
    }
    if (options.stress && !embedding) {
      // Drawn as below, then changed by the stress design (one tensor in memory at a time).
      const std::string local = e.name.substr(kWrapperPrefix.size());
      t.fill = [valid, plan, text, seed, local, init, dtype, s](std::span<std::byte> bytes) {
        if (!valid) return valid;
        if (!*plan) return Status(plan->error());
        const std::size_t size = dtype == StDType::kF32 ? 4 : 2;
        std::vector<float> values(bytes.size() / size);
        Rng rng(s);
        for (auto& x : values) x = sample(init, rng);
        apply_stress(**plan, text, seed, local, values);
        for (std::size_t i = 0; i < values.size(); ++i) {
          if (dtype == StDType::kF32) {
            std::memcpy(bytes.data() + 4 * i, &values[i], 4);
          } else {
            put_bf16(bytes, i, values[i]);
          }
        }
        return Status::ok();
      };
      out.push_back(std::move(t));
      continue;
    }
    // The default. The embedding's massive-activation channel: every row
    // -(1/8 + |w|) there (w the value drawn for it, so the other channels do
    // not change).
    const std::int64_t negative = embedding ? synthetic_negative_channel(text.hidden_size, seed) : -1;
    t.fill = [init, dtype, s, cols, negative](std::span<std::byte> bytes) {
      Rng rng(s);
      std::int64_t index = 0;
      auto next = [&] {
        float v = sample(init, rng);
        if (index++ % cols == negative) v = -(0.125f + std::fabs(v));
        return v;
      };
      if (dtype == StDType::kF32) {
        for (std::size_t i = 0; i + 4 <= bytes.size(); i += 4) {
          const float v = next();
          std::memcpy(bytes.data() + i, &v, 4);
        }
      } else {
        for (std::size_t i = 0; i + 2 <= bytes.size(); i += 2) {
          const std::uint16_t v = f32_to_bf16(next());
          std::memcpy(bytes.data() + i, &v, 2);  // little-endian host (x86-64, aarch64)
        }
      }
      return Status::ok();
    };
    out.push_back(std::move(t));
  }
  return out;
}

Expected<SyntheticResult> write_synthetic_checkpoint(const std::filesystem::path& dir, const SyntheticSpec& spec,
                                                     std::uint64_t seed) {
  QGPU_RETURN_IF_ERROR(validate_text_config(spec.text, "text_config.").with_context("synthetic checkpoint"));
  QGPU_RETURN_IF_ERROR(check_synthetic_options(spec.text, spec.options).with_context("synthetic checkpoint"));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return sdk::error_at(dir.string(), sdk::ErrorCode::kIoError, "cannot create directory: " + ec.message());
  SyntheticResult result;
  const auto config_path = dir / "config.json";
  {
    std::ofstream out(config_path, std::ios::binary | std::ios::trunc);
    out << wrapper_config_json(spec.text);
    out.close();
    if (!out) return sdk::error_at(config_path.string(), sdk::ErrorCode::kIoError, "write failed");
  }
  result.files.push_back(config_path);
  WriteOptions options;
  options.metadata = {{"format", "pt"}};  // what HF's save_pretrained writes
  options.max_shard_bytes = spec.max_shard_bytes;
  if (spec.progress) {
    options.progress = [&spec](std::uint64_t done, std::uint64_t total) { spec.progress("weights", done, total); };
  }
  auto files = write_checkpoint_tensors(dir, synthetic_tensors(spec.text, seed, spec.options), options);
  if (!files) return files.error();
  result.files.insert(result.files.end(), files->begin(), files->end());
  if (spec.write_tokenizer) {
    QGPU_RETURN_IF_ERROR(spec.write_tokenizer(dir, spec.text).with_context("writing the tokenizer"));
  }
  for (const auto& f : result.files) result.total_bytes += std::filesystem::file_size(f, ec);
  return result;
}

}  // namespace qgpu::qwen35
