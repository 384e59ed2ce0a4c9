// The merged model's own tensors for `qgpu-host build` (core/build.h): circuit layers and
// record rows exactly as the dense path uploads them.
#include <bit>
#include <cstdio>
#include <cstring>

#include "merged_model_internal.h"
#include "qgpu/weights/model.h"
#include "qgpu/weights/numerics.h"

namespace qgpu::core {

sdk::Expected<weights::Layer> MergedModel::merged_layer(std::int64_t layer) const {
  if (layer < 0 || layer >= static_cast<std::int64_t>(circuit_layers_.size()))
    return sdk::invalid_argument("export: circuit layer " + std::to_string(layer) + " of " +
                                 std::to_string(circuit_layers_.size()));
  return merged_order(circuit_layers_[static_cast<std::size_t>(layer)], map_);
}

sdk::Expected<std::vector<float>> MergedModel::export_record_rows(bool head) const {
  const std::int64_t H = shapes_.hidden_size;
  std::vector<float> rows(static_cast<std::size_t>(records_ * H), 0.0f);
  if (!head) {
    for (std::int64_t r = 0; r < records_; ++r) {
      auto row = record_row(r);
      if (!row) return row.status();
      std::copy(row->begin(), row->end(), rows.begin() + r * H);
    }
    return rows;
  }
  // A stock head scores every vocabulary row: a record row without an unembedding row would
  // score 0 and could win.
  if (unembedding_rows_ != records_)
    return sdk::unsupported("export: the circuit has " + std::to_string(unembedding_rows_) +
                            " unembedding rows for " + std::to_string(records_) +
                            " record rows; a stock head needs one per record");
  const SparseHead& sh = sparse_head_;
  for (std::int64_t r = 0; r < records_; ++r)
    for (std::int64_t p = sh.row_ptr[static_cast<std::size_t>(r)]; p < sh.row_ptr[static_cast<std::size_t>(r) + 1];
         ++p)
      rows[static_cast<std::size_t>(r * H + sh.col[static_cast<std::size_t>(p)])] =
          weights::round_to(dtype_, sh.scaled[static_cast<std::size_t>(p)]);
  return rows;
}

namespace {

class Fnv {
 public:
  void bytes(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) h_ = (h_ ^ p[i]) * 0x100000001b3ull;
  }
  template <typename T>
  void values(const std::vector<T>& v) {
    const std::uint64_t n = v.size();
    bytes(&n, sizeof n);
    if (!v.empty()) bytes(v.data(), v.size() * sizeof(T));
  }
  void matrix(const weights::SparseMatrix& m) {
    bytes(&m.rows, sizeof m.rows);
    bytes(&m.cols, sizeof m.cols);
    values(m.row_ptr);
    values(m.col);
    values(m.val);
  }
  std::uint64_t value() const { return h_; }

 private:
  std::uint64_t h_ = 0xcbf29ce484222325ull;
};

void hash_layer(Fnv& h, const weights::Layer& l) {
  const weights::GdnLayer& g = l.gdn;
  for (const weights::SparseMatrix* m :
       {&g.in_proj_qkv, &g.in_proj_z, &g.in_proj_b, &g.in_proj_a, &g.out_proj, &l.mlp.gate, &l.mlp.up, &l.mlp.down})
    h.matrix(*m);
  h.values(g.conv1d);
  h.values(g.a_log);
  h.values(g.dt_bias);
  h.bytes(&g.norm_weight_f32, sizeof g.norm_weight_f32);
  h.bytes(&g.norm_weight_bf16, sizeof g.norm_weight_bf16);
}

}  // namespace

std::uint64_t MergedModel::circuit_hash() const {
  Fnv h;
  for (const weights::Layer& circuit : circuit_layers_) hash_layer(h, merged_order(circuit, map_));
  h.values(sparse_head_.row_ptr);
  h.values(sparse_head_.col);
  h.values(sparse_head_.scaled);
  return h.value();
}

std::uint64_t compiled_hash(const weights::CompiledCircuit& circuit, const RecordRows& rows) {
  Fnv h;
  for (const weights::Layer& l : circuit.layers) hash_layer(h, l);
  h.bytes(&rows.records, sizeof rows.records);
  if (rows.unembedding != nullptr) h.matrix(*rows.unembedding);
  return h.value();
}

std::string hash_text(std::uint64_t hash) {
  char text[32];
  std::snprintf(text, sizeof text, "fnv1a64:%016llx", static_cast<unsigned long long>(hash));
  return text;
}

}  // namespace qgpu::core
