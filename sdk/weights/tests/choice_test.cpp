// The greedy choice (choice.h): the winner and its lead over the runner-up of all rows, counted
// after the text rows; ties, NaN and a text row winning are errors naming the rows.
#include "qgpu/weights/choice.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace qgpu::weights {
namespace {

TEST(Choice, WinnerAndMarginOverEveryRow) {
  const std::vector<float> logits = {3.0f, 9.5f, -1.0f, 7.25f};
  auto c = choose(logits);
  ASSERT_TRUE(c) << c.status().to_string();
  EXPECT_EQ(c->offset, 1);
  EXPECT_EQ(c->logit, 9.5);
  EXPECT_EQ(c->margin, 2.25);
  // Two text rows first: the winner counts from the first machine row, and a text row that is
  // the runner-up sets the margin.
  const std::vector<float> merged = {8.0f, 1.0f, 2.0f, 9.0f};
  c = choose(merged, 2);
  ASSERT_TRUE(c) << c.status().to_string();
  EXPECT_EQ(c->offset, 1);
  EXPECT_EQ(c->margin, 1.0);
}

TEST(Choice, TiesNanAndTextWinnersAreErrors) {
  auto tie = choose(std::vector<float>{1.0f, 4.0f, 4.0f});
  ASSERT_FALSE(tie);
  EXPECT_EQ(tie.status().message().rfind("choose: no single best row (machine row 1 and another tie", 0), 0u)
      << tie.status().message();
  auto nan = choose(std::vector<float>{1.0f, std::nanf("")}, 1);
  ASSERT_FALSE(nan);
  EXPECT_EQ(nan.status().message(), "choose: logit of machine row 0 is NaN");
  auto text = choose(std::vector<float>{5.0f, 1.0f, 2.0f}, 1);
  ASSERT_FALSE(text);
  EXPECT_EQ(text.status().message().rfind("choose: the model chose text row 0 (logit 5.000000) where a record was "
                                          "due; the best machine row scores 2.000000",
                                          0),
            0u)
      << text.status().message();
  EXPECT_FALSE(choose(std::vector<float>{1.0f}, 1));  // no machine row
  EXPECT_FALSE(choose(std::vector<float>{}));
}

// Long rows of logits (the lanes and their tails), with ties, infinities, zeros of both signs and
// NaN, against the definition: the first index of the largest, its lead over the largest of the
// others, the first NaN by index.
TEST(Choice, LongRowsFollowTheDefinition) {
  std::mt19937 rng(41);
  const float pool[] = {-INFINITY, INFINITY, 0.0f, -0.0f, 1.0f, 2.0f, 2.5f, -3.0f, 1e30f, -1e30f};
  for (int trial = 0; trial < 3000; ++trial) {
    const std::size_t n = std::uniform_int_distribution<std::size_t>(1, 120)(rng);
    std::vector<float> logits(n);
    for (float& v : logits)
      v = std::uniform_int_distribution<int>(0, 3)(rng) == 0
              ? pool[std::uniform_int_distribution<std::size_t>(0, std::size(pool) - 1)(rng)]
              : std::uniform_real_distribution<float>(-50.0f, 50.0f)(rng);
    if (trial % 10 == 0) logits[std::uniform_int_distribution<std::size_t>(0, n - 1)(rng)] = std::nanf("");
    const auto text = static_cast<std::int64_t>(std::uniform_int_distribution<std::size_t>(0, n - 1)(rng));
    SCOPED_TRACE(::testing::Message() << "trial " << trial << ", " << n << " logits, " << text << " text rows");
    const auto got = choose(logits, text);
    std::size_t first_nan = n, best = 0;
    for (std::size_t t = 0; t < n; ++t) {
      if (std::isnan(logits[t]) && first_nan == n) first_nan = t;
      if (logits[t] > logits[best]) best = t;
    }
    if (first_nan < n) {
      ASSERT_FALSE(got);
      const auto row = static_cast<std::int64_t>(first_nan);
      EXPECT_EQ(got.status().message(), "choose: logit of " + (row < text ? "text row " + std::to_string(row)
                                                                         : "machine row " + std::to_string(row - text)) +
                                            " is NaN");
      continue;
    }
    double second = -INFINITY;
    for (std::size_t t = 0; t < n; ++t)
      if (t != best) second = std::max(second, static_cast<double>(logits[t]));
    const double margin = static_cast<double>(logits[best]) - second;
    if (!(margin > 0) || static_cast<std::int64_t>(best) < text) {
      EXPECT_FALSE(got);
      continue;
    }
    ASSERT_TRUE(got) << got.status().message();
    EXPECT_EQ(got->offset, static_cast<std::int64_t>(best) - text);
    EXPECT_EQ(got->logit, static_cast<double>(logits[best]));
    EXPECT_EQ(got->margin, margin);
  }
}

}  // namespace
}  // namespace qgpu::weights
