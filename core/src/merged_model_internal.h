// What the merged model's sources share (merged_model.cpp, merged_sequence.cpp,
// merged_forward.cpp, merge_host.cpp, measure_silence.cpp); not installed.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "qgpu/core/merged_model.h"

namespace qgpu::core {
namespace detail {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

inline sdk::TensorView view_of(void* data, sdk::DType dtype, std::span<const std::int64_t> shape) {
  sdk::TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.rank = static_cast<std::int32_t>(shape.size());
  std::copy(shape.begin(), shape.end(), v.shape);
  return v;
}

inline std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// The nonzeros of a dense row-major [rows, cols] matrix.
inline weights::SparseMatrix sparse_rows(std::span<const float> dense, std::int64_t rows, std::int64_t cols) {
  weights::SparseMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.row_ptr.reserve(static_cast<std::size_t>(rows) + 1);
  m.row_ptr.push_back(0);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      const float v = dense[static_cast<std::size_t>(r * cols + c)];
      if (v == 0) continue;
      m.col.push_back(static_cast<std::int32_t>(c));
      m.val.push_back(v);
    }
    m.row_ptr.push_back(static_cast<std::int64_t>(m.val.size()));
  }
  return m;
}

}  // namespace detail

// A circuit layer (circuit channel order) with its hidden-size columns and rows moved to the
// merged channels: what the dense path uploads and `qgpu-host build` writes.
weights::Layer merged_order(weights::Layer layer, const ChannelMap& map);

struct MergedModel::Layer {
  const sdk::Tensor* input_norm = nullptr;
  const sdk::Tensor* post_norm = nullptr;
  sdk::DeltaNetWeights gdn;
  sdk::MlpWeights mlp;
};

// A sequence: the base's (null: the base's own), the dense circuit layers' states, and the
// sparse path's reference state while the sequence is not the one in use.
class MergedModel::Sequence {
 public:
  std::int64_t tokens() const { return tokens_; }

 private:
  friend class MergedModel;
  const MergedModel* owner_ = nullptr;
  sdk::Handle<sdk::Sequence> base_;
  std::vector<sdk::Handle<sdk::LayerState>> circuit_;
  weights::ReferenceModel::State reference_;
  std::int64_t tokens_ = 0;
};

}  // namespace qgpu::core
