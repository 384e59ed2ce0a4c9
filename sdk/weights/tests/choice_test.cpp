// The greedy choice (choice.h): the winner and its lead over the runner-up of all rows, counted
// after the text rows; ties, NaN and a text row winning are errors naming the rows.
#include "qgpu/weights/choice.h"

#include <gtest/gtest.h>

#include <cmath>
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

}  // namespace
}  // namespace qgpu::weights
