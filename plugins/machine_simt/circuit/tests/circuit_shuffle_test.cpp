// The shuffle/ballot unit (plugins/machine_simt/circuit/src/shuffle.h) compiled
// to Qwen3.5-2B layer shapes and run token by token through the reference layer
// math in fp32 and bf16. The expected values follow docs/ISA.md §4 and
// interp.cpp's kFmtShfl / ballot code, modelled here in plain C++ on the full
// 32-bit b: every shuffle and ballot × width code (0..3) × predicate flag × EXEC
// mask, random and edge operands (b of 0, 1..9, >= 8 with in-range-looking low
// bits, 0x7fffffff, 0x80000000, 0xffffffff); every other opcode, no opcode and
// enable = 0 give 0, and enable = 0 leaves the residual untouched.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "circuit_harness.h"
#include "isa.h"
#include "qgpu/weights/compile.h"
#include "qgpu/weights/reference.h"
#include "shuffle.h"

namespace qgpu::simt {
namespace {

using weights::DType;
using weights::Word;
using Lanes = std::array<std::uint32_t, kProtoLanes>;

constexpr std::array<Op, 5> kUnitOps = {Op::kShflIdx, Op::kShflUp, Op::kShflDown, Op::kShflBfly, Op::kBallot};

struct Options {
  bool single_layer = false;
  int machine_lanes = kProtoLanes;
  bool also_add = false;  // one more input word per lane ("other", another unit's result) added into d
};

struct ShuffleCompiled {
  Options opt;
  weights::Circuit c{"simt.shuffle"};
  Word enable, opcode, flags, lanes;
  std::array<Word, kProtoLanes> a, b, other;
  circuit::ShuffleOut out;
  weights::CompiledCircuit cc;
  int input_bits = 0;
  bool ok = false;
  explicit ShuffleCompiled(Options o) : opt(o) {
    auto in = [&](const std::string& name, int width) {
      auto w = c.input("test", name, width);
      EXPECT_TRUE(w.has_value()) << w.status().to_string();
      input_bits += width;
      return w ? *w : Word{};
    };
    enable = in("enable", 1);
    opcode = in("opcode", kOpCount);
    flags = in("flags", 6);
    lanes = in("lanes", kProtoLanes);
    circuit::ShuffleIn si;
    si.enable = enable[0];
    si.opcode = opcode;
    si.flags = flags;
    si.lanes = lanes;
    si.single_layer = o.single_layer;
    si.machine_lanes = o.machine_lanes;
    for (int l = 0; l < kProtoLanes; ++l) {
      const std::string p = "lane" + std::to_string(l) + ".";
      a[l] = si.a[l] = in(p + "a", 32);
      b[l] = si.b[l] = in(p + "b", 32);
      if (o.also_add) {
        other[l] = in(p + "other", 32);
        si.also_add[l] = {other[l]};
      }
    }
    auto r = circuit::build_shuffle(c, si);
    EXPECT_TRUE(r.has_value()) << r.status().to_string();
    if (!r) return;
    out = std::move(*r);
    ok = test::compile_to(c, cc);
  }
};

const ShuffleCompiled& two_layers() {
  static const ShuffleCompiled* k = new ShuffleCompiled(Options{});
  return *k;
}
const ShuffleCompiled& one_layer() {
  static const ShuffleCompiled* k = new ShuffleCompiled(Options{true, kProtoLanes});
  return *k;
}
const ShuffleCompiled& three_lanes() {
  static const ShuffleCompiled* k = new ShuffleCompiled(Options{false, 3});
  return *k;
}
const ShuffleCompiled& with_other() {
  static const ShuffleCompiled* k = new ShuffleCompiled(Options{false, kProtoLanes, true});
  return *k;
}

struct Token {
  std::uint64_t opcode = 0;
  bool enable = true;
  std::uint32_t flags = 0, mask = 0xf;
  Lanes a{}, b{}, other{};  // other: another unit's result (only with Options::also_add)
};

std::uint64_t one_hot(Op op) {
  return std::uint64_t{1} << static_cast<int>(op);
}

// The reference: ISA.md §4 as interp.cpp runs it (lanes = the machine's lane count).
std::uint32_t shuffle_result(const Token& t, int lane, int machine_lanes) {
  if (!t.enable || !((t.mask >> lane) & 1)) return 0;
  if (t.opcode == one_hot(Op::kBallot)) {
    std::uint32_t r = 0;
    for (int l = 0; l < kProtoLanes; ++l)
      if (((t.mask >> l) & 1) && t.a[l] != 0) r |= 1u << l;
    return r;
  }
  const std::int64_t w = std::int64_t{1} << ((t.flags >> 1) & 3), L = lane, bv = t.b[lane];
  const std::int64_t first = L & ~(w - 1), last = L | (w - 1);
  std::int64_t j = L;
  bool in_range = true;
  if (t.opcode == one_hot(Op::kShflIdx)) {
    j = first | (bv & (w - 1));
  } else if (t.opcode == one_hot(Op::kShflUp)) {
    j = L - bv;
    in_range = j >= first;
  } else if (t.opcode == one_hot(Op::kShflDown)) {
    j = L + bv;
    in_range = j <= last;
  } else if (t.opcode == one_hot(Op::kShflBfly)) {
    j = L ^ bv;
    in_range = j <= last;
  } else {
    return 0;
  }
  if (!in_range || j >= machine_lanes) j = L;
  if (t.flags & 8) return in_range ? 1u : 0u;
  return t.a[static_cast<std::size_t>(j)];
}

// d: the shuffle result plus, with also_add, the other unit's word (0 where enable = 0).
std::uint32_t expected(const Token& t, int lane, int machine_lanes) {
  return shuffle_result(t, lane, machine_lanes) + (t.enable ? t.other[static_cast<std::size_t>(lane)] : 0u);
}

const std::vector<std::uint32_t> kEdgeB = {0u,   1u,   2u,          3u,          4u,          5u,          6u,
                                           7u,   8u,   9u,          15u,         16u,         255u,        256u,
                                           257u, 259u, 0x7fffffffu, 0x80000000u, 0x80000001u, 0xfffffffdu, 0xffffffffu};
const std::vector<std::uint32_t> kEdgeA = {0u, 1u, 0x7fffffffu, 0x80000000u, 0xffffffffu, 0x00010000u};

std::uint32_t random_b(std::mt19937_64& rng) {
  switch (rng() % 5) {
    case 0:
    case 1: return static_cast<std::uint32_t>(rng() % 10);
    case 2: return kEdgeB[rng() % kEdgeB.size()];
    case 3: return (1u << (3 + rng() % 29)) | static_cast<std::uint32_t>(rng() % 8);  // >= 8, low bits in range
    default: return static_cast<std::uint32_t>(rng());
  }
}

std::uint32_t random_a(std::mt19937_64& rng) {
  switch (rng() % 6) {
    case 0:
    case 1: return 0;
    case 2: return kEdgeA[rng() % kEdgeA.size()];
    default: return static_cast<std::uint32_t>(rng());
  }
}

// Random flag bits outside the shuffle's (0: shared, 4, 5) must not matter.
std::uint32_t flags_of(int code, bool pred, std::mt19937_64& rng) {
  return static_cast<std::uint32_t>(code << 1) | (pred ? 8u : 0u) | static_cast<std::uint32_t>(rng() & 0x31);
}

// Every unit opcode × width code × predicate × EXEC mask, `reps` random tokens
// each; for every shuffle, width code and predicate every edge b (which include
// every b[2:0] below 8 and values >= 8 whose low bits look in range) in all lanes
// at once and in one lane; for ballot every mask × pattern of zero operands.
std::vector<Token> unit_tokens(std::uint64_t seed, int reps) {
  std::mt19937_64 rng(seed);
  std::vector<Token> v;
  for (Op op : kUnitOps)
    for (int code = 0; code < 4; ++code)
      for (int pred = 0; pred < 2; ++pred) {
        for (std::uint32_t mask = 0; mask < 16; ++mask)
          for (int n = 0; n < reps; ++n) {
            Token t;
            t.opcode = one_hot(op);
            t.flags = flags_of(code, pred != 0, rng);
            t.mask = mask;
            for (int l = 0; l < kProtoLanes; ++l) {
              t.a[l] = random_a(rng);
              t.b[l] = random_b(rng);
            }
            v.push_back(t);
          }
        if (op == Op::kBallot) {
          // Every EXEC mask × every pattern of zero operands, flags random.
          for (std::uint32_t mask = 0; mask < 16 && code == 0 && pred == 0; ++mask)
            for (std::uint32_t nz = 0; nz < 16; ++nz) {
              Token t;
              t.opcode = one_hot(op);
              t.flags = static_cast<std::uint32_t>(rng() % 64);
              t.mask = mask;
              for (int l = 0; l < kProtoLanes; ++l) {
                t.a[l] = (nz >> l) & 1 ? (random_a(rng) | 1u << (rng() % 32)) : 0u;
                t.b[l] = random_b(rng);
              }
              v.push_back(t);
            }
          continue;
        }
        // Every edge b in every lane at once (all lanes active), then in one lane of a random mask.
        for (std::size_t e = 0; e < kEdgeB.size(); ++e)
          for (int all = 0; all < 2; ++all) {
            Token t;
            t.opcode = one_hot(op);
            t.flags = flags_of(code, pred != 0, rng);
            t.mask = all ? 0xfu : static_cast<std::uint32_t>(rng() % 16) | 1u << (e % kProtoLanes);
            for (int l = 0; l < kProtoLanes; ++l) {
              t.a[l] = static_cast<std::uint32_t>(rng());
              t.b[l] = all || l == static_cast<int>(e % kProtoLanes) ? kEdgeB[e] : random_b(rng);
            }
            v.push_back(t);
          }
      }
  return v;
}

// Every other opcode, no opcode, and the unit's opcodes with enable = 0: d must stay 0.
std::vector<Token> silent_tokens(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Token> v;
  auto fill = [&](Token& t) {
    t.flags = static_cast<std::uint32_t>(rng() % 64);
    t.mask = static_cast<std::uint32_t>(rng() % 16) | 1u;
    for (int l = 0; l < kProtoLanes; ++l) {
      t.a[l] = random_a(rng) | 1u;  // nonzero: a ballot would set bits
      t.b[l] = random_b(rng);
    }
  };
  for (int i = 0; i < kOpCount; ++i) {
    const Op op = static_cast<Op>(i);
    const bool mine = std::find(kUnitOps.begin(), kUnitOps.end(), op) != kUnitOps.end();
    for (int n = 0; n < (mine ? 16 : 4); ++n) {
      Token t;
      t.opcode = one_hot(op);
      t.enable = !mine;  // the unit's opcodes: the enable is what must silence them
      fill(t);
      v.push_back(t);
    }
  }
  for (int n = 0; n < 16; ++n) {
    Token t;
    t.opcode = 0;
    t.enable = n % 2 == 0;
    fill(t);
    v.push_back(t);
  }
  return v;
}

struct RunStats {
  int checked = 0, wrong = 0, inexact = 0, disturbed = 0;
  std::array<int, kOpCount + 1> sets{};  // lane results per opcode (last: no opcode)
  double mlp_min = std::numeric_limits<double>::infinity();
};

std::string op_name(std::uint64_t opcode) {
  for (int i = 0; i < kOpCount; ++i)
    if (opcode == one_hot(static_cast<Op>(i))) return std::string(op_info(static_cast<Op>(i)).mnemonic);
  return "<no opcode>";
}

RunStats run(const ShuffleCompiled& k, DType dt, const std::vector<Token>& tokens) {
  weights::ReferenceModel m(k.cc.layers, k.cc.target.shapes, dt);
  RunStats s;
  const std::string dn(weights::dtype_name(dt));
  for (const Token& t : tokens) {
    test::Inputs in = {{k.enable, t.enable ? 1u : 0u}, {k.opcode, t.opcode}, {k.flags, t.flags}, {k.lanes, t.mask}};
    for (int l = 0; l < kProtoLanes; ++l) {
      in.emplace_back(k.a[l], t.a[l]);
      in.emplace_back(k.b[l], t.b[l]);
      if (k.opt.also_add) in.emplace_back(k.other[l], t.other[l]);
    }
    const std::vector<float> x = weights::embed(k.c, k.cc.allocation, in);
    const std::vector<float> y = m.step(x);
    if (!t.enable && y != x && ++s.disturbed <= 5)
      ADD_FAILURE() << dn << ": the residual changed on a token with enable = 0 (" << op_name(t.opcode) << ")";
    int op = kOpCount;
    for (int i = 0; i < kOpCount; ++i)
      if (t.opcode == one_hot(static_cast<Op>(i))) op = i;
    for (int l = 0; l < kProtoLanes; ++l) {
      bool exact = true;
      const std::uint64_t got = weights::read_word(k.cc.allocation, y, k.out.d[l], &exact);
      const std::uint32_t want = expected(t, l, k.opt.machine_lanes);
      ++s.checked;
      ++s.sets[static_cast<std::size_t>(op)];
      if (!exact) ++s.inexact;
      if (got != want && ++s.wrong <= 20)
        ADD_FAILURE() << dn << " " << op_name(t.opcode) << (t.enable ? "" : " (enable 0)") << " flags 0x" << std::hex
                      << t.flags << " mask 0x" << t.mask << " lane " << std::dec << l << ": a = {0x" << std::hex
                      << t.a[0] << ", 0x" << t.a[1] << ", 0x" << t.a[2] << ", 0x" << t.a[3] << "} b = 0x" << t.b[l]
                      << " gives 0x" << got << ", expected 0x" << want;
    }
  }
  for (const weights::LayerMargin& lm : m.margins()) s.mlp_min = std::min(s.mlp_min, lm.mlp_min);
  std::printf("[ %s ] %d lane results checked, %d wrong, %d inexact, %d disturbed; smallest MLP switch margin %g\n",
              dn.c_str(), s.checked, s.wrong, s.inexact, s.disturbed, s.mlp_min);
  return s;
}

// Prints the cost (layers, neurons per layer, heads, channels, live peak) and checks the depth.
void report_cost(const ShuffleCompiled& k, const char* what, int layers) {
  ASSERT_TRUE(k.ok);
  std::int64_t heads = 0;
  for (int l = 0; l < k.cc.schedule.num_layers; ++l) {
    heads += k.cc.schedule.use[l].key_heads;
    std::printf("%s: layer %d: %lld key heads, %lld MLP neurons\n", what, l,
                static_cast<long long>(k.cc.schedule.use[l].key_heads),
                static_cast<long long>(k.cc.schedule.use[l].mlp_neurons));
    EXPECT_LE(k.cc.schedule.use[l].mlp_neurons, k.cc.target.shapes.intermediate_size);
  }
  const int unit_channels = k.cc.allocation.channels_used - k.input_bits;
  std::printf(
      "%s (4 lanes): %d layers, %lld heads, %lld MLP neurons, %d residual channels (%d without the test's %d input "
      "bits: results, src, constants and norm pads), live peak %d bits\n",
      what, k.cc.schedule.num_layers, static_cast<long long>(heads), static_cast<long long>(k.cc.total_neurons()),
      k.cc.allocation.channels_used, unit_channels, k.input_bits, k.cc.allocation.live_peak);
  EXPECT_EQ(k.cc.schedule.num_layers, layers);
  EXPECT_EQ(heads, 0);
}

void expect_exact(const ShuffleCompiled& k, const std::vector<Token>& tokens, bool silent) {
  ASSERT_TRUE(k.ok);
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const RunStats s = run(k, dt, tokens);
    EXPECT_EQ(s.wrong, 0) << weights::dtype_name(dt);
    EXPECT_EQ(s.inexact, 0) << weights::dtype_name(dt);
    EXPECT_EQ(s.disturbed, 0) << weights::dtype_name(dt);
    EXPECT_GE(s.mlp_min, 88.73) << "an MLP switch is not saturated";
    if (silent) {
      EXPECT_GT(s.sets[kOpCount], 0);
      continue;
    }
    for (Op op : kUnitOps) EXPECT_GE(s.sets[static_cast<std::size_t>(op)], 400) << op_info(op).mnemonic;
  }
}

TEST(CircuitShuffle, CompilesToTwoQwenLayers) {
  report_cost(two_layers(), "shuffle", 2);
}

TEST(CircuitShuffle, EveryShuffleAndBallotMatchesTheInterpreter) {
  expect_exact(two_layers(), unit_tokens(21, 8), false);
}

TEST(CircuitShuffle, OtherOpcodesNoOpcodeAndDisabledGiveZero) {
  expect_exact(two_layers(), silent_tokens(22), true);
}

TEST(CircuitShuffle, SingleLayerVariantMatchesTheInterpreter) {
  report_cost(one_layer(), "shuffle single_layer", 1);
  expect_exact(one_layer(), unit_tokens(23, 2), false);
  expect_exact(one_layer(), silent_tokens(24), true);
}

TEST(CircuitShuffle, ThreeLaneMachineReadsOwnValueForLaneThree) {
  // MachineConfig::lanes = 3: a source lane 3 is the lane's own value (still "in range").
  report_cost(three_lanes(), "shuffle machine_lanes=3", 2);
  expect_exact(three_lanes(), unit_tokens(25, 2), false);
}

TEST(CircuitShuffle, AlsoAddFoldsOtherResultsIntoD) {
  // Another unit's word is 0 on the unit's opcodes and anything on the others.
  report_cost(with_other(), "shuffle also_add (1 word per lane)", 2);
  std::mt19937_64 rng(28);
  std::vector<Token> mine = unit_tokens(26, 1), others = silent_tokens(27);
  for (Token& t : others)
    if (std::find(kUnitOps.begin(), kUnitOps.end(), static_cast<Op>(std::countr_zero(t.opcode))) == kUnitOps.end())
      for (std::uint32_t& o : t.other) o = random_a(rng);
  expect_exact(with_other(), mine, false);
  expect_exact(with_other(), others, true);
}

TEST(CircuitShuffle, NamesTheInputOfTheWrongWidth) {
  weights::Circuit c;
  circuit::ShuffleIn in;
  in.enable = c.one();
  in.opcode = *c.input("t", "opcode", kOpCount);
  in.flags = *c.input("t", "flags", 6);
  in.lanes = *c.input("t", "lanes", kProtoLanes);
  for (int l = 0; l < kProtoLanes; ++l) {
    in.a[l] = *c.input("t", "a" + std::to_string(l), 32);
    in.b[l] = *c.input("t", "b" + std::to_string(l), 32);
  }
  in.b[3].pop_back();
  auto r = circuit::build_shuffle(c, in);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("lane 3 operand b has 31 bits, needs 32"), std::string::npos)
      << r.status().message();
  in.flags.pop_back();
  r = circuit::build_shuffle(c, in);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("flags has 5 bits, needs 6"), std::string::npos) << r.status().message();
  in.flags.push_back(in.flags[0]);
  in.b[3].push_back(in.b[3][0]);
  in.machine_lanes = 5;
  r = circuit::build_shuffle(c, in);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("machine_lanes 5 is outside 1..4"), std::string::npos) << r.status().message();
  in.machine_lanes = kProtoLanes;
  in.also_add[1] = {in.a[0], Word(in.a[1].begin(), in.a[1].begin() + 8)};
  r = circuit::build_shuffle(c, in);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("lane 1 also_add word 1 has 8 bits, needs 32"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace qgpu::simt
