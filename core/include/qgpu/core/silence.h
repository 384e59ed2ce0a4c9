// Silence on text: the mute direction and its certificate (docs/MACHINE_CIRCUIT.md §6.1).
//
// The circuit puts one gain G on a mute channel in every MLP gate, beta, decay
// and z pre-activation (weights::Target::mute_channel) and leaves a few more
// channels free (Allocation::free). The merge spreads that gain over a
// direction d on up to k base channels S: every circuit switch then reads
//   G · Σ_{s∈S} d_s · x̂_s + (the circuit's own terms)
// where x̂ is the RMS-normalized residual. Circuit tokens are exactly 0 on S,
// so for them nothing changes. A text token's residual is its embedding row as
// long as every circuit layer before it added 0, so the circuit is silent on
// text row x exactly when d·x is far enough below zero that every switch
// saturates at 0 — which must hold for every row that can appear in text.
//
// find_mute_direction() picks S (the channels whose normalized values share a
// sign most consistently over the rows) and d (the maximum-margin direction on
// S: minus the minimum-norm point of the rows' convex hull, Gilbert's
// algorithm), rounds d to bf16 and certifies every row with the rounded
// weights and a worst-case bound on the rounding of the norm, the products
// and the accumulation (certify()). When no direction exists (an isotropic
// table: the rows' hull contains 0) the result says which rows leak.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "qgpu/sdk/tensor_view.h"

namespace qgpu::core {

// What the certificate needs to know about the circuit and the arithmetic.
struct MuteBounds {
  // Largest |Σ circuit weight · x̂| over the muted rows for any residual of mean square 1
  // (max over muted rows of Σ|w| off the mute channels, times sqrt(hidden)).
  double circuit_terms = 0;
  // The dtype the layers run in: bounds the rounding of the normalized residual.
  sdk::DType dtype = sdk::DType::kF32;
  // Longest dot product behind a pre-activation (terms summed in fp32): the hidden size.
  std::int64_t terms = 0;
  double eps = 1e-6;  // the RMSNorm's epsilon (the base's rms_norm_eps)
};

struct MuteDirection {
  std::vector<std::int64_t> channels;  // S: base (merged) channels, ascending
  std::vector<double> weights;         // d on S: bf16-exact, max |d| = 1
  double gain = 0;                     // G: a power of two; the switches get G·d
};

// One row that the direction does not silence.
struct LeakingRow {
  std::int64_t row = -1;
  double margin = 0;  // its certified normalized margin (≤ what silence needs; < 0: wrong side)
};

struct SilenceCertificate {
  std::int64_t rows = 0;  // embedding rows examined: every row that can appear in text
  // All-zero rows: silent whatever d — every pre-activation is 0: MLP gates silu(0) = 0, z
  // silu(0) = 0, and beta = sigmoid(0) = 1/2 writes a key of 0 (q and k read the current
  // token's conv tap only), so nothing is written.
  std::int64_t zero_rows = 0;
  std::int64_t leaking = 0;       // rows not certified silent
  std::vector<LeakingRow> worst;  // the leaking rows with the smallest margins (up to 8), worst first
  // The smallest certified normalized margin −(d·x + rounding bound)/rms(x) over the
  // certified rows (or, when every row leaks, the largest).
  double min_margin = 0;
  std::int64_t min_margin_row = -1;
  // The margin silence needs: (saturation + circuit terms) · headroom / G.
  double needed_margin = 0;
  MuteDirection direction;
  std::int64_t channels_available = 0;  // k
  bool overflow = false;                // the direction's weights times the gain could overflow a switch
  double search_seconds = 0;
  bool exact() const { return leaking == 0 && rows > 0; }
  // "exact (certified on 248,077 text rows; 16 channels, margin 0.031)" or
  // "approximate: 1,204 of 4,096 text rows leak (worst row 17: margin -0.41); ...".
  std::string to_string() const;
};

// Searches [rows, hidden] row-major f32 `table` (every row a text token can have, as the
// backend holds it) for a direction over at most `channels` of `candidates` (the base
// channels it may use; empty: all) and certifies it. Never fails: a table without a
// direction gives an approximate certificate naming the leaking rows.
SilenceCertificate find_mute_direction(std::span<const float> table, std::int64_t rows, std::int64_t hidden,
                                       std::int64_t channels, const MuteBounds& bounds,
                                       std::span<const std::int64_t> candidates = {});

// Certifies `direction` (channels, bf16-exact weights, gain) on every row of `table`.
SilenceCertificate certify(std::span<const float> table, std::int64_t rows, std::int64_t hidden,
                           const MuteDirection& direction, const MuteBounds& bounds);

// The saturation threshold: a switch whose pre-activation is at most −kMuteSaturation gives
// exactly 0 through silu, sigmoid and softplus (with dt_bias ≤ 0) in fp32 and bf16
// (ARCHITECTURE.md §4: −88.73 and −102.9), with room to spare.
inline constexpr double kMuteSaturation = 256;
// Extra factor on the gain beyond the certified bound (conv taps, the output roundings).
inline constexpr double kMuteHeadroom = 256;
// The gain's range: at most 2^100 (G·sqrt(hidden)·Σ|d| stays far below fp32's 3.4e38); when
// some row is on the wrong side of the direction at most 2^40, so that what such a row makes
// the circuit write stays finite.
inline constexpr double kMuteGainMax = 0x1p100;
inline constexpr double kMuteGainLeaking = 0x1p40;

}  // namespace qgpu::core
