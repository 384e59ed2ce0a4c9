// The ALU unit (plugins/machine_simt/circuit/src/alu.h) compiled to Qwen3.5-2B
// layer shapes and run token by token through the reference layer math in fp32
// and bf16: every ALU opcode on random and edge operands must give exactly
// simt::eval (the interpreter's own table); every other opcode, no opcode and
// enable = 0 must give 0, and enable = 0 must leave the residual untouched.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "alu.h"
#include "circuit_harness.h"
#include "isa.h"
#include "qgpu/weights/compile.h"
#include "qgpu/weights/reference.h"

namespace qgpu::simt {
namespace {

using test::qwen2b_shapes;
using weights::DType;
using weights::Word;
using Lanes = std::array<std::uint32_t, kProtoLanes>;

struct AluCompiled {
  weights::Circuit c{"simt.alu"};
  Word enable, opcode;
  std::array<Word, kProtoLanes> a, b, cc_;  // cc_: operand c (c is the circuit)
  circuit::AluOut out;
  weights::CompiledCircuit cc;
  int input_bits = 0;
  bool ok = false;
  AluCompiled() {
    auto in = [&](const std::string& name, int width) {
      auto w = c.input("test", name, width);
      EXPECT_TRUE(w.has_value()) << w.status().to_string();
      input_bits += width;
      return w ? *w : Word{};
    };
    enable = in("enable", 1);
    opcode = in("opcode", kOpCount);
    circuit::AluIn ai;
    ai.enable = enable[0];
    ai.opcode = opcode;
    for (int l = 0; l < kProtoLanes; ++l) {
      const std::string p = "lane" + std::to_string(l) + ".";
      a[l] = in(p + "a", 32);
      b[l] = in(p + "b", 32);
      cc_[l] = in(p + "c", 32);
      ai.lane[l] = {a[l], b[l], cc_[l]};
    }
    auto o = circuit::build_alu(c, ai);
    EXPECT_TRUE(o.has_value()) << o.status().to_string();
    if (!o) return;
    out = std::move(*o);
    ok = test::compile_to(c, cc);
  }
};

const AluCompiled& compiled() {
  static const AluCompiled* k = new AluCompiled();
  return *k;
}

// One token: an opcode word (normally one-hot), the enable bit and every lane's operands.
struct Token {
  std::uint64_t opcode = 0;
  bool enable = true;
  Lanes a{}, b{}, c{};
};

std::uint64_t one_hot(Op op) {
  return std::uint64_t{1} << static_cast<int>(op);
}

bool is_alu(Op op) {
  return op_info(op).unit == kUnitAlu;
}

// What d must be: eval() for an enabled ALU opcode, 0 otherwise.
std::uint32_t expected(const Token& t, int lane) {
  if (!t.enable) return 0;
  for (int i = 0; i < kOpCount; ++i)
    if (t.opcode == one_hot(static_cast<Op>(i)))
      return is_alu(static_cast<Op>(i)) ? eval(static_cast<Op>(i), t.a[lane], t.b[lane], t.c[lane]) : 0;
  return 0;
}

const std::vector<std::uint32_t> kEdges = {0u,          1u,          2u,          0x7fffffffu,
                                           0x80000000u, 0x80000001u, 0xfffffffeu, 0xffffffffu,
                                           0x000000ffu, 0x00000100u, 0x12345678u, 0xedcba987u};

// Operand pairs that stress compares and carries: equal, off by one, one bit apart, edges, random.
std::pair<std::uint32_t, std::uint32_t> operand_pair(std::mt19937_64& rng) {
  auto r32 = [&] { return static_cast<std::uint32_t>(rng()); };
  auto edge = [&] { return kEdges[rng() % kEdges.size()]; };
  const std::uint32_t a = rng() % 4 == 0 ? edge() : r32();
  switch (rng() % 9) {
    case 0: return {a, a};
    case 1: return {a, a + 1};
    case 2: return {a, a - 1};
    case 3: return {a, a ^ (1u << (rng() % 32))};
    case 4: return {a, edge()};
    case 5: return {a, a ^ (0xffu << (8 * (rng() % 4)))};
    case 6: return {a, ~a + static_cast<std::uint32_t>(rng() % 3)};  // a + b carries through every bit
    default: return {a, r32()};
  }
}

std::uint32_t shift_amount(std::mt19937_64& rng) {
  static const std::uint32_t kAmounts[] = {0, 1, 31, 32, 33, 255, 0x80000000u, 0xffffffffu, 0x100u, 0x20u, 0x21u};
  switch (rng() % 4) {
    case 0: return kAmounts[rng() % std::size(kAmounts)];
    case 1: return static_cast<std::uint32_t>(rng());
    default: return static_cast<std::uint32_t>(rng() % 40);
  }
}

std::uint32_t sel_condition(std::mt19937_64& rng) {
  switch (rng() % 4) {
    case 0: return 0;
    case 1: return 1u << (rng() % 32);
    case 2: return kEdges[rng() % kEdges.size()];
    default: return static_cast<std::uint32_t>(rng());
  }
}

bool is_shift(Op op) {
  return op == Op::kShl || op == Op::kShr || op == Op::kSra;
}

// Per ALU opcode: 128 random tokens (512 operand sets), every pair of kEdges (36 tokens),
// and for shifts the listed amounts plus all 32 amounts for one random a.
std::vector<Token> alu_tokens(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Token> v;
  for (int i = 0; i < kOpCount; ++i) {
    const Op op = static_cast<Op>(i);
    if (!is_alu(op)) continue;
    for (int n = 0; n < 128; ++n) {
      Token t;
      t.opcode = one_hot(op);
      for (int l = 0; l < kProtoLanes; ++l) {
        std::tie(t.a[l], t.b[l]) = operand_pair(rng);
        if (is_shift(op)) t.b[l] = shift_amount(rng);
        t.c[l] = sel_condition(rng);
      }
      v.push_back(t);
    }
    std::vector<std::pair<std::uint32_t, std::uint32_t>> pairs;
    for (std::uint32_t x : kEdges)
      for (std::uint32_t y : kEdges) pairs.emplace_back(x, y);
    if (is_shift(op)) {
      const std::uint32_t a = static_cast<std::uint32_t>(rng()) | 0x80000001u;  // both ends set
      for (std::uint32_t s = 0; s < 32; ++s) pairs.emplace_back(a, s);
      for (std::uint32_t s : {0u, 1u, 31u, 32u, 33u, 255u, 0x80000000u, 0xffffffffu})
        for (std::uint32_t x : {0x80000000u, 0xffffffffu, 0x7fffffffu, 1u}) pairs.emplace_back(x, s);
    }
    for (std::size_t p = 0; p < pairs.size(); p += kProtoLanes) {
      Token t;
      t.opcode = one_hot(op);
      for (int l = 0; l < kProtoLanes; ++l) {
        const auto& [x, y] = pairs[(p + l) % pairs.size()];
        t.a[l] = x;
        t.b[l] = y;
        t.c[l] = l % 2 ? 0u : kEdges[(p / kProtoLanes + l) % kEdges.size()];
      }
      v.push_back(t);
    }
  }
  return v;
}

// Non-ALU opcodes, no opcode at all, and enabled = 0 with ALU opcodes: d must stay 0.
std::vector<Token> silent_tokens(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Token> v;
  auto random_lanes = [&](Token& t) {
    for (int l = 0; l < kProtoLanes; ++l) {
      std::tie(t.a[l], t.b[l]) = operand_pair(rng);
      t.c[l] = sel_condition(rng);
    }
  };
  for (int i = 0; i < kOpCount; ++i) {
    const Op op = static_cast<Op>(i);
    for (int n = 0; n < (is_alu(op) ? 2 : 8); ++n) {
      Token t;
      t.opcode = one_hot(op);
      t.enable = !is_alu(op);  // ALU opcodes: the enable is what must silence them
      random_lanes(t);
      v.push_back(t);
    }
  }
  for (int n = 0; n < 16; ++n) {
    Token t;
    t.opcode = 0;
    t.enable = n % 2 == 0;
    random_lanes(t);
    v.push_back(t);
  }
  return v;
}

struct RunStats {
  int checked = 0, wrong = 0, inexact = 0, disturbed = 0;
  std::array<int, kOpCount + 1> sets{};  // operand sets per opcode (last: no opcode)
  double mlp_min = std::numeric_limits<double>::infinity();
};

RunStats run(DType dt, const std::vector<Token>& tokens) {
  const AluCompiled& k = compiled();
  weights::ReferenceModel m(k.cc.layers, k.cc.target.shapes, dt);
  RunStats s;
  const std::string dn(weights::dtype_name(dt));
  for (const Token& t : tokens) {
    test::Inputs in = {{k.enable, t.enable ? 1u : 0u}, {k.opcode, t.opcode}};
    for (int l = 0; l < kProtoLanes; ++l) {
      in.emplace_back(k.a[l], t.a[l]);
      in.emplace_back(k.b[l], t.b[l]);
      in.emplace_back(k.cc_[l], t.c[l]);
    }
    const std::vector<float> x = weights::embed(k.c, k.cc.allocation, in);
    const std::vector<float> y = m.step(x);
    // enable = 0: nothing at all may change.
    if (!t.enable && y != x && ++s.disturbed <= 5)
      ADD_FAILURE() << dn << ": the residual changed on a token with enable = 0 (opcode word 0x" << std::hex << t.opcode
                    << ")";
    int op = kOpCount;
    for (int i = 0; i < kOpCount; ++i)
      if (t.opcode == one_hot(static_cast<Op>(i))) op = i;
    for (int l = 0; l < kProtoLanes; ++l) {
      bool exact = true;
      const std::uint64_t got = weights::read_word(k.cc.allocation, y, k.out.d[l], &exact);
      const std::uint32_t want = expected(t, l);
      ++s.checked;
      ++s.sets[static_cast<std::size_t>(op)];
      if (!exact) ++s.inexact;
      if (got != want && ++s.wrong <= 20)
        ADD_FAILURE() << dn << " " << (op < kOpCount ? op_info(static_cast<Op>(op)).mnemonic : "<no opcode>")
                      << (t.enable ? "" : " (enable 0)") << " lane " << l << ": a=0x" << std::hex << t.a[l] << " b=0x"
                      << t.b[l] << " c=0x" << t.c[l] << " gives 0x" << got << ", expected 0x" << want;
    }
  }
  for (const weights::LayerMargin& lm : m.margins()) s.mlp_min = std::min(s.mlp_min, lm.mlp_min);
  std::printf("[ %s ] %d results checked, %d wrong, %d inexact, %d disturbed; smallest MLP switch margin %g\n",
              dn.c_str(), s.checked, s.wrong, s.inexact, s.disturbed, s.mlp_min);
  return s;
}

TEST(CircuitAlu, CompilesToTwoQwenLayers) {
  const AluCompiled& k = compiled();
  ASSERT_TRUE(k.ok);
  std::int64_t heads = 0;
  for (int l = 0; l < k.cc.schedule.num_layers; ++l) {
    heads += k.cc.schedule.use[l].key_heads;
    std::printf("layer %d: %lld key heads, %lld MLP neurons\n", l,
                static_cast<long long>(k.cc.schedule.use[l].key_heads),
                static_cast<long long>(k.cc.schedule.use[l].mlp_neurons));
  }
  const int unit_channels = k.cc.allocation.channels_used - k.input_bits;
  std::printf(
      "alu (4 lanes): %d layers, %lld heads, %lld MLP neurons, %d residual channels (%d without the test's %d "
      "input bits: results, flags, constants and norm pads)\n",
      k.cc.schedule.num_layers, static_cast<long long>(heads), static_cast<long long>(k.cc.total_neurons()),
      k.cc.allocation.channels_used, unit_channels, k.input_bits);
  EXPECT_EQ(k.cc.schedule.num_layers, 2);
  EXPECT_EQ(heads, 0);
  for (int l = 0; l < k.cc.schedule.num_layers; ++l)
    EXPECT_LE(k.cc.schedule.use[l].mlp_neurons, k.cc.target.shapes.intermediate_size);
}

TEST(CircuitAlu, EveryAluOpcodeMatchesEval) {
  ASSERT_TRUE(compiled().ok);
  const std::vector<Token> tokens = alu_tokens(11);
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const RunStats s = run(dt, tokens);
    EXPECT_EQ(s.wrong, 0) << weights::dtype_name(dt);
    EXPECT_EQ(s.inexact, 0) << weights::dtype_name(dt);
    int fewest = std::numeric_limits<int>::max();
    for (int i = 0; i < kOpCount; ++i) {
      if (!is_alu(static_cast<Op>(i))) continue;
      fewest = std::min(fewest, s.sets[static_cast<std::size_t>(i)]);
      EXPECT_GE(s.sets[static_cast<std::size_t>(i)], 200) << op_info(static_cast<Op>(i)).mnemonic;
    }
    std::printf("[ %s ] at least %d operand sets for every ALU opcode\n", std::string(weights::dtype_name(dt)).c_str(),
                fewest);
    EXPECT_GE(s.mlp_min, 88.73) << "an MLP switch is not saturated";
  }
}

TEST(CircuitAlu, OtherOpcodesNoOpcodeAndDisabledGiveZero) {
  ASSERT_TRUE(compiled().ok);
  const std::vector<Token> tokens = silent_tokens(12);
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const RunStats s = run(dt, tokens);
    EXPECT_EQ(s.wrong, 0) << weights::dtype_name(dt);
    EXPECT_EQ(s.inexact, 0) << weights::dtype_name(dt);
    EXPECT_EQ(s.disturbed, 0) << weights::dtype_name(dt);
    EXPECT_GT(s.sets[kOpCount], 0);
  }
}

TEST(CircuitAlu, NamesTheInputOfTheWrongWidth) {
  weights::Circuit c;
  circuit::AluIn in;
  in.opcode = *c.input("t", "opcode", kOpCount);
  in.enable = c.one();
  for (int l = 0; l < kProtoLanes; ++l) {
    const std::string p = "l" + std::to_string(l);
    in.lane[l] = {*c.input("t", p + "a", 32), *c.input("t", p + "b", 32), *c.input("t", p + "c", 32)};
  }
  in.lane[2].b.pop_back();
  auto r = circuit::build_alu(c, in);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("lane 2 operand b has 31 bits, needs 32"), std::string::npos)
      << r.status().message();
  in.opcode.pop_back();
  r = circuit::build_alu(c, in);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("opcode has " + std::to_string(kOpCount - 1) + " bits, needs " +
                                      std::to_string(kOpCount)),
            std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace qgpu::simt
