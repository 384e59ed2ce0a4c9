// Shared helpers of the circuit tests: Qwen3.5-2B layer shapes and a compiled
// circuit run token by token through the reference layer math.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "qgpu/sdk/base_model.h"
#include "qgpu/weights/compile.h"
#include "qgpu/weights/reference.h"

namespace qgpu::simt::test {

// Qwen3.5-2B's linear-attention layer shapes (QWEN35.md).
inline sdk::LayerShapes qwen2b_shapes() { return weights::qwen35_2b_shapes(); }

// Compiles `c` to Qwen3.5-2B's layer shapes (a wider residual when `hidden`
// says so) into `cc`; false, with the error as a test failure, when it does not fit.
inline bool compile_to(const weights::Circuit& c, weights::CompiledCircuit& cc, std::int64_t hidden = 2048) {
  weights::Target t;
  t.shapes = qwen2b_shapes();
  t.shapes.hidden_size = hidden;
  auto r = weights::compile(c, t);
  EXPECT_TRUE(r.has_value()) << r.status().to_string();
  if (!r) return false;
  cc = std::move(*r);
  return true;
}

// Lowers `mlp` and `gdn` to the smallest switch margins `m` has seen.
inline void fold_margins(const weights::ReferenceModel& m, double& mlp, double& gdn) {
  for (const weights::LayerMargin& lm : m.margins()) {
    mlp = std::min(mlp, lm.mlp_min);
    gdn = std::min(gdn, lm.gdn_min);
  }
}

using Inputs = std::vector<std::pair<weights::Word, std::uint64_t>>;

// One token through the compiled circuit: embed `in`, step the model, return
// the residual after the last layer.
inline std::vector<float> run_token(weights::ReferenceModel& m, const weights::Circuit& c,
                                    const weights::CompiledCircuit& cc, const Inputs& in) {
  return m.step(weights::embed(c, cc.allocation, in));
}

// Reads `w` from a residual and fails the current test if any rail pair is not exact.
inline std::uint64_t read_exact(const weights::CompiledCircuit& cc, const std::vector<float>& y,
                                const weights::Word& w, const char* what) {
  bool exact = true;
  std::uint64_t v = weights::read_word(cc.allocation, y, w, &exact);
  EXPECT_TRUE(exact) << what << ": a rail pair is not exactly (u, 0) or (0, u)";
  return v;
}

}  // namespace qgpu::simt::test
