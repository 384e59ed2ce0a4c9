// The multiplier unit (plugins/machine_simt/circuit/src/mul.h): mul and mad on
// 4 lanes, compiled to Qwen3.5-2B layer shapes and run token by token through
// the reference layer math in fp32 and bf16, against the ISA's own table
// (simt::eval); the unit's cost is printed for the docs.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "circuit_harness.h"
#include "isa.h"
#include "mul.h"
#include "qgpu/weights/compile.h"
#include "qgpu/weights/primitives.h"
#include "qgpu/weights/reference.h"

namespace qgpu::simt {
namespace {

using test::qwen2b_shapes;
using weights::DType;
using weights::Word;

// The unit with its operands as token inputs, or (staged) with the enable, the
// opcode bits and lane 1's b computed by a copy MLP first (what fits beside the
// unit in 2,048 channels), so that nothing may assume inputs come from the embedding.
struct Unit {
  weights::Circuit c{"simt.mul"};
  circuit::MulIn in;
  circuit::MulOut out;
  Word enable, is_mul, is_mad;
  std::array<Word, kProtoLanes> a, b, cc_in;
  weights::CompiledCircuit cc;
  bool ok = false;

  explicit Unit(bool staged, int parallel_lanes = 1, std::int64_t hidden = qwen2b_shapes().hidden_size,
                circuit::MadAddend addend = circuit::MadAddend::kRow, bool reuse_channels = true) {
    in.parallel_lanes = parallel_lanes;
    in.addend = addend;
    auto input = [&](const std::string& name, int width) {
      auto w = c.input("test", name, width);
      EXPECT_TRUE(w.has_value()) << w.status().to_string();
      return w ? *w : Word{};
    };
    auto stage = [&](const std::string& name, const Word& w) {
      if (!staged || name.starts_with("lane0") || (name.starts_with("lane") && name != "lane1.b")) return w;
      auto s = weights::copy(c, "test", name + ".staged", w);
      EXPECT_TRUE(s.has_value()) << s.status().to_string();
      return s ? *s : Word{};
    };
    enable = input("enable", 1);
    is_mul = input("is_mul", 1);
    is_mad = input("is_mad", 1);
    in.enable = stage("enable", enable)[0];
    in.is_mul = stage("is_mul", is_mul)[0];
    in.is_mad = stage("is_mad", is_mad)[0];
    for (int l = 0; l < kProtoLanes; ++l) {
      const std::string p = std::string("lane").append(std::to_string(l)).append(".");
      a[l] = input(p + "a", 32);
      b[l] = input(p + "b", 32);
      cc_in[l] = input(p + "c", 32);
      in.a[l] = stage(p + "a", a[l]);
      in.b[l] = stage(p + "b", b[l]);
      in.c[l] = stage(p + "c", cc_in[l]);
    }
    auto o = circuit::build_mul(c, in);
    EXPECT_TRUE(o.has_value()) << o.status().to_string();
    if (!o) return;
    out = std::move(*o);
    weights::Target t;
    t.shapes = qwen2b_shapes();
    t.shapes.hidden_size = hidden;
    t.reuse_channels = reuse_channels;
    auto r = weights::compile(c, t);
    if (!r) {
      error = r.status().message();
      return;
    }
    cc = std::move(*r);
    ok = true;
  }
  std::string error;  // the compile's, if it failed
};

const Unit& unit() {
  static const Unit* u = new Unit(false);
  return *u;
}

enum class Opc { kNone, kMul, kMad };

struct Case {
  bool enable = true;
  Opc op = Opc::kMul;
  std::array<std::uint32_t, kProtoLanes> a{}, b{}, c{};
};

std::uint32_t expected(const Case& k, int l) {
  if (!k.enable || k.op == Opc::kNone) return 0;
  return eval(k.op == Opc::kMul ? Op::kMul : Op::kMad, k.a[l], k.b[l], k.c[l]);
}

const std::vector<std::uint32_t> kEdges = {0,           1,           2,           3,           0xffffffffu, 0xfffffffeu,
                                           0x80000000u, 0x7fffffffu, 0x80000001u, 0x10000u,    0xffffu,     0x10001u,
                                           0x55555555u, 0xaaaaaaaau, 0xdeadbeefu, 0x10u,       0x100u,      0x8000u,
                                           0x20000u,    0x1000000u,  0x40000000u, 0xffff0000u, 0x0000fffeu};

std::uint32_t random_operand(std::mt19937_64& rng) {
  switch (rng() % 8) {
    case 0:
    case 1: return kEdges[rng() % kEdges.size()];
    case 2: return static_cast<std::uint32_t>(rng() % 256);
    case 3: return static_cast<std::uint32_t>(rng() % 65536);
    case 4: return 0u - static_cast<std::uint32_t>(rng() % 65536);  // small negatives
    case 5: return std::uint32_t{1} << (rng() % 32);
    default: return static_cast<std::uint32_t>(rng());
  }
}

// `n` random cases per opcode (mul, mad) plus every pair of edge values as (a, b),
// 4 lanes per token with different operands in every lane.
std::vector<Case> operand_cases(int n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Case> cases;
  for (Opc op : {Opc::kMul, Opc::kMad}) {
    for (int i = 0; i < n; ++i) {
      Case k;
      k.op = op;
      for (int l = 0; l < kProtoLanes; ++l) {
        k.a[l] = random_operand(rng);
        k.b[l] = random_operand(rng);
        k.c[l] = random_operand(rng);
      }
      cases.push_back(k);
    }
    Case k;
    k.op = op;
    int l = 0;
    for (std::size_t i = 0; i < kEdges.size(); ++i)
      for (std::size_t j = 0; j < kEdges.size(); ++j) {
        k.a[l] = kEdges[i];
        k.b[l] = kEdges[j];
        k.c[l] = kEdges[(i + 2 * j + 5) % kEdges.size()];
        if (++l == kProtoLanes) {
          cases.push_back(k);
          l = 0;
        }
      }
  }
  return cases;
}

struct Stats {
  int tokens = 0, checked = 0, wrong = 0, inexact = 0, leaked = 0;
  double mlp_min = std::numeric_limits<double>::infinity();
};

// Runs the cases in order; checks d of every lane and, on disabled tokens, that
// every field of the unit is still exactly 0.
Stats run(const Unit& u, DType dt, const std::vector<Case>& cases) {
  Stats s;
  weights::ReferenceModel m(u.cc.layers, u.cc.target.shapes, dt);
  const std::string dn(weights::dtype_name(dt));
  for (const Case& k : cases) {
    test::Inputs in = {
        {u.enable, k.enable ? 1 : 0}, {u.is_mul, k.op == Opc::kMul ? 1 : 0}, {u.is_mad, k.op == Opc::kMad ? 1 : 0}};
    for (int l = 0; l < kProtoLanes; ++l) {
      in.emplace_back(u.a[l], k.a[l]);
      in.emplace_back(u.b[l], k.b[l]);
      in.emplace_back(u.cc_in[l], k.c[l]);
    }
    const std::vector<float> y = test::run_token(m, u.c, u.cc, in);
    ++s.tokens;
    for (int l = 0; l < kProtoLanes; ++l) {
      bool exact = true;
      const std::uint64_t got = weights::read_word(u.cc.allocation, y, u.out.d[l], &exact);
      const std::uint32_t want = expected(k, l);
      ++s.checked;
      if (!exact) ++s.inexact;
      if (got != want && ++s.wrong <= 10)
        ADD_FAILURE() << dn << (k.enable ? "" : " disabled") << " op " << static_cast<int>(k.op) << " lane " << l
                      << ": a=0x" << std::hex << k.a[l] << " b=0x" << k.b[l] << " c=0x" << k.c[l] << " gives 0x" << got
                      << ", the ISA says 0x" << want;
    }
    if (!k.enable)
      for (std::size_t f = 0; f < u.c.fields().size(); ++f) {
        const weights::Field& field = u.c.fields()[f];
        if (field.kind != weights::FieldKind::kComputed || field.owner != u.in.owner) continue;
        Word w;
        for (int i = 0; i < field.width; ++i) w.push_back(weights::Bit{static_cast<int>(f), i, false});
        bool exact = true;
        if (weights::read_word(u.cc.allocation, y, w, &exact) != 0 || !exact) {
          if (++s.leaked <= 5) ADD_FAILURE() << dn << ": " << field.full_name() << " is not 0 on a disabled token";
        }
      }
  }
  for (const weights::LayerMargin& lm : m.margins()) s.mlp_min = std::min(s.mlp_min, lm.mlp_min);
  std::printf("[ %s ] %d tokens, %d lane results checked, %d wrong, %d inexact, %d leaks; smallest MLP margin %g\n",
              dn.c_str(), s.tokens, s.checked, s.wrong, s.inexact, s.leaked, s.mlp_min);
  return s;
}

void expect_clean(const Stats& s, DType dt) {
  EXPECT_EQ(s.wrong, 0) << weights::dtype_name(dt);
  EXPECT_EQ(s.inexact, 0) << weights::dtype_name(dt);
  EXPECT_EQ(s.leaked, 0) << weights::dtype_name(dt);
  EXPECT_GT(s.checked, 0);
  EXPECT_GE(s.mlp_min, 88.73) << "an MLP switch is not saturated";
}

// Dual-rail bits of computed fields alive after each layer's MLP: a slot lives
// from its first writer to its last reader; fields nothing reads (the results)
// stay live to the end.
struct Live {
  int peak = 0, peak_layer = -1;
  std::vector<int> after;
};

Live live_bits(const Unit& u) {
  const auto& fields = u.c.fields();
  const auto& ops = u.c.ops();
  auto root = [&](int f) { return fields[f].alias_of >= 0 ? fields[f].alias_of : f; };
  std::vector<int> first(fields.size(), std::numeric_limits<int>::max()), last(fields.size(), -1);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const int layer = u.cc.schedule.op_layer[i];
    for (const weights::Bit& b : ops[i].writes) first[root(b.field)] = std::min(first[root(b.field)], layer);
    for (const weights::Bit& b : ops[i].reads) last[root(b.field)] = std::max(last[root(b.field)], layer);
  }
  Live live;
  for (int layer = 0; layer < u.cc.schedule.num_layers; ++layer) {
    int n = 0;
    for (std::size_t f = 0; f < fields.size(); ++f)
      if (fields[f].kind == weights::FieldKind::kComputed && fields[f].alias_of < 0 && first[f] <= layer &&
          (last[f] > layer || last[f] < 0))
        n += fields[f].width;
    live.after.push_back(n);
    if (n > live.peak) live.peak = n, live.peak_layer = layer;
  }
  return live;
}

struct Cost {
  std::int64_t heads = 0, max_neurons = 0;
  Live live;
};

Cost report(const Unit& u, const std::string& what) {
  Cost cost;
  const auto& use = u.cc.schedule.use;
  std::int64_t& heads = cost.heads;
  std::int64_t& max_neurons = cost.max_neurons;
  std::string per_layer;
  for (const weights::LayerUse& lu : use) {
    heads += lu.key_heads;
    max_neurons = std::max(max_neurons, lu.mlp_neurons);
    per_layer.append(1, ' ').append(std::to_string(lu.mlp_neurons));
  }
  int input_bits = 0;
  for (const weights::Field& f : u.c.fields())
    if (f.kind == weights::FieldKind::kInput) input_bits += f.width;
  const Live& live = cost.live = live_bits(u);
  std::string after;
  for (int n : live.after) after.append(1, ' ').append(std::to_string(n));
  std::printf(
      "%s: %d layers, %lld Gated DeltaNet heads, %lld MLP neurons (per layer:%s; most %lld of %lld)\n"
      "residual: %d channels used, %d without the test's %d input bits; computed bits live after each layer:%s\n"
      "  (peak %d bits after layer %d)\n",
      what.c_str(), u.cc.schedule.num_layers, static_cast<long long>(heads),
      static_cast<long long>(u.cc.total_neurons()), per_layer.c_str(), static_cast<long long>(max_neurons),
      static_cast<long long>(qwen2b_shapes().intermediate_size), u.cc.allocation.channels_used,
      u.cc.allocation.channels_used - input_bits, input_bits, after.c_str(), live.peak, live.peak_layer);
  for (std::size_t i = 0; i < u.c.ops().size(); ++i)
    if (u.c.ops()[i].is_mlp)
      std::printf("  layer %d: %-16s %lld neurons\n", u.cc.schedule.op_layer[i], u.c.ops()[i].name.c_str(),
                  static_cast<long long>(weights::unique_neuron_count(u.c.ops()[i].mlp)));
  return cost;
}

TEST(CircuitMul, CompilesToSevenQwen2bLayers) {
  const Unit& u = unit();
  ASSERT_TRUE(u.ok) << u.error;
  const Cost cost = report(u, "mul, 4 lanes one layer apart");
  EXPECT_EQ(u.cc.schedule.num_layers, 7);
  EXPECT_EQ(cost.heads, 0);
  EXPECT_LE(cost.max_neurons, qwen2b_shapes().intermediate_size);
  EXPECT_LE(cost.live.peak, 450);
}

// mad's c read by a mad-only copy of the window neurons instead of a 17th row.
TEST(CircuitMul, AddendInTheWindowsTradesNeuronsForChannels) {
  const Unit u(false, 1, qwen2b_shapes().hidden_size, circuit::MadAddend::kWindows);
  ASSERT_TRUE(u.ok) << u.error;
  const Cost cost = report(u, "mul, c in the windows");
  EXPECT_EQ(u.cc.schedule.num_layers, 7);
  EXPECT_LE(cost.max_neurons, qwen2b_shapes().intermediate_size);
  EXPECT_LE(cost.live.peak, 400);
  std::vector<Case> cases = operand_cases(160, 19);
  for (int i = 0; i < 24; ++i)
    cases.push_back(Case{i % 2 == 0, i % 4 < 2 ? Opc::kNone : Opc::kMad, {7, 8, 9, 10}, {3, 5, 7, 11}, {1, 2, 3, 4}});
  for (DType dt : {DType::kF32, DType::kBF16}) expect_clean(run(u, dt, cases), dt);
}

// Fewer layers for more channels: 2 lanes side by side take 6 layers (lane 3's rows
// do not fit beside two lanes' windows in 6,144 neurons), 4 take 5 (nor do four
// lanes' rows); both fit the Qwen3.5-2B residual beside their operands (one channel
// per bit): 2 lanes with a plain allocation, 4 with channel reuse (plain is 13 over).
TEST(CircuitMul, ParallelLanesTradeChannelsForLayers) {
  for (const auto& [parallel, layers] : {std::pair{2, 6}, std::pair{4, 5}}) {
    const bool reuse = parallel == 4;
    if (reuse) {
      const Unit plain(false, parallel, qwen2b_shapes().hidden_size, circuit::MadAddend::kRow, false);
      ASSERT_FALSE(plain.ok);
      std::printf("4 lanes side by side, plain allocation at hidden 2048: %s\n", plain.error.c_str());
      EXPECT_NE(plain.error.find("residual"), std::string::npos) << plain.error;
    }
    const Unit u(false, parallel, qwen2b_shapes().hidden_size, circuit::MadAddend::kRow, reuse);
    ASSERT_TRUE(u.ok) << u.error;
    report(u, std::to_string(parallel) + " lanes side by side (hidden 2048" + (reuse ? ", channel reuse)" : ")"));
    EXPECT_EQ(u.cc.schedule.num_layers, layers);
    const std::vector<Case> cases = operand_cases(16, 17 + parallel);
    for (DType dt : {DType::kF32, DType::kBF16}) expect_clean(run(u, dt, cases), dt);
  }
}

TEST(CircuitMul, MatchesIsaOnRandomAndEdgeOperands) {
  const Unit& u = unit();
  ASSERT_TRUE(u.ok) << u.error;
  const std::vector<Case> cases = operand_cases(320, 11);
  for (DType dt : {DType::kF32, DType::kBF16}) expect_clean(run(u, dt, cases), dt);
}

// enable = 0 (with any opcode bit) leaves every computed field at exactly 0; enable = 1
// without mul/mad gives d = 0; enabled tokens in between still compute right.
TEST(CircuitMul, DisabledOrOtherOpcodeWritesNothing) {
  const Unit& u = unit();
  ASSERT_TRUE(u.ok) << u.error;
  std::mt19937_64 rng(12);
  std::vector<Case> cases;
  for (int i = 0; i < 96; ++i) {
    Case k;
    k.enable = i % 3 != 0;
    k.op = k.enable ? (i % 2 ? Opc::kNone : Opc::kMad) : static_cast<Opc>(rng() % 3);
    for (int l = 0; l < kProtoLanes; ++l) {
      k.a[l] = random_operand(rng) | 1;  // nonzero products, so a leak would show
      k.b[l] = random_operand(rng) | 1;
      k.c[l] = random_operand(rng);
    }
    cases.push_back(k);
  }
  for (DType dt : {DType::kF32, DType::kBF16}) expect_clean(run(u, dt, cases), dt);
}

TEST(CircuitMul, OperandsComputedInEarlierLayers) {
  const Unit u(true);
  ASSERT_TRUE(u.ok) << u.error;
  std::printf("after a copy layer: %d layers\n", u.cc.schedule.num_layers);
  EXPECT_EQ(u.cc.schedule.num_layers, 8);
  std::vector<Case> cases = operand_cases(40, 13);
  cases.push_back(Case{false, Opc::kMad, {1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}});
  for (DType dt : {DType::kF32, DType::kBF16}) expect_clean(run(u, dt, cases), dt);
}

TEST(CircuitMul, NamesAnOperandOfTheWrongWidth) {
  weights::Circuit c;
  circuit::MulIn in;
  in.enable = (*c.input("t", "en", 1))[0];
  in.is_mul = (*c.input("t", "mul", 1))[0];
  in.is_mad = (*c.input("t", "mad", 1))[0];
  for (int l = 0; l < kProtoLanes; ++l) {
    in.a[l] = *c.input("t", std::string("a").append(std::to_string(l)), 32);
    in.b[l] = *c.input("t", std::string("b").append(std::to_string(l)), l == 2 ? 31 : 32);
    in.c[l] = *c.input("t", std::string("c").append(std::to_string(l)), 32);
  }
  auto r = circuit::build_mul(c, in);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("lane 2 operand b has 31 bits, the multiplier takes 32"), std::string::npos)
      << r.status().message();
  EXPECT_FALSE(c.enable().has_value()) << "the enable guard must be popped on errors too";
  in.b[2] = *c.input("t", "b2.full", 32);
  in.parallel_lanes = 5;
  auto p = circuit::build_mul(c, in);
  ASSERT_FALSE(p.has_value());
  EXPECT_NE(p.status().message().find("parallel_lanes 5 outside 1..4"), std::string::npos) << p.status().message();
}

}  // namespace
}  // namespace qgpu::simt
