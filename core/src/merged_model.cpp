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
  QGPU_MERGE_ASSIGN(t, backend.upload(view_of(ones.data(), sdk::DType::kF32, one_shape)));
  QGPU_MERGE_ASSIGN(y, base.final_norm(*t));
  std::vector<float> scale(static_cast<std::size_t>(H));
  QGPU_RETURN_IF_ERROR(backend.download(*y, view_of(scale.data(), sdk::DType::kF32, one_shape)));
  const double undo = std::sqrt(1 + info.shapes.rms_norm_eps);
  for (float v : scale) p.final_scale.push_back(static_cast<double>(v) * undo);

  constexpr std::int64_t kText = 48, kCircuitLike = 16;
  const std::int64_t n = std::min(kText, text_rows);
  std::vector<std::int64_t> ids;
  for (std::int64_t i = 0; i < n; ++i) ids.push_back(i * text_rows / n);
  sdk::Handle<sdk::Tensor> text;
  QGPU_MERGE_ASSIGN(text, base.embed(ids));
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
  QGPU_MERGE_ASSIGN(in, backend.upload(view_of(rows.data(), sdk::DType::kF32, shape)));
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

MergedModel::MergedModel(sdk::BaseModel& base, sdk::TensorBackend& backend) : base_(&base), backend_(&backend) {}
MergedModel::~MergedModel() = default;

void MergedModel::SequenceDeleter::operator()(Sequence* s) const {
  delete s;
}

sdk::Expected<MergedModel::SequenceHandle> MergedModel::create_sequence() {
  SequenceHandle s(new Sequence);
  s->owner_ = this;
  QGPU_MERGE_ASSIGN(s->base_, base_->create_sequence());
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    sdk::Handle<sdk::LayerState> st;
    QGPU_MERGE_ASSIGN(st, backend_->create_state());
    s->circuit_.push_back(std::move(st));
  }
  return s;
}

sdk::Status MergedModel::copy_sequence(const Sequence& from, Sequence& to) {
  if (from.owner_ != this || to.owner_ != this)
    return sdk::invalid_argument("copy_sequence: a sequence of another merged model");
  if (&from == &to) return sdk::Status::ok();
  if (!from.base_ || !to.base_)
    return sdk::invalid_argument("copy_sequence: the merged model's own sequence is not copied (create sequences)");
  QGPU_RETURN_IF_ERROR(base_->copy_sequence(*from.base_, *to.base_));
  for (std::size_t i = 0; i < layers_.size(); ++i)
    QGPU_RETURN_IF_ERROR(backend_->copy_state(*from.circuit_[i], *to.circuit_[i]));
  if (reference_) {
    weights::ReferenceModel::State state = &from == active_ ? reference_->state() : from.reference_;
    if (&to == active_)
      reference_->swap_state(state);  // non-empty: the model takes the copy
    else
      to.reference_ = std::move(state);
  }
  to.tokens_ = from.tokens_;
  return sdk::Status::ok();
}

sdk::Status MergedModel::use(Sequence* s) {
  Sequence* next = s != nullptr ? s : own_.get();
  if (next->owner_ != this) return sdk::invalid_argument("use: a sequence of another merged model");
  if (next == active_) return sdk::Status::ok();
  if (reference_) {                               // the sparse path's state lives in the reference model while in use
    reference_->swap_state(active_->reference_);  // the old one out (the model starts fresh)
    if (!next->reference_.empty()) reference_->swap_state(next->reference_);
    next->reference_.clear();
  }
  active_ = next;
  return sdk::Status::ok();
}

std::int64_t MergedModel::tokens() const {
  return active_->tokens_;
}

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
    QGPU_MERGE_ASSIGN(t, base.embed(ids));
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
  QGPU_MERGE_ASSIGN(
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
  QGPU_MERGE_ASSIGN(m->map_, plan_channels(H, m->free_, direction.channels, choice, profile, &m->placement_));

  // 4. Circuit layers: the mute spread over the direction (circuit order), then moved to the
  // merged channels and exported dense in the backend's dtype, or kept sparse for the host.
  start = Clock::now();
  std::vector<std::pair<int, double>> spread;
  for (std::size_t i = 0; i < direction.channels.size(); ++i)
    spread.emplace_back(m->free_[i], direction.gain * direction.weights[i]);
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
  const ChannelMap& map = m->map_;
  for (std::size_t i = 0; i < circuit_layers.size(); ++i) {
    weights::Layer l = std::move(circuit_layers[i]);
    weights::GdnLayer& g = l.gdn;
    for (weights::SparseMatrix* w : {&g.in_proj_qkv, &g.in_proj_z, &g.in_proj_b, &g.in_proj_a, &l.mlp.gate})
      *w = spread_mute(*w, mute, cc.target.mute_gain, spread);
    m->circuit_layers_.push_back(l);
    if (in.sparse_circuit) continue;  // run by the reference model: nothing to upload
    for (weights::SparseMatrix* w : {&g.in_proj_qkv, &g.in_proj_z, &g.in_proj_b, &g.in_proj_a, &l.mlp.gate, &l.mlp.up})
      *w = map_columns(*w, map);
    g.out_proj = map_rows(g.out_proj, map);
    l.mlp.down = map_rows(l.mlp.down, map);
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
    m->layers_.push_back(std::move(layer));
  }

  if (in.sparse_circuit) m->reference_ = std::make_unique<weights::ReferenceModel>(m->circuit_layers_, bs, wdt);
  // The model's own sequence: the base's own and one state per dense circuit layer.
  m->own_.reset(new Sequence);
  m->own_->owner_ = m.get();
  for (std::size_t i = 0; i < m->layers_.size(); ++i) {
    sdk::Handle<sdk::LayerState> st;
    QGPU_MERGE_ASSIGN(st, backend.create_state());
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
  if (!in.sparse_circuit) {
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
          rows[static_cast<std::size_t>(r * H + sh.col[static_cast<std::size_t>(p)])] =
              sh.scaled[static_cast<std::size_t>(p)];
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

sdk::Expected<sdk::Handle<sdk::Tensor>> MergedModel::run_reference(std::vector<float> rows, std::int64_t T) {
  const std::int64_t H = shapes_.hidden_size;
  for (std::int64_t t = 0; t < T; ++t) {  // in the circuit's channel order, and back
    const std::span<float> row(rows.data() + t * H, static_cast<std::size_t>(H));
    const std::vector<float> y = map_.merged_order(reference_->step(map_.circuit_order(row)));
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
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    Layer& l = layers_[i];
    QGPU_MERGE_ASSIGN(x, be.rms_norm(*h, *l.input_norm, eps));
    // The circuit is exact under the token-by-token recurrence (backend.Circuits.*), so every run uses it.
    QGPU_MERGE_ASSIGN(mixed, be.gated_delta_net(*x, l.gdn, shape, *active_->circuit_[i], sdk::DeltaRule::kRecurrent));
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
    const bool last = end == T;
    const bool with_logits = options.all_logits || last;
    // The rows that get logits, after the circuit: the choice guard reads them.
    std::vector<float> circ;
    if (with_logits && unembedding_rows_ > 0) {
      sdk::Handle<sdk::Tensor> sel;
      const sdk::Tensor* src = h.get();
      if (!options.all_logits) {
        QGPU_MERGE_ASSIGN(sel, be.rows(*h, n - 1, n));
        src = sel.get();
      }
      const std::int64_t shape[2] = {src->dim(0), H};
      circ.resize(static_cast<std::size_t>(shape[0] * H));
      QGPU_RETURN_IF_ERROR(be.download(*src, view_of(circ.data(), sdk::DType::kF32, shape)));
    }
    if (active_->base_)
      QGPU_MERGE_ASSIGN(h, base_->run_layers(*active_->base_, *h));
    else
      QGPU_MERGE_ASSIGN(h, base_->run_layers(*h));
    if (with_logits) {
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
      if (unembedding_rows_ > 0) {  // the record rows' logits (and the choice guard's, when profiled)
        const std::int64_t x_shape[2] = {r, H};
        std::vector<float> xs(static_cast<std::size_t>(r * H)), hs(static_cast<std::size_t>(r * H));
        QGPU_RETURN_IF_ERROR(be.download(*h, view_of(hs.data(), sdk::DType::kF32, x_shape)));
        if (reference_) {
          QGPU_RETURN_IF_ERROR(be.download(*x, view_of(xs.data(), sdk::DType::kF32, x_shape)));
        } else {
          QGPU_MERGE_ASSIGN(logits, be.linear(*x, *record_head_));
          part.assign(static_cast<std::size_t>(r * unembedding_rows_), 0.0f);
          const std::int64_t rec_shape[2] = {r, unembedding_rows_};
          QGPU_RETURN_IF_ERROR(be.download(*logits, view_of(part.data(), sdk::DType::kF32, rec_shape)));
        }
        if (profiled_) out.circuit_margin.resize(static_cast<std::size_t>(out.rows), 0.0);
        out.deviation.resize(static_cast<std::size_t>(out.rows), 0.0);
        out.circuit_choice.resize(static_cast<std::size_t>(out.rows), -1);
        out.model_choice.resize(static_cast<std::size_t>(out.rows), -1);
        const double eps = shapes_.rms_norm_eps;
        for (std::int64_t i = 0; i < r; ++i) {
          const float* xi = xs.data() + i * H;
          const float* ci = circ.data() + i * H;
          double sq = 0;
          for (std::int64_t c = 0; c < H; ++c)
            sq +=
                static_cast<double>(hs[static_cast<std::size_t>(i * H + c)]) * hs[static_cast<std::size_t>(i * H + c)];
          const double scale = 1 / std::sqrt(sq / static_cast<double>(H) + eps);  // the final norm's, in double
          float* out_row = out.logits.data() + (row0 + i) * out.columns + base_rows_;
          double best = -std::numeric_limits<double>::infinity(), second = best, deviation = 0;
          double model_best = best;
          std::int64_t choice = -1, model_choice = -1;
          for (std::int64_t k = 0; k < unembedding_rows_; ++k) {
            double model = 0, own = 0;
            for (std::int64_t p = sparse_head_.row_ptr[k]; p < sparse_head_.row_ptr[k + 1]; ++p) {
              const std::int32_t c = sparse_head_.col[p];
              if (reference_) model += static_cast<double>(sparse_head_.scaled[p]) * xi[c];
              own += static_cast<double>(sparse_head_.val[p]) * ci[c];
            }
            // Sparse: x·rowᵀ on the host for each record row, in double, rounded once.
            if (reference_) out_row[k] = static_cast<float>(model);
            own *= scale;
            if (own > best) {
              second = best, best = own, choice = k;
            } else if (own > second) {
              second = own;
            }
            const double logit = reference_ ? out_row[k] : part[static_cast<std::size_t>(i * unembedding_rows_ + k)];
            deviation = std::max(deviation, std::abs(logit - own));
            if (logit > model_best) model_best = logit, model_choice = k;
          }
          if (!reference_) std::copy_n(part.begin() + i * unembedding_rows_, unembedding_rows_, out_row);
          if (!profiled_) continue;  // uncompensated logits: no guard
          const auto at = static_cast<std::size_t>(row0 + i);
          out.circuit_margin[at] = best - second;
          out.deviation[at] = deviation;
          out.circuit_choice[at] = choice;
          out.model_choice[at] = model_choice;
        }
      }
    }
    active_->tokens_ += n;
    begin = end;
  }
  return out;
}

sdk::Status MergedModel::reset() {
  if (active_->base_)
    QGPU_RETURN_IF_ERROR(base_->truncate_sequence(*active_->base_, 0));
  else
    base_->reset();
  for (auto& st : active_->circuit_) st->reset();
  if (reference_) reference_->reset();
  active_->tokens_ = 0;
  return sdk::Status::ok();
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
    const sdk::LayerState& state = *active_->circuit_[i];
    if (state.tokens() > 0) {  // a layer no token ran through has no state (read_ram says so)
      states_[i].assign(static_cast<std::size_t>(nv * dk * dv), 0.0f);
      const std::int64_t shape[3] = {nv, dk, dv};
      QGPU_RETURN_IF_ERROR(backend_->download_state(state, view_of(states_[i].data(), sdk::DType::kF32, shape))
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
  QGPU_RETURN_IF_ERROR(merged_->reset());
  circuit_ = &circuit;
  guard_ratio_ = 0;
  guarded_ = 0;
  return sdk::Status::ok();
}

sdk::Expected<std::vector<float>> MergeHost::forward(std::span<const std::int64_t> ids) {
  if (!merged_) return sdk::internal_error("forward() before merge()");
  auto f = merged_->forward(ids);
  if (!f) return f.status();
  // The guard, at a record position (the next token is a record; text positions choose text).
  if (!f->circuit_margin.empty() && ids.back() >= merged_->base_rows()) {
    ++guarded_;
    const double margin = f->circuit_margin.back(), deviation = f->deviation.back();
    guard_ratio_ =
        std::max(guard_ratio_, margin > 0 ? deviation / (margin / 2) : std::numeric_limits<double>::infinity());
    if (f->model_choice.back() != f->circuit_choice.back())
      return sdk::internal_error(
          "merge: the base's layers changed the next record: the model's record logits favour record row " +
          std::to_string(f->model_choice.back()) + ", the circuit's fields choose row " +
          std::to_string(f->circuit_choice.back()) + " (the base moved the record logits by up to " + num(deviation) +
          " against the circuit's own margin " + num(margin) + "; " + merged_->placement().to_string() +
          "), so the launch stops here");
  }
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
  std::snprintf(line, sizeof line,
                "%lld circuit layers (%s) + the base's %lld, %lld record rows; %.1f GiB uploaded (%s); search %.1f s, "
                "profile %.1f s",
                static_cast<long long>(c.circuit_layers), sparse_ ? "sparse, on the host" : "dense, on the backend",
                static_cast<long long>(info_.num_layers), static_cast<long long>(c.records),
                static_cast<double>(c.uploaded_bytes) / (1 << 30), dtype().c_str(), c.search_seconds,
                c.profile_seconds);
  return std::string(line) + "\nsilence: " + merged_->silence().to_string() +
         "\nchoice: " + merged_->placement().to_string();
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
  QGPU_RETURN_IF_ERROR(merged.reset());
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
