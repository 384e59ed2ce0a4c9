// qgpu-host build's writer (qgpu/qwen35/export.h) on a small synthetic checkpoint, with a source
// that fills the added layers and rows with known values.
#include "qgpu/qwen35/export.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "qgpu/qwen35/checkpoint.h"
#include "qgpu/qwen35/synthetic.h"
#include "test_util.h"

namespace qgpu::qwen35 {
namespace {

using test::TempDir;

constexpr std::int64_t kVocab = 256, kTokenizer = 200, kLayers = 2, kAdded = 3, kRows = 5;

// Layer l's tensors hold 0.5 * (l + 1) everywhere; embedding row r holds r + 1, head row r -(r + 1).
class KnownSource final : public sdk::ExportSource {
 public:
  sdk::Status fill_layer(std::int64_t layer, std::string_view suffix, const sdk::TensorView& out) override {
    ++layer_calls[std::string(suffix)];
    fill(out, [&](std::int64_t) { return 0.5f * static_cast<float>(layer + 1); });
    return sdk::Status::ok();
  }
  sdk::Status fill_rows(bool head, const sdk::TensorView& out) override {
    const std::int64_t hidden = out.shape[1];
    fill(out, [&](std::int64_t i) { return (head ? -1.0f : 1.0f) * static_cast<float>(i / hidden + 1); });
    return sdk::Status::ok();
  }
  void written(std::uint64_t done, std::uint64_t total) override {
    last_done = done;
    last_total = total;
  }
  std::map<std::string, int> layer_calls;
  std::uint64_t last_done = 0, last_total = 0;

 private:
  template <typename F>
  static void fill(const sdk::TensorView& out, F value) {
    for (std::int64_t i = 0; i < out.numel(); ++i) {
      const float v = value(i);
      if (out.dtype == sdk::DType::kF32)
        static_cast<float*>(out.data)[i] = v;
      else
        static_cast<std::uint16_t*>(out.data)[i] = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(v) >> 16);
    }
  }
};

// A small checkpoint whose tokenizer has text for ids [0, kTokenizer) only (as Qwen3.5 pads its rows).
void write_base(const std::filesystem::path& dir) {
  SyntheticSpec spec = synthetic_small_spec(kLayers, kVocab);
  spec.write_tokenizer = [](const std::filesystem::path& d, const TextConfig&) {
    nlohmann::json vocab = nlohmann::json::object();
    for (int i = 0; i < kTokenizer - 2; ++i) vocab["t" + std::to_string(i)] = i;
    nlohmann::json tok = {{"model", {{"type", "BPE"}, {"vocab", vocab}}},
                          {"added_tokens",
                           {{{"id", kTokenizer - 2}, {"content", "<|endoftext|>"}, {"special", true}},
                            {{"id", kTokenizer - 1}, {"content", "<|im_start|>"}, {"special", true}}}}};
    test::write_file(d / "tokenizer.json", tok.dump());
    return sdk::Status::ok();
  };
  ASSERT_TRUE(write_synthetic_checkpoint(dir, spec, 7).has_value());
}

sdk::CheckpointExport request(const std::filesystem::path& out, sdk::DType dtype) {
  sdk::CheckpointExport r;
  r.directory = out.string();
  r.dtype = dtype;
  r.layers = kAdded;
  r.rows = kRows;
  for (int i = 0; i < kRows; ++i) r.row_tokens.push_back("<|x:" + std::to_string(i) + "|>");
  r.files = {{"manifest.json", "{}\n"}};
  r.max_shard_bytes = 0;
  return r;
}

float value_at(const TensorRef& t, std::int64_t i) {
  std::vector<float> all(static_cast<std::size_t>(t.numel()));
  EXPECT_TRUE(to_f32(t, all).is_ok());
  return all[static_cast<std::size_t>(i)];
}

TEST(Export, AddedLayersInFrontRowsAfterBaseBitForBit) {
  TempDir tmp;
  write_base(tmp / "base");
  KnownSource source;
  auto files = export_checkpoint(tmp / "base", request(tmp / "out", sdk::DType::kBF16), source);
  ASSERT_TRUE(files.has_value()) << files.error().message();
  EXPECT_EQ(source.last_done, source.last_total);
  EXPECT_EQ(source.layer_calls.size(), 14u);  // every tensor of a linear-attention layer, once per added layer
  EXPECT_EQ(source.layer_calls["linear_attn.A_log"], kAdded);

  // It is a checkpoint our own loader accepts with published dtypes: stock names, shapes and dtypes.
  auto out = Checkpoint::open(tmp / "out", CheckOptions{/*exact_dtypes=*/false});
  ASSERT_TRUE(out.has_value()) << out.error().message();
  auto base = Checkpoint::open(tmp / "base");
  ASSERT_TRUE(base.has_value());
  const TextConfig& t = out->config().text;
  EXPECT_EQ(t.num_hidden_layers, kLayers + kAdded);
  EXPECT_EQ(t.vocab_size, kVocab + kRows);
  EXPECT_FALSE(t.tie_word_embeddings);
  for (int i = 0; i < kAdded; ++i) EXPECT_EQ(t.layer_types[static_cast<std::size_t>(i)], LayerType::kLinearAttention);
  for (int i = 0; i < kLayers; ++i)
    EXPECT_EQ(t.layer_types[static_cast<std::size_t>(kAdded + i)],
              base->config().text.layer_types[static_cast<std::size_t>(i)]);

  // Added layers: the source's values in the published dtypes.
  auto a_log = out->text_tensor("layers.1.linear_attn.A_log");
  ASSERT_TRUE(a_log.has_value());
  EXPECT_EQ(a_log->dtype(), StDType::kF32);
  EXPECT_EQ(value_at(*a_log, 0), 1.0f);
  auto gate = out->text_tensor("layers.2.mlp.gate_proj.weight");
  ASSERT_TRUE(gate.has_value());
  EXPECT_EQ(gate->dtype(), StDType::kBF16);
  EXPECT_EQ(value_at(*gate, 5), 1.5f);
  // The base's layers, renumbered, bit for bit.
  for (const ExpectedTensor& e : expected_text_tensors(base->config().text, base->prefix())) {
    const std::string layers = base->prefix() + "layers.";
    if (!e.name.starts_with(layers)) continue;
    const std::size_t dot = e.name.find('.', layers.size());
    const int index = std::stoi(e.name.substr(layers.size(), dot - layers.size()));
    auto from = base->tensors().get(e.name);
    auto to = out->tensors().get(layers + std::to_string(index + kAdded) + e.name.substr(dot));
    ASSERT_TRUE(from.has_value() && to.has_value()) << e.name;
    ASSERT_EQ(from->dtype(), to->dtype());
    ASSERT_EQ(0, std::memcmp(from->data, to->data, from->bytes().size())) << e.name;
  }
  // The embedding keeps the base's rows, then the added ones; the head (tied in the base) the same
  // base rows, then the head rows.
  auto embed = out->text_tensor("embed_tokens.weight");
  auto head = out->lm_head();
  auto base_embed = base->text_tensor("embed_tokens.weight");
  ASSERT_TRUE(embed.has_value() && head.has_value() && base_embed.has_value());
  const std::int64_t H = t.hidden_size;
  EXPECT_EQ(embed->shape(), (std::vector<std::int64_t>{kVocab + kRows, H}));
  EXPECT_EQ(0, std::memcmp(embed->data, base_embed->data, base_embed->bytes().size()));
  EXPECT_EQ(0, std::memcmp(head->data, base_embed->data, base_embed->bytes().size()));
  EXPECT_EQ(value_at(*embed, (kVocab + 2) * H + 7), 3.0f);
  EXPECT_EQ(value_at(*head, (kVocab + 4) * H), -5.0f);

  // Tokenizer: placeholders for the rows it had no text for, then the added tokens at their ids.
  const auto tok = nlohmann::json::parse(test::read_file(tmp / "out" / "tokenizer.json"));
  std::map<std::int64_t, std::string> added;
  for (const auto& a : tok["added_tokens"]) added[a["id"].get<std::int64_t>()] = a["content"].get<std::string>();
  EXPECT_EQ(added[kTokenizer], "<|qgpu:unused 200|>");
  EXPECT_EQ(added[kVocab - 1], "<|qgpu:unused 255|>");
  EXPECT_EQ(added[kVocab], "<|x:0|>");
  EXPECT_EQ(added[kVocab + kRows - 1], "<|x:4|>");
  EXPECT_EQ(added.size(), static_cast<std::size_t>(2 + (kVocab - kTokenizer) + kRows));
  EXPECT_EQ(test::read_file(tmp / "out" / "manifest.json"), "{}\n");
  // Text generation never chooses an added row; the base's eos ids stay (its last row here).
  auto generation = load_generation_config(tmp / "out" / "generation_config.json", kVocab + kRows);
  ASSERT_TRUE(generation.has_value()) << generation.error().message();
  EXPECT_EQ(generation->suppress_tokens, (std::vector<std::int64_t>{256, 257, 258, 259, 260}));
  EXPECT_EQ(generation->eos_token_ids, (std::vector<std::int64_t>{kVocab - 1}));
}

TEST(Export, F32WidensTheBasesRowsExactly) {
  TempDir tmp;
  write_base(tmp / "base");
  KnownSource source;
  ASSERT_TRUE(export_checkpoint(tmp / "base", request(tmp / "out", sdk::DType::kF32), source).has_value());
  auto out = Checkpoint::open(tmp / "out", CheckOptions{/*exact_dtypes=*/false});
  auto base = Checkpoint::open(tmp / "base");
  ASSERT_TRUE(out.has_value() && base.has_value());
  auto embed = out->text_tensor("embed_tokens.weight");
  auto base_embed = base->text_tensor("embed_tokens.weight");
  ASSERT_TRUE(embed.has_value() && base_embed.has_value());
  EXPECT_EQ(embed->dtype(), StDType::kF32);
  EXPECT_EQ(base_embed->dtype(), StDType::kBF16);
  for (std::int64_t i : {0L, 1000L, kVocab * 64 - 1}) EXPECT_EQ(value_at(*embed, i), value_at(*base_embed, i));
  EXPECT_EQ(out->text_tensor("layers.0.mlp.up_proj.weight")->dtype(), StDType::kF32);
  const auto config = nlohmann::json::parse(test::read_file(tmp / "out" / "config.json"));
  const auto& text = config.contains("text_config") ? config["text_config"] : config;
  EXPECT_EQ(text.value("dtype", config.value("dtype", "")), "float32");
}

TEST(Export, ByteDeterministic) {
  // Two exports of the same inputs, one sharded, are the same bytes file by file (the shards
  // hold the same tensors as the single file, each laid out the same way).
  TempDir tmp;
  write_base(tmp / "base");
  KnownSource source;
  ASSERT_TRUE(export_checkpoint(tmp / "base", request(tmp / "a", sdk::DType::kBF16), source).has_value());
  ASSERT_TRUE(export_checkpoint(tmp / "base", request(tmp / "b", sdk::DType::kBF16), source).has_value());
  sdk::CheckpointExport sharded = request(tmp / "c", sdk::DType::kBF16);
  sharded.max_shard_bytes = 40'000;
  ASSERT_TRUE(export_checkpoint(tmp / "base", sharded, source).has_value());
  for (const auto& f : std::filesystem::directory_iterator(tmp / "a"))
    EXPECT_EQ(test::read_file(f.path()), test::read_file(tmp / "b" / f.path().filename())) << f.path().filename();
  auto single = TensorStore::open_dir(tmp / "a");
  auto shards = TensorStore::open_dir(tmp / "c");
  ASSERT_TRUE(single.has_value() && shards.has_value());
  EXPECT_GT(shards->files().size(), 2u);
  ASSERT_EQ(single->names(), shards->names());
  for (const std::string& name : single->names()) {
    const auto a = single->get(name)->bytes(), c = shards->get(name)->bytes();
    ASSERT_EQ(a.size(), c.size()) << name;
    EXPECT_EQ(0, std::memcmp(a.data(), c.data(), a.size())) << name;
  }
}

TEST(Export, RefusesADirectoryHoldingACheckpointAndBadRequests) {
  TempDir tmp;
  write_base(tmp / "base");
  KnownSource source;
  auto again = export_checkpoint(tmp / "base", request(tmp / "base", sdk::DType::kBF16), source);
  ASSERT_FALSE(again.has_value());
  EXPECT_NE(again.error().message().find("the base's own checkpoint directory"), std::string::npos);
  ASSERT_TRUE(export_checkpoint(tmp / "base", request(tmp / "out", sdk::DType::kBF16), source).has_value());
  auto over = export_checkpoint(tmp / "base", request(tmp / "out", sdk::DType::kBF16), source);
  ASSERT_FALSE(over.has_value());
  EXPECT_NE(over.error().message().find("already holds a checkpoint ("), std::string::npos);
  sdk::CheckpointExport names = request(tmp / "other", sdk::DType::kBF16);
  names.row_tokens.pop_back();
  EXPECT_FALSE(export_checkpoint(tmp / "base", names, source).has_value());
  sdk::CheckpointExport taken = request(tmp / "third", sdk::DType::kBF16);
  taken.row_tokens[0] = "<|im_start|>";
  auto clash = export_checkpoint(tmp / "base", taken, source);
  ASSERT_FALSE(clash.has_value());
  EXPECT_NE(clash.error().message().find("'<|im_start|>' is already in the base's tokenizer"), std::string::npos);
}

}  // namespace
}  // namespace qgpu::qwen35
