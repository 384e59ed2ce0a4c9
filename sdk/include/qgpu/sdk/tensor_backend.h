// TensorBackend: where tensors live and the layer math runs.
//
// A base model runs its forward pass through these calls: it uploads its
// weights once, keeps one LayerState per layer and sequence, and chains the
// layer operations on tensors the backend owns. No framework type crosses
// the boundary: tensors are opaque Tensor objects, host data moves as
// TensorView, and every object the backend hands out is destroyed by its own
// release() inside the plugin (Handle does that), never by the caller's delete.
//
// Numerics follow Hugging Face transformers' Qwen3.5 text model in the
// backend's compute dtype (docs/BACKEND.md lists every upcast and rounding).
// The layer operations have defaults that answer "not available", so a
// backend implements only what it describes as available.
#pragma once

#include <cstdint>
#include <span>
#include <utility>

#include "qgpu/sdk/plugin.h"
#include "qgpu/sdk/tensor_view.h"

namespace qgpu::sdk {

class TensorBackend;

// Base of every object a backend hands out. release() destroys it in the
// plugin that made it (its allocator, its destructor).
class QGPU_SDK_API BackendObject {
 public:
  virtual void release() noexcept = 0;
  // The backend that made the object; operations refuse objects of another backend.
  virtual const TensorBackend* owner() const = 0;

 protected:
  ~BackendObject() = default;
};

// Move-only owner of a backend object; releases it on destruction. Must not
// outlive the backend that made the object.
template <typename T>
class Handle {
 public:
  Handle() = default;
  explicit Handle(T* object) : object_(object) {}
  Handle(Handle&& other) noexcept : object_(std::exchange(other.object_, nullptr)) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      object_ = std::exchange(other.object_, nullptr);
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }

  void reset() {
    if (object_ != nullptr) std::exchange(object_, nullptr)->release();
  }
  T* get() const { return object_; }
  T& operator*() const { return *object_; }
  T* operator->() const { return object_; }
  explicit operator bool() const { return object_ != nullptr; }

 private:
  T* object_ = nullptr;
};

// A tensor in the backend's memory (on its device), row-major.
class QGPU_SDK_API Tensor : public BackendObject {
 public:
  virtual DType dtype() const = 0;
  virtual std::int32_t rank() const = 0;
  virtual std::int64_t dim(std::int32_t axis) const = 0;

 protected:
  ~Tensor() = default;
};

// The per-layer, per-sequence state that persists across calls: for a Gated
// DeltaNet layer its conv state (the last kernel-1 pre-conv inputs) and its
// fp32 recurrent state [value heads, key dim, value dim]; for a full-attention
// layer its KV cache. A fresh state is empty; the first operation that uses
// it fixes its kind and shapes.
class QGPU_SDK_API LayerState : public BackendObject {
 public:
  // Tokens this state has consumed: the position of the next token.
  virtual std::int64_t tokens() const = 0;
  // Back to empty (a new sequence).
  virtual void reset() = 0;

 protected:
  ~LayerState() = default;
};

// Shapes of a Gated DeltaNet layer (Qwen3.5 `linear_attention`).
struct DeltaNetShape {
  std::int64_t num_key_heads = 0;    // nk: q and k heads
  std::int64_t num_value_heads = 0;  // nv: a multiple of nk; v-head h reads k-head h / (nv / nk)
  std::int64_t key_head_dim = 0;     // dk
  std::int64_t value_head_dim = 0;   // dv
  std::int64_t conv_kernel = 0;      // causal depthwise conv width (4)
  double eps = 1e-6;                 // gated RMSNorm eps
};

// Shapes of a gated full-attention layer (Qwen3.5 `full_attention`).
struct AttentionShape {
  std::int64_t num_heads = 0;     // query heads
  std::int64_t num_kv_heads = 0;  // GQA: query head i reads kv head i / (num_heads / num_kv_heads)
  std::int64_t head_dim = 0;
  std::int64_t rotary_dim = 0;  // RoPE on the first rotary_dim dims of each head (NeoX halves)
  double rope_theta = 1e7;
  double eps = 1e-6;  // q_norm / k_norm eps
};

// Weights, as uploaded tensors with the checkpoint's shapes (Linear weights [out, in]).
struct MlpWeights {
  const Tensor* gate_proj = nullptr;  // [I, H]
  const Tensor* up_proj = nullptr;    // [I, H]
  const Tensor* down_proj = nullptr;  // [H, I]
};

struct DeltaNetWeights {
  const Tensor* in_proj_qkv = nullptr;  // [2K+V, H], channels [q | k | v]
  const Tensor* in_proj_z = nullptr;    // [V, H]
  const Tensor* in_proj_b = nullptr;    // [nv, H]
  const Tensor* in_proj_a = nullptr;    // [nv, H]
  const Tensor* conv1d = nullptr;       // [2K+V, 1, kernel]
  const Tensor* dt_bias = nullptr;      // [nv]
  const Tensor* a_log = nullptr;        // [nv]
  const Tensor* norm = nullptr;         // [dv], plain x*w form
  const Tensor* out_proj = nullptr;     // [H, V]
};

struct AttentionWeights {
  const Tensor* q_proj = nullptr;  // [2*nh*hd, H], per head [query hd | gate hd]
  const Tensor* k_proj = nullptr;  // [nkv*hd, H]
  const Tensor* v_proj = nullptr;  // [nkv*hd, H]
  const Tensor* o_proj = nullptr;  // [H, nh*hd]
  const Tensor* q_norm = nullptr;  // [hd], zero-centred (1 + w)
  const Tensor* k_norm = nullptr;  // [hd], zero-centred (1 + w)
};

// Which form of the delta rule runs. kAuto is transformers' choice: the
// token-by-token recurrence for one token after earlier tokens, the chunked
// (WY, chunk 64) algorithm otherwise.
enum class DeltaRule : std::uint8_t { kAuto, kRecurrent, kChunked };

class QGPU_SDK_API TensorBackend : public Plugin {
 public:
  using Interface = TensorBackend;
  static constexpr QgpuPluginKind kKind = QGPU_PLUGIN_TENSOR_BACKEND;

  ~TensorBackend() override;
  // The device and compute dtype chosen from the config.
  virtual Device device() const = 0;
  virtual DType dtype() const = 0;

  // --- Memory. Activations x are [T, H] in the compute dtype.
  // Copies host memory in; floating-point data becomes the compute dtype,
  // integers keep theirs.
  virtual Expected<Handle<Tensor>> upload(const TensorView& host) { return not_available("upload"); }
  // Copies a tensor out into caller-owned host memory of the same shape
  // (f32 or bf16; converted as needed).
  virtual Status download(const Tensor& tensor, const TensorView& host) { return not_available("download"); }
  virtual Expected<Handle<LayerState>> create_state() { return not_available("layer state"); }
  // `to` becomes an independent copy of `from` (both made by this backend): its kind, its
  // tokens and every tensor (a Gated DeltaNet layer's conv window and recurrent state, an
  // attention layer's KV cache). What sequences fork, snapshot and restore with.
  virtual Status copy_state(const LayerState& from, LayerState& to) { return not_available("state copy"); }
  // Drops what the state holds of the tokens at positions >= `tokens`: an attention layer's
  // KV cache can; a Gated DeltaNet layer's state cannot forget (an error unless `tokens` is
  // what it holds: restore a copy instead); an empty state is left as it is.
  virtual Status truncate_state(LayerState& state, std::int64_t tokens) { return not_available("state truncation"); }
  // Copies a Gated DeltaNet layer's recurrent state S out into caller-owned f32 host
  // memory [value heads, dk, dv] (HF's recurrent_state without the batch axis: row i of
  // head h is what the one-hot key e_i retrieves); an error for an empty or attention state.
  virtual Status download_state(const LayerState& state, const TensorView& host) {
    return not_available("recurrent state download");
  }

  // --- Layer operations (Qwen3.5, transformers numerics).
  // Rows `ids` of `table` [vocab, H], no scaling.
  virtual Expected<Handle<Tensor>> embed(const Tensor& table, std::span<const std::int64_t> ids) {
    return not_available("embedding");
  }
  // Zero-centred RMSNorm over the last axis: x * rsqrt(mean(x^2) + eps) * (1 + w), in fp32.
  virtual Expected<Handle<Tensor>> rms_norm(const Tensor& x, const Tensor& weight, double eps) {
    return not_available("rms_norm");
  }
  // down(silu(gate(x)) * up(x)).
  virtual Expected<Handle<Tensor>> mlp(const Tensor& x, const MlpWeights& weights) {
    return not_available("SwiGLU MLP");
  }
  // The Gated DeltaNet mixer for T tokens continuing `state`.
  virtual Expected<Handle<Tensor>> gated_delta_net(const Tensor& x, const DeltaNetWeights& weights,
                                                   const DeltaNetShape& shape, LayerState& state,
                                                   DeltaRule rule = DeltaRule::kAuto) {
    return not_available("Gated DeltaNet");
  }
  // The gated full-attention mixer for T tokens at positions cache.tokens()..+T-1, causal over the cache.
  virtual Expected<Handle<Tensor>> gated_attention(const Tensor& x, const AttentionWeights& weights,
                                                   const AttentionShape& shape, LayerState& cache) {
    return not_available("gated attention");
  }
  // a + b (the residual add, one rounding in the compute dtype).
  virtual Expected<Handle<Tensor>> add(const Tensor& a, const Tensor& b) { return not_available("add"); }
  // x * weight^T, weight [out, in]: the lm_head (the embedding table when tied).
  virtual Expected<Handle<Tensor>> linear(const Tensor& x, const Tensor& weight) { return not_available("linear"); }
  // Rows [begin, end) of a [T, ...] tensor (e.g. the last position before the lm_head).
  virtual Expected<Handle<Tensor>> rows(const Tensor& x, std::int64_t begin, std::int64_t end) {
    return not_available("rows");
  }
};

// One pre-norm decoder layer (Qwen3.5's, QWEN35.md §2.1) over a backend's layer operations:
// h = x + mixer(rms_norm(x, input_norm)), then h + mlp(rms_norm(h, post_norm)). `mixer` takes the
// normed [T, H] rows to the token mixer's output (a Gated DeltaNet or an attention layer, with
// its state). The base plugin's stack and core's merged model (the circuit's layers on the dense
// path) both run their layers through this one definition.
template <typename Mixer>
Expected<Handle<Tensor>> decoder_layer(TensorBackend& backend, const Tensor& x, const Tensor& input_norm,
                                       const Tensor& post_norm, const MlpWeights& mlp, double eps, Mixer&& mixer) {
  Handle<Tensor> normed, mixed, h;
  QGPU_ASSIGN_OR_RETURN(normed, backend.rms_norm(x, input_norm, eps));
  QGPU_ASSIGN_OR_RETURN(mixed, mixer(*normed));
  QGPU_ASSIGN_OR_RETURN(h, backend.add(x, *mixed));
  QGPU_ASSIGN_OR_RETURN(normed, backend.rms_norm(*h, post_norm, eps));
  QGPU_ASSIGN_OR_RETURN(mixed, backend.mlp(*normed, mlp));
  return backend.add(*h, *mixed);
}

// A Qwen3.5 layer's weights by their checkpoint names below the layer's prefix (QWEN35.md):
// `get(suffix)` returns the tensor named "model.layers.N." + suffix (or however the caller
// keeps them), or null for one it lacks.
template <typename Get>
DeltaNetWeights delta_net_weights(Get&& get) {
  return {get("linear_attn.in_proj_qkv.weight"),
          get("linear_attn.in_proj_z.weight"),
          get("linear_attn.in_proj_b.weight"),
          get("linear_attn.in_proj_a.weight"),
          get("linear_attn.conv1d.weight"),
          get("linear_attn.dt_bias"),
          get("linear_attn.A_log"),
          get("linear_attn.norm.weight"),
          get("linear_attn.out_proj.weight")};
}
template <typename Get>
AttentionWeights attention_weights(Get&& get) {
  return {get("self_attn.q_proj.weight"), get("self_attn.k_proj.weight"), get("self_attn.v_proj.weight"),
          get("self_attn.o_proj.weight"), get("self_attn.q_norm.weight"), get("self_attn.k_norm.weight")};
}
template <typename Get>
MlpWeights mlp_weights(Get&& get) {
  return {get("mlp.gate_proj.weight"), get("mlp.up_proj.weight"), get("mlp.down_proj.weight")};
}

}  // namespace qgpu::sdk
