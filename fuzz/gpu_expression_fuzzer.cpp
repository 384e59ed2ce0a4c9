// libFuzzer harness: arbitrary text through the `qgpu-host eval` expression parser
// (core/src/gpu_expression/parse.cpp). Expected: a tree or a one-line "expression:L:C: error: ...".
// A parsed tree is printed (to_string, format_value) and its locations are formatted.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "qgpu/core/gpu_expression.h"

namespace {

void walk(const qgpu::core::GpuExpression& e) {
  using qgpu::core::GpuExpression;
  qgpu::fuzz::check(e.line >= 1 && e.column >= 1, "locations are 1-based");
  (void)qgpu::core::location_of(e);
  if (e.kind == GpuExpression::Kind::kLiteral) {
    qgpu::fuzz::check(e.literal.size() == e.literal.rows * e.literal.cols, "a literal's shape matches its data");
    (void)qgpu::core::format_value(e.literal);
    (void)qgpu::core::describe_shape(e.literal);
  }
  for (const auto& operand : e.operands) walk(operand);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace qgpu;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto expression = core::parse_gpu_expression(text);
  if (!expression) {
    fuzz::check_error(expression.error(), text);
    return 0;
  }
  walk(*expression);
  (void)core::to_string(*expression);
  return 0;
}
