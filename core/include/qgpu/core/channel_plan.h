// Where the circuit's residual channels land in the merged model (docs/MACHINE_CIRCUIT.md §6).
//
// The circuit is compiled in its own channel order; the merge permutes the channels
// (exact: every circuit weight and record row is moved, nothing is rounded) so that
//   - the circuit's free channels (the mute channel first) land on the base channels
//     the mute direction uses (qgpu/core/silence.h), and
//   - the channels the record unembedding reads (the next token's fields) land on the
//     base channels where the base's layers add least (measured on probe tokens), so
//     that what the base adds moves the choice least, the most heavily weighted column
//     (the rows' constant terms) on the quietest channel; channels whose final-norm
//     scale |1 + w| is near 0 are left out (the unembedding is divided by 1 + w, so the
//     scale itself does not change the margins);
// every other circuit channel keeps its relative order.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "qgpu/weights/model.h"

namespace qgpu::core {

// A permutation of the residual's channels: circuit channel c is merged channel to_merged[c].
struct ChannelMap {
  std::vector<std::int64_t> to_merged, to_circuit;
  static ChannelMap identity(std::int64_t hidden);
  std::int64_t merged(std::int64_t c) const { return to_merged[static_cast<std::size_t>(c)]; }
  std::int64_t circuit(std::int64_t m) const { return to_circuit[static_cast<std::size_t>(m)]; }
  std::vector<float> circuit_order(std::span<const float> merged_row) const;
  std::vector<float> merged_order(std::span<const float> circuit_row) const;
};

// What the merge measures of the base, per channel (merged = base channel order).
struct BaseProfile {
  std::vector<double> final_scale;   // the final norm's 1 + w
  std::vector<double> perturbation;  // the largest |Δ| the base's layers added on the probe tokens
};

// Where the next token's fields went and what the base does there.
struct ChoicePlacement {
  std::vector<std::int64_t> channels;   // merged channels the record unembedding reads
  std::vector<std::int64_t> massive;    // base channels left out for their perturbation
  double scale_min = 0, scale_max = 0;  // |1 + w| over `channels`
  double perturbation_max = 0;          // the probes' largest |Δ| on `channels`
  double perturbation_median = 0;       // the median over all channels of the probes' largest |Δ|
  std::string to_string() const;
};

// A base channel with |1 + w| below this is never given a choice field: the final norm
// would leave almost nothing of the field for the (compensated) unembedding to read.
inline constexpr double kSmallestChoiceScale = 1.0 / 64;
// A channel whose probe perturbation exceeds this many times the median is massive.
inline constexpr double kMassiveFactor = 16;

// The channel map: `free` (circuit channels nothing uses, the mute channel first) onto
// `mute` (base channels of the mute direction, in the direction's order; at most as many);
// `choice` (circuit channels, the most important first) onto the base channels with the
// smallest probe perturbation among those that are not massive and whose |1 + w| is at
// least kSmallestChoiceScale (profile may be empty: then in order); the rest in order.
// Fails when the base has fewer usable channels than `choice` needs.
sdk::Expected<ChannelMap> plan_channels(std::int64_t hidden, std::span<const int> free,
                                        std::span<const std::int64_t> mute, std::span<const std::int64_t> choice,
                                        const BaseProfile& profile, ChoicePlacement* placement);

// The matrix with its columns (rows) moved from circuit to merged channels.
weights::SparseMatrix map_columns(const weights::SparseMatrix& m, const ChannelMap& map);
weights::SparseMatrix map_rows(const weights::SparseMatrix& m, const ChannelMap& map);

}  // namespace qgpu::core
