// Qwen3.5 layer math; see qwen35_ops.h. Comments name the HF step each block mirrors.
#include "qwen35_ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "matvec.h"

namespace qgpu::torch_backend::ops {
namespace {

using at::indexing::None;
using at::indexing::Slice;

// HF l2norm: x * rsqrt(sum(x*x) + eps), eps on the sum.
at::Tensor l2norm(const at::Tensor& x, double eps = 1e-6) {
  return x * at::rsqrt((x * x).sum(-1, /*keepdim=*/true) + eps);
}

// [B, T, H, D] -> [B, H, T, D] contiguous fp32 (HF's transpose(1, 2).to(float32, contiguous)).
at::Tensor heads_first_f32(const at::Tensor& x) {
  return x.transpose(1, 2).to(at::kFloat).contiguous();
}

// Grouped value heads: k-head j serves v-heads j*r .. j*r+r-1 (repeat_interleave).
at::Tensor repeat_heads(const at::Tensor& x, std::int64_t repeats) {
  return repeats == 1 ? x : x.repeat_interleave(repeats, /*dim=*/2);
}

}  // namespace

at::Tensor project(const at::Tensor& x, const at::Tensor& weight) {
  // One row (decode) on an AVX-512 CPU: our own mat-vec (matvec.h). LibTorch
  // 1.13 runs a one-row bf16 Linear through oneDNN's gemm and an fp32 one
  // through gemv, both well below memory bandwidth; the kernel sums in fp32
  // and rounds once, like linear.
  if (matvec::applies(x, weight)) return matvec::matvec(x, weight);
  // Elsewhere, one fp32 row: Debian's LibTorch 1.13 sends [1, in] x W^T to a
  // BLAS gemm that is ~4x slower than gemv on the same weights; bf16 stays on
  // linear (oneDNN), which is faster than mv there and rounds like PyTorch 2.x.
  if (x.scalar_type() == at::kFloat && x.numel() == x.size(-1) && weight.dim() == 2) {
    auto sizes = x.sizes().vec();
    sizes.back() = weight.size(0);
    return at::mv(weight, x.reshape({-1})).reshape(sizes);
  }
  return at::linear(x, weight);
}

namespace {

// SiLU rounded once: PyTorch 2.x evaluates a bf16 silu in fp32 and rounds the
// result; LibTorch 1.13's bf16 kernel rounds intermediates (30% of results
// differ by an ulp), so reduced-precision inputs go through fp32 here.
at::Tensor silu_rounded_once(const at::Tensor& x) {
  if (x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble) return at::silu(x);
  return at::silu(x.to(at::kFloat)).to(x.scalar_type());
}

// Depthwise conv1d (groups = channels), no bias, `padding` zeros on both sides.
at::Tensor depthwise_conv(const at::Tensor& x, const at::Tensor& w, std::int64_t padding) {
  const std::int64_t stride = 1, dilation = 1;
  return at::conv1d(x, w, at::Tensor(), at::IntArrayRef(stride), at::IntArrayRef(padding), at::IntArrayRef(dilation),
                    w.size(0));
}

at::Tensor rotate_half(const at::Tensor& x) {
  const auto half = x.size(-1) / 2;
  return at::cat({-x.index({"...", Slice(half, None)}), x.index({"...", Slice(None, half)})}, -1);
}

// HF Qwen3_5RMSNormGated: fp32 norm, rounded to the model dtype, times w (in
// w's dtype), times silu(z) in fp32, rounded.
at::Tensor gated_rms_norm(const at::Tensor& x, const at::Tensor& z, const at::Tensor& weight, double eps) {
  const auto input_dtype = x.scalar_type();
  auto h = x.to(at::kFloat);
  auto variance = h.pow(2).mean(-1, /*keepdim=*/true);
  h = h * at::rsqrt(variance + eps);
  h = weight * h.to(input_dtype);
  h = h * silu_rounded_once(z.to(at::kFloat));
  return h.to(input_dtype);
}

}  // namespace

at::Tensor rms_norm_zero_centred(const at::Tensor& x, const at::Tensor& weight, double eps) {
  auto xf = x.to(at::kFloat);
  auto out = xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  out = out * (weight.to(at::kFloat) + 1.0);
  return out.to(x.scalar_type());
}

at::Tensor swiglu(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& up, const at::Tensor& down) {
  return project(silu_rounded_once(project(x, gate)) * project(x, up), down);
}

at::Tensor chunk_gated_delta_rule(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
                                  const at::Tensor& g_in, const at::Tensor& beta_in, std::int64_t chunk,
                                  at::Tensor& state) {
  const auto initial_dtype = q_in.scalar_type();
  const auto batch = k_in.size(0), length = k_in.size(1), nk = k_in.size(2), dk = k_in.size(3);
  const auto nv = v_in.size(2), dv = v_in.size(3);
  auto q = repeat_heads(q_in, nv / nk);
  auto k = repeat_heads(k_in, nv / nk);
  q = heads_first_f32(q);
  k = heads_first_f32(k);
  auto v = heads_first_f32(v_in);
  auto beta = beta_in.transpose(1, 2).to(at::kFloat).contiguous();
  auto decay = g_in.transpose(1, 2).to(at::kFloat).contiguous();
  q = l2norm(q);
  k = l2norm(k);
  q = q * std::pow(static_cast<double>(dk), -0.5);

  // Zero padding to a multiple of the chunk: padded rows neither write nor decay.
  const auto pad = (chunk - length % chunk) % chunk;
  q = at::constant_pad_nd(q, {0, 0, 0, pad}, 0);
  k = at::constant_pad_nd(k, {0, 0, 0, pad}, 0);
  v = at::constant_pad_nd(v, {0, 0, 0, pad}, 0);
  beta = at::constant_pad_nd(beta, {0, pad}, 0);
  decay = at::constant_pad_nd(decay, {0, pad}, 0);
  const auto num_chunks = (length + pad) / chunk;

  auto v_beta = v * beta.unsqueeze(-1);
  auto k_beta = k * beta.unsqueeze(-1);
  auto to_chunks = [&](const at::Tensor& x) { return x.reshape({x.size(0), x.size(1), -1, chunk, x.size(-1)}); };
  q = to_chunks(q);
  k = to_chunks(k);
  k_beta = to_chunks(k_beta);
  v_beta = to_chunks(v_beta);
  decay = decay.reshape({decay.size(0), decay.size(1), -1, chunk});

  const auto strictly_upper = at::ones({chunk, chunk}, q.options().dtype(at::kBool)).triu(1);
  auto cum_decay = decay.cumsum(3);
  auto pairwise = cum_decay.unsqueeze(4) - cum_decay.unsqueeze(3);
  pairwise = pairwise.masked_fill(strictly_upper, -INFINITY).exp();

  auto ut_system = at::matmul(k_beta, k.transpose(-1, -2)) * pairwise;
  auto intra = at::matmul(q, k.transpose(-1, -2)) * pairwise;
  auto decayed_k_beta = k_beta * cum_decay.exp().unsqueeze(-1);
  auto new_values = at::linalg_solve_triangular(ut_system, v_beta, /*upper=*/false, /*left=*/true,
                                                /*unitriangular=*/true);
  auto k_cumdecay = at::linalg_solve_triangular(ut_system, decayed_k_beta, /*upper=*/false, /*left=*/true,
                                                /*unitriangular=*/true);

  auto S = state.defined() ? state.to(new_values.options()) : at::zeros({batch, nv, dk, dv}, new_values.options());
  auto out = at::zeros_like(new_values);
  q = q * cum_decay.exp().unsqueeze(-1);
  k = k * (cum_decay.index({"...", Slice(-1, None)}) - cum_decay).exp().unsqueeze(-1);
  auto chunk_decay = cum_decay.index({"...", -1}).exp().unsqueeze(-1).unsqueeze(-1);

  for (std::int64_t i = 0; i < num_chunks; ++i) {
    auto v_new = new_values.select(2, i) - at::matmul(k_cumdecay.select(2, i), S);
    auto inter = at::matmul(q.select(2, i), S);
    out.select(2, i).copy_(inter + at::matmul(intra.select(2, i), v_new));
    S = S * chunk_decay.select(2, i) + at::matmul(k.select(2, i).transpose(-1, -2), v_new);
  }
  state = S;
  out = out.reshape({batch, nv, -1, dv}).index({Slice(), Slice(), Slice(None, length)});
  return out.transpose(1, 2).to(initial_dtype).contiguous();
}

at::Tensor recurrent_gated_delta_rule(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
                                      const at::Tensor& g_in, const at::Tensor& beta_in, at::Tensor& state) {
  const auto initial_dtype = q_in.scalar_type();
  const auto batch = k_in.size(0), length = k_in.size(1), nk = k_in.size(2), dk = k_in.size(3);
  const auto nv = v_in.size(2), dv = v_in.size(3);
  auto q = heads_first_f32(repeat_heads(q_in, nv / nk));
  auto k = heads_first_f32(repeat_heads(k_in, nv / nk));
  auto v = heads_first_f32(v_in);
  auto beta = beta_in.transpose(1, 2).to(at::kFloat).contiguous();
  auto decay = g_in.transpose(1, 2).to(at::kFloat).contiguous();
  q = l2norm(q);
  k = l2norm(k);
  q = q / std::pow(static_cast<double>(dk), 0.5);

  auto S = state.defined() ? state.to(v.options()) : at::zeros({batch, nv, dk, dv}, v.options());
  auto out = at::zeros_like(v);
  for (std::int64_t i = 0; i < length; ++i) {
    auto q_t = q.select(2, i), k_t = k.select(2, i), v_t = v.select(2, i);
    S = S * decay.select(2, i).exp().unsqueeze(-1).unsqueeze(-1);  // 1. decay
    auto beta_t = beta.select(2, i).unsqueeze(-1);
    auto kv_mem = (S * k_t.unsqueeze(-1)).sum(-2);            // 2. read with the decayed state
    auto delta = (v_t - kv_mem) * beta_t;                     // 3. delta
    S = S + k_t.unsqueeze(-1) * delta.unsqueeze(-2);          // 4. rank-1 write
    out.select(2, i).copy_((S * q_t.unsqueeze(-1)).sum(-2));  // 5. read with the updated state
  }
  state = S;
  return out.transpose(1, 2).contiguous().to(initial_dtype);
}

at::Tensor gated_delta_net(const at::Tensor& x, const DeltaNetParams& p, DeltaNetState& state, Rule rule) {
  const auto T = x.size(0);
  const auto K = p.num_key_heads * p.key_head_dim, V = p.num_value_heads * p.value_head_dim;
  const auto hidden = x.unsqueeze(0);  // [1, T, H]: HF's batch of one

  auto mixed = project(hidden, p.in_proj_qkv).transpose(1, 2);  // [1, C, T]
  auto z = project(hidden, p.in_proj_z).reshape({1, T, -1, p.value_head_dim});
  auto b = project(hidden, p.in_proj_b);
  auto a = project(hidden, p.in_proj_a);

  // Causal depthwise conv + SiLU, in the three forms HF uses.
  const auto& w = p.conv1d;  // [C, 1, kernel]
  const auto kernel = p.conv_kernel;
  const bool had_state = state.has_conv();
  if (had_state && T == 1) {
    // causal_conv1d_update: [state | new], unpadded conv, last output.
    auto full = at::cat({state.conv, mixed}, -1).to(w.scalar_type());
    state.conv = full.index({"...", Slice(-kernel, None)}).clone();
    auto out = depthwise_conv(full, w, 0).index({"...", Slice(-T, None)});
    mixed = silu_rounded_once(out).to(x.scalar_type());
  } else {
    // update_conv_state then causal_conv1d_fn: left context from the state (or zero padding).
    at::Tensor full;
    if (had_state) {
      full = at::cat({state.conv, mixed}, -1);
    } else {
      full = mixed.size(-1) < kernel ? at::constant_pad_nd(mixed, {kernel - mixed.size(-1), 0}, 0) : mixed;
    }
    state.conv = full.index({"...", Slice(-kernel, None)}).clone();
    const auto n = full.size(-1);
    auto out = depthwise_conv(full.to(w.scalar_type()), w, kernel - 1).index({"...", Slice(None, n)});
    mixed = silu_rounded_once(out).to(full.scalar_type()).index({"...", Slice(-T, None)});
  }

  mixed = mixed.transpose(1, 2);  // [1, T, C]
  auto parts = at::split_with_sizes(mixed, {K, K, V}, -1);
  auto query = parts[0].reshape({1, T, -1, p.key_head_dim});
  auto key = parts[1].reshape({1, T, -1, p.key_head_dim});
  auto value = parts[2].reshape({1, T, -1, p.value_head_dim});

  auto beta = at::sigmoid(b);  // model dtype
  auto g = -p.a_log.to(at::kFloat).exp() * at::softplus(a.to(at::kFloat) + p.dt_bias, 1, 20);

  const bool recurrent = rule == Rule::kRecurrent || (rule == Rule::kAuto && state.recurrent.defined() && T == 1);
  auto core = recurrent ? recurrent_gated_delta_rule(query, key, value, g, beta, state.recurrent)
                        : chunk_gated_delta_rule(query, key, value, g, beta, 64, state.recurrent);

  core = core.reshape({-1, p.value_head_dim});
  z = z.reshape({-1, p.value_head_dim});
  core = gated_rms_norm(core, z, p.norm, p.eps).reshape({1, T, -1});
  return project(core, p.out_proj).squeeze(0);
}

void KvCache::append(const at::Tensor& k, const at::Tensor& v) {
  const std::int64_t T = k.size(2), capacity = key_buffer.defined() ? key_buffer.size(2) : 0;
  if (size + T > capacity) {
    const std::int64_t grown = std::max<std::int64_t>({2 * capacity, size + T, 256});
    auto larger = [&](const at::Tensor& old, const at::Tensor& like) {
      auto t = at::empty({like.size(0), like.size(1), grown, like.size(3)}, like.options());
      if (size > 0) t.narrow(2, 0, size).copy_(old.narrow(2, 0, size));
      return t;
    };
    key_buffer = larger(key_buffer, k);  // new buffers: a copy of this cache sharing the old ones is untouched
    value_buffer = larger(value_buffer, v);
  }
  key_buffer.narrow(2, size, T).copy_(k);
  value_buffer.narrow(2, size, T).copy_(v);
  size += T;
}

at::Tensor gated_attention(const at::Tensor& x, const AttentionParams& p, KvCache& cache) {
  const auto T = x.size(0), hd = p.head_dim;
  const auto hidden = x.unsqueeze(0);  // [1, T, H]
  const auto dtype = x.scalar_type();

  // q_proj rows are per head [query hd | gate hd].
  auto qg = project(hidden, p.q_proj).view({1, T, -1, 2 * hd}).chunk(2, -1);
  auto gate = qg[1].reshape({1, T, -1});
  auto q = rms_norm_zero_centred(qg[0].reshape({1, T, -1, hd}), p.q_norm, p.eps).transpose(1, 2);
  auto k = rms_norm_zero_centred(project(hidden, p.k_proj).view({1, T, -1, hd}), p.k_norm, p.eps).transpose(1, 2);
  auto v = project(hidden, p.v_proj).view({1, T, -1, hd}).transpose(1, 2);

  // RoPE (HF Qwen3_5TextRotaryEmbedding, default type): for text, interleaved
  // MRoPE is plain 1-D RoPE. inv_freq, angles, cos and sin in fp32, then cast.
  const auto f32 = x.options().dtype(at::kFloat);
  auto inv_freq =
      at::pow(p.rope_theta, at::arange(0, p.rotary_dim, 2, f32) / static_cast<double>(p.rotary_dim)).reciprocal();
  auto positions = at::arange(cache.length(), cache.length() + T, x.options().dtype(at::kLong)).to(at::kFloat);
  auto freqs = positions.unsqueeze(-1) * inv_freq;                                         // [T, rot/2]
  auto cos = at::cat({freqs.cos(), freqs.cos()}, -1).to(dtype).unsqueeze(0).unsqueeze(0);  // [1, 1, T, rot]
  auto sin = at::cat({freqs.sin(), freqs.sin()}, -1).to(dtype).unsqueeze(0).unsqueeze(0);
  auto rope = [&](const at::Tensor& t) {
    auto rot = t.index({"...", Slice(None, p.rotary_dim)});
    auto pass = t.index({"...", Slice(p.rotary_dim, None)});
    return at::cat({rot * cos + rotate_half(rot) * sin, pass}, -1);
  };
  q = rope(q);
  k = rope(k);

  cache.append(k, v);

  // Eager attention: bf16 matmul, scale, causal mask, fp32 softmax, matmul. The query heads
  // of one KV head are one matrix ([groups·T, hd], head h = kv·groups + g) against that KV
  // head's keys: HF's repeat_kv without copying the cache groups times for every token.
  const auto nh = p.num_heads, nkv = p.num_kv_heads, groups = nh / nkv;
  const auto S = cache.length(), past = S - T;
  auto weights = at::matmul(q.reshape({1, nkv, groups * T, hd}), cache.keys().transpose(2, 3)) *
                 std::pow(static_cast<double>(hd), -0.5);
  weights = weights.view({1, nh, T, S});
  if (T > 1) {
    // Query t (position past + t) sees keys 0..past + t.
    auto qpos = at::arange(past, S, x.options().dtype(at::kLong)).unsqueeze(-1);
    auto kpos = at::arange(0, S, x.options().dtype(at::kLong)).unsqueeze(0);
    weights = weights.masked_fill(kpos > qpos, -INFINITY);
  }
  weights = at::softmax(weights, -1, at::kFloat).to(dtype);
  auto out = at::matmul(weights.reshape({1, nkv, groups * T, S}), cache.values())
                 .view({1, nh, T, hd})
                 .transpose(1, 2)
                 .contiguous()
                 .reshape({1, T, -1});
  out = out * at::sigmoid(gate);
  return project(out, p.o_proj).squeeze(0);
}

}  // namespace qgpu::torch_backend::ops
