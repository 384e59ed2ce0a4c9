// The circuit engine's fast paths against the plain loops they replace: the
// sliced matrix product against linear(), the shared-prefix row sums against a
// loop over each row, the activations' shortcuts against their formulas, and the
// element-wise layer math on 16 lanes against its scalar loops. Every comparison
// is bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "../src/reference/lanes.h"
#include "../src/reference/sliced.h"
#include "qgpu/weights/numerics.h"
#include "qgpu/weights/reference.h"
#include "qgpu/weights/row_choice.h"
#include "qgpu/weights/row_sums.h"
#include "qgpu/weights/two_threads.h"

namespace qgpu::weights {
namespace {

// Equal bits, or both NaN (a NaN's payload is not part of any contract).
::testing::AssertionResult same_float(float want, float got) {
  if (std::bit_cast<std::uint32_t>(want) == std::bit_cast<std::uint32_t>(got)) return ::testing::AssertionSuccess();
  if (std::isnan(want) && std::isnan(got)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "want " << want << " (0x" << std::hex
                                       << std::bit_cast<std::uint32_t>(want) << "), got " << got << " (0x"
                                       << std::bit_cast<std::uint32_t>(got) << ")";
}

enum class Values { kRandom, kBf16Exact, kSmallIntegers };

double draw(std::mt19937& rng, Values values) {
  std::uniform_real_distribution<double> real(-4.0, 4.0);
  switch (values) {
    case Values::kRandom:
      return real(rng);
    case Values::kBf16Exact:
      return static_cast<double>(round_bf16(static_cast<float>(real(rng))));
    case Values::kSmallIntegers:
      return static_cast<double>(std::uniform_int_distribution<int>(-3, 3)(rng) * 64);
  }
  return 0;
}

// A random matrix in compressed rows. `narrow`: each row reads few columns out of a small
// window (the by-column form); `ascending`: each row's columns in ascending order (the
// SparseBuilder's order), else shuffled (only the by-lane form keeps that order).
SparseMatrix random_matrix(std::mt19937& rng, std::int64_t rows, std::int64_t cols, bool narrow, bool ascending,
                           Values values) {
  SparseMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.row_ptr.push_back(0);
  std::uniform_int_distribution<int> count(0, narrow ? 4 : 40);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t window = narrow ? std::min<std::int64_t>(cols, 12) : cols;
    // narrow: the rows of one slice (16) share a window, as a circuit unit's rows share channels
    const std::int64_t base = narrow ? (r / 16 * 37) % (cols - window + 1) : 0;
    std::vector<std::int32_t> picked;
    const int n = r % 7 == 3 ? 0 : count(rng);  // every seventh row empty
    for (int i = 0; i < n; ++i) {
      const auto c = static_cast<std::int32_t>(base + std::uniform_int_distribution<std::int64_t>(0, window - 1)(rng));
      if (std::find(picked.begin(), picked.end(), c) == picked.end()) picked.push_back(c);
    }
    std::sort(picked.begin(), picked.end());
    if (!ascending) std::shuffle(picked.begin(), picked.end(), rng);
    for (std::int32_t c : picked) {
      double v = 0;
      while (v == 0) v = draw(rng, values);
      m.col.push_back(c);
      m.val.push_back(v);
    }
    m.row_ptr.push_back(static_cast<std::int64_t>(m.col.size()));
  }
  return m;
}

// x over cols + 1 floats (the last is the padding's 0), with the awkward values a residual
// stream can hold mixed in: -0, infinities, NaN, subnormals, huge values.
std::vector<float> random_input(std::mt19937& rng, std::int64_t cols, bool awkward) {
  std::vector<float> x(static_cast<std::size_t>(cols) + 1, 0.0f);
  std::uniform_real_distribution<float> real(-100.0f, 100.0f);
  const float odd[] = {-0.0f, INFINITY, -INFINITY, NAN, 1e-40f, -3e38f, 3e38f, 0.0f};
  for (std::int64_t c = 0; c < cols; ++c) {
    x[static_cast<std::size_t>(c)] = real(rng);
    if (awkward && std::uniform_int_distribution<int>(0, 9)(rng) == 0)
      x[static_cast<std::size_t>(c)] = odd[std::uniform_int_distribution<int>(0, 7)(rng)];
  }
  return x;
}

void expect_product_matches_linear(const SparseMatrix& m, DType dtype, std::mt19937& rng, bool awkward) {
  const reference::SlicedMatrix sliced = reference::slice(m, dtype);
  for (int trial = 0; trial < 4; ++trial) {
    const std::vector<float> x = random_input(rng, m.cols, awkward);
    const std::vector<float> want = linear(m, x, dtype);
    const float untouched = 12345.0f;
    std::vector<float> fast(static_cast<std::size_t>(m.rows), untouched), plain = fast;
    reference::multiply(sliced, x.data(), fast.data(), dtype);
    reference::multiply_plain(sliced, x.data(), plain.data(), dtype);
    for (std::int64_t r = 0; r < m.rows; ++r) {
      const auto at = static_cast<std::size_t>(r);
      if (m.row_ptr[r] == m.row_ptr[r + 1]) {  // empty rows are left as they were
        EXPECT_EQ(fast[at], untouched) << "row " << r;
        EXPECT_EQ(plain[at], untouched) << "row " << r;
        continue;
      }
      EXPECT_TRUE(same_float(want[at], fast[at])) << "multiply, row " << r;
      EXPECT_TRUE(same_float(want[at], plain[at])) << "multiply_plain, row " << r;
    }
  }
}

TEST(SlicedMatrix, ProductEqualsTheRowLoopBitForBit) {
  std::mt19937 rng(19);
  for (DType dtype : {DType::kF32, DType::kBF16})
    for (Values values : {Values::kRandom, Values::kBf16Exact, Values::kSmallIntegers})
      for (bool narrow : {true, false})
        for (bool ascending : {true, false})
          for (bool awkward : {false, true}) {
            SCOPED_TRACE(::testing::Message() << "dtype " << (dtype == DType::kF32 ? "f32" : "bf16") << ", values "
                                              << static_cast<int>(values) << (narrow ? ", narrow" : ", wide")
                                              << (ascending ? ", ascending" : ", shuffled")
                                              << (awkward ? ", awkward x" : ""));
            // 83 rows: five full slices and a partial one.
            const SparseMatrix m = random_matrix(rng, 83, 150, narrow, ascending, values);
            expect_product_matches_linear(m, dtype, rng, awkward);
          }
}

// Two threads share a layer's products by cutting their slices in two (whole groups, a group cut
// between its slices, slices by lane): each row is in one part, and the parts together give the
// whole product's bits.
void expect_parts_compute_the_whole(const std::vector<SparseMatrix>& ms, DType dtype, std::mt19937& rng,
                                    bool expect_cut) {
  std::vector<reference::SlicedMatrix> sliced;
  for (const SparseMatrix& m : ms) sliced.push_back(reference::slice(m, dtype));
  std::vector<const reference::SlicedMatrix*> list;
  for (const auto& m : sliced) list.push_back(&m);
  const auto parts = reference::split_in_two(list, 0);
  ASSERT_EQ(parts.size(), ms.size());
  if (expect_cut) {
    EXPECT_TRUE(std::any_of(parts.begin(), parts.end(), [](const auto& p) { return p[0].cut >= 0; }));
  }
  std::int64_t in_part[2] = {0, 0};
  const float untouched = 12345.0f;
  for (std::size_t k = 0; k < ms.size(); ++k) {
    const std::vector<float> x = random_input(rng, ms[k].cols, true);
    std::vector<float> whole(static_cast<std::size_t>(ms[k].rows), untouched);
    reference::multiply(sliced[k], x.data(), whole.data(), dtype);
    for (int plain = 0; plain < 2; ++plain) {
      std::vector<float> y[2] = {whole, whole};
      for (int j = 0; j < 2; ++j) {
        std::fill(y[j].begin(), y[j].end(), untouched);
        if (plain)
          reference::multiply_plain(sliced[k], parts[k][static_cast<std::size_t>(j)], x.data(), y[j].data(), dtype);
        else
          reference::multiply(sliced[k], parts[k][static_cast<std::size_t>(j)], x.data(), y[j].data(), dtype);
      }
      for (std::int64_t r = 0; r < ms[k].rows; ++r) {
        const auto at = static_cast<std::size_t>(r);
        const bool first = y[0][at] != untouched, second = y[1][at] != untouched;
        if (ms[k].row_ptr[r] == ms[k].row_ptr[r + 1]) {
          EXPECT_FALSE(first || second) << "matrix " << k << ", empty row " << r;
          continue;
        }
        ASSERT_NE(first, second) << "matrix " << k << ", row " << r << " is in "
                                 << (first ? "both parts" : "neither part");
        in_part[first ? 0 : 1] += plain == 0;
        EXPECT_TRUE(same_float(whole[at], y[first ? 0 : 1][at]))
            << (plain ? "multiply_plain" : "multiply") << ", matrix " << k << ", row " << r;
      }
    }
  }
  EXPECT_GT(in_part[0], 0);
  EXPECT_GT(in_part[1], 0);
  // Below the size worth sharing, part 1 is empty.
  for (const auto& p : reference::split_in_two(list, std::int64_t{1} << 40)) EXPECT_TRUE(p[1].empty());
}

TEST(SlicedMatrix, TwoPartsComputeTheWholeProduct) {
  std::mt19937 rng(23);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype == DType::kF32 ? "f32" : "bf16");
    std::vector<SparseMatrix> three;
    for (int k = 0; k < 3; ++k) three.push_back(random_matrix(rng, 83 + 40 * k, 150, k != 1, k != 2, Values::kRandom));
    expect_parts_compute_the_whole(three, dtype, rng, false);
    // One group of four slices (64 rows on the same 4 columns, by column): the half falls inside it.
    SparseMatrix group;
    group.rows = 64;
    group.cols = 150;
    group.row_ptr.push_back(0);
    for (std::int64_t r = 0; r < group.rows; ++r) {
      for (std::int32_t c : {7, 8, 40, 41}) {
        group.col.push_back(c);
        group.val.push_back(draw(rng, Values::kRandom));
      }
      group.row_ptr.push_back(static_cast<std::int64_t>(group.col.size()));
    }
    expect_parts_compute_the_whole({group}, dtype, rng, true);
  }
}

// Each job's two parts run once each, whichever thread takes them, and run() returns after both;
// now and then the helper has gone to sleep between two jobs and is woken.
TEST(TwoThreads, RunsEachPartOnceAndWaitsForBoth) {
  TwoThreads threads;
  std::vector<int> runs(2 * 20000, 0);
  std::atomic<std::int64_t> total{0};
  for (int job = 0; job < 20000; ++job) {
    if (job % 4000 == 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    threads.run([&](int part) {
      runs[static_cast<std::size_t>(2 * job + part)] += 1;
      total.fetch_add(1, std::memory_order_relaxed);
    });
    ASSERT_EQ(total.load(), 2 * (job + 1)) << "job " << job;
  }
  EXPECT_TRUE(std::all_of(runs.begin(), runs.end(), [](int n) { return n == 1; }));
}

TEST(SlicedMatrix, ChoosesTheFormAndStorageTheWeightsAllow) {
  // 64 rows of 3 ascending columns, each slice's rows within one window of 8 columns (a
  // circuit unit's rows read the same few channels): every slice by column.
  SparseMatrix narrow;
  narrow.rows = 64;
  narrow.cols = 200;
  narrow.row_ptr.push_back(0);
  for (std::int32_t r = 0; r < 64; ++r) {
    const std::int32_t window = (r / 16) * 40;
    for (std::int32_t k = 0; k < 3; ++k) {
      narrow.col.push_back(window + (r + 3 * k) % 8);
      narrow.val.push_back(64.0 * (k + 1));
    }
    std::sort(narrow.col.end() - 3, narrow.col.end());
    narrow.row_ptr.push_back(static_cast<std::int64_t>(narrow.col.size()));
  }
  const reference::SlicedMatrix by_column = reference::slice(narrow, DType::kF32);
  ASSERT_EQ(by_column.slices.size(), 4u);
  for (const auto& s : by_column.slices) {
    EXPECT_EQ(s.lane_cols, -1);
    EXPECT_EQ(s.steps, 8);  // the window's columns
    EXPECT_EQ(s.first_row % 16, 0);
  }
  EXPECT_FALSE(by_column.code.empty());  // three distinct weights: codes into a table
  EXPECT_TRUE(by_column.val.empty());
  EXPECT_TRUE(by_column.val_bf16.empty());

  // More than 16 distinct weights, all exact in bf16: bf16 bits.
  SparseMatrix many = narrow;
  for (std::size_t k = 0; k < many.val.size(); ++k) many.val[k] = 64.0 * static_cast<double>(k % 40 + 1);
  const reference::SlicedMatrix packed = reference::slice(many, DType::kF32);
  EXPECT_TRUE(packed.code.empty());
  EXPECT_FALSE(packed.val_bf16.empty());
  EXPECT_TRUE(packed.val.empty());

  // Rows not in column order: only gathering keeps each row's order.
  std::mt19937 rng(7);
  const SparseMatrix shuffled = random_matrix(rng, 64, 200, false, false, Values::kRandom);
  const reference::SlicedMatrix by_lane = reference::slice(shuffled, DType::kF32);
  for (const auto& s : by_lane.slices) EXPECT_GE(s.lane_cols, 0);
  EXPECT_TRUE(by_lane.val_bf16.empty());  // f32 weights kept as they are
  EXPECT_TRUE(by_lane.code.empty());
  EXPECT_FALSE(by_lane.val.empty());
}

TEST(SlicedMatrix, ScatteredRowsAndEmptyMatrix) {
  // Nonempty rows far apart (no slice has consecutive rows) and a matrix with none at all.
  SparseMatrix m;
  m.rows = 200;
  m.cols = 5;
  m.row_ptr.assign(201, 0);
  for (std::int64_t r = 0; r < m.rows; ++r) {
    if (r % 9 == 0) {
      m.col.push_back(static_cast<std::int32_t>(r % 5));
      m.val.push_back(0.1 * static_cast<double>(r + 1));
    }
    m.row_ptr[r + 1] = static_cast<std::int64_t>(m.col.size());
  }
  std::mt19937 rng(3);
  expect_product_matches_linear(m, DType::kF32, rng, true);
  expect_product_matches_linear(m, DType::kBF16, rng, true);

  SparseMatrix empty;
  empty.rows = 10;
  empty.cols = 4;
  empty.row_ptr.assign(11, 0);
  const reference::SlicedMatrix none = reference::slice(empty, DType::kF32);
  EXPECT_TRUE(none.slices.empty());
  std::vector<float> x(5, 1.0f), y(10, 7.0f);
  reference::multiply(none, x.data(), y.data(), DType::kF32);
  EXPECT_EQ(y, std::vector<float>(10, 7.0f));
}

// Rows that share prefixes: each row is a prefix of one of a few stems, then a tail of its own.
SparseMatrix shared_prefix_matrix(std::mt19937& rng, bool wide_weights) {
  const std::int64_t rows = 300, cols = 64;
  std::vector<std::vector<std::pair<std::int32_t, double>>> stems(5);
  std::uniform_int_distribution<std::int32_t> column(0, cols - 1);
  auto weight = [&] {
    const double w = std::uniform_int_distribution<int>(-8, 8)(rng) * 0.25 + 0.125;
    return wide_weights ? w + 1e-12 : w;  // 1e-12 more is not a float
  };
  for (auto& stem : stems)
    for (int i = 0; i < 12; ++i) stem.emplace_back(column(rng), weight());
  SparseMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.row_ptr.push_back(0);
  for (std::int64_t r = 0; r < rows; ++r) {
    if (r % 11 != 5) {
      const auto& stem = stems[static_cast<std::size_t>(r) % stems.size()];
      const int shared = std::uniform_int_distribution<int>(0, 12)(rng);
      for (int i = 0; i < shared; ++i) {
        m.col.push_back(stem[static_cast<std::size_t>(i)].first);
        m.val.push_back(stem[static_cast<std::size_t>(i)].second);
      }
      for (int i = std::uniform_int_distribution<int>(0, 4)(rng); i > 0; --i) {
        m.col.push_back(column(rng));
        m.val.push_back(weight());
      }
    }
    m.row_ptr.push_back(static_cast<std::int64_t>(m.col.size()));
  }
  return m;
}

TEST(RowSums, EqualTheLoopOverEachRow) {
  std::mt19937 rng(5);
  for (bool wide : {false, true}) {
    SCOPED_TRACE(wide ? "weights not exact in float" : "float weights");
    const SparseMatrix m = shared_prefix_matrix(rng, wide);
    RowSums sums(m);
    EXPECT_EQ(sums.rows(), m.rows);
    EXPECT_LT(sums.terms(), static_cast<std::int64_t>(m.nonzeros()));  // the stems are shared
    std::vector<double> got;
    for (int trial = 0; trial < 5; ++trial) {
      const std::vector<float> x = random_input(rng, m.cols, trial >= 3);
      sums.compute(x.data(), got);
      ASSERT_EQ(got.size(), static_cast<std::size_t>(m.rows));
      for (std::int64_t r = 0; r < m.rows; ++r) {
        double want = 0;
        for (std::int64_t p = m.row_ptr[r]; p < m.row_ptr[r + 1]; ++p)
          want += m.val[static_cast<std::size_t>(p)] * static_cast<double>(x[static_cast<std::size_t>(m.col[p])]);
        const double have = got[static_cast<std::size_t>(r)];
        EXPECT_TRUE(std::bit_cast<std::uint64_t>(want) == std::bit_cast<std::uint64_t>(have) ||
                    (std::isnan(want) && std::isnan(have)))
            << "row " << r << ": want " << want << ", got " << have;
      }
      // As logits: each sum divided and rounded to float, as the loop over `got` would.
      std::vector<float> logits;
      sums.compute_scaled(x.data(), kResidualUnit, logits);
      ASSERT_EQ(logits.size(), got.size());
      for (std::size_t r = 0; r < got.size(); ++r)
        EXPECT_TRUE(same_float(static_cast<float>(got[r] / kResidualUnit), logits[r])) << "logit of row " << r;
    }
  }
}

// Row r of a record-like unembedding scores 16 · (±1 per bit of r) on 13 field columns, plus one
// column where the rows of the upper half (another "kind") score 8: the rows that best match x's
// signs win, with margins from the noise on x.
SparseMatrix field_matrix() {
  SparseMatrix m;
  m.rows = 5000;
  m.cols = 14;
  m.row_ptr.push_back(0);
  for (std::int64_t r = 0; r < m.rows; ++r) {
    for (int j = 0; j < 13; ++j) {
      m.col.push_back(j);
      m.val.push_back((r >> j) & 1 ? 16.0 : -16.0);
    }
    if (r >= 2500) m.col.push_back(13), m.val.push_back(8.0);
    m.row_ptr.push_back(static_cast<std::int64_t>(m.col.size()));
  }
  return m;
}

// The choice as weights::choose makes it over every row's logit (the plain loop).
sdk::Expected<Choice> choose_over_every_row(const SparseMatrix& m, const std::vector<float>& x) {
  std::vector<float> logits(static_cast<std::size_t>(m.rows));
  for (std::int64_t r = 0; r < m.rows; ++r) {
    double sum = 0;
    for (std::int64_t p = m.row_ptr[r]; p < m.row_ptr[r + 1]; ++p)
      sum += m.val[static_cast<std::size_t>(p)] * static_cast<double>(x[static_cast<std::size_t>(m.col[p])]);
    logits[static_cast<std::size_t>(r)] = static_cast<float>(sum / kResidualUnit);
  }
  return choose(logits);
}

void expect_same_choice(const sdk::Expected<Choice>& want, const sdk::Expected<Choice>& got, int trial) {
  ASSERT_EQ(want.has_value(), got.has_value()) << "trial " << trial << ": "
                                               << (want ? got.status().message() : want.status().message());
  if (!want) {
    EXPECT_EQ(want.status().message(), got.status().message()) << "trial " << trial;
    return;
  }
  EXPECT_EQ(want->offset, got->offset) << "trial " << trial;
  EXPECT_EQ(std::bit_cast<std::uint64_t>(want->logit), std::bit_cast<std::uint64_t>(got->logit)) << "trial " << trial;
  EXPECT_EQ(std::bit_cast<std::uint64_t>(want->margin), std::bit_cast<std::uint64_t>(got->margin)) << "trial " << trial;
}

TEST(RowChoice, SameWinnerAndMarginAsEveryRowsLogit) {
  std::mt19937 rng(11);
  // Record-like rows: most runs are never summed, the choice is the full one bit for bit.
  const SparseMatrix fields = field_matrix();
  RowChoice fast(fields);
  TwoThreads threads;
  EXPECT_EQ(fast.rows(), fields.rows);
  EXPECT_GT(fast.runs(), 1);
  std::uniform_real_distribution<float> noise(-0.9f, 0.9f);
  const int trials = 200;
  for (int trial = 0; trial < trials; ++trial) {
    const std::int64_t target = std::uniform_int_distribution<std::int64_t>(0, fields.rows - 1)(rng);
    std::vector<float> x(static_cast<std::size_t>(fields.cols));
    for (int j = 0; j < 13; ++j) x[static_cast<std::size_t>(j)] = ((target >> j) & 1 ? 1.0f : -1.0f) + noise(rng);
    x[13] = noise(rng);
    if (trial % 50 == 7) x[3] = 0, x[5] = 0;  // ties: no single best row, an error on both paths
    if (trial % 50 == 9) x[2] = NAN;          // a NaN logit: an error on both paths
    const auto want = choose_over_every_row(fields, x);
    expect_same_choice(want, fast.choose(x.data(), kResidualUnit), trial);
    // Two threads taking runs in the bounds' order: the same choice, margin and errors.
    expect_same_choice(want, fast.choose(x.data(), kResidualUnit, &threads), trial);
  }
  EXPECT_LT(fast.summed(), fields.rows * trials) << "the bounds should leave most runs unsummed";
  // Over the sums themselves (the merged model's draft): the first largest sum and its lead.
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<float> x(static_cast<std::size_t>(fields.cols));
    for (float& v : x) v = noise(rng) * 4;
    if (trial % 25 == 3) x[0] = 0, x[1] = 0;  // ties between rows 4k .. 4k + 3
    double best = -INFINITY, second = -INFINITY;
    std::int64_t at = -1;
    for (std::int64_t r = 0; r < fields.rows; ++r) {
      double v = 0;
      for (std::int64_t p = fields.row_ptr[r]; p < fields.row_ptr[r + 1]; ++p)
        v += fields.val[static_cast<std::size_t>(p)] * static_cast<double>(x[static_cast<std::size_t>(fields.col[p])]);
      if (v > best)
        second = best, best = v, at = r;
      else if (v > second)
        second = v;
    }
    const Choice got = fast.best_sum(x.data());
    EXPECT_EQ(got.offset, at) << "trial " << trial;
    EXPECT_EQ(std::bit_cast<std::uint64_t>(got.logit), std::bit_cast<std::uint64_t>(best)) << "trial " << trial;
    EXPECT_EQ(std::bit_cast<std::uint64_t>(got.margin), std::bit_cast<std::uint64_t>(best - second)) << "trial " << trial;
  }
  // Rows of no particular structure (one run): the same.
  for (bool wide : {false, true}) {
    const SparseMatrix m = shared_prefix_matrix(rng, wide);
    RowChoice any(m);
    for (int trial = 0; trial < 20; ++trial) {
      const std::vector<float> x = random_input(rng, m.cols, trial >= 15);
      expect_same_choice(choose_over_every_row(m, x), any.choose(x.data(), kResidualUnit), trial);
      expect_same_choice(choose_over_every_row(m, x), any.choose(x.data(), kResidualUnit, &threads), trial);
    }
  }
}

// The formulas the shortcuts stand for, computed in full.
float silu_formula(float x) {
  return x / (1.0f + std::exp(-x));
}
float silu_bf16_formula(float x) {
  return round_bf16(x / round_bf16(1.0f + round_bf16(std::exp(-x))));
}
float sigmoid_formula(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

void expect_activations_match_formulas(float x) {
  EXPECT_TRUE(same_float(silu_formula(x), silu(x))) << "silu(" << x << ")";
  EXPECT_TRUE(same_float(silu_bf16_formula(x), silu_bf16(x))) << "silu_bf16(" << x << ")";
  EXPECT_TRUE(same_float(sigmoid_formula(x), sigmoid(x))) << "sigmoid(" << x << ")";
}

TEST(Numerics, ActivationShortcutsEqualTheFormulas) {
  const float max = std::numeric_limits<float>::max();
  for (float x : {31.99f, 32.0f, 32.01f, 1e30f, max, INFINITY, -103.9f, -104.0f, -104.1f, -1e30f, -max, -INFINITY,
                  NAN, 0.0f, -0.0f})
    expect_activations_match_formulas(x);
  for (float edge : {32.0f, -104.0f, max, -max}) {  // the floats next to each threshold
    float below = edge, above = edge;
    for (int i = 0; i < 64; ++i) {
      below = std::nextafter(below, -INFINITY);
      above = std::nextafter(above, INFINITY);
      expect_activations_match_formulas(below);
      expect_activations_match_formulas(above);
    }
  }
  std::mt19937 rng(11);  // and random bit patterns: every exponent, both signs
  for (int i = 0; i < 200000; ++i) expect_activations_match_formulas(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
}


// ---- The element-wise layer math on lanes (lanes.h) against its plain loops. ----

// A value a layer's activations can meet: a circuit's switches and values (far from 0, where the
// lanes take the shortcuts), zeros of both signs, the thresholds and the floats next to them, and
// what the lanes hand to the scalar functions (NaN, infinities, values in between, subnormals).
float lane_value(std::mt19937& rng, DType dtype) {
  const float max = std::numeric_limits<float>::max();
  const float odd[] = {0.0f, -0.0f, 32.0f, std::nextafter(32.0f, 0.0f), -104.0f, std::nextafter(-104.0f, 0.0f),
                       -max, max, INFINITY, -INFINITY, NAN, 1e-40f, -1e38f, 1e38f, 2e38f, 64.0f, -64.0f, 0.5f};
  float v = 0;
  switch (std::uniform_int_distribution<int>(0, 3)(rng)) {
    case 0:
      v = odd[std::uniform_int_distribution<int>(0, std::size(odd) - 1)(rng)];
      break;
    case 1:
      v = std::uniform_real_distribution<float>(-200.0f, 200.0f)(rng);
      break;
    case 2:
      v = static_cast<float>(std::uniform_int_distribution<int>(-4, 4)(rng) * 64);
      break;
    default:
      v = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
  }
  return round_to(dtype, v);
}

std::vector<float> lane_values(std::mt19937& rng, std::size_t n, DType dtype) {
  std::vector<float> v(n);
  for (float& x : v) x = lane_value(rng, dtype);
  return v;
}

// Ascending distinct indices into [0, width): runs of consecutive ones (the plain loads) mixed
// with scattered ones (the gathers), `n` of them.
std::vector<std::int32_t> lane_indices(std::mt19937& rng, std::size_t n, std::int32_t& width) {
  std::vector<std::int32_t> out;
  std::int32_t at = 0;
  while (out.size() < n) {
    at += std::uniform_int_distribution<std::int32_t>(0, 5)(rng);
    const int run = std::uniform_int_distribution<int>(0, 3)(rng) == 0 ? 40 : 3;
    for (int i = 0; i < run && out.size() < n; ++i) out.push_back(at++);
  }
  width = at + 1;
  return out;
}

::testing::AssertionResult same_floats(const std::vector<float>& want, const std::vector<float>& got) {
  for (std::size_t i = 0; i < want.size(); ++i) {
    ::testing::AssertionResult r = same_float(want[i], got[i]);
    if (!r) return r << " at element " << i;
  }
  return ::testing::AssertionSuccess();
}

TEST(Lanes, ConvActivationsAndSwitchMarginsEqualThePlainLoops) {
  std::mt19937 rng(23);
  for (DType dtype : {DType::kF32, DType::kBF16})
    for (std::size_t n : {0, 1, 15, 16, 17, 100, 333}) {
      SCOPED_TRACE(::testing::Message() << (dtype == DType::kF32 ? "f32" : "bf16") << ", n " << n);
      for (int trial = 0; trial < 20; ++trial) {
        std::int32_t width = 0;
        const std::vector<std::int32_t> channel = lane_indices(rng, n, width);
        const std::vector<float> tap = lane_values(rng, n, dtype);
        std::vector<float> projected = lane_values(rng, static_cast<std::size_t>(width), dtype);
        std::vector<float> activated = lane_values(rng, static_cast<std::size_t>(width), dtype);
        std::vector<float> projected_plain = projected, activated_plain = activated;
        reference::direct_conv(channel.data(), tap.data(), n, projected.data(), activated.data(), dtype);
        reference::direct_conv_plain(channel.data(), tap.data(), n, projected_plain.data(), activated_plain.data(),
                                     dtype);
        EXPECT_TRUE(same_floats(projected_plain, projected)) << "projected";
        EXPECT_TRUE(same_floats(activated_plain, activated)) << "activated";
        std::int32_t at = -2, at_plain = -2;
        const float lo = reference::smallest_magnitude(projected.data(), channel.data(), n, at);
        const float lo_plain = reference::smallest_magnitude_plain(projected.data(), channel.data(), n, at_plain);
        EXPECT_TRUE(same_float(lo_plain, lo)) << "smallest magnitude";
        EXPECT_EQ(at_plain, at) << "where the smallest magnitude is";
      }
    }
}

TEST(Lanes, NeuronProductsAndMarginsEqualThePlainLoop) {
  std::mt19937 rng(29);
  for (DType dtype : {DType::kF32, DType::kBF16})
    for (std::size_t n : {0, 1, 15, 16, 17, 100, 333}) {
      SCOPED_TRACE(::testing::Message() << (dtype == DType::kF32 ? "f32" : "bf16") << ", n " << n);
      for (int trial = 0; trial < 20; ++trial) {
        std::int32_t width = 0;
        const std::vector<std::int32_t> neuron = lane_indices(rng, n, width);
        const auto w = static_cast<std::size_t>(width);
        const std::vector<float> gate = lane_values(rng, w, dtype), up = lane_values(rng, w, dtype);
        std::vector<float> product = lane_values(rng, w, dtype), product_plain = product;
        std::vector<double> smallest(w), smallest_plain;
        for (double& d : smallest) d = std::fabs(static_cast<double>(lane_value(rng, DType::kF32)));
        smallest_plain = smallest;
        const float lo = reference::neuron_products(neuron.data(), n, gate.data(), up.data(), product.data(),
                                                    smallest.data(), dtype);
        const float lo_plain = reference::neuron_products_plain(neuron.data(), n, gate.data(), up.data(),
                                                                product_plain.data(), smallest_plain.data(), dtype);
        EXPECT_TRUE(same_floats(product_plain, product)) << "products";
        EXPECT_TRUE(same_float(lo_plain, lo)) << "smallest |gate|";
        for (std::size_t k = 0; k < w; ++k)
          EXPECT_TRUE(std::bit_cast<std::uint64_t>(smallest_plain[k]) == std::bit_cast<std::uint64_t>(smallest[k]) ||
                      (std::isnan(smallest_plain[k]) && std::isnan(smallest[k])))
              << "smallest of neuron " << k << ": want " << smallest_plain[k] << ", got " << smallest[k];
      }
    }
}

TEST(Lanes, HeadRowUpdatesAndGatedOutputEqualThePlainLoops) {
  std::mt19937 rng(31);
  for (DType dtype : {DType::kF32, DType::kBF16})
    for (std::int64_t n : {1, 8, 16, 31, 128}) {
      SCOPED_TRACE(::testing::Message() << (dtype == DType::kF32 ? "f32" : "bf16") << ", n " << n);
      const auto w = static_cast<std::size_t>(n);
      for (int trial = 0; trial < 50; ++trial) {
        const std::vector<float> x = lane_values(rng, w, dtype), z = lane_values(rng, w, dtype);
        const float a = lane_value(rng, dtype), b = lane_value(rng, dtype);
        std::vector<float> y = lane_values(rng, w, dtype), y_plain = y;
        reference::add_scaled(y.data(), x.data(), a, n);
        reference::add_scaled_plain(y_plain.data(), x.data(), a, n);
        EXPECT_TRUE(same_floats(y_plain, y)) << "add_scaled";
        reference::scale(y.data(), b, n);
        reference::scale_plain(y_plain.data(), b, n);
        EXPECT_TRUE(same_floats(y_plain, y)) << "scale";
        std::vector<float> rounded(w), rounded_plain(w);
        reference::scale_rounded(x.data(), b, rounded.data(), n, dtype);
        reference::scale_rounded_plain(x.data(), b, rounded_plain.data(), n, dtype);
        EXPECT_TRUE(same_floats(rounded_plain, rounded)) << "scale_rounded";
        reference::correct(y.data(), x.data(), a, n);
        reference::correct_plain(y_plain.data(), x.data(), a, n);
        EXPECT_TRUE(same_floats(y_plain, y)) << "correct";
        std::vector<float> o = lane_values(rng, w, DType::kF32), o_plain = o;
        const float ss = reference::round_and_sum_squares(o.data(), n, dtype);
        const float ss_plain = reference::round_and_sum_squares_plain(o_plain.data(), n, dtype);
        EXPECT_TRUE(same_floats(o_plain, o)) << "round_and_sum_squares' rounding";
        EXPECT_TRUE(same_float(ss_plain, ss)) << "round_and_sum_squares";
        EXPECT_TRUE(same_float(reference::smallest_magnitude_plain(z.data(), n), reference::smallest_magnitude(z.data(), n)))
            << "smallest_magnitude";
        std::vector<float> out = lane_values(rng, w, dtype), out_plain = out;
        reference::gated_output(x.data(), z.data(), a, b, n, out.data(), dtype);
        reference::gated_output_plain(x.data(), z.data(), a, b, n, out_plain.data(), dtype);
        EXPECT_TRUE(same_floats(out_plain, out)) << "gated_output";
      }
    }
}

}  // namespace
}  // namespace qgpu::weights
