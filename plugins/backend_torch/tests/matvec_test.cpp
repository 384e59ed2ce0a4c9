// The AVX-512 one-row Linear (src/matvec.h) against ATen. bf16: at::linear in
// fp32 math on the same bf16 inputs, at::matmul in double on known cases, and
// LibTorch's own bf16 linear (oneDNN). f32: at::matmul in double and at::mv.
// Skipped on CPUs without the instructions, where project() never calls it.
#include "matvec.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "qwen35_ops.h"

namespace qgpu::torch_backend {
namespace {

// Spacing of bf16 numbers at |v| (8 significant bits): 2^(floor(log2|v|) - 7).
double bf16_ulp(double v) {
  const double a = std::fabs(v);
  if (a < 1e-30) return std::ldexp(1.0, -133);
  return std::ldexp(1.0, std::ilogb(a) - 7);
}

struct Shape {
  std::int64_t out, in;
};

class Bf16Matvec : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!matvec::has_avx512_bf16()) GTEST_SKIP() << "CPU without AVX512_BF16";
  }
};

// Each output against at::linear of the same bf16 values in fp32 (products
// exact, fp32 sums, other order): within one bf16 ulp of that result, plus the
// fp32 summation bound in * 2^-24 * sum|x w| that separates two fp32 orders
// (far below an ulp except for outputs near zero after cancellation).
TEST_F(Bf16Matvec, WithinOneUlpOfFp32Linear) {
  at::manual_seed(19);
  for (const Shape s : {Shape{1027, 2065}, Shape{4, 32}, Shape{5, 31}, Shape{3, 64}, Shape{1, 1}, Shape{2048, 6144}}) {
    const auto w = at::randn({s.out, s.in}).to(at::kBFloat16);
    const auto x = at::randn({1, s.in}).to(at::kBFloat16);
    ASSERT_TRUE(matvec::applies(x, w));
    const auto got = matvec::matvec(x, w);
    ASSERT_EQ(got.sizes(), (at::IntArrayRef{1, s.out}));
    ASSERT_EQ(got.scalar_type(), at::kBFloat16);

    const auto ref = at::linear(x.to(at::kFloat), w.to(at::kFloat)).to(at::kDouble).reshape({-1});
    const auto abs_sum = at::linear(x.to(at::kFloat).abs(), w.to(at::kFloat).abs()).to(at::kDouble).reshape({-1});
    const auto g = got.to(at::kDouble).reshape({-1});
    const auto oned = at::linear(x, w).to(at::kDouble).reshape({-1});  // LibTorch's bf16 linear (oneDNN)
    const auto* gp = g.data_ptr<double>();
    const auto* rp = ref.data_ptr<double>();
    const auto* ap = abs_sum.data_ptr<double>();
    const auto* op = oned.data_ptr<double>();
    double max_ulps = 0;
    std::int64_t differ_from_linear = 0;
    for (std::int64_t n = 0; n < s.out; ++n) {
      const double diff = std::fabs(gp[n] - rp[n]);
      const double bound = bf16_ulp(rp[n]) + static_cast<double>(s.in) * std::ldexp(ap[n], -24);
      EXPECT_LE(diff, bound) << "row " << n << " of [" << s.out << ", " << s.in << "]: got " << gp[n] << ", fp32 "
                             << rp[n];
      max_ulps = std::max(max_ulps, diff / bf16_ulp(rp[n]));
      differ_from_linear += gp[n] != op[n];
    }
    std::printf("  [%lld, %lld]: max |diff| vs fp32 linear %.3f bf16 ulp; %lld/%lld outputs differ from bf16 linear\n",
                static_cast<long long>(s.out), static_cast<long long>(s.in), max_ulps,
                static_cast<long long>(differ_from_linear), static_cast<long long>(s.out));
  }
}

// Small integers: every product and partial sum is exact in fp32 and every
// result (|y| < 256) is a bf16 number, so the kernel must equal at::matmul in
// double exactly, whatever the order. 67 columns exercise the masked tail and
// 7 rows the row remainder.
TEST_F(Bf16Matvec, ExactOnIntegersAgainstDoubleMatmul) {
  const std::int64_t out = 7, in = 67;
  auto w = at::empty({out, in}, at::kDouble);
  auto x = at::empty({in}, at::kDouble);
  for (std::int64_t k = 0; k < in; ++k) {
    x[k] = static_cast<double>((k * 5 + 3) % 7) - 3.0;                                                 // -3..3
    for (std::int64_t n = 0; n < out; ++n) w[n][k] = static_cast<double>((n * 11 + k * 3) % 5) - 2.0;  // -2..2
  }
  const auto expected = at::matmul(w, x);
  ASSERT_LT(expected.abs().max().item<double>(), 256.0);
  const auto got = matvec::matvec(x.to(at::kBFloat16), w.to(at::kBFloat16)).to(at::kDouble);
  EXPECT_TRUE(at::equal(got, expected)) << got << expected;
}

// A known non-integer case, in double: y = W x with x = 1/3 everywhere and
// row n of W = (n+1)/8 on every column. The exact result (n+1) * in / 24
// rounded to bf16 must be within half an ulp plus the fp32 sum's error.
TEST_F(Bf16Matvec, KnownCaseAgainstDoubleMatmul) {
  const std::int64_t out = 9, in = 2048;
  const auto x = at::full({in}, 1.0 / 3.0, at::kDouble).to(at::kBFloat16);
  const auto w =
      (at::arange(1, out + 1, at::kDouble).div(8).unsqueeze(1) * at::ones({out, in}, at::kDouble)).to(at::kBFloat16);
  const auto reference = at::matmul(w.to(at::kDouble), x.to(at::kDouble));  // the bf16 inputs, exactly
  const auto got = matvec::matvec(x, w).to(at::kDouble);
  for (std::int64_t n = 0; n < out; ++n) {
    const double r = reference[n].item<double>(), g = got[n].item<double>();
    EXPECT_LE(std::fabs(g - r), 0.5 * bf16_ulp(r) + in * std::ldexp(std::fabs(r), -24)) << "row " << n;
  }
}

// Each output is computed by one thread from its own row, so the split of rows
// over threads cannot change a bit.
TEST_F(Bf16Matvec, SameBitsOnOneAndTwoThreads) {
  at::manual_seed(7);
  const auto w = at::randn({3001, 1024}).to(at::kBFloat16);
  const auto x = at::randn({1, 1, 1024}).to(at::kBFloat16);
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const auto one = matvec::matvec(x, w);
  at::set_num_threads(2);
  const auto two = matvec::matvec(x, w);
  at::set_num_threads(threads);
  EXPECT_EQ(one.sizes(), (at::IntArrayRef{1, 1, 3001}));
  EXPECT_TRUE(at::equal(one, two));
}

// project() takes the kernel for up to kMaxRows rows: more rows, a dtype mismatch, a
// non-contiguous weight stay on ATen.
TEST_F(Bf16Matvec, ProjectDispatch) {
  at::manual_seed(3);
  const auto w = at::randn({96, 64}).to(at::kBFloat16);
  const auto x = at::randn({1, 64}).to(at::kBFloat16);
  EXPECT_TRUE(at::equal(ops::project(x, w), matvec::matvec(x, w)));
  EXPECT_TRUE(matvec::applies(at::randn({2, 64}).to(at::kBFloat16), w));
  EXPECT_TRUE(matvec::applies(at::randn({1, matvec::kMaxRows, 64}).to(at::kBFloat16), w));
  EXPECT_FALSE(matvec::applies(at::randn({matvec::kMaxRows + 1, 64}).to(at::kBFloat16), w));
  EXPECT_FALSE(matvec::applies(x, w.to(at::kFloat)));
  EXPECT_FALSE(matvec::applies(at::randn({1, 96}).to(at::kBFloat16), w.t()));
}

class F32Matvec : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!matvec::has_avx512_f32()) GTEST_SKIP() << "CPU without AVX-512";
  }
};

// fp32 sums in another order than BLAS: each output within the classic bound
// in * 2^-24 * sum|x w| of the exact (double) result, and so within twice
// that of at::mv's.
TEST_F(F32Matvec, WithinSummationBoundOfDoubleMatmulAndMv) {
  at::manual_seed(23);
  for (const Shape s : {Shape{1027, 2065}, Shape{5, 15}, Shape{4, 16}, Shape{2048, 6144}}) {
    const auto w = at::randn({s.out, s.in});
    const auto x = at::randn({1, s.in});
    ASSERT_TRUE(matvec::applies(x, w));
    const auto got = matvec::matvec(x, w);
    ASSERT_EQ(got.sizes(), (at::IntArrayRef{1, s.out}));
    const auto g = got.to(at::kDouble).reshape({-1});
    const auto exact = at::matmul(w.to(at::kDouble), x.to(at::kDouble).reshape({-1}));
    const auto bound = at::matmul(w.to(at::kDouble).abs(), x.to(at::kDouble).reshape({-1}).abs()) *
                       (static_cast<double>(s.in) * std::ldexp(1.0, -24));
    const auto mv = at::mv(w, x.reshape({-1})).to(at::kDouble);
    EXPECT_TRUE(((g - exact).abs() <= bound).all().item<bool>()) << "[" << s.out << ", " << s.in << "]";
    EXPECT_TRUE(((g - mv).abs() <= 2 * bound).all().item<bool>()) << "[" << s.out << ", " << s.in << "]";
    std::printf("  f32 [%lld, %lld]: max |diff| vs double %.3g, vs at::mv %.3g (max |y| %.3g)\n",
                static_cast<long long>(s.out), static_cast<long long>(s.in), (g - exact).abs().max().item<double>(),
                (g - mv).abs().max().item<double>(), exact.abs().max().item<double>());
  }
}

// Integers: exact in fp32 whatever the order, so equal to double.
TEST_F(F32Matvec, ExactOnIntegersAgainstDoubleMatmul) {
  const auto w = at::remainder(at::arange(7 * 67, at::kDouble) * 3, 5).sub(2).reshape({7, 67});
  const auto x = at::remainder(at::arange(67, at::kDouble) * 5, 7).sub(3);
  const auto got = matvec::matvec(x.to(at::kFloat), w.to(at::kFloat)).to(at::kDouble);
  EXPECT_TRUE(at::equal(got, at::matmul(w, x)));
}

// Several rows at once: every row's outputs are bit for bit what that row alone gives (a
// speculative verification's positions round as one-token steps do in the projections), for
// every row count up to kMaxRows, an odd number of outputs (the last W row alone) and inputs
// with a tail, in both dtypes.
TEST(Matvec, RowsEqualOneRowCallsBitForBit) {
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    if (!(dtype == at::kFloat ? matvec::has_avx512_f32() : matvec::has_avx512_bf16()))
      GTEST_SKIP() << "CPU without the " << dtype << " kernel";
    for (const std::int64_t in : {64, 100, 2048}) {
      at::manual_seed(in);
      const auto w = at::randn({37, in}).to(dtype);
      for (std::int64_t rows = 2; rows <= matvec::kMaxRows; ++rows) {
        const auto x = (at::randn({rows, in}) * 3).to(dtype);
        ASSERT_TRUE(matvec::applies(x, w));
        const auto all = matvec::matvec(x, w);
        ASSERT_EQ(all.sizes(), (at::IntArrayRef{rows, 37}));
        for (std::int64_t r = 0; r < rows; ++r)
          EXPECT_TRUE(at::equal(all[r], matvec::matvec(x[r], w)))
              << "dtype " << dtype << ", in " << in << ", rows " << rows << ", row " << r;
      }
      // [1, T, in] keeps its shape.
      const auto x3 = at::randn({1, 5, in}).to(dtype);
      EXPECT_EQ(matvec::matvec(x3, w).sizes(), (at::IntArrayRef{1, 5, 37}));
    }
  }
}

}  // namespace
}  // namespace qgpu::torch_backend
