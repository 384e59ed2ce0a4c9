// SDK value types: Status/Expected, options, tensor views.
#include <gtest/gtest.h>

#include <memory>
#include <utility>

#include "qgpu/core/text.h"
#include "qgpu/sdk/sdk.h"

namespace qgpu {
namespace {

TEST(Status, FormatsWithAndWithoutLocation) {
  EXPECT_EQ(sdk::not_found("no kernel 'x'").to_string(), "error: no kernel 'x'");
  EXPECT_EQ(sdk::error_at("k.ptx:3:7", sdk::ErrorCode::kParseError, "bad").to_string(), "k.ptx:3:7: error: bad");
  EXPECT_EQ(sdk::not_available("chat").message(), "chat is not available in this build");
  EXPECT_EQ(sdk::io_error("x").with_context("reading y").message(), "reading y: x");
  EXPECT_TRUE(sdk::Status::ok().with_context("z").is_ok());
}

TEST(Expected, HoldsValueOrError) {
  sdk::Expected<int> v = 3;
  ASSERT_TRUE(v);
  EXPECT_EQ(*v, 3);
  EXPECT_TRUE(v.status().is_ok());
  sdk::Expected<int> e = sdk::invalid_argument("bad");
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().message(), "bad");
  // An Expected cannot silently hold "success without a value".
  sdk::Expected<int> broken = sdk::Status::ok();
  ASSERT_FALSE(broken);
  EXPECT_EQ(broken.error().code(), sdk::ErrorCode::kInternal);
}

// QGPU_ASSIGN_OR_RETURN: into a declaration or an existing variable; the error goes to a Status-
// or an Expected-returning function unchanged.
sdk::Expected<std::unique_ptr<int>> make_int(int v) {
  if (v < 0) return sdk::invalid_argument("negative: " + std::to_string(v));
  return std::make_unique<int>(v);
}
sdk::Expected<int> sum_of(int a, int b) {
  QGPU_ASSIGN_OR_RETURN(auto x, make_int(a));  // a move-only value
  std::unique_ptr<int> y;
  QGPU_ASSIGN_OR_RETURN(y, make_int(b));
  QGPU_ASSIGN_OR_RETURN(const auto pair, sdk::Expected<std::pair<int, int>>(std::pair<int, int>{*x, *y}));
  return pair.first + pair.second;
}
sdk::Status check_sum(int a, int b, int* out) {
  QGPU_ASSIGN_OR_RETURN(*out, sum_of(a, b));
  return {};
}

TEST(Expected, AssignOrReturn) {
  EXPECT_EQ(*sum_of(2, 3), 5);
  EXPECT_EQ(sum_of(2, -3).error().message(), "negative: -3");
  EXPECT_EQ(sum_of(-2, 3).error().code(), sdk::ErrorCode::kInvalidArgument);
  int out = 0;
  EXPECT_TRUE(check_sum(4, 5, &out).is_ok());
  EXPECT_EQ(out, 9);
  EXPECT_EQ(check_sum(-1, 5, &out).message(), "negative: -1");
  EXPECT_EQ(out, 9);
}

TEST(Options, TypedAccessors) {
  sdk::Options o({{"n", "0x10"}, {"f", "2.5"}, {"b", "true"}, {"s", "abc"}});
  EXPECT_EQ(*o.get_int("n"), 16);
  EXPECT_EQ(*o.get_float("f"), 2.5);
  EXPECT_EQ(*o.get_bool("b"), true);
  EXPECT_FALSE(o.get_int("s"));
  EXPECT_EQ(o.get_int("missing").error().message(), "option 'missing' is not set");
  EXPECT_EQ(o.get_bool("s").error().message(), "option 's': 'abc' is not true or false");
}

TEST(TensorView, ShapesDtypesDevices) {
  float data[6] = {};
  auto v = sdk::make_view(data, sdk::DType::kF32, {2, 3});
  ASSERT_TRUE(v);
  EXPECT_EQ(v->numel(), 6);
  EXPECT_EQ(v->nbytes(), 24u);
  EXPECT_TRUE(v->is_contiguous());
  EXPECT_TRUE(sdk::validate_view(*v).is_ok());
  v->strides[0] = 1;
  v->strides[1] = 2;  // column-major
  EXPECT_FALSE(v->is_contiguous());
  v->version = 99;
  EXPECT_EQ(sdk::validate_view(*v).message(), "tensor view version 99, expected 1");
  EXPECT_FALSE(sdk::make_view(data, sdk::DType::kF32, {1, 1, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_FALSE(sdk::make_view(data, sdk::DType::kF32, {-1}));
  EXPECT_EQ(*sdk::parse_dtype("bfloat16"), sdk::DType::kBF16);
  EXPECT_FALSE(sdk::parse_dtype("f8"));
  EXPECT_EQ(sdk::device_name(*sdk::parse_device("cuda:1")), "cuda:1");
  EXPECT_FALSE(sdk::parse_device("tpu"));
  EXPECT_FALSE(sdk::parse_device("cpu:1"));
  EXPECT_FALSE(sdk::parse_device("cuda:x"));
}

TEST(Text, Helpers) {
  EXPECT_EQ(core::one_line("a\n  b  \n\nc\n"), "a; b; c");
  EXPECT_EQ(core::closest_match("machin", {"machine", "base"}), "machine");
  EXPECT_EQ(core::closest_match("zzzzzz", {"machine", "base"}), "");
  EXPECT_EQ(core::join({"a", "b"}), "a, b");
}

}  // namespace
}  // namespace qgpu
