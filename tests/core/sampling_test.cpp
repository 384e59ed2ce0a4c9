// Next-token choice and streaming text helpers.
#include "qgpu/core/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "qgpu/core/text.h"

namespace qgpu::core {
namespace {

TEST(Sampling, GreedyPicksTheArgmaxAndTheLowestIdOnTies) {
  Sampler s({});
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(*s.next(logits, 4), 1);
  EXPECT_EQ(*s.next(logits, 1), 0);  // ids past `allowed` are never chosen
}

TEST(Sampling, TopKOneAndTinyTopPAreGreedy) {
  std::vector<float> logits = {0.1f, 0.3f, 3.0f, 0.2f};
  Sampler k({1.0, 1, 1.0, 7});
  Sampler p({1.0, 0, 1e-6, 7});
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(*k.next(logits, 4), 2);
    EXPECT_EQ(*p.next(logits, 4), 2);
  }
}

TEST(Sampling, SeedReproducesAndFrequenciesFollowTheSoftmax) {
  std::vector<float> logits = {0.0f, std::log(3.0f)};  // p = 1/4, 3/4 at temperature 1
  Sampler a({1.0, 0, 1.0, 42}), b({1.0, 0, 1.0, 42}), c({1.0, 0, 1.0, 43});
  std::map<std::int64_t, int> counts;
  int differ = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const auto x = *a.next(logits, 2);
    EXPECT_EQ(x, *b.next(logits, 2));
    differ += x != *c.next(logits, 2);
    ++counts[x];
  }
  EXPECT_GT(differ, 0);
  EXPECT_NEAR(counts[1] / double(n), 0.75, 0.02);
}

TEST(Sampling, RejectsBadOptionsAndNaN) {
  EXPECT_FALSE(validate({-1.0, 0, 1.0, 0}).is_ok());
  EXPECT_FALSE(validate({1.0, -2, 1.0, 0}).is_ok());
  EXPECT_FALSE(validate({1.0, 0, 0.0, 0}).is_ok());
  EXPECT_FALSE(validate({1.0, 0, 1.5, 0}).is_ok());
  EXPECT_TRUE(validate({0.7, 40, 0.9, 3}).is_ok());
  Sampler s({});
  std::vector<float> logits = {0.0f, std::nanf("")};
  EXPECT_EQ(s.next(logits, 2).error().message(), "the model produced a NaN logit at id 1");
  EXPECT_FALSE(s.next(logits, 0));
}

TEST(Sampling, CheckpointDefaultsUnderTheFlags) {
  sdk::GenerationDefaults greedy;  // do_sample false: its sampling fields are unused
  greedy.temperature = 0.7;
  const SamplingOptions plain = resolve_sampling(greedy, {});
  EXPECT_EQ(plain.temperature, 0.0);
  EXPECT_EQ(plain.top_k, 0);
  EXPECT_EQ(plain.top_p, 1.0);
  sdk::GenerationDefaults qwen;
  qwen.do_sample = true;
  qwen.temperature = 0.6;
  qwen.top_k = 20;
  qwen.top_p = 0.95;
  const SamplingOptions defaults = resolve_sampling(qwen, {.seed = 9});
  EXPECT_EQ(defaults.temperature, 0.6);
  EXPECT_EQ(defaults.top_k, 20);
  EXPECT_EQ(defaults.top_p, 0.95);
  EXPECT_EQ(defaults.seed, 9u);
  const SamplingOptions flags = resolve_sampling(qwen, {.temperature = 0.0, .top_k = 5});
  EXPECT_EQ(flags.temperature, 0.0);  // --temperature 0: greedy over a sampling default
  EXPECT_EQ(flags.top_k, 5);
  EXPECT_EQ(flags.top_p, 0.95);
  EXPECT_EQ(resolve_sampling(greedy, {.temperature = 0.8}).temperature, 0.8);
}

TEST(Utf8, CompletePrefixHoldsBackACutCharacter) {
  const std::string euro = "\xE2\x82\xAC";  // U+20AC, 3 bytes
  EXPECT_EQ(complete_utf8_prefix("ab" + euro), 5u);
  EXPECT_EQ(complete_utf8_prefix("ab" + euro.substr(0, 2)), 2u);
  EXPECT_EQ(complete_utf8_prefix("ab" + euro.substr(0, 1)), 2u);
  EXPECT_EQ(complete_utf8_prefix(""), 0u);
  EXPECT_EQ(complete_utf8_prefix("\x80\x80"), 2u);  // stray continuation bytes are not held
}

TEST(Utf8, InvalidSubpartsBecomeReplacementCharacters) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(valid_utf8("plain \xE2\x82\xAC"), "plain \xE2\x82\xAC");
  EXPECT_EQ(valid_utf8("a\x80z"), "a" + fffd + "z");
  EXPECT_EQ(valid_utf8("\xE2\x82z"), fffd + "z");                        // truncated sequence: one replacement
  EXPECT_EQ(valid_utf8("\xC0\xAF"), fffd + fffd);                        // overlong lead is invalid on its own
  EXPECT_EQ(valid_utf8("\xED\xA0\x80"), fffd + fffd + fffd);             // surrogate
  EXPECT_EQ(valid_utf8("\xF4\x90\x80\x80"), fffd + fffd + fffd + fffd);  // above U+10FFFF
}

}  // namespace
}  // namespace qgpu::core
