// Launch arguments as users write them on the command line, and their binding
// to a kernel's parameters.
//
//   --arg 42  --arg -7  --arg 0xff          int32 scalars
//   --arg [1,2,-3]  --arg zeros(8)           int32 arrays (global memory)
//   --arg n=3  --arg out=zeros(1)            named with the CUDA parameter name
//   --arg img=u8[1,2,255]  --arg zeros(8,i16) arrays of 8- or 16-bit elements (u8, i8, u16, i16),
//                                            packed into the machine's words little-endian
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qgpu/sdk/kernel_ir.h"
#include "qgpu/sdk/machine.h"
#include "qgpu/sdk/status.h"

namespace qgpu::core {

// An array's element type as the user wrote it: int32 words (i32, the default), uint32 words (u32:
// the same bits, read back unsigned), or 8- and 16-bit elements packed into the words the machine
// holds, little-endian as CUDA lays them out on a GPU (element 4w + k of a u8/i8 array is byte k of
// word w; element 2w + k of a u16/i16 array is half-word k of word w; the last word's unused part is 0).
enum class ElementType { kI32, kU8, kI8, kU16, kI16, kU32 };
std::string_view element_type_name(ElementType type);  // "i32", "u8", ...

// How to read an array's words back as the user's elements.
struct ArrayLayout {
  ElementType element = ElementType::kI32;
  std::size_t elements = 0;  // as many as the user gave (i32: the words)
};

struct ArgValue {
  bool is_array = false;
  std::int32_t scalar = 0;
  std::vector<std::int32_t> array;  // the words
  ArrayLayout layout;               // arrays
};

struct ArgSpec {
  std::optional<std::string> name;  // NAME= prefix, if given
  ArgValue value;
  std::string text;  // as the user wrote it, for messages
};

// Parses VALUE: an int32 scalar (decimal in [-2^31, 2^31-1], or 0x-hex up to
// 0xffffffff as a bit pattern), an array "[v, v, ...]" of such scalars, or "zeros(N)";
// a typed array "u8[v, ...]" (u8, i8, u16, i16, i32, u32: each element in its type's range,
// 0x-hex up to the type's width as a bit pattern) or "zeros(N, u8)".
sdk::Expected<ArgValue> parse_arg_value(std::string_view text);
// Parses "[NAME=]VALUE".
sdk::Expected<ArgSpec> parse_arg(std::string_view text);

// Binds arguments to the kernel's parameters: named ones by name, the others
// in order to the parameters not yet bound. Pointer parameters need arrays,
// scalar parameters need scalars; every parameter must be bound exactly once.
// With `layouts`, also each parameter's array layout (scalars: i32 and 0 elements), in parameter order.
sdk::Expected<std::vector<sdk::LaunchArg>> bind_args(const sdk::KernelIR& kernel, const std::vector<ArgSpec>& args,
                                                     std::vector<ArrayLayout>* layouts = nullptr);

// A launch's shape from the command line: `grid` and `block` each "X", "X,Y" or "X,Y,Z" (x
// fastest, as CUDA's dim3), every extent at least 1; the totals must fit in 32 bits.
sdk::Expected<sdk::LaunchShape> parse_launch_shape(std::string_view grid, std::string_view block);
// "4" for a 1-D extent, else "4,2" or "4,2,3": the shape's grid and block as the user writes them.
std::string format_grid(const sdk::LaunchShape& shape);
std::string format_block(const sdk::LaunchShape& shape);

// The layout bind_args gave parameter `param` (i32 words where it gave none).
ArrayLayout layout_of(const sdk::KernelIR& kernel, const std::vector<ArrayLayout>& layouts, std::string_view param);

// "[1, 2, 3]"
std::string format_array(const std::vector<std::int64_t>& values);
std::string format_array(const std::vector<std::int32_t>& values);
// An array's words as the layout's elements: the first `elements` of them, sign- or
// zero-extended by their type (i32: the words; u32: the words as unsigned values).
std::vector<std::int64_t> unpack_elements(const std::vector<std::int32_t>& words, const ArrayLayout& layout);

}  // namespace qgpu::core
