// Every MLP primitive compiled into real Qwen3.5-2B-shaped layers and run
// through the reference layer math in fp32 and bf16, against plain integer
// references on exhaustive or large random inputs.
#include <bit>
#include <cstdio>
#include <functional>

#include "harness.h"

namespace qgpu::weights {
namespace {

using testing::kBothDtypes;
using testing::must;
using testing::operand;

constexpr int kLanes = 4;
constexpr int kSets = 10000;

struct Lanes {
  std::vector<Word> a, b;
};

Lanes lane_inputs(Circuit& c, bool with_b = true) {
  Lanes l;
  for (int i = 0; i < kLanes; ++i) {
    l.a.push_back(must(c.input("lane" + std::to_string(i), "a", 32)));
    l.b.push_back(with_b ? must(c.input("lane" + std::to_string(i), "b", 32)) : Word(32, c.zero()));
  }
  return l;
}

// Runs `sets` random operand sets through the compiled circuit in both dtypes;
// `check` compares the outputs with the integer reference and returns the number of mismatches.
using Check = std::function<int(const std::vector<float>& y, const std::vector<std::uint32_t>& a,
                                const std::vector<std::uint32_t>& b, const std::vector<std::uint32_t>& extra)>;
void run_sets(const Circuit& c, const CompiledCircuit& cc, const Lanes& l, const std::vector<Word>& extra_words,
              int extra_bits, int sets, const Check& check) {
  for (DType dt : kBothDtypes) {
    ReferenceModel model(cc.layers, cc.target.shapes, dt);
    std::mt19937_64 rng(1234);
    int wrong = 0, inexact = 0;
    for (int s = 0; s < sets; ++s) {
      std::vector<std::pair<Word, std::uint64_t>> in;
      std::vector<std::uint32_t> a(kLanes), b(kLanes), e(extra_words.size());
      for (int i = 0; i < kLanes; ++i) {
        a[i] = operand(rng);
        b[i] = operand(rng);
        if (rng() % 16 == 0) b[i] = a[i];  // equal operands are rare otherwise
        in.push_back({l.a[i], a[i]});
        if (l.b[i][0].field != c.zero().field) in.push_back({l.b[i], b[i]});
      }
      for (std::size_t k = 0; k < extra_words.size(); ++k) {
        e[k] = static_cast<std::uint32_t>(rng() & ((1ULL << extra_bits) - 1));
        in.push_back({extra_words[k], e[k]});
      }
      std::vector<float> y = model.step(embed(c, cc.allocation, in));
      wrong += check(y, a, b, e);
      if (!testing::residual_exact(c, cc.allocation, y)) ++inexact;
    }
    EXPECT_EQ(wrong, 0) << dtype_name(dt);
    EXPECT_EQ(inexact, 0) << dtype_name(dt) << ": tokens whose residual is not exactly dual-rail";
    // Every switch stayed at least one integer step (K = 128) from its threshold.
    for (std::size_t l = 0; l < cc.layers.size(); ++l)
      for (std::int64_t n = 0; n < cc.layers[l].mlp.used_neurons(); ++n)
        EXPECT_GE(model.margins()[l].mlp_neuron_min[n], kGain) << "layer " << l << " neuron " << n;
    std::printf("[ %s ] %d sets, %d wrong, %d inexact residuals; %s", std::string(dtype_name(dt)).c_str(), sets, wrong,
                inexact, model.margin_report().c_str());
  }
}

TEST(Primitives, Add32FourLanesInTwoLayers) {
  Circuit c("add4");
  Lanes l = lane_inputs(c);
  std::vector<AddResult> r;
  for (int i = 0; i < kLanes; ++i)
    r.push_back(must(add(c, "lane" + std::to_string(i), "sum", l.a[i], l.b[i], c.zero())));
  CompiledCircuit cc = must(compile(c, testing::qwen2b_target()));
  EXPECT_LE(cc.schedule.num_layers, 2);  // ARCHITECTURE §4: 2 MLP layers, ~1,700 neurons
  std::printf("4-lane 32-bit ADD: %d layers, MLP neurons per layer:", cc.schedule.num_layers);
  for (const auto& u : cc.schedule.use) std::printf(" %lld", static_cast<long long>(u.mlp_neurons));
  std::printf(" (total %lld)\n", static_cast<long long>(cc.total_neurons()));
  EXPECT_LT(cc.total_neurons(), 1800);
  run_sets(c, cc, l, {}, 0, kSets, [&](const auto& y, const auto& a, const auto& b, const auto&) {
    int bad = 0;
    for (int i = 0; i < kLanes; ++i) {
      std::uint64_t full = std::uint64_t{a[i]} + b[i];
      bad += read_word(cc.allocation, y, r[i].sum) != (full & 0xFFFFFFFF);
      bad += read_word(cc.allocation, y, {r[i].carry}) != (full >> 32);
    }
    return bad;
  });
}

TEST(Primitives, SubCompareEqualFourLanes) {
  Circuit c("cmp4");
  Lanes l = lane_inputs(c);
  std::vector<AddResult> d;
  std::vector<Bit> ltu, lts, eq;
  for (int i = 0; i < kLanes; ++i) {
    std::string o = "lane" + std::to_string(i);
    d.push_back(must(sub(c, o, "diff", l.a[i], l.b[i])));
    ltu.push_back(must(less_than(c, o, "ltu", l.a[i], l.b[i], false)));
    lts.push_back(must(less_than(c, o, "lts", l.a[i], l.b[i], true)));
    eq.push_back(must(equal(c, o, "eq", l.a[i], l.b[i])));
  }
  CompiledCircuit cc = must(compile(c, testing::qwen2b_target()));
  EXPECT_EQ(cc.schedule.num_layers, 2);
  run_sets(c, cc, l, {}, 0, kSets, [&](const auto& y, const auto& a, const auto& b, const auto&) {
    int bad = 0;
    for (int i = 0; i < kLanes; ++i) {
      bad += read_word(cc.allocation, y, d[i].sum) != static_cast<std::uint32_t>(a[i] - b[i]);
      bad += read_word(cc.allocation, y, {d[i].carry}) != (a[i] >= b[i] ? 1u : 0u);  // no borrow
      bad += read_word(cc.allocation, y, {ltu[i]}) != (a[i] < b[i] ? 1u : 0u);
      bad += read_word(cc.allocation, y, {lts[i]}) !=
             (static_cast<std::int32_t>(a[i]) < static_cast<std::int32_t>(b[i]) ? 1u : 0u);
      bad += read_word(cc.allocation, y, {eq[i]}) != (a[i] == b[i] ? 1u : 0u);
    }
    return bad;
  });
}

TEST(Primitives, ShiftsByAVariableAmountFourLanes) {
  Circuit c("shift4");
  Lanes l = lane_inputs(c, false);
  std::vector<Word> amt, shl, shr, sra;
  for (int i = 0; i < kLanes; ++i) {
    std::string o = "lane" + std::to_string(i);
    amt.push_back(must(c.input(o, "amount", 6)));  // 0..63: 32..63 clamp to 0 / the sign
    shl.push_back(must(shift(c, o, "shl", l.a[i], amt[i], Shift::kLeft)));
    shr.push_back(must(shift(c, o, "shr", l.a[i], amt[i], Shift::kRightLogical)));
    sra.push_back(must(shift(c, o, "sra", l.a[i], amt[i], Shift::kRightArithmetic)));
  }
  CompiledCircuit cc = must(compile(c, testing::qwen2b_target()));
  EXPECT_EQ(cc.schedule.num_layers, 2);
  run_sets(c, cc, l, amt, 6, kSets, [&](const auto& y, const auto& a, const auto&, const auto& e) {
    int bad = 0;
    for (int i = 0; i < kLanes; ++i) {
      std::uint32_t s = e[i];
      std::uint32_t want_l = s >= 32 ? 0 : a[i] << s, want_r = s >= 32 ? 0 : a[i] >> s;
      std::int32_t sa = static_cast<std::int32_t>(a[i]);
      std::uint32_t want_a = static_cast<std::uint32_t>(s >= 32 ? (sa < 0 ? -1 : 0) : sa >> s);
      bad += read_word(cc.allocation, y, shl[i]) != want_l;
      bad += read_word(cc.allocation, y, shr[i]) != want_r;
      bad += read_word(cc.allocation, y, sra[i]) != want_a;
    }
    return bad;
  });
}

TEST(Primitives, MultiplexersAndBitwiseFourLanes) {
  Circuit c("mux4");
  Lanes l = lane_inputs(c);
  std::vector<Word> sel, mb, m2, moh, sc;
  for (int i = 0; i < kLanes; ++i) {
    std::string o = "lane" + std::to_string(i);
    sel.push_back(must(c.input(o, "sel", 2)));
    Word na = ~l.a[i];
    mb.push_back(must(mux_binary(c, o, "mux_binary", sel[i], {l.a[i], l.b[i], na, ~l.b[i]})));
    m2.push_back(must(mux2(c, o, "mux2", sel[i][0], l.a[i], l.b[i])));
    moh.push_back(must(mux_onehot(c, o, "mux_onehot", {sel[i][0], !sel[i][0]}, {l.a[i], l.b[i]})));
    sc.push_back(must(scale_by_bit(c, o, "scaled", sel[i][1], l.a[i])));
  }
  CompiledCircuit cc = must(compile(c, testing::qwen2b_target()));
  EXPECT_EQ(cc.schedule.num_layers, 1);
  run_sets(c, cc, l, sel, 2, kSets, [&](const auto& y, const auto& a, const auto& b, const auto& e) {
    int bad = 0;
    for (int i = 0; i < kLanes; ++i) {
      std::uint32_t choices[4] = {a[i], b[i], ~a[i], ~b[i]};
      bad += read_word(cc.allocation, y, mb[i]) != choices[e[i]];
      bad += read_word(cc.allocation, y, m2[i]) != ((e[i] & 1) ? a[i] : b[i]);
      bad += read_word(cc.allocation, y, moh[i]) != ((e[i] & 1) ? a[i] : b[i]);
      bad += read_word(cc.allocation, y, sc[i]) != ((e[i] & 2) ? a[i] : 0u);
    }
    return bad;
  });
}

TEST(Primitives, BitwiseFourLanes) {
  Circuit c("bitwise4");
  Lanes l = lane_inputs(c);
  std::vector<Word> an, orr, xr, cp;
  for (int i = 0; i < kLanes; ++i) {
    std::string o = "lane" + std::to_string(i);
    an.push_back(must(bitwise(c, o, "and", Logic::kAnd, l.a[i], l.b[i])));
    orr.push_back(must(bitwise(c, o, "or", Logic::kOr, l.a[i], l.b[i])));
    xr.push_back(must(bitwise(c, o, "xor", Logic::kXor, l.a[i], l.b[i])));
    cp.push_back(must(copy(c, o, "copy", ~l.b[i])));
  }
  CompiledCircuit cc = must(compile(c, testing::qwen2b_target()));
  EXPECT_EQ(cc.schedule.num_layers, 1);
  run_sets(c, cc, l, {}, 0, kSets, [&](const auto& y, const auto& a, const auto& b, const auto&) {
    int bad = 0;
    for (int i = 0; i < kLanes; ++i) {
      bad += read_word(cc.allocation, y, an[i]) != (a[i] & b[i]);
      bad += read_word(cc.allocation, y, orr[i]) != (a[i] | b[i]);
      bad += read_word(cc.allocation, y, xr[i]) != (a[i] ^ b[i]);
      bad += read_word(cc.allocation, y, cp[i]) != static_cast<std::uint32_t>(~b[i]);
    }
    return bad;
  });
}

// Exhaustive: gates on all input combinations, and thresholds over a 9-bit sum at
// the edges of bf16's exact range (direct form up to max-t = 255, flipped beyond).
TEST(Primitives, GatesAndThresholdsExhaustive) {
  Circuit c("gates");
  Word in = must(c.input("t", "x", 9));
  Bit a = in[0], b = in[1];
  Bit g_and = must(and2(c, "t", "and", a, !b)), g_or = must(or2(c, "t", "or", !a, b)),
      g_xor = must(xor2(c, "t", "xor", a, b));
  std::vector<Term> sum;
  for (int j = 0; j < 9; ++j) sum.push_back(Term{in[j], std::ldexp(1.0, j)});
  const double ts[] = {-3, 0, 1, 128, 255, 256, 257, 384, 511, 512};
  std::vector<Bit> th;
  for (double t : ts) th.push_back(must(threshold(c, "t", "ge" + std::to_string(static_cast<int>(t)), sum, t)));
  CompiledCircuit cc = must(compile(c, testing::qwen2b_target()));
  for (DType dt : kBothDtypes) {
    ReferenceModel model(cc.layers, cc.target.shapes, dt);
    int bad = 0;
    for (std::uint32_t v = 0; v < 512; ++v) {
      auto y = model.step(embed(c, cc.allocation, {{in, v}}));
      ASSERT_TRUE(testing::residual_exact(c, cc.allocation, y)) << v;
      bool x0 = v & 1, x1 = (v >> 1) & 1;
      bad += read_word(cc.allocation, y, {g_and}) != (x0 && !x1);
      bad += read_word(cc.allocation, y, {g_or}) != (!x0 || x1);
      bad += read_word(cc.allocation, y, {g_xor}) != (x0 != x1);
      for (std::size_t k = 0; k < th.size(); ++k) bad += read_word(cc.allocation, y, {th[k]}) != (v >= ts[k]);
    }
    EXPECT_EQ(bad, 0) << dtype_name(dt);
  }
}

TEST(Primitives, ThresholdOutsideBf16RangeIsRejected) {
  Circuit c("wide");
  Word in = must(c.input("t", "x", 10));
  std::vector<Term> sum;
  for (int j = 0; j < 10; ++j) sum.push_back(Term{in[j], std::ldexp(1.0, j)});
  auto r = threshold(c, "t", "ge512", sum, 512);  // S in [0, 1023]: 511 above, 512 below
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("not exact in bf16"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("over by 256"), std::string::npos) << r.status().message();
  auto g = add(c, "t", "sum9", in, in, c.zero(), 9);
  ASSERT_FALSE(g.has_value());
  EXPECT_NE(g.status().message().find("at most 8 bits"), std::string::npos);
}

// Clearing and overwriting a slot, and the enable guard: under a guard the
// write happens only on tokens whose enable bit is 1 (a conditional register write).
TEST(Primitives, ClearOverwriteAndEnableGuard) {
  Circuit c("slots");
  Word a = must(c.input("r", "a", 32)), b = must(c.input("r", "b", 32));
  Word en = must(c.input("r", "en", 1));
  Word x = must(copy(c, "r", "x", a));         // layer 0: x = a
  Word y = must(copy(c, "r", "y_before", x));  // layer 1 reads x before the overwrite
  c.push_enable(en[0]);
  Word x2 = must(overwrite(c, "x_new", x, b));              // en ? b : a, in x's slot
  Word gm = must(mux2(c, "r", "guarded_mux", a[0], b, a));  // data on up: the gate carries -2^17·!en
  c.pop_enable();
  Word z = must(copy(c, "r", "z", x2));
  Word cl = must(clear(c, "z_cleared", z));
  CompiledCircuit cc = must(compile(c, testing::qwen2b_target()));
  for (DType dt : kBothDtypes) {
    ReferenceModel model(cc.layers, cc.target.shapes, dt);
    std::mt19937_64 rng(7);
    int bad = 0;
    for (int s = 0; s < 2000; ++s) {
      std::uint32_t va = operand(rng), vb = operand(rng), ve = rng() & 1;
      auto out = model.step(embed(c, cc.allocation, {{a, va}, {b, vb}, {en, ve}}));
      ASSERT_TRUE(testing::residual_exact(c, cc.allocation, out));
      bad += read_word(cc.allocation, out, y) != va;
      bad += read_word(cc.allocation, out, x2) != (ve ? vb : va);
      bad += read_word(cc.allocation, out, cl) != 0;
      bad += read_word(cc.allocation, out, gm) != (ve ? ((va & 1) ? vb : va) : 0u);
    }
    EXPECT_EQ(bad, 0) << dtype_name(dt);
  }
}

TEST(Primitives, OverwrittenSlotCannotBeReadAgain) {
  Circuit c("stale");
  Word a = must(c.input("r", "a", 4));
  Word x = must(copy(c, "r", "x", a));
  must(clear(c, "x2", x));
  auto r = copy(c, "r", "late", x);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("overwritten by r.x2"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace qgpu::weights

namespace qgpu::weights {
namespace {

// Neuron cost of each primitive on one 32-bit lane, after deduplication; the
// closed forms are the ones documented in primitives.h and docs/CIRCUITS.md.
TEST(Primitives, NeuronCosts) {
  struct Row {
    const char* name;
    std::function<void(Circuit&, const Word&, const Word&, const Word&)> build;
    long long expected;  // -1: printed only
  };
  const Row rows[] = {
      {"and (per 32 bits)", [](Circuit& c, auto& a, auto& b, auto&) { must(bitwise(c, "x", "y", Logic::kAnd, a, b)); },
       32},
      {"or", [](Circuit& c, auto& a, auto& b, auto&) { must(bitwise(c, "x", "y", Logic::kOr, a, b)); }, 33},
      {"xor", [](Circuit& c, auto& a, auto& b, auto&) { must(bitwise(c, "x", "y", Logic::kXor, a, b)); }, 64},
      {"copy", [](Circuit& c, auto& a, auto&, auto&) { must(copy(c, "x", "y", a)); }, 32},
      {"mux2", [](Circuit& c, auto& a, auto& b, auto& s) { must(mux2(c, "x", "y", s[0], a, b)); }, 64},
      {"mux_binary of 4",
       [](Circuit& c, auto& a, auto& b, auto& s) {
         must(mux_binary(c, "x", "y", {s[0], s[1]}, {a, b, ~a, ~b}));
       },
       128},
      {"clear", [](Circuit& c, auto& a, auto&, auto&) { must(clear(c, "y", must(copy(c, "x", "t", a)))); }, 64},
      {"overwrite", [](Circuit& c, auto& a, auto& b, auto&) { must(overwrite(c, "y", must(copy(c, "x", "t", a)), b)); },
       96},
      {"add", [](Circuit& c, auto& a, auto& b, auto&) { must(add(c, "x", "y", a, b, c.zero())); }, -1},
      {"sub", [](Circuit& c, auto& a, auto& b, auto&) { must(sub(c, "x", "y", a, b)); }, -1},
      {"equal", [](Circuit& c, auto& a, auto& b, auto&) { must(equal(c, "x", "y", a, b)); }, 4 * 3 + 2},
      {"less_than", [](Circuit& c, auto& a, auto& b, auto&) { must(less_than(c, "x", "y", a, b, true)); }, -1},
      {"shift left (5-bit amount)",
       [](Circuit& c, auto& a, auto&, auto& s) { must(shift(c, "x", "y", a, s, Shift::kLeft)); }, -1},
      {"shift right arithmetic",
       [](Circuit& c, auto& a, auto&, auto& s) { must(shift(c, "x", "y", a, s, Shift::kRightArithmetic)); }, -1},
  };
  for (const Row& r : rows) {
    Circuit c("cost");
    Word a = must(c.input("in", "a", 32)), b = must(c.input("in", "b", 32)), s = must(c.input("in", "s", 5));
    r.build(c, a, b, s);
    CompiledCircuit cc = must(compile(c, testing::qwen2b_target()));
    std::printf("%-28s %lld neurons in %d MLP layer(s):", r.name, static_cast<long long>(cc.total_neurons()),
                cc.schedule.num_layers);
    for (const auto& u : cc.schedule.use) std::printf(" %lld", static_cast<long long>(u.mlp_neurons));
    std::printf("\n");
    if (r.expected >= 0) {
      EXPECT_EQ(cc.total_neurons(), r.expected) << r.name;
    }
  }
}

}  // namespace
}  // namespace qgpu::weights
