// Synthetic checkpoints: real formats, deterministic bytes, sane value ranges.
#include "qgpu/qwen35/synthetic.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "qgpu/qwen35/checkpoint.h"
#include "test_util.h"

namespace qgpu::qwen35 {
namespace {

using test::read_file;
using test::TempDir;

TEST(Synthetic, LayerPattern) {
  using L = LayerType;
  const L l = L::kLinearAttention, f = L::kFullAttention;
  EXPECT_EQ(synthetic_layer_types(1), (std::vector<L>{f}));
  EXPECT_EQ(synthetic_layer_types(2), (std::vector<L>{l, f}));
  EXPECT_EQ(synthetic_layer_types(4), (std::vector<L>{l, l, l, f}));
  EXPECT_EQ(synthetic_layer_types(5), (std::vector<L>{l, l, l, f, l}));
}

TEST(Synthetic, SmallPassesChecksAndIsDeterministic) {
  TempDir dir;
  const auto spec = synthetic_small_spec();
  auto a = write_synthetic_checkpoint(dir / "a", spec, 7);
  ASSERT_TRUE(a) << a.error().to_string();
  ASSERT_TRUE(write_synthetic_checkpoint(dir / "b", spec, 7));
  ASSERT_TRUE(write_synthetic_checkpoint(dir / "c", spec, 8));
  ASSERT_EQ(a->files.size(), 2u);
  EXPECT_EQ(a->files[0].filename(), "config.json");
  EXPECT_EQ(a->files[1].filename(), "model.safetensors");
  EXPECT_EQ(a->total_bytes, std::filesystem::file_size(dir / "a/config.json") +
                                std::filesystem::file_size(dir / "a/model.safetensors"));
  EXPECT_EQ(read_file(dir / "a/model.safetensors"), read_file(dir / "b/model.safetensors"));
  EXPECT_EQ(read_file(dir / "a/config.json"), read_file(dir / "b/config.json"));
  EXPECT_NE(read_file(dir / "a/model.safetensors"), read_file(dir / "c/model.safetensors"));

  auto c = Checkpoint::open(dir / "a");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_TRUE(c->config().multimodal_wrapper);
  EXPECT_EQ(c->config().text.hidden_size, 64);
  EXPECT_EQ(c->config().text.linear_num_value_heads, 4);
  EXPECT_EQ(c->tensors().size(), 55u);  // 1 + 3 x 14 + 11 + 1
  EXPECT_EQ((*c->tensors().files().front()).header().metadata.at("format"), "pt");
}

TEST(Synthetic, ShardedHoldsTheSameTensors) {
  TempDir dir;
  auto spec = synthetic_small_spec();
  ASSERT_TRUE(write_synthetic_checkpoint(dir / "one", spec, 3));
  spec.max_shard_bytes = 50'000;
  auto r = write_synthetic_checkpoint(dir / "sharded", spec, 3);
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_GT(r->files.size(), 3u);
  EXPECT_EQ(r->files.back().filename(), "model.safetensors.index.json");
  auto one = Checkpoint::open(dir / "one");
  auto sharded = Checkpoint::open(dir / "sharded");
  ASSERT_TRUE(one && sharded) << sharded.error().to_string();
  EXPECT_GT(sharded->tensors().files().size(), 1u);
  ASSERT_EQ(one->tensors().names(), sharded->tensors().names());
  for (const auto& name : one->tensors().names()) {
    auto x = one->tensors().get(name), y = sharded->tensors().get(name);
    ASSERT_TRUE(std::equal(x->bytes().begin(), x->bytes().end(), y->bytes().begin(), y->bytes().end())) << name;
  }
}

double stddev(const std::vector<float>& v) {
  double s = 0, s2 = 0;
  for (float x : v) s += x, s2 += static_cast<double>(x) * x;
  const double m = s / v.size();
  return std::sqrt(s2 / v.size() - m * m);
}

TEST(Synthetic, ValuesScaledLikeARealModel) {
  TempDir dir;
  ASSERT_TRUE(write_synthetic_checkpoint(dir.path(), synthetic_small_spec(), 11));
  auto c = Checkpoint::open(dir.path());
  ASSERT_TRUE(c);
  auto values = [&](const std::string& n) { return *to_f32(*c->text_tensor(n)); };
  for (const char* n : {"layers.0.linear_attn.in_proj_qkv.weight", "layers.3.self_attn.q_proj.weight",
                        "layers.2.mlp.down_proj.weight"}) {
    EXPECT_NEAR(stddev(values(n)), 0.02, 0.002) << n;
  }
  // The embedding without its negative channel (below).
  const std::int64_t h = 64, neg = synthetic_negative_channel(h, 11);
  std::vector<float> embed;
  const auto all = values("embed_tokens.weight");
  for (std::size_t i = 0; i < all.size(); ++i)
    if (static_cast<std::int64_t>(i) % h != neg) embed.push_back(all[i]);
  EXPECT_NEAR(stddev(embed), 0.02, 0.002);
  for (float x : values("layers.0.input_layernorm.weight")) EXPECT_LT(std::fabs(x), 0.1f);  // scale 1 + w
  for (float x : values("layers.1.linear_attn.norm.weight")) EXPECT_NEAR(x, 1.0f, 0.1f);    // scale w
  for (float a : values("layers.0.linear_attn.A_log")) {
    EXPECT_GE(std::exp(a), 1.0f);
    EXPECT_LE(std::exp(a), 16.0f);
  }
  for (float b : values("layers.2.linear_attn.dt_bias")) {
    const double dt = std::log1p(std::exp(static_cast<double>(b)));  // softplus
    EXPECT_GE(dt, 0.9e-3);
    EXPECT_LE(dt, 0.11);
  }
}

// Exactly one channel where every embedding row is strictly negative (the
// merge's mute channel), at the documented place; it moves with the seed.
TEST(Synthetic, EmbeddingHasOneNegativeChannel) {
  TempDir dir;
  const auto spec = synthetic_small_spec(2, 300);
  for (std::uint64_t seed : {1u, 2u, 5u}) {
    const auto sub = dir / std::to_string(seed);
    ASSERT_TRUE(write_synthetic_checkpoint(sub, spec, seed));
    auto c = Checkpoint::open(sub);
    ASSERT_TRUE(c);
    const auto e = *to_f32(*c->text_tensor("embed_tokens.weight"));
    const std::int64_t h = spec.text.hidden_size, rows = spec.text.vocab_size;
    ASSERT_EQ(static_cast<std::int64_t>(e.size()), h * rows);
    std::vector<std::int64_t> negative;
    float worst = -1;
    for (std::int64_t ch = 0; ch < h; ++ch) {
      bool all = true;
      for (std::int64_t r = 0; r < rows && all; ++r) all = e[static_cast<std::size_t>(r * h + ch)] < 0;
      if (!all) continue;
      negative.push_back(ch);
      for (std::int64_t r = 0; r < rows; ++r) worst = std::max(worst, e[static_cast<std::size_t>(r * h + ch)]);
    }
    ASSERT_EQ(negative.size(), 1u) << "seed " << seed;
    EXPECT_EQ(negative[0], synthetic_negative_channel(h, seed));
    EXPECT_LE(worst, -0.125f);  // -(1/8 + |w|), rounded to bf16
  }
  EXPECT_NE(synthetic_negative_channel(2048, 1), synthetic_negative_channel(2048, 2));
}

TEST(Synthetic, TwoBShapes) {
  // One full-attention layer at the 2B's shapes (about 105 MB), a tiny vocabulary.
  TempDir dir;
  auto r = write_synthetic_checkpoint(dir.path(), synthetic_2b_spec(1, 64), 0);
  ASSERT_TRUE(r) << r.error().to_string();
  auto c = Checkpoint::open(dir.path());
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->text_tensor("layers.0.self_attn.q_proj.weight")->shape(), (std::vector<std::int64_t>{4096, 2048}));
  EXPECT_EQ(c->text_tensor("layers.0.mlp.up_proj.weight")->shape(), (std::vector<std::int64_t>{6144, 2048}));
  EXPECT_EQ(c->config().text.rope.mrope_section, (std::vector<std::int64_t>{11, 11, 10}));
  EXPECT_EQ(c->config().text.eos_token_ids, std::vector<std::int64_t>{63});
}

TEST(Synthetic, DefaultSpecIsThe2BLayout) {
  const auto t = synthetic_2b_spec().text;
  EXPECT_EQ(t.num_hidden_layers, 4);
  EXPECT_EQ(t.vocab_size, 4096);
  const auto expected = expected_text_tensors(t);
  EXPECT_EQ(expected.size(), 55u);
  std::uint64_t params = 0;
  for (const auto& e : expected) {
    std::uint64_t n = 1;
    for (auto d : e.shape) n *= static_cast<std::uint64_t>(d);
    params += n;
  }
  // Per linear layer: qkv 6144x2048 + z 2048x2048 + b,a 2x16x2048 + conv 6144x4 + 16 + 16 + 128 + out 2048x2048
  // + MLP 3x6144x2048 + 2 norms x 2048; full layer: q 4096x2048 + k,v 2x512x2048 + o 2048x2048 + 2x256 + MLP + norms.
  const std::uint64_t mlp = 3ull * 6144 * 2048, norms = 2 * 2048;
  const std::uint64_t linear =
      6144ull * 2048 + 2048ull * 2048 + 2 * 16 * 2048 + 6144 * 4 + 16 + 16 + 128 + 2048ull * 2048 + mlp + norms;
  const std::uint64_t full = 4096ull * 2048 + 2 * 512 * 2048 + 2048ull * 2048 + 2 * 256 + mlp + norms;
  EXPECT_EQ(params, 3 * linear + full + 4096ull * 2048 + 2048);
}

TEST(Synthetic, TokenizerHook) {
  TempDir dir;
  auto spec = synthetic_small_spec(2, 300);
  std::filesystem::path seen;
  spec.write_tokenizer = [&](const std::filesystem::path& d, const TextConfig& t) {
    seen = d;
    EXPECT_EQ(t.vocab_size, 300);
    EXPECT_TRUE(std::filesystem::exists(d / "config.json"));
    return sdk::Status::ok();
  };
  ASSERT_TRUE(write_synthetic_checkpoint(dir.path(), spec, 1));
  EXPECT_EQ(seen, dir.path());
  spec.write_tokenizer = [](const std::filesystem::path&, const TextConfig&) {
    return sdk::not_available("tokenizer writing");
  };
  auto r = write_synthetic_checkpoint(dir.path(), spec, 1);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), "writing the tokenizer: tokenizer writing is not available in this build");
}

TEST(Synthetic, InvalidSpecRefused) {
  TempDir dir;
  auto spec = synthetic_small_spec();
  spec.text.num_key_value_heads = 3;
  auto r = write_synthetic_checkpoint(dir.path(), spec, 1);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(),
            "synthetic checkpoint: text_config.num_attention_heads: 4 is not a multiple of num_key_value_heads (3)");
}

}  // namespace
}  // namespace qgpu::qwen35
