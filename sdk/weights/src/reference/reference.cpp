#include "qgpu/weights/reference.h"

#include <cmath>
#include <limits>
#include <sstream>

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

ReferenceModel::ReferenceModel(const std::vector<Layer>& layers, const sdk::LayerShapes& shapes, DType dtype)
    : layers_(layers), shapes_(shapes), dtype_(dtype) {
  // rms_norm_eps of the base (the RMSNorms and the gated norm); the q/k l2norm eps is HF's fixed 1e-6.
  eps_ = shapes.rms_norm_eps > 0 ? static_cast<float>(shapes.rms_norm_eps) : kEps;
  for (const Layer& l : layers_) {
    qkv_.push_back(prep(l.gdn.in_proj_qkv));
    z_.push_back(prep(l.gdn.in_proj_z));
    b_.push_back(prep(l.gdn.in_proj_b));
    a_.push_back(prep(l.gdn.in_proj_a));
    o_.push_back(prep(l.gdn.out_proj));
    gate_.push_back(prep(l.mlp.gate));
    up_.push_back(prep(l.mlp.up));
    down_.push_back(prep(l.mlp.down));
    // Channels and heads without weights compute exact zeros: skipping them changes no bit.
    const std::int64_t nk = shapes.linear_num_key_heads, nv = shapes.linear_num_value_heads;
    const std::int64_t dk = shapes.linear_key_head_dim, dv = shapes.linear_value_head_dim;
    const std::int64_t kern = shapes.linear_conv_kernel, kq = nk * dk, c = 2 * kq + nv * dv;
    std::vector<std::int64_t> active;
    std::vector<char> heads(static_cast<std::size_t>(nv), 0);
    auto mark = [&](std::int64_t h) { heads[static_cast<std::size_t>(h)] = 1; };
    for (std::int64_t ch = 0; ch < c; ++ch) {
      bool any = false;
      for (std::int64_t j = 0; j < kern; ++j) any = any || l.gdn.conv1d[static_cast<std::size_t>(ch * kern + j)] != 0;
      if (!any) continue;
      active.push_back(ch);
      if (ch < 2 * kq) {
        std::int64_t kh = (ch % kq) / dk;
        for (std::int64_t t = 0; t < nv / nk; ++t) mark(kh * (nv / nk) + t);
      } else {
        mark((ch - 2 * kq) / dv);
      }
    }
    for (std::int64_t h = 0; h < nv; ++h) {
      if (l.gdn.in_proj_b.row_ptr[h] != l.gdn.in_proj_b.row_ptr[h + 1]) mark(h);
      if (l.gdn.a_log[h] != 0) mark(h);
      for (std::int64_t j = 0; j < dv; ++j)
        if (l.gdn.in_proj_z.row_ptr[h * dv + j] != l.gdn.in_proj_z.row_ptr[h * dv + j + 1]) mark(h);
    }
    conv_active_.push_back(std::move(active));
    head_active_.push_back(std::move(heads));
  }
  reset();
}

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

ReferenceModel::Sparse32 ReferenceModel::prep(const SparseMatrix& m) const {
  Sparse32 s;
  s.rows = m.rows;
  s.row_ptr = m.row_ptr;
  s.col = m.col;
  for (double v : m.val) s.val.push_back(round_to(dtype_, static_cast<float>(v)));
  return s;
}

std::vector<float> ReferenceModel::lin(const Sparse32& m, const std::vector<float>& x) const {
  std::vector<float> y(static_cast<std::size_t>(m.rows), 0.0f);
  for (std::int64_t r = 0; r < m.rows; ++r) {
    std::int64_t b = m.row_ptr[r], e = m.row_ptr[r + 1];
    if (b == e) continue;
    float acc = 0;
    for (std::int64_t k = b; k < e; ++k) acc += m.val[k] * x[m.col[k]];
    y[r] = round_to(dtype_, acc);
  }
  return y;
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
}  // namespace

std::vector<float> ReferenceModel::gdn(std::size_t li, const std::vector<float>& x) {
  const Layer& layer = layers_[li];
  const GdnLayer& g = layer.gdn;
  LayerState& st = state_[li];
  LayerMargin& margin = margins_[li];
  const std::int64_t nk = shapes_.linear_num_key_heads, nv = shapes_.linear_num_value_heads;
  const std::int64_t dk = shapes_.linear_key_head_dim, dv = shapes_.linear_value_head_dim;
  const std::int64_t kern = shapes_.linear_conv_kernel, kq = nk * dk;
  const std::int64_t c = 2 * kq + nv * dv;
  std::vector<float> p = lin(qkv_[li], x);
  std::vector<float> act(static_cast<std::size_t>(c), 0.0f);
  for (std::int64_t ch : conv_active_[li]) {
    float* hist = &st.conv[static_cast<std::size_t>(ch * (kern - 1))];
    const double* w = &g.conv1d[static_cast<std::size_t>(ch * kern)];
    float acc = 0;
    for (std::int64_t j = 0; j < kern - 1; ++j)
      if (w[j] != 0) acc += hist[j] * round_to(dtype_, static_cast<float>(w[j]));
    if (w[kern - 1] != 0) acc += p[ch] * round_to(dtype_, static_cast<float>(w[kern - 1]));
    for (std::int64_t j = 0; j + 1 < kern - 1; ++j) hist[j] = hist[j + 1];
    hist[kern - 2] = p[ch];
    float conv = round_to(dtype_, acc);
    if (ch < 2 * kq && conv != 0)
      note(
          margin.gdn_min, margin.gdn_where, conv, [&] { return "q/k channel " + std::to_string(ch); },
          &margin.gdn_head_min[static_cast<std::size_t>((ch % kq) / dk * (nv / nk))]);
    act[ch] = conv == 0 ? 0.0f : round_to(dtype_, silu_in(dtype_, conv));
  }
  std::vector<float> z = lin(z_[li], x), b = lin(b_[li], x), a = lin(a_[li], x);
  std::vector<float> out(static_cast<std::size_t>(nv * dv), 0.0f);
  const std::int64_t r = nv / nk;
  const float sqrt_dk = std::sqrt(static_cast<float>(dk));
  std::vector<float> qh(dk), kh(dk), kv(dv), o(dv);
  for (std::int64_t h = 0; h < nv; ++h) {
    if (!head_active_[li][h]) continue;
    const std::int64_t kh_idx = h / r;
    float beta = round_to(dtype_, sigmoid(b[h]));
    note(
        margin.gdn_min, margin.gdn_where, b[h], [&] { return "beta of head " + std::to_string(h); },
        &margin.gdn_head_min[static_cast<std::size_t>(h)]);
    float a_log = round_to(dtype_, static_cast<float>(g.a_log[h]));
    float dtb = round_to(dtype_, static_cast<float>(g.dt_bias[h]));
    float gg = -std::exp(a_log) * softplus(a[h] + dtb);
    float decay = std::exp(gg);
    float qs = 0, ks = 0;
    for (std::int64_t i = 0; i < dk; ++i) {
      qh[i] = act[kh_idx * dk + i];
      kh[i] = act[kq + kh_idx * dk + i];
      qs += qh[i] * qh[i];
      ks += kh[i] * kh[i];
    }
    float qr = rsqrt(qs + kEps), kr = rsqrt(ks + kEps);
    for (std::int64_t i = 0; i < dk; ++i) {
      qh[i] = (qh[i] * qr) / sqrt_dk;
      kh[i] = kh[i] * kr;
    }
    float* s = &st.s[static_cast<std::size_t>(h * dk * dv)];
    const float* v = &act[static_cast<std::size_t>(2 * kq + h * dv)];
    if (decay != 1.0f)
      for (std::int64_t i = 0; i < dk * dv; ++i) s[i] *= decay;
    // Terms with an exactly zero k or q element add nothing (one-hot keys): skipped.
    std::fill(kv.begin(), kv.end(), 0.0f);
    for (std::int64_t i = 0; i < dk; ++i) {
      if (kh[i] == 0) continue;
      for (std::int64_t j = 0; j < dv; ++j) kv[j] += s[i * dv + j] * kh[i];
    }
    for (std::int64_t j = 0; j < dv; ++j) kv[j] = (v[j] - kv[j]) * beta;
    for (std::int64_t i = 0; i < dk; ++i) {
      if (kh[i] == 0) continue;
      for (std::int64_t j = 0; j < dv; ++j) s[i * dv + j] += kh[i] * kv[j];
    }
    std::fill(o.begin(), o.end(), 0.0f);
    for (std::int64_t i = 0; i < dk; ++i) {
      if (qh[i] == 0) continue;
      for (std::int64_t j = 0; j < dv; ++j) o[j] += s[i * dv + j] * qh[i];
    }
    // Qwen3_5RMSNormGated: fp32 norm -> dtype -> ·w in dtype -> ·silu(z) in fp32 -> dtype.
    float ss = 0;
    for (std::int64_t j = 0; j < dv; ++j) {
      o[j] = round_to(dtype_, o[j]);
      ss += o[j] * o[j];
    }
    float rr = rsqrt(ss / static_cast<float>(dv) + eps_);
    float w = dtype_ == DType::kBF16 ? static_cast<float>(g.norm_weight_bf16) : static_cast<float>(g.norm_weight_f32);
    w = round_to(dtype_, w);
    for (std::int64_t j = 0; j < dv; ++j) {
      float zz = z[h * dv + j];
      if (zz != 0)
        note(
            margin.gdn_min, margin.gdn_where, zz, [&] { return "z of head " + std::to_string(h); },
            &margin.gdn_head_min[static_cast<std::size_t>(h)]);
      if (o[j] == 0) continue;
      float y1 = round_to(dtype_, w * round_to(dtype_, o[j] * rr));
      out[h * dv + j] = round_to(dtype_, y1 * silu(zz));
    }
  }
  return lin(o_[li], out);
}

std::vector<float> ReferenceModel::mlp(std::size_t li, const std::vector<float>& x) {
  const Sparse32& gm = gate_[li];
  std::vector<float> g = lin(gm, x), u = lin(up_[li], x);
  LayerMargin& margin = margins_[li];
  std::vector<float> p(g.size(), 0.0f);
  for (std::size_t n = 0; n < g.size(); ++n) {
    if (gm.row_ptr[n] == gm.row_ptr[n + 1] && u[n] == 0) continue;
    if (g[n] != 0 && std::fabs(g[n]) < margin.mlp_neuron_min[n]) margin.mlp_neuron_min[n] = std::fabs(g[n]);
    if (g[n] != 0 && std::fabs(g[n]) < margin.mlp_min) {
      margin.mlp_min = std::fabs(g[n]);
      const auto& names = layers_[li].mlp.neuron_op;
      margin.mlp_where = "neuron " + std::to_string(n) + (n < names.size() ? " (" + names[n] + ")" : "");
    }
    float a = round_to(dtype_, silu_in(dtype_, g[n]));
    p[n] = round_to(dtype_, a * u[n]);
  }
  return lin(down_[li], p);
}

std::vector<float> ReferenceModel::step(const std::vector<float>& x_in) {
  std::vector<float> x = x_in;
  for (float& v : x) v = round_to(dtype_, v);
  if (zeros_.size() != x.size()) zeros_.assign(x.size(), 0.0f);
  for (std::size_t li = 0; li < layers_.size(); ++li) {
    std::vector<float> d = gdn(li, rms_norm_zc(x, zeros_, dtype_, eps_));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = round_to(dtype_, x[i] + d[i]);
    d = mlp(li, rms_norm_zc(x, zeros_, dtype_, eps_));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = round_to(dtype_, x[i] + d[i]);
  }
  return x;
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
