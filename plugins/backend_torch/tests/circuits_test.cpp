// The weight compiler's circuits on the real LibTorch backend (issue 4).
//
// Real circuits are compiled by qgpu::weights at Qwen3.5-2B layer shapes,
// exported as dense tensors (export_layer, fp32 and bf16), uploaded through
// sdk::TensorBackend and run as the pre-norm residual stack
// x += GatedDeltaNet(RMSNorm(x)); x += MLP(RMSNorm(x)). For every token:
//   (a) the outputs decoded from the residual equal plain integer references;
//   (b) the whole residual is bit-identical to qgpu::weights::ReferenceModel.
// Tokens go through the backend in two shapes: one token per call (decode:
// gemv / oneDNN with one row, HF's recurrence after the first token) and
// batches of rows (prefill shapes: gemm; the RAM keeps the recurrent rule so
// the DeltaNet state still advances token by token). A chunked prefill of the
// RAM sequence is reported separately (the circuit runs token by token, so
// that figure is informative). The smallest switch margin is measured on the
// backend's own pre-activations (gate_proj, in_proj_qkv q/k, in_proj_b/z) over
// the first batch of each run. Circuits.SiluModelsOnEveryBf16Value checks the
// one known model difference: the reference's bf16 SiLU is LibTorch 1.13's
// kernel, the backend's is fp32 rounded once.
//
// Cost: every layer is the full dense 2048x6144 math, so token counts are
// chosen for under a minute of CPU on one thread (see kDecodeTokens / kBatch).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "qgpu/weights/compile.h"
#include "qgpu/weights/primitives.h"
#include "qgpu/weights/reference.h"
#include "torch_backend.h"

namespace qgpu::torch_backend {
namespace {

namespace w = qgpu::weights;

constexpr int kLanes = 4;
constexpr std::int64_t kDecodeTokens = 24;  // per circuit and dtype, one token per backend call
constexpr std::int64_t kBatch = 256;        // rows per backend call for the rest

template <typename T>
T must(sdk::Expected<T> e) {
  if (!e) throw std::runtime_error(e.error().to_string());
  return std::move(e).value();
}

sdk::LayerShapes qwen2b_shapes() {
  return weights::qwen35_2b_shapes();
}

w::CompiledCircuit compile_2b(const w::Circuit& c) {
  w::Target t;
  t.shapes = qwen2b_shapes();
  return must(w::compile(c, t));
}

sdk::DType sdk_dtype(w::DType dtype) {
  return dtype == w::DType::kF32 ? sdk::DType::kF32 : sdk::DType::kBF16;
}

sdk::TensorView view_of(void* data, sdk::DType dtype, const std::vector<std::int64_t>& shape) {
  sdk::TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.rank = static_cast<std::int32_t>(shape.size());
  std::copy(shape.begin(), shape.end(), v.shape);
  return v;
}

// Smallest nonzero |pre-activation| at the switches, as the backend computes them.
struct Margins {
  double mlp = std::numeric_limits<double>::infinity();
  std::string mlp_where;
  double gdn = std::numeric_limits<double>::infinity();
  std::string gdn_where;
};

// Columns [begin, end) of a [rows, cols] matrix: the smallest nonzero magnitude.
void note_min(const std::vector<float>& v, std::int64_t cols, std::int64_t begin, std::int64_t end, double& best,
              std::string& where, const std::string& what) {
  for (std::size_t i = 0; i < v.size(); ++i) {
    const auto col = static_cast<std::int64_t>(i) % cols;
    const double a = std::fabs(static_cast<double>(v[i]));
    if (col < begin || col >= end || a == 0 || a >= best) continue;
    best = a;
    where = what + " " + std::to_string(col);
  }
}

// A compiled circuit's layers uploaded into a TorchBackend of the matching
// dtype and driven as a stack of linear-attention decoder layers.
class BackendStack {
 public:
  BackendStack(const w::CompiledCircuit& cc, w::DType dtype)
      : shapes_(cc.target.shapes), backend_(BackendOptions{{}, sdk_dtype(dtype), 1}) {
    shape_ = {shapes_.linear_num_key_heads,  shapes_.linear_num_value_heads, shapes_.linear_key_head_dim,
              shapes_.linear_value_head_dim, shapes_.linear_conv_kernel,     shapes_.rms_norm_eps};
    const std::int64_t kq = shapes_.linear_num_key_heads * shapes_.linear_key_head_dim;
    for (std::size_t i = 0; i < cc.layers.size(); ++i) {
      const auto index = static_cast<std::int64_t>(i);
      // One layer's dense export at a time (about 240 MB in fp32), freed after the upload.
      for (w::DenseTensor& t : w::export_layer(cc.layers[i], shapes_, index, dtype)) {
        void* data = dtype == w::DType::kF32 ? static_cast<void*>(t.f32.data()) : static_cast<void*>(t.bf16.data());
        tensors_[t.name] = must(backend_.upload(view_of(data, sdk_dtype(dtype), t.shape)));
      }
      auto get = [&](const std::string& suffix) {
        auto it = tensors_.find(w::layer_tensor_name(index, suffix));
        if (it == tensors_.end()) throw std::runtime_error("export_layer gave no " + suffix);
        return static_cast<const sdk::Tensor*>(it->second.get());
      };
      Layer l;
      l.input_norm = get("input_layernorm.weight");
      l.post_norm = get("post_attention_layernorm.weight");
      l.gdn = sdk::delta_net_weights(get);
      l.mlp = sdk::mlp_weights(get);
      l.state = must(backend_.create_state());
      // The q/k projections are the pre-SiLU switch values only where the conv
      // passes the current token through unchanged (tap kernel-1 = 1, others 0).
      const auto& conv = cc.layers[i].gdn.conv1d;
      const std::int64_t k = shapes_.linear_conv_kernel;
      l.qk_pass_through = true;
      for (std::int64_t ch = 0; ch < 2 * kq; ++ch)
        for (std::int64_t j = 0; j < k; ++j) {
          const double tap = conv[static_cast<std::size_t>(ch * k + j)];
          if (tap != 0 && !(j == k - 1 && tap == 1)) l.qk_pass_through = false;
        }
      layers_.push_back(std::move(l));
    }
  }

  // Runs `tokens` rows of x ([tokens, H], row-major) through every layer,
  // continuing each layer's DeltaNet state; returns the last residual [tokens, H].
  std::vector<float> run(const std::vector<float>& x, std::int64_t tokens, sdk::DeltaRule rule,
                         Margins* margins = nullptr) {
    const std::int64_t H = shapes_.hidden_size;
    std::vector<float> in = x;
    auto h = must(backend_.upload(view_of(in.data(), sdk::DType::kF32, {tokens, H})));
    const std::int64_t kq = shapes_.linear_num_key_heads * shapes_.linear_key_head_dim;
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      Layer& l = layers_[i];
      const std::string at = "layer " + std::to_string(i) + " ";
      auto n1 = must(backend_.rms_norm(*h, *l.input_norm, shapes_.rms_norm_eps));
      if (margins != nullptr) {
        if (l.qk_pass_through) {
          note_min(download(*must(backend_.linear(*n1, *l.gdn.in_proj_qkv))),
                   2 * kq + shape_.num_value_heads * shape_.value_head_dim, 0, 2 * kq, margins->gdn, margins->gdn_where,
                   at + "q/k channel");
        }
        note_min(download(*must(backend_.linear(*n1, *l.gdn.in_proj_b))), shape_.num_value_heads, 0,
                 shape_.num_value_heads, margins->gdn, margins->gdn_where, at + "beta of head");
        const std::int64_t V = shape_.num_value_heads * shape_.value_head_dim;
        note_min(download(*must(backend_.linear(*n1, *l.gdn.in_proj_z))), V, 0, V, margins->gdn, margins->gdn_where,
                 at + "z channel");
      }
      auto mixed = must(backend_.gated_delta_net(*n1, l.gdn, shape_, *l.state, rule));
      h = must(backend_.add(*h, *mixed));
      auto n2 = must(backend_.rms_norm(*h, *l.post_norm, shapes_.rms_norm_eps));
      if (margins != nullptr) {
        note_min(download(*must(backend_.linear(*n2, *l.mlp.gate_proj))), shapes_.intermediate_size, 0,
                 shapes_.intermediate_size, margins->mlp, margins->mlp_where, at + "neuron");
      }
      auto out = must(backend_.mlp(*n2, l.mlp));
      h = must(backend_.add(*h, *out));
    }
    return download(*h);
  }

  void reset() {
    for (Layer& l : layers_) l.state->reset();
  }

 private:
  struct Layer {
    const sdk::Tensor* input_norm = nullptr;
    const sdk::Tensor* post_norm = nullptr;
    sdk::DeltaNetWeights gdn;
    sdk::MlpWeights mlp;
    sdk::Handle<sdk::LayerState> state;
    bool qk_pass_through = false;
  };

  std::vector<float> download(const sdk::Tensor& t) {
    std::vector<std::int64_t> shape;
    std::int64_t n = 1;
    for (int i = 0; i < t.rank(); ++i) n *= shape.emplace_back(t.dim(i));
    std::vector<float> out(static_cast<std::size_t>(n));
    auto status = backend_.download(t, view_of(out.data(), sdk::DType::kF32, shape));
    if (!status.is_ok()) throw std::runtime_error(status.to_string());
    return out;
  }

  sdk::LayerShapes shapes_;
  sdk::DeltaNetShape shape_;
  TorchBackend backend_;  // before every handle: destroyed after them
  std::map<std::string, sdk::Handle<sdk::Tensor>> tensors_;
  std::vector<Layer> layers_;
};

// One token: its embedded residual and the output words with their plain C++ values.
struct Token {
  std::vector<float> x;
  std::vector<std::pair<w::Word, std::uint64_t>> expect;
};

// Every bit channel of every field is exactly +u or -u; constants, pads and
// unused channels are untouched.
bool residual_exact(const w::Circuit& c, const w::Allocation& a, const float* x) {
  const float u = static_cast<float>(w::kResidualUnit);
  if (x[a.const_hi] != static_cast<float>(w::kConstHi) * u) return false;
  for (std::size_t i = 0; i < a.pad_channel.size(); ++i)
    if (x[a.pad_channel[i]] != static_cast<float>(a.pad_value[i]) * u) return false;
  for (std::size_t f = 0; f < c.fields().size(); ++f) {
    if (c.fields()[f].alias_of >= 0) continue;
    for (int b = 0; b < c.fields()[f].width; ++b) {
      const w::Bit bit{static_cast<int>(f), b, false};
      const float v = x[a.channel(bit)];
      if (v != u && v != -u) return false;
    }
  }
  for (std::int64_t ch = a.channels_used; ch < a.hidden_size; ++ch)
    if (x[ch] != 0) return false;
  return true;
}

// How a token sequence goes through the backend: the first `decode` tokens one
// per call (DeltaRule::kAuto, as a base model decodes), the rest `batch` rows per call with `rule`.
struct Plan {
  std::int64_t decode = kDecodeTokens;
  std::int64_t batch = kBatch;
  sdk::DeltaRule rule = sdk::DeltaRule::kAuto;
  // Switch margins are measured on the first `margin_tokens` batched tokens
  // (the extra projections cost half a layer's mat-muls again).
  std::int64_t margin_tokens = kBatch;
};

struct Outcome {
  std::int64_t tokens = 0;
  std::int64_t wrong_words = 0;        // (a) decoded outputs != integer reference
  std::int64_t mismatched_tokens = 0;  // (b) residual not bit-identical to ReferenceModel
  std::int64_t mismatched_values = 0;
  std::int64_t first_mismatch = -1;
  double max_abs_diff = 0;
  std::int64_t inexact_tokens = 0;  // residual not exactly ±u per bit
  Margins margins;
  std::int64_t margin_tokens = 0;  // tokens the margins were measured on
  double seconds = 0;              // whole run, ReferenceModel included
  double decode_seconds = 0;       // backend calls of one token
  double batch_seconds = 0;        // backend calls of several
};

Outcome run_tokens(const w::Circuit& c, const w::CompiledCircuit& cc, w::DType dtype, const std::vector<Token>& tokens,
                   const Plan& plan, BackendStack* reuse = nullptr) {
  const std::int64_t H = cc.target.shapes.hidden_size;
  std::unique_ptr<BackendStack> own;
  if (reuse == nullptr) own = std::make_unique<BackendStack>(cc, dtype);
  BackendStack& stack = reuse != nullptr ? *reuse : *own;
  w::ReferenceModel ref(cc.layers, cc.target.shapes, dtype);
  Outcome o;
  o.tokens = static_cast<std::int64_t>(tokens.size());
  const auto start = std::chrono::steady_clock::now();
  std::int64_t t0 = 0;
  while (t0 < o.tokens) {
    const bool one = t0 < plan.decode;
    const std::int64_t n = one ? 1 : std::min(plan.batch, o.tokens - t0);
    std::vector<float> x;
    x.reserve(static_cast<std::size_t>(n * H));
    for (std::int64_t t = t0; t < t0 + n; ++t) x.insert(x.end(), tokens[t].x.begin(), tokens[t].x.end());
    const bool measure = !one && o.margin_tokens < plan.margin_tokens;
    o.margin_tokens += measure ? n : 0;
    const auto call = std::chrono::steady_clock::now();
    const std::vector<float> y =
        stack.run(x, n, one ? sdk::DeltaRule::kAuto : plan.rule, measure ? &o.margins : nullptr);
    (one ? o.decode_seconds : o.batch_seconds) +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - call).count();
    for (std::int64_t t = t0; t < t0 + n; ++t) {
      const Token& tok = tokens[t];
      const std::vector<float> got(y.begin() + (t - t0) * H, y.begin() + (t - t0 + 1) * H);
      const std::vector<float> want = ref.step(tok.x);
      std::int64_t differ = 0;
      for (std::int64_t i = 0; i < H; ++i) {
        if (std::bit_cast<std::uint32_t>(got[i]) == std::bit_cast<std::uint32_t>(want[i])) continue;
        ++differ;
        o.max_abs_diff = std::max(o.max_abs_diff, std::fabs(static_cast<double>(got[i]) - want[i]));
      }
      if (differ > 0 && o.first_mismatch < 0) o.first_mismatch = t;
      o.mismatched_tokens += differ > 0;
      o.mismatched_values += differ;
      for (const auto& [word, value] : tok.expect) o.wrong_words += w::read_word(cc.allocation, got, word) != value;
      o.inexact_tokens += !residual_exact(c, cc.allocation, got.data());
    }
    t0 += n;
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return o;
}

void print(const std::string& what, w::DType dtype, const Outcome& o) {
  std::printf(
      "  %-4s %-21s %lld tokens in %.1f s (backend: %.1f s one token per call, %.1f s batched): %lld wrong words; "
      "residual vs ReferenceModel: %lld tokens / %lld values differ (max |diff| %.3g, first at token %lld); %lld not "
      "exact (±u per bit)\n",
      std::string(w::dtype_name(dtype)).c_str(), what.c_str(), static_cast<long long>(o.tokens), o.seconds,
      o.decode_seconds, o.batch_seconds, static_cast<long long>(o.wrong_words),
      static_cast<long long>(o.mismatched_tokens), static_cast<long long>(o.mismatched_values), o.max_abs_diff,
      static_cast<long long>(o.first_mismatch), static_cast<long long>(o.inexact_tokens));
  if (std::isfinite(o.margins.mlp) || std::isfinite(o.margins.gdn)) {
    std::printf("         smallest switch margin on the backend (%lld tokens): MLP gate %g (%s), DeltaNet %g (%s)\n",
                static_cast<long long>(o.margin_tokens), o.margins.mlp, o.margins.mlp_where.c_str(), o.margins.gdn,
                o.margins.gdn_where.c_str());
  }
}

// Exactness: every check of one run, and margins of at least one integer step
// (K = 128) wherever the backend saw a switch.
void expect_exact(const std::string& what, w::DType dtype, const Outcome& o) {
  print(what, dtype, o);
  const std::string tag = what + " " + std::string(w::dtype_name(dtype));
  EXPECT_EQ(o.wrong_words, 0) << tag;
  EXPECT_EQ(o.mismatched_tokens, 0) << tag << ": first differing token " << o.first_mismatch << ", max |diff| "
                                    << o.max_abs_diff;
  EXPECT_EQ(o.inexact_tokens, 0) << tag;
  if (std::isfinite(o.margins.mlp)) {
    EXPECT_GE(o.margins.mlp, w::kGain) << tag << " at " << o.margins.mlp_where;
  }
  if (std::isfinite(o.margins.gdn)) {
    EXPECT_GE(o.margins.gdn, w::kGain) << tag << " at " << o.margins.gdn_where;
  }
}

// Operands: uniform with about 30 % special values (NUMERICS.md §5's mix).
std::uint32_t operand(std::mt19937_64& rng) {
  static constexpr std::uint32_t kSpecial[] = {0,          1,          0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0x00FF00FF,
                                               0xFF00FF00, 0x0000FFFF, 0xFFFF0000, 0x01010101, 0xFEFEFEFF, 0x12345678,
                                               0x80000001, 0x7FFFFFFE, 0x000000FF, 0x00000100};
  if (rng() % 10 < 3) return kSpecial[rng() % std::size(kSpecial)];
  return static_cast<std::uint32_t>(rng());
}

struct Lanes {
  std::vector<w::Word> a, b;
};

// Operands a (and b unless with_b is false) of every lane.
Lanes lane_inputs(w::Circuit& c, bool with_b = true) {
  Lanes l;
  for (int i = 0; i < kLanes; ++i) {
    l.a.push_back(must(c.input("lane" + std::to_string(i), "a", 32)));
    if (with_b) l.b.push_back(must(c.input("lane" + std::to_string(i), "b", 32)));
  }
  return l;
}

// `sets` random 4-lane operand sets (b == a now and then); `extra` draws one
// more per-lane input of `extra_bits` and `expect` lists the outputs' values.
using Expect = std::function<void(int lane, std::uint32_t a, std::uint32_t b, std::uint32_t e,
                                  std::vector<std::pair<w::Word, std::uint64_t>>& out)>;
std::vector<Token> lane_tokens(const w::Circuit& c, const w::CompiledCircuit& cc, const Lanes& l,
                               const std::vector<w::Word>& extra, int extra_bits, int sets, std::uint64_t seed,
                               const Expect& expect) {
  std::mt19937_64 rng(seed);
  std::vector<Token> tokens;
  for (int s = 0; s < sets; ++s) {
    std::vector<std::pair<w::Word, std::uint64_t>> in;
    Token tok;
    for (int i = 0; i < kLanes; ++i) {
      const std::uint32_t a = operand(rng);
      const std::uint32_t b = rng() % 16 == 0 ? a : operand(rng);
      const std::uint32_t e = extra.empty() ? 0 : static_cast<std::uint32_t>(rng() & ((1u << extra_bits) - 1));
      in.push_back({l.a[i], a});
      if (!l.b.empty()) in.push_back({l.b[i], b});
      if (!extra.empty()) in.push_back({extra[i], e});
      expect(i, a, b, e, tok.expect);
    }
    tok.x = w::embed(c, cc.allocation, in);
    tokens.push_back(std::move(tok));
  }
  return tokens;
}

const w::DType kBothDtypes[] = {w::DType::kF32, w::DType::kBF16};

// ---------------------------------------------------------------------------
// The bf16 SiLU the weights reference models (LibTorch 1.13's kernel: exp,
// 1 + e and the quotient each rounded) against the backend's (fp32, rounded
// once), on every finite bf16 value, through the backend's own mlp op:
// gate = [1, 0], up = [0, 1], down = [1; 0] on rows (v, 1) give silu(v).
// The down projection's accumulator turns -0 into +0, so zeros compare by
// value (a switch's -0 reaches the residual only through that sum anyway).

std::vector<float> backend_silu(sdk::DType dtype, const std::vector<float>& v) {
  TorchBackend backend(BackendOptions{{}, dtype, 1});
  const auto T = static_cast<std::int64_t>(v.size());
  std::vector<float> x;
  for (float f : v) x.insert(x.end(), {f, 1.0f});
  std::vector<float> gate = {1, 0}, up = {0, 1}, down = {1, 0};
  auto xt = must(backend.upload(view_of(x.data(), sdk::DType::kF32, {T, 2})));
  auto g = must(backend.upload(view_of(gate.data(), sdk::DType::kF32, {1, 2})));
  auto u = must(backend.upload(view_of(up.data(), sdk::DType::kF32, {1, 2})));
  auto d = must(backend.upload(view_of(down.data(), sdk::DType::kF32, {2, 1})));
  auto y = must(backend.mlp(*xt, {g.get(), u.get(), d.get()}));
  std::vector<float> out(static_cast<std::size_t>(2 * T));
  auto status = backend.download(*y, view_of(out.data(), sdk::DType::kF32, {T, 2}));
  if (!status.is_ok()) throw std::runtime_error(status.to_string());
  std::vector<float> s;
  for (std::int64_t t = 0; t < T; ++t) s.push_back(out[static_cast<std::size_t>(2 * t)]);
  return s;
}

// On an ascending grid x: the smallest x0 with silu(x) == x for every x >= x0,
// and the largest x1 with silu(x) == 0 for every x <= x1.
std::pair<float, float> saturation(const std::vector<float>& x, const std::vector<float>& y) {
  std::size_t top = x.size(), bottom = 0;
  while (top > 0 && y[top - 1] == x[top - 1]) --top;
  while (bottom < x.size() && y[bottom] == 0) ++bottom;
  return {top < x.size() ? x[top] : NAN, bottom > 0 ? x[bottom - 1] : NAN};
}

TEST(Circuits, SiluModelsOnEveryBf16Value) {
  std::vector<float> values;
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float f = w::bf16_from_bits(static_cast<std::uint16_t>(bits));
    if (std::isfinite(f)) values.push_back(f);
  }
  std::sort(values.begin(), values.end());
  const std::vector<float> torch_bf16 = backend_silu(sdk::DType::kBF16, values);
  const std::vector<float> torch_f32 = backend_silu(sdk::DType::kF32, values);
  std::vector<float> model_bf16, model_f32;
  for (float x : values) {
    model_bf16.push_back(w::round_bf16(w::silu_in(w::DType::kBF16, x)));
    model_f32.push_back(w::silu(x));
  }
  std::int64_t differ_bf16 = 0, differ_f32 = 0, switch_values = 0, switch_differ = 0;
  float lo = INFINITY, hi = -INFINITY, lo32 = INFINITY, hi32 = -INFINITY;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float x = values[i];
    const bool same = torch_bf16[i] == model_bf16[i];
    differ_bf16 += !same;
    if (!same) lo = std::min(lo, x), hi = std::max(hi, x);
    if (torch_f32[i] != model_f32[i]) ++differ_f32, lo32 = std::min(lo32, x), hi32 = std::max(hi32, x);
    // What a circuit switch produces: 0 or a nonzero multiple of K = 128 (every
    // gate is K times an integer, plus multiples of 2^17 from enable guards).
    if (x == 0 || std::fmod(std::fabs(x), static_cast<float>(w::kGain)) == 0) {
      ++switch_values;
      switch_differ += !same;
      EXPECT_TRUE(same) << "x = " << x << ": backend " << torch_bf16[i] << ", reference " << model_bf16[i];
      EXPECT_EQ(torch_bf16[i], x > 0 ? x : 0.0f) << x;  // saturated: x or (-)0 exactly
      EXPECT_EQ(torch_f32[i], x > 0 ? x : 0.0f) << x;
    }
    // The saturation ranges circuits rely on (NUMERICS.md §1), on the backend in both dtypes.
    if (x >= 16.635532f) {
      EXPECT_EQ(torch_bf16[i], x);
      EXPECT_EQ(torch_f32[i], x);
    } else if (x <= -88.722839f) {
      EXPECT_EQ(torch_bf16[i], 0.0f);
      EXPECT_EQ(torch_f32[i], 0.0f);
    }
  }
  const auto [b_id, b_zero] = saturation(values, torch_bf16);
  const auto [m_id, m_zero] = saturation(values, model_bf16);
  const auto [f_id, f_zero] = saturation(values, torch_f32);
  std::printf(
      "  bf16 silu, backend (fp32, rounded once) vs weights::silu_bf16 (LibTorch 1.13's roundings): %lld of %zu finite "
      "bf16 inputs differ, all within [%g, %g]; %lld of the %lld switch values (0, multiples of 128) differ\n"
      "  bf16 saturation on the bf16 grid: backend silu(x) == x from %g, == 0 up to %g; the reference's model: from "
      "%g, "
      "up to %g\n"
      "  fp32 silu on the same inputs, backend vs weights::silu: %lld differ, within [%g, %g]; backend silu(x) == x "
      "from %g, == 0 up to %g\n",
      static_cast<long long>(differ_bf16), values.size(), lo, hi, static_cast<long long>(switch_differ),
      static_cast<long long>(switch_values), b_id, b_zero, m_id, m_zero, static_cast<long long>(differ_f32), lo32, hi32,
      f_id, f_zero);
}

// ---------------------------------------------------------------------------
// MLP circuits: every token independent (the DeltaNet heads are unused).

void run_lanes(const std::string& what, const w::Circuit& c, const w::CompiledCircuit& cc,
               const std::vector<Token>& tokens) {
  for (w::DType dt : kBothDtypes) expect_exact(what, dt, run_tokens(c, cc, dt, tokens, Plan{}));
}

TEST(Circuits, Add32FourLanes) {
  w::Circuit c("add4");
  Lanes l = lane_inputs(c);
  std::vector<w::AddResult> r;
  for (int i = 0; i < kLanes; ++i)
    r.push_back(must(w::add(c, "lane" + std::to_string(i), "sum", l.a[i], l.b[i], c.zero())));
  const w::CompiledCircuit cc = compile_2b(c);
  ASSERT_EQ(cc.schedule.num_layers, 2);
  auto tokens =
      lane_tokens(c, cc, l, {}, 0, 2048, 1234, [&](int i, std::uint32_t a, std::uint32_t b, std::uint32_t, auto& out) {
        const std::uint64_t full = std::uint64_t{a} + b;
        out.push_back({r[i].sum, full & 0xFFFFFFFFu});
        out.push_back({{r[i].carry}, full >> 32});
      });
  run_lanes("add", c, cc, tokens);
}

TEST(Circuits, SubCompareEqualFourLanes) {
  w::Circuit c("cmp4");
  Lanes l = lane_inputs(c);
  std::vector<w::AddResult> d;
  std::vector<w::Bit> ltu, lts, eq;
  for (int i = 0; i < kLanes; ++i) {
    const std::string o = "lane" + std::to_string(i);
    d.push_back(must(w::sub(c, o, "diff", l.a[i], l.b[i])));
    ltu.push_back(must(w::less_than(c, o, "ltu", l.a[i], l.b[i], false)));
    lts.push_back(must(w::less_than(c, o, "lts", l.a[i], l.b[i], true)));
    eq.push_back(must(w::equal(c, o, "eq", l.a[i], l.b[i])));
  }
  const w::CompiledCircuit cc = compile_2b(c);
  ASSERT_EQ(cc.schedule.num_layers, 2);
  auto tokens =
      lane_tokens(c, cc, l, {}, 0, 1024, 99, [&](int i, std::uint32_t a, std::uint32_t b, std::uint32_t, auto& out) {
        out.push_back({d[i].sum, static_cast<std::uint32_t>(a - b)});
        out.push_back({{d[i].carry}, a >= b});  // no borrow
        out.push_back({{ltu[i]}, a < b});
        out.push_back({{lts[i]}, static_cast<std::int32_t>(a) < static_cast<std::int32_t>(b)});
        out.push_back({{eq[i]}, a == b});
      });
  run_lanes("sub/compare/equal", c, cc, tokens);
}

TEST(Circuits, ShiftsByAVariableAmountFourLanes) {
  w::Circuit c("shift4");
  Lanes l = lane_inputs(c, /*with_b=*/false);  // the residual holds 4 x (a, amount, 3 results, digit stage)
  std::vector<w::Word> amount, shl, shr, sra;
  for (int i = 0; i < kLanes; ++i) {
    const std::string o = "lane" + std::to_string(i);
    amount.push_back(must(c.input(o, "amount", 6)));  // 32..63 give 0 / the sign
    shl.push_back(must(w::shift(c, o, "shl", l.a[i], amount[i], w::Shift::kLeft)));
    shr.push_back(must(w::shift(c, o, "shr", l.a[i], amount[i], w::Shift::kRightLogical)));
    sra.push_back(must(w::shift(c, o, "sra", l.a[i], amount[i], w::Shift::kRightArithmetic)));
  }
  const w::CompiledCircuit cc = compile_2b(c);
  ASSERT_EQ(cc.schedule.num_layers, 2);
  auto tokens =
      lane_tokens(c, cc, l, amount, 6, 1024, 7, [&](int i, std::uint32_t a, std::uint32_t, std::uint32_t s, auto& out) {
        const auto sa = static_cast<std::int32_t>(a);
        out.push_back({shl[i], s >= 32 ? 0u : a << s});
        out.push_back({shr[i], s >= 32 ? 0u : a >> s});
        out.push_back({sra[i], static_cast<std::uint32_t>(s >= 32 ? (sa < 0 ? -1 : 0) : sa >> s)});
      });
  run_lanes("shift", c, cc, tokens);
}

TEST(Circuits, MultiplexersFourLanes) {
  w::Circuit c("mux4");
  Lanes l = lane_inputs(c);
  std::vector<w::Word> sel, mb, m2, moh, sc;
  for (int i = 0; i < kLanes; ++i) {
    const std::string o = "lane" + std::to_string(i);
    sel.push_back(must(c.input(o, "sel", 2)));
    mb.push_back(must(w::mux_binary(c, o, "mux_binary", sel[i], {l.a[i], l.b[i], ~l.a[i], ~l.b[i]})));
    m2.push_back(must(w::mux2(c, o, "mux2", sel[i][0], l.a[i], l.b[i])));
    moh.push_back(must(w::mux_onehot(c, o, "mux_onehot", {sel[i][0], !sel[i][0]}, {l.a[i], l.b[i]})));
    sc.push_back(must(w::scale_by_bit(c, o, "scaled", sel[i][1], l.a[i])));
  }
  const w::CompiledCircuit cc = compile_2b(c);
  ASSERT_EQ(cc.schedule.num_layers, 1);
  auto tokens =
      lane_tokens(c, cc, l, sel, 2, 1024, 5, [&](int i, std::uint32_t a, std::uint32_t b, std::uint32_t s, auto& out) {
        const std::uint32_t choices[4] = {a, b, ~a, ~b};
        out.push_back({mb[i], choices[s]});
        out.push_back({m2[i], (s & 1) ? a : b});
        out.push_back({moh[i], (s & 1) ? a : b});
        out.push_back({sc[i], (s & 2) ? a : 0u});
      });
  run_lanes("mux", c, cc, tokens);
}

// ---------------------------------------------------------------------------
// Memory in Gated DeltaNet state: a 128 x 32-bit RAM with one write port and
// read ports in layers 0 and 1 (replicas written by the same tokens), a
// two-head 100 x 48-bit RAM, and reads of the tokens 1 and 3 back (conv taps).

struct RamCircuit {
  w::Circuit c{"ram"};
  w::Word waddr, wdata, we, raddr, raddr2, ren, waddr2, wdata2, we2, clear2, raddr3, prev_src;
  w::Word read0, read1, wide, prev1, prev3;
  RamCircuit() {
    waddr = must(c.input("w", "addr", 7));
    wdata = must(c.input("w", "data", 32));
    we = must(c.input("w", "we", 1));
    raddr = must(c.input("r", "addr", 7));
    raddr2 = must(c.input("r", "addr2", 7));
    ren = must(c.input("r", "en", 1));
    const int mem = must(c.add_ram("mem", "words", 128, 32));
    if (!c.ram_write(mem, waddr, wdata, we[0]).is_ok()) throw std::runtime_error("ram_write");
    read0 = must(c.ram_read(mem, "read0", raddr, ren[0]));
    // Ready only after MLP 0: its read port is a replica in layer 1.
    const w::Word addr_late = must(w::copy(c, "r", "addr2_late", raddr2));
    read1 = must(c.ram_read(mem, "read1", addr_late, ren[0]));
    waddr2 = must(c.input("w2", "addr", 7));
    wdata2 = must(c.input("w2", "data", 48));
    we2 = must(c.input("w2", "we", 1));
    clear2 = must(c.input("w2", "clear", 1));
    raddr3 = must(c.input("r3", "addr", 7));
    const int wide_ram = must(c.add_ram("mem", "wide", 100, 48));
    if (!c.ram_write(wide_ram, waddr2, wdata2, we2[0]).is_ok()) throw std::runtime_error("ram_write");
    // Erased through the decay gate on clear tokens (Circuit::ram_clear).
    if (!c.ram_clear(wide_ram, clear2[0]).is_ok()) throw std::runtime_error("ram_clear");
    wide = must(c.ram_read(wide_ram, "wide_read", raddr3, std::nullopt));
    prev_src = must(c.input("p", "src", 16));
    prev1 = must(c.previous("prev1", prev_src, 1, std::nullopt));
    prev3 = must(c.previous("prev3", prev_src, 3, std::nullopt));
  }
};

// `random` tokens of random writes (p = 1/2) and enabled reads (p = 0.7), then
// every row read back; expectations from plain arrays.
std::vector<Token> ram_tokens(const RamCircuit& rc, const w::CompiledCircuit& cc, int random) {
  std::mt19937_64 rng(2026);
  std::array<std::uint32_t, 128> mem{};
  std::array<std::uint64_t, 100> wide{};
  std::vector<std::uint32_t> hist;
  std::vector<Token> tokens;
  auto add = [&](std::uint32_t wa, std::uint32_t wd, bool w, std::uint32_t ra, std::uint32_t ra2, bool en,
                 std::uint32_t wa2, std::uint64_t wd2, bool w2, bool clear2, std::uint32_t ra3, std::uint32_t ps) {
    Token tok;
    tok.x = w::embed(rc.c, cc.allocation,
                     {{rc.waddr, wa},
                      {rc.wdata, wd},
                      {rc.we, w},
                      {rc.raddr, ra},
                      {rc.raddr2, ra2},
                      {rc.ren, en},
                      {rc.waddr2, wa2},
                      {rc.wdata2, wd2},
                      {rc.we2, w2},
                      {rc.clear2, clear2},
                      {rc.raddr3, ra3},
                      {rc.prev_src, ps}});
    if (w) mem[wa] = wd;       // a read in the writing token sees the write
    if (clear2) wide.fill(0);  // erased before the token's own write
    if (w2 && wa2 < 100) wide[wa2] = wd2;
    hist.push_back(ps);
    const std::size_t t = hist.size() - 1;
    tok.expect = {{rc.read0, en ? mem[ra] : 0u},
                  {rc.read1, en ? mem[ra2] : 0u},
                  {rc.wide, ra3 < 100 ? wide[ra3] : 0u},
                  {rc.prev1, t >= 1 ? hist[t - 1] : 0u},
                  {rc.prev3, t >= 3 ? hist[t - 3] : 0u}};
    tokens.push_back(std::move(tok));
  };
  for (int t = 0; t < random; ++t)
    add(rng() % 128, static_cast<std::uint32_t>(rng()), rng() % 2, rng() % 128, rng() % 128, rng() % 10 < 7,
        rng() % 128, rng() & 0xFFFFFFFFFFFFull, rng() % 2, rng() % 97 == 0, rng() % 128, rng() & 0xFFFF);
  for (std::uint32_t r = 0; r < 128; ++r) add(0, 0, false, r, 127 - r, true, 0, 0, false, false, r, 0);
  return tokens;
}

TEST(Circuits, RamWritesThenReadsBackThroughReplicas) {
  RamCircuit rc;
  const w::CompiledCircuit cc = compile_2b(rc.c);
  ASSERT_EQ(cc.schedule.num_layers, 2);
  ASSERT_EQ(cc.schedule.use[1].key_heads, 1);  // the replica serving read1
  const std::vector<Token> tokens = ram_tokens(rc, cc, 1000);
  Plan plan;
  plan.decode = 64;
  plan.rule = sdk::DeltaRule::kRecurrent;  // batched projections, the state still token by token
  for (w::DType dt : kBothDtypes) {
    BackendStack stack(cc, dt);
    expect_exact("ram (recurrent)", dt, run_tokens(rc.c, cc, dt, tokens, plan, &stack));
    // The same sequence as one chunked prefill (WY form, chunks of 64): the
    // circuit decodes token by token, so this is reported, not required.
    stack.reset();
    Plan chunked;
    chunked.decode = 0;
    chunked.batch = static_cast<std::int64_t>(tokens.size());
    chunked.rule = sdk::DeltaRule::kChunked;
    chunked.margin_tokens = 0;
    print("ram (chunked prefill)", dt, run_tokens(rc.c, cc, dt, tokens, chunked, &stack));
  }
}

}  // namespace
}  // namespace qgpu::torch_backend
