// Compiled layer weights: a sparse representation (circuits are mostly zeros)
// and a dense export under the base's tensor names (QWEN35.md §5).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "qgpu/sdk/base_model.h"
#include "qgpu/weights/numerics.h"

namespace qgpu::weights {

// Compressed sparse rows, values as doubles (every value is checked to be
// exact in bf16 and fp32 before it gets here).
struct SparseMatrix {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<std::int64_t> row_ptr;  // rows + 1
  std::vector<std::int32_t> col;
  std::vector<double> val;
  std::size_t nonzeros() const { return val.size(); }
};

// Accumulates (row, col, value) entries; repeated entries add up.
class SparseBuilder {
 public:
  SparseBuilder(std::int64_t rows, std::int64_t cols) : rows_(rows), cols_(cols) {}
  void add(std::int64_t row, std::int64_t col, double value);
  SparseMatrix build() const;  // drops entries that summed to 0

 private:
  std::int64_t rows_, cols_;
  std::map<std::pair<std::int64_t, std::int64_t>, double> entries_;
};

struct GdnLayer {
  SparseMatrix in_proj_qkv;          // [2·nk·dk + nv·dv, H]: q | k | v
  SparseMatrix in_proj_z;            // [nv·dv, H]
  SparseMatrix in_proj_b;            // [nv, H]
  SparseMatrix in_proj_a;            // [nv, H]
  std::vector<double> conv1d;        // [C, kernel] row-major; tap kernel-1 multiplies the current token
  std::vector<double> a_log;         // [nv]
  std::vector<double> dt_bias;       // [nv]
  double norm_weight_f32 = 1;        // Qwen3_5RMSNormGated weight (one value for all dv channels),
  double norm_weight_bf16 = 1;       // calibrated per dtype so a stored 1 reads back as exactly 1
  SparseMatrix out_proj;             // [H, nv·dv]
  std::vector<std::string> head_op;  // per v-head: the op it serves ("" if unused)
};

struct MlpLayer {
  SparseMatrix gate;                   // [I, H]
  SparseMatrix up;                     // [I, H]
  SparseMatrix down;                   // [H, I]
  std::vector<std::string> neuron_op;  // per used neuron: the op it belongs to
  std::int64_t used_neurons() const { return static_cast<std::int64_t>(neuron_op.size()); }
};

struct Layer {
  GdnLayer gdn;
  MlpLayer mlp;
  // input_layernorm / post_attention_layernorm are zero (scale 1 + 0): kept implicit.
};

// A dense tensor for export: fp32 values, or bf16 bit patterns.
struct DenseTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  DType dtype = DType::kF32;
  std::vector<float> f32;
  std::vector<std::uint16_t> bf16;
};

// "model.language_model.layers.{index}.<suffix>"
std::string layer_tensor_name(std::int64_t index, const std::string& suffix);
// The 14 tensor names of a linear-attention decoder layer below "model.language_model.layers.{i}.",
// in export order.
const std::vector<std::string>& layer_tensor_suffixes();
// One of them (nullopt for a suffix not among them), dense, in `dtype`.
std::optional<DenseTensor> export_layer_tensor(const Layer& layer, const sdk::LayerShapes& shapes, std::int64_t index,
                                               const std::string& suffix, DType dtype);
// Every tensor of one linear-attention decoder layer (14 tensors), dense, in `dtype`.
// A_log and linear_attn.norm.weight are exported in `dtype` too (a later step may keep them F32).
std::vector<DenseTensor> export_layer(const Layer& layer, const sdk::LayerShapes& shapes, std::int64_t index,
                                      DType dtype);

}  // namespace qgpu::weights
