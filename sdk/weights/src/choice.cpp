#include "qgpu/weights/choice.h"

#include <algorithm>
#include <cmath>
#include <immintrin.h>
#include <string>

namespace qgpu::weights {

namespace {
// The best and runner-up of n > 0 logits without a NaN, 16 lanes at a time: each lane keeps its
// best and second; `at` is the first index that has the best, `second` the largest of the others
// (the best again where it is tied). False, and nothing set, where a logit is NaN.
__attribute__((target("avx512f"))) bool best_two_avx512(const float* v, std::size_t n, std::size_t& at, float& second) {
  const __m512 low = _mm512_set1_ps(-INFINITY);
  __m512 best = low, next = low;
  __mmask16 nan = 0;
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(v + i);
    nan |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    const __mmask16 above = _mm512_cmp_ps_mask(x, best, _CMP_GT_OQ);
    next = _mm512_mask_mov_ps(_mm512_maskz_max_ps(0xFFFF, next, x), above, best);
    best = _mm512_mask_mov_ps(best, above, x);
  }
  if (nan != 0) return false;
  alignas(64) float lane_best[16], lane_next[16];
  _mm512_store_ps(lane_best, best);
  _mm512_store_ps(lane_next, next);
  float top = -INFINITY, runner = -INFINITY;
  auto take = [&](float x, float below) {  // a candidate and the best of what it beat
    if (x > top) {
      runner = std::max(runner, top);
      top = x;
    } else {
      runner = std::max(runner, x);
    }
    runner = std::max(runner, below);
  };
  for (int lane = 0; lane < 16; ++lane) take(lane_best[lane], lane_next[lane]);
  for (; i < n; ++i) {
    if (std::isnan(v[i])) return false;
    take(v[i], -INFINITY);
  }
  for (at = 0; !(v[at] == top); ++at) {
  }
  second = runner;
  return true;
}
}  // namespace

sdk::Expected<Choice> choose(std::span<const float> logits, std::int64_t text_rows) {
  if (text_rows < 0 || static_cast<std::size_t>(text_rows) >= logits.size())
    return sdk::invalid_argument("choose: " + std::to_string(logits.size()) + " logits for " +
                                 std::to_string(text_rows) + " text rows and at least one machine row");
  auto name = [&](std::int64_t t) {
    return t < text_rows ? "text row " + std::to_string(t) : "machine row " + std::to_string(t - text_rows);
  };
  Choice c;
  double second = -INFINITY;
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  std::size_t at = 0;
  float runner = 0;
  if (avx512 && best_two_avx512(logits.data(), logits.size(), at, runner)) {
    c.offset = static_cast<std::int64_t>(at);
    c.logit = logits[at];
    second = runner;
  } else {
    for (std::size_t t = 0; t < logits.size(); ++t) {
      const double v = logits[t];
      if (std::isnan(v))
        return sdk::internal_error("choose: logit of " + name(static_cast<std::int64_t>(t)) + " is NaN");
      if (c.offset < 0 || v > c.logit) {
        if (c.offset >= 0) second = c.logit;
        c.offset = static_cast<std::int64_t>(t);
        c.logit = v;
      } else if (v > second) {
        second = v;
      }
    }
  }
  c.margin = c.logit - second;
  if (!(c.margin > 0))
    return sdk::internal_error("choose: no single best row (" + name(c.offset) + " and another tie at " +
                               std::to_string(c.logit) + ")");
  if (c.offset < text_rows) {
    double best = -INFINITY;
    for (std::size_t t = static_cast<std::size_t>(text_rows); t < logits.size(); ++t)
      best = std::max(best, static_cast<double>(logits[t]));
    return sdk::internal_error("choose: the model chose " + name(c.offset) + " (logit " + std::to_string(c.logit) +
                               ") where a record was due; the best machine row scores " + std::to_string(best));
  }
  c.offset -= text_rows;
  return c;
}

}  // namespace qgpu::weights
