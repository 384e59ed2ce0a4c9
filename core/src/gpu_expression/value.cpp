// GpuValue: constructors, shape descriptions and printing; the table of the language's functions.
#include "qgpu/core/gpu_expression.h"
#include "qgpu/core/launch_args.h"

namespace qgpu::core {

GpuValue GpuValue::scalar(std::int32_t v) {
  return {Shape::kScalar, 1, 1, {v}};
}

GpuValue GpuValue::vector(std::vector<std::int32_t> v) {
  const auto n = static_cast<std::int64_t>(v.size());
  return {Shape::kVector, 1, n, std::move(v)};
}

GpuValue GpuValue::matrix(std::int64_t rows, std::int64_t cols, std::vector<std::int32_t> v) {
  return {Shape::kMatrix, rows, cols, std::move(v)};
}

std::string describe_shape(const GpuValue& v) {
  switch (v.shape) {
    case GpuValue::Shape::kScalar: return "a scalar";
    case GpuValue::Shape::kVector: return "a vector of " + std::to_string(v.size());
    case GpuValue::Shape::kMatrix: return "a " + std::to_string(v.rows) + "x" + std::to_string(v.cols) + " matrix";
  }
  return "a value";
}

std::string format_value(const GpuValue& v) {
  switch (v.shape) {
    case GpuValue::Shape::kScalar: return std::to_string(v.data.at(0));
    case GpuValue::Shape::kVector: return format_array(v.data);
    case GpuValue::Shape::kMatrix: break;
  }
  std::string s = "[";
  for (std::int64_t r = 0; r < v.rows; ++r) {
    auto first = v.data.begin() + r * v.cols;
    s += (r ? ", " : "") + format_array(std::vector<std::int32_t>(first, first + v.cols));
  }
  return s + "]";
}

const std::vector<GpuFunction>& gpu_functions() {
  static const std::vector<GpuFunction> kFunctions = {
      {"sum", {"v"}, "the sum of a vector's elements"},
      {"max", {"v"}, "a vector's largest element"},
      {"min", {"v"}, "a vector's smallest element"},
      {"cumsum", {"v"}, "the inclusive prefix sums of a vector"},
      {"sort", {"v"}, "a vector's elements in ascending order"},
      {"gcd", {"a", "b"}, "the greatest common divisor of |a| and |b| (elementwise)"},
      {"pow_mod", {"b", "e", "m"}, "b^e mod m for e >= 0, m >= 1 (elementwise)"},
      {"is_prime", {"n"}, "1 when n is prime, else 0 (elementwise)"},
      {"fib", {"n"}, "the n-th Fibonacci number, F(0) = 0, for n >= 0 (elementwise)"},
      {"popcount", {"x"}, "the number of 1 bits of x's 32-bit word (elementwise)"},
  };
  return kFunctions;
}

}  // namespace qgpu::core
