// Command-line launch arguments: parsing VALUE and binding to parameters.
#include "qgpu/core/launch_args.h"

#include <gtest/gtest.h>

namespace qgpu::core {
namespace {

ArgValue value_ok(std::string_view text) {
  auto v = parse_arg_value(text);
  EXPECT_TRUE(v) << text << ": " << v.status().to_string();
  return v ? *v : ArgValue{};
}

std::string value_error(std::string_view text) {
  auto v = parse_arg_value(text);
  EXPECT_FALSE(v) << text;
  return v ? std::string() : v.error().message();
}

TEST(LaunchArgs, Scalars) {
  EXPECT_EQ(value_ok("42").scalar, 42);
  EXPECT_EQ(value_ok("-7").scalar, -7);
  EXPECT_EQ(value_ok("0x10").scalar, 16);
  EXPECT_EQ(value_ok("0xffffffff").scalar, -1);
  EXPECT_EQ(value_ok("-2147483648").scalar, INT32_MIN);
  EXPECT_EQ(value_ok("2147483647").scalar, INT32_MAX);
  EXPECT_EQ(value_ok(" 5 ").scalar, 5);
  EXPECT_FALSE(value_ok("5").is_array);
  EXPECT_EQ(value_error("2147483648"), "'2147483648' is out of the int32 range");
  EXPECT_EQ(value_error("-2147483649"), "'-2147483649' is out of the int32 range");
  EXPECT_EQ(value_error("0x100000000"), "'0x100000000' is out of the int32 range");
  EXPECT_EQ(value_error("1.5"), "'1.5' is not an int32 value (decimal or 0x-hex)");
  EXPECT_EQ(value_error("abc"), "'abc' is not an int32 value (decimal or 0x-hex)");
  EXPECT_EQ(value_error(""), "expected an int32 value, got nothing");
}

TEST(LaunchArgs, Arrays) {
  ArgValue a = value_ok("[1, -2,0x3]");
  ASSERT_TRUE(a.is_array);
  EXPECT_EQ(a.array, (std::vector<std::int32_t>{1, -2, 3}));
  EXPECT_TRUE(value_ok("[]").array.empty());
  EXPECT_TRUE(value_ok("[]").is_array);
  EXPECT_EQ(value_ok("zeros(3)").array, (std::vector<std::int32_t>{0, 0, 0}));
  EXPECT_EQ(value_error("[1,2"), "array '[1,2' lacks its closing ']'");
  EXPECT_EQ(value_error("[1,,2]"), "array element 1: expected an int32 value, got nothing");
  EXPECT_EQ(value_error("[1,2,]"), "array '[1,2,]' ends with ','");
  EXPECT_EQ(value_error("[1,x]"), "array element 1: 'x' is not an int32 value (decimal or 0x-hex)");
  EXPECT_EQ(value_error("zeros(-1)"), "zeros(N) needs a non-negative integer N, got '-1'");
  EXPECT_EQ(value_error("zeros(99999999999)"), "zeros(99999999999) is larger than 16777216 words");
}

TEST(LaunchArgs, Names) {
  auto a = parse_arg("out=zeros(1)");
  ASSERT_TRUE(a);
  EXPECT_EQ(*a->name, "out");
  EXPECT_EQ(a->value.array.size(), 1u);
  EXPECT_FALSE(parse_arg("[1,2]")->name.has_value());
  EXPECT_EQ(parse_arg("1x=3").error().message(), "--arg '1x=3': '1x' is not a parameter name");
  EXPECT_EQ(parse_arg("n=q").error().message(), "--arg 'n=q': 'q' is not an int32 value (decimal or 0x-hex)");
}

sdk::KernelIR dot_kernel() {
  sdk::KernelIR k;
  k.name = "dot";
  using Kind = sdk::KernelParam::Kind;
  k.params = {{"a", Kind::kPointer, sdk::IrType::kI64},
              {"b", Kind::kPointer, sdk::IrType::kI64},
              {"out", Kind::kPointer, sdk::IrType::kI64},
              {"n", Kind::kScalar, sdk::IrType::kI32}};
  return k;
}

std::vector<ArgSpec> specs(std::initializer_list<const char*> texts) {
  std::vector<ArgSpec> out;
  for (const char* t : texts) out.push_back(*parse_arg(t));
  return out;
}

TEST(LaunchArgs, BindsByPositionAndByName) {
  auto bound = bind_args(dot_kernel(), specs({"n=3", "[1,2,3]", "b=[4,5,6]", "[0]"}));
  ASSERT_TRUE(bound) << bound.status().to_string();
  ASSERT_EQ(bound->size(), 4u);
  EXPECT_EQ((*bound)[0].param, "a");
  EXPECT_EQ((*bound)[0].array, (std::vector<std::int32_t>{1, 2, 3}));
  EXPECT_EQ((*bound)[1].array, (std::vector<std::int32_t>{4, 5, 6}));
  EXPECT_EQ((*bound)[2].array, (std::vector<std::int32_t>{0}));
  EXPECT_FALSE((*bound)[3].is_array);
  EXPECT_EQ((*bound)[3].scalar, 3);
}

TEST(LaunchArgs, BindingErrors) {
  auto err = [](std::initializer_list<const char*> texts) {
    auto b = bind_args(dot_kernel(), specs(texts));
    EXPECT_FALSE(b);
    return b ? std::string() : b.error().message();
  };
  EXPECT_EQ(err({"[1]", "[2]", "[3]"}), "missing --arg for parameter 'n' (#4) of kernel 'dot'");
  EXPECT_EQ(err({"[1]", "[2]", "[3]", "4", "5"}), "5 arguments given, but kernel 'dot' takes 4 (a, b, out, n)");
  EXPECT_EQ(err({"nn=3"}), "kernel 'dot' has no parameter 'nn' (did you mean 'n'?); parameters: a, b, out, n");
  EXPECT_EQ(err({"n=3", "n=4"}), "parameter 'n' is given twice");
  EXPECT_EQ(err({"1", "[2]", "[3]", "4"}),
            "parameter 'a' (#1) is a pointer: give an array such as [1,2,3] or zeros(N), got '1'");
  EXPECT_EQ(err({"[1]", "[2]", "[3]", "[4]"}), "parameter 'n' (#4) is a scalar, got the array '[4]'");
}

// 8- and 16-bit arrays packed into words little-endian (the words worked out by hand).
TEST(LaunchArgs, TypedArrays) {
  using V = std::vector<std::int32_t>;
  const ArgValue bytes = value_ok("u8[1, 2, 3, 4, 5]");
  EXPECT_EQ(bytes.array, (V{0x04030201, 5}));
  EXPECT_EQ(bytes.layout.element, ElementType::kU8);
  EXPECT_EQ(bytes.layout.elements, 5u);
  EXPECT_EQ(value_ok("i8[-1, 127, -128]").array, (V{0x00807fff}));
  EXPECT_EQ(value_ok("i8[0xff]").array, (V{0xff}));  // a bit pattern
  EXPECT_EQ(value_ok("u16[1, 65535, 0x1234]").array, (V{-65535, 0x1234}));  // 0xffff0001
  EXPECT_EQ(value_ok("i16[-2, 300]").array, (V{0x012cfffe}));
  EXPECT_EQ(value_ok("i32[-2, 300]").array, (V{-2, 300}));
  EXPECT_EQ(value_ok("u8[]").array, V{});
  const ArgValue zeros = value_ok("zeros(5, u8)");
  EXPECT_EQ(zeros.array, (V{0, 0}));
  EXPECT_EQ(zeros.layout.elements, 5u);
  EXPECT_EQ(value_ok("zeros(3, i16)").array, (V{0, 0}));
  EXPECT_EQ(value_ok("zeros(3)").layout.element, ElementType::kI32);
  EXPECT_EQ(value_error("u8[256]"), "array element 0: '256' is out of the u8 range 0..255");
  EXPECT_EQ(value_error("u8[1, -1]"), "array element 1: '-1' is out of the u8 range 0..255");
  EXPECT_EQ(value_error("i8[-129]"), "array element 0: '-129' is out of the i8 range -128..127");
  EXPECT_EQ(value_error("i8[0x100]"), "array element 0: '0x100' is out of the i8 range 0..255");
  EXPECT_EQ(value_error("u16[65536]"), "array element 0: '65536' is out of the u16 range 0..65535");
  EXPECT_EQ(value_error("f32[1]"), "'f32' is not an element type (u8, i8, u16, i16, i32, u32)");
  EXPECT_EQ(value_error("zeros(2, f32)"), "zeros(N, TYPE): 'f32' is not an element type (u8, i8, u16, i16, i32, u32)");
  // u32: the same words as i32, decimal up to 2^32 - 1, read back unsigned.
  EXPECT_EQ(value_ok("u32[4294967295, 0x80000000, 7]").array, (V{-1, INT32_MIN, 7}));
  EXPECT_EQ(value_ok("u32[4294967295]").layout.element, ElementType::kU32);
  EXPECT_EQ(value_error("u32[4294967296]"), "array element 0: '4294967296' is out of the u32 range 0..4294967295");
  EXPECT_EQ(value_error("u32[-1]"), "array element 0: '-1' is out of the u32 range 0..4294967295");
  EXPECT_EQ(value_error("i32[4294967295]"), "array element 0: '4294967295' is out of the int32 range");
  // Back to elements: sign- or zero-extended, as many as given.
  using E = std::vector<std::int64_t>;
  EXPECT_EQ(unpack_elements(V{0x04030201, 5}, {ElementType::kU8, 5}), (E{1, 2, 3, 4, 5}));
  EXPECT_EQ(unpack_elements(V{0x00807fff}, {ElementType::kI8, 3}), (E{-1, 127, -128}));
  EXPECT_EQ(unpack_elements(V{0x00807fff}, {ElementType::kU8, 4}), (E{255, 127, 128, 0}));
  EXPECT_EQ(unpack_elements(V{0x012cfffe}, {ElementType::kI16, 2}), (E{-2, 300}));
  EXPECT_EQ(unpack_elements(V{-65535, 0x1234}, {ElementType::kU16, 3}), (E{1, 65535, 0x1234}));
  EXPECT_EQ(unpack_elements(V{7, -8}, {ElementType::kI32, 2}), (E{7, -8}));
  EXPECT_EQ(unpack_elements(V{7, -8}, {ElementType::kU32, 2}), (E{7, 4294967288}));
  // Binding keeps each parameter's layout.
  std::vector<ArrayLayout> layouts;
  ASSERT_TRUE(bind_args(dot_kernel(), specs({"u8[1,2,3]", "i16[4]", "zeros(1)", "3"}), &layouts));
  ASSERT_EQ(layouts.size(), 4u);
  EXPECT_EQ(layouts[0].element, ElementType::kU8);
  EXPECT_EQ(layouts[0].elements, 3u);
  EXPECT_EQ(layouts[1].element, ElementType::kI16);
  EXPECT_EQ(layouts[2].element, ElementType::kI32);
  EXPECT_EQ(element_type_name(layouts[1].element), "i16");
}

TEST(LaunchArgs, FormatArray) {
  using V32 = std::vector<std::int32_t>;
  EXPECT_EQ(format_array(V32{}), "[]");
  EXPECT_EQ(format_array(V32{32}), "[32]");
  EXPECT_EQ(format_array(V32{1, -2}), "[1, -2]");
  EXPECT_EQ(format_array(std::vector<std::int64_t>{4294967295, 0}), "[4294967295, 0]");
}

TEST(LaunchArgs, LaunchShapes) {
  auto one = core::parse_launch_shape("8", "32");
  ASSERT_TRUE(one) << one.error().message();
  EXPECT_EQ(one->grid, 8u);
  EXPECT_EQ(one->block, 32u);
  EXPECT_TRUE(one->one_dimensional());
  EXPECT_EQ(core::format_grid(*one), "8");

  auto two = core::parse_launch_shape("4,2", " 8 , 4 ");
  ASSERT_TRUE(two) << two.error().message();
  EXPECT_EQ(two->grid, 8u);
  EXPECT_EQ(two->grid_x(), 4u);
  EXPECT_EQ(two->grid_y, 2u);
  EXPECT_EQ(two->grid_z, 1u);
  EXPECT_EQ(two->block, 32u);
  EXPECT_EQ(two->block_x(), 8u);
  EXPECT_EQ(two->block_y, 4u);
  EXPECT_FALSE(two->one_dimensional());
  EXPECT_EQ(core::format_grid(*two), "4,2");
  EXPECT_EQ(core::format_block(*two), "8,4");

  auto three = core::parse_launch_shape("3,1,5", "2,3,4");
  ASSERT_TRUE(three) << three.error().message();
  EXPECT_EQ(three->grid, 15u);
  EXPECT_EQ(three->grid_x(), 3u);
  EXPECT_EQ(three->block, 24u);
  EXPECT_EQ(three->block_x(), 2u);
  EXPECT_EQ(three->block_z, 4u);
  EXPECT_EQ(core::format_grid(*three), "3,1,5");

  for (const char* bad : {"", "0", "4,0", "1,2,3,4", "a", "4,", ",4", "-1", "4x2", "65536,65536"}) {
    auto shape = core::parse_launch_shape(bad, "1");
    EXPECT_FALSE(shape) << "'" << bad << "'";
    if (!shape) {
      EXPECT_NE(shape.error().message().find("--grid '"), std::string::npos) << shape.error().message();
    }
  }
  EXPECT_FALSE(core::parse_launch_shape("1", "2,2,0"));
}

}  // namespace
}  // namespace qgpu::core
