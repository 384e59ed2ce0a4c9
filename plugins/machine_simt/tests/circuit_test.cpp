// The circuit's fetch/decode stage (plugins/machine_simt/circuit): ROM tokens
// write lowered programs and random rows into the Gated DeltaNet ROM through
// the reference layer math (fp32 and bf16); EXEC tokens for every block must
// decode every slot exactly as isa.h's decode() does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "fetch_decode.h"
#include "ir_builder.h"
#include "isa.h"
#include "lower.h"
#include "protocol.h"
#include "qgpu/weights/compile.h"
#include "qgpu/weights/reference.h"

namespace qgpu::simt {
namespace {

using circuit::FetchDecode;
using sdk::CmpPred;
using sdk::Opcode;
using test::IrBuilder;
using weights::DType;
using ValueId = sdk::ValueId;

constexpr int kSlots = 5;  // the default block_instructions (4) + the terminator

sdk::LayerShapes qwen2b_shapes() {  // Qwen3.5-2B (QWEN35.md)
  sdk::LayerShapes s;
  s.hidden_size = 2048;
  s.intermediate_size = 6144;
  s.linear_num_key_heads = 16;
  s.linear_num_value_heads = 16;
  s.linear_key_head_dim = 128;
  s.linear_value_head_dim = 128;
  s.linear_conv_kernel = 4;
  s.rms_norm_eps = 1e-6;
  return s;
}

struct Compiled {
  weights::Circuit c{"simt.fetch_decode"};
  FetchDecode fd;
  weights::CompiledCircuit cc;
  bool ok = false;
  Compiled() {
    auto f = circuit::build_fetch_decode(c, kSlots);
    EXPECT_TRUE(f.has_value()) << f.status().to_string();
    if (!f) return;
    fd = std::move(*f);
    weights::Target t;
    t.shapes = qwen2b_shapes();
    auto r = weights::compile(c, t);
    EXPECT_TRUE(r.has_value()) << r.status().to_string();
    if (!r) return;
    cc = std::move(*r);
    ok = true;
  }
};

const Compiled& compiled() {
  static const Compiled* c = new Compiled();
  return *c;
}

// --- ROM images: lowered kernels (the machine's own lowering) and random rows.

sdk::KernelIR vector_add() {
  IrBuilder b("vadd");
  const ValueId pa = b.ptr_param("a"), pb = b.ptr_param("b"), pc = b.ptr_param("c"), n = b.int_param("n");
  const ValueId i = b.global_index();
  const ValueId out = b.icmp(CmpPred::kSge, i, n);
  const int body = b.block("body"), exit = b.block("exit");
  b.at(0);
  b.cond_br(out, exit, {}, body);
  b.at(body);
  b.store(b.element(pc, i), b.bin(Opcode::kAdd, b.load(b.element(pa, i)), b.load(b.element(pb, i))));
  b.br(exit);
  b.at(exit);
  b.ret();
  return b.k;
}

sdk::KernelIR dot() {
  IrBuilder b("dot");
  const ValueId pa = b.ptr_param("a"), pb = b.ptr_param("b"), po = b.ptr_param("out"), n = b.int_param("n");
  const ValueId i = b.global_index();
  const ValueId in = b.icmp(CmpPred::kSlt, i, n);
  const int body = b.block("body"), exit = b.block("exit");
  b.at(0);
  b.cond_br(in, body, {}, exit);
  b.at(body);
  b.atomic(sdk::AtomicOp::kAdd, po, {b.bin(Opcode::kMul, b.load(b.element(pa, i)), b.load(b.element(pb, i)))});
  b.br(exit);
  b.at(exit);
  b.ret();
  return b.k;
}

// out[i] = op(a[i], b[i]): division expands into a loop of many blocks.
sdk::KernelIR binary(Opcode op) {
  IrBuilder b("binop");
  const ValueId pa = b.ptr_param("a"), pb = b.ptr_param("b"), po = b.ptr_param("out");
  const ValueId i = b.global_index();
  b.store(b.element(po, i), b.bin(op, b.load(b.element(pa, i)), b.load(b.element(pb, i))));
  b.ret();
  return b.k;
}

// 32 blocks × kSlots rows: the program's image first, random 64-bit rows after it.
std::vector<std::uint64_t> rom_of(const sdk::KernelIR& k, std::uint64_t seed) {
  auto p = lower_kernel(k, {1, 32}, MachineConfig{});
  EXPECT_TRUE(p.has_value()) << p.status().to_string();
  std::vector<std::uint64_t> rows;
  if (p) {
    EXPECT_EQ((*p)->rows_per_block(), kSlots);
    std::vector<std::uint32_t> params;
    for (std::size_t i = 0; i < (*p)->params.size(); ++i) params.push_back(0x40u * static_cast<std::uint32_t>(i + 1));
    rows = (*p)->image(params);
    std::printf("%s: %zu lowered blocks, the rest random rows\n", k.name.c_str(), (*p)->blocks.size());
  }
  EXPECT_LE(rows.size(), std::size_t{kProtoBlocks} * kSlots);
  std::mt19937_64 rng(seed);
  while (rows.size() < std::size_t{kProtoBlocks} * kSlots) rows.push_back(rng());
  rows.resize(std::size_t{kProtoBlocks} * kSlots);
  return rows;
}

// Rows of random valid instructions (every opcode, kinds and special numbers in range).
std::vector<std::uint64_t> random_valid_rows(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint64_t> rows;
  for (int i = 0; i < kProtoBlocks * kSlots; ++i) {
    Instr in;
    in.op = static_cast<Op>(rng() % kOpCount);
    in.ak = static_cast<Kind>(rng() % 3);
    in.bk = static_cast<Kind>(rng() % 3);
    in.d = rng() % 16;
    in.a = in.ak == Kind::kSpecial ? rng() % static_cast<int>(Special::kCount) : rng() % 16;
    in.b = in.bk == Kind::kSpecial ? rng() % static_cast<int>(Special::kCount) : rng() % 16;
    in.c = rng() % 16;
    in.flags = rng() % 64;
    in.imm = static_cast<std::uint32_t>(rng());
    rows.push_back(encode(in));
  }
  return rows;
}

// Rows whose fields sit on decode()'s edges: kind 3, specials 4/5, opcodes around kOpCount.
std::vector<std::uint64_t> edge_rows(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint64_t> rows;
  for (int i = 0; i < kProtoBlocks * kSlots; ++i) {
    std::uint64_t w = rng();
    w &= ~std::uint64_t{0x3f};
    w |= static_cast<std::uint64_t>((kOpCount - 3 + static_cast<int>(rng() % 6)) & 0x3f);
    w &= ~(std::uint64_t{0xf} << kPosA);
    w |= std::uint64_t{3 + rng() % 4} << kPosA;
    rows.push_back(w);
  }
  return rows;
}

// --- The check: the ISA's own decoding of the row, field by field.

struct RunStats {
  int wrong = 0, checked = 0, inexact = 0, leaked = 0;
  double mlp_min = std::numeric_limits<double>::infinity(), gdn_min = std::numeric_limits<double>::infinity();
};

void check_slot(const Compiled& k, const std::vector<float>& y, int s, std::uint64_t row, RunStats& run,
                const std::string& where) {
  const circuit::SlotFields& f = k.fd.slot[static_cast<std::size_t>(s)];
  const weights::Allocation& a = k.cc.allocation;
  Instr in;
  const bool valid = decode(row, in);
  const unsigned opcode = row & 0x3f, ak = (row >> kPosAk) & 3, bk = (row >> kPosBk) & 3;
  auto expect = [&](const char* name, const weights::Word& w, std::uint64_t want) {
    bool exact = true;
    const std::uint64_t got = weights::read_word(a, y, w, &exact);
    ++run.checked;
    if (!exact) ++run.inexact;
    if (got != want) {
      if (++run.wrong <= 10)
        ADD_FAILURE() << where << " slot " << s << " row 0x" << std::hex << row << ": " << name << " = 0x" << got
                      << ", the ISA says 0x" << want;
    }
  };
  expect("lo", f.lo, row & 0xFFFFFFFFu);
  expect("hi", f.hi, row >> 32);
  expect("opcode", f.opcode, opcode < static_cast<unsigned>(kOpCount) ? std::uint64_t{1} << opcode : 0);
  expect("d", f.d, (row >> kPosD) & 0xf);
  expect("a", f.a, (row >> kPosA) & 0xf);
  expect("b", f.b, (row >> kPosB) & 0xf);
  expect("c", f.c, (row >> kPosC) & 0xf);
  expect("ak", f.ak, ak < 3 ? 1u << ak : 0);
  expect("bk", f.bk, bk < 3 ? 1u << bk : 0);
  expect("flags", f.flags, (row >> kPosFlags) & 0x3f);
  expect("imm", f.imm, row >> 32);
  expect("valid", weights::Word{f.valid}, valid ? 1 : 0);
  if (valid) {  // the same fields through decode()'s own Instr
    expect("Instr.op", f.opcode, std::uint64_t{1} << static_cast<int>(in.op));
    expect("Instr.d", f.d, in.d);
    expect("Instr.a", f.a, in.a);
    expect("Instr.b", f.b, in.b);
    expect("Instr.c", f.c, in.c);
    expect("Instr.ak", f.ak, 1u << static_cast<int>(in.ak));
    expect("Instr.bk", f.bk, 1u << static_cast<int>(in.bk));
    expect("Instr.flags", f.flags, in.flags);
    expect("Instr.imm", f.imm, in.imm);
  }
}

std::vector<float> step(weights::ReferenceModel& m, const Compiled& k, const Record& r) {
  auto v = circuit::token_inputs(k.fd, r);
  EXPECT_TRUE(v.has_value()) << v.status().to_string();
  if (!v) return m.step(weights::embed(k.c, k.cc.allocation, {}));
  return m.step(weights::embed(k.c, k.cc.allocation, *v));
}

// Writes each image (in turn, overwriting the last) and executes every block.
RunStats run_images(DType dt, const std::vector<std::vector<std::uint64_t>>& images, std::uint64_t seed) {
  const Compiled& k = compiled();
  RunStats run;
  weights::ReferenceModel m(k.cc.layers, k.cc.target.shapes, dt);
  std::mt19937_64 rng(seed);
  for (std::size_t p = 0; p < images.size(); ++p) {
    const auto& rows = images[p];
    for (int b = 0; b < kProtoBlocks; ++b)
      for (int s = 0; s < kSlots; ++s)
        for (const Record& r : rom_records(b, s, rows[static_cast<std::size_t>(b * kSlots + s)])) {
          auto y = step(m, k, r);
          // Decoded fields stay at 0 on ROM tokens (decode is gated by exec.is).
          for (const auto& f : k.fd.slot)
            if (weights::read_word(k.cc.allocation, y, f.opcode) != 0 ||
                weights::read_word(k.cc.allocation, y, weights::Word{f.valid}) != 0)
              ++run.leaked;
        }
    // Every block, in a random order, with random warps and lane masks.
    std::vector<int> order(kProtoBlocks);
    for (int b = 0; b < kProtoBlocks; ++b) order[b] = b;
    std::shuffle(order.begin(), order.end(), rng);
    for (int b : order) {
      const Record e = exec_record(b, rng() % kProtoWarps, 1 + rng() % 15);
      auto y = step(m, k, e);
      EXPECT_EQ(weights::read_word(k.cc.allocation, y, k.fd.exec_warp), e.warp);
      EXPECT_EQ(weights::read_word(k.cc.allocation, y, k.fd.exec_lanes), e.lanes);
      for (int s = 0; s < kSlots; ++s)
        check_slot(k, y, s, rows[static_cast<std::size_t>(b * kSlots + s)], run,
                   std::string(weights::dtype_name(dt)) + " image " + std::to_string(p) + " B" + std::to_string(b));
    }
  }
  for (const weights::LayerMargin& lm : m.margins()) {
    run.mlp_min = std::min(run.mlp_min, lm.mlp_min);
    run.gdn_min = std::min(run.gdn_min, lm.gdn_min);
  }
  std::printf("[ %s ] %d fields checked, %d wrong, %d inexact; smallest switch margin: MLP %g, GDN %g\n%s",
              std::string(weights::dtype_name(dt)).c_str(), run.checked, run.wrong, run.inexact, run.mlp_min,
              run.gdn_min, m.margin_report().c_str());
  return run;
}

TEST(Circuit, FetchDecodeCompilesToQwenLayers) {
  const Compiled& k = compiled();
  ASSERT_TRUE(k.ok);
  std::int64_t heads = 0;
  for (int l = 0; l < k.cc.schedule.num_layers; ++l) {
    heads += k.cc.schedule.use[l].key_heads;
    std::printf("layer %d: %lld key heads, %lld MLP neurons\n", l,
                static_cast<long long>(k.cc.schedule.use[l].key_heads),
                static_cast<long long>(k.cc.schedule.use[l].mlp_neurons));
  }
  std::printf("fetch/decode: %d layers, %lld heads, %lld MLP neurons, %d residual channels\n", k.cc.schedule.num_layers,
              static_cast<long long>(heads), static_cast<long long>(k.cc.total_neurons()),
              k.cc.allocation.channels_used);
  // One read port per (slot, half) in the first layer; decode in its MLP, validity in the next.
  EXPECT_EQ(k.cc.schedule.num_layers, 2);
  EXPECT_EQ(k.cc.schedule.use[0].key_heads, 2 * kSlots);
}

TEST(Circuit, FetchDecodeMatchesIsaOnLoweredAndRandomRoms) {
  ASSERT_TRUE(compiled().ok);
  const std::vector<std::vector<std::uint64_t>> images = {
      rom_of(vector_add(), 1), rom_of(dot(), 2), rom_of(binary(Opcode::kSDiv), 3),
      random_valid_rows(4),    edge_rows(5),     rom_of(binary(Opcode::kMulHiS), 6)};
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const RunStats r = run_images(dt, images, 7);
    EXPECT_EQ(r.wrong, 0) << weights::dtype_name(dt);
    EXPECT_EQ(r.inexact, 0) << weights::dtype_name(dt);
    EXPECT_EQ(r.leaked, 0) << weights::dtype_name(dt);
    EXPECT_GT(r.checked, 0);
    EXPECT_GE(r.mlp_min, 88.73) << "an MLP switch is not saturated";
    EXPECT_GE(r.gdn_min, 88.73) << "a Gated DeltaNet switch is not saturated";
  }
}

TEST(Circuit, TokenInputsNameTheFieldOutOfRange) {
  ASSERT_TRUE(compiled().ok);
  const FetchDecode& fd = compiled().fd;
  Record r = rom_records(3, 1, 0)[0];
  r.slot = kSlots;
  auto v = circuit::token_inputs(fd, r);
  ASSERT_FALSE(v.has_value());
  EXPECT_NE(v.status().message().find("slot 5 outside the circuit's 5 slots"), std::string::npos)
      << v.status().message();
  auto e = circuit::token_inputs(fd, exec_record(kProtoBlocks, 0, 1));
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.status().message().find("block 32 outside 0..31"), std::string::npos) << e.status().message();
  weights::Circuit c;
  auto f = circuit::build_fetch_decode(c, kProtoRowsPerBlock + 1);
  ASSERT_FALSE(f.has_value());
  EXPECT_NE(f.status().message().find("9 ROM slots per block"), std::string::npos) << f.status().message();
}

}  // namespace
}  // namespace qgpu::simt
