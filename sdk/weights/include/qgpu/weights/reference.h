// Reference layer math: a plain, exact C++ version of Qwen3.5's RMSNormZC,
// SwiGLU MLP and Gated DeltaNet decode step (token by token, conv state, fp32
// state), in fp32 and in bf16 with the rounding points of QWEN35.md §7
// (linear layers: fp32 accumulation of exact bf16 products, one rounding).
// It runs over the sparse weights and is the circuit engine's layer math and
// the differential oracle of the dense layers on the backend.
//
// ReferenceModel visits only what can be nonzero (the rows with weights, the
// conv channels with taps, the heads and neurons with weights, a key's and a
// query's nonzero elements) and keeps each layer's order of operations, so its
// results are those of the plain loops (rms_norm_zc, linear) bit for bit:
// skipped terms are exact zeros, and adding one changes no sum.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "qgpu/sdk/base_model.h"
#include "qgpu/weights/model.h"
#include "qgpu/weights/numerics.h"
#include "qgpu/weights/state.h"

namespace qgpu::weights {

// RMSNormZC: y = x·rsqrt(mean(x²) + eps) in fp32, ·(1 + w) in fp32, one rounding.
std::vector<float> rms_norm_zc(const std::vector<float>& x, const std::vector<float>& w, DType dtype, float eps = kEps);
// y = W·x: fp32 accumulation (of exact bf16 products in bf16), one rounding to dtype.
std::vector<float> linear(const SparseMatrix& w, const std::vector<float>& x, DType dtype);
// The value a stored 1 reads as after Qwen3_5RMSNormGated (before its weight),
// for a dual-rail row with a quarter of its dv channels at 1·U, computed exactly
// as the layer does (fl(1/√dk) makes it 1.9999998 in fp32, 2 in bf16).
float gated_norm_one(std::int64_t dk, std::int64_t dv, DType dtype);
// The norm weight w with fl(w · gated_norm_one) == 1 exactly (0.50000006 in fp32, 0.5 in bf16).
float calibrated_norm_weight(std::int64_t dk, std::int64_t dv, DType dtype);

// The smallest |pre-activation| seen at each switch (MLP gates; Gated DeltaNet
// q/k pre-SiLU values, beta and z pre-activations), ignoring exact zeros.
// Saturation needs |x| >= 88.73 below zero and >= 16.64 above (fp32).
struct LayerMargin {
  double mlp_min = 0;  // +inf when nothing switched
  std::string mlp_where;
  double gdn_min = 0;
  std::string gdn_where;
  std::vector<double> mlp_neuron_min;  // per neuron (every switch of the layer's MLP)
  std::vector<double> gdn_head_min;    // per value head (its q/k, beta and z switches)
};

class TwoThreads;

class ReferenceModel {
 public:
  // threads 2: each layer's products are shared with a helper thread (the same bits: every row is
  // still summed by one thread in its own order); 1: the calling thread alone.
  ReferenceModel(const std::vector<Layer>& layers, const sdk::LayerShapes& shapes, DType dtype, int threads = 1);
  ReferenceModel(ReferenceModel&&) noexcept;
  ReferenceModel& operator=(ReferenceModel&&) = delete;
  ~ReferenceModel();

  // Runs one token (the raw residual, e.g. an embedding row) through every
  // layer and returns the residual after the last one.
  std::vector<float> step(const std::vector<float>& x);
  void reset();
  // One layer's sequence state: the conv window's previous projected inputs [C][kernel-1] and
  // the recurrent state S [nv][dk][dv]. Only channels with a tap on an earlier token keep their
  // window (no other channel's is ever read; those stay 0).
  struct LayerState {
    std::vector<float> conv;
    std::vector<float> s;
  };
  // A sequence's state, every layer's: several sequences run on one model by swapping.
  using State = std::vector<LayerState>;
  // Exchanges the model's sequence state with `other`; an empty `other` takes the current
  // state and leaves the model on a fresh sequence. Margins are not part of a sequence.
  void swap_state(State& other);
  const State& state() const { return state_; }
  DType dtype() const { return dtype_; }
  // Layer `layer`'s Gated DeltaNet recurrent state S, fp32 [value heads][dk][dv]
  // contiguous (HF's recurrent_state without the batch axis), as it stands after
  // the last step. Points into the model: step() updates it in place, reset()
  // and destruction invalidate it. An empty view (data nullptr) past the last layer.
  LayerStateView gdn_state(std::size_t layer) const;
  // Every layer's state with the model's dtype, for read_ram (state.h).
  StateView state_view() const;
  const std::vector<LayerMargin>& margins() const { return margins_; }
  // The helper thread the products share (threads 2), for other work between steps; else null.
  TwoThreads* threads() const { return threads_.get(); }
  std::string margin_report() const;  // one line per layer

 private:
  struct Plan;     // one layer's sliced matrices, active channels, heads and neurons (reference.cpp)
  struct Scratch;  // one layer's projections and outputs
  void reset_state();  // a fresh sequence (every state 0), margins kept
  void norm(const std::vector<float>& x, std::vector<float>& y);
  void gdn(std::size_t layer);
  void mlp(std::size_t layer);
  struct Products;  // matrices that read their inputs at one point of a layer, split in two (reference.cpp)
  void multiply(const Products& products);

  const std::vector<Layer>& layers_;
  sdk::LayerShapes shapes_;
  DType dtype_;
  float eps_ = kEps;
  std::vector<Plan> plans_;
  std::unique_ptr<Scratch> scratch_;
  std::unique_ptr<TwoThreads> threads_;  // null: one thread
  std::vector<LayerState> state_;
  std::vector<LayerMargin> margins_;
  std::vector<float> residual_, normed_;  // normed_ has one more float, always 0 (the padding's column)
};

}  // namespace qgpu::weights
