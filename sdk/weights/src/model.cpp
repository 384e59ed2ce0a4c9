#include "qgpu/weights/model.h"

namespace qgpu::weights {

void SparseBuilder::add(std::int64_t row, std::int64_t col, double value) {
  if (value == 0) return;
  entries_[{row, col}] += value;
}

SparseMatrix SparseBuilder::build() const {
  SparseMatrix m;
  m.rows = rows_;
  m.cols = cols_;
  m.row_ptr.assign(static_cast<std::size_t>(rows_) + 1, 0);
  for (const auto& [rc, v] : entries_) {
    if (v == 0) continue;
    m.row_ptr[static_cast<std::size_t>(rc.first) + 1]++;
    m.col.push_back(static_cast<std::int32_t>(rc.second));
    m.val.push_back(v);
  }
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows_); ++r) m.row_ptr[r + 1] += m.row_ptr[r];
  return m;
}

std::string layer_tensor_name(std::int64_t index, const std::string& suffix) {
  return "model.language_model.layers." + std::to_string(index) + "." + suffix;
}

namespace {

DenseTensor make(const std::string& name, std::vector<std::int64_t> shape, DType dtype) {
  DenseTensor t;
  t.name = name;
  t.shape = std::move(shape);
  t.dtype = dtype;
  std::size_t n = 1;
  for (std::int64_t d : t.shape) n *= static_cast<std::size_t>(d);
  if (dtype == DType::kF32)
    t.f32.assign(n, 0.0f);
  else
    t.bf16.assign(n, 0);  // bf16 +0
  return t;
}

void put(DenseTensor& t, std::size_t i, double v) {
  if (t.dtype == DType::kF32)
    t.f32[i] = static_cast<float>(v);
  else
    t.bf16[i] = bf16_bits(static_cast<float>(v));
}

DenseTensor dense(const std::string& name, const SparseMatrix& m, DType dtype) {
  DenseTensor t = make(name, {m.rows, m.cols}, dtype);
  for (std::int64_t r = 0; r < m.rows; ++r)
    for (std::int64_t k = m.row_ptr[r]; k < m.row_ptr[r + 1]; ++k)
      put(t, static_cast<std::size_t>(r * m.cols + m.col[k]), m.val[k]);
  return t;
}

DenseTensor vec(const std::string& name, const std::vector<double>& v, std::vector<std::int64_t> shape, DType dtype) {
  DenseTensor t = make(name, std::move(shape), dtype);
  for (std::size_t i = 0; i < v.size(); ++i) put(t, i, v[i]);
  return t;
}

}  // namespace

const std::vector<std::string>& layer_tensor_suffixes() {
  static const std::vector<std::string> suffixes = {
      "input_layernorm.weight",         "linear_attn.in_proj_qkv.weight", "linear_attn.in_proj_z.weight",
      "linear_attn.in_proj_b.weight",   "linear_attn.in_proj_a.weight",   "linear_attn.conv1d.weight",
      "linear_attn.dt_bias",            "linear_attn.A_log",              "linear_attn.norm.weight",
      "linear_attn.out_proj.weight",    "post_attention_layernorm.weight", "mlp.gate_proj.weight",
      "mlp.up_proj.weight",             "mlp.down_proj.weight"};
  return suffixes;
}

std::optional<DenseTensor> export_layer_tensor(const Layer& layer, const sdk::LayerShapes& s, std::int64_t index,
                                               const std::string& suffix, DType dtype) {
  const std::string name = layer_tensor_name(index, suffix);
  const GdnLayer& g = layer.gdn;
  const std::int64_t nv = s.linear_num_value_heads, dv = s.linear_value_head_dim;
  if (suffix == "input_layernorm.weight" || suffix == "post_attention_layernorm.weight")
    return make(name, {s.hidden_size}, dtype);
  if (suffix == "linear_attn.in_proj_qkv.weight") return dense(name, g.in_proj_qkv, dtype);
  if (suffix == "linear_attn.in_proj_z.weight") return dense(name, g.in_proj_z, dtype);
  if (suffix == "linear_attn.in_proj_b.weight") return dense(name, g.in_proj_b, dtype);
  if (suffix == "linear_attn.in_proj_a.weight") return dense(name, g.in_proj_a, dtype);
  if (suffix == "linear_attn.conv1d.weight")
    return vec(name, g.conv1d, {g.in_proj_qkv.rows, 1, s.linear_conv_kernel}, dtype);
  if (suffix == "linear_attn.dt_bias") return vec(name, g.dt_bias, {nv}, dtype);
  if (suffix == "linear_attn.A_log") return vec(name, g.a_log, {nv}, dtype);
  if (suffix == "linear_attn.norm.weight") {
    const double w = dtype == DType::kF32 ? g.norm_weight_f32 : g.norm_weight_bf16;
    return vec(name, std::vector<double>(static_cast<std::size_t>(dv), w), {dv}, dtype);
  }
  if (suffix == "linear_attn.out_proj.weight") return dense(name, g.out_proj, dtype);
  if (suffix == "mlp.gate_proj.weight") return dense(name, layer.mlp.gate, dtype);
  if (suffix == "mlp.up_proj.weight") return dense(name, layer.mlp.up, dtype);
  if (suffix == "mlp.down_proj.weight") return dense(name, layer.mlp.down, dtype);
  return std::nullopt;
}

std::vector<DenseTensor> export_layer(const Layer& layer, const sdk::LayerShapes& s, std::int64_t index, DType dtype) {
  std::vector<DenseTensor> out;
  for (const std::string& suffix : layer_tensor_suffixes())
    out.push_back(*export_layer_tensor(layer, s, index, suffix, dtype));
  return out;
}

}  // namespace qgpu::weights
