// TorchBackend: tensors, states, argument checks and the SDK surface over qwen35_ops.
//
// Every method validates its arguments first (one-line errors naming the
// operation, the argument and both shapes) and turns any exception from
// LibTorch into a Status, so nothing throws across the plugin boundary.
#include "torch_backend.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/api/include/torch/version.h>

#include <cstring>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "qwen35_ops.h"

namespace qgpu::torch_backend {
namespace {

class TorchTensor final : public sdk::Tensor {
 public:
  TorchTensor(const sdk::TensorBackend* owner, at::Tensor value) : owner_(owner), value_(std::move(value)) {}
  void release() noexcept override { delete this; }
  const sdk::TensorBackend* owner() const override { return owner_; }
  sdk::DType dtype() const override;
  std::int32_t rank() const override { return static_cast<std::int32_t>(value_.dim()); }
  std::int64_t dim(std::int32_t axis) const override {
    return axis >= 0 && axis < value_.dim() ? value_.size(axis) : 0;
  }
  const at::Tensor& value() const { return value_; }

 private:
  const sdk::TensorBackend* owner_;
  at::Tensor value_;
};

class TorchState final : public sdk::LayerState {
 public:
  enum class Kind { kEmpty, kDeltaNet, kAttention };
  explicit TorchState(const sdk::TensorBackend* owner) : owner_(owner) {}
  void release() noexcept override { delete this; }
  const sdk::TensorBackend* owner() const override { return owner_; }
  std::int64_t tokens() const override { return tokens_; }
  void reset() override {
    kind = Kind::kEmpty;
    tokens_ = 0;
    delta_net = {};
    kv = {};
  }

  Kind kind = Kind::kEmpty;
  std::int64_t tokens_ = 0;
  ops::DeltaNetState delta_net;
  ops::KvCache kv;

 private:
  const sdk::TensorBackend* owner_;
};

at::ScalarType to_aten(sdk::DType dtype) {
  switch (dtype) {
    case sdk::DType::kF32: return at::kFloat;
    case sdk::DType::kBF16: return at::kBFloat16;
    case sdk::DType::kF16: return at::kHalf;
    case sdk::DType::kI32: return at::kInt;
    case sdk::DType::kI64: return at::kLong;
    case sdk::DType::kU8: return at::kByte;
    case sdk::DType::kBool: return at::kBool;
  }
  return at::kFloat;
}

sdk::DType from_aten(at::ScalarType type) {
  switch (type) {
    case at::kBFloat16: return sdk::DType::kBF16;
    case at::kHalf: return sdk::DType::kF16;
    case at::kInt: return sdk::DType::kI32;
    case at::kLong: return sdk::DType::kI64;
    case at::kByte: return sdk::DType::kU8;
    case at::kBool: return sdk::DType::kBool;
    default: return sdk::DType::kF32;
  }
}

sdk::DType TorchTensor::dtype() const {
  return from_aten(value_.scalar_type());
}

at::Device to_aten(sdk::Device device) {
  switch (device.type) {
    case sdk::DeviceType::kCpu: return at::Device(at::kCPU);
    case sdk::DeviceType::kCuda: return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device.index));
    case sdk::DeviceType::kMps: return at::Device(at::kMPS, static_cast<c10::DeviceIndex>(device.index));
  }
  return at::Device(at::kCPU);
}

bool device_available(sdk::DeviceType type) {
  switch (type) {
    case sdk::DeviceType::kCpu: return true;
    case sdk::DeviceType::kCuda: return at::hasCUDA();
    case sdk::DeviceType::kMps: return at::hasMPS();
  }
  return false;
}

std::string shape_string(at::IntArrayRef shape) {
  std::ostringstream out;
  out << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

sdk::Handle<sdk::Tensor> wrap(const sdk::TensorBackend* owner, at::Tensor value) {
  return sdk::Handle<sdk::Tensor>(new TorchTensor(owner, std::move(value)));
}

// Argument checks for one operation; the first failure is kept.
class Check {
 public:
  Check(const sdk::TensorBackend* owner, std::string op) : owner_(owner), op_(std::move(op)) {}

  // The tensor behind a required argument, or nullptr (and an error).
  const at::Tensor* tensor(const sdk::Tensor* t, const char* name) {
    if (!status_.is_ok()) return nullptr;
    if (t == nullptr) return fail(std::string(name) + " is missing"), nullptr;
    if (t->owner() != owner_) return fail(std::string(name) + " belongs to another backend"), nullptr;
    return &static_cast<const TorchTensor*>(t)->value();
  }
  // Same, with an expected shape (-1: any size).
  const at::Tensor* tensor(const sdk::Tensor* t, const char* name, std::vector<std::int64_t> shape) {
    const at::Tensor* value = tensor(t, name);
    if (value == nullptr) return nullptr;
    bool ok = value->dim() == static_cast<std::int64_t>(shape.size());
    for (std::size_t i = 0; ok && i < shape.size(); ++i) ok = shape[i] < 0 || shape[i] == value->size(i);
    if (!ok) {
      for (auto& d : shape) d = d < 0 ? 0 : d;
      fail(std::string(name) + " has shape " + shape_string(value->sizes()) + ", expected " + shape_string(shape));
      return nullptr;
    }
    return value;
  }
  void require(bool condition, const std::string& message) {
    if (status_.is_ok() && !condition) fail(message);
  }
  bool ok() const { return status_.is_ok(); }
  const sdk::Status& status() const { return status_; }
  const std::string& op() const { return op_; }

 private:
  void fail(const std::string& message) { status_ = sdk::invalid_argument(op_ + ": " + message); }

  const sdk::TensorBackend* owner_;
  std::string op_;
  sdk::Status status_;
};

// Runs `body`, turning a LibTorch exception into an error naming the operation.
template <typename T>
sdk::Expected<T> guarded(const std::string& op, const std::function<sdk::Expected<T>()>& body) {
  try {
    return body();
  } catch (const c10::Error& e) {
    std::string message = e.what_without_backtrace();
    if (auto nl = message.find('\n'); nl != std::string::npos) message.resize(nl);
    return sdk::internal_error(op + ": LibTorch: " + message);
  } catch (const std::exception& e) {
    return sdk::internal_error(op + ": " + e.what());
  }
}

TorchState* state_of(sdk::LayerState& state, const sdk::TensorBackend* owner) {
  return state.owner() == owner ? static_cast<TorchState*>(&state) : nullptr;
}

}  // namespace

TorchBackend::TorchBackend(const BackendOptions& options) : options_(options) {
  if (!device_available(options_.device.type)) {
    throw std::runtime_error("device '" + sdk::device_name(options_.device) + "' is not available in this LibTorch " +
                             TORCH_VERSION + " build");
  }
  if (options_.dtype != sdk::DType::kF32 && options_.dtype != sdk::DType::kBF16) {
    throw std::runtime_error("compute dtype '" + std::string(sdk::dtype_name(options_.dtype)) +
                             "' is not supported (f32 or bf16)");
  }
  if (options_.threads > 0) at::set_num_threads(options_.threads);
  // fp32 products in fp32 and bf16 sums in fp32 on CUDA: the circuits' exactness (and the merge's
  // silence certificate) assume both. No effect on the CPU.
  at::globalContext().setAllowTF32CuBLAS(false);
  at::globalContext().setAllowTF32CuDNN(false);
#if TORCH_VERSION_MAJOR >= 2
  at::globalContext().setAllowBF16ReductionCuBLAS(false);
#endif
}

TorchBackend::TorchBackend(const sdk::PluginContext& context) : TorchBackend(options_from(context.options)) {}

sdk::Expected<sdk::Description> TorchBackend::describe() const {
  sdk::Description d;
  d.properties = {
      {"libtorch", TORCH_VERSION},
      {"device", sdk::device_name(options_.device)},
      {"dtype", std::string(sdk::dtype_name(options_.dtype))},
      {"threads", std::to_string(at::get_num_threads())},
      {"cuda", at::hasCUDA() ? "available" : "not in this build"},
      {"mps", at::hasMPS() ? "available" : "not in this build"},
      {"delta_rule.chunk", "64"},
  };
  d.capabilities = {
      {"device.cpu", true, ""},
      {"device.cuda", at::hasCUDA(), at::hasCUDA() ? "" : "LibTorch built without CUDA"},
      {"device.mps", at::hasMPS(), at::hasMPS() ? "" : "LibTorch built without MPS"},
      {"dtype.f32", true, ""},
      {"dtype.bf16", true, "HF transformers roundings (docs/BACKEND.md)"},
      {"op.embed", true, ""},
      {"op.rms_norm", true, "zero-centred (1 + w)"},
      {"op.mlp", true, "SwiGLU"},
      {"op.gated_delta_net", true, "recurrent and chunked (64) delta rule, conv + recurrent state"},
      {"op.gated_attention", true, "gated q_proj, q/k norm, partial RoPE, GQA, causal, KV cache"},
      {"op.add", true, ""},
      {"op.linear", true, "lm_head, tied or untied"},
      {"op.rows", true, ""},
  };
  return d;
}

sdk::Expected<sdk::Handle<sdk::Tensor>> TorchBackend::upload(const sdk::TensorView& host) {
  QGPU_RETURN_IF_ERROR(sdk::validate_view(host).with_context("upload"));
  if (host.device.type != sdk::DeviceType::kCpu) {
    return sdk::unsupported("upload: the view is on " + sdk::device_name(host.device) + ", expected host memory");
  }
  if (host.data == nullptr && host.numel() > 0) return sdk::invalid_argument("upload: the view has no data");
  return guarded<sdk::Handle<sdk::Tensor>>("upload", [&]() -> sdk::Expected<sdk::Handle<sdk::Tensor>> {
    std::vector<std::int64_t> shape(host.shape, host.shape + host.rank);
    const auto options = at::TensorOptions().dtype(to_aten(host.dtype));
    at::Tensor view = host.is_contiguous()
                          ? at::from_blob(host.data, shape, options)
                          : at::from_blob(host.data, shape,
                                          std::vector<std::int64_t>(host.strides, host.strides + host.rank), options);
    const auto target = at::isFloatingType(view.scalar_type()) ? to_aten(options_.dtype) : view.scalar_type();
    // The copy owns its memory; the caller's buffer may go away after this call.
    return wrap(this, view.to(to_aten(options_.device), target, /*non_blocking=*/false, /*copy=*/true).contiguous());
  });
}

sdk::Status TorchBackend::download(const sdk::Tensor& tensor, const sdk::TensorView& host) {
  Check check(this, "download");
  const at::Tensor* value = check.tensor(&tensor, "tensor");
  if (!check.ok()) return check.status();
  QGPU_RETURN_IF_ERROR(sdk::validate_view(host).with_context("download"));
  if (host.device.type != sdk::DeviceType::kCpu || !host.is_contiguous() || host.data == nullptr) {
    return sdk::invalid_argument("download: the destination must be contiguous host memory");
  }
  const std::vector<std::int64_t> shape(host.shape, host.shape + host.rank);
  if (value->sizes().vec() != shape) {
    return sdk::invalid_argument("download: tensor has shape " + shape_string(value->sizes()) + ", destination " +
                                 shape_string(shape));
  }
  auto result = guarded<bool>("download", [&]() -> sdk::Expected<bool> {
    auto out = value->to(at::kCPU, to_aten(host.dtype)).contiguous();
    std::memcpy(host.data, out.data_ptr(), host.nbytes());
    return true;
  });
  return result.status();
}

sdk::Status TorchBackend::download_state(const sdk::LayerState& state, const sdk::TensorView& host) {
  if (state.owner() != this) return sdk::invalid_argument("download_state: the state belongs to another backend");
  const auto& s = static_cast<const TorchState&>(state);
  if (s.kind != TorchState::Kind::kDeltaNet || !s.delta_net.recurrent.defined())
    return sdk::invalid_argument(s.kind == TorchState::Kind::kAttention
                                     ? "download_state: an attention layer's cache has no recurrent state"
                                     : "download_state: the state is empty (no token has run through its layer)");
  QGPU_RETURN_IF_ERROR(sdk::validate_view(host).with_context("download_state"));
  if (host.device.type != sdk::DeviceType::kCpu || !host.is_contiguous() || host.data == nullptr ||
      host.dtype != sdk::DType::kF32)
    return sdk::invalid_argument("download_state: the destination must be contiguous f32 host memory");
  const at::Tensor& r = s.delta_net.recurrent;  // [1, nv, dk, dv]
  const std::vector<std::int64_t> want(host.shape, host.shape + host.rank);
  if (r.dim() != 4 || r.size(0) != 1 || std::vector<std::int64_t>(r.sizes().begin() + 1, r.sizes().end()) != want)
    return sdk::invalid_argument("download_state: the state has shape " + shape_string(r.sizes()) + ", destination " +
                                 shape_string(want));
  auto result = guarded<bool>("download_state", [&]() -> sdk::Expected<bool> {
    auto out = r.to(at::kCPU, at::kFloat).contiguous();
    std::memcpy(host.data, out.data_ptr(), host.nbytes());
    return true;
  });
  return result.status();
}

sdk::Expected<sdk::Handle<sdk::LayerState>> TorchBackend::create_state() {
  return sdk::Handle<sdk::LayerState>(new TorchState(this));
}

sdk::Status TorchBackend::copy_state(const sdk::LayerState& from, sdk::LayerState& to) {
  if (from.owner() != this || to.owner() != this)
    return sdk::invalid_argument("copy_state: a state belongs to another backend");
  if (&from == &to) return sdk::Status::ok();
  const auto& a = static_cast<const TorchState&>(from);
  auto& b = static_cast<TorchState&>(to);
  auto clone = [](const at::Tensor& t) { return t.defined() ? t.clone() : at::Tensor(); };
  auto result = guarded<bool>("copy_state", [&]() -> sdk::Expected<bool> {
    ops::DeltaNetState delta_net{clone(a.delta_net.conv), clone(a.delta_net.recurrent)};
    ops::KvCache kv;
    kv.key_buffer = clone(a.kv.key_buffer);
    kv.value_buffer = clone(a.kv.value_buffer);
    kv.size = a.kv.size;
    b.kind = a.kind;
    b.tokens_ = a.tokens_;
    b.delta_net = std::move(delta_net);
    b.kv = std::move(kv);
    return true;
  });
  return result.status();
}

sdk::Status TorchBackend::truncate_state(sdk::LayerState& state, std::int64_t tokens) {
  if (state.owner() != this) return sdk::invalid_argument("truncate_state: the state belongs to another backend");
  auto& s = static_cast<TorchState&>(state);
  if (tokens < 0 || tokens > s.tokens_)
    return sdk::invalid_argument("truncate_state: " + std::to_string(tokens) + " tokens, the state holds " +
                                 std::to_string(s.tokens_));
  if (tokens == s.tokens_ || s.kind == TorchState::Kind::kEmpty) return sdk::Status::ok();
  if (tokens == 0) {
    s.reset();
    return sdk::Status::ok();
  }
  if (s.kind == TorchState::Kind::kDeltaNet)
    return sdk::unsupported("truncate_state: a Gated DeltaNet state cannot forget tokens (" +
                            std::to_string(s.tokens_) + " held, " + std::to_string(tokens) +
                            " asked): restore a copy taken at that length");
  s.kv.size = tokens;  // the buffers keep their capacity; the next append writes from here
  s.tokens_ = tokens;
  return sdk::Status::ok();
}

sdk::Expected<sdk::Handle<sdk::Tensor>> TorchBackend::embed(const sdk::Tensor& table,
                                                            std::span<const std::int64_t> ids) {
  Check check(this, "embed");
  const at::Tensor* t = check.tensor(&table, "table", {-1, -1});
  check.require(!ids.empty(), "no token ids");
  if (!check.ok()) return check.status();
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= t->size(0)) {
      return sdk::invalid_argument("embed: token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                                   " is outside the table's " + std::to_string(t->size(0)) + " rows");
    }
  }
  return guarded<sdk::Handle<sdk::Tensor>>("embed", [&]() -> sdk::Expected<sdk::Handle<sdk::Tensor>> {
    auto index = at::tensor(std::vector<std::int64_t>(ids.begin(), ids.end()), at::kLong).to(t->device());
    return wrap(this, at::embedding(*t, index));
  });
}

sdk::Expected<sdk::Handle<sdk::Tensor>> TorchBackend::rms_norm(const sdk::Tensor& x, const sdk::Tensor& weight,
                                                               double eps) {
  Check check(this, "rms_norm");
  const at::Tensor* xv = check.tensor(&x, "x");
  const at::Tensor* wv = check.ok() ? check.tensor(&weight, "weight", {xv->dim() > 0 ? xv->size(-1) : 0}) : nullptr;
  check.require(eps > 0, "eps must be positive");
  if (!check.ok()) return check.status();
  return guarded<sdk::Handle<sdk::Tensor>>("rms_norm", [&]() -> sdk::Expected<sdk::Handle<sdk::Tensor>> {
    return wrap(this, ops::rms_norm_zero_centred(*xv, *wv, eps));
  });
}

sdk::Expected<sdk::Handle<sdk::Tensor>> TorchBackend::mlp(const sdk::Tensor& x, const sdk::MlpWeights& w) {
  Check check(this, "mlp");
  const at::Tensor* xv = check.tensor(&x, "x", {-1, -1});
  const auto H = check.ok() ? xv->size(1) : 0;
  const at::Tensor* gate = check.tensor(w.gate_proj, "gate_proj", {-1, H});
  const auto I = check.ok() ? gate->size(0) : 0;
  const at::Tensor* up = check.tensor(w.up_proj, "up_proj", {I, H});
  const at::Tensor* down = check.tensor(w.down_proj, "down_proj", {H, I});
  if (!check.ok()) return check.status();
  return guarded<sdk::Handle<sdk::Tensor>>("mlp", [&]() -> sdk::Expected<sdk::Handle<sdk::Tensor>> {
    return wrap(this, ops::swiglu(*xv, *gate, *up, *down));
  });
}

sdk::Expected<sdk::Handle<sdk::Tensor>> TorchBackend::gated_delta_net(const sdk::Tensor& x,
                                                                      const sdk::DeltaNetWeights& w,
                                                                      const sdk::DeltaNetShape& s,
                                                                      sdk::LayerState& state, sdk::DeltaRule rule) {
  Check check(this, "gated_delta_net");
  check.require(
      s.num_key_heads > 0 && s.num_value_heads > 0 && s.key_head_dim > 0 && s.value_head_dim > 0 && s.conv_kernel > 0,
      "every shape field must be positive");
  check.require(check.ok() && s.num_value_heads % s.num_key_heads == 0,
                "num_value_heads " + std::to_string(s.num_value_heads) + " is not a multiple of num_key_heads " +
                    std::to_string(s.num_key_heads));
  const at::Tensor* xv = check.tensor(&x, "x", {-1, -1});
  check.require(!check.ok() || xv->size(0) > 0, "x has no tokens");
  if (!check.ok()) return check.status();
  const auto H = xv->size(1), K = s.num_key_heads * s.key_head_dim, V = s.num_value_heads * s.value_head_dim;
  const auto C = 2 * K + V, nv = s.num_value_heads;
  ops::DeltaNetParams p;
  const at::Tensor* t = nullptr;
  if ((t = check.tensor(w.in_proj_qkv, "in_proj_qkv", {C, H}))) p.in_proj_qkv = *t;
  if ((t = check.tensor(w.in_proj_z, "in_proj_z", {V, H}))) p.in_proj_z = *t;
  if ((t = check.tensor(w.in_proj_b, "in_proj_b", {nv, H}))) p.in_proj_b = *t;
  if ((t = check.tensor(w.in_proj_a, "in_proj_a", {nv, H}))) p.in_proj_a = *t;
  if ((t = check.tensor(w.conv1d, "conv1d", {C, 1, s.conv_kernel}))) p.conv1d = *t;
  if ((t = check.tensor(w.dt_bias, "dt_bias", {nv}))) p.dt_bias = *t;
  if ((t = check.tensor(w.a_log, "A_log", {nv}))) p.a_log = *t;
  if ((t = check.tensor(w.norm, "norm", {s.value_head_dim}))) p.norm = *t;
  if ((t = check.tensor(w.out_proj, "out_proj", {H, V}))) p.out_proj = *t;
  TorchState* st = state_of(state, this);
  check.require(st != nullptr, "the state belongs to another backend");
  check.require(!st || st->kind != TorchState::Kind::kAttention, "the state holds a KV cache, not a DeltaNet state");
  check.require(!st || !st->delta_net.has_conv() || st->delta_net.conv.size(1) == C,
                "the state was made for another layer shape (conv channels " +
                    std::to_string(st && st->delta_net.has_conv() ? st->delta_net.conv.size(1) : 0) + ", expected " +
                    std::to_string(C) + ")");
  if (!check.ok()) return check.status();
  p.num_key_heads = s.num_key_heads;
  p.num_value_heads = s.num_value_heads;
  p.key_head_dim = s.key_head_dim;
  p.value_head_dim = s.value_head_dim;
  p.conv_kernel = s.conv_kernel;
  p.eps = s.eps;
  const auto r = rule == sdk::DeltaRule::kRecurrent ? ops::Rule::kRecurrent
                 : rule == sdk::DeltaRule::kChunked ? ops::Rule::kChunked
                                                    : ops::Rule::kAuto;
  return guarded<sdk::Handle<sdk::Tensor>>("gated_delta_net", [&]() -> sdk::Expected<sdk::Handle<sdk::Tensor>> {
    // Work on a copy of the state so a failure leaves the caller's state as it was.
    ops::DeltaNetState next = st->delta_net;
    auto out = ops::gated_delta_net(*xv, p, next, r);
    st->delta_net = std::move(next);
    st->kind = TorchState::Kind::kDeltaNet;
    st->tokens_ += xv->size(0);
    return wrap(this, std::move(out));
  });
}

sdk::Expected<sdk::Handle<sdk::Tensor>> TorchBackend::gated_attention(const sdk::Tensor& x,
                                                                      const sdk::AttentionWeights& w,
                                                                      const sdk::AttentionShape& s,
                                                                      sdk::LayerState& cache) {
  Check check(this, "gated_attention");
  check.require(s.num_heads > 0 && s.num_kv_heads > 0 && s.head_dim > 0, "every head count and size must be positive");
  check.require(check.ok() && s.num_heads % s.num_kv_heads == 0, "num_heads " + std::to_string(s.num_heads) +
                                                                     " is not a multiple of num_kv_heads " +
                                                                     std::to_string(s.num_kv_heads));
  check.require(s.rotary_dim >= 0 && s.rotary_dim % 2 == 0 && s.rotary_dim <= s.head_dim,
                "rotary_dim " + std::to_string(s.rotary_dim) + " must be even and at most head_dim " +
                    std::to_string(s.head_dim));
  check.require(s.rope_theta > 0, "rope_theta must be positive");
  const at::Tensor* xv = check.tensor(&x, "x", {-1, -1});
  check.require(!check.ok() || xv->size(0) > 0, "x has no tokens");
  if (!check.ok()) return check.status();
  const auto H = xv->size(1), hd = s.head_dim;
  ops::AttentionParams p;
  const at::Tensor* t = nullptr;
  if ((t = check.tensor(w.q_proj, "q_proj", {2 * s.num_heads * hd, H}))) p.q_proj = *t;
  if ((t = check.tensor(w.k_proj, "k_proj", {s.num_kv_heads * hd, H}))) p.k_proj = *t;
  if ((t = check.tensor(w.v_proj, "v_proj", {s.num_kv_heads * hd, H}))) p.v_proj = *t;
  if ((t = check.tensor(w.o_proj, "o_proj", {H, s.num_heads * hd}))) p.o_proj = *t;
  if ((t = check.tensor(w.q_norm, "q_norm", {hd}))) p.q_norm = *t;
  if ((t = check.tensor(w.k_norm, "k_norm", {hd}))) p.k_norm = *t;
  TorchState* st = state_of(cache, this);
  check.require(st != nullptr, "the cache belongs to another backend");
  check.require(!st || st->kind != TorchState::Kind::kDeltaNet, "the state holds a DeltaNet state, not a KV cache");
  check.require(!st || !st->kv.key_buffer.defined() ||
                    (st->kv.key_buffer.size(1) == s.num_kv_heads && st->kv.key_buffer.size(3) == hd),
                "the cache was made for another head shape");
  if (!check.ok()) return check.status();
  p.num_heads = s.num_heads;
  p.num_kv_heads = s.num_kv_heads;
  p.head_dim = hd;
  p.rotary_dim = s.rotary_dim;
  p.rope_theta = s.rope_theta;
  p.eps = s.eps;
  return guarded<sdk::Handle<sdk::Tensor>>("gated_attention", [&]() -> sdk::Expected<sdk::Handle<sdk::Tensor>> {
    ops::KvCache next = st->kv;
    auto out = ops::gated_attention(*xv, p, next);
    st->kv = std::move(next);
    st->kind = TorchState::Kind::kAttention;
    st->tokens_ += xv->size(0);
    return wrap(this, std::move(out));
  });
}

sdk::Expected<sdk::Handle<sdk::Tensor>> TorchBackend::add(const sdk::Tensor& a, const sdk::Tensor& b) {
  Check check(this, "add");
  const at::Tensor* av = check.tensor(&a, "a");
  const at::Tensor* bv = check.ok() ? check.tensor(&b, "b", av->sizes().vec()) : nullptr;
  if (!check.ok()) return check.status();
  return guarded<sdk::Handle<sdk::Tensor>>(
      "add", [&]() -> sdk::Expected<sdk::Handle<sdk::Tensor>> { return wrap(this, *av + *bv); });
}

sdk::Expected<sdk::Handle<sdk::Tensor>> TorchBackend::linear(const sdk::Tensor& x, const sdk::Tensor& weight) {
  Check check(this, "linear");
  const at::Tensor* xv = check.tensor(&x, "x", {-1, -1});
  const at::Tensor* wv = check.ok() ? check.tensor(&weight, "weight", {-1, xv->size(1)}) : nullptr;
  if (!check.ok()) return check.status();
  return guarded<sdk::Handle<sdk::Tensor>>(
      "linear", [&]() -> sdk::Expected<sdk::Handle<sdk::Tensor>> { return wrap(this, ops::project(*xv, *wv)); });
}

sdk::Expected<sdk::Handle<sdk::Tensor>> TorchBackend::rows(const sdk::Tensor& x, std::int64_t begin, std::int64_t end) {
  Check check(this, "rows");
  const at::Tensor* xv = check.tensor(&x, "x");
  check.require(!check.ok() || xv->dim() >= 1, "x is a scalar");
  if (!check.ok()) return check.status();
  if (begin < 0 || begin >= end || end > xv->size(0)) {
    return sdk::invalid_argument("rows: range [" + std::to_string(begin) + ", " + std::to_string(end) +
                                 ") is empty or outside the tensor's " + std::to_string(xv->size(0)) + " rows");
  }
  return guarded<sdk::Handle<sdk::Tensor>>("rows", [&]() -> sdk::Expected<sdk::Handle<sdk::Tensor>> {
    return wrap(this, xv->slice(0, begin, end).contiguous());
  });
}

BackendOptions options_from(const sdk::Options& options) {
  auto take = [](auto expected) {
    if (!expected) throw std::runtime_error(expected.error().message());
    return std::move(expected).value();
  };
  BackendOptions out;
  out.device = take(sdk::parse_device(take(options.get_string("device"))));
  out.dtype = take(sdk::parse_dtype(take(options.get_string("dtype"))));
  out.threads = static_cast<int>(take(options.get_int("threads")));
  return out;
}

}  // namespace qgpu::torch_backend
