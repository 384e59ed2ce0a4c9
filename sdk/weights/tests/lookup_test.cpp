// lookup(): truth tables as one MLP of selector neurons, against the table
// itself on every input, in fp32 and bf16 through the reference layer math.
#include <cstdio>
#include <random>

#include "harness.h"

namespace qgpu::weights {
namespace {

using testing::kBothDtypes;
using testing::must;

// Every one of the 2^10 inputs of a random 10-bit -> 12-bit function.
TEST(Lookup, FullTableExhaustive) {
  Circuit c("lookup");
  Word in = must(c.input("t", "in", 10));
  std::mt19937_64 rng(7);
  std::vector<std::uint64_t> table(1 << 10);
  for (auto& v : table) v = (rng() % 4 == 0) ? 0 : (rng() & 0xfff);
  Word out = must(lookup(c, "t", "out", in, 12, [&](std::uint64_t x) { return table[x]; }));
  auto cc = must(compile(c, testing::qwen2b_target()));
  std::int64_t nonzero = 0;
  for (auto v : table) nonzero += v != 0;
  EXPECT_EQ(cc.total_neurons(), nonzero);
  for (DType dt : kBothDtypes) {
    ReferenceModel m(cc.layers, cc.target.shapes, dt);
    int wrong = 0;
    for (std::uint64_t x = 0; x < table.size(); ++x) {
      auto y = m.step(embed(c, cc.allocation, {{in, x}}));
      bool exact = true;
      wrong += read_word(cc.allocation, y, out, &exact) != table[x] || !exact;
    }
    EXPECT_EQ(wrong, 0) << dtype_name(dt);
  }
}

// Cubes with don't-care bits: one neuron per cube, the output of the cube that
// contains the input (a priority encoder of 14 bits: 14 cubes instead of 16 K rows).
TEST(Lookup, CubesWithDontCares) {
  Circuit c("lookup");
  Word in = must(c.input("t", "in", 14));
  std::vector<Cube> cubes;
  for (int i = 0; i < 14; ++i) {
    std::uint64_t care = (2ULL << i) - 1;  // bits 0..i: bit i set, lower bits clear
    cubes.push_back(Cube{1ULL << i, care, static_cast<std::uint64_t>(i + 1)});
  }
  Word out = must(lookup(c, "t", "lowest", in, 4, cubes));
  auto cc = must(compile(c, testing::qwen2b_target()));
  EXPECT_EQ(cc.total_neurons(), 14);
  std::mt19937_64 rng(3);
  for (DType dt : kBothDtypes) {
    ReferenceModel m(cc.layers, cc.target.shapes, dt);
    int wrong = 0;
    for (int n = 0; n < 3000; ++n) {
      std::uint64_t x = (n < 20) ? static_cast<std::uint64_t>(n) : (rng() & 0x3fff);
      if (n % 3 == 0) x &= ~((1ULL << (rng() % 14)) - 1);
      std::uint64_t expect = x == 0 ? 0 : static_cast<std::uint64_t>(__builtin_ctzll(x) + 1);
      auto y = m.step(embed(c, cc.allocation, {{in, x}}));
      bool exact = true;
      wrong += read_word(cc.allocation, y, out, &exact) != expect || !exact;
    }
    EXPECT_EQ(wrong, 0) << dtype_name(dt);
  }
}

TEST(Lookup, RejectsOverlappingAndMalformedCubes) {
  Circuit c("lookup");
  Word in = must(c.input("t", "in", 4));
  auto overlap = lookup(c, "t", "a", in, 2, {Cube{0b01, 0b01, 1}, Cube{0b10, 0b10, 2}});
  ASSERT_FALSE(overlap.has_value());
  EXPECT_NE(overlap.status().message().find("overlap"), std::string::npos) << overlap.status().to_string();
  auto outside = lookup(c, "t", "b", in, 2, {Cube{0b10000, 0b10000, 1}});
  ASSERT_FALSE(outside.has_value());
  EXPECT_NE(outside.status().message().find("outside"), std::string::npos) << outside.status().to_string();
  auto wide = lookup(c, "t", "c", in, 2, {Cube{0, 0b1, 4}});
  ASSERT_FALSE(wide.has_value());
  EXPECT_NE(wide.status().message().find("does not fit"), std::string::npos) << wide.status().to_string();
  // Disjoint cubes that differ on a bit both care about are fine.
  EXPECT_TRUE(lookup(c, "t", "d", in, 2, {Cube{0b01, 0b01, 1}, Cube{0b00, 0b01, 2}}).has_value());
}

}  // namespace
}  // namespace qgpu::weights
