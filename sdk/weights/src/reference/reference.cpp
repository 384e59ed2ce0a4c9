#include "qgpu/weights/reference.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <sstream>
#include <utility>

#include <immintrin.h>

#include "lanes.h"
#include "qgpu/weights/two_threads.h"
#include "sliced.h"

namespace qgpu::weights {

std::vector<float> rms_norm_zc(const std::vector<float>& x, const std::vector<float>& w, DType dtype, float eps) {
  float ss = 0;
  for (float v : x) ss += v * v;
  float mean = ss / static_cast<float>(x.size());
  float r = rsqrt(mean + eps);
  std::vector<float> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    float scale = w.empty() ? 1.0f : 1.0f + w[i];
    y[i] = round_to(dtype, (x[i] * r) * scale);
  }
  return y;
}

std::vector<float> linear(const SparseMatrix& w, const std::vector<float>& x, DType dtype) {
  std::vector<float> y(static_cast<std::size_t>(w.rows), 0.0f);
  for (std::int64_t r = 0; r < w.rows; ++r) {
    float acc = 0;
    for (std::int64_t k = w.row_ptr[r]; k < w.row_ptr[r + 1]; ++k)
      acc += round_to(dtype, static_cast<float>(w.val[k])) * x[w.col[k]];
    y[r] = round_to(dtype, acc);
  }
  return y;
}

float gated_norm_one(std::int64_t dk, std::int64_t dv, DType dtype) {
  // Kernel output for a one-hot query on a row holding U on a quarter of the channels.
  float q0 = 1.0f / std::sqrt(static_cast<float>(dk));
  std::vector<float> o(static_cast<std::size_t>(dv), 0.0f);
  for (std::int64_t j = 0; j < dv / 2; j += 2) o[j] = round_to(dtype, static_cast<float>(kValueUnit) * q0);
  float ss = 0;
  for (float v : o) ss += v * v;
  float r = rsqrt(ss / static_cast<float>(dv) + kEps);
  return round_to(dtype, o[0] * r);
}

float calibrated_norm_weight(std::int64_t dk, std::int64_t dv, DType dtype) {
  float one = gated_norm_one(dk, dv, dtype);
  float w = round_to(dtype, 1.0f / one);
  for (float cand : {w, std::nextafter(w, 0.0f), std::nextafter(w, 4.0f)}) {
    if (round_to(dtype, cand) != cand) continue;
    if (round_to(dtype, cand * one) == 1.0f) return cand;
  }
  return std::numeric_limits<float>::quiet_NaN();  // compile() turns this into an error
}

// Matrices whose products a layer computes at one point, each from its input into its output
// (pointers into the plan and the scratch), and their slices cut in two (reference::split_in_two).
struct ReferenceModel::Products {
  std::vector<const reference::SlicedMatrix*> matrices;
  std::vector<const float*> inputs;  // nullptr: the normed residual (normed_, which step() may resize)
  std::vector<float*> outputs;
  std::vector<std::array<reference::SliceRange, 2>> parts;
  bool shared = false;  // part 1 has work
};

namespace {
// Products smaller than this many steps (a couple of microseconds) run on one thread: measured, a
// helper given parts of 256 steps or more made the layers slower, not faster.
constexpr std::int64_t kSharedSteps = 1024;
}  // namespace

// One layer, prepared: its matrices sliced, and what can be nonzero.
struct ReferenceModel::Plan {
  reference::SlicedMatrix qkv, z, b, a, o, gate, up, down;
  // The products in the order the layer computes them: the input projections (qkv, z, b, a: the
  // normed residual), the output projection, the MLP's gate and up (the normed residual), its down.
  Products in, out, gate_up, mlp_down;
  std::vector<std::int32_t> conv_channels;   // channels with a nonzero conv tap, ascending
  std::vector<std::int32_t> qk_channels;     // those of them that are q or k channels
  std::vector<std::int32_t> qk_key_head;     // the same: each one's key head
  std::vector<std::pair<std::int32_t, std::int32_t>> qk_runs;  // [begin, end) of qk_channels: one key head's
  // Channels whose only nonzero tap is the current token's, with that tap; their windows are never read.
  std::vector<std::int32_t> direct;
  std::vector<float> direct_tap;
  // The other channels (a tap on an earlier token) with their taps [kernel], rounded to the dtype.
  std::vector<std::int32_t> windowed;
  std::vector<float> windowed_taps;
  std::vector<char> windowed_tap_used;       // the same: the tap is nonzero
  std::vector<std::int32_t> heads;           // value heads with any weight, ascending
  std::vector<std::int32_t> neurons;         // MLP neurons with gate or up weights, ascending
  std::vector<float> a_log, dt_bias;         // per value head, rounded to the dtype
  std::vector<float> decay_at_rest;          // per value head: its decay where the a projection is 0
  float norm_weight = 1;                     // the gated norm's weight, rounded to the dtype
  // What a layer writes in the scratch, as runs [begin, end): put back to 0 after the layer.
  struct {
    std::vector<std::pair<std::int32_t, std::int32_t>> projected, activated, z, b, a, heads, gate, up, neurons;
  } written;
};

// Every layer's projections, activations and outputs, one layer at a time. Between layers every
// float is 0: a layer writes only where it can be nonzero and puts back the zeros it changed, so
// a row without weights reads 0 in every layer, and the scratch stays one layer's size (it stays
// in cache, where per-layer copies would not).
struct ReferenceModel::Scratch {
  std::vector<float> projected, activated, z_out, b_out, a_out, heads_out, attention_out;
  std::vector<float> gate_out, up_out, product, mlp_out;
  std::vector<float> kv, read;  // one head's delta-rule correction and read-out [dv]
};

namespace {
// Ascending indices as runs [begin, end), each index standing for `width` floats.
std::vector<std::pair<std::int32_t, std::int32_t>> runs(const std::vector<std::int32_t>& sorted, std::int32_t width = 1) {
  std::vector<std::pair<std::int32_t, std::int32_t>> out;
  for (const std::int32_t i : sorted) {
    if (!out.empty() && out.back().second == i * width)
      out.back().second += width;
    else
      out.emplace_back(i * width, i * width + width);
  }
  return out;
}
void put_back_zeros(std::vector<float>& v, const std::vector<std::pair<std::int32_t, std::int32_t>>& written) {
  for (const auto& [begin, end] : written) std::fill(v.begin() + begin, v.begin() + end, 0.0f);
}

std::vector<float> zeros(std::int64_t n) {
  return std::vector<float>(static_cast<std::size_t>(n), 0.0f);
}

// Gated DeltaNet's decay: exp(-exp(A_log) · softplus(a + dt_bias)), given a + dt_bias.
float decay(float a_log, float a_plus_bias) {
  return std::exp(-std::exp(a_log) * softplus(a_plus_bias));
}

__attribute__((target("avx512f"))) void nonzero_elements_avx512(const float* x, std::int64_t n,
                                                                 std::vector<std::pair<std::int64_t, float>>& out) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    unsigned mask = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), _mm512_setzero_ps(), _CMP_NEQ_UQ);
    for (; mask != 0; mask &= mask - 1) {
      const std::int64_t at = i + __builtin_ctz(mask);
      out.emplace_back(at, x[at]);
    }
  }
  for (; i < n; ++i)
    if (x[i] != 0) out.emplace_back(i, x[i]);
}

// x's nonzero elements [0, n) as (index, value), in order.
void nonzero_elements(const float* x, std::int64_t n, std::vector<std::pair<std::int64_t, float>>& out) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  out.clear();
  if (avx512) {
    nonzero_elements_avx512(x, n, out);
    return;
  }
  for (std::int64_t i = 0; i < n; ++i)
    if (x[i] != 0) out.emplace_back(i, x[i]);
}
}  // namespace

ReferenceModel::ReferenceModel(const std::vector<Layer>& layers, const sdk::LayerShapes& shapes, DType dtype,
                               int threads)
    : layers_(layers), shapes_(shapes), dtype_(dtype) {
  // rms_norm_eps of the base (the RMSNorms and the gated norm); the q/k l2norm eps is HF's fixed 1e-6.
  eps_ = shapes.rms_norm_eps > 0 ? static_cast<float>(shapes.rms_norm_eps) : kEps;
  const std::int64_t nk = shapes.linear_num_key_heads, nv = shapes.linear_num_value_heads;
  const std::int64_t dk = shapes.linear_key_head_dim, dv = shapes.linear_value_head_dim;
  const std::int64_t kern = shapes.linear_conv_kernel, kq = nk * dk, c = 2 * kq + nv * dv;
  const std::int64_t hidden = shapes.hidden_size, inter = shapes.intermediate_size;
  plans_.reserve(layers_.size());
  for (const Layer& l : layers_) {
    Plan& p = plans_.emplace_back();
    p.qkv = reference::slice(l.gdn.in_proj_qkv, dtype);
    p.z = reference::slice(l.gdn.in_proj_z, dtype);
    p.b = reference::slice(l.gdn.in_proj_b, dtype);
    p.a = reference::slice(l.gdn.in_proj_a, dtype);
    p.o = reference::slice(l.gdn.out_proj, dtype);
    p.gate = reference::slice(l.mlp.gate, dtype);
    p.up = reference::slice(l.mlp.up, dtype);
    p.down = reference::slice(l.mlp.down, dtype);
    // Channels and heads without weights compute exact zeros: skipping them changes no bit.
    std::vector<char> heads(static_cast<std::size_t>(nv), 0);
    auto mark = [&](std::int64_t h) { heads[static_cast<std::size_t>(h)] = 1; };
    for (std::int64_t ch = 0; ch < c; ++ch) {
      bool any = false;
      for (std::int64_t j = 0; j < kern; ++j) any = any || l.gdn.conv1d[static_cast<std::size_t>(ch * kern + j)] != 0;
      if (!any) continue;
      p.conv_channels.push_back(static_cast<std::int32_t>(ch));
      if (ch < 2 * kq) {
        p.qk_channels.push_back(static_cast<std::int32_t>(ch));
        p.qk_key_head.push_back(static_cast<std::int32_t>((ch % kq) / dk));
      }
      const double* taps = &l.gdn.conv1d[static_cast<std::size_t>(ch * kern)];
      if (std::all_of(taps, taps + kern - 1, [](double w) { return w == 0; })) {
        p.direct.push_back(static_cast<std::int32_t>(ch));
        p.direct_tap.push_back(round_to(dtype, static_cast<float>(taps[kern - 1])));
      } else {
        p.windowed.push_back(static_cast<std::int32_t>(ch));
        for (std::int64_t j = 0; j < kern; ++j) {
          p.windowed_taps.push_back(round_to(dtype, static_cast<float>(taps[j])));
          p.windowed_tap_used.push_back(taps[j] != 0);
        }
      }
      if (ch < 2 * kq) {
        const std::int64_t key_head = (ch % kq) / dk;
        for (std::int64_t t = 0; t < nv / nk; ++t) mark(key_head * (nv / nk) + t);
      } else {
        mark((ch - 2 * kq) / dv);
      }
    }
    for (std::int64_t h = 0; h < nv; ++h) {
      if (l.gdn.in_proj_b.row_ptr[h] != l.gdn.in_proj_b.row_ptr[h + 1]) mark(h);
      if (l.gdn.a_log[h] != 0) mark(h);
      for (std::int64_t j = 0; j < dv; ++j)
        if (l.gdn.in_proj_z.row_ptr[h * dv + j] != l.gdn.in_proj_z.row_ptr[h * dv + j + 1]) mark(h);
      if (heads[static_cast<std::size_t>(h)]) p.heads.push_back(static_cast<std::int32_t>(h));
      p.a_log.push_back(round_to(dtype, static_cast<float>(l.gdn.a_log[h])));
      p.dt_bias.push_back(round_to(dtype, static_cast<float>(l.gdn.dt_bias[h])));
      p.decay_at_rest.push_back(decay(p.a_log.back(), 0.0f + p.dt_bias.back()));
    }
    for (std::size_t n = 0; n < p.qk_channels.size(); ++n)
      if (n == 0 || p.qk_key_head[n] != p.qk_key_head[n - 1])
        p.qk_runs.emplace_back(static_cast<std::int32_t>(n), static_cast<std::int32_t>(n + 1));
      else
        p.qk_runs.back().second = static_cast<std::int32_t>(n + 1);
    p.written.projected = runs(p.qkv.nonempty);
    p.written.activated = runs(p.conv_channels);
    p.written.z = runs(p.z.nonempty);
    p.written.b = runs(p.b.nonempty);
    p.written.a = runs(p.a.nonempty);
    p.written.gate = runs(p.gate.nonempty);
    p.written.up = runs(p.up.nonempty);
    std::set_union(p.gate.nonempty.begin(), p.gate.nonempty.end(), p.up.nonempty.begin(), p.up.nonempty.end(),
                   std::back_inserter(p.neurons));
    p.written.neurons = runs(p.neurons);
    p.written.heads = runs(p.heads, static_cast<std::int32_t>(dv));
    p.norm_weight = round_to(dtype, static_cast<float>(dtype == DType::kBF16 ? l.gdn.norm_weight_bf16
                                                                             : l.gdn.norm_weight_f32));
  }
  scratch_ = std::make_unique<Scratch>();
  Scratch& t = *scratch_;
  t.projected = zeros(c);
  t.activated = zeros(c);
  t.z_out = zeros(nv * dv);
  t.b_out = zeros(nv);
  t.a_out = zeros(nv);
  t.heads_out = zeros(nv * dv + 1);  // + the padding's column
  t.attention_out = zeros(hidden);
  t.gate_out = zeros(inter);
  t.up_out = zeros(inter);
  t.product = zeros(inter + 1);
  t.mlp_out = zeros(hidden);
  t.kv = zeros(dv);
  t.read = zeros(dv);
  residual_ = zeros(hidden);
  normed_ = zeros(hidden + 1);
  // The products' inputs and outputs are in the scratch, which keeps its storage.
  using Product = std::pair<const reference::SlicedMatrix*, std::pair<float*, float*>>;  // matrix, (input, output)
  auto products = [&](Products& to, const std::vector<Product>& list) {
    for (const auto& [m, io] : list) {
      to.matrices.push_back(m);
      to.inputs.push_back(io.first);
      to.outputs.push_back(io.second);
    }
    to.parts = reference::split_in_two(to.matrices, kSharedSteps);
    to.shared = std::any_of(to.parts.begin(), to.parts.end(), [](const auto& p) { return !p[1].empty(); });
  };
  float* const normed = nullptr;
  for (Plan& p : plans_) {
    products(p.in, {{&p.qkv, {normed, t.projected.data()}},
                    {&p.z, {normed, t.z_out.data()}},
                    {&p.b, {normed, t.b_out.data()}},
                    {&p.a, {normed, t.a_out.data()}}});
    products(p.out, {{&p.o, {t.heads_out.data(), t.attention_out.data()}}});
    products(p.gate_up, {{&p.gate, {normed, t.gate_out.data()}}, {&p.up, {normed, t.up_out.data()}}});
    products(p.mlp_down, {{&p.down, {t.product.data(), t.mlp_out.data()}}});
  }
  if (threads >= 2) threads_ = std::make_unique<TwoThreads>();
  reset();
}

void ReferenceModel::multiply(const Products& products) {
  auto part = [&](int j) {
    for (std::size_t k = 0; k < products.matrices.size(); ++k)
      if (!products.parts[k][static_cast<std::size_t>(j)].empty())
        reference::multiply(*products.matrices[k], products.parts[k][static_cast<std::size_t>(j)],
                            products.inputs[k] != nullptr ? products.inputs[k] : normed_.data(), products.outputs[k],
                            dtype_);
  };
  if (threads_ && products.shared) {
    threads_->run(part);
    return;
  }
  part(0);
  part(1);
}

ReferenceModel::ReferenceModel(ReferenceModel&&) noexcept = default;
ReferenceModel::~ReferenceModel() = default;

void ReferenceModel::swap_state(State& other) {
  if (!other.empty()) {
    std::swap(state_, other);
    return;
  }
  other = std::move(state_);
  state_.clear();
  reset_state();
}

void ReferenceModel::reset() {
  reset_state();
  const double inf = std::numeric_limits<double>::infinity();
  margins_.assign(layers_.size(), LayerMargin{inf, "", inf, "", {}, {}});
  for (LayerMargin& m : margins_) {
    m.mlp_neuron_min.assign(static_cast<std::size_t>(shapes_.intermediate_size), inf);
    m.gdn_head_min.assign(static_cast<std::size_t>(shapes_.linear_num_value_heads), inf);
  }
}

void ReferenceModel::reset_state() {
  const std::size_t c = static_cast<std::size_t>(2 * shapes_.linear_num_key_heads * shapes_.linear_key_head_dim +
                                                 shapes_.linear_num_value_heads * shapes_.linear_value_head_dim);
  const std::size_t k1 = static_cast<std::size_t>(shapes_.linear_conv_kernel - 1);
  const std::size_t s = static_cast<std::size_t>(shapes_.linear_num_value_heads * shapes_.linear_key_head_dim *
                                                 shapes_.linear_value_head_dim);
  state_.assign(layers_.size(), LayerState{std::vector<float>(c * k1, 0.0f), std::vector<float>(s, 0.0f)});
}

namespace {
template <typename Name>
void note(double& best, std::string& where, float v, Name&& what, double* own = nullptr) {
  double a = std::fabs(static_cast<double>(v));
  if (a == 0) return;
  if (own && a < *own) *own = a;
  if (a < best) {
    best = a;
    where = what();
  }
}

// The sum of x's squares, each rounded to fp32, where every square is an integer and the sum is
// below 2^24: then every partial sum is an exact fp32 integer and any order of adding gives the
// same float, so sixteen lanes may add them. False where that does not hold; a sum that reaches
// 2^24 in any order still reads >= 2^24 after rounding (the terms are >= 0), so it is seen.
__attribute__((target("avx512f"))) bool integer_sum_of_squares(const float* x, std::size_t n, float& sum) {
  __m512 lanes = _mm512_setzero_ps();
  __mmask16 integer = 0xFFFF;
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __m512 square = _mm512_mul_ps(v, v);
    // (The masked form with every lane on: GCC 12 warns on the unmasked one's undefined source.)
    integer &= _mm512_cmp_ps_mask(_mm512_maskz_roundscale_ps(0xFFFF, square, _MM_FROUND_TO_ZERO), square, _CMP_EQ_OQ);
    lanes = _mm512_add_ps(lanes, square);
  }
  alignas(64) float part[16];
  _mm512_store_ps(part, lanes);
  float total = 0;
  for (float p : part) total += p;
  for (; i < n; ++i) {
    const float square = x[i] * x[i];
    if (std::trunc(square) != square) return false;
    total += square;
  }
  if (integer != 0xFFFF || !(total < 16777216.0f)) return false;
  sum = total;
  return true;
}
}  // namespace

// rms_norm_zc with a zero weight.
void ReferenceModel::norm(const std::vector<float>& x, std::vector<float>& y) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  float ss = 0;
  if (!avx512 || !integer_sum_of_squares(x.data(), x.size(), ss)) {
    ss = 0;
    for (float v : x) ss += v * v;  // in order (a zero's square adds nothing)
  }
  const float r = rsqrt(ss / static_cast<float>(x.size()) + eps_);
  reference::scale_rounded(x.data(), r, y.data(), static_cast<std::int64_t>(x.size()), dtype_);
}

void ReferenceModel::gdn(std::size_t li) {
  const Plan& p = plans_[li];
  Scratch& t = *scratch_;
  LayerState& st = state_[li];
  LayerMargin& margin = margins_[li];
  const std::int64_t nk = shapes_.linear_num_key_heads, nv = shapes_.linear_num_value_heads;
  const std::int64_t dk = shapes_.linear_key_head_dim, dv = shapes_.linear_value_head_dim;
  const std::int64_t kern = shapes_.linear_conv_kernel, kq = nk * dk;
  multiply(p.in);  // qkv, z, b and a
  // The causal conv (its output replaces the input in `projected`), then SiLU.
  auto activate = [&](std::int32_t ch, float conv) {
    t.projected[static_cast<std::size_t>(ch)] = conv;
    t.activated[static_cast<std::size_t>(ch)] = conv == 0 ? 0.0f : round_to(dtype_, silu_in(dtype_, conv));
  };
  reference::direct_conv(p.direct.data(), p.direct_tap.data(), p.direct.size(), t.projected.data(),
                         t.activated.data(), dtype_);
  for (std::size_t n = 0; n < p.windowed.size(); ++n) {
    const std::int32_t ch = p.windowed[n];
    float* hist = &st.conv[static_cast<std::size_t>(ch * (kern - 1))];
    const float* w = &p.windowed_taps[n * static_cast<std::size_t>(kern)];
    const char* used = &p.windowed_tap_used[n * static_cast<std::size_t>(kern)];
    const float in = t.projected[static_cast<std::size_t>(ch)];
    float acc = 0;
    for (std::int64_t j = 0; j < kern - 1; ++j)
      if (used[j]) acc += hist[j] * w[j];
    if (used[kern - 1]) acc += in * w[kern - 1];
    for (std::int64_t j = 0; j + 1 < kern - 1; ++j) hist[j] = hist[j + 1];
    hist[kern - 2] = in;
    activate(ch, round_to(dtype_, acc));
  }
  // The q/k switches, in channel order: a run of one key head's channels notes its smallest |conv|
  // (at the first channel that has it), which is what a note per channel would leave.
  for (const auto& [begin, end] : p.qk_runs) {
    const std::int32_t key_head = p.qk_key_head[static_cast<std::size_t>(begin)];
    std::int32_t at = -1;
    const float lo = reference::smallest_magnitude(t.projected.data(), p.qk_channels.data() + begin,
                                                   static_cast<std::size_t>(end - begin), at);
    if (at >= 0)
      note(
          margin.gdn_min, margin.gdn_where, lo, [&] { return "q/k channel " + std::to_string(at); },
          &margin.gdn_head_min[static_cast<std::size_t>(key_head * (nv / nk))]);
  }
  const std::int64_t r = nv / nk;
  const float sqrt_dk = std::sqrt(static_cast<float>(dk));
  const float* act = t.activated.data();
  std::vector<std::pair<std::int64_t, float>> q, k;  // a head's nonzero query / key elements
  std::vector<float>& kv = t.kv;
  std::vector<float>& o = t.read;
  for (const std::int32_t h : p.heads) {
    const std::size_t key_head = static_cast<std::size_t>(h / r);
    const float bh = t.b_out[static_cast<std::size_t>(h)];
    const float beta = round_to(dtype_, sigmoid(bh));
    note(
        margin.gdn_min, margin.gdn_where, bh, [&] { return "beta of head " + std::to_string(h); },
        &margin.gdn_head_min[static_cast<std::size_t>(h)]);
    const float a_in = t.a_out[static_cast<std::size_t>(h)];
    const float decay = a_in == 0 ? p.decay_at_rest[static_cast<std::size_t>(h)]
                                  : weights::decay(p.a_log[static_cast<std::size_t>(h)],
                                                   a_in + p.dt_bias[static_cast<std::size_t>(h)]);
    // l2norm of q and k over their nonzero elements (in channel order, as over the whole head).
    auto gather = [&](const float* head, std::vector<std::pair<std::int64_t, float>>& out) {
      nonzero_elements(head, dk, out);
      float ss = 0;
      for (const auto& [i, v] : out) ss += v * v;
      return rsqrt(ss + kEps);
    };
    const float qr = gather(act + key_head * static_cast<std::size_t>(dk), q);
    const float kr = gather(act + kq + key_head * static_cast<std::size_t>(dk), k);
    for (auto& [i, v] : q) v = (v * qr) / sqrt_dk;
    for (auto& [i, v] : k) v = v * kr;
    float* s = &st.s[static_cast<std::size_t>(h * dk * dv)];
    const float* v = act + 2 * kq + h * dv;
    if (decay != 1.0f) reference::scale(s, decay, dk * dv);
    // Terms with an exactly zero k or q element add nothing (one-hot keys): skipped.
    std::fill(kv.begin(), kv.end(), 0.0f);
    for (const auto& [i, ki] : k)
      if (ki != 0) reference::add_scaled(kv.data(), s + i * dv, ki, dv);
    reference::correct(kv.data(), v, beta, dv);
    for (const auto& [i, ki] : k)
      if (ki != 0) reference::add_scaled(s + i * dv, kv.data(), ki, dv);  // ki·kv[j] = kv[j]·ki
    std::fill(o.begin(), o.end(), 0.0f);
    for (const auto& [i, qi] : q)
      if (qi != 0) reference::add_scaled(o.data(), s + i * dv, qi, dv);
    // Qwen3_5RMSNormGated: fp32 norm -> dtype -> ·w in dtype -> ·silu(z) in fp32 -> dtype.
    const float ss = reference::round_and_sum_squares(o.data(), dv, dtype_);
    const float rr = rsqrt(ss / static_cast<float>(dv) + eps_);
    const float* z = &t.z_out[static_cast<std::size_t>(h * dv)];
    float* out = &t.heads_out[static_cast<std::size_t>(h * dv)];
    // The head's z switches: its smallest nonzero |z| is the one a note per switch would keep.
    const float z_min = reference::smallest_magnitude(z, dv);
    if (z_min != std::numeric_limits<float>::infinity())
      note(
          margin.gdn_min, margin.gdn_where, z_min, [&] { return "z of head " + std::to_string(h); },
          &margin.gdn_head_min[static_cast<std::size_t>(h)]);
    reference::gated_output(o.data(), z, rr, p.norm_weight, dv, out, dtype_);
  }
  multiply(p.out);
  put_back_zeros(t.projected, p.written.projected);
  put_back_zeros(t.projected, p.written.activated);  // the conv's outputs
  put_back_zeros(t.activated, p.written.activated);
  put_back_zeros(t.z_out, p.written.z);
  put_back_zeros(t.b_out, p.written.b);
  put_back_zeros(t.a_out, p.written.a);
  put_back_zeros(t.heads_out, p.written.heads);
}

void ReferenceModel::mlp(std::size_t li) {
  const Plan& p = plans_[li];
  Scratch& t = *scratch_;
  multiply(p.gate_up);
  LayerMargin& margin = margins_[li];
  // A neuron without weights has gate 0, up 0 and product 0: it keeps the 0 it was created as.
  const float lo = reference::neuron_products(p.neurons.data(), p.neurons.size(), t.gate_out.data(), t.up_out.data(),
                                              t.product.data(), margin.mlp_neuron_min.data(), dtype_);
  if (lo < margin.mlp_min) {  // the first neuron that has it, as a note per neuron would keep
    margin.mlp_min = lo;
    for (const std::int32_t n : p.neurons) {
      if (std::fabs(t.gate_out[static_cast<std::size_t>(n)]) != lo) continue;
      const auto& names = layers_[li].mlp.neuron_op;
      margin.mlp_where = "neuron " + std::to_string(n) + (n < static_cast<std::int32_t>(names.size())
                                                              ? " (" + names[static_cast<std::size_t>(n)] + ")"
                                                              : "");
      break;
    }
  }
  multiply(p.mlp_down);
  put_back_zeros(t.gate_out, p.written.gate);
  put_back_zeros(t.up_out, p.written.up);
  put_back_zeros(t.product, p.written.neurons);
}

std::vector<float> ReferenceModel::step(const std::vector<float>& x_in) {
  // The plain loops add every layer's output everywhere: x + 0 turns a -0 into +0 and changes
  // nothing else, so the rows without weights need only that, once.
  residual_.resize(x_in.size());
  if (normed_.size() != x_in.size() + 1) normed_.assign(x_in.size() + 1, 0.0f);
  for (std::size_t i = 0; i < x_in.size(); ++i) residual_[i] = round_to(dtype_, x_in[i]) + 0.0f;
  const Scratch& t = *scratch_;
  for (std::size_t li = 0; li < layers_.size(); ++li) {
    const Plan& p = plans_[li];
    norm(residual_, normed_);
    gdn(li);
    for (const std::int32_t i : p.o.nonempty)
      residual_[i] = round_to(dtype_, residual_[i] + t.attention_out[static_cast<std::size_t>(i)]);
    norm(residual_, normed_);
    mlp(li);
    for (const std::int32_t i : p.down.nonempty)
      residual_[i] = round_to(dtype_, residual_[i] + t.mlp_out[static_cast<std::size_t>(i)]);
  }
  return residual_;
}

LayerStateView ReferenceModel::gdn_state(std::size_t layer) const {
  LayerStateView v;
  if (layer >= state_.size()) return v;
  v.data = state_[layer].s.data();
  v.value_heads = shapes_.linear_num_value_heads;
  v.key_dim = shapes_.linear_key_head_dim;
  v.value_dim = shapes_.linear_value_head_dim;
  return v;
}

StateView ReferenceModel::state_view() const {
  StateView v;
  v.dtype = dtype_;
  for (std::size_t l = 0; l < state_.size(); ++l) v.layers.push_back(gdn_state(l));
  return v;
}

std::string ReferenceModel::margin_report() const {
  std::ostringstream os;
  for (std::size_t i = 0; i < margins_.size(); ++i) {
    const LayerMargin& m = margins_[i];
    os << "layer " << i << ": mlp min |gate| " << m.mlp_min << (m.mlp_where.empty() ? "" : " at " + m.mlp_where)
       << "; gdn min |switch| " << m.gdn_min << (m.gdn_where.empty() ? "" : " at " + m.gdn_where)
       << " (exact needs >= 88.73 below 0, >= 16.64 above, or exactly 0)\n";
  }
  return os.str();
}

}  // namespace qgpu::weights
