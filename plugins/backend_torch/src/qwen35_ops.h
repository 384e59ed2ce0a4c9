// Qwen3.5 text-model layer math on ATen tensors, transcribed from Hugging
// Face transformers (models/qwen3_5/modeling_qwen3_5.py, torch fallbacks, eager
// attention) operation by operation, so that each upcast, rounding and
// reduction happens in the same dtype and order as there. Tensors are in the
// model dtype (f32 or bf16) unless a comment says fp32. Callers validate
// shapes; these functions assume them.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace qgpu::torch_backend::ops {

// x * weight^T (weight [out, in], no bias), the Linear of every projection.
at::Tensor project(const at::Tensor& x, const at::Tensor& weight);

// x * rsqrt(mean(x^2) + eps) * (1 + w), in fp32, one rounding to x's dtype.
at::Tensor rms_norm_zero_centred(const at::Tensor& x, const at::Tensor& weight, double eps);

// down(silu(gate(x)) * up(x)).
at::Tensor swiglu(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& up, const at::Tensor& down);

struct DeltaNetParams {
  at::Tensor in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, conv1d, dt_bias, a_log, norm, out_proj;
  std::int64_t num_key_heads = 0, num_value_heads = 0, key_head_dim = 0, value_head_dim = 0, conv_kernel = 0;
  double eps = 1e-6;
};

// What persists between calls of one DeltaNet layer (HF's LinearAttentionLayer).
struct DeltaNetState {
  at::Tensor conv;       // [1, C, kernel]: the last `kernel` pre-conv inputs, model dtype
  at::Tensor recurrent;  // [1, nv, dk, dv] fp32
  bool has_conv() const { return conv.defined(); }
};

enum class Rule { kAuto, kRecurrent, kChunked };

// The Gated DeltaNet mixer for x [T, H]; updates `state`. kAuto follows HF:
// recurrence when T == 1 and a recurrent state exists, chunks otherwise.
at::Tensor gated_delta_net(const at::Tensor& x, const DeltaNetParams& p, DeltaNetState& state, Rule rule);

// The delta rule itself (fp32). q, k [1, T, nk, dk], v [1, T, nv, dv], g and
// beta [1, T, nv]; `state` [1, nv, dk, dv] fp32 or undefined (zeros), replaced
// by the final state. Returns [1, T, nv, dv] in q's dtype.
at::Tensor chunk_gated_delta_rule(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& g,
                                  const at::Tensor& beta, std::int64_t chunk, at::Tensor& state);
at::Tensor recurrent_gated_delta_rule(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      const at::Tensor& g, const at::Tensor& beta, at::Tensor& state);

struct AttentionParams {
  at::Tensor q_proj, k_proj, v_proj, o_proj, q_norm, k_norm;
  std::int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0, rotary_dim = 0;
  double rope_theta = 1e7, eps = 1e-6;
};

// Keys (after k_norm and RoPE) and values, model dtype, in buffers [1, nkv, capacity, hd]
// whose first length() positions hold the cache. append() writes past length() and grows
// the capacity geometrically, so a token costs O(its own keys), not a copy of the cache; a
// copy of the struct shares the buffers but keeps its own length (what it holds stays valid).
struct KvCache {
  at::Tensor key_buffer, value_buffer;
  std::int64_t size = 0;
  std::int64_t length() const { return size; }
  at::Tensor keys() const { return key_buffer.narrow(2, 0, size); }  // [1, nkv, S, hd]
  at::Tensor values() const { return value_buffer.narrow(2, 0, size); }
  void append(const at::Tensor& k, const at::Tensor& v);  // [1, nkv, T, hd] each
};

// Gated full attention for x [T, H] at positions cache.length() + [0, T).
at::Tensor gated_attention(const at::Tensor& x, const AttentionParams& p, KvCache& cache);

}  // namespace qgpu::torch_backend::ops
