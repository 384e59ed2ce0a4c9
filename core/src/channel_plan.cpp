// Where the circuit's channels land in the merged model (qgpu/core/channel_plan.h).
#include "qgpu/core/channel_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace qgpu::core {

ChannelMap ChannelMap::identity(std::int64_t hidden) {
  ChannelMap m;
  m.to_merged.resize(static_cast<std::size_t>(hidden));
  std::iota(m.to_merged.begin(), m.to_merged.end(), 0);
  m.to_circuit = m.to_merged;
  return m;
}

std::vector<float> ChannelMap::circuit_order(std::span<const float> merged_row) const {
  std::vector<float> out(merged_row.size());
  for (std::size_t c = 0; c < out.size() && c < to_merged.size(); ++c)
    out[c] = merged_row[static_cast<std::size_t>(to_merged[c])];
  return out;
}

std::vector<float> ChannelMap::merged_order(std::span<const float> circuit_row) const {
  std::vector<float> out(circuit_row.size());
  for (std::size_t c = 0; c < out.size() && c < to_merged.size(); ++c)
    out[static_cast<std::size_t>(to_merged[c])] = circuit_row[c];
  return out;
}

std::string ChoicePlacement::to_string() const {
  char line[256];
  std::snprintf(line, sizeof line,
                "%zu choice channels, final-norm scale |1+w| in [%.3g, %.3g], base perturbation on probes <= %.3g "
                "(median channel %.3g; %zu massive channel(s) avoided)",
                channels.size(), scale_min, scale_max, perturbation_max, perturbation_median, massive.size());
  return line;
}

sdk::Expected<ChannelMap> plan_channels(std::int64_t hidden, std::span<const int> free,
                                        std::span<const std::int64_t> mute, std::span<const std::int64_t> choice,
                                        const BaseProfile& profile, ChoicePlacement* placement) {
  const auto H = static_cast<std::size_t>(hidden);
  if (mute.size() > free.size())
    return sdk::internal_error("plan_channels: " + std::to_string(mute.size()) + " mute channels for " +
                               std::to_string(free.size()) + " free circuit channels");
  ChannelMap map;
  map.to_merged.assign(H, -1);
  std::vector<char> taken(H, 0);
  auto assign = [&](std::int64_t c, std::int64_t m) -> sdk::Status {
    if (c < 0 || m < 0 || static_cast<std::size_t>(c) >= H || static_cast<std::size_t>(m) >= H)
      return sdk::internal_error("plan_channels: channel outside the residual");
    if (map.to_merged[static_cast<std::size_t>(c)] >= 0 || taken[static_cast<std::size_t>(m)])
      return sdk::internal_error("plan_channels: channel " + std::to_string(c) + " or " + std::to_string(m) +
                                 " placed twice");
    map.to_merged[static_cast<std::size_t>(c)] = m;
    taken[static_cast<std::size_t>(m)] = 1;
    return sdk::Status::ok();
  };
  for (std::size_t i = 0; i < mute.size(); ++i) QGPU_RETURN_IF_ERROR(assign(free[i], mute[i]));

  // Base channels for the choice: not massive, |1 + w| not near 0, the quietest first.
  const bool profiled = profile.final_scale.size() == H && profile.perturbation.size() == H;
  std::vector<std::int64_t> order;
  ChoicePlacement place;
  if (profiled) {
    std::vector<double> p(profile.perturbation);
    std::nth_element(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(H / 2), p.end());
    place.perturbation_median = p[H / 2];
    for (std::size_t m = 0; m < H; ++m) {
      if (taken[m]) continue;
      if (profile.perturbation[m] > kMassiveFactor * place.perturbation_median) {
        place.massive.push_back(static_cast<std::int64_t>(m));
        continue;
      }
      if (std::abs(profile.final_scale[m]) >= kSmallestChoiceScale) order.push_back(static_cast<std::int64_t>(m));
    }
    std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
      const auto i = static_cast<std::size_t>(a), j = static_cast<std::size_t>(b);
      if (profile.perturbation[i] != profile.perturbation[j]) return profile.perturbation[i] < profile.perturbation[j];
      return std::abs(profile.final_scale[i]) > std::abs(profile.final_scale[j]);
    });
  }
  if (!profiled) choice = {};  // nothing measured: the choice's channels stay in order with the rest
  if (order.size() < choice.size())
    return sdk::invalid_argument("merge: the next token's " + std::to_string(choice.size()) +
                                 " fields need base channels whose final-norm scale |1+w| is at least " +
                                 std::to_string(kSmallestChoiceScale) +
                                 " and that carry no massive activation; the base has " + std::to_string(order.size()));
  for (std::size_t i = 0; i < choice.size(); ++i) {
    QGPU_RETURN_IF_ERROR(assign(choice[i], order[i]));
    place.channels.push_back(order[i]);
  }
  if (profiled && !place.channels.empty()) {
    place.scale_min = place.scale_max = std::abs(profile.final_scale[static_cast<std::size_t>(place.channels[0])]);
    for (std::int64_t m : place.channels) {
      const double s = std::abs(profile.final_scale[static_cast<std::size_t>(m)]);
      place.scale_min = std::min(place.scale_min, s);
      place.scale_max = std::max(place.scale_max, s);
      place.perturbation_max = std::max(place.perturbation_max, profile.perturbation[static_cast<std::size_t>(m)]);
    }
  }
  // The rest keep their order.
  std::size_t next = 0;
  for (std::size_t c = 0; c < H; ++c) {
    if (map.to_merged[c] >= 0) continue;
    while (next < H && taken[next]) ++next;
    QGPU_RETURN_IF_ERROR(assign(static_cast<std::int64_t>(c), static_cast<std::int64_t>(next)));
  }
  map.to_circuit.assign(H, -1);
  for (std::size_t c = 0; c < H; ++c)
    map.to_circuit[static_cast<std::size_t>(map.to_merged[c])] = static_cast<std::int64_t>(c);
  if (placement != nullptr) *placement = std::move(place);
  return map;
}

weights::SparseMatrix map_columns(const weights::SparseMatrix& m, const ChannelMap& map) {
  weights::SparseMatrix out;
  out.rows = m.rows;
  out.cols = m.cols;
  out.row_ptr.assign(1, 0);
  out.col.reserve(m.col.size());
  out.val.reserve(m.val.size());
  std::vector<std::pair<std::int32_t, double>> row;
  for (std::int64_t r = 0; r < m.rows; ++r) {
    row.clear();
    for (std::int64_t k = m.row_ptr[r]; k < m.row_ptr[r + 1]; ++k)
      row.emplace_back(static_cast<std::int32_t>(map.merged(m.col[static_cast<std::size_t>(k)])),
                       m.val[static_cast<std::size_t>(k)]);
    std::sort(row.begin(), row.end());
    for (const auto& [c, v] : row) {
      out.col.push_back(c);
      out.val.push_back(v);
    }
    out.row_ptr.push_back(static_cast<std::int64_t>(out.val.size()));
  }
  return out;
}

weights::SparseMatrix map_rows(const weights::SparseMatrix& m, const ChannelMap& map) {
  weights::SparseMatrix out;
  out.rows = m.rows;
  out.cols = m.cols;
  out.row_ptr.assign(static_cast<std::size_t>(m.rows) + 1, 0);
  out.col.reserve(m.col.size());
  out.val.reserve(m.val.size());
  for (std::int64_t q = 0; q < m.rows; ++q) {  // merged row q holds circuit row map.circuit(q)
    const std::int64_t r = q < static_cast<std::int64_t>(map.to_circuit.size()) ? map.circuit(q) : q;
    for (std::int64_t k = m.row_ptr[r]; k < m.row_ptr[r + 1]; ++k) {
      out.col.push_back(m.col[static_cast<std::size_t>(k)]);
      out.val.push_back(m.val[static_cast<std::size_t>(k)]);
    }
    out.row_ptr[static_cast<std::size_t>(q) + 1] = static_cast<std::int64_t>(out.val.size());
  }
  return out;
}

}  // namespace qgpu::core
