// The merged model: circuit layers in front of the base's (docs/MACHINE_CIRCUIT.md §6).
#include "qgpu/core/merged_model.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <utility>

#include "qgpu/weights/model.h"
#include "qgpu/weights/numerics.h"

namespace qgpu::core {
namespace {

#define QGPU_MERGE_ASSIGN(lhs, expr)      \
  do {                                    \
    auto qgpu_e_ = (expr);                \
    if (!qgpu_e_) return qgpu_e_.error(); \
    lhs = std::move(qgpu_e_).value();     \
  } while (false)

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

sdk::TensorView view_of(void* data, sdk::DType dtype, std::span<const std::int64_t> shape) {
  sdk::TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.rank = static_cast<std::int32_t>(shape.size());
  std::copy(shape.begin(), shape.end(), v.shape);
  return v;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// A record table's shape: `rows` sparse rows of `hidden` columns (none when it has no rows).
sdk::Status check_table(const weights::SparseMatrix& m, const char* what, std::int64_t hidden) {
  if (m.rows == 0) return sdk::Status::ok();
  const auto fail = [&](const std::string& why) {
    return sdk::invalid_argument(std::string("merge: the record ") + what + " " + why);
  };
  if (m.rows < 0) return fail("has " + std::to_string(m.rows) + " rows");
  if (m.cols != hidden)
    return fail("has " + std::to_string(m.cols) + " columns, the base's hidden size is " + std::to_string(hidden));
  if (m.row_ptr.size() != static_cast<std::size_t>(m.rows) + 1 || m.row_ptr.front() != 0 ||
      m.row_ptr.back() != static_cast<std::int64_t>(m.val.size()) || m.col.size() != m.val.size())
    return fail("is not a well-formed sparse matrix of " + std::to_string(m.rows) + " rows");
  for (std::int64_t r = 0; r < m.rows; ++r) {
    if (m.row_ptr[r + 1] < m.row_ptr[r] || m.row_ptr[r + 1] > static_cast<std::int64_t>(m.val.size()))
      return fail("row " + std::to_string(r) + " ends at entry " + std::to_string(m.row_ptr[r + 1]) + " (of " +
                  std::to_string(m.val.size()) + ")");
    std::int32_t last = -1;  // columns strictly increasing: one entry per (row, column), as SparseBuilder builds
    for (std::int64_t p = m.row_ptr[r]; p < m.row_ptr[r + 1]; ++p) {
      const std::int32_t c = m.col[static_cast<std::size_t>(p)];
      const double v = m.val[static_cast<std::size_t>(p)];
      if (c < 0 || c >= hidden) return fail("row " + std::to_string(r) + " has column " + std::to_string(c));
      if (c <= last)
        return fail("row " + std::to_string(r) + " has column " + std::to_string(c) + " after column " +
                    std::to_string(last));
      last = c;
      if (static_cast<double>(static_cast<float>(v)) != v)
        return fail("row " + std::to_string(r) + " holds " + num(v) + ", which fp32 cannot hold exactly");
    }
  }
  return sdk::Status::ok();
}

// The transposition (a b) of channel indices.
struct Swap {
  std::int64_t a = 0, b = 0;
  std::int64_t operator()(std::int64_t c) const { return c == a ? b : c == b ? a : c; }
};

// Columns permuted by `swap`, column `flip` (after the swap) times `sign`.
weights::SparseMatrix permute_columns(const weights::SparseMatrix& m, Swap swap, std::int64_t flip, int sign) {
  weights::SparseBuilder out(m.rows, m.cols);
  for (std::int64_t r = 0; r < m.rows; ++r)
    for (std::int64_t k = m.row_ptr[r]; k < m.row_ptr[r + 1]; ++k) {
      const std::int64_t c = swap(m.col[static_cast<std::size_t>(k)]);
      out.add(r, c, m.val[static_cast<std::size_t>(k)] * (c == flip ? sign : 1));
    }
  return out.build();
}

weights::SparseMatrix permute_rows(const weights::SparseMatrix& m, Swap swap) {
  weights::SparseBuilder out(m.rows, m.cols);
  for (std::int64_t r = 0; r < m.rows; ++r)
    for (std::int64_t k = m.row_ptr[r]; k < m.row_ptr[r + 1]; ++k)
      out.add(swap(r), m.col[static_cast<std::size_t>(k)], m.val[static_cast<std::size_t>(k)]);
  return out.build();
}

// Value channels of `qkv` that read an earlier token through the conv1d get
// `gain` on `mute`: on a text token the projection is far below zero, so what
// an earlier text token leaves in the window is silu(-huge) = -0.
weights::SparseMatrix mute_window_channels(const weights::SparseMatrix& qkv, const std::vector<double>& conv,
                                           const sdk::LayerShapes& s, int mute, double gain, std::int64_t& count) {
  const std::int64_t kq = s.linear_num_key_heads * s.linear_key_head_dim, k = s.linear_conv_kernel;
  weights::SparseBuilder out(qkv.rows, qkv.cols);
  for (std::int64_t r = 0; r < qkv.rows; ++r) {
    for (std::int64_t j = qkv.row_ptr[r]; j < qkv.row_ptr[r + 1]; ++j)
      out.add(r, qkv.col[static_cast<std::size_t>(j)], qkv.val[static_cast<std::size_t>(j)]);
    if (r < 2 * kq || qkv.row_ptr[r] == qkv.row_ptr[r + 1]) continue;
    bool earlier = false;
    for (std::int64_t t = 0; t + 1 < k; ++t) earlier = earlier || conv[static_cast<std::size_t>(r * k + t)] != 0;
    if (!earlier) continue;
    out.add(r, mute, gain);
    ++count;
  }
  return out.build();
}

weights::DType weights_dtype(sdk::DType dtype) {
  return dtype == sdk::DType::kBF16 ? weights::DType::kBF16 : weights::DType::kF32;
}

}  // namespace

struct MergedModel::Layer {
  const sdk::Tensor* input_norm = nullptr;
  const sdk::Tensor* post_norm = nullptr;
  sdk::DeltaNetWeights gdn;
  sdk::MlpWeights mlp;
  sdk::Handle<sdk::LayerState> state;
};

MergedModel::MergedModel(sdk::BaseModel& base, sdk::TensorBackend& backend) : base_(&base), backend_(&backend) {}
MergedModel::~MergedModel() = default;

std::string ChannelSearch::to_string() const {
  if (channel < 0) return "no channel searched (" + std::to_string(rows) + " rows)";
  return "channel " + std::to_string(channel) + " (" + (sign < 0 ? "negative" : "positive") +
         " on text): " + std::to_string(violating) + " of " + std::to_string(rows) +
         " text rows violate it; worst row " + std::to_string(worst_row) + " = " + num(worst) + " (" +
         num(worst_normalized) + " after RMSNorm); " + std::to_string(clean_channels) + " clean channel(s)";
}

ChannelSearch search_mute_channel(std::span<const float> embedding, std::int64_t rows, std::int64_t hidden) {
  ChannelSearch s;
  s.rows = rows;
  if (rows <= 0 || hidden <= 0 || static_cast<std::int64_t>(embedding.size()) < rows * hidden) return s;
  // Per channel and sign: rows not strictly of that sign, and the worst sign·x/rms(row).
  std::vector<std::int64_t> bad[2];
  std::vector<double> worst[2];
  std::vector<std::int64_t> worst_row[2];
  for (int k = 0; k < 2; ++k) {
    bad[k].assign(static_cast<std::size_t>(hidden), 0);
    worst[k].assign(static_cast<std::size_t>(hidden), std::numeric_limits<double>::infinity());
    worst_row[k].assign(static_cast<std::size_t>(hidden), -1);
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = embedding.data() + r * hidden;
    double sq = 0;
    for (std::int64_t c = 0; c < hidden; ++c) sq += static_cast<double>(x[c]) * x[c];
    const double rms = std::sqrt(sq / static_cast<double>(hidden));
    for (std::int64_t c = 0; c < hidden; ++c) {
      const auto i = static_cast<std::size_t>(c);
      for (int k = 0; k < 2; ++k) {
        const double signed_value = (k == 0 ? -1.0 : 1.0) * x[c];  // k = 0: negative channel
        if (!(signed_value > 0)) ++bad[k][i];
        const double normalized = rms > 0 ? signed_value / rms : 0;
        if (normalized < worst[k][i]) {
          worst[k][i] = normalized;
          worst_row[k][i] = r;
        }
      }
    }
  }
  int best_k = 0;
  std::int64_t best_c = -1;
  for (std::int64_t c = 0; c < hidden; ++c)
    for (int k = 0; k < 2; ++k) {
      const auto i = static_cast<std::size_t>(c);
      if (bad[k][i] == 0) ++s.clean_channels;
      if (best_c < 0) {
        best_c = c, best_k = k;
        continue;
      }
      const auto b = static_cast<std::size_t>(best_c);
      if (bad[k][i] < bad[best_k][b] || (bad[k][i] == bad[best_k][b] && worst[k][i] > worst[best_k][b]))
        best_c = c, best_k = k;
    }
  const auto b = static_cast<std::size_t>(best_c);
  s.channel = best_c;
  s.sign = best_k == 0 ? -1 : 1;
  s.violating = bad[best_k][b];
  s.worst_row = worst_row[best_k][b];
  s.worst = embedding[static_cast<std::size_t>(s.worst_row * hidden + best_c)];
  s.worst_normalized = worst[best_k][b];
  return s;
}

std::int64_t MergedModel::merged_channel(std::int64_t c) const {
  return Swap{swap_a_, swap_b_}(c);
}

std::vector<float> MergedModel::circuit_order(std::span<const float> merged_row) const {
  std::vector<float> out(merged_row.begin(), merged_row.end());
  if (swap_a_ < static_cast<std::int64_t>(out.size()) && swap_b_ < static_cast<std::int64_t>(out.size()))
    std::swap(out[static_cast<std::size_t>(swap_a_)], out[static_cast<std::size_t>(swap_b_)]);
  return out;
}

sdk::Expected<std::unique_ptr<MergedModel>> MergedModel::create(sdk::BaseModel& base, const sdk::ModelInfo& info,
                                                                sdk::TensorBackend& backend, const MergeInputs& in) {
  if (in.circuit == nullptr) return sdk::invalid_argument("merge: no compiled circuit given");
  const weights::CompiledCircuit& cc = *in.circuit;
  const sdk::LayerShapes& cs = cc.target.shapes;
  const sdk::LayerShapes& bs = info.shapes;
  const std::int64_t H = bs.hidden_size;
  auto differs = [](const char* what, std::int64_t circuit, std::int64_t base_value) {
    return sdk::invalid_argument(std::string("merge: the circuit was compiled for ") + what + " " +
                                 std::to_string(circuit) + ", the base has " + std::to_string(base_value));
  };
  if (cs.hidden_size != H) return differs("hidden size", cs.hidden_size, H);
  if (cs.intermediate_size != bs.intermediate_size)
    return differs("MLP width", cs.intermediate_size, bs.intermediate_size);
  if (cs.linear_num_key_heads != bs.linear_num_key_heads)
    return differs("key heads", cs.linear_num_key_heads, bs.linear_num_key_heads);
  if (cs.linear_num_value_heads != bs.linear_num_value_heads)
    return differs("value heads", cs.linear_num_value_heads, bs.linear_num_value_heads);
  if (cs.linear_key_head_dim != bs.linear_key_head_dim)
    return differs("key head dim", cs.linear_key_head_dim, bs.linear_key_head_dim);
  if (cs.linear_value_head_dim != bs.linear_value_head_dim)
    return differs("value head dim", cs.linear_value_head_dim, bs.linear_value_head_dim);
  if (cs.linear_conv_kernel != bs.linear_conv_kernel)
    return differs("conv kernel", cs.linear_conv_kernel, bs.linear_conv_kernel);
  const int mute = cc.allocation.mute;
  if (mute < 0)
    return sdk::invalid_argument(
        "merge: the circuit was compiled without a mute channel (set weights::Target::mute_channel)");
  const sdk::RecordRows& rec = in.records;
  static const weights::SparseMatrix kNoRows;
  const weights::SparseMatrix& unemb = rec.unembedding != nullptr ? *rec.unembedding : kNoRows;
  QGPU_RETURN_IF_ERROR(check_table(unemb, "unembedding", H));
  const std::int64_t records = rec.records;
  if (records < 0 || (records > 0 && !rec.embedding))
    return sdk::invalid_argument("merge: " + std::to_string(records) + " record rows and " +
                                 (rec.embedding ? "an" : "no") + " embedding function");

  std::unique_ptr<MergedModel> m(new MergedModel(base, backend));
  m->shapes_ = bs;
  m->mute_ = mute;
  m->base_rows_ = info.vocab_size;
  m->records_ = records;
  m->unembedding_rows_ = unemb.rows;
  m->cost_.circuit_layers = static_cast<std::int64_t>(cc.layers.size());
  m->cost_.records = records;
  m->cost_.unembedding_rows = m->unembedding_rows_;

  // 1. The mute channel: the base's text rows, read through its own embedding in chunks.
  auto start = Clock::now();
  const std::int64_t text_rows =
      in.text_rows > 0 ? in.text_rows : (info.tokenizer_size > 0 ? info.tokenizer_size : info.vocab_size);
  if (text_rows > info.vocab_size)
    return sdk::invalid_argument("merge: " + std::to_string(text_rows) + " text rows, the base has " +
                                 std::to_string(info.vocab_size) + " embedding rows");
  std::vector<float> table(static_cast<std::size_t>(text_rows * H));
  constexpr std::int64_t kChunk = 4096;
  for (std::int64_t r0 = 0; r0 < text_rows; r0 += kChunk) {
    const std::int64_t n = std::min(kChunk, text_rows - r0);
    std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) ids[static_cast<std::size_t>(i)] = r0 + i;
    sdk::Handle<sdk::Tensor> rows;
    QGPU_MERGE_ASSIGN(rows, base.embed(ids));
    const std::int64_t shape[2] = {n, H};
    QGPU_RETURN_IF_ERROR(backend.download(*rows, view_of(table.data() + r0 * H, sdk::DType::kF32, shape)));
  }
  m->search_ = search_mute_channel(table, text_rows, H);
  table = {};
  m->cost_.search_seconds = seconds_since(start);
  if (m->search_.channel < 0 || m->search_.violating > 0)
    return sdk::invalid_argument("merge: no embedding channel has one strict sign on every text row; best: " +
                                 m->search_.to_string());
  const Swap swap{mute, m->search_.channel};
  m->swap_a_ = swap.a;
  m->swap_b_ = swap.b;
  // The gain must push text below zero: + on a negative channel, - on a positive one.
  const int sign = m->search_.sign < 0 ? 1 : -1;
  const std::int64_t flip = m->search_.channel;

  // 2. Circuit layers: permuted sparse weights, exported dense in the backend's dtype, uploaded.
  start = Clock::now();
  const sdk::DType dt = backend.dtype();
  const weights::DType wdt = weights_dtype(dt);
  m->dtype_ = wdt;
  auto upload = [&](void* data, sdk::DType dtype,
                    std::span<const std::int64_t> shape) -> sdk::Expected<const sdk::Tensor*> {
    sdk::Handle<sdk::Tensor> t;
    QGPU_MERGE_ASSIGN(t, backend.upload(view_of(data, dtype, shape)));
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    m->cost_.uploaded_bytes += n * static_cast<std::int64_t>(sdk::dtype_size(backend.dtype()));
    m->tensors_.push_back(std::move(t));
    return m->tensors_.back().get();
  };
  for (std::size_t i = 0; i < cc.layers.size(); ++i) {
    weights::Layer l = cc.layers[i];
    weights::GdnLayer& g = l.gdn;
    if (in.mute_window)
      g.in_proj_qkv =
          mute_window_channels(g.in_proj_qkv, g.conv1d, bs, mute, cc.target.mute_gain, m->cost_.window_channels);
    m->circuit_layers_.push_back(l);
    if (in.sparse_circuit) continue;  // run by the reference model: nothing to upload
    g.in_proj_qkv = permute_columns(g.in_proj_qkv, swap, flip, sign);
    g.in_proj_z = permute_columns(g.in_proj_z, swap, flip, sign);
    g.in_proj_b = permute_columns(g.in_proj_b, swap, flip, sign);
    g.in_proj_a = permute_columns(g.in_proj_a, swap, flip, sign);
    g.out_proj = permute_rows(g.out_proj, swap);
    l.mlp.gate = permute_columns(l.mlp.gate, swap, flip, sign);
    l.mlp.up = permute_columns(l.mlp.up, swap, flip, sign);
    l.mlp.down = permute_rows(l.mlp.down, swap);
    std::map<std::string, const sdk::Tensor*> by_name;
    const auto index = static_cast<std::int64_t>(i);
    for (weights::DenseTensor& t : weights::export_layer(l, bs, index, wdt)) {
      void* data = wdt == weights::DType::kF32 ? static_cast<void*>(t.f32.data()) : static_cast<void*>(t.bf16.data());
      const sdk::Tensor* up = nullptr;
      QGPU_MERGE_ASSIGN(up, upload(data, dt, t.shape));
      by_name[t.name] = up;
    }
    auto get = [&](const std::string& suffix) -> const sdk::Tensor* {
      auto it = by_name.find(weights::layer_tensor_name(index, suffix));
      return it == by_name.end() ? nullptr : it->second;
    };
    Layer layer;
    layer.input_norm = get("input_layernorm.weight");
    layer.post_norm = get("post_attention_layernorm.weight");
    layer.gdn = {get("linear_attn.in_proj_qkv.weight"),
                 get("linear_attn.in_proj_z.weight"),
                 get("linear_attn.in_proj_b.weight"),
                 get("linear_attn.in_proj_a.weight"),
                 get("linear_attn.conv1d.weight"),
                 get("linear_attn.dt_bias"),
                 get("linear_attn.A_log"),
                 get("linear_attn.norm.weight"),
                 get("linear_attn.out_proj.weight")};
    layer.mlp = {get("mlp.gate_proj.weight"), get("mlp.up_proj.weight"), get("mlp.down_proj.weight")};
    for (const sdk::Tensor* t : {layer.input_norm, layer.post_norm, layer.gdn.in_proj_qkv, layer.gdn.out_proj,
                                 layer.mlp.gate_proj, layer.mlp.down_proj})
      if (t == nullptr)
        return sdk::internal_error("merge: weights::export_layer gave an incomplete layer " + std::to_string(i));
    QGPU_MERGE_ASSIGN(layer.state, backend.create_state());
    m->layers_.push_back(std::move(layer));
  }

  if (in.sparse_circuit) m->reference_ = std::make_unique<weights::ReferenceModel>(m->circuit_layers_, bs, wdt);

  // 3. Record rows in the merged channel order: dense on the backend, or (sparse path) on the host.
  m->record_embedding_ = rec.embedding;
  if (in.sparse_circuit) {
    // The host asks for a record token's embedding row as it arrives, and scores the record
    // rows over their sparse rows: a dense [rows, H] head would be read whole for every token
    // (862 MB in f32).
    SparseHead& sh = m->sparse_head_;
    sh.row_ptr.assign(unemb.row_ptr.begin(), unemb.row_ptr.end());
    sh.col.reserve(unemb.col.size());
    sh.val.reserve(unemb.val.size());
    for (std::size_t p = 0; p < unemb.val.size(); ++p) {
      sh.col.push_back(static_cast<std::int32_t>(swap(unemb.col[p])));
      sh.val.push_back(static_cast<float>(unemb.val[p]));
    }
  } else {
    if (records > 0) {
      std::vector<float> rows(static_cast<std::size_t>(records * H));
      for (std::int64_t r = 0; r < records; ++r) {
        auto row = m->record_row(r);
        if (!row) return row.status();
        std::copy(row->begin(), row->end(), rows.begin() + r * H);
      }
      const std::int64_t shape[2] = {records, H};
      QGPU_MERGE_ASSIGN(m->record_table_, backend.upload(view_of(rows.data(), sdk::DType::kF32, shape)));
      m->cost_.uploaded_bytes += records * H * static_cast<std::int64_t>(sdk::dtype_size(dt));
    }
    if (m->unembedding_rows_ > 0) {
      std::vector<float> rows(static_cast<std::size_t>(m->unembedding_rows_ * H), 0.0f);
      for (std::int64_t r = 0; r < unemb.rows; ++r)
        for (std::int64_t p = unemb.row_ptr[r]; p < unemb.row_ptr[r + 1]; ++p)
          rows[static_cast<std::size_t>(r * H + swap(unemb.col[static_cast<std::size_t>(p)]))] =
              static_cast<float>(unemb.val[static_cast<std::size_t>(p)]);
      const std::int64_t shape[2] = {m->unembedding_rows_, H};
      QGPU_MERGE_ASSIGN(m->record_head_, backend.upload(view_of(rows.data(), sdk::DType::kF32, shape)));
      m->cost_.uploaded_bytes += m->unembedding_rows_ * H * static_cast<std::int64_t>(sdk::dtype_size(dt));
    }
  }
  m->cost_.upload_seconds = seconds_since(start);
  return m;
}

sdk::Expected<std::vector<float>> MergedModel::record_row(std::int64_t r) const {
  const std::int64_t H = shapes_.hidden_size;
  auto row = record_embedding_(r);
  if (!row) return row.status().with_context("the embedding row of record " + std::to_string(r));
  if (static_cast<std::int64_t>(row->size()) != H)
    return sdk::invalid_argument("merge: record row " + std::to_string(r) + " has " + std::to_string(row->size()) +
                                 " values, the base's hidden size is " + std::to_string(H));
  if ((*row)[static_cast<std::size_t>(mute_)] != 0)
    return sdk::invalid_argument("merge: record row " + std::to_string(r) + " is " +
                                 num((*row)[static_cast<std::size_t>(mute_)]) + " on the circuit's mute channel " +
                                 std::to_string(mute_) + " (must be exactly 0)");
  // In the merged channel order, in the backend's dtype (an uploaded table rounds the same way).
  std::vector<float> out(static_cast<std::size_t>(H));
  for (std::int64_t c = 0; c < H; ++c)
    out[static_cast<std::size_t>(merged_channel(c))] = weights::round_to(dtype_, (*row)[static_cast<std::size_t>(c)]);
  return out;
}

sdk::Expected<sdk::Handle<sdk::Tensor>> MergedModel::run_reference(std::vector<float> rows, std::int64_t T) {
  const std::int64_t H = shapes_.hidden_size;
  for (std::int64_t t = 0; t < T; ++t) {  // in the circuit's channel order: the swap is its own inverse
    const std::span<float> row(rows.data() + t * H, static_cast<std::size_t>(H));
    const std::vector<float> y = circuit_order(reference_->step(circuit_order(row)));
    std::copy(y.begin(), y.end(), row.begin());
  }
  const std::int64_t shape[2] = {T, H};
  return backend_->upload(view_of(rows.data(), sdk::DType::kF32, shape));
}

sdk::Expected<sdk::Handle<sdk::Tensor>> MergedModel::run_circuit(const sdk::Tensor& input) {
  auto& be = *backend_;
  const double eps = shapes_.rms_norm_eps;
  const sdk::DeltaNetShape shape{shapes_.linear_num_key_heads, shapes_.linear_num_value_heads,
                                 shapes_.linear_key_head_dim,  shapes_.linear_value_head_dim,
                                 shapes_.linear_conv_kernel,   eps};
  sdk::Handle<sdk::Tensor> h, x, mixed;
  if (reference_) {  // sparse: row by row through the reference model
    const std::int64_t T = input.dim(0), H = shapes_.hidden_size;
    std::vector<float> rows(static_cast<std::size_t>(T * H));
    const std::int64_t shape[2] = {T, H};
    QGPU_RETURN_IF_ERROR(be.download(input, view_of(rows.data(), sdk::DType::kF32, shape)));
    return run_reference(std::move(rows), T);
  }
  QGPU_MERGE_ASSIGN(h, be.rows(input, 0, input.dim(0)));
  for (Layer& l : layers_) {
    QGPU_MERGE_ASSIGN(x, be.rms_norm(*h, *l.input_norm, eps));
    // The circuit is exact under the token-by-token recurrence (backend.Circuits.*), so every run uses it.
    QGPU_MERGE_ASSIGN(mixed, be.gated_delta_net(*x, l.gdn, shape, *l.state, sdk::DeltaRule::kRecurrent));
    QGPU_MERGE_ASSIGN(h, be.add(*h, *mixed));
    QGPU_MERGE_ASSIGN(x, be.rms_norm(*h, *l.post_norm, eps));
    QGPU_MERGE_ASSIGN(mixed, be.mlp(*x, l.mlp));
    QGPU_MERGE_ASSIGN(h, be.add(*h, *mixed));
  }
  return h;
}

sdk::Expected<MergedForward> MergedModel::forward(std::span<const std::int64_t> ids, const ForwardOptions& options) {
  if (ids.empty()) return sdk::invalid_argument("merged forward needs at least one token");
  for (std::int64_t id : ids)
    if (id < 0 || id >= vocab_rows())
      return sdk::invalid_argument("token id " + std::to_string(id) + " is outside the merged model's " +
                                   std::to_string(vocab_rows()) + " rows (" + std::to_string(base_rows_) + " base + " +
                                   std::to_string(records_) + " records)");
  auto& be = *backend_;
  const std::int64_t H = shapes_.hidden_size, T = static_cast<std::int64_t>(ids.size());
  MergedForward out;
  out.columns = logit_columns();
  out.rows = options.all_logits ? T : 1;
  out.logits.assign(static_cast<std::size_t>(out.rows * out.columns), 0.0f);
  if (options.circuit_residual) out.circuit_residual.assign(static_cast<std::size_t>(T * H), 0.0f);
  // Runs of text ids and of record ids, each through every layer in one call.
  std::int64_t begin = 0;
  while (begin < T) {
    const bool text = ids[static_cast<std::size_t>(begin)] < base_rows_;
    std::int64_t end = begin + 1;
    while (end < T && (ids[static_cast<std::size_t>(end)] < base_rows_) == text) ++end;
    const std::int64_t n = end - begin;
    sdk::Handle<sdk::Tensor> h, x, logits;
    const auto run = ids.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(n));
    if (text) {
      QGPU_MERGE_ASSIGN(h, base_->embed(run));
      QGPU_MERGE_ASSIGN(h, run_circuit(*h));
    } else if (reference_) {  // sparse: each record's embedding row asked for as it arrives
      std::vector<float> rows(static_cast<std::size_t>(n * H));
      for (std::int64_t i = 0; i < n; ++i) {
        std::vector<float> row;
        QGPU_MERGE_ASSIGN(row, record_row(run[static_cast<std::size_t>(i)] - base_rows_));
        std::copy(row.begin(), row.end(), rows.begin() + i * H);
      }
      QGPU_MERGE_ASSIGN(h, run_reference(std::move(rows), n));
    } else {
      std::vector<std::int64_t> local(run.begin(), run.end());
      for (std::int64_t& id : local) id -= base_rows_;
      QGPU_MERGE_ASSIGN(h, be.embed(*record_table_, local));
      QGPU_MERGE_ASSIGN(h, run_circuit(*h));
    }
    if (options.circuit_residual) {
      const std::int64_t shape[2] = {n, H};
      QGPU_RETURN_IF_ERROR(be.download(*h, view_of(out.circuit_residual.data() + begin * H, sdk::DType::kF32, shape)));
    }
    QGPU_MERGE_ASSIGN(h, base_->run_layers(*h));
    const bool last = end == T;
    if (options.all_logits || last) {
      if (!options.all_logits) QGPU_MERGE_ASSIGN(h, be.rows(*h, n - 1, n));
      const std::int64_t r = h->dim(0);
      const std::int64_t row0 = options.all_logits ? begin : 0;
      QGPU_MERGE_ASSIGN(x, base_->final_norm(*h));
      QGPU_MERGE_ASSIGN(logits, base_->lm_head(*x));
      // Base columns, then the record columns, into the [rows, columns] output.
      std::vector<float> part(static_cast<std::size_t>(r * base_rows_));
      const std::int64_t base_shape[2] = {r, base_rows_};
      QGPU_RETURN_IF_ERROR(be.download(*logits, view_of(part.data(), sdk::DType::kF32, base_shape)));
      for (std::int64_t i = 0; i < r; ++i)
        std::copy_n(part.begin() + i * base_rows_, base_rows_, out.logits.begin() + (row0 + i) * out.columns);
      if (unembedding_rows_ > 0 && reference_) {
        // Sparse: x·rowᵀ on the host for each record row, in double, rounded once.
        std::vector<float> xs(static_cast<std::size_t>(r * H));
        const std::int64_t x_shape[2] = {r, H};
        QGPU_RETURN_IF_ERROR(be.download(*x, view_of(xs.data(), sdk::DType::kF32, x_shape)));
        for (std::int64_t i = 0; i < r; ++i) {
          const float* xi = xs.data() + i * H;
          float* out_row = out.logits.data() + (row0 + i) * out.columns + base_rows_;
          for (std::int64_t k = 0; k < unembedding_rows_; ++k) {
            double acc = 0;
            for (std::int64_t p = sparse_head_.row_ptr[k]; p < sparse_head_.row_ptr[k + 1]; ++p)
              acc += static_cast<double>(sparse_head_.val[p]) * xi[sparse_head_.col[p]];
            out_row[k] = static_cast<float>(acc);
          }
        }
      } else if (unembedding_rows_ > 0) {
        QGPU_MERGE_ASSIGN(logits, be.linear(*x, *record_head_));
        part.assign(static_cast<std::size_t>(r * unembedding_rows_), 0.0f);
        const std::int64_t rec_shape[2] = {r, unembedding_rows_};
        QGPU_RETURN_IF_ERROR(be.download(*logits, view_of(part.data(), sdk::DType::kF32, rec_shape)));
        for (std::int64_t i = 0; i < r; ++i)
          std::copy_n(part.begin() + i * unembedding_rows_, unembedding_rows_,
                      out.logits.begin() + (row0 + i) * out.columns + base_rows_);
      }
    }
    begin = end;
  }
  return out;
}

void MergedModel::reset() {
  base_->reset();
  for (Layer& l : layers_) l.state->reset();
  if (reference_) reference_->reset();
}

sdk::Expected<weights::StateView> MergedModel::circuit_state() {
  if (reference_) return reference_->state_view();
  const std::int64_t nv = shapes_.linear_num_value_heads, dk = shapes_.linear_key_head_dim,
                     dv = shapes_.linear_value_head_dim;
  weights::StateView view;
  view.dtype = dtype_;
  states_.resize(layers_.size());
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    weights::LayerStateView lv;
    lv.value_heads = nv;
    lv.key_dim = dk;
    lv.value_dim = dv;
    if (layers_[i].state->tokens() > 0) {  // a layer no token ran through has no state (read_ram says so)
      states_[i].assign(static_cast<std::size_t>(nv * dk * dv), 0.0f);
      const std::int64_t shape[3] = {nv, dk, dv};
      QGPU_RETURN_IF_ERROR(
          backend_->download_state(*layers_[i].state, view_of(states_[i].data(), sdk::DType::kF32, shape))
              .with_context("circuit layer " + std::to_string(i)));
      lv.data = states_[i].data();
    }
    view.layers.push_back(lv);
  }
  return view;
}

sdk::Expected<std::unique_ptr<LoadedMerge>> load_merge(const Host& host,
                                                       const std::map<std::string, std::string>& backend_options,
                                                       bool sparse) {
  auto m = std::make_unique<LoadedMerge>();
  auto be = host.instantiate<sdk::TensorBackend>(backend_options);
  if (!be) return be.error();
  m->backend = *be;
  auto bm = host.instantiate<sdk::BaseModel>();
  if (!bm) return bm.error();
  m->base = *bm;
  const std::string name = host.select(QGPU_PLUGIN_BASE_MODEL)->plugin->name;
  auto info = guarded_call(name, "load()", [&] { return m->base->load(*m->backend); });
  if (!info) return info.error();
  m->host = std::make_unique<MergeHost>(*m->base, *info, *m->backend, sparse);
  return m;
}

void RecordTables::tie() {
  unembedding = {};
  unembedding.rows = records();
  unembedding.cols = hidden;
  unembedding.row_ptr.assign(1, 0);
  for (std::int64_t r = 0; r < records(); ++r) {
    for (std::int64_t c = 0; c < hidden; ++c) {
      const float v = embedding[static_cast<std::size_t>(r * hidden + c)];
      if (v == 0) continue;
      unembedding.col.push_back(static_cast<std::int32_t>(c));
      unembedding.val.push_back(v);
    }
    unembedding.row_ptr.push_back(static_cast<std::int64_t>(unembedding.val.size()));
  }
}

sdk::RecordRows RecordTables::rows() const {
  sdk::RecordRows out;
  out.records = records();
  out.embedding = [this](std::int64_t r) -> sdk::Expected<std::vector<float>> {
    const auto first = embedding.begin() + r * hidden;
    return std::vector<float>(first, first + hidden);
  };
  out.unembedding = &unembedding;
  return out;
}

std::string MergeHost::dtype() const {
  return backend_->dtype() == sdk::DType::kBF16 ? "bf16" : "f32";
}

sdk::Status MergeHost::merge(const weights::CompiledCircuit& circuit, const sdk::RecordRows& rows) {
  merged_.reset();  // the old layers leave the backend first
  circuit_ = nullptr;
  MergeInputs in;
  in.circuit = &circuit;
  in.records = rows;
  in.sparse_circuit = sparse_;
  auto m = MergedModel::create(*base_, info_, *backend_, in);
  if (!m) return m.status();
  merged_ = std::move(*m);
  merged_->reset();
  circuit_ = &circuit;
  return sdk::Status::ok();
}

sdk::Expected<std::vector<float>> MergeHost::forward(std::span<const std::int64_t> ids) {
  if (!merged_) return sdk::internal_error("forward() before merge()");
  auto f = merged_->forward(ids);
  if (!f) return f.status();
  return std::move(f->logits);
}

sdk::Expected<weights::StateView> MergeHost::circuit_state() {
  if (!merged_) return sdk::internal_error("circuit_state() before merge()");
  return merged_->circuit_state();
}

std::string MergeHost::describe() const {
  if (!merged_) return "not merged";
  const MergeCost& c = merged_->cost();
  char line[256];
  std::snprintf(
      line, sizeof line,
      "%lld circuit layers (%s) + the base's %lld, %lld record rows, mute channel %lld; %.1f GiB uploaded (%s)",
      static_cast<long long>(c.circuit_layers), sparse_ ? "sparse, on the host" : "dense, on the backend",
      static_cast<long long>(info_.num_layers), static_cast<long long>(c.records),
      static_cast<long long>(merged_->mute().channel), static_cast<double>(c.uploaded_bytes) / (1 << 30),
      dtype().c_str());
  return line;
}

double kl_divergence(std::span<const float> p_logits, std::span<const float> q_logits, std::int64_t n) {
  auto log_softmax = [n](std::span<const float> z) {
    double mx = -std::numeric_limits<double>::infinity();
    for (std::int64_t i = 0; i < n; ++i) mx = std::max(mx, static_cast<double>(z[static_cast<std::size_t>(i)]));
    double s = 0;
    for (std::int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(z[static_cast<std::size_t>(i)]) - mx);
    std::vector<double> out(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
      out[static_cast<std::size_t>(i)] = static_cast<double>(z[static_cast<std::size_t>(i)]) - mx - std::log(s);
    return out;
  };
  const std::vector<double> lp = log_softmax(p_logits), lq = log_softmax(q_logits);
  double kl = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    if (lp[k] == lq[k]) continue;  // exactly 0 where the logits agree (also for p = 0)
    kl += std::exp(lp[k]) * (lp[k] - lq[k]);
  }
  return kl;
}

sdk::Expected<SilenceReport> measure_silence(MergedModel& merged, sdk::BaseModel& base, sdk::TensorBackend& backend,
                                             std::span<const std::int64_t> sequence, MergedForward* merged_out,
                                             bool circuit_residual) {
  const std::int64_t V = merged.base_rows(), C = merged.logit_columns();
  std::vector<std::int64_t> text;
  for (std::int64_t id : sequence)
    if (id < V) text.push_back(id);
  if (text.empty()) return sdk::invalid_argument("measure_silence: the sequence has no text tokens");
  SilenceReport rep;
  rep.tokens = static_cast<std::int64_t>(sequence.size());
  rep.records = rep.tokens - static_cast<std::int64_t>(text.size());

  auto start = Clock::now();
  merged.reset();
  ForwardOptions options;
  options.all_logits = true;
  options.circuit_residual = circuit_residual;
  MergedForward m;
  QGPU_MERGE_ASSIGN(m, merged.forward(sequence, options));
  rep.merged_seconds = seconds_since(start);

  // The base runs each text run of the sequence in one call, as the merged model
  // does (same shapes, so the same rounding where nothing else differs).
  start = Clock::now();
  base.reset();
  const auto T = static_cast<std::int64_t>(text.size());
  std::vector<float> b(static_cast<std::size_t>(T * V));
  std::int64_t done = 0;
  for (std::size_t i = 0; i < sequence.size();) {
    if (sequence[i] >= V) {
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < sequence.size() && sequence[end] < V) ++end;
    const auto n = static_cast<std::int64_t>(end - i);
    sdk::Handle<sdk::Tensor> h;
    QGPU_MERGE_ASSIGN(h, base.embed(sequence.subspan(i, end - i)));
    QGPU_MERGE_ASSIGN(h, base.run_layers(*h));
    QGPU_MERGE_ASSIGN(h, base.final_norm(*h));
    QGPU_MERGE_ASSIGN(h, base.lm_head(*h));
    const std::int64_t shape[2] = {n, V};
    QGPU_RETURN_IF_ERROR(backend.download(*h, view_of(b.data() + done * V, sdk::DType::kF32, shape)));
    done += n;
    i = end;
  }
  base.reset();
  rep.base_seconds = seconds_since(start);

  bool seen_record = false;
  std::int64_t k = 0;
  double after_sum = 0;
  for (std::int64_t i = 0; i < rep.tokens; ++i) {
    if (sequence[static_cast<std::size_t>(i)] >= V) {
      seen_record = true;
      continue;
    }
    const std::span<const float> mrow(m.logits.data() + i * C, static_cast<std::size_t>(C));
    const std::span<const float> brow(b.data() + k * V, static_cast<std::size_t>(V));
    ++k;
    const double kl = kl_divergence(brow, mrow, V);
    const bool identical = std::equal(brow.begin(), brow.end(), mrow.begin(), [](float x, float y) {
      return std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y);
    });
    rep.kl.push_back(kl);
    if (!seen_record) {
      ++rep.before;
      rep.before_identical += identical;
      rep.kl_before_max = std::max(rep.kl_before_max, kl);
    } else {
      ++rep.after;
      rep.after_identical += identical;
      after_sum += kl;
      if (rep.kl_after_max_at < 0 || kl > rep.kl_after_max) {
        rep.kl_after_max = kl;
        rep.kl_after_max_at = i;
      }
    }
    if (C > V) {  // record mass without the text-mode mask
      double mx = -std::numeric_limits<double>::infinity();
      for (float z : mrow) mx = std::max(mx, static_cast<double>(z));
      double all = 0, rec = 0;
      for (std::int64_t j = 0; j < C; ++j) {
        const double e = std::exp(static_cast<double>(mrow[static_cast<std::size_t>(j)]) - mx);
        all += e;
        if (j >= V) rec += e;
      }
      rep.record_mass_max = std::max(rep.record_mass_max, rec / all);
    }
  }
  rep.kl_after_mean = rep.after > 0 ? after_sum / static_cast<double>(rep.after) : 0;
  if (merged_out != nullptr) *merged_out = std::move(m);
  return rep;
}

}  // namespace qgpu::core
