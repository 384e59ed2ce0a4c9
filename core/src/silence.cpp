// The mute direction: search and certificate (qgpu/core/silence.h).
#include "qgpu/core/silence.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

#include "qgpu/weights/numerics.h"

namespace qgpu::core {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kEps = 1e-6;  // Qwen3.5's rms_norm_eps: the search's normalization (the certificate takes the base's)

std::string grouped(std::int64_t v) {
  std::string s = std::to_string(v < 0 ? -v : v), out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string power_of_two(double g) {
  int e = 0;
  std::frexp(g, &e);
  return "2^" + std::to_string(e - 1);
}

// The smallest power of two >= v (v > 0).
double pow2_at_least(double v) {
  int e = 0;
  const double m = std::frexp(v, &e);  // v = m · 2^e, m in [0.5, 1)
  return m == 0.5 ? std::ldexp(1.0, e - 1) : std::ldexp(1.0, e);
}

// Relative rounding of one normalized residual value as the layers see it: the norm's
// output in the layers' dtype (bf16: half an ulp of 8 significant bits; f32: the
// products x·r·(1+w)), with room for the rsqrt's own error.
double element_rounding(sdk::DType dtype) {
  // bf16: the cast's 2^-9 relative and the fp32 product before it, with room (2^-8 + 2^-14);
  // f32: the products x·r and ·(1 + w), with room.
  return dtype == sdk::DType::kBF16 ? 0x1p-8 + 0x1p-14 : 0x1p-21;
}

// γ_n = n·u / (1 − n·u): the relative bound on an fp32 sum of n terms (u = 2^-24).
double accumulation(std::int64_t n) {
  const double nu = static_cast<double>(std::max<std::int64_t>(n, 1)) * 0x1p-24;
  return nu / (1 - nu);
}

double rms_scale(const float* x, std::int64_t hidden, double eps) {  // 1/sqrt(mean(x²) + eps)
  double sq = 0;
  for (std::int64_t c = 0; c < hidden; ++c) sq += static_cast<double>(x[c]) * x[c];
  return 1 / std::sqrt(sq / static_cast<double>(hidden) + eps);
}

bool all_zero(const float* x, std::int64_t hidden) {
  for (std::int64_t c = 0; c < hidden; ++c)
    if (x[c] != 0) return false;
  return true;
}

// Channels by how consistently the rows' normalized values share a sign:
// |mean| / sqrt(mean square) over the rows, best first.
std::vector<std::int64_t> rank_channels(std::span<const float> table, std::int64_t rows, std::int64_t hidden,
                                        std::span<const std::int64_t> candidates) {
  std::vector<double> sum(static_cast<std::size_t>(hidden), 0), sq(static_cast<std::size_t>(hidden), 0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = table.data() + r * hidden;
    if (all_zero(x, hidden)) continue;
    const double s = rms_scale(x, hidden, kEps);
    for (std::int64_t c = 0; c < hidden; ++c) {
      const double v = x[c] * s;
      sum[static_cast<std::size_t>(c)] += v;
      sq[static_cast<std::size_t>(c)] += v * v;
    }
  }
  std::vector<std::int64_t> order;
  if (candidates.empty()) {
    order.resize(static_cast<std::size_t>(hidden));
    std::iota(order.begin(), order.end(), 0);
  } else {
    order.assign(candidates.begin(), candidates.end());
  }
  auto score = [&](std::int64_t c) {
    const auto i = static_cast<std::size_t>(c);
    return sq[i] > 0 ? std::abs(sum[i]) / std::sqrt(sq[i] * static_cast<double>(rows)) : 0.0;
  };
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return score(a) > score(b); });
  return order;
}

// The maximum-margin direction through the origin for the rows restricted to `channels`
// (normalized by their full-row rms): d = −p / |p| for p the minimum-norm point of the
// rows' convex hull, approached with Gilbert's algorithm. Returns the direction whose
// smallest margin min_r −d·y_r was the largest seen (negative when no direction separates).
std::vector<double> max_margin_direction(std::span<const float> table, std::int64_t rows, std::int64_t hidden,
                                         const std::vector<std::int64_t>& channels) {
  const auto k = static_cast<std::int64_t>(channels.size());
  std::vector<float> y;  // [n, k]: the nonzero rows, normalized, on the channels
  y.reserve(static_cast<std::size_t>(rows * k));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = table.data() + r * hidden;
    if (all_zero(x, hidden)) continue;
    const double s = rms_scale(x, hidden, kEps);
    for (std::int64_t c : channels) y.push_back(static_cast<float>(x[c] * s));
  }
  const std::int64_t n = static_cast<std::int64_t>(y.size()) / std::max<std::int64_t>(k, 1);
  std::vector<double> p(static_cast<std::size_t>(k), 0), best(static_cast<std::size_t>(k), 0);
  if (n == 0 || k == 0) return best;
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t i = 0; i < k; ++i) p[static_cast<std::size_t>(i)] += y[static_cast<std::size_t>(r * k + i)];
  for (double& v : p) v /= static_cast<double>(n);  // the mean lies in the hull
  double best_margin = -std::numeric_limits<double>::infinity();
  const bool mean_is_zero = std::all_of(p.begin(), p.end(), [](double v) { return v == 0; });
  if (mean_is_zero) p.assign(y.begin(), y.begin() + k);
  constexpr int kIterations = 400;
  for (int it = 0; it < kIterations; ++it) {
    double pp = 0;
    for (double v : p) pp += v * v;
    const double norm = std::sqrt(pp);
    if (!(norm > 1e-12)) break;  // the hull reaches 0: no direction separates
    // The row the current direction serves worst.
    std::int64_t worst = 0;
    double worst_dot = std::numeric_limits<double>::infinity();
    for (std::int64_t r = 0; r < n; ++r) {
      const float* yr = y.data() + r * k;
      double dot = 0;
      for (std::int64_t i = 0; i < k; ++i) dot += p[static_cast<std::size_t>(i)] * yr[i];
      if (dot < worst_dot) worst_dot = dot, worst = r;
    }
    const double margin = worst_dot / norm;  // of d = -p/|p|: every row has -d·y >= margin
    if (margin > best_margin) {
      best_margin = margin;
      for (std::int64_t i = 0; i < k; ++i) best[static_cast<std::size_t>(i)] = -p[static_cast<std::size_t>(i)] / norm;
    }
    if (margin >= 0.98 * norm) break;  // within 2 % of the best possible margin (|p*| <= |p|)
    // Step towards the worst row: the closest point to 0 on the segment [p, y_worst].
    const float* yw = y.data() + worst * k;
    double numerator = pp - worst_dot, denominator = 0;
    for (std::int64_t i = 0; i < k; ++i) {
      const double d = p[static_cast<std::size_t>(i)] - yw[i];
      denominator += d * d;
    }
    const double lambda = denominator > 0 ? std::clamp(numerator / denominator, 0.0, 1.0) : 0.0;
    if (lambda == 0) break;
    for (std::int64_t i = 0; i < k; ++i)
      p[static_cast<std::size_t>(i)] += lambda * (yw[i] - p[static_cast<std::size_t>(i)]);
  }
  return best;
}

}  // namespace

std::string SilenceCertificate::to_string() const {
  const std::string dir = "direction on " + std::to_string(direction.channels.size()) + " of " +
                          std::to_string(channels_available) + " channels, gain " +
                          (direction.gain > 0 ? power_of_two(direction.gain) : std::string("none"));
  if (rows == 0) return "not certified (no text rows)";
  if (zero_rows == rows) return "exact (all " + grouped(rows) + " text rows are zero: every switch reads 0)";
  if (overflow) return "approximate: nothing certified (" + dir + " would overflow fp32 in a switch)";
  if (exact())
    return "exact (certified on " + grouped(rows) + " text rows; " + dir + ", smallest margin " + num(min_margin) +
           " at row " + std::to_string(min_margin_row) + ", needed " + num(needed_margin) + ")";
  std::string s = "approximate: " + grouped(leaking) + " of " + grouped(rows) + " text rows leak (worst:";
  for (std::size_t i = 0; i < worst.size() && i < 3; ++i)
    s += (i ? ", row " : " row ") + std::to_string(worst[i].row) + " margin " + num(worst[i].margin);
  return s + "); " + dir + ", needed margin " + num(needed_margin);
}

SilenceCertificate certify(std::span<const float> table, std::int64_t rows, std::int64_t hidden,
                           const MuteDirection& direction, const MuteBounds& bounds) {
  SilenceCertificate cert;
  cert.rows = rows;
  cert.direction = direction;
  const double e = element_rounding(bounds.dtype), g = accumulation(std::max(bounds.terms, hidden));
  const double kappa = e + g * (1 + e);
  const double circuit = bounds.circuit_terms * (1 + e) * (1 + g);
  const std::size_t k = direction.channels.size();
  std::vector<double> margins(static_cast<std::size_t>(rows), 0);
  std::vector<char> zero(static_cast<std::size_t>(rows), 0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = table.data() + r * hidden;
    if (all_zero(x, hidden)) {
      zero[static_cast<std::size_t>(r)] = 1;
      ++cert.zero_rows;
      continue;
    }
    double f = 0, a = 0;  // d·x and Σ|d_i x_i|: each product exact in double, k terms
    for (std::size_t i = 0; i < k; ++i) {
      const double t = direction.weights[i] * x[direction.channels[i]];
      f += t;
      a += std::abs(t);
    }
    a *= 1 + static_cast<double>(k) * 0x1p-52;  // the double sums' own error
    // The rsqrt in fp32 is within 2^-21 of 1/sqrt(mean + eps): take the smaller scale.
    margins[static_cast<std::size_t>(r)] = -(f + kappa * a) * rms_scale(x, hidden, bounds.eps) * (1 - 0x1p-20);
  }
  // The margin a switch needs: G · margin >= headroom · (saturation + circuit terms).
  const double need = kMuteHeadroom * (kMuteSaturation + circuit);
  double smallest_positive = std::numeric_limits<double>::infinity();
  bool every_positive = true;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (zero[static_cast<std::size_t>(r)]) continue;
    const double m = margins[static_cast<std::size_t>(r)];
    if (m > 0)
      smallest_positive = std::min(smallest_positive, m);
    else
      every_positive = false;
  }
  double gain = direction.gain;
  if (gain <= 0) {  // choose it: the smallest power of two that silences every row it can
    const double cap = every_positive ? kMuteGainMax : kMuteGainLeaking;
    gain = std::isfinite(smallest_positive) ? std::min(cap, pow2_at_least(need / smallest_positive)) : cap;
  }
  cert.direction.gain = gain;
  cert.needed_margin = need / gain;
  // Finite pre-activations: G · |x̂|·Σ|d| + circuit terms stay far inside fp32 (|x̂_c| <= sqrt(H)).
  double l1 = 0;
  for (double w : direction.weights) l1 += std::abs(w);
  if (gain * std::sqrt(static_cast<double>(hidden)) * l1 * (1 + kappa) + circuit > 0x1p120) {
    cert.leaking = rows - cert.zero_rows;  // nothing certified: the switches could overflow
    cert.overflow = true;
    return cert;
  }
  std::vector<LeakingRow> leaks;
  cert.min_margin = std::numeric_limits<double>::infinity();
  double largest = -std::numeric_limits<double>::infinity();
  std::int64_t largest_row = -1;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (zero[static_cast<std::size_t>(r)]) continue;
    const double m = margins[static_cast<std::size_t>(r)];
    if (m > largest) largest = m, largest_row = r;
    if (m >= cert.needed_margin) {
      if (m < cert.min_margin) cert.min_margin = m, cert.min_margin_row = r;
    } else {
      leaks.push_back({r, m});
    }
  }
  cert.leaking = static_cast<std::int64_t>(leaks.size());
  if (cert.min_margin_row < 0) cert.min_margin = largest, cert.min_margin_row = largest_row;
  if (cert.min_margin_row < 0) cert.min_margin = 0;  // every row is zero
  const std::size_t shown = std::min<std::size_t>(leaks.size(), 8);
  std::partial_sort(leaks.begin(), leaks.begin() + static_cast<std::ptrdiff_t>(shown), leaks.end(),
                    [](const LeakingRow& a, const LeakingRow& b) { return a.margin < b.margin; });
  cert.worst.assign(leaks.begin(), leaks.begin() + static_cast<std::ptrdiff_t>(shown));
  return cert;
}

SilenceCertificate find_mute_direction(std::span<const float> table, std::int64_t rows, std::int64_t hidden,
                                       std::int64_t channels, const MuteBounds& bounds,
                                       std::span<const std::int64_t> candidates) {
  const auto start = Clock::now();
  std::vector<std::int64_t> order = rank_channels(table, rows, hidden, candidates);
  const auto k = std::min<std::int64_t>(channels, static_cast<std::int64_t>(order.size()));
  std::vector<std::int64_t> chosen(order.begin(), order.begin() + k);
  std::sort(chosen.begin(), chosen.end());
  // Two candidates: the maximum-margin direction, and minus the rows' mean (fewer leaks
  // where nothing separates); the one with fewer leaking rows wins.
  std::vector<std::vector<double>> tries;
  tries.push_back(max_margin_direction(table, rows, hidden, chosen));
  {
    std::vector<double> mean(static_cast<std::size_t>(k), 0);
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* x = table.data() + r * hidden;
      if (all_zero(x, hidden)) continue;
      const double s = rms_scale(x, hidden, kEps);
      for (std::int64_t i = 0; i < k; ++i)
        mean[static_cast<std::size_t>(i)] -= x[chosen[static_cast<std::size_t>(i)]] * s;
    }
    tries.push_back(std::move(mean));
  }
  SilenceCertificate best;
  bool have = false;
  for (const std::vector<double>& d : tries) {
    double mx = 0;
    for (double v : d) mx = std::max(mx, std::abs(v));
    MuteDirection dir;
    if (mx > 0)
      for (std::int64_t i = 0; i < k; ++i) {
        const float w = weights::round_bf16(static_cast<float>(d[static_cast<std::size_t>(i)] / mx));
        if (w == 0) continue;
        dir.channels.push_back(chosen[static_cast<std::size_t>(i)]);
        dir.weights.push_back(w);
      }
    SilenceCertificate c = certify(table, rows, hidden, dir, bounds);
    if (!have || c.leaking < best.leaking || (c.leaking == best.leaking && c.min_margin > best.min_margin)) {
      best = std::move(c);
      have = true;
    }
  }
  best.channels_available = k;
  best.search_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return best;
}

}  // namespace qgpu::core
