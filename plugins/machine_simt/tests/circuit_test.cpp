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

#include "circuit_harness.h"
#include "fetch_decode.h"
#include "ir_builder.h"
#include "kernels.h"
#include "isa.h"
#include "lower.h"
#include "protocol.h"
#include "qgpu/weights/compile.h"
#include "qgpu/weights/reference.h"
#include "register_file.h"

namespace qgpu::simt {
namespace {

using circuit::FetchDecode;
using sdk::CmpPred;
using sdk::Opcode;
using test::dot_guarded_kernel;
using test::qwen2b_shapes;
using test::IrBuilder;
using test::vadd_kernel;
using weights::DType;
using ValueId = sdk::ValueId;

constexpr int kSlots = 5;  // the default block_instructions (4) + the terminator


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
      rom_of(vadd_kernel(), 1), rom_of(dot_guarded_kernel(), 2), rom_of(binary(Opcode::kSDiv), 3),
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

// --- Stage 2: the register file (WREG tokens) and the operand reads of EXEC tokens.

using circuit::Operand;
using circuit::RegisterFile;
using Reads = std::vector<std::pair<int, Operand>>;

struct RegCompiled {
  weights::Circuit c{"simt.register_file"};
  FetchDecode fd;
  RegisterFile rf;
  weights::CompiledCircuit cc;
  bool ok = false;
  explicit RegCompiled(const Reads& reads) {
    auto f = circuit::build_fetch_decode(c, kSlots);
    EXPECT_TRUE(f.has_value()) << f.status().to_string();
    if (!f) return;
    fd = std::move(*f);
    auto r = circuit::build_register_file(c, fd, reads);
    EXPECT_TRUE(r.has_value()) << r.status().to_string();
    if (!r) return;
    rf = std::move(*r);
    weights::Target t;
    t.shapes = qwen2b_shapes();
    auto cc_or = weights::compile(c, t);
    EXPECT_TRUE(cc_or.has_value()) << cc_or.status().to_string();
    if (!cc_or) return;
    cc = std::move(*cc_or);
    ok = true;
  }
};

// The plain model: registers[warp][reg][lane], written only where a WREG mask says.
struct RegModel {
  std::uint32_t r[kProtoWarps][16][kProtoLanes] = {};
  void write(const Record& w) {
    for (int l = 0; l < kProtoLanes; ++l)
      if ((w.lanes >> l) & 1) r[w.warp][w.reg][l] = w.values[l];
  }
  // isa.h's meaning of an operand for lane l of warp w (specials other than tid/laneid: 0 in this stage).
  std::uint64_t operand(const Instr& in, Operand o, int w, int l) const {
    const int num = o == Operand::kA ? in.a : o == Operand::kB ? in.b : in.c;
    const Kind kind = o == Operand::kA ? in.ak : o == Operand::kB ? in.bk : Kind::kReg;
    if (kind == Kind::kImm) return in.imm;
    if (kind == Kind::kSpecial) {
      const auto sp = static_cast<Special>(num);
      return sp == Special::kTid || sp == Special::kLaneId ? static_cast<std::uint64_t>(w * kProtoLanes + l) : 0;
    }
    return num == 0 ? 0 : r[w][num][l];
  }
};

// Every row names registers 1..15 in turn in a, b and c, all as registers.
std::vector<std::uint64_t> register_sweep_rows() {
  std::vector<std::uint64_t> rows;
  for (int i = 0; i < kProtoBlocks * kSlots; ++i) {
    Instr in;
    in.op = Op::kAdd;
    in.ak = Kind::kReg;
    in.bk = Kind::kReg;
    in.d = 1;
    in.a = static_cast<std::uint8_t>(i % 16);  // r0 included
    in.b = static_cast<std::uint8_t>(1 + (i + 5) % 15);
    in.c = static_cast<std::uint8_t>(1 + (i + 11) % 15);
    in.imm = 0xdeadbeefu;
    rows.push_back(encode(in));
  }
  return rows;
}

struct RegStats {
  int wrong = 0, checked = 0, inexact = 0, partial_writes = 0;
  double mlp_min = std::numeric_limits<double>::infinity(), gdn_min = std::numeric_limits<double>::infinity();
};

std::vector<float> reg_step(weights::ReferenceModel& m, const RegCompiled& k,
                            const std::vector<std::pair<weights::Word, std::uint64_t>>& v) {
  return m.step(weights::embed(k.c, k.cc.allocation, v));
}

std::vector<float> reg_step(weights::ReferenceModel& m, const RegCompiled& k, const Record& r) {
  auto v = circuit::token_inputs(k.fd, r);
  EXPECT_TRUE(v.has_value()) << v.status().to_string();
  return reg_step(m, k, v ? *v : std::vector<std::pair<weights::Word, std::uint64_t>>{});
}

// Writes every register row, then per ROM image: the image, partial-mask overwrites, and EXEC
// tokens (every block; on the sweep image every block for every warp), checking every operand
// of every requested slot and every lane against RegModel.
RegStats run_registers(const RegCompiled& k, DType dt, std::uint64_t seed) {
  RegStats run;
  weights::ReferenceModel m(k.cc.layers, k.cc.target.shapes, dt);
  std::mt19937_64 rng(seed);
  RegModel model;
  auto wreg = [&](const Record& w) {
    auto toks = circuit::wreg_token_inputs(k.rf, w);
    EXPECT_TRUE(toks.has_value()) << toks.status().to_string();
    if (!toks) return;
    for (const auto& t : *toks) reg_step(m, k, t);
    model.write(w);
  };
  // Values: often equal across lanes (one token for several lanes), often all distinct.
  auto value = [&]() -> std::uint32_t { return rng() % 3 == 0 ? static_cast<std::uint32_t>(rng() % 4) : rng(); };
  for (std::uint32_t w = 0; w < kProtoWarps; ++w)  // the prompt: r1..r15 of every warp, all lanes
    for (std::uint32_t r = 1; r < 16; ++r) wreg(wreg_record(w, r, 0xf, {value(), value(), value(), value()}));
  // A lowered program (its rows after the program replaced by random valid instructions).
  std::vector<std::uint64_t> lowered = rom_of(vadd_kernel(), 22);
  const std::vector<std::uint64_t> fill = random_valid_rows(23);
  for (std::size_t i = 0; i < lowered.size(); ++i)
    if (Instr in; !decode(lowered[i], in)) lowered[i] = fill[i];
  const std::vector<std::vector<std::uint64_t>> images = {random_valid_rows(21), register_sweep_rows(), lowered};
  const std::string dn(weights::dtype_name(dt));
  for (std::size_t p = 0; p < images.size(); ++p) {
    const auto& rows = images[p];
    for (int b = 0; b < kProtoBlocks; ++b)
      for (int s = 0; s < kSlots; ++s)
        for (const Record& r : rom_records(b, s, rows[static_cast<std::size_t>(b * kSlots + s)])) reg_step(m, k, r);
    // Overwrites with partial masks (1..14): the other lanes' rows must keep their values.
    for (int i = 0; i < 40; ++i) {
      const std::uint32_t mask = 1 + static_cast<std::uint32_t>(rng() % 14);
      wreg(wreg_record(rng() % kProtoWarps, 1 + rng() % 15, mask, {value(), value(), value(), value()}));
      ++run.partial_writes;
    }
    std::vector<std::pair<int, int>> execs;  // (block, warp)
    for (int b = 0; b < kProtoBlocks; ++b)
      if (p == 1)
        for (int w = 0; w < kProtoWarps; ++w) execs.emplace_back(b, w);
      else
        execs.emplace_back(b, static_cast<int>(rng() % kProtoWarps));
    std::shuffle(execs.begin(), execs.end(), rng);
    for (const auto& [b, w] : execs) {
      const auto y = reg_step(m, k, exec_record(b, w, 1 + rng() % 15));
      for (const circuit::OperandRead& rd : k.rf.reads) {
        const std::uint64_t row = rows[static_cast<std::size_t>(b * kSlots + rd.slot)];
        Instr in;
        if (!decode(row, in)) {
          ADD_FAILURE() << "image " << p << " block " << b << " slot " << rd.slot << " does not decode";
          continue;
        }
        for (int l = 0; l < kProtoLanes; ++l) {
          bool exact = true;
          const std::uint64_t got = weights::read_word(k.cc.allocation, y, rd.value[l], &exact);
          const std::uint64_t want = model.operand(in, rd.operand, w, l);
          ++run.checked;
          if (!exact) ++run.inexact;
          if (got != want && ++run.wrong <= 10)
            ADD_FAILURE() << dn << " image " << p << " B" << b << " w" << w << " slot " << rd.slot << " lane " << l
                          << " operand " << circuit::operand_name(rd.operand) << " = 0x" << std::hex << got
                          << ", the model says 0x" << want;
        }
      }
    }
  }
  for (const weights::LayerMargin& lm : m.margins()) {
    run.mlp_min = std::min(run.mlp_min, lm.mlp_min);
    run.gdn_min = std::min(run.gdn_min, lm.gdn_min);
  }
  std::printf("[ %s ] %d operands checked, %d wrong, %d inexact; smallest switch margin: MLP %g, GDN %g\n", dn.c_str(),
              run.checked, run.wrong, run.inexact, run.mlp_min, run.gdn_min);
  return run;
}

void report(const RegCompiled& k, const std::string& what) {
  std::int64_t heads = 0;
  std::string per_layer;
  for (int l = 0; l < k.cc.schedule.num_layers; ++l) {
    heads += k.cc.schedule.use[l].key_heads;
    per_layer +=
        " " + std::to_string(k.cc.schedule.use[l].key_heads) + "/" + std::to_string(k.cc.schedule.use[l].mlp_neurons);
  }
  std::printf("%s: %d layers, %lld heads, %lld MLP neurons, %d residual channels; heads/neurons per layer:%s\n",
              what.c_str(), k.cc.schedule.num_layers, static_cast<long long>(heads),
              static_cast<long long>(k.cc.total_neurons()), k.cc.allocation.channels_used, per_layer.c_str());
}

void check_registers(const Reads& reads, const std::string& what, std::uint64_t seed) {
  const RegCompiled k(reads);
  ASSERT_TRUE(k.ok);
  report(k, what);
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const RegStats r = run_registers(k, dt, seed);
    EXPECT_EQ(r.wrong, 0) << weights::dtype_name(dt);
    EXPECT_EQ(r.inexact, 0) << weights::dtype_name(dt);
    EXPECT_GT(r.checked, 0);
    EXPECT_GT(r.partial_writes, 0);
    EXPECT_GE(r.mlp_min, 88.73) << "an MLP switch is not saturated";
    EXPECT_GE(r.gdn_min, 88.73) << "a Gated DeltaNet switch is not saturated";
  }
}

// One slot's a and b (8 read ports, 256 bits) is what fits beside fetch/decode in the
// Qwen3.5-2B residual (2,048 channels), so each slot gets its own circuit here.
TEST(Circuit, RegisterFileOperandsABMatchModel) {
  for (int s = 0; s < kSlots; ++s)
    check_registers({{s, Operand::kA}, {s, Operand::kB}}, "slot " + std::to_string(s) + " a, b", 31 + s);
}

TEST(Circuit, RegisterFileOperandCMatchesModel) {
  check_registers({{0, Operand::kC}, {1, Operand::kC}}, "slots 0-1 c", 41);
  check_registers({{2, Operand::kC}, {3, Operand::kC}}, "slots 2-3 c", 42);
  check_registers({{4, Operand::kC}}, "slot 4 c", 43);
}

// All four instruction slots' a and b at once need 32 read ports and 1,024 more residual bits.
TEST(Circuit, RegisterFileOfFourSlotsExceedsTheQwen2bResidual) {
  weights::Circuit c;
  auto fd = circuit::build_fetch_decode(c, kSlots);
  ASSERT_TRUE(fd.has_value());
  Reads all;
  for (int s = 0; s < 4; ++s) all.insert(all.end(), {{s, Operand::kA}, {s, Operand::kB}});
  auto rf = circuit::build_register_file(c, *fd, all);
  ASSERT_TRUE(rf.has_value()) << rf.status().to_string();
  weights::Target t;
  t.shapes = qwen2b_shapes();
  auto cc = weights::compile(c, t);
  ASSERT_FALSE(cc.has_value());
  std::printf("%s\n", cc.status().message().c_str());
  EXPECT_NE(cc.status().message().find("residual"), std::string::npos) << cc.status().message();
}

TEST(Circuit, RegisterFileNamesWhatDoesNotFit) {
  weights::Circuit c;
  auto fd = circuit::build_fetch_decode(c, kSlots);
  ASSERT_TRUE(fd.has_value());
  auto bad = circuit::build_register_file(c, *fd, {{kSlots, Operand::kA}});
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("slot 5, the fetch stage has slots 0..4"), std::string::npos)
      << bad.status().message();
  weights::Circuit c2;
  auto fd2 = circuit::build_fetch_decode(c2, kSlots);
  ASSERT_TRUE(fd2.has_value());
  auto rf = circuit::build_register_file(c2, *fd2, {{0, Operand::kA}});
  ASSERT_TRUE(rf.has_value()) << rf.status().to_string();
  auto r0 = circuit::wreg_token_inputs(*rf, wreg_record(0, 0, 1, {1, 2, 3, 4}));
  ASSERT_FALSE(r0.has_value());
  EXPECT_NE(r0.status().message().find("r0 is never written"), std::string::npos) << r0.status().message();
  auto w8 = circuit::wreg_token_inputs(*rf, wreg_record(8, 1, 1, {1, 2, 3, 4}));
  ASSERT_FALSE(w8.has_value());
  EXPECT_NE(w8.status().message().find("warp 8 outside 0..7"), std::string::npos) << w8.status().message();
  // Lanes that share a value share a token; the others get one each.
  auto t = circuit::wreg_token_inputs(*rf, wreg_record(3, 7, 0xd, {5, 9, 5, 6}));
  ASSERT_TRUE(t.has_value());
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[0][2].second, 0x5u);  // lanes 0 and 2 hold 5
  EXPECT_EQ((*t)[1][2].second, 0x8u);  // lane 3 holds 6
}

}  // namespace
}  // namespace qgpu::simt
