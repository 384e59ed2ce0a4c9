// The expression language of `qgpu-host eval` (docs/GPU_TOOL.md): integers, vectors and matrices,
// calls of the kernels/ library's functions and the operators + - * @. This header holds the values
// and the parser; gpu_evaluator.h runs a parsed expression on the machine, one launch per operation.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "qgpu/sdk/status.h"

namespace qgpu::core {

// An int32 value: a scalar, a vector (1 or more elements) or a row-major matrix.
struct GpuValue {
  enum class Shape { kScalar, kVector, kMatrix };
  Shape shape = Shape::kScalar;
  std::int64_t rows = 1, cols = 1;  // vector: 1 x n; scalar: 1 x 1
  std::vector<std::int32_t> data;   // rows * cols elements

  static GpuValue scalar(std::int32_t v);
  static GpuValue vector(std::vector<std::int32_t> v);
  static GpuValue matrix(std::int64_t rows, std::int64_t cols, std::vector<std::int32_t> v);
  std::int64_t size() const { return static_cast<std::int64_t>(data.size()); }
  bool operator==(const GpuValue&) const = default;
};

// "a scalar", "a vector of 3", "a 2x3 matrix": for messages.
std::string describe_shape(const GpuValue& v);
// 32, [1, 2, 3], [[1, 2], [3, 4]]
std::string format_value(const GpuValue& v);

// A parsed expression. `line` and `column` are 1-based in the expression's text: where the
// literal, the function name or the operator starts, so evaluation errors point at the operation.
struct GpuExpression {
  enum class Kind { kLiteral, kCall, kBinary };
  Kind kind = Kind::kLiteral;
  int line = 1, column = 1;
  GpuValue literal;                     // kLiteral
  std::string name;                     // kCall: the function; kBinary: "+", "-", "*" or "@"
  std::vector<GpuExpression> operands;  // kCall: the arguments; kBinary: left, right
};

// A function of the language: its name and its parameters, for arity checks and messages.
struct GpuFunction {
  std::string_view name;
  std::vector<std::string_view> params;
  std::string_view summary;
};
const std::vector<GpuFunction>& gpu_functions();

// Parses one expression (grammar in docs/GPU_TOOL.md). Errors are one line pointing at the
// column: "expression:1:12: error: expected ']'". Unknown functions and wrong argument counts are
// parse errors.
sdk::Expected<GpuExpression> parse_gpu_expression(std::string_view text);

// The parsed tree as an s-expression, e.g. "(@ [1, 2] (sum [3, 4]))": for tests and --json.
std::string to_string(const GpuExpression& e);

// "expression:LINE:COL", the location of errors about `e`.
std::string location_of(const GpuExpression& e);

}  // namespace qgpu::core
