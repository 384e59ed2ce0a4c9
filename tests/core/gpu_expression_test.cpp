// The GPU expression language's parser (core/src/gpu_expression/parse.cpp): trees, precedence,
// literals and one-line errors with their column.
#include "qgpu/core/gpu_expression.h"

#include <gtest/gtest.h>

namespace qgpu::core {
namespace {

std::string tree(std::string_view text) {
  auto e = parse_gpu_expression(text);
  EXPECT_TRUE(e) << text << ": " << e.status().to_string();
  return e ? to_string(*e) : std::string();
}

std::string error(std::string_view text) {
  auto e = parse_gpu_expression(text);
  EXPECT_FALSE(e) << text << " parsed as " << (e ? to_string(*e) : "");
  return e ? std::string() : e.error().to_string();
}

TEST(GpuExpression, Literals) {
  EXPECT_EQ(tree("42"), "42");
  EXPECT_EQ(tree("  -7 "), "-7");
  EXPECT_EQ(tree("-2147483648"), "-2147483648");
  EXPECT_EQ(tree("[1, -2,3]"), "[1, -2, 3]");
  EXPECT_EQ(tree("[[1,2],[3,4]]"), "[[1, 2], [3, 4]]");
  EXPECT_EQ(tree("[[5]]"), "[[5]]");
}

TEST(GpuExpression, LiteralShapes) {
  auto e = parse_gpu_expression("[[1, 2, 3], [4, 5, 6]]");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->literal.shape, GpuValue::Shape::kMatrix);
  EXPECT_EQ(e->literal.rows, 2);
  EXPECT_EQ(e->literal.cols, 3);
  EXPECT_EQ(e->literal.data, (std::vector<std::int32_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(describe_shape(e->literal), "a 2x3 matrix");
  e = parse_gpu_expression("[7, 8]");
  ASSERT_TRUE(e);
  EXPECT_EQ(describe_shape(e->literal), "a vector of 2");
}

TEST(GpuExpression, PrecedenceAndAssociativity) {
  // * and @ bind tighter than + and -; chains associate to the left.
  EXPECT_EQ(tree("1 + 2 * 3"), "(+ 1 (* 2 3))");
  EXPECT_EQ(tree("1 - 2 - 3"), "(- (- 1 2) 3)");
  EXPECT_EQ(tree("(1 + 2) * 3"), "(* (+ 1 2) 3)");
  EXPECT_EQ(tree("[1,2] @ [3,4] + 1"), "(+ (@ [1, 2] [3, 4]) 1)");
  EXPECT_EQ(tree("[[1,2],[3,4]] @ [[5,6],[7,8]] @ [1,1]"), "(@ (@ [[1, 2], [3, 4]] [[5, 6], [7, 8]]) [1, 1])");
  EXPECT_EQ(tree("2 - -3"), "(- 2 -3)");
}

TEST(GpuExpression, Calls) {
  EXPECT_EQ(tree("sum([1, 2, 3])"), "(sum [1, 2, 3])");
  EXPECT_EQ(tree("sum(cumsum([1,2]) * 2)"), "(sum (* (cumsum [1, 2]) 2))");
  EXPECT_EQ(tree("pow_mod(2, 10, 1000)"), "(pow_mod 2 10 1000)");
  EXPECT_EQ(tree("gcd( 12 , 18 )"), "(gcd 12 18)");
  EXPECT_EQ(tree("is_prime(fib(7))"), "(is_prime (fib 7))");
  EXPECT_EQ(tree("popcount(255) + max([1]) - min([2]) + sort([3])@[1]"),
            "(+ (- (+ (popcount 255) (max [1])) (min [2])) (@ (sort [3]) [1]))");
}

TEST(GpuExpression, Columns) {
  auto e = parse_gpu_expression("sum([1]) +  fib(3)");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->column, 10);              // the '+'
  EXPECT_EQ(e->operands[0].column, 1);   // sum
  EXPECT_EQ(e->operands[1].column, 13);  // fib
  EXPECT_EQ(location_of(e->operands[1]), "expression:1:13");
}

TEST(GpuExpression, Errors) {
  EXPECT_EQ(error("[1, 2, 3"), "expression:1:9: error: expected ',' or ']', got the end of the expression");
  EXPECT_EQ(error("[1, 2 3]"), "expression:1:7: error: expected ',' or ']', got '3'");
  EXPECT_EQ(error("[]"), "expression:1:2: error: expected an integer, got ']'");
  EXPECT_EQ(error("[1, x]"), "expression:1:5: error: expected an integer, got 'x'");
  EXPECT_EQ(error("[[1, 2], [3]]"), "expression:1:10: error: matrix row 2 has 1 elements, row 1 has 2");
  EXPECT_EQ(error("[[[1]]]"), "expression:1:3: error: expected an integer, got '['");
  EXPECT_EQ(error("1 +"), "expression:1:4: error: expected a value, got the end of the expression");
  EXPECT_EQ(error(""), "expression:1:1: error: expected a value, got the end of the expression");
  EXPECT_EQ(error("(1 + 2"), "expression:1:7: error: expected ')', got the end of the expression");
  EXPECT_EQ(error("1 2"), "expression:1:3: error: unexpected '2' after a complete expression");
  EXPECT_EQ(error("1 / 2"), "expression:1:3: error: unexpected '/' after a complete expression");
  EXPECT_EQ(error("2147483648"),
            "expression:1:1: error: integer 2147483648 is outside int32 [-2147483648, 2147483647]");
  EXPECT_EQ(error("-sum([1])"),
            "expression:1:1: error: '-' in front of a value is only allowed on an integer (write 0 - x)");
  EXPECT_EQ(error("1 + ?"), "expression:1:5: error: expected a value (an integer, '[', '(' or a function), got '?'");
}

// Found with fuzz/gpu_expression_fuzzer.cpp: deep nesting overflowed the parser's stack, a long
// operator chain overflowed to_string's (and the tree's destructor's), and locating each token
// rescanned the text (quadratic: 50 s for 20,000 operators).
TEST(GpuExpression, NestingAndOperationsAreBounded) {
  const std::string deep = std::string(100000, '(') + "1" + std::string(100000, ')');
  EXPECT_EQ(error(deep), "expression:1:257: error: parentheses and calls nest more than 256 deep");
  std::string calls;
  for (int i = 0; i < 300; ++i) calls += "sum(";
  EXPECT_EQ(error(calls + "[1]" + std::string(300, ')')),
            "expression:1:1028: error: parentheses and calls nest more than 256 deep");
  std::string chain = "1";
  for (int i = 0; i < 200000; ++i) chain += "+1";
  EXPECT_EQ(error(chain), "expression:1:2002: error: the expression has more than 1000 operations");
  // At the limits, a tree.
  EXPECT_EQ(tree(std::string(256, '(') + "7" + std::string(256, ')')), "7");
  std::string ops = "1";
  for (int i = 0; i < 1000; ++i) ops += "+1";
  EXPECT_EQ(tree(ops).size(), 1u + 1000u * 6u);  // "(+ " ... " 1)" around each
}

TEST(GpuExpression, ColumnsOnLaterLines) {
  EXPECT_EQ(error("[1,\n 2,\n x]"), "expression:3:2: error: expected an integer, got 'x'");
  EXPECT_EQ(error("1 +\n\n  2 +\n ?"), "expression:4:2: error: expected a value (an integer, '[', '(' or a function), got '?'");
}

TEST(GpuExpression, FunctionErrors) {
  EXPECT_EQ(error("summ([1])"),
            "expression:1:1: error: unknown function 'summ' (did you mean 'sum'?); functions: sum, max, min, cumsum, "
            "sort, gcd, pow_mod, is_prime, fib, popcount");
  EXPECT_EQ(error("1 + frobnicate(4)"),
            "expression:1:5: error: unknown function 'frobnicate'; functions: sum, max, min, cumsum, sort, gcd, "
            "pow_mod, is_prime, fib, popcount");
  EXPECT_EQ(error("gcd(1)"), "expression:1:1: error: gcd(a, b) takes 2 arguments, got 1");
  EXPECT_EQ(error("sum()"), "expression:1:1: error: sum(v) takes 1 argument, got 0");
  EXPECT_EQ(error("sum [1]"), "expression:1:5: error: expected '(' after 'sum', got '['");
  EXPECT_EQ(error("fib(3"), "expression:1:6: error: expected ',' or ')', got the end of the expression");
}

TEST(GpuExpression, ErrorsAreParseErrors) {
  auto e = parse_gpu_expression("[1,");
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code(), sdk::ErrorCode::kParseError);
  EXPECT_EQ(e.error().location(), "expression:1:4");
}

TEST(GpuExpression, FormatValue) {
  EXPECT_EQ(format_value(GpuValue::scalar(-3)), "-3");
  EXPECT_EQ(format_value(GpuValue::vector({1, 2})), "[1, 2]");
  EXPECT_EQ(format_value(GpuValue::matrix(2, 1, {1, 2})), "[[1], [2]]");
}

}  // namespace
}  // namespace qgpu::core
