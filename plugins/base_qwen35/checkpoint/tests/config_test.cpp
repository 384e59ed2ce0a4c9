// config.json parsing: published shapes, wrapper vs text-only, derived layer
// types, and one exact error per invalid field.
#include "qgpu/qwen35/config.h"

#include <gtest/gtest.h>

#include <string>

#include "test_util.h"

namespace qgpu::qwen35 {
namespace {

// Layer types "[L, L, L, F] x n", as the published configs list them.
std::string layer_types_json(int groups) {
  std::string s = "[";
  for (int g = 0; g < groups; ++g) {
    s += std::string(g ? ", " : "") + R"("linear_attention", "linear_attention", "linear_attention", "full_attention")";
  }
  return s + "]";
}

// Qwen3.5-0.8B's config.json, written by hand after QWEN35.md §1.3 (the
// verbatim public dump), with layer_types expanded.
std::string config_08b() {
  return R"({
  "architectures": ["Qwen3_5ForConditionalGeneration"],
  "image_token_id": 248056,
  "model_type": "qwen3_5",
  "text_config": {
    "attention_bias": false,
    "attention_dropout": 0.0,
    "attn_output_gate": true,
    "dtype": "bfloat16",
    "eos_token_id": 248044,
    "full_attention_interval": 4,
    "head_dim": 256,
    "hidden_act": "silu",
    "hidden_size": 1024,
    "initializer_range": 0.02,
    "intermediate_size": 3584,
    "layer_types": )" +
         layer_types_json(6) + R"(,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 16,
    "linear_value_head_dim": 128,
    "mamba_ssm_dtype": "float32",
    "max_position_embeddings": 262144,
    "mlp_only_layers": [],
    "model_type": "qwen3_5_text",
    "mtp_num_hidden_layers": 1,
    "mtp_use_dedicated_embeddings": false,
    "num_attention_heads": 8,
    "num_hidden_layers": 24,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-06,
    "rope_parameters": {
      "mrope_interleaved": true,
      "mrope_section": [11, 11, 10],
      "rope_type": "default",
      "rope_theta": 10000000,
      "partial_rotary_factor": 0.25
    },
    "tie_word_embeddings": true,
    "use_cache": true,
    "vocab_size": 248320
  },
  "tie_word_embeddings": true,
  "transformers_version": "4.57.0.dev0",
  "video_token_id": 248057,
  "vision_config": {
    "deepstack_visual_indexes": [], "depth": 12, "hidden_act": "gelu_pytorch_tanh", "hidden_size": 768,
    "in_channels": 3, "initializer_range": 0.02, "intermediate_size": 3072, "model_type": "qwen3_5",
    "num_heads": 12, "num_position_embeddings": 2304, "out_hidden_size": 1024, "patch_size": 16,
    "spatial_merge_size": 2, "temporal_patch_size": 2
  },
  "vision_end_token_id": 248054,
  "vision_start_token_id": 248053
}
)";
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
  auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos) text.replace(pos, from.size(), to);
  return text;
}

// The 2B differs from the 0.8B only in hidden 2048, MLP 6144 (QWEN35.md §1.4).
std::string config_2b() {
  std::string c = replace(config_08b(), R"("hidden_size": 1024)", R"("hidden_size": 2048)");
  c = replace(c, R"("intermediate_size": 3584)", R"("intermediate_size": 6144)");
  return replace(c, R"("out_hidden_size": 1024)", R"("out_hidden_size": 2048)");
}

std::string parse_error(const std::string& text) {
  auto c = parse_config_json(text, "config.json");
  if (c) return "(parsed)";
  EXPECT_EQ(c.error().to_string().find('\n'), std::string::npos);
  return c.error().to_string();
}

TEST(Config, Published08B) {
  auto c = parse_config_json(config_08b(), "config.json");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->model_type, "qwen3_5");
  EXPECT_TRUE(c->multimodal_wrapper);
  EXPECT_EQ(c->architectures, std::vector<std::string>{"Qwen3_5ForConditionalGeneration"});
  const TextConfig& t = c->text;
  EXPECT_EQ(t.vocab_size, 248320);
  EXPECT_EQ(t.hidden_size, 1024);
  EXPECT_EQ(t.intermediate_size, 3584);
  EXPECT_EQ(t.num_hidden_layers, 24);
  EXPECT_EQ(t.num_attention_heads, 8);
  EXPECT_EQ(t.num_key_value_heads, 2);
  EXPECT_EQ(t.head_dim, 256);
  EXPECT_EQ(t.linear_num_key_heads, 16);
  EXPECT_EQ(t.linear_num_value_heads, 16);
  EXPECT_EQ(t.linear_key_head_dim, 128);
  EXPECT_EQ(t.linear_value_head_dim, 128);
  EXPECT_EQ(t.linear_conv_kernel_dim, 4);
  EXPECT_TRUE(t.tie_word_embeddings);
  EXPECT_EQ(t.rope.rope_theta, 1e7);
  EXPECT_EQ(t.rope.partial_rotary_factor, 0.25);
  EXPECT_EQ(t.rope.mrope_section, (std::vector<std::int64_t>{11, 11, 10}));
  EXPECT_TRUE(t.rope.mrope_interleaved);
  EXPECT_EQ(t.rms_norm_eps, 1e-6);
  EXPECT_EQ(t.max_position_embeddings, 262144);
  EXPECT_EQ(t.eos_token_ids, std::vector<std::int64_t>{248044});
  EXPECT_EQ(t.dtype, "bfloat16");
  EXPECT_EQ(t.mtp_num_hidden_layers, 1);
  ASSERT_EQ(t.layer_types.size(), 24u);
  EXPECT_FALSE(t.layer_types_derived);
  for (int i = 0; i < 24; ++i) {
    EXPECT_EQ(t.layer_types[i], i % 4 == 3 ? LayerType::kFullAttention : LayerType::kLinearAttention) << i;
  }
  // Derived sizes, QWEN35.md §1.4.
  EXPECT_EQ(t.rotary_dim(), 64);
  EXPECT_EQ(t.linear_key_dim(), 2048);
  EXPECT_EQ(t.linear_value_dim(), 2048);
  EXPECT_EQ(t.conv_dim(), 6144);
}

TEST(Config, Published2B) {
  auto c = parse_config_json(config_2b(), "config.json");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->text.hidden_size, 2048);
  EXPECT_EQ(c->text.intermediate_size, 6144);
  EXPECT_EQ(c->text.conv_dim(), 6144);
}

TEST(Config, TextOnly) {
  // A Qwen3_5ForCausalLM-style config: the text_config object at the top level.
  const std::string wrapper = config_08b();
  const auto begin = wrapper.find("\"text_config\": {") + std::string("\"text_config\": ").size();
  const auto end = wrapper.find("\n  },\n  \"tie_word_embeddings\"") + 4;
  const std::string text_only = wrapper.substr(begin, end - begin);
  auto c = parse_config_json(text_only, "config.json");
  ASSERT_TRUE(c) << c.error().to_string() << "\n" << text_only;
  EXPECT_EQ(c->model_type, "qwen3_5_text");
  EXPECT_FALSE(c->multimodal_wrapper);
  EXPECT_EQ(c->text.hidden_size, 1024);
  EXPECT_TRUE(c->text.tie_word_embeddings);
}

TEST(Config, TopLevelTieWins) {
  // The wrapper's flag decides; text_config without one inherits it.
  auto c = parse_config_json(replace(config_08b(), R"("tie_word_embeddings": true,
    "use_cache")",
                                     R"("use_cache")"),
                             "config.json");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_TRUE(c->text.tie_word_embeddings);
}

TEST(Config, DerivedLayerTypes) {
  const std::string minimal = R"({"model_type": "qwen3_5_text", "num_hidden_layers": 8, "hidden_size": 64})";
  auto c = parse_config_json(minimal, "config.json");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_TRUE(c->text.layer_types_derived);
  using L = LayerType;
  const std::vector<L> expected{L::kLinearAttention, L::kLinearAttention, L::kLinearAttention, L::kFullAttention,
                                L::kLinearAttention, L::kLinearAttention, L::kLinearAttention, L::kFullAttention};
  EXPECT_EQ(c->text.layer_types, expected);
  // HF defaults for everything not given (QWEN35.md §1.1).
  EXPECT_EQ(c->text.vocab_size, 248320);
  EXPECT_EQ(c->text.intermediate_size, 12288);
  EXPECT_EQ(c->text.linear_num_value_heads, 32);
  EXPECT_FALSE(c->text.tie_word_embeddings);

  auto c2 = parse_config_json(R"({"model_type": "qwen3_5_text", "num_hidden_layers": 4, "full_attention_interval": 2})",
                              "config.json");
  ASSERT_TRUE(c2) << c2.error().to_string();
  EXPECT_EQ(c2->text.layer_types,
            (std::vector<L>{L::kLinearAttention, L::kFullAttention, L::kLinearAttention, L::kFullAttention}));
}

TEST(Config, LegacyRopeFields) {
  auto c = parse_config_json(R"({"model_type": "qwen3_5_text", "num_hidden_layers": 4, "rope_theta": 5e6,
    "partial_rotary_factor": 0.5, "rope_scaling": {"type": "mrope", "mrope_section": [32, 16, 16]}})",
                             "config.json");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->text.rope.rope_theta, 5e6);
  EXPECT_EQ(c->text.rotary_dim(), 128);
  EXPECT_EQ(c->text.rope.rope_type, "default");
}

TEST(Config, WriterRoundTrip) {
  TextConfig t;
  t.hidden_size = 96;
  t.num_hidden_layers = 3;
  t.layer_types = derive_layer_types(3, 4);
  t.tie_word_embeddings = true;
  t.eos_token_ids = {7};
  t.rope.mrope_section = {30, 1, 1};
  t.rope.rope_theta = 1e7;
  auto c = parse_config_json(wrapper_config_json(t), "config.json");
  ASSERT_TRUE(c) << c.error().to_string();
  EXPECT_EQ(c->text.hidden_size, 96);
  EXPECT_EQ(c->text.layer_types, t.layer_types);
  EXPECT_EQ(c->text.eos_token_ids, std::vector<std::int64_t>{7});
  EXPECT_EQ(c->text.rope.rope_theta, 1e7);
  EXPECT_NE(wrapper_config_json(t).find("\"rope_theta\": 10000000"), std::string::npos);
}

struct BadField {
  const char* what;
  std::string from;  // replaced in the 0.8B config
  std::string to;
  std::string error;
};

class ConfigBadField : public ::testing::TestWithParam<BadField> {};

TEST_P(ConfigBadField, ExactError) {
  const auto& b = GetParam();
  EXPECT_EQ(parse_error(replace(config_08b(), b.from, b.to)), "config.json: error: " + b.error) << b.what;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ConfigBadField,
    ::testing::Values(
        BadField{"string size", R"("hidden_size": 1024)", R"("hidden_size": "1024")",
                 "text_config.hidden_size: expected an integer, got \"1024\""},
        BadField{"fractional size", R"("hidden_size": 1024)", R"("hidden_size": 1024.5)",
                 "text_config.hidden_size: expected an integer, got 1024.5"},
        BadField{"zero size", R"("num_key_value_heads": 2)", R"("num_key_value_heads": 0)",
                 "text_config.num_key_value_heads: must be positive, got 0"},
        BadField{"negative size", R"("vocab_size": 248320)", R"("vocab_size": -1)",
                 "text_config.vocab_size: must be positive, got -1"},
        BadField{"size over limit", R"("intermediate_size": 3584)", R"("intermediate_size": 4294967296)",
                 "text_config.intermediate_size: 4294967296 exceeds the limit of 2147483647 by 2147483649"},
        BadField{"bool type", R"("attention_bias": false)", R"("attention_bias": 0)",
                 "text_config.attention_bias: expected true or false, got 0"},
        BadField{"layer_types length", layer_types_json(6), layer_types_json(5),
                 "text_config.layer_types: has 20 entries but num_hidden_layers is 24"},
        BadField{"unknown layer type", R"(["linear_attention", "linear_attention")",
                 R"(["linear_attention", "sliding_attention")",
                 "text_config.layer_types[1]: unknown layer type 'sliding_attention' (expected linear_attention or "
                 "full_attention)"},
        BadField{"layer type not string", R"(["linear_attention", "linear_attention")", R"(["linear_attention", 3)",
                 "text_config.layer_types[1]: expected a string, got 3"},
        BadField{"heads not divisible", R"("num_key_value_heads": 2)", R"("num_key_value_heads": 3)",
                 "text_config.num_attention_heads: 8 is not a multiple of num_key_value_heads (3)"},
        BadField{"linear heads not divisible", R"("linear_num_value_heads": 16)", R"("linear_num_value_heads": 24)",
                 "text_config.linear_num_value_heads: 24 is not a multiple of linear_num_key_heads (16)"},
        BadField{"rotary not even", R"("partial_rotary_factor": 0.25)", R"("partial_rotary_factor": 0.3)",
                 "text_config.rope_parameters.partial_rotary_factor: head_dim 256 x 0.300000 is not an even number "
                 "of rotary dims"},
        BadField{"head_dim vs mrope", R"("head_dim": 256)", R"("head_dim": 128)",
                 "text_config.rope_parameters.mrope_section: sums to 32, but rotary dim 32 needs 16"},
        BadField{"rope type", R"("rope_type": "default")", R"("rope_type": "yarn")",
                 "text_config.rope_parameters.rope_type: 'yarn' is not supported (only 'default')"},
        BadField{"rope theta", R"("rope_theta": 10000000)", R"("rope_theta": -1)",
                 "text_config.rope_parameters.rope_theta: must be positive, got -1.000000"},
        BadField{"rope not object", R"("rope_parameters": {)", R"("rope_parameters": 7, "x": {)",
                 "text_config.rope_parameters: expected an object, got 7"},
        BadField{"mrope section type", R"("mrope_section": [11, 11, 10])", R"("mrope_section": [11, "11", 10])",
                 "text_config.rope_parameters.mrope_section[1]: expected an integer in [0, 2^31], got \"11\""},
        BadField{"mrope section huge", R"("mrope_section": [11, 11, 10])",
                 R"("mrope_section": [9223372036854775807, 9223372036854775807, 10])",
                 "text_config.rope_parameters.mrope_section[0]: expected an integer in [0, 2^31], got "
                 "9223372036854775807"},
        BadField{"number beyond double", R"("rms_norm_eps": 1e-06)", R"("rms_norm_eps": 1e999)",
                 "invalid JSON: a number is out of range"},
        BadField{"eps", R"("rms_norm_eps": 1e-06)", R"("rms_norm_eps": 0)",
                 "text_config.rms_norm_eps: must be in (0, 1), got 0.000000"},
        BadField{"eos outside vocab", R"("eos_token_id": 248044)", R"("eos_token_id": [1, 248320])",
                 "text_config.eos_token_id: 248320 is outside the vocabulary [0, 248320)"},
        BadField{"eos type", R"("eos_token_id": 248044)", R"("eos_token_id": "eos")",
                 "text_config.eos_token_id: expected an integer or a list of integers, got \"eos\""},
        BadField{"activation", R"("hidden_act": "silu")", R"("hidden_act": "gelu")",
                 "text_config.hidden_act: 'gelu' is not supported (only 'silu')"},
        BadField{"biases", R"("attention_bias": false)", R"("attention_bias": true)",
                 "text_config.attention_bias: true is not supported (Qwen3.5 has no biases)"},
        BadField{"ignored field wrong type", R"("attn_output_gate": true)", R"("attn_output_gate": "yes")",
                 "text_config.attn_output_gate: expected true or false, got \"yes\""},
        BadField{"inner model_type", R"("model_type": "qwen3_5_text")", R"("model_type": "qwen3_next")",
                 "text_config.model_type: 'qwen3_next' is not qwen3_5_text"},
        BadField{"tie contradiction", R"("tie_word_embeddings": true,
  "transformers_version")",
                 R"("tie_word_embeddings": false,
  "transformers_version")",
                 "tie_word_embeddings: top level says false, text_config says true"},
        BadField{"outer model_type", R"("model_type": "qwen3_5",)", R"("model_type": "llama",)",
                 "model_type: 'llama' is not a Qwen3.5 config (expected qwen3_5 or qwen3_5_text)"},
        BadField{"text_config type", R"("text_config": {)", R"("text_config": [], "x": {)",
                 "text_config: expected an object, got an array"}),
    [](const ::testing::TestParamInfo<BadField>& info) {
      std::string name = info.param.what;
      for (auto& ch : name)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

TEST(Config, BadJsonHasLineAndColumn) {
  EXPECT_EQ(parse_error("{\n  \"model_type\": \"qwen3_5\",\n  \"text_config\": {,\n}"),
            "config.json:3:19: error: invalid JSON");
}

TEST(Config, MissingModelTypeAndTextConfig) {
  EXPECT_EQ(parse_error(R"({"hidden_size": 4})"),
            "config.json: error: model_type: missing (expected qwen3_5 or qwen3_5_text)");
  EXPECT_EQ(parse_error(R"({"model_type": "qwen3_5"})"),
            "config.json: error: text_config: missing (model_type qwen3_5 nests the text model there)");
  EXPECT_EQ(parse_error("[]"), "config.json: error: expected a JSON object");
}

TEST(Config, LoadMissingFile) {
  test::TempDir dir;
  auto c = load_config(dir / "config.json");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code(), sdk::ErrorCode::kNotFound);
  EXPECT_EQ(c.error().to_string(), (dir / "config.json").string() + ": error: cannot open config");
}

// generation_config.json as transformers writes it for Qwen3.5 (eos list, Qwen's sampling defaults).
TEST(GenerationConfig, PublishedShape) {
  auto g = parse_generation_config_json(R"({
  "bos_token_id": 248044,
  "do_sample": true,
  "eos_token_id": [248046, 248044],
  "pad_token_id": 248044,
  "temperature": 0.6,
  "top_k": 20,
  "top_p": 0.95,
  "transformers_version": "4.57.0.dev0"
})",
                                        "generation_config.json", 248320);
  ASSERT_TRUE(g) << g.error().to_string();
  EXPECT_EQ(g->eos_token_ids, (std::vector<std::int64_t>{248046, 248044}));
  EXPECT_TRUE(g->do_sample);
  EXPECT_EQ(g->temperature, 0.6);
  EXPECT_EQ(g->top_k, 20);
  EXPECT_EQ(g->top_p, 0.95);
}

TEST(GenerationConfig, AbsentAndNullFieldsKeepTransformersDefaults) {
  auto g = parse_generation_config_json(R"({"eos_token_id": 7, "temperature": null, "_from_model_config": true})",
                                        "generation_config.json", 10);
  ASSERT_TRUE(g) << g.error().to_string();
  EXPECT_EQ(g->eos_token_ids, (std::vector<std::int64_t>{7}));
  EXPECT_FALSE(g->do_sample);
  EXPECT_EQ(g->temperature, 1.0);
  EXPECT_EQ(g->top_k, 50);
  EXPECT_EQ(g->top_p, 1.0);
  auto empty = parse_generation_config_json("{}", "generation_config.json", 10);
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->eos_token_ids.empty());  // no fallback to config.json once the file exists
}

TEST(GenerationConfig, OneExactErrorPerBadField) {
  auto error = [](const std::string& text) {
    auto g = parse_generation_config_json(text, "g.json", 10);
    return g ? std::string("no error") : g.error().to_string();
  };
  EXPECT_EQ(error(R"({"eos_token_id": [1, "x"]})"), "g.json: error: eos_token_id[1]: expected an integer, got \"x\"");
  EXPECT_EQ(error(R"({"eos_token_id": [1, 10]})"),
            "g.json: error: eos_token_id[1]: 10 is outside the vocabulary [0, 10)");
  EXPECT_EQ(error(R"({"eos_token_id": -1})"), "g.json: error: eos_token_id: -1 is outside the vocabulary [0, 10)");
  EXPECT_EQ(error(R"({"do_sample": "yes"})"), "g.json: error: do_sample: expected true or false, got \"yes\"");
  EXPECT_EQ(error(R"({"temperature": -0.5})"),
            "g.json: error: temperature: must be a finite number >= 0, got -0.500000");
  EXPECT_EQ(error(R"({"top_k": 1.5})"), "g.json: error: top_k: expected an integer, got 1.5");
  EXPECT_EQ(error(R"({"top_k": -1})"), "g.json: error: top_k: must be >= 0, got -1");
  EXPECT_EQ(error(R"({"top_p": 0})"), "g.json: error: top_p: must be in (0, 1], got 0.000000");
  EXPECT_EQ(error("{\n  \"top_p\": ,\n}"), "g.json:2:12: error: invalid JSON");
  EXPECT_EQ(error("[]"), "g.json: error: expected a JSON object");
}

}  // namespace
}  // namespace qgpu::qwen35
