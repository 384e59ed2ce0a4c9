// frontend_ptx unit tests: the KernelIR helpers (names, verifier, dump), the PTX parser, and the whole
// pipeline on real kernels (clang-16 and committed nvcc PTX). The pipeline's output is executed by a
// small single-thread KernelIR evaluator written here and compared with the kernels' C++ meaning, so
// the tests check semantics, not the frontend's own output.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "pipeline.h"
#include "ptx_ast.h"
#include "qgpu/sdk/kernel_ir.h"
#include "source_names.h"

namespace qgpu::ptx {
namespace {

using sdk::Instr;
using sdk::IrType;
using sdk::KernelIR;
using sdk::Opcode;

// ------------------------------------------------------------------ KernelIR helpers

TEST(KernelIr, NamesAndWidths) {
  EXPECT_EQ(sdk::ir_type_bits(IrType::kI1), 1);
  EXPECT_EQ(sdk::ir_type_bits(IrType::kI64), 64);
  EXPECT_EQ(sdk::ir_type_bits(IrType::kVoid), 0);
  EXPECT_EQ(sdk::ir_type_name(IrType::kI16), "i16");
  EXPECT_EQ(sdk::special_reg_name(sdk::SpecialReg::kNctaidY), "nctaid.y");
  EXPECT_EQ(sdk::cmp_pred_name(sdk::CmpPred::kUge), "uge");
  EXPECT_EQ(sdk::atomic_op_name(sdk::AtomicOp::kCas), "cas");
  EXPECT_EQ(sdk::opcode_name(Opcode::kShflPred), "shfl_pred");
  EXPECT_TRUE(sdk::is_terminator(Opcode::kCondBr));
  EXPECT_FALSE(sdk::is_terminator(Opcode::kBarrier));
}

// A loop: ^bb0 -> ^bb1(%2) -> ^bb1 | ^bb2, written out by hand.
KernelIR small_loop() {
  KernelIR k;
  k.name = "loop";
  k.params = {{"n", sdk::KernelParam::Kind::kScalar, IrType::kI32}};
  k.value_types = {IrType::kVoid, IrType::kI32, IrType::kI32, IrType::kI32, IrType::kI32, IrType::kI1};
  auto instr = [](Opcode op, IrType t, sdk::ValueId r, std::vector<sdk::ValueId> ops, std::int64_t imm = 0) {
    Instr in;
    in.op = op;
    in.type = t;
    in.result = r;
    in.operands = std::move(ops);
    in.imm = imm;
    return in;
  };
  sdk::Block b0, b1, b2;
  b0.instrs.push_back(instr(Opcode::kParam, IrType::kI32, 1, {}, 0));
  b0.instrs.push_back(instr(Opcode::kConst, IrType::kI32, 2, {}, 1));
  Instr br = instr(Opcode::kBr, IrType::kVoid, 0, {});
  br.targets = {{1, {2}}};
  b0.instrs.push_back(br);
  b1.args = {3};
  b1.instrs.push_back(instr(Opcode::kAdd, IrType::kI32, 4, {3, 3}));
  Instr cmp = instr(Opcode::kICmp, IrType::kI1, 5, {4, 1});
  cmp.pred = sdk::CmpPred::kUlt;
  b1.instrs.push_back(cmp);
  Instr cbr = instr(Opcode::kCondBr, IrType::kVoid, 0, {5});
  cbr.targets = {{1, {4}}, {2, {}}};
  b1.instrs.push_back(cbr);
  b2.instrs.push_back(instr(Opcode::kRet, IrType::kVoid, 0, {}));
  k.blocks = {b0, b1, b2};
  return k;
}

TEST(KernelIr, VerifierAcceptsAndDumpReads) {
  KernelIR k = small_loop();
  ASSERT_TRUE(sdk::verify_kernel_ir(k).is_ok()) << sdk::verify_kernel_ir(k).to_string();
  const std::string expected =
      "kernel loop\n"
      "  param 0 n: scalar i32\n"
      "^bb0:\n"
      "  %1 = param i32 0\n"
      "  %2 = const i32 1\n"
      "  br ^bb1(%2)\n"
      "^bb1(%3: i32):\n"
      "  %4 = add i32 %3, %3\n"
      "  %5 = icmp.ult i1 %4, %1\n"
      "  cond_br %5, ^bb1(%4), ^bb2\n"
      "^bb2:\n"
      "  ret\n";
  EXPECT_EQ(sdk::dump_kernel_ir(k), expected);
}

TEST(KernelIr, VerifierRejectsMalformedKernels) {
  auto message = [](const KernelIR& k) { return sdk::verify_kernel_ir(k).message(); };
  {
    KernelIR k = small_loop();
    k.blocks[1].instrs[0].operands = {3, 9};
    EXPECT_NE(message(k).find("uses undefined value %9"), std::string::npos) << message(k);
  }
  {
    KernelIR k = small_loop();
    k.blocks[0].instrs.back().targets[0].args.clear();
    EXPECT_NE(message(k).find("passes 0 arguments to ^bb1, which takes 1"), std::string::npos) << message(k);
  }
  {
    KernelIR k = small_loop();
    k.blocks[2].instrs.clear();
    EXPECT_NE(message(k).find("^bb2 does not end in a terminator"), std::string::npos) << message(k);
  }
  {
    KernelIR k = small_loop();
    k.blocks[1].instrs[1].operands = {4, 5};  // i32 vs i1
    EXPECT_NE(message(k).find("operands differ in type"), std::string::npos) << message(k);
  }
  {
    KernelIR k = small_loop();
    k.blocks[0].instrs[0].imm = 3;
    EXPECT_NE(message(k).find("parameter index out of range"), std::string::npos) << message(k);
  }
  {
    KernelIR k = small_loop();
    Instr p;
    p.op = Opcode::kShflPred;
    p.type = IrType::kI1;
    p.result = 5;
    p.operands = {4};
    k.blocks[1].instrs[1] = p;
    EXPECT_NE(message(k).find("operand must be the result of a shfl"), std::string::npos) << message(k);
  }
  {
    KernelIR k = small_loop();
    k.blocks[0].args = {3};
    EXPECT_NE(message(k).find("entry block has arguments"), std::string::npos) << message(k);
  }
}

// ------------------------------------------------------------------ parser

TEST(Parser, ExpandsRangesAndReadsOperands) {
  const std::string text =
      ".version 7.0\n.target sm_75\n.address_size 64\n"
      ".visible .entry k(.param .u64 p, .param .u32 n)\n{\n"
      "  .reg .pred %p<3>; .reg .b32 %r<5>, %x;\n"
      "  @!%p1 ld.global.u32 %r1, [%rd2+-8];\n"
      "L1:\n  shfl.sync.up.b32 %r2|%p2, %r1, 1, 0, -1; // c\n"
      "}\n";
  auto m = parse_ptx(text, "t.ptx");
  ASSERT_TRUE(m) << m.error().to_string();
  ASSERT_EQ(m->entries.size(), 1u);
  const Entry& e = m->entries[0];
  EXPECT_EQ(e.params.size(), 2u);
  EXPECT_EQ(e.params[1].type, "u32");
  EXPECT_EQ(e.regs.size(), 3u + 5u + 1u);
  EXPECT_TRUE(e.regs.count("%r4"));
  EXPECT_FALSE(e.regs.count("%r5"));
  ASSERT_EQ(e.body.size(), 3u);
  const Statement& ld = e.body[0];
  EXPECT_EQ(ld.guard, "%p1");
  EXPECT_TRUE(ld.guard_negated);
  EXPECT_EQ(ld.opcode, (std::vector<std::string>{"ld", "global", "u32"}));
  ASSERT_EQ(ld.operands.size(), 2u);
  EXPECT_EQ(ld.operands[1].kind, Operand::Kind::kAddr);
  EXPECT_EQ(ld.operands[1].name, "%rd2");
  EXPECT_EQ(ld.operands[1].imm, -8);
  EXPECT_EQ(e.body[1].kind, Statement::Kind::kLabel);
  const Statement& sh = e.body[2];
  EXPECT_EQ(sh.operands[0].kind, Operand::Kind::kPair);
  EXPECT_EQ(sh.operands[0].name2, "%p2");
  EXPECT_EQ(sh.operands[4].imm, -1);
  EXPECT_EQ(sh.loc.line, 9u);
  EXPECT_EQ(sh.loc.column, 3u);
}

TEST(Parser, ReportsFileLineColumn) {
  auto m = parse_ptx(".visible .entry k()\n{\n  add.s32 %r1, ;\n}\n", "bad.ptx");
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().to_string(), "bad.ptx:3:16: error: expected an operand, found ';'");
}

// Bugs seen while writing fuzz/ptx_parser_fuzzer.cpp and confirmed with it (fuzz/README.md): negating the
// most negative literal was signed overflow (UBSan), a negative register range overflowed the error
// message's arithmetic, and a 1 KB file of large ranges took gigabytes (libFuzzer: out-of-memory).
const std::string kKernelHead = ".version 7.0\n.target sm_75\n.address_size 64\n.visible .entry k()\n{\n";

TEST(Parser, NegatedMostNegativeLiteralWraps) {
  auto m = parse_ptx(kKernelHead +
                         "  .reg .b32 %r<2>; .reg .b64 %rd<2>;\n"
                         "  mov.u32 %r1, -0x8000000000000000;\n"
                         "  ld.global.u32 %r1, [%rd1-0x8000000000000000];\n"
                         "  ld.global.u32 %r1, [-0x8000000000000000];\n}\n",
                     "t.ptx");
  ASSERT_TRUE(m) << m.error().to_string();
  const auto& body = m->entries.at(0).body;
  ASSERT_EQ(body.size(), 3u);
  EXPECT_EQ(body[0].operands.at(1).imm, INT64_MIN);
  EXPECT_EQ(body[1].operands.at(1).imm, INT64_MIN);
  EXPECT_EQ(body[2].operands.at(1).imm, INT64_MIN);
}

TEST(Parser, NegativeRegisterRangeIsAnError) {
  for (const char* range : {"-0x8000000000000000", "0x8000000000000000", "-1"}) {
    auto m = parse_ptx(kKernelHead + "  .reg .b32 %r<" + range + ">;\n}\n", "t.ptx");
    ASSERT_FALSE(m) << range;
    EXPECT_EQ(m.error().code(), sdk::ErrorCode::kParseError);
    EXPECT_EQ(m.error().to_string(), std::string("t.ptx:6:13: error: register range <") +
                                         (range[1] == '1' ? "-1" : "-9223372036854775808") + "> is negative");
  }
}

TEST(Parser, DeclaredRegistersAreBoundedPerKernel) {
  // 40 ranges of 2^16 (and redeclaring one name) pass the per-range limit but not the kernel's.
  std::string many = kKernelHead;
  for (int i = 0; i < 40; ++i) many += "  .reg .b32 %r" + std::to_string(i) + "<65536>;\n";
  std::string again = kKernelHead;
  for (int i = 0; i < 40; ++i) again += "  .reg .b32 %r<40000>;\n";
  for (const std::string& text : {many + "}\n", again + "}\n"}) {
    auto m = parse_ptx(text, "t.ptx");
    ASSERT_FALSE(m);
    EXPECT_EQ(m.error().code(), sdk::ErrorCode::kLimitExceeded);
    EXPECT_EQ(m.error().to_string(),
              "t.ptx:7:13: error: kernel 'k' declares more than 65536 registers (ranges expanded, redeclarations "
              "counted)");
  }
  // Up to the limit is fine, in one range or several.
  EXPECT_TRUE(parse_ptx(kKernelHead + "  .reg .b32 %r<65536>;\n}\n", "t.ptx"));
  EXPECT_TRUE(parse_ptx(kKernelHead + "  .reg .b32 %r<32768>, %s<32767>, %x;\n}\n", "t.ptx"));
}

// ------------------------------------------------------------------ a single-thread KernelIR evaluator

struct Launch {
  std::uint32_t tid = 0, ntid = 1, ctaid = 0, nctaid = 1;
};

class Evaluator {
 public:
  std::map<std::uint64_t, std::uint8_t> mem;

  void store(std::uint64_t addr, std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) mem[addr + i] = static_cast<std::uint8_t>(v >> (8 * i));
  }
  std::uint64_t load(std::uint64_t addr, int bytes) {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(mem[addr + i]) << (8 * i);
    return v;
  }

  // Runs one thread to completion; false (with a gtest failure) on anything it cannot model.
  bool run(const KernelIR& k, const std::vector<std::uint64_t>& args, const Launch& launch) {
    std::vector<std::uint64_t> v(k.value_types.size(), 0);
    auto bits = [&](sdk::ValueId id) { return sdk::ir_type_bits(k.value_types[id]); };
    auto mask = [](std::uint64_t x, int b) { return b >= 64 ? x : (x & ((1ull << b) - 1)); };
    auto sx = [&](std::uint64_t x, int b) -> std::int64_t {
      if (b >= 64) return static_cast<std::int64_t>(x);
      const std::uint64_t m = 1ull << (b - 1);
      return static_cast<std::int64_t>((mask(x, b) ^ m) - m);
    };
    std::uint32_t block = 0;
    for (int steps = 0; steps < 1000000; ++steps) {
      const sdk::Block& b = k.blocks[block];
      bool moved = false;
      for (const Instr& in : b.instrs) {
        const int w = sdk::ir_type_bits(in.type);
        auto op = [&](std::size_t i) { return v[in.operands[i]]; };
        auto sop = [&](std::size_t i) { return sx(v[in.operands[i]], bits(in.operands[i])); };
        std::uint64_t r = 0;
        switch (in.op) {
          case Opcode::kConst: r = static_cast<std::uint64_t>(in.imm); break;
          case Opcode::kParam: r = args.at(in.imm); break;
          case Opcode::kSpecial:
            switch (in.special) {
              case sdk::SpecialReg::kTidX: r = launch.tid; break;
              case sdk::SpecialReg::kNtidX: r = launch.ntid; break;
              case sdk::SpecialReg::kCtaidX: r = launch.ctaid; break;
              case sdk::SpecialReg::kNctaidX: r = launch.nctaid; break;
              case sdk::SpecialReg::kWarpSize: r = 32; break;
              default: r = 0; break;  // y/z dimensions are 1-wide launches here
            }
            break;
          case Opcode::kAdd: r = op(0) + op(1); break;
          case Opcode::kSub: r = op(0) - op(1); break;
          case Opcode::kMul: r = op(0) * op(1); break;
          case Opcode::kMulHiS: r = static_cast<std::uint64_t>((static_cast<__int128>(sop(0)) * sop(1)) >> w); break;
          case Opcode::kMulHiU:
            r = static_cast<std::uint64_t>((static_cast<unsigned __int128>(mask(op(0), w)) * mask(op(1), w)) >> w);
            break;
          case Opcode::kNot: r = ~op(0); break;
          case Opcode::kNeg: r = 0 - op(0); break;
          case Opcode::kAbs: r = sop(0) < 0 ? 0 - op(0) : op(0); break;
          case Opcode::kSDiv: r = static_cast<std::uint64_t>(sop(0) / sop(1)); break;
          case Opcode::kSRem: r = static_cast<std::uint64_t>(sop(0) % sop(1)); break;
          case Opcode::kUDiv: r = mask(op(0), w) / mask(op(1), w); break;
          case Opcode::kURem: r = mask(op(0), w) % mask(op(1), w); break;
          case Opcode::kAnd: r = op(0) & op(1); break;
          case Opcode::kOr: r = op(0) | op(1); break;
          case Opcode::kXor: r = op(0) ^ op(1); break;
          case Opcode::kShl: r = mask(op(1), w) >= static_cast<std::uint64_t>(w) ? 0 : op(0) << mask(op(1), w); break;
          case Opcode::kLShr:
            r = mask(op(1), w) >= static_cast<std::uint64_t>(w) ? 0 : mask(op(0), w) >> mask(op(1), w);
            break;
          case Opcode::kAShr: {
            const std::uint64_t n = std::min<std::uint64_t>(mask(op(1), w), w - 1);
            r = static_cast<std::uint64_t>(sop(0) >> n);
            break;
          }
          case Opcode::kSMin: r = static_cast<std::uint64_t>(std::min(sop(0), sop(1))); break;
          case Opcode::kSMax: r = static_cast<std::uint64_t>(std::max(sop(0), sop(1))); break;
          case Opcode::kUMin: r = std::min(mask(op(0), w), mask(op(1), w)); break;
          case Opcode::kUMax: r = std::max(mask(op(0), w), mask(op(1), w)); break;
          case Opcode::kICmp: {
            const std::uint64_t a = mask(op(0), bits(in.operands[0])), c = mask(op(1), bits(in.operands[1]));
            const std::int64_t sa = sop(0), sc = sop(1);
            switch (in.pred) {
              case sdk::CmpPred::kEq: r = a == c; break;
              case sdk::CmpPred::kNe: r = a != c; break;
              case sdk::CmpPred::kSlt: r = sa < sc; break;
              case sdk::CmpPred::kSle: r = sa <= sc; break;
              case sdk::CmpPred::kSgt: r = sa > sc; break;
              case sdk::CmpPred::kSge: r = sa >= sc; break;
              case sdk::CmpPred::kUlt: r = a < c; break;
              case sdk::CmpPred::kUle: r = a <= c; break;
              case sdk::CmpPred::kUgt: r = a > c; break;
              case sdk::CmpPred::kUge: r = a >= c; break;
            }
            break;
          }
          case Opcode::kSelect: r = (op(0) & 1) ? op(1) : op(2); break;
          case Opcode::kZExt: r = mask(op(0), bits(in.operands[0])); break;
          case Opcode::kSExt: r = static_cast<std::uint64_t>(sop(0)); break;
          case Opcode::kTrunc: r = op(0); break;
          case Opcode::kLoad: r = load(op(0), w / 8); break;
          case Opcode::kStore: store(op(0), op(1), w / 8); break;
          case Opcode::kAtomic: {
            const std::uint64_t old = load(op(0), w / 8);
            std::uint64_t now = old;
            const std::uint64_t a = mask(old, w), x = mask(op(1), w);
            switch (in.atomic) {
              case sdk::AtomicOp::kAdd: now = old + op(1); break;
              case sdk::AtomicOp::kUMax: now = std::max(a, x); break;
              case sdk::AtomicOp::kUMin: now = std::min(a, x); break;
              case sdk::AtomicOp::kSMax: now = static_cast<std::uint64_t>(std::max(sx(a, w), sx(x, w))); break;
              case sdk::AtomicOp::kSMin: now = static_cast<std::uint64_t>(std::min(sx(a, w), sx(x, w))); break;
              case sdk::AtomicOp::kExch: now = x; break;
              case sdk::AtomicOp::kAnd: now = a & x; break;
              case sdk::AtomicOp::kOr: now = a | x; break;
              case sdk::AtomicOp::kXor: now = a ^ x; break;
              case sdk::AtomicOp::kInc: now = a >= x ? 0 : a + 1; break;             // PTX atom.inc
              case sdk::AtomicOp::kDec: now = (a == 0 || a > x) ? x : a - 1; break;  // PTX atom.dec
              case sdk::AtomicOp::kCas: now = a == x ? op(2) : a; break;
            }
            store(op(0), now, w / 8);
            r = old;
            break;
          }
          case Opcode::kBr:
          case Opcode::kCondBr: {
            const sdk::BranchTarget& t = in.targets[in.op == Opcode::kBr || (op(0) & 1) ? 0 : 1];
            std::vector<std::uint64_t> passed;
            for (sdk::ValueId a : t.args) passed.push_back(v[a]);
            for (std::size_t i = 0; i < passed.size(); ++i) v[k.blocks[t.block].args[i]] = passed[i];
            block = t.block;
            moved = true;
            break;
          }
          case Opcode::kRet: return true;
          default: ADD_FAILURE() << "opcode not modelled: " << sdk::opcode_name(in.op); return false;
        }
        if (moved) break;
        if (in.result) v[in.result] = mask(r, w);
      }
      if (!moved) {
        ADD_FAILURE() << "fell off block " << block;
        return false;
      }
    }
    ADD_FAILURE() << "step limit";
    return false;
  }
};

// ------------------------------------------------------------------ the pipeline on real kernels

const std::vector<std::string> kKernelNames = {
    "vec_add",   "grid_stride_scale", "dot",           "block_reduce",   "warp_reduce4",
    "histogram", "collatz_steps",     "signed_divmod", "bits_and_votes",
};

class Kernels : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string file = std::string(QGPU_FRONTEND_INPUTS) + "/" + GetParam();
    ClangOptions clang;
    clang.prelude = QGPU_PRELUDE;
    if (GetParam().ends_with(".cu") && find_program(clang.clang).empty()) GTEST_SKIP() << "clang++-16 not installed";
    auto r = compile_source(sdk::SourceInput{file, sdk::SourceLanguage::kAuto}, clang, PipelineOptions{});
    ASSERT_TRUE(r) << r.error().to_string();
    module_ = std::move(r->module);
  }
  const KernelIR& kernel(const std::string& name) {
    for (const KernelIR& k : module_.kernels) {
      if (k.name == name) return k;
    }
    ADD_FAILURE() << "no kernel " << name;
    return module_.kernels.front();
  }
  sdk::KernelModule module_;
};

// The frontend lists blocks in reverse post-order, so every use comes after its definition in the
// text (stronger than verify_kernel_ir, which does not look at order).
void expect_defs_before_uses(const KernelIR& k) {
  std::vector<bool> seen(k.value_types.size(), false);
  for (std::size_t b = 0; b < k.blocks.size(); ++b) {
    for (sdk::ValueId a : k.blocks[b].args) seen[a] = true;
    for (const Instr& in : k.blocks[b].instrs) {
      for (sdk::ValueId v : in.operands) EXPECT_TRUE(seen[v]) << k.name << " ^bb" << b << " uses %" << v << " early";
      for (const sdk::BranchTarget& t : in.targets) {
        for (sdk::ValueId v : t.args) EXPECT_TRUE(seen[v]) << k.name << " ^bb" << b << " passes %" << v << " early";
      }
      if (in.result) seen[in.result] = true;
    }
  }
}

TEST_P(Kernels, AllEntriesVerify) {
  for (const KernelIR& k : module_.kernels) expect_defs_before_uses(k);
  ASSERT_EQ(module_.kernels.size(), kKernelNames.size());
  for (std::size_t i = 0; i < kKernelNames.size(); ++i) {
    EXPECT_EQ(module_.kernels[i].name, kKernelNames[i]);
    EXPECT_TRUE(sdk::verify_kernel_ir(module_.kernels[i]).is_ok());
  }
  const KernelIR& va = kernel("vec_add");
  ASSERT_EQ(va.params.size(), 4u);
  EXPECT_EQ(va.params[0].kind, sdk::KernelParam::Kind::kPointer);
  EXPECT_EQ(va.params[3].kind, sdk::KernelParam::Kind::kScalar);
  EXPECT_EQ(va.params[3].type, IrType::kI32);
  const KernelIR& br = kernel("block_reduce");
  ASSERT_EQ(br.shared.size(), 1u);
  EXPECT_EQ(br.shared[0].bytes, 64u * 4u);
}

constexpr std::uint64_t kA = 0x10000, kB = 0x20000, kC = 0x30000, kD = 0x40000;

TEST_P(Kernels, VecAddRespectsTheGuard) {
  Evaluator ev;
  const int n = 5;
  for (int i = 0; i < 8; ++i) {
    ev.store(kA + 4 * i, static_cast<std::uint32_t>(i * 7 - 20), 4);
    ev.store(kB + 4 * i, static_cast<std::uint32_t>(1000 + i), 4);
    ev.store(kC + 4 * i, 0xdeadbeef, 4);
  }
  for (std::uint32_t t = 0; t < 4; ++t) {
    for (std::uint32_t c = 0; c < 2; ++c) {
      ASSERT_TRUE(ev.run(kernel("vec_add"), {kA, kB, kC, n}, {t, 4, c, 2}));
    }
  }
  for (int i = 0; i < 8; ++i) {
    const std::uint32_t expected = i < n ? static_cast<std::uint32_t>(i * 7 - 20 + 1000 + i) : 0xdeadbeef;
    EXPECT_EQ(ev.load(kC + 4 * i, 4), expected) << "element " << i;
  }
}

TEST_P(Kernels, GridStrideScaleCoversEveryElement) {
  Evaluator ev;
  const int n = 11, k = -3;
  for (int i = 0; i < n + 1; ++i) ev.store(kA + 4 * i, static_cast<std::uint32_t>(i), 4);
  for (std::uint32_t t = 0; t < 2; ++t) {
    for (std::uint32_t c = 0; c < 2; ++c) {
      ASSERT_TRUE(ev.run(kernel("grid_stride_scale"), {kA, n, static_cast<std::uint32_t>(k)}, {t, 2, c, 2}));
    }
  }
  for (int i = 0; i < n; ++i) EXPECT_EQ(ev.load(kA + 4 * i, 4), static_cast<std::uint32_t>(i * k + 1)) << i;
  EXPECT_EQ(ev.load(kA + 4 * n, 4), static_cast<std::uint32_t>(n));
}

TEST_P(Kernels, DotAndHistogramAccumulateAtomically) {
  Evaluator ev;
  const int n = 6;
  std::int64_t dot = 0;
  const unsigned nbins = 3;
  std::vector<unsigned> bins(nbins, 0);
  for (int i = 0; i < n; ++i) {
    ev.store(kA + 4 * i, static_cast<std::uint32_t>(i - 2), 4);
    ev.store(kB + 4 * i, static_cast<std::uint32_t>(3 * i + 1), 4);
    ev.store(kD + 4 * i, static_cast<std::uint32_t>(i * i + 5), 4);
    dot += (i - 2) * (3 * i + 1);
    bins[(i * i + 5) % nbins]++;
  }
  ev.store(kC, 0, 4);
  for (int b = 0; b < 3; ++b) ev.store(kB + 0x1000 + 4 * b, 0, 4);
  for (std::uint32_t t = 0; t < 8; ++t) {
    ASSERT_TRUE(ev.run(kernel("dot"), {kA, kB, kC, n}, {t, 8, 0, 1}));
    ASSERT_TRUE(ev.run(kernel("histogram"), {kD, kB + 0x1000, n, nbins}, {t, 8, 0, 1}));
  }
  EXPECT_EQ(ev.load(kC, 4), static_cast<std::uint32_t>(dot));
  for (unsigned b = 0; b < nbins; ++b) EXPECT_EQ(ev.load(kB + 0x1000 + 4 * b, 4), bins[b]) << "bin " << b;
}

TEST_P(Kernels, CollatzLoopCountsSteps) {
  Evaluator ev;
  const std::vector<int> in = {1, 2, 3, 6, 7, 27, -5, 0};
  for (std::size_t i = 0; i < in.size(); ++i) ev.store(kA + 4 * i, static_cast<std::uint32_t>(in[i]), 4);
  for (std::uint32_t t = 0; t < in.size(); ++t) {
    ASSERT_TRUE(ev.run(kernel("collatz_steps"), {kA, kB}, {t, 8, 0, 1}));
  }
  for (std::size_t i = 0; i < in.size(); ++i) {
    int x = in[i], steps = 0;
    while (x > 1) {
      x = (x & 1) ? 3 * x + 1 : x / 2;
      ++steps;
    }
    EXPECT_EQ(ev.load(kB + 4 * i, 4), static_cast<std::uint32_t>(steps)) << "input " << in[i];
  }
}

TEST_P(Kernels, SignedDivisionTruncatesTowardZero) {
  Evaluator ev;
  const std::vector<std::pair<int, int>> cases = {{7, 2}, {-7, 2}, {7, -2}, {-7, -2}, {0, 5}, {-2147483647, 3}};
  for (std::size_t i = 0; i < cases.size(); ++i) {
    ev.store(kA + 4 * i, static_cast<std::uint32_t>(cases[i].first), 4);
    ev.store(kB + 4 * i, static_cast<std::uint32_t>(cases[i].second), 4);
  }
  for (std::uint32_t t = 0; t < cases.size(); ++t) {
    ASSERT_TRUE(ev.run(kernel("signed_divmod"), {kA, kB, kC, kD}, {t, 8, 0, 1}));
  }
  for (std::size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(ev.load(kC + 4 * i, 4), static_cast<std::uint32_t>(cases[i].first / cases[i].second)) << i;
    EXPECT_EQ(ev.load(kD + 4 * i, 4), static_cast<std::uint32_t>(cases[i].first % cases[i].second)) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Producers, Kernels, ::testing::Values("kernels.cu", "kernels.nvcc.ptx"),
                         [](const auto& info) { return info.param.ends_with(".cu") ? "Clang" : "Nvcc"; });

// more.cu: control flow (switch, nested loops with break/return), CAS loops, every atomic, 64-bit and
// sub-word arithmetic, an inlined helper, 2-D indexing.
class MoreKernels : public Kernels {};

TEST_P(MoreKernels, AllEntriesVerifyInOrder) {
  ASSERT_EQ(module_.kernels.size(), 9u);
  for (const KernelIR& k : module_.kernels) {
    EXPECT_TRUE(sdk::verify_kernel_ir(k).is_ok()) << sdk::verify_kernel_ir(k).to_string();
    expect_defs_before_uses(k);
  }
}

TEST_P(MoreKernels, SwitchPicksTheRightCase) {
  Evaluator ev;
  const std::vector<int> in = {0, 1, 2, 3, 4, 5, 6, 7, 8, -7, 13, -100};
  for (std::size_t i = 0; i < in.size(); ++i) ev.store(kA + 4 * i, static_cast<std::uint32_t>(in[i]), 4);
  for (std::uint32_t t = 0; t < in.size(); ++t) ASSERT_TRUE(ev.run(kernel("switchy"), {kA, kB}, {t, 16, 0, 1}));
  for (std::size_t i = 0; i < in.size(); ++i) {
    const int x = in[i];
    int r;
    switch (x & 7) {
      case 0: r = x * 3; break;
      case 1: r = x - 9; break;
      case 2: r = static_cast<int>(static_cast<unsigned>(x) << 2); break;
      case 5: r = x ^ 0x55; break;
      default: r = -x; break;
    }
    EXPECT_EQ(ev.load(kB + 4 * i, 4), static_cast<std::uint32_t>(r)) << "x = " << x;
  }
}

TEST_P(MoreKernels, NestedLoopsBreakAndReturn) {
  for (int n : {0, 1, 4, 9, 40}) {
    Evaluator ev;
    ev.store(kA, 0xabcdef, 4);
    ASSERT_TRUE(ev.run(kernel("nested"), {kA, static_cast<std::uint32_t>(n)}, {0, 1, 0, 1}));
    int s = 0;
    bool returned = false;
    for (int i = 0; i < n && !returned; ++i) {
      for (int j = 0; j < i; ++j) {
        if ((i * j) % 5 == 3) break;
        s += i ^ j;
      }
      if (s > 1000) returned = true;
    }
    EXPECT_EQ(ev.load(kA, 4), returned ? 0xabcdefu : static_cast<std::uint32_t>(s)) << "n = " << n;
  }
}

TEST_P(MoreKernels, CasLoopAndEveryAtomic) {
  Evaluator ev;
  ev.store(kA, static_cast<std::uint32_t>(-50), 4);
  for (int v : {-70, 12, 3, 40, -2}) ASSERT_TRUE(ev.run(kernel("cas_max"), {kA, static_cast<std::uint32_t>(v)}, {}));
  EXPECT_EQ(ev.load(kA, 4), 40u);

  const std::vector<std::uint32_t> p0 = {9, 0}, q0 = {1, 10, 0xff, 4, 9};
  for (std::size_t i = 0; i < p0.size(); ++i) ev.store(kB + 4 * i, p0[i], 4);
  for (std::size_t i = 0; i < q0.size(); ++i) ev.store(kC + 4 * i, q0[i], 4);
  ASSERT_TRUE(ev.run(kernel("misc_atomics"), {kB, kC}, {}));
  ASSERT_TRUE(ev.run(kernel("misc_atomics"), {kB, kC}, {}));
  // Two launches: inc(9 -> 10 -> 0 at limit 10), dec(0 -> 10 -> 9), exch 5, sub 3 twice, and 6, min -1, max 7.
  EXPECT_EQ(ev.load(kB, 4), 0u);
  EXPECT_EQ(ev.load(kB + 4, 4), 9u);
  EXPECT_EQ(ev.load(kC, 4), 5u);
  EXPECT_EQ(ev.load(kC + 4, 4), 4u);
  EXPECT_EQ(ev.load(kC + 8, 4), 6u);
  EXPECT_EQ(ev.load(kC + 12, 4), 0xffffffffu);
  EXPECT_EQ(ev.load(kC + 16, 4), 9u);
}

TEST_P(MoreKernels, WideAndSubWordArithmetic) {
  Evaluator ev;
  const std::vector<long long> a = {5, -5, 1LL << 40, -(1LL << 35) + 7};
  const std::vector<signed char> c = {3, -4, 127, -128};
  const unsigned n = 3;
  for (std::size_t i = 0; i < a.size(); ++i) {
    ev.store(kA + 8 * i, static_cast<std::uint64_t>(a[i]), 8);
    ev.store(kC + i, static_cast<std::uint8_t>(c[i]), 1);
  }
  for (std::uint32_t t = 0; t < a.size(); ++t) {
    ASSERT_TRUE(ev.run(kernel("wide_math"), {kA, kB, kC, kD, n}, {t, 4, 0, 1}));
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    const long long b = a[i] * 3 + (a[i] >> 5) - static_cast<long long>(c[i]);
    const short d =
        static_cast<short>(static_cast<short>(c[i] * 2) + static_cast<short>(i / n) + static_cast<short>(i % 7u));
    EXPECT_EQ(ev.load(kB + 8 * i, 8), static_cast<std::uint64_t>(b)) << i;
    EXPECT_EQ(ev.load(kD + 2 * i, 2), static_cast<std::uint16_t>(d)) << i;
  }
}

TEST_P(MoreKernels, HelperIsInlined) {
  Evaluator ev;
  for (std::uint32_t t = 0; t < 5; ++t) ASSERT_TRUE(ev.run(kernel("calls_helper"), {kA}, {t, 5, 0, 1}));
  for (std::uint32_t t = 0; t < 5; ++t) EXPECT_EQ(ev.load(kA + 4 * t, 4), t * t + 1);
}

INSTANTIATE_TEST_SUITE_P(Producers, MoreKernels, ::testing::Values("more.cu", "more.nvcc.ptx"),
                         [](const auto& info) { return info.param.ends_with(".cu") ? "Clang" : "Nvcc"; });

// With CUDA input, KernelIR locations are positions in the .cu file (from clang's .loc lines).
TEST(Pipeline, CudaLocationsPointIntoTheSource) {
  ClangOptions clang;
  clang.prelude = QGPU_PRELUDE;
  if (find_program(clang.clang).empty()) GTEST_SKIP() << "clang++-16 not installed";
  const std::string file = std::string(QGPU_FRONTEND_INPUTS) + "/kernels.cu";
  auto r = compile_source(sdk::SourceInput{file, sdk::SourceLanguage::kAuto}, clang, PipelineOptions{});
  ASSERT_TRUE(r) << r.error().to_string();
  auto find = [&](const std::string& name) -> const KernelIR* {
    for (const KernelIR& k : r->module.kernels) {
      if (k.name == name) return &k;
    }
    return nullptr;
  };
  auto lines_of = [](const KernelIR& k, Opcode op) {
    std::vector<std::uint32_t> lines;
    for (const sdk::Block& b : k.blocks) {
      for (const Instr& in : b.instrs) {
        if (in.op == op) lines.push_back(in.loc.line);
      }
    }
    return lines;
  };
  const KernelIR* va = find("vec_add");
  ASSERT_NE(va, nullptr);
  EXPECT_EQ(va->source_path, file);
  EXPECT_EQ(va->loc.line, 2u);  // the __global__ line
  EXPECT_EQ(lines_of(*va, Opcode::kStore), std::vector<std::uint32_t>{4});
  EXPECT_EQ(lines_of(*va, Opcode::kLoad), (std::vector<std::uint32_t>{4, 4}));
  const KernelIR* dm = find("signed_divmod");
  ASSERT_NE(dm, nullptr);
  EXPECT_EQ(lines_of(*dm, Opcode::kSDiv), std::vector<std::uint32_t>{51});
  EXPECT_EQ(lines_of(*dm, Opcode::kSRem), std::vector<std::uint32_t>{52});
}

// With PTX input, they are positions in the PTX file.
TEST(Pipeline, PtxLocationsPointIntoThePtx) {
  const std::string file = std::string(QGPU_FRONTEND_INPUTS) + "/kernels.nvcc.ptx";
  auto r = compile_source(sdk::SourceInput{file, sdk::SourceLanguage::kAuto}, ClangOptions{}, PipelineOptions{});
  ASSERT_TRUE(r) << r.error().to_string();
  const KernelIR& k = r->module.kernels.at(0);
  EXPECT_EQ(k.source_path, file);
  EXPECT_EQ(k.loc.line, 17u);  // ".visible .entry _Z7vec_addPKiS0_Pii(" (after the added first comment line)
  std::uint32_t store_line = 0;
  for (const sdk::Block& b : k.blocks) {
    for (const Instr& in : b.instrs) {
      if (in.op == Opcode::kStore) store_line = in.loc.line;
    }
  }
  EXPECT_EQ(store_line, 50u);  // "st.global.u32 [%rd10], %r8;"
}

// PTX bfe/bfi as the ISA manual defines them, bit by bit: the reference for the lowering to shifts.
std::uint32_t ptx_bfe32(std::uint32_t a, int pos, int len, bool is_signed) {
  const int msb = 31;
  const int sbit_index = std::min(pos + len - 1, msb);
  const std::uint32_t sbit = is_signed && sbit_index >= 0 ? (a >> sbit_index) & 1 : 0;
  std::uint32_t d = 0;
  for (int i = 0; i <= msb; ++i) {
    const std::uint32_t bit = (i < len && pos + i <= msb) ? (a >> (pos + i)) & 1 : sbit;
    d |= bit << i;
  }
  return d;
}
std::uint32_t ptx_bfi32(std::uint32_t f, std::uint32_t b, int pos, int len) {
  std::uint32_t d = b;
  for (int i = 0; i < len && pos + i <= 31; ++i) d = (d & ~(1u << (pos + i))) | (((f >> i) & 1) << (pos + i));
  return d;
}

TEST(Pipeline, BitFieldsMatchTheIsaDefinition) {
  struct Case {
    const char* op;
    int pos, len;
  };
  const std::vector<Case> cases = {{"bfe.u32", 3, 3},  {"bfe.u32", 0, 32}, {"bfe.u32", 28, 8}, {"bfe.u32", 40, 4},
                                   {"bfe.u32", 5, 0},  {"bfe.s32", 8, 4},  {"bfe.s32", 0, 1},  {"bfe.s32", 30, 9},
                                   {"bfe.s32", 40, 3}, {"bfe.s32", 0, 32}, {"bfi.b32", 4, 4},  {"bfi.b32", 0, 32},
                                   {"bfi.b32", 30, 5}, {"bfi.b32", 33, 2}, {"bfi.b32", 7, 0}};
  std::string ptx =
      ".version 7.0\n.target sm_75\n.address_size 64\n"
      ".visible .entry bf(.param .u64 out, .param .u32 x, .param .u32 y)\n{\n"
      ".reg .b32 %r<40>;\n.reg .b64 %rd<2>;\n"
      "ld.param.u64 %rd1, [out];\nld.param.u32 %r1, [x];\nld.param.u32 %r2, [y];\n";
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const bool insert = std::string(cases[i].op) == "bfi.b32";
    ptx += std::string(cases[i].op) + " %r" + std::to_string(10 + i) + (insert ? ", %r2, %r1, " : ", %r1, ") +
           std::to_string(cases[i].pos) + ", " + std::to_string(cases[i].len) + ";\n";
    ptx += "st.global.u32 [%rd1+" + std::to_string(4 * i) + "], %r" + std::to_string(10 + i) + ";\n";
  }
  ptx += "ret;\n}\n";
  auto r = compile_ptx(ptx, "bf.ptx", PipelineOptions{});
  if (!r) {
    // bfe.s32 with length 0 is the one form rejected; this list has none.
    FAIL() << r.error().to_string();
  }
  for (std::uint32_t x : {0u, 1u, 0x80000000u, 0xdeadbeefu, 0x12345678u, 0xffffffffu, 0x7ffffff0u}) {
    const std::uint32_t y = ~x * 2654435761u;
    Evaluator ev;
    ASSERT_TRUE(ev.run(r->module.kernels.at(0), {kA, x, y}, {}));
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      const std::string op = c.op;
      const std::uint32_t expected =
          op == "bfi.b32" ? ptx_bfi32(y, x, c.pos, c.len) : ptx_bfe32(x, c.pos, c.len, op == "bfe.s32");
      EXPECT_EQ(ev.load(kA + 4 * i, 4), expected) << op << " pos " << c.pos << " len " << c.len << " x " << x;
    }
  }
}

TEST(Pipeline, ReportsClangErrorsAsOneLine) {
  ClangOptions clang;
  clang.prelude = QGPU_PRELUDE;
  if (find_program(clang.clang).empty()) GTEST_SKIP() << "clang++-16 not installed";
  const auto dir = std::filesystem::temp_directory_path() / "qgpu_frontend_test";
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "broken.cu").string();
  {
    std::FILE* f = std::fopen(file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("__global__ void k(int* p) {\n  p[0] = 1\n}\n", f);
    std::fclose(f);
  }
  auto r = compile_source(sdk::SourceInput{file, sdk::SourceLanguage::kAuto}, clang, PipelineOptions{});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().to_string(), file + ":2:11: error: expected ';' after expression");
  std::filesystem::remove_all(dir);
}

TEST(Pipeline, MissingClangIsNamed) {
  ClangOptions clang;
  clang.clang = "clang-that-does-not-exist-42";
  clang.prelude = QGPU_PRELUDE;
  auto r = cuda_to_ptx(std::string(QGPU_FRONTEND_INPUTS) + "/kernels.cu", clang);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(),
            "clang driver 'clang-that-does-not-exist-42' not found on PATH (frontend option 'clang')");
}

TEST(CudaSignatures, ParameterNamesFromSource) {
  const std::string src = R"(
    // __global__ void commented(int* x) {}
    template <int N> __device__ int helper(int a);
    extern "C" __global__ void dot(const int* __restrict__ a, const int *b, int* out, int n) {}
    __global__ void
    scale(int* data /* the array */, unsigned factor = 2) {}
    __global__ void unnamed(int*, int n) {}
    __global__ void arrays(int v[4], int (*table)[2]) {}
    __global__ void nothing(void) {}
  )";
  using Names = std::vector<std::string>;
  EXPECT_EQ(cuda_param_names(src, "dot"), (Names{"a", "b", "out", "n"}));
  EXPECT_EQ(cuda_param_names(src, "_Z5scalePij"), (Names{"data", "factor"}));  // mangled C++ name
  EXPECT_EQ(cuda_param_names(src, "unnamed"), (Names{"", "n"}));
  EXPECT_EQ(cuda_param_names(src, "arrays"), (Names{"v", ""}));
  EXPECT_EQ(cuda_param_names(src, "nothing"), Names{});
  EXPECT_EQ(cuda_param_names(src, "commented"), std::nullopt);
  EXPECT_EQ(cuda_param_names(src, "helper"), std::nullopt);
}

// Overloads: a PTX entry does not say which declaration it is, so names are given only when the
// declarations agree; an unnamed prototype does not count against its definition.
TEST(CudaSignatures, OverloadsAndPrototypes) {
  const std::string src = R"(
    __global__ void same(int* a, int k);
    __global__ void same(unsigned* a, unsigned k) {}
    __global__ void differ(int* a) {}
    __global__ void differ(unsigned* b) {}
    __global__ void proto(int*, int);
    __global__ void proto(int* data, int n) {}
  )";
  using Names = std::vector<std::string>;
  EXPECT_EQ(cuda_param_names(src, "same"), (Names{"a", "k"}));
  EXPECT_EQ(cuda_param_names(src, "differ"), std::nullopt);
  EXPECT_EQ(cuda_param_names(src, "proto"), (Names{"data", "n"}));
}

// ------------------------------------------------------------------ kernel names (source_names.h)

TEST(SourceNames, Demangled) {
  EXPECT_EQ(demangle("_Z3dblPii"), "dbl(int*, int)");
  EXPECT_EQ(demangle("dot"), "dot");
  EXPECT_EQ(demangle("_Znot_mangled"), "_Znot_mangled");
  EXPECT_EQ(function_name("_Z3dblPii"), "dbl");
  EXPECT_EQ(function_name("_ZN3img3incEPi"), "img::inc");
  EXPECT_EQ(function_name("_Z4fillIiEvPT_S0_"), "fill");  // "void fill<int>(int*, int)"
  EXPECT_EQ(function_name("_ZN12_GLOBAL__N_11kEPi"), "(anonymous namespace)::k");
  EXPECT_EQ(function_name("vprintf"), "vprintf");
  EXPECT_EQ(declared_identifier("_ZN3img3incEPi"), "inc");
  EXPECT_EQ(declared_identifier("_Z4fillIjEvPT_S0_"), "fill");
}

TEST(SourceNames, ShortestDistinctForms) {
  using Names = std::vector<std::string>;
  // Unique plain names stay plain, C names unchanged.
  EXPECT_EQ(kernel_source_names({"_Z3dblPii", "_ZN3img3incEPi", "_Z4fillIiEvPT_S0_", "dot"}),
            (Names{"dbl", "img::inc", "fill", "dot"}));
  // Two instantiations: template arguments; overloads: the parameter list.
  EXPECT_EQ(kernel_source_names({"_Z4fillIiEvPT_S0_", "_Z4fillIjEvPT_S0_", "_Z5scalePii", "_Z5scalePjj"}),
            (Names{"fill<int>", "fill<unsigned int>", "scale(int*, int)", "scale(unsigned int*, unsigned int)"}));
  // A C kernel and a C++ overload of the same name.
  EXPECT_EQ(kernel_source_names({"f", "_Z1fPi"}), (Names{"f", "f(int*)"}));
}

// ------------------------------------------------------------------ frontend option clang_flags

TEST(ClangFlags, AllowedFlagsPassThrough) {
  auto f = parse_clang_flags("  -DN=4 -fno-unroll-loops\t-I/inc -UX -Wall -w -std=c++17 -mllvm -unroll-threshold=0 ");
  ASSERT_TRUE(f) << f.error().to_string();
  EXPECT_EQ(*f, (std::vector<std::string>{"-DN=4", "-fno-unroll-loops", "-I/inc", "-UX", "-Wall", "-w", "-std=c++17",
                                          "-mllvm", "-unroll-threshold=0"}));
  auto empty = parse_clang_flags("");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
}

TEST(ClangFlags, RefusedWithOneLineNamingTheFlag) {
  const std::pair<const char*, const char*> cases[] = {
      {"-o /tmp/x", "'-o' is not allowed (allowed: -D<macro>[=<value>] -U<macro> -I<dir> -f<option>"},
      {"-O0", "'-O0' is not allowed (set the frontend option opt_level instead)"},
      {"-g", "'-g' is not allowed (allowed:"},
      {"kernel2.cu", "'kernel2.cu' is not allowed (not a flag: the frontend passes clang one source file)"},
      {"-D N=4", "'-D' is not allowed (write the value joined to the flag, e.g. -DN=4 or -I/path)"},
      {"-fplugin=x.so", "'-fplugin=x.so' is not allowed (it changes what clang produces)"},
      {"-Xclang -load", "'-Xclang' is not allowed (it changes what clang produces)"},
      {"-DX=\"a b\"", "'-DX=\"a' is not allowed (flags are split at white space; quotes"},
      {"-mllvm", "'-mllvm' is not allowed (it needs an LLVM option after it"},
      {"--cuda-gpu-arch=sm_80", "(set the frontend options gpu_arch and ptx_features instead)"},
  };
  for (const auto& [flags, message] : cases) {
    auto f = parse_clang_flags(flags);
    ASSERT_FALSE(f) << flags;
    EXPECT_NE(f.error().message().find(std::string("frontend option clang_flags: ")), std::string::npos) << flags;
    EXPECT_NE(f.error().message().find(message), std::string::npos) << f.error().message();
    EXPECT_EQ(f.error().message().find('\n'), std::string::npos);
  }
}

// ------------------------------------------------------------------ refused calls, diagnostics in generated PTX

// A call is refused at its CUDA line (the latest .loc of the .cu file), before the .param declarations
// around it, and a message names no generated PTX file unless it was kept.
TEST(Parser, RefusesCallsAtTheCudaLine) {
  const std::string ptx =
      ".version 7.0\n.target sm_75\n.address_size 64\n"
      ".visible .func (.param .b32 func_retval0) _Z5twicei(.param .b32 _Z5twicei_param_0)\n{\n ret;\n}\n"
      ".visible .entry _Z1kPi(.param .u64 _Z1kPi_param_0)\n{\n"
      " .reg .b32 %r<4>;\n .loc 1 3 0\n .loc 2 53 3\n"
      " { .param .b32 param0;\n st.param.b32 [param0+0], %r2;\n .param .b32 retval0;\n"
      " call.uni (retval0), _Z5twicei, (param0);\n }\n ret;\n}\n"
      ".file 1 \"/src/k.cu\"\n.file 2 \"/usr/include/vars.h\"\n";
  auto generated = parse_ptx(ptx, DiagnosticFiles{"/src/k.cu.ptx", false, "/src/k.cu"});
  ASSERT_FALSE(generated);
  EXPECT_EQ(generated.error().to_string(),
            "/src/k.cu:3:0: error: device function 'twice' was not inlined (a PTX call with .param arguments): the "
            "machine runs fully inlined kernels; declare it __forceinline__ (not __noinline__, and not recursive)");
  auto kept = parse_ptx(ptx, DiagnosticFiles{"/keep/k.cu.ptx", true, "/src/k.cu"});
  ASSERT_FALSE(kept);
  EXPECT_NE(kept.error().to_string().find("(generated PTX: /keep/k.cu.ptx:16:2)"), std::string::npos)
      << kept.error().to_string();
  auto plain = parse_ptx(ptx, "k.ptx");
  ASSERT_FALSE(plain);
  EXPECT_EQ(plain.error().to_string().rfind("k.ptx:16:2: error: device function 'twice' was not inlined", 0), 0u)
      << plain.error().to_string();
}

TEST(Parser, RefusesPrintfAndExternalCalls) {
  const std::string head =
      ".version 7.0\n.target sm_75\n.address_size 64\n"
      ".extern .func (.param .b32 func_retval0) vprintf(.param .b64 a, .param .b64 b);\n"
      ".global .align 1 .b8 $str[3] = {104, 105, 0};\n"
      ".visible .entry k()\n{\n .local .align 8 .b8 __local_depot0[8];\n";
  auto printf_call = parse_ptx(head + " call.uni (retval0), vprintf, (param0, param1);\n ret;\n}\n", "p.ptx");
  ASSERT_FALSE(printf_call);
  EXPECT_EQ(printf_call.error().to_string(),
            "p.ptx:9:2: error: device printf is not supported (PTX calls vprintf): the machine has no output stream; "
            "store the values in an output array and print them on the host");
  // Declared like vprintf (.extern .func ...;), followed by a .global initialiser in braces.
  auto external = parse_ptx(
      ".version 7.0\n.extern .func __assertfail(.param .b64 a);\n"
      ".global .align 1 .b8 $str[2] = {107, 0};\n"
      ".visible .entry k()\n{\n call.uni __assertfail, (param0);\n ret;\n}\n",
      "a.ptx");
  ASSERT_FALSE(external);
  EXPECT_NE(external.error().message().find("call to external device function '__assertfail' is not supported"),
            std::string::npos);
  auto indirect = parse_ptx(head + " call (retval0), %rd5, (param0), prototype_0;\n ret;\n}\n", "i.ptx");
  ASSERT_FALSE(indirect);
  EXPECT_NE(indirect.error().message().find("indirect call (a function pointer)"), std::string::npos);
  // A .func that calls printf but is never called by a kernel is skipped, as before.
  auto unused = parse_ptx(
      ".version 7.0\n.target sm_75\n.address_size 64\n"
      ".visible .func f()\n{\n call.uni vprintf, (param0);\n ret;\n}\n"
      ".visible .entry k()\n{\n ret;\n}\n",
      "u.ptx");
  EXPECT_TRUE(unused) << unused.error().to_string();
}

// Without a CUDA position, an error in generated PTX names the .cu file and how to keep the PTX.
TEST(Parser, ErrorsInGeneratedPtxNameNoMissingFile) {
  auto r = parse_ptx(".version 7.0\n.visible .entry k()\n{\n  add.s32 %r1, ;\n}\n",
                     DiagnosticFiles{"/src/k.cu.ptx", false, "/src/k.cu"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().to_string(),
            "/src/k.cu: error: expected an operand, found ';' (line 4:16 of the PTX clang generated; frontend option "
            "keep_ptx: DIR writes it to DIR)");
}

}  // namespace
}  // namespace qgpu::ptx
