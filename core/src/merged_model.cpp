// The merged model: circuit layers in front of the base's (docs/MACHINE_CIRCUIT.md §6).
// Here the merge: the mute direction, the base's channels, the channel map, the circuit
// layers and record rows uploaded. Sequences: merged_sequence.cpp; forward: merged_forward.cpp.
#include "qgpu/core/merged_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "merged_model_internal.h"
#include "qgpu/weights/model.h"
#include "qgpu/weights/numerics.h"

namespace qgpu::core {
namespace {

using detail::Clock;
using detail::num;
using detail::seconds_since;
using detail::view_of;

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

// The circuit's mute column spread over the mute direction: an entry v on `mute`
// (v = the compiled gain, or a multiple of it where the conv-window mute added to it)
// becomes v / compiled · G·d_i on free channel free[i] (circuit order; bf16-exact, as
// G is a power of two and d bf16-exact).
weights::SparseMatrix spread_mute(const weights::SparseMatrix& m, int mute, double compiled,
                                  const std::vector<std::pair<int, double>>& direction) {
  weights::SparseMatrix out;
  out.rows = m.rows;
  out.cols = m.cols;
  out.row_ptr.assign(1, 0);
  std::vector<std::pair<std::int32_t, double>> row;
  for (std::int64_t r = 0; r < m.rows; ++r) {
    row.clear();
    for (std::int64_t k = m.row_ptr[r]; k < m.row_ptr[r + 1]; ++k) {
      const std::int32_t c = m.col[static_cast<std::size_t>(k)];
      const double v = m.val[static_cast<std::size_t>(k)];
      if (c != mute) {
        row.emplace_back(c, v);
        continue;
      }
      for (const auto& [channel, weight] : direction) row.emplace_back(channel, v / compiled * weight);
    }
    std::sort(row.begin(), row.end());  // the direction's channels are free: no column repeats
    for (const auto& [c, v] : row) {
      out.col.push_back(c);
      out.val.push_back(v);
    }
    out.row_ptr.push_back(static_cast<std::int64_t>(out.val.size()));
  }
  return out;
}

// The largest Σ|w| off the mute channel over the rows that carry the mute gain: how far
// the circuit's own terms can move a muted switch per unit of normalized residual.
double muted_row_weight(const weights::SparseMatrix& m, int mute) {
  double most = 0;
  for (std::int64_t r = 0; r < m.rows; ++r) {
    double sum = 0;
    bool muted = false;
    for (std::int64_t k = m.row_ptr[r]; k < m.row_ptr[r + 1]; ++k) {
      if (m.col[static_cast<std::size_t>(k)] == mute)
        muted = true;
      else
        sum += std::abs(m.val[static_cast<std::size_t>(k)]);
    }
    if (muted) most = std::max(most, sum);
  }
  return most;
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
    bool muted = false;  // the compiler mutes some value rows itself (a port that does not read)
    for (std::int64_t j = qkv.row_ptr[r]; j < qkv.row_ptr[r + 1]; ++j)
      muted = muted || qkv.col[static_cast<std::size_t>(j)] == mute;
    if (muted) continue;
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

// The base's channels as the choice sees them: the final norm's 1 + w (the final norm
// of a row of ones, whose mean square is 1, undone by the eps factor), and the largest
// |Δ| the base's layers add to probe rows: text rows spread over the vocabulary and
// circuit-like rows (±8 on every channel, mean square 64 as circuit residuals have)
// in one sequence from a fresh state. The base is reset afterwards.
sdk::Expected<BaseProfile> profile_base(sdk::BaseModel& base, sdk::TensorBackend& backend, const sdk::ModelInfo& info,
                                        std::int64_t text_rows) {
  const std::int64_t H = info.shapes.hidden_size;
  BaseProfile p;
  std::vector<float> ones(static_cast<std::size_t>(H), 1.0f);
  const std::int64_t one_shape[2] = {1, H};
  sdk::Handle<sdk::Tensor> t, y;
  QGPU_ASSIGN_OR_RETURN(t, backend.upload(view_of(ones.data(), sdk::DType::kF32, one_shape)));
  QGPU_ASSIGN_OR_RETURN(y, base.final_norm(*t));
  std::vector<float> scale(static_cast<std::size_t>(H));
  QGPU_RETURN_IF_ERROR(backend.download(*y, view_of(scale.data(), sdk::DType::kF32, one_shape)));
  const double undo = std::sqrt(1 + info.shapes.rms_norm_eps);
  for (float v : scale) p.final_scale.push_back(static_cast<double>(v) * undo);

  constexpr std::int64_t kText = 48, kCircuitLike = 16;
  const std::int64_t n = std::min(kText, text_rows);
  std::vector<std::int64_t> ids;
  for (std::int64_t i = 0; i < n; ++i) ids.push_back(i * text_rows / n);
  sdk::Handle<sdk::Tensor> text;
  QGPU_ASSIGN_OR_RETURN(text, base.embed(ids));
  std::vector<float> rows(static_cast<std::size_t>((n + kCircuitLike) * H));
  const std::int64_t text_shape[2] = {n, H};
  QGPU_RETURN_IF_ERROR(backend.download(*text, view_of(rows.data(), sdk::DType::kF32, text_shape)));
  std::uint64_t state = 0x9E3779B97F4A7C15ull;  // splitmix64: a fixed pattern of signs
  for (std::int64_t i = n * H; i < (n + kCircuitLike) * H; ++i) {
    state += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    rows[static_cast<std::size_t>(i)] = ((z ^ (z >> 31)) & 1) ? 8.0f : -8.0f;
  }
  const std::int64_t T = n + kCircuitLike, shape[2] = {T, H};
  sdk::Handle<sdk::Tensor> in, out;
  QGPU_ASSIGN_OR_RETURN(in, backend.upload(view_of(rows.data(), sdk::DType::kF32, shape)));
  base.reset();
  auto ran = base.run_layers(*in);
  base.reset();
  if (!ran) return ran.status();
  std::vector<float> after(rows.size());
  QGPU_RETURN_IF_ERROR(backend.download(**ran, view_of(after.data(), sdk::DType::kF32, shape)));
  p.perturbation.assign(static_cast<std::size_t>(H), 0.0);
  for (std::int64_t r = 0; r < T; ++r)
    for (std::int64_t c = 0; c < H; ++c) {
      const auto i = static_cast<std::size_t>(r * H + c);
      const double d = std::abs(static_cast<double>(after[i]) - rows[i]);
      auto& q = p.perturbation[static_cast<std::size_t>(c)];
      q = std::max(q, std::isfinite(d) ? d : std::numeric_limits<double>::infinity());
    }
  return p;
}

}  // namespace

weights::Layer merged_order(weights::Layer layer, const ChannelMap& map) {
  weights::GdnLayer& g = layer.gdn;
  for (weights::SparseMatrix* w :
       {&g.in_proj_qkv, &g.in_proj_z, &g.in_proj_b, &g.in_proj_a, &layer.mlp.gate, &layer.mlp.up})
    *w = map_columns(*w, map);
  g.out_proj = map_rows(g.out_proj, map);
  layer.mlp.down = map_rows(layer.mlp.down, map);
  return layer;
}

MergedModel::MergedModel(sdk::BaseModel& base, sdk::TensorBackend& backend) : base_(&base), backend_(&backend) {}
MergedModel::~MergedModel() = default;

sdk::Expected<SilenceCertificate> base_silence(sdk::BaseModel& base, sdk::TensorBackend& backend, std::int64_t hidden,
                                               std::int64_t rows, std::int64_t width, const MuteBounds& bounds) {
  // The embedding rows as the backend holds them, read through the base in chunks.
  std::vector<float> table(static_cast<std::size_t>(rows * hidden));
  constexpr std::int64_t kChunk = 4096;
  for (std::int64_t r0 = 0; r0 < rows; r0 += kChunk) {
    const std::int64_t n = std::min(kChunk, rows - r0);
    std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) ids[static_cast<std::size_t>(i)] = r0 + i;
    sdk::Handle<sdk::Tensor> t;
    QGPU_ASSIGN_OR_RETURN(t, base.embed(ids));
    const std::int64_t shape[2] = {n, hidden};
    QGPU_RETURN_IF_ERROR(backend.download(*t, view_of(table.data() + r0 * hidden, sdk::DType::kF32, shape)));
  }
  return find_mute_direction(table, rows, hidden, width, bounds);
}

std::int64_t MergedModel::merged_channel(std::int64_t c) const {
  return map_.merged(c);
}

std::vector<float> MergedModel::circuit_order(std::span<const float> merged_row) const {
  return map_.circuit_order(merged_row);
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
  const RecordRows& rec = in.records;
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

  // 1. The mute direction over the circuit's free channels, certified on every row that
  // can appear in text (read through the base's own embedding, in chunks).
  auto start = Clock::now();
  const std::int64_t text_rows = in.text_rows > 0 ? in.text_rows : info.vocab_size;
  if (text_rows > info.vocab_size)
    return sdk::invalid_argument("merge: " + std::to_string(text_rows) + " text rows, the base has " +
                                 std::to_string(info.vocab_size) + " embedding rows");
  m->free_.push_back(mute);
  for (int c : cc.allocation.free) m->free_.push_back(c);
  const sdk::DType dt = backend.dtype();
  const weights::DType wdt = weights_dtype(dt);
  m->dtype_ = wdt;
  std::vector<weights::Layer> circuit_layers = cc.layers;
  for (weights::Layer& l : circuit_layers)
    if (in.mute_window)
      l.gdn.in_proj_qkv = mute_window_channels(l.gdn.in_proj_qkv, l.gdn.conv1d, bs, mute, cc.target.mute_gain,
                                               m->cost_.window_channels);
  MuteBounds bounds;
  bounds.dtype = dt;
  bounds.terms = H;
  bounds.eps = bs.rms_norm_eps;
  for (const weights::Layer& l : circuit_layers)
    for (const weights::SparseMatrix* w :
         {&l.gdn.in_proj_qkv, &l.gdn.in_proj_z, &l.gdn.in_proj_b, &l.gdn.in_proj_a, &l.mlp.gate})
      bounds.circuit_terms = std::max(bounds.circuit_terms, muted_row_weight(*w, mute));
  bounds.circuit_terms *= std::sqrt(static_cast<double>(H));
  // At most kMuteWidth channels: each muted row carries one weight per channel of the direction.
  QGPU_ASSIGN_OR_RETURN(
      m->silence_,
      base_silence(base, backend, H, text_rows,
                   std::min<std::int64_t>(static_cast<std::int64_t>(m->free_.size()), kMuteWidth), bounds));
  m->cost_.search_seconds = seconds_since(start);
  const MuteDirection& direction = m->silence_.direction;

  // 2. The base's channels: final-norm scales and what its layers add on probe tokens.
  start = Clock::now();
  BaseProfile profile;
  m->final_scale_.assign(static_cast<std::size_t>(H), 1.0);
  m->profiled_ = in.profile_base && unemb.rows > 0;
  if (m->profiled_) {
    auto p = profile_base(base, backend, info, text_rows);
    if (!p) return p.status().with_context("merge: measuring the base's channels");
    profile = std::move(*p);
    m->final_scale_ = profile.final_scale;
  }
  m->cost_.profile_seconds = seconds_since(start);

  // 3. The channel map: free channels onto the direction's, the choice fields onto good channels.
  // The choice's columns, the most heavily weighted first (the rows' constant terms): it gets
  // the quietest base channel.
  std::map<std::int64_t, double> heaviest;
  for (std::size_t p = 0; p < unemb.col.size(); ++p)
    heaviest[unemb.col[p]] = std::max(heaviest[unemb.col[p]], std::abs(unemb.val[p]));
  std::vector<std::int64_t> choice;
  for (const auto& [c, w] : heaviest) choice.push_back(c);
  std::stable_sort(choice.begin(), choice.end(),
                   [&](std::int64_t a, std::int64_t b) { return heaviest[a] > heaviest[b]; });
  QGPU_ASSIGN_OR_RETURN(m->map_, plan_channels(H, m->free_, direction.channels, choice, profile, &m->placement_));

  // 4. Circuit layers: the mute spread over the direction (circuit order), then moved to the
  // merged channels and exported dense in the backend's dtype, or kept sparse for the host.
  start = Clock::now();
  std::vector<std::pair<int, double>> spread;
  for (std::size_t i = 0; i < direction.channels.size(); ++i)
    spread.emplace_back(m->free_[i], direction.gain * direction.weights[i]);
  auto upload = [&](void* data, sdk::DType dtype,
                    std::span<const std::int64_t> shape) -> sdk::Expected<const sdk::Tensor*> {
    sdk::Handle<sdk::Tensor> t;
    QGPU_ASSIGN_OR_RETURN(t, backend.upload(view_of(data, dtype, shape)));
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    m->cost_.uploaded_bytes += n * static_cast<std::int64_t>(sdk::dtype_size(backend.dtype()));
    m->tensors_.push_back(std::move(t));
    return m->tensors_.back().get();
  };
  const ChannelMap& map = m->map_;
  for (std::size_t i = 0; i < circuit_layers.size(); ++i) {
    weights::Layer l = std::move(circuit_layers[i]);
    weights::GdnLayer& g = l.gdn;
    for (weights::SparseMatrix* w : {&g.in_proj_qkv, &g.in_proj_z, &g.in_proj_b, &g.in_proj_a, &l.mlp.gate})
      *w = spread_mute(*w, mute, cc.target.mute_gain, spread);
    m->circuit_layers_.push_back(l);
    if (in.sparse_circuit) continue;  // run by the reference model: nothing to upload
    l = merged_order(l, map);
    std::map<std::string, const sdk::Tensor*> by_name;
    const auto index = static_cast<std::int64_t>(i);
    for (weights::DenseTensor& t : weights::export_layer(l, bs, index, wdt)) {
      void* data = wdt == weights::DType::kF32 ? static_cast<void*>(t.f32.data()) : static_cast<void*>(t.bf16.data());
      const sdk::Tensor* up = nullptr;
      QGPU_ASSIGN_OR_RETURN(up, upload(data, dt, t.shape));
      by_name[t.name] = up;
    }
    auto get = [&](const std::string& suffix) -> const sdk::Tensor* {
      auto it = by_name.find(weights::layer_tensor_name(index, suffix));
      return it == by_name.end() ? nullptr : it->second;
    };
    Layer layer;
    layer.input_norm = get("input_layernorm.weight");
    layer.post_norm = get("post_attention_layernorm.weight");
    layer.gdn = sdk::delta_net_weights(get);
    layer.mlp = sdk::mlp_weights(get);
    for (const sdk::Tensor* t : {layer.input_norm, layer.post_norm, layer.gdn.in_proj_qkv, layer.gdn.out_proj,
                                 layer.mlp.gate_proj, layer.mlp.down_proj})
      if (t == nullptr)
        return sdk::internal_error("merge: weights::export_layer gave an incomplete layer " + std::to_string(i));
    m->layers_.push_back(std::move(layer));
  }

  if (in.sparse_circuit) m->reference_ = std::make_unique<weights::ReferenceModel>(m->circuit_layers_, bs, wdt);
  // The model's own sequence: the base's own and one state per dense circuit layer.
  m->own_.reset(new Sequence);
  m->own_->owner_ = m.get();
  for (std::size_t i = 0; i < m->layers_.size(); ++i) {
    sdk::Handle<sdk::LayerState> st;
    QGPU_ASSIGN_OR_RETURN(st, backend.create_state());
    m->own_->circuit_.push_back(std::move(st));
  }
  m->active_ = m->own_.get();

  // 5. Record rows in the merged channel order. The unembedding is divided by the final
  // norm's 1 + w on each channel, so the record logits read the fields as the circuit wrote
  // them whatever the base's scales; the host keeps it sparse (the choice guard, and the
  // sparse path's logits), the dense path also uploads it.
  m->record_embedding_ = rec.embedding;
  SparseHead& sh = m->sparse_head_;
  sh.row_ptr.assign(unemb.row_ptr.begin(), unemb.row_ptr.end());
  for (std::size_t p = 0; p < unemb.val.size(); ++p) {
    const std::int64_t c = map.merged(unemb.col[p]);
    sh.col.push_back(static_cast<std::int32_t>(c));
    sh.val.push_back(static_cast<float>(unemb.val[p]));
    sh.scaled.push_back(static_cast<float>(unemb.val[p] / m->final_scale_[static_cast<std::size_t>(c)]));
  }
  // The drafts' choice (speculation, MergedModel::draft): the record rows as the circuit built them,
  // indexed for weights::RowChoice here rather than in the first launch's generation.
  if (in.sparse_circuit && m->profiled_ && unemb.rows > 0) {
    weights::SparseMatrix u;
    u.rows = unemb.rows;
    u.cols = H;
    u.row_ptr = sh.row_ptr;
    u.col = sh.col;
    u.val.assign(sh.val.begin(), sh.val.end());
    m->circuit_head_ = std::make_unique<weights::RowChoice>(u);
  }
  if (!in.sparse_circuit) {
    if (records > 0) {
      std::vector<float> rows(static_cast<std::size_t>(records * H));
      for (std::int64_t r = 0; r < records; ++r) {
        auto row = m->record_row(r);
        if (!row) return row.status();
        std::copy(row->begin(), row->end(), rows.begin() + r * H);
      }
      const std::int64_t shape[2] = {records, H};
      QGPU_ASSIGN_OR_RETURN(m->record_table_, backend.upload(view_of(rows.data(), sdk::DType::kF32, shape)));
      m->cost_.uploaded_bytes += records * H * static_cast<std::int64_t>(sdk::dtype_size(dt));
    }
    if (m->unembedding_rows_ > 0) {
      std::vector<float> rows(static_cast<std::size_t>(m->unembedding_rows_ * H), 0.0f);
      for (std::int64_t r = 0; r < unemb.rows; ++r)
        for (std::int64_t p = unemb.row_ptr[r]; p < unemb.row_ptr[r + 1]; ++p)
          rows[static_cast<std::size_t>(r * H + sh.col[static_cast<std::size_t>(p)])] =
              sh.scaled[static_cast<std::size_t>(p)];
      const std::int64_t shape[2] = {m->unembedding_rows_, H};
      QGPU_ASSIGN_OR_RETURN(m->record_head_, backend.upload(view_of(rows.data(), sdk::DType::kF32, shape)));
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
  for (int c : free_)  // the mute channel first
    if ((*row)[static_cast<std::size_t>(c)] != 0)
      return sdk::invalid_argument("merge: record row " + std::to_string(r) + " is " +
                                   num((*row)[static_cast<std::size_t>(c)]) + " on the circuit's " +
                                   (c == mute_ ? "mute channel " : "free channel ") + std::to_string(c) +
                                   " (must be exactly 0)");
  // In the merged channel order, in the backend's dtype (an uploaded table rounds the same way).
  std::vector<float> out(static_cast<std::size_t>(H));
  for (std::int64_t c = 0; c < H; ++c)
    out[static_cast<std::size_t>(merged_channel(c))] = weights::round_to(dtype_, (*row)[static_cast<std::size_t>(c)]);
  return out;
}

void RecordTables::tie() {
  unembedding = detail::sparse_rows(embedding, records(), hidden);
}

RecordRows RecordTables::rows() const {
  RecordRows out;
  out.records = records();
  out.embedding = [this](std::int64_t r) -> sdk::Expected<std::vector<float>> {
    const auto first = embedding.begin() + r * hidden;
    return std::vector<float>(first, first + hidden);
  };
  out.unembedding = &unembedding;
  return out;
}

}  // namespace qgpu::core
