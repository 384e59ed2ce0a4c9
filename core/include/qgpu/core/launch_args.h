// Launch arguments as users write them on the command line, and their binding
// to a kernel's parameters.
//
//   --arg 42  --arg -7  --arg 0xff          int32 scalars
//   --arg [1,2,-3]  --arg zeros(8)           int32 arrays (global memory)
//   --arg n=3  --arg out=zeros(1)            named with the CUDA parameter name
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qgpu/sdk/kernel_ir.h"
#include "qgpu/sdk/machine.h"
#include "qgpu/sdk/status.h"

namespace qgpu::core {

struct ArgValue {
  bool is_array = false;
  std::int32_t scalar = 0;
  std::vector<std::int32_t> array;
};

struct ArgSpec {
  std::optional<std::string> name;  // NAME= prefix, if given
  ArgValue value;
  std::string text;  // as the user wrote it, for messages
};

// Parses VALUE: an int32 scalar (decimal in [-2^31, 2^31-1], or 0x-hex up to
// 0xffffffff as a bit pattern), an array "[v, v, ...]" of such scalars, or "zeros(N)".
sdk::Expected<ArgValue> parse_arg_value(std::string_view text);
// Parses "[NAME=]VALUE".
sdk::Expected<ArgSpec> parse_arg(std::string_view text);

// Binds arguments to the kernel's parameters: named ones by name, the others
// in order to the parameters not yet bound. Pointer parameters need arrays,
// scalar parameters need scalars; every parameter must be bound exactly once.
sdk::Expected<std::vector<sdk::LaunchArg>> bind_args(const sdk::KernelIR& kernel, const std::vector<ArgSpec>& args);

// A launch's shape from the command line: `grid` and `block` each "X", "X,Y" or "X,Y,Z" (x
// fastest, as CUDA's dim3), every extent at least 1; the totals must fit in 32 bits.
sdk::Expected<sdk::LaunchShape> parse_launch_shape(std::string_view grid, std::string_view block);
// "4" for a 1-D extent, else "4,2" or "4,2,3": the shape's grid and block as the user writes them.
std::string format_grid(const sdk::LaunchShape& shape);
std::string format_block(const sdk::LaunchShape& shape);

// "[1, 2, 3]"
std::string format_array(const std::vector<std::int32_t>& values);

}  // namespace qgpu::core
