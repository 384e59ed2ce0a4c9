// Helpers shared by the compiler's sources (compile.cpp, liveness.cpp, dump.cpp); not installed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qgpu/weights/compile.h"

namespace qgpu::weights::detail {

// Fewest integers in [1, 45] whose squares sum to r (Lagrange: at most 4).
std::vector<int> pad_squares(int r);
// The field whose channels `f` uses (itself unless it aliases another).
int root_of(const Circuit& c, int f);
// The last field of f's alias chain: the one holding the slot's value at the end.
int last_alias(const Circuit& c, int f);
// Sub-layer of op i: 2L for a Gated DeltaNet port, 2L + 1 for an MLP op.
int op_sublayer(const Circuit& c, const Schedule& s, std::size_t i);
// MLP neurons per layer as the scheduler counts them (deduplicated within each op).
std::vector<std::int64_t> mlp_neurons_by_layer(const Circuit& c, const Schedule& s);
// Pads after `next` so that 16² + pairs + Σ pad² = hidden size; the channel limit.
sdk::Status add_pads(Allocation& a, const Target& t, int next, std::int64_t pairs, const std::string& detail);
// Gated DeltaNet q/k heads an op's port needs at these shapes (each with its value heads).
std::int64_t key_heads_of(const Circuit& c, const Op& op, const sdk::LayerShapes& s);
// allocate() with channel reuse over the live ranges (liveness.cpp).
sdk::Expected<Allocation> allocate_reusing(const Circuit& c, const Target& t, const Schedule& s);
// Bits live after each sub-layer, from the embedding (-1) to `last` or the last sub-layer a
// range names, whichever is later (the larger token mode's; field_modes).
std::vector<int> live_bits(const Circuit& c, const std::vector<LiveRange>& live, int last = -1);
// Bits live at once, at most over every sub-layer boundary (per token mode: the fields
// of one mode share channels with the other's, field_modes).
int live_peak(const Circuit& c, const std::vector<LiveRange>& live);
// The token modes whose channels a field of mode m (field_modes) occupies: 0 for the
// tokens where the mode bit is 1, 1 for the others; an unmoded field occupies both.
inline std::vector<int> tracks_of(int m) {
  if (m > 0) return {0};
  if (m < 0) return {1};
  return {0, 1};
}

}  // namespace qgpu::weights::detail
