// Checkpoint-level checks: tensor names, shapes and dtypes against the config.
#include "qgpu/qwen35/checkpoint.h"

#include <gtest/gtest.h>

#include "qgpu/qwen35/synthetic.h"
#include "test_util.h"

namespace qgpu::qwen35 {
namespace {

using test::TempDir;

TextConfig published(std::int64_t hidden, std::int64_t mlp, std::int64_t layers, std::int64_t nh, std::int64_t nkv,
                     std::int64_t nv) {
  TextConfig t;
  t.vocab_size = 248320;
  t.hidden_size = hidden;
  t.intermediate_size = mlp;
  t.num_hidden_layers = layers;
  t.num_attention_heads = nh;
  t.num_key_value_heads = nkv;
  t.head_dim = 256;
  t.linear_num_key_heads = 16;
  t.linear_num_value_heads = nv;
  t.tie_word_embeddings = true;
  t.layer_types = derive_layer_types(layers, 4);
  return t;
}

const ExpectedTensor* find(const std::vector<ExpectedTensor>& list, const std::string& name) {
  for (const auto& e : list)
    if (e.name == name) return &e;
  return nullptr;
}

TEST(ExpectedTensors, CountsAndShapesOfPublishedModels) {
  // QWEN35.md §5: 320 text tensors for 0.8B/2B, 426 for 4B.
  EXPECT_EQ(expected_text_tensors(published(1024, 3584, 24, 8, 2, 16)).size(), 320u);
  EXPECT_EQ(expected_text_tensors(published(2560, 9216, 32, 16, 4, 32)).size(), 426u);

  const auto t2b = expected_text_tensors(published(2048, 6144, 24, 8, 2, 16));
  using S = std::vector<std::int64_t>;
  auto shape = [&](const std::string& n) {
    auto* e = find(t2b, "model.language_model." + n);
    return e ? e->shape : S{-1};
  };
  auto dtype = [&](const std::string& n) { return find(t2b, "model.language_model." + n)->dtype; };
  // Shapes from QWEN35.md §1.4 / §3.1 / §4.1 for the 2B.
  EXPECT_EQ(shape("embed_tokens.weight"), (S{248320, 2048}));
  EXPECT_EQ(shape("layers.0.linear_attn.in_proj_qkv.weight"), (S{6144, 2048}));
  EXPECT_EQ(shape("layers.0.linear_attn.in_proj_z.weight"), (S{2048, 2048}));
  EXPECT_EQ(shape("layers.0.linear_attn.in_proj_b.weight"), (S{16, 2048}));
  EXPECT_EQ(shape("layers.0.linear_attn.conv1d.weight"), (S{6144, 1, 4}));
  EXPECT_EQ(shape("layers.0.linear_attn.norm.weight"), (S{128}));
  EXPECT_EQ(shape("layers.0.linear_attn.out_proj.weight"), (S{2048, 2048}));
  EXPECT_EQ(shape("layers.3.self_attn.q_proj.weight"), (S{4096, 2048}));
  EXPECT_EQ(shape("layers.3.self_attn.k_proj.weight"), (S{512, 2048}));
  EXPECT_EQ(shape("layers.3.self_attn.o_proj.weight"), (S{2048, 2048}));
  EXPECT_EQ(shape("layers.3.self_attn.q_norm.weight"), (S{256}));
  EXPECT_EQ(shape("layers.5.mlp.down_proj.weight"), (S{2048, 6144}));
  EXPECT_EQ(shape("layers.3.linear_attn.A_log"), (S{-1})) << "layer 3 is full attention";
  EXPECT_EQ(dtype("layers.0.linear_attn.A_log"), StDType::kF32);
  EXPECT_EQ(dtype("layers.0.linear_attn.norm.weight"), StDType::kF32);
  EXPECT_EQ(dtype("layers.0.linear_attn.dt_bias"), StDType::kBF16);
  EXPECT_EQ(find(t2b, "lm_head.weight"), nullptr) << "tied";

  auto untied = published(2048, 6144, 4, 8, 2, 16);
  untied.tie_word_embeddings = false;
  const auto untied_list = expected_text_tensors(untied);
  auto* head = find(untied_list, "lm_head.weight");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->shape, (S{248320, 2048}));
}

// Writes the small synthetic model's tensors after `edit` changes the list.
void write_edited(const std::filesystem::path& dir, const TextConfig& text,
                  const std::function<void(std::vector<TensorToWrite>&)>& edit) {
  std::filesystem::create_directories(dir);
  test::write_file(dir / "config.json", wrapper_config_json(text));
  auto tensors = synthetic_tensors(text, 1);
  edit(tensors);
  ASSERT_TRUE(write_checkpoint_tensors(dir, std::move(tensors)));
}

TensorToWrite zeros(std::string name, StDType dtype, std::vector<std::int64_t> shape) {
  TensorToWrite t{std::move(name), dtype, std::move(shape), nullptr};
  t.fill = [](std::span<std::byte> out) {
    std::fill(out.begin(), out.end(), std::byte{0});
    return sdk::Status::ok();
  };
  return t;
}

std::string open_error(const std::filesystem::path& dir, const CheckOptions& options = {}) {
  auto c = Checkpoint::open(dir, options);
  return c ? "(opened)" : c.error().message();
}

const TextConfig kSmall = synthetic_small_spec().text;
const std::string kP = "model.language_model.";

TEST(CheckTensors, MissingTensor) {
  TempDir dir;
  write_edited(dir.path(), kSmall, [](auto& t) {
    std::erase_if(t, [](const TensorToWrite& x) { return x.name.ends_with("layers.1.linear_attn.A_log"); });
  });
  EXPECT_EQ(open_error(dir.path()),
            dir.path().string() + ": missing tensor 'model.language_model.layers.1.linear_attn.A_log'");
}

TEST(CheckTensors, ManyMissing) {
  TempDir dir;
  write_edited(dir.path(), kSmall, [](auto& t) {
    std::erase_if(t, [](const TensorToWrite& x) { return x.name.find("layers.3.") != std::string::npos; });
  });
  EXPECT_EQ(
      open_error(dir.path()),
      dir.path().string() + ": missing tensor 'model.language_model.layers.3.input_layernorm.weight' (and 10 more)");
}

TEST(CheckTensors, WrongShape) {
  TempDir dir;
  write_edited(dir.path(), kSmall, [](auto& t) {
    for (auto& x : t)
      if (x.name == kP + "layers.3.self_attn.q_proj.weight") x = zeros(x.name, StDType::kBF16, {128, 64});
  });
  EXPECT_EQ(open_error(dir.path()), dir.path().string() +
                                        ": tensor 'model.language_model.layers.3.self_attn.q_proj.weight': expected "
                                        "[256, 64] BF16, got [128, 64] BF16");
}

TEST(CheckTensors, WrongDtype) {
  TempDir dir;
  write_edited(dir.path(), kSmall, [](auto& t) {
    for (auto& x : t)
      if (x.name == kP + "layers.0.linear_attn.A_log") x = zeros(x.name, StDType::kBF16, {4});
  });
  EXPECT_EQ(open_error(dir.path()), dir.path().string() +
                                        ": tensor 'model.language_model.layers.0.linear_attn.A_log': expected [4] "
                                        "F32, got [4] BF16");
  // Any float dtype is fine when exact dtypes are not asked for.
  EXPECT_EQ(open_error(dir.path(), CheckOptions{.exact_dtypes = false}), "(opened)");
}

TEST(CheckTensors, IntegerTensorNeverPasses) {
  TempDir dir;
  write_edited(dir.path(), kSmall, [](auto& t) {
    for (auto& x : t)
      if (x.name == kP + "norm.weight") x = zeros(x.name, StDType::kI16, {64});
  });
  EXPECT_EQ(open_error(dir.path(), CheckOptions{.exact_dtypes = false}),
            dir.path().string() + ": tensor 'model.language_model.norm.weight': expected [64] BF16, got [64] I16");
}

TEST(CheckTensors, UnexpectedTensorUnderPrefix) {
  TempDir dir;
  write_edited(dir.path(), kSmall,
               [](auto& t) { t.push_back(zeros(kP + "layers.0.self_attn.q_norm.weight", StDType::kBF16, {32})); });
  EXPECT_EQ(open_error(dir.path()), dir.path().string() +
                                        ": unexpected tensor 'model.language_model.layers.0.self_attn.q_norm.weight' "
                                        "for this config (4 layers, layer_types as configured)");
}

TEST(CheckTensors, VisualAndMtpIgnored) {
  TempDir dir;
  write_edited(dir.path(), kSmall, [](auto& t) {
    t.push_back(zeros("model.visual.patch_embed.proj.weight", StDType::kBF16, {8, 3}));
    t.push_back(zeros("mtp.fc.weight", StDType::kBF16, {64, 128}));
  });
  auto c = Checkpoint::open(dir.path());
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->prefix(), kP);
  EXPECT_EQ(c->tensors().size(), 57u);
}

TEST(CheckTensors, CausalLmPrefix) {
  TempDir dir;
  write_edited(dir.path(), kSmall, [](auto& t) {
    for (auto& x : t) x.name = "model." + x.name.substr(kP.size());
  });
  auto c = Checkpoint::open(dir.path());
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->prefix(), "model.");
  auto head = c->lm_head();
  ASSERT_TRUE(head);
  EXPECT_EQ(head->name(), "model.embed_tokens.weight");
}

// Qwen3_5ForCausalLM untied: model.* names and the head at the top level, outside the prefix.
TEST(CheckTensors, CausalLmPrefixUntied) {
  TempDir dir;
  TextConfig untied = kSmall;
  untied.tie_word_embeddings = false;
  write_edited(dir.path(), untied, [](auto& t) {
    for (auto& x : t)
      if (x.name.starts_with(kP)) x.name = "model." + x.name.substr(kP.size());
  });
  auto c = Checkpoint::open(dir.path());
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->prefix(), "model.");
  auto head = c->lm_head();
  ASSERT_TRUE(head);
  EXPECT_EQ(head->name(), "lm_head.weight");
  const auto expected = expected_text_tensors(untied, c->prefix());
  EXPECT_EQ(expected.back().name, kLmHeadName);
  for (std::size_t i = 0; i + 1 < expected.size(); ++i) EXPECT_TRUE(expected[i].name.starts_with("model."));
}

TEST(CheckTensors, UntiedNeedsLmHead) {
  TempDir dir;
  TextConfig untied = kSmall;
  untied.tie_word_embeddings = false;
  write_edited(dir.path(), untied,
               [](auto& t) { std::erase_if(t, [](auto& x) { return x.name == "lm_head.weight"; }); });
  EXPECT_EQ(open_error(dir.path()), dir.path().string() + ": missing tensor 'lm_head.weight'");
}

TEST(CheckTensors, NoEmbedding) {
  TempDir dir;
  write_edited(dir.path(), kSmall,
               [](auto& t) { std::erase_if(t, [](auto& x) { return x.name.ends_with("embed_tokens.weight"); }); });
  EXPECT_EQ(open_error(dir.path()), dir.path().string() +
                                        ": no text embedding: neither 'model.language_model.embed_tokens.weight' nor "
                                        "'model.embed_tokens.weight' is in the checkpoint");
}

TEST(CheckTensors, ConfigErrorComesFirst) {
  TempDir dir;
  test::write_file(dir / "config.json", R"({"model_type": "bert"})");
  auto c = Checkpoint::open(dir.path());
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().to_string(), (dir / "config.json").string() +
                                       ": error: model_type: 'bert' is not a Qwen3.5 config (expected qwen3_5 or "
                                       "qwen3_5_text)");
}

}  // namespace
}  // namespace qgpu::qwen35
