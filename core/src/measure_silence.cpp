// Silence on text, measured: KL(base || merged) at every text position (measure_silence).
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <utility>

#include "merged_model_internal.h"
#include "qgpu/core/merged_model.h"

namespace qgpu::core {

using detail::Clock;
using detail::seconds_since;
using detail::view_of;

double kl_divergence(std::span<const float> p_logits, std::span<const float> q_logits, std::int64_t n) {
  auto log_softmax = [n](std::span<const float> z) {
    double mx = -std::numeric_limits<double>::infinity();
    for (std::int64_t i = 0; i < n; ++i) mx = std::max(mx, static_cast<double>(z[static_cast<std::size_t>(i)]));
    double s = 0;
    for (std::int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(z[static_cast<std::size_t>(i)]) - mx);
    std::vector<double> out(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
      out[static_cast<std::size_t>(i)] = static_cast<double>(z[static_cast<std::size_t>(i)]) - mx - std::log(s);
    return out;
  };
  const std::vector<double> lp = log_softmax(p_logits), lq = log_softmax(q_logits);
  double kl = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    if (lp[k] == lq[k]) continue;  // exactly 0 where the logits agree (also for p = 0)
    kl += std::exp(lp[k]) * (lp[k] - lq[k]);
  }
  return kl;
}

sdk::Expected<SilenceReport> measure_silence(MergedModel& merged, sdk::BaseModel& base, sdk::TensorBackend& backend,
                                             std::span<const std::int64_t> sequence, MergedForward* merged_out,
                                             bool circuit_residual) {
  const std::int64_t V = merged.base_rows(), C = merged.logit_columns();
  std::vector<std::int64_t> text;
  for (std::int64_t id : sequence)
    if (id < V) text.push_back(id);
  if (text.empty()) return sdk::invalid_argument("measure_silence: the sequence has no text tokens");
  SilenceReport rep;
  rep.tokens = static_cast<std::int64_t>(sequence.size());
  rep.records = rep.tokens - static_cast<std::int64_t>(text.size());

  auto start = Clock::now();
  QGPU_RETURN_IF_ERROR(merged.reset());
  ForwardOptions options;
  options.all_logits = true;
  options.circuit_residual = circuit_residual;
  MergedForward m;
  QGPU_ASSIGN_OR_RETURN(m, merged.forward(sequence, options));
  rep.merged_seconds = seconds_since(start);

  // The base runs each text run of the sequence in one call, as the merged model
  // does (same shapes, so the same rounding where nothing else differs).
  start = Clock::now();
  base.reset();
  const auto T = static_cast<std::int64_t>(text.size());
  std::vector<float> b(static_cast<std::size_t>(T * V));
  std::int64_t done = 0;
  for (std::size_t i = 0; i < sequence.size();) {
    if (sequence[i] >= V) {
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < sequence.size() && sequence[end] < V) ++end;
    const auto n = static_cast<std::int64_t>(end - i);
    sdk::Handle<sdk::Tensor> h;
    QGPU_ASSIGN_OR_RETURN(h, base.embed(sequence.subspan(i, end - i)));
    QGPU_ASSIGN_OR_RETURN(h, base.run_layers(*h));
    QGPU_ASSIGN_OR_RETURN(h, base.final_norm(*h));
    QGPU_ASSIGN_OR_RETURN(h, base.lm_head(*h));
    const std::int64_t shape[2] = {n, V};
    QGPU_RETURN_IF_ERROR(backend.download(*h, view_of(b.data() + done * V, sdk::DType::kF32, shape)));
    done += n;
    i = end;
  }
  base.reset();
  rep.base_seconds = seconds_since(start);

  bool seen_record = false;
  std::int64_t k = 0;
  double after_sum = 0;
  for (std::int64_t i = 0; i < rep.tokens; ++i) {
    if (sequence[static_cast<std::size_t>(i)] >= V) {
      seen_record = true;
      continue;
    }
    const std::span<const float> mrow(m.logits.data() + i * C, static_cast<std::size_t>(C));
    const std::span<const float> brow(b.data() + k * V, static_cast<std::size_t>(V));
    ++k;
    const double kl = kl_divergence(brow, mrow, V);
    const bool identical = std::equal(brow.begin(), brow.end(), mrow.begin(), [](float x, float y) {
      return std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y);
    });
    rep.kl.push_back(kl);
    if (!seen_record) {
      ++rep.before;
      rep.before_identical += identical;
      rep.kl_before_max = std::max(rep.kl_before_max, kl);
    } else {
      ++rep.after;
      rep.after_identical += identical;
      after_sum += kl;
      if (rep.kl_after_max_at < 0 || kl > rep.kl_after_max) {
        rep.kl_after_max = kl;
        rep.kl_after_max_at = i;
      }
    }
    if (C > V) {  // record mass without the text-mode mask
      double mx = -std::numeric_limits<double>::infinity();
      for (float z : mrow) mx = std::max(mx, static_cast<double>(z));
      double all = 0, rec = 0;
      for (std::int64_t j = 0; j < C; ++j) {
        const double e = std::exp(static_cast<double>(mrow[static_cast<std::size_t>(j)]) - mx);
        all += e;
        if (j >= V) rec += e;
      }
      rep.record_mass_max = std::max(rep.record_mass_max, rec / all);
    }
  }
  rep.kl_after_mean = rep.after > 0 ? after_sum / static_cast<double>(rep.after) : 0;
  if (merged_out != nullptr) *merged_out = std::move(m);
  return rep;
}

}  // namespace qgpu::core
