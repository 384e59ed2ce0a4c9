// Synthetic checkpoints beyond the default: the isotropic and anisotropic
// embeddings, the stress base, and the default's bytes pinned.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>

#include "qgpu/qwen35/checkpoint.h"
#include "qgpu/qwen35/synthetic.h"
#include "test_util.h"

namespace qgpu::qwen35 {
namespace {

using test::read_file;
using test::TempDir;

std::uint64_t fnv1a(std::span<const std::byte> bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::byte b : bytes) h = (h ^ static_cast<std::uint8_t>(b)) * 0x100000001b3ull;
  return h;
}

// One tensor of a synthetic model, generated in memory (no file).
std::vector<std::byte> tensor_bytes(const std::vector<TensorToWrite>& tensors, const std::string& local) {
  for (const auto& t : tensors) {
    if (t.name != std::string(kWrapperPrefix) + local) continue;
    std::size_t n = st_dtype_size(t.dtype);
    for (auto d : t.shape) n *= static_cast<std::size_t>(d);
    std::vector<std::byte> bytes(n);
    EXPECT_TRUE(t.fill(bytes)) << local;
    return bytes;
  }
  ADD_FAILURE() << "no tensor " << local;
  return {};
}

std::vector<float> tensor_values(const std::vector<TensorToWrite>& tensors, const std::string& local) {
  const auto bytes = tensor_bytes(tensors, local);
  std::vector<float> out(bytes.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::uint16_t b;
    std::memcpy(&b, bytes.data() + 2 * i, 2);
    out[i] = bf16_to_f32(b);
  }
  return out;
}

std::vector<float> read_tensor(const Checkpoint& c, const std::string& local) {
  const auto ref = c.text_tensor(local);
  std::vector<float> out(static_cast<std::size_t>(ref->numel()));
  EXPECT_TRUE(to_f32(*ref, out)) << local;
  return out;
}

// Channels on which every row has one strict sign.
std::vector<std::int64_t> one_sign_channels(const std::vector<float>& e, std::int64_t rows, std::int64_t h) {
  std::vector<std::int64_t> out;
  for (std::int64_t c = 0; c < h; ++c) {
    bool pos = true, neg = true;
    for (std::int64_t r = 0; r < rows; ++r) {
      const float x = e[static_cast<std::size_t>(r * h + c)];
      pos = pos && x > 0;
      neg = neg && x < 0;
    }
    if (pos || neg) out.push_back(c);
  }
  return out;
}

// The default's bytes are what tests, goldens and CI were built on: pinned by
// FNV-1a hashes of files and tensors written before the other modes existed.
TEST(SyntheticModes, DefaultBytesUnchanged) {
  TempDir dir;
  ASSERT_TRUE(write_synthetic_checkpoint(dir.path(), synthetic_small_spec(), 7));
  const std::string file = read_file(dir / "model.safetensors");
  EXPECT_EQ(fnv1a(std::as_bytes(std::span(file))), 0x353d0bd4951b2083ull);
  // The built-in default (2B shapes, 4 layers, vocab 4096, seed 0), tensor by tensor in memory.
  const auto tensors = synthetic_tensors(synthetic_2b_spec().text, 0);
  const std::pair<const char*, std::uint64_t> expected[] = {
      {"embed_tokens.weight", 0x746bd1c1d05c0adcull},
      {"layers.3.self_attn.q_proj.weight", 0xfd54ee48a93ff425ull},
      {"layers.0.linear_attn.A_log", 0x97ad9b56d6fd2719ull},
      {"layers.1.linear_attn.dt_bias", 0xa9f87046584fd589ull},
      {"norm.weight", 0xc9d2241de80ef580ull},
      {"layers.2.mlp.down_proj.weight", 0xddf2722e2beaa535ull},
  };
  for (const auto& [name, hash] : expected) EXPECT_EQ(fnv1a(tensor_bytes(tensors, name)), hash) << name;
}

TEST(SyntheticModes, EmbeddingNames) {
  for (auto e : {SyntheticEmbedding::kPlanted, SyntheticEmbedding::kIsotropic, SyntheticEmbedding::kAnisotropic})
    EXPECT_EQ(parse_synthetic_embedding(synthetic_embedding_name(e)), e);
  EXPECT_FALSE(parse_synthetic_embedding("gaussian"));
}

// Isotropic: the planted stream without the planted channel; no channel of one sign.
TEST(SyntheticModes, IsotropicIsThePlantedStreamWithoutItsChannel) {
  const auto text = synthetic_small_spec(1, 300).text;
  const std::int64_t h = text.hidden_size, rows = text.vocab_size;
  for (std::uint64_t seed : {1u, 2u}) {
    const auto planted = tensor_values(synthetic_tensors(text, seed), "embed_tokens.weight");
    const auto iso = tensor_values(synthetic_tensors(text, seed, {.embedding = SyntheticEmbedding::kIsotropic}),
                                   "embed_tokens.weight");
    const std::int64_t neg = synthetic_negative_channel(h, seed);
    std::int64_t differ = 0;
    for (std::size_t i = 0; i < iso.size(); ++i) {
      if (static_cast<std::int64_t>(i) % h == neg) continue;
      differ += iso[i] != planted[i];
    }
    EXPECT_EQ(differ, 0);
    EXPECT_TRUE(one_sign_channels(iso, rows, h).empty());
    EXPECT_EQ(one_sign_channels(planted, rows, h), std::vector<std::int64_t>{neg});
  }
}

// With few rows, channels of one sign happen by chance; each is broken by
// negating one row's value there, and nothing else changes.
TEST(SyntheticModes, OneSignChannelsAreBroken) {
  const auto text = synthetic_small_spec(1, 4).text;
  const std::int64_t h = text.hidden_size, rows = text.vocab_size;
  const auto planted = tensor_values(synthetic_tensors(text, 5), "embed_tokens.weight");
  const auto iso =
      tensor_values(synthetic_tensors(text, 5, {.embedding = SyntheticEmbedding::kIsotropic}), "embed_tokens.weight");
  const std::int64_t neg = synthetic_negative_channel(h, 5);
  std::vector<std::int64_t> expected_flips;  // one-sign channels of the unbroken stream
  for (std::int64_t c : one_sign_channels(planted, rows, h))
    if (c != neg) expected_flips.push_back(c);
  ASSERT_GE(expected_flips.size(), 3u);  // 4 rows: each channel is of one sign with p = 1/8
  std::vector<std::int64_t> flipped;
  for (std::int64_t c = 0; c < h; ++c) {
    int changed = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      const auto i = static_cast<std::size_t>(r * h + c);
      if (c == neg || iso[i] == planted[i]) continue;
      EXPECT_EQ(iso[i], -planted[i]);
      ++changed;
    }
    if (changed) flipped.push_back(c);
    EXPECT_LE(changed, 1);
  }
  EXPECT_EQ(flipped, expected_flips);
  EXPECT_TRUE(one_sign_channels(iso, rows, h).empty());
  for (auto e : {SyntheticEmbedding::kAnisotropic, SyntheticEmbedding::kIsotropic}) {
    EXPECT_TRUE(
        one_sign_channels(tensor_values(synthetic_tensors(text, 9, {.embedding = e}), "embed_tokens.weight"), rows, h)
            .empty());
  }
  EXPECT_FALSE(check_synthetic_options(synthetic_small_spec(1, 1).text, {.embedding = SyntheticEmbedding::kIsotropic}));
}

// Anisotropic: a shared direction (mean cosine to it ~0.35), norms around
// 0.02 sqrt(hidden), no channel of one sign, deterministic.
TEST(SyntheticModes, AnisotropicEmbedding) {
  TempDir dir;
  auto spec = synthetic_small_spec(1, 1024);
  spec.options.embedding = SyntheticEmbedding::kAnisotropic;
  ASSERT_TRUE(write_synthetic_checkpoint(dir / "a", spec, 3));
  ASSERT_TRUE(write_synthetic_checkpoint(dir / "b", spec, 3));
  ASSERT_TRUE(write_synthetic_checkpoint(dir / "c", spec, 4));
  EXPECT_EQ(read_file(dir / "a/model.safetensors"), read_file(dir / "b/model.safetensors"));
  EXPECT_NE(read_file(dir / "a/model.safetensors"), read_file(dir / "c/model.safetensors"));
  for (const char* sub : {"a", "c"}) {
    auto c = Checkpoint::open(dir / sub);
    ASSERT_TRUE(c) << c.error().to_string();
    const auto e = read_tensor(*c, "embed_tokens.weight");
    const std::int64_t h = 64, rows = 1024;
    EXPECT_TRUE(one_sign_channels(e, rows, h).empty());
    // The mean row's direction stands in for the generator's u.
    std::vector<double> mean(h, 0.0), norms(rows, 0.0);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t i = 0; i < h; ++i) {
        const double x = e[static_cast<std::size_t>(r * h + i)];
        mean[static_cast<std::size_t>(i)] += x;
        norms[static_cast<std::size_t>(r)] += x * x;
      }
    const double mean_norm = std::sqrt(std::inner_product(mean.begin(), mean.end(), mean.begin(), 0.0));
    double cos_sum = 0, norm_sum = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      double dot = 0;
      for (std::int64_t i = 0; i < h; ++i)
        dot += e[static_cast<std::size_t>(r * h + i)] * mean[static_cast<std::size_t>(i)];
      const double norm = std::sqrt(norms[static_cast<std::size_t>(r)]);
      cos_sum += dot / (norm * mean_norm);
      norm_sum += norm;
    }
    EXPECT_NEAR(cos_sum / rows, 0.35, 0.03) << sub;                            // documented: 0.35
    EXPECT_NEAR(norm_sum / rows, 0.02 * std::sqrt(64.0) * 1.02, 0.01) << sub;  // E[exp(0.2 z)] = 1.02
  }
}

// ---------------------------------------------------------------------------
// The stress base.

float silu(float x) {
  return x / (1.0f + std::exp(-x));
}

// x * rsqrt(mean(x^2) + eps) * (1 + w), as Qwen3.5's zero-centred RMSNorm.
std::vector<float> rms_norm(const std::vector<float>& x, const std::vector<float>& w) {
  double ms = 0;
  for (float v : x) ms += static_cast<double>(v) * v;
  const double inv = 1.0 / std::sqrt(ms / static_cast<double>(x.size()) + 1e-6);
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = static_cast<float>(x[i] * inv * (1.0 + w[i]));
  return out;
}

std::vector<float> matvec(const std::vector<float>& w, const std::vector<float>& x) {
  std::vector<float> out(w.size() / x.size());
  for (std::size_t r = 0; r < out.size(); ++r) {
    double s = 0;
    for (std::size_t c = 0; c < x.size(); ++c) s += static_cast<double>(w[r * x.size() + c]) * x[c];
    out[r] = static_cast<float>(s);
  }
  return out;
}

// The massive layer's MLP (post-attention norm, SwiGLU) on a residual vector, in f32.
struct MassiveMlp {
  std::vector<float> norm, gate, up, down;
  std::vector<float> operator()(const std::vector<float>& x) const {
    const auto xn = rms_norm(x, norm);
    const auto g = matvec(gate, xn), u = matvec(up, xn);
    std::vector<float> p(g.size());
    for (std::size_t i = 0; i < p.size(); ++i) p[i] = silu(g[i]) * u[i];
    return matvec(down, p);
  }
};

MassiveMlp massive_mlp(const std::vector<TensorToWrite>& tensors, std::int64_t layer) {
  const std::string l = "layers." + std::to_string(layer) + ".";
  return {tensor_values(tensors, l + "post_attention_layernorm.weight"),
          tensor_values(tensors, l + "mlp.gate_proj.weight"), tensor_values(tensors, l + "mlp.up_proj.weight"),
          tensor_values(tensors, l + "mlp.down_proj.weight")};
}

// Residual vectors of every kind: N(0, s) at scales from an embedding row's to
// far beyond a residual's, one huge channel, all channels equal.
std::vector<std::vector<float>> probe_inputs(std::int64_t h) {
  std::mt19937 gen(42);
  std::normal_distribution<float> normal;
  std::vector<std::vector<float>> out;
  for (float scale : {0.02f, 1.0f, 75.0f, 1e4f})
    for (int k = 0; k < 4; ++k) {
      std::vector<float> x(static_cast<std::size_t>(h));
      for (auto& v : x) v = scale * normal(gen);
      out.push_back(std::move(x));
    }
  std::vector<float> spike(static_cast<std::size_t>(h), 0.01f);
  spike[3] = 5e3f;
  out.push_back(spike);
  out.push_back(std::vector<float>(static_cast<std::size_t>(h), -0.5f));
  return out;
}

// The massive MLP adds the documented values to the massive channels for any
// input (within 1 %: its weights are rounded to bf16), and (at the small
// shapes, where every neuron is a pair) nothing else.
TEST(SyntheticModes, StressMassiveChannelsOnAnyInput) {
  const auto text = synthetic_small_spec(4, 300).text;
  const auto layout = synthetic_stress_layout(text, 1);
  ASSERT_TRUE(layout) << layout.error().to_string();
  EXPECT_EQ(layout->massive_layer, 1);
  ASSERT_EQ(layout->massive_values, (std::vector<float>{1500, -3500, 8000}));
  const auto mlp = massive_mlp(synthetic_tensors(text, 1, {.stress = true}), layout->massive_layer);
  for (const auto& x : probe_inputs(text.hidden_size)) {
    const auto y = mlp(x);
    for (std::int64_t c = 0; c < text.hidden_size; ++c) {
      const auto it = std::find(layout->massive_channels.begin(), layout->massive_channels.end(), c);
      if (it == layout->massive_channels.end()) {
        EXPECT_EQ(y[static_cast<std::size_t>(c)], 0.0f);
      } else {
        const float want = layout->massive_values[static_cast<std::size_t>(it - layout->massive_channels.begin())];
        EXPECT_NEAR(y[static_cast<std::size_t>(c)], want, 0.01 * std::fabs(want)) << "channel " << c;
      }
    }
  }
}

// The same at the 2B shapes, where 2,048 of the 6,144 neurons are ordinary
// ones adding a little noise.
TEST(SyntheticModes, StressMassiveChannels2BShapes) {
  const auto text = synthetic_2b_spec(4, 64).text;
  const auto layout = synthetic_stress_layout(text, 0);
  ASSERT_TRUE(layout);
  const auto mlp = massive_mlp(synthetic_tensors(text, 0, {.stress = true}), layout->massive_layer);
  double worst = 0;
  for (const auto& x : probe_inputs(text.hidden_size)) {
    const auto y = mlp(x);
    for (std::size_t i = 0; i < layout->massive_channels.size(); ++i) {
      const float want = layout->massive_values[i];
      const float got = y[static_cast<std::size_t>(layout->massive_channels[i])];
      worst = std::max(worst, std::fabs(static_cast<double>(got - want)) / std::fabs(want));
    }
  }
  EXPECT_LT(worst, 0.01);
}

// The first-token detector of the DeltaNet head: after the compensated norm,
// projection, causal conv and SiLU, head 0's query and key are e_A at the
// first position and e_B / e_C (exactly, other channels exactly 0) after it,
// so the head reads row A of its state at position 0 and the never-written
// row B afterwards: an output at the first position only.
TEST(SyntheticModes, StressFirstTokenDetector) {
  const auto text = synthetic_small_spec(4, 300).text;
  const auto layout = synthetic_stress_layout(text, 2);
  ASSERT_TRUE(layout);
  const auto tensors = synthetic_tensors(text, 2, {.stress = true});
  const std::string l = "layers." + std::to_string(layout->first_token_layer) + ".";
  const auto norm = tensor_values(tensors, l + "input_layernorm.weight");
  const auto qkv = tensor_values(tensors, l + "linear_attn.in_proj_qkv.weight");
  const auto conv = tensor_values(tensors, l + "linear_attn.conv1d.weight");
  const std::int64_t h = text.hidden_size, dk = text.linear_key_head_dim, kdim = text.linear_key_dim();
  const std::int64_t kernel = text.linear_conv_kernel_dim;
  // A sequence of residuals as they reach the layer: massive channels plus a random bulk.
  std::mt19937 gen(7);
  std::normal_distribution<float> normal;
  const std::int64_t steps = 6;
  std::vector<std::vector<float>> projected;  // per position: channels of key head 0 (q then k)
  for (std::int64_t t = 0; t < steps; ++t) {
    std::vector<float> x(static_cast<std::size_t>(h));
    for (auto& v : x) v = layout->bulk_rms[1] * 2 * normal(gen);  // twice the design bulk
    for (std::size_t i = 0; i < layout->massive_channels.size(); ++i)
      x[static_cast<std::size_t>(layout->massive_channels[i])] = layout->massive_values[i] * (1 + 0.01f * normal(gen));
    const auto xn = rms_norm(x, norm);
    std::vector<float> p;
    for (std::int64_t ch : {std::int64_t{0}, kdim})
      for (std::int64_t j = 0; j < dk; ++j) {
        double s = 0;
        for (std::int64_t c = 0; c < h; ++c)
          s += qkv[static_cast<std::size_t>((ch + j) * h + c)] * xn[static_cast<std::size_t>(c)];
        p.push_back(static_cast<float>(s));
      }
    projected.push_back(p);
  }
  for (std::int64_t t = 0; t < steps; ++t) {
    std::vector<float> q, k;
    for (std::int64_t j = 0; j < 2 * dk; ++j) {
      const std::int64_t ch = j < dk ? j : kdim + j - dk;
      double s = 0;
      for (std::int64_t tap = 0; tap < kernel; ++tap) {
        const std::int64_t src = t - (kernel - 1) + tap;
        if (src >= 0)
          s += conv[static_cast<std::size_t>(ch * kernel + tap)] *
               projected[static_cast<std::size_t>(src)][static_cast<std::size_t>(j)];
      }
      (j < dk ? q : k).push_back(silu(static_cast<float>(s)));
    }
    const std::int64_t qi = t == 0 ? 0 : 1, ki = t == 0 ? 0 : 2;  // A; B and C
    for (std::int64_t j = 0; j < dk; ++j) {
      if (j == qi)
        EXPECT_GT(q[static_cast<std::size_t>(j)], 20.0f) << t;
      else
        EXPECT_EQ(q[static_cast<std::size_t>(j)], 0.0f) << t << " " << j;
      if (j == ki)
        EXPECT_GT(k[static_cast<std::size_t>(j)], 20.0f) << t;
      else
        EXPECT_EQ(k[static_cast<std::size_t>(j)], 0.0f) << t << " " << j;
    }
  }
}

// Final norm scales 1 + w: magnitudes over 0.05..20, 10 % negative, a few near 0.
TEST(SyntheticModes, StressFinalNormScales) {
  for (const auto& text : {synthetic_small_spec(4, 300).text, synthetic_2b_spec(4, 64).text}) {
    const std::int64_t h = text.hidden_size;
    for (std::uint64_t seed : {0u, 1u}) {
      const auto w = tensor_values(synthetic_tensors(text, seed, {.stress = true}), "norm.weight");
      int negative = 0, near_zero = 0;
      float lo = 100, hi = 0;
      for (float x : w) {
        const float scale = 1 + x;
        negative += scale < 0;
        if (std::fabs(scale) < 0.01f) {
          ++near_zero;
          EXPECT_NE(scale, 0.0f);
          continue;
        }
        lo = std::min(lo, std::fabs(scale));
        hi = std::max(hi, std::fabs(scale));
      }
      const int expected_near_zero = static_cast<int>(std::max<std::int64_t>(2, h / 256));
      EXPECT_EQ(near_zero, expected_near_zero);
      // 10 % of the channels plus the near-zero ones of negative sign (every other one of three).
      const int near_zero_negative = (expected_near_zero + 1) / 3;
      EXPECT_EQ(negative, std::lround(0.1 * static_cast<double>(h)) + near_zero_negative);
      EXPECT_GE(lo, 0.046f);  // 0.05 with w = -0.95 rounded to bf16 (steps of 2^-8)
      EXPECT_LE(hi, 20.0f);
      EXPECT_LT(lo, 0.1f) << seed;
      EXPECT_GT(hi, 10.0f) << seed;
    }
  }
}

// Sinks: the first-token channel feeds head dim sink_dim of KV head 0's key;
// the query heads of that group have a constant component there.
TEST(SyntheticModes, StressLayout) {
  const auto text = synthetic_2b_spec(24, 64).text;
  const auto layout = synthetic_stress_layout(text, 0);
  ASSERT_TRUE(layout);
  EXPECT_EQ(layout->first_token_layer, 2);
  EXPECT_EQ(layout->sink_layers, (std::vector<std::int64_t>{3, 7, 11, 15, 19, 23}));
  EXPECT_EQ(layout->sink_dim, 255);
  EXPECT_GE(layout->sink_dim, text.rotary_dim());
  EXPECT_EQ(layout->sink_gaps, (std::vector<float>{3, 5, 7, 9}));
  std::vector<std::int64_t> channels = layout->massive_channels;
  channels.push_back(layout->first_token_channel);
  channels.push_back(synthetic_negative_channel(text.hidden_size, 0));
  std::sort(channels.begin(), channels.end());
  EXPECT_EQ(std::unique(channels.begin(), channels.end()), channels.end());
  // Growth by design: ~100x over the layers, from what one layer of N(0, 0.02) adds.
  ASSERT_EQ(layout->bulk_rms.size(), 24u);
  EXPECT_NEAR(layout->bulk_rms.front(), 0.75, 0.02);
  EXPECT_NEAR(layout->bulk_rms.back() / layout->bulk_rms.front(), 100, 2);
  EXPECT_EQ(layout->output_scale.front(), 1.0f);
  EXPECT_GT(layout->output_scale.back(), 10.0f);
  // The channels move with the seed.
  EXPECT_NE(synthetic_stress_layout(text, 1)->massive_channels, layout->massive_channels);

  const auto tensors = synthetic_tensors(synthetic_2b_spec(4, 64).text, 0, {.stress = true});
  const auto k = tensor_values(tensors, "layers.3.self_attn.k_proj.weight");
  EXPECT_EQ(k[static_cast<std::size_t>(layout->sink_dim * text.hidden_size + layout->first_token_channel)], 128.0f);
}

// A stress checkpoint is a valid, finite, deterministic Qwen3.5 checkpoint;
// the embedding and the untouched tensors are the plain model's.
TEST(SyntheticModes, StressCheckpoint) {
  TempDir dir;
  auto spec = synthetic_small_spec(8, 300);
  spec.options.stress = true;
  ASSERT_TRUE(write_synthetic_checkpoint(dir / "a", spec, 1));
  ASSERT_TRUE(write_synthetic_checkpoint(dir / "b", spec, 1));
  ASSERT_TRUE(write_synthetic_checkpoint(dir / "c", spec, 2));
  spec.options.stress = false;
  ASSERT_TRUE(write_synthetic_checkpoint(dir / "plain", spec, 1));
  EXPECT_EQ(read_file(dir / "a/model.safetensors"), read_file(dir / "b/model.safetensors"));
  EXPECT_NE(read_file(dir / "a/model.safetensors"), read_file(dir / "c/model.safetensors"));
  auto stress = Checkpoint::open(dir / "a");
  auto plain = Checkpoint::open(dir / "plain");
  ASSERT_TRUE(stress) << stress.error().to_string();
  ASSERT_TRUE(plain);
  for (const auto& name : stress->tensors().names()) {
    const auto ref = stress->tensors().get(name);
    std::vector<float> values(static_cast<std::size_t>(ref->numel()));
    ASSERT_TRUE(to_f32(*ref, values));
    for (float x : values) ASSERT_TRUE(std::isfinite(x)) << name;
  }
  for (const char* same :
       {"embed_tokens.weight", "layers.0.linear_attn.in_proj_qkv.weight", "layers.5.mlp.up_proj.weight"})
    EXPECT_EQ(read_tensor(*stress, same), read_tensor(*plain, same)) << same;
  for (const char* changed : {"norm.weight", "layers.1.mlp.down_proj.weight", "layers.7.self_attn.o_proj.weight"})
    EXPECT_NE(read_tensor(*stress, changed), read_tensor(*plain, changed)) << changed;
}

TEST(SyntheticModes, StressNeedsTheSyntheticPattern) {
  TempDir dir;
  auto spec = synthetic_small_spec(3, 300);
  spec.options.stress = true;
  auto r = write_synthetic_checkpoint(dir.path(), spec, 1);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), "synthetic checkpoint: a stress base needs at least 4 layers");
  spec = synthetic_small_spec(4, 300);
  spec.options.stress = true;
  spec.text.intermediate_size = 100;
  EXPECT_EQ(check_synthetic_options(spec.text, spec.options).message(),
            "a stress base needs intermediate_size >= 2 x hidden_size");
  EXPECT_FALSE(synthetic_stress_layout(spec.text, 1));
}

}  // namespace
}  // namespace qgpu::qwen35
