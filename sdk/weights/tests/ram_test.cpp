// Gated DeltaNet memory: a named RAM with a write port and read ports in two
// layers (replicas written by the same tokens), a two-head wide RAM, and reads
// of earlier tokens through the conv1d taps — over thousands of tokens, in fp32
// and bf16, against a plain array model.
#include <array>
#include <cstdio>
#include <map>

#include "harness.h"

namespace qgpu::weights {
namespace {

using testing::kBothDtypes;
using testing::must;

struct RamCircuit {
  Circuit c{"ram"};
  Word waddr, wdata, we, raddr, raddr2, ren, waddr2, wdata2, we2, raddr3, prev_src;
  Word read0, read1, wide, prev1, prev3;
  RamCircuit() {
    waddr = must(c.input("w", "addr", 7));
    wdata = must(c.input("w", "data", 32));
    we = must(c.input("w", "we", 1));
    raddr = must(c.input("r", "addr", 7));
    raddr2 = must(c.input("r", "addr2", 7));
    ren = must(c.input("r", "en", 1));
    int mem = must(c.add_ram("mem", "words", 128, 32));
    EXPECT_TRUE(c.ram_write(mem, waddr, wdata, we[0]).is_ok());
    read0 = must(c.ram_read(mem, "read0", raddr, ren[0]));
    Word addr_late = must(copy(c, "r", "addr2_late", raddr2));  // ready after MLP 0: forces a replica in layer 1
    read1 = must(c.ram_read(mem, "read1", addr_late, ren[0]));
    // 100 rows x 48 bits: two value heads (32 + 16 bits and 16 constant-one pads), rows < 2^7.
    waddr2 = must(c.input("w2", "addr", 7));
    wdata2 = must(c.input("w2", "data", 48));
    we2 = must(c.input("w2", "we", 1));
    raddr3 = must(c.input("r3", "addr", 7));
    int wide_ram = must(c.add_ram("mem", "wide", 100, 48));
    EXPECT_TRUE(c.ram_write(wide_ram, waddr2, wdata2, we2[0]).is_ok());
    wide = must(c.ram_read(wide_ram, "wide_read", raddr3, std::nullopt));
    prev_src = must(c.input("p", "src", 16));
    prev1 = must(c.previous("prev1", prev_src, 1, std::nullopt));
    prev3 = must(c.previous("prev3", prev_src, 3, std::nullopt));
  }
};

TEST(Ram, WritesAndReadsOverThousandsOfTokens) {
  RamCircuit rc;
  CompiledCircuit cc = must(compile(rc.c, testing::qwen2b_target()));
  ASSERT_EQ(cc.schedule.num_layers, 2);
  EXPECT_EQ(cc.schedule.use[0].key_heads, 1 + 2 + 1 + 1);  // read0, wide (2 heads), prev1, prev3
  EXPECT_EQ(cc.schedule.use[1].key_heads, 1);              // the replica serving read1
  constexpr int kTokens = 5000;
  for (DType dt : kBothDtypes) {
    ReferenceModel model(cc.layers, cc.target.shapes, dt);
    std::mt19937_64 rng(99);
    std::array<std::uint32_t, 128> mem{};
    std::array<std::uint64_t, 100> wide{};
    std::vector<std::uint32_t> hist;
    int wrong = 0, inexact = 0, reads = 0;
    auto run = [&](std::uint32_t wa, std::uint32_t wd, bool w, std::uint32_t ra, std::uint32_t ra2, bool en,
                   std::uint32_t wa2, std::uint64_t wd2, bool w2, std::uint32_t ra3, std::uint32_t ps) {
      auto y = model.step(embed(rc.c, cc.allocation,
                                {{rc.waddr, wa},
                                 {rc.wdata, wd},
                                 {rc.we, w},
                                 {rc.raddr, ra},
                                 {rc.raddr2, ra2},
                                 {rc.ren, en},
                                 {rc.waddr2, wa2},
                                 {rc.wdata2, wd2},
                                 {rc.we2, w2},
                                 {rc.raddr3, ra3},
                                 {rc.prev_src, ps}}));
      if (w) mem[wa] = wd;
      if (w2 && wa2 < 100) wide[wa2] = wd2;
      hist.push_back(ps);
      const std::size_t t = hist.size() - 1;
      std::uint32_t p1 = t >= 1 ? hist[t - 1] : 0, p3 = t >= 3 ? hist[t - 3] : 0;
      wrong += read_word(cc.allocation, y, rc.read0) != (en ? mem[ra] : 0u);
      wrong += read_word(cc.allocation, y, rc.read1) != (en ? mem[ra2] : 0u);
      wrong += read_word(cc.allocation, y, rc.wide) != (ra3 < 100 ? wide[ra3] : 0u);
      wrong += read_word(cc.allocation, y, rc.prev1) != p1;
      wrong += read_word(cc.allocation, y, rc.prev3) != p3;
      reads += en ? 2 : 0;
      if (!testing::residual_exact(rc.c, cc.allocation, y)) ++inexact;
    };
    for (int t = 0; t < kTokens; ++t)
      run(rng() % 128, static_cast<std::uint32_t>(rng()), rng() % 2, rng() % 128, rng() % 128, rng() % 10 < 7,
          rng() % 128, rng() & 0xFFFFFFFFFFFFull, rng() % 2, rng() % 128, rng() & 0xFFFF);
    // No disturbed row: read every row back through both replicas and the wide RAM.
    for (std::uint32_t r = 0; r < 128; ++r) run(0, 0, false, r, 127 - r, true, 0, 0, false, r, 0);
    EXPECT_EQ(wrong, 0) << dtype_name(dt);
    EXPECT_EQ(inexact, 0) << dtype_name(dt);
    for (const LayerMargin& m : model.margins()) EXPECT_EQ(m.gdn_min, kGain) << m.gdn_where;
    std::printf("[ %s ] %d tokens, %d enabled reads + wide/previous reads each token, %d wrong\n%s",
                std::string(dtype_name(dt)).c_str(), kTokens + 128, reads, wrong, model.margin_report().c_str());
  }
}

TEST(Ram, DeclarationErrorsNameTheProblem) {
  Circuit c("bad");
  Word a = must(c.input("w", "addr", 6)), d = must(c.input("w", "data", 8));
  int m = must(c.add_ram("mem", "small", 100, 8));
  auto s = c.ram_write(m, a, d, std::nullopt);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("6 bits cannot reach 100 rows"), std::string::npos) << s.message();
  auto r = c.ram_read(m, "x", a, std::nullopt);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("before any write port"), std::string::npos);
  auto p = c.previous("p", d, 4, std::nullopt);
  ASSERT_FALSE(p.has_value());
  EXPECT_NE(p.status().message().find("outside the conv1d window"), std::string::npos);
  // More rows than a head's key dimension.
  Word a8 = must(c.input("w", "addr8", 8));
  int big = must(c.add_ram("mem", "big", 200, 8));
  ASSERT_TRUE(c.ram_write(big, a8, d, std::nullopt).is_ok());
  must(c.ram_read(big, "y", a8, std::nullopt));
  auto cc = compile(c, testing::qwen2b_target());
  ASSERT_FALSE(cc.has_value());
  EXPECT_NE(cc.status().message().find("200 rows, a head holds 128 (over by 72)"), std::string::npos)
      << cc.status().message();
}

}  // namespace
}  // namespace qgpu::weights

namespace qgpu::weights {
namespace {

// ARCHITECTURE §4: with a channel that is exactly 0 on circuit tokens and
// negative on text tokens (gain 2^100 on every MLP gate, beta and z), text
// tokens pass through bit-identically and never write into the RAM.
TEST(Ram, MuteChannelSilencesTextTokens) {
  RamCircuit rc;
  Target t = testing::qwen2b_target();
  t.mute_channel = true;
  CompiledCircuit cc = must(compile(rc.c, t));
  ASSERT_GE(cc.allocation.mute, 0);
  for (DType dt : testing::kBothDtypes) {
    ReferenceModel model(cc.layers, cc.target.shapes, dt);
    std::mt19937_64 rng(3);
    std::normal_distribution<float> text(0.0f, 0.03f);
    std::array<std::uint32_t, 128> mem{};
    int changed = 0, wrong = 0;
    for (int step = 0; step < 300; ++step) {
      if (step % 2 == 0) {  // a text token: arbitrary values, mute channel negative
        std::vector<float> x(static_cast<std::size_t>(t.shapes.hidden_size));
        for (float& v : x) v = round_to(dt, text(rng));
        x[cc.allocation.mute] = round_to(dt, -std::fabs(text(rng)) - 1e-3f);
        changed += model.step(x) != x;
      } else {
        std::uint32_t wa = rng() % 128, wd = static_cast<std::uint32_t>(rng()), ra = rng() % 128;
        bool w = rng() % 2;
        auto y = model.step(
            embed(rc.c, cc.allocation, {{rc.waddr, wa}, {rc.wdata, wd}, {rc.we, w}, {rc.raddr, ra}, {rc.ren, 1}}));
        if (w) mem[wa] = wd;
        wrong += read_word(cc.allocation, y, rc.read0) != mem[ra];
      }
    }
    EXPECT_EQ(changed, 0) << dtype_name(dt);
    EXPECT_EQ(wrong, 0) << dtype_name(dt);
  }
}

}  // namespace
}  // namespace qgpu::weights
