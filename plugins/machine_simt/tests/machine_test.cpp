// machine_simt tests: ISA table and encoding, per-instruction semantics
// against independent C++ expressions, the lowering's expansions, whole
// kernels (hand-built KernelIR shaped like clang-16 -O2 output) against plain
// C++ computations, limits and diagnostics.
#include <gtest/gtest.h>

#include <bit>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>
#include <regex>
#include <sstream>

#include "interp.h"
#include "ir_builder.h"
#include "isa.h"
#include "kernels.h"
#include "lower.h"

namespace qgpu::simt::test {
namespace {

using sdk::AddressSpace;
using sdk::CmpPred;
using sdk::LaunchArg;

using test::arr;
using test::scalar;

sdk::Expected<sdk::LaunchResult> run(const sdk::KernelIR& k, sdk::LaunchShape shape, const std::vector<LaunchArg>& args,
                                     const MachineConfig& cfg = {}, sdk::InterpretOptions opt = {}) {
  auto p = lower_kernel(k, shape, cfg);
  if (!p) return p.error();
  return interpret_program(**p, args, opt);
}

std::int64_t stat(const sdk::LaunchResult& r, const std::string& name) {
  for (const auto& [k, v] : r.stats)
    if (k == name) return v;
  return -1;
}

const std::vector<std::uint32_t> kEdge = {0u,          1u,          2u,          3u,          31u,         32u,
                                          33u,         63u,         64u,         0x7fffffffu, 0x80000000u, 0x80000001u,
                                          0xffffffffu, 0xfffffffeu, 0xffffffe0u, 12345u,      0xdeadbeefu};

std::vector<std::pair<std::uint32_t, std::uint32_t>> operand_pairs(int random_count, std::uint32_t seed) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> v;
  for (std::uint32_t a : kEdge)
    for (std::uint32_t b : kEdge) v.emplace_back(a, b);
  std::mt19937 rng(seed);
  for (int i = 0; i < random_count; ++i) {
    std::uint32_t a = rng(), b = rng();
    if (i % 4 == 1) b &= 63;  // shift amounts around 32
    if (i % 4 == 2) a = static_cast<std::uint32_t>(static_cast<std::int32_t>(rng() % 201) - 100);
    v.emplace_back(a, b);
  }
  return v;
}

// ---------------------------------------------------------------------------- ISA table and encoding

TEST(Isa, TableFitsTheEncoding) {
  EXPECT_LE(kOpCount, 64);
  std::set<std::string_view> names;
  for (int i = 0; i < kOpCount; ++i) {
    const OpInfo& info = op_info(static_cast<Op>(i));
    EXPECT_EQ(static_cast<int>(info.op), i);
    EXPECT_TRUE(names.insert(info.mnemonic).second) << info.mnemonic;
  }
}

TEST(Isa, EncodingMatchesTheDocumentedLayout) {
  // add r3, r1, 16: opcode 2 | d 3 << 6 | a 1 << 10 | b-kind imm (1) << 24 | 16 << 32 (docs/ISA.md "Encoding").
  Instr in;
  in.op = Op::kAdd;
  in.d = 3;
  in.a = 1;
  in.bk = Kind::kImm;
  in.imm = 16;
  EXPECT_EQ(encode(in), 0x00000010010004C2ull);
  EXPECT_EQ(disassemble(in), "add r3, r1, 16");
}

TEST(Isa, EncodeDecodeRoundTrip) {
  std::mt19937 rng(7);
  for (int i = 0; i < 5000; ++i) {
    Instr in;
    in.op = static_cast<Op>(rng() % kOpCount);
    in.d = rng() % 16, in.a = rng() % 16, in.b = rng() % 16, in.c = rng() % 16;
    in.ak = static_cast<Kind>(rng() % 2);
    in.bk = static_cast<Kind>(rng() % 2);
    if (rng() % 4 == 0) in.ak = Kind::kSpecial, in.a = rng() % static_cast<unsigned>(Special::kCount);
    in.flags = rng() % 64;
    in.imm = rng();
    Instr out;
    ASSERT_TRUE(decode(encode(in), out));
    EXPECT_EQ(out.op, in.op);
    EXPECT_EQ(std::tuple(out.d, out.a, out.b, out.c, out.ak, out.bk, out.flags, out.imm),
              std::tuple(in.d, in.a, in.b, in.c, in.ak, in.bk, in.flags, in.imm));
  }
  Instr out;
  EXPECT_FALSE(decode(63, out));              // opcode outside the table
  EXPECT_FALSE(decode(3ull << kPosAk, out));  // operand kind 3
}

TEST(Isa, DocsListEveryOpcode) {
  std::ifstream f(std::string(QGPU_SOURCE_DIR) + "/docs/ISA.md");
  ASSERT_TRUE(f) << "docs/ISA.md is missing";
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  EXPECT_NE(doc.find(isa_markdown_table()), std::string::npos)
      << "docs/ISA.md's instruction table is out of date; regenerate it with qgpu_simt_isa_doc";
  for (int i = 0; i < kOpCount; ++i)
    EXPECT_NE(doc.find("`" + std::string(op_info(static_cast<Op>(i)).mnemonic) + "`"), std::string::npos);
}

// ---------------------------------------------------------------------------- per-instruction semantics

// Independent definitions of the ALU rows (64-bit arithmetic, no shared helpers).
std::uint32_t ref_alu(Op op, std::uint32_t a, std::uint32_t b, std::uint32_t c) {
  const std::int64_t sa = static_cast<std::int32_t>(a), sb = static_cast<std::int32_t>(b);
  const std::uint64_t ua = a, ub = b;
  switch (op) {
    case Op::kMov: return a;
    case Op::kAdd: return static_cast<std::uint32_t>(ua + ub);
    case Op::kSub: return static_cast<std::uint32_t>(ua - ub);
    case Op::kMul: return static_cast<std::uint32_t>(ua * ub);
    case Op::kMad: return static_cast<std::uint32_t>(ua * ub + c);
    case Op::kAnd: return a & b;
    case Op::kOr: return a | b;
    case Op::kXor: return a ^ b;
    case Op::kNot: return 0xffffffffu - a;
    case Op::kShl: return ub < 32 ? static_cast<std::uint32_t>(ua << ub) : 0u;
    case Op::kShr: return ub < 32 ? static_cast<std::uint32_t>(ua >> ub) : 0u;
    case Op::kSra: return static_cast<std::uint32_t>(sa >> std::min<std::uint64_t>(ub, 40));
    case Op::kMin: return static_cast<std::uint32_t>(std::min(sa, sb));
    case Op::kMax: return static_cast<std::uint32_t>(std::max(sa, sb));
    case Op::kMinU: return static_cast<std::uint32_t>(std::min(ua, ub));
    case Op::kMaxU: return static_cast<std::uint32_t>(std::max(ua, ub));
    case Op::kSetEq: return ua == ub;
    case Op::kSetNe: return ua != ub;
    case Op::kSetLt: return sa < sb;
    case Op::kSetLe: return sa <= sb;
    case Op::kSetGt: return sa > sb;
    case Op::kSetGe: return sa >= sb;
    case Op::kSetLtU: return ua < ub;
    case Op::kSetLeU: return ua <= ub;
    case Op::kSetGtU: return ua > ub;
    case Op::kSetGeU: return ua >= ub;
    case Op::kSel: return c ? a : b;
    default: ADD_FAILURE() << "no reference for " << op_info(op).mnemonic; return 0;
  }
}

// A hand-assembled two-block program: m[3] = op(m[0], m[1], m[2]) for ALU rows;
// for atomics: m[3] = old m[0], m[0] = op(old, m[1], m[2]).
Program one_instruction(Op op) {
  Program p;
  p.kernel_name = std::string(op_info(op).mnemonic);
  p.params = {{"m", true}};
  p.shape = {1, 1};
  auto ld = [](std::uint8_t d, std::uint32_t byte) {
    Slot s;
    s.in.op = Op::kLd;
    s.in.d = d;
    s.in.imm = byte;
    return s;
  };
  Slot x;
  x.in.op = op;
  x.in.d = 4;
  x.in.a = 1, x.in.b = 2, x.in.c = 3;
  MachineBlock b0, b1;
  if (is_atomic(op)) {
    b0.slots = {ld(2, 4), ld(3, 8)};
    x.in.a = 0;  // address r0 + 0
    b0.slots.push_back(x);
  } else {
    b0.slots = {ld(1, 0), ld(2, 4), ld(3, 8), x};
  }
  b0.term.in.op = Op::kBr;
  b0.term.in.imm = 1;
  Slot st;
  st.in.op = Op::kSt;
  st.in.b = 4;
  st.in.imm = 12;
  b1.slots = {st};
  b1.term.in.op = Op::kExit;
  p.blocks = {b0, b1};
  return p;
}

TEST(Semantics, AluInstructionsMatchIndependentDefinitions) {
  const auto pairs = operand_pairs(300, 11);
  int checked = 0;
  for (int i = 0; i < kOpCount; ++i) {
    const Op op = static_cast<Op>(i);
    const Format f = op_info(op).format;
    if (op == Op::kBallot || (f != kFmtDA && f != kFmtDAB && f != kFmtDABC)) continue;
    const Program p = one_instruction(op);
    std::mt19937 rng(i);
    for (auto [a, b] : pairs) {
      const std::uint32_t c = (rng() % 3 == 0) ? 0u : rng();
      auto r = interpret_program(p, {arr("m", {s32(a), s32(b), s32(c), 0})}, {});
      ASSERT_TRUE(r) << r.status().to_string();
      ASSERT_EQ(static_cast<std::uint32_t>(r->arrays[0].array[3]), ref_alu(op, a, b, c))
          << op_info(op).mnemonic << " a=" << a << " b=" << b << " c=" << c;
      ++checked;
    }
  }
  EXPECT_GT(checked, 20 * 500);
}

TEST(Semantics, AtomicsReturnOldAndStoreTheCombination) {
  auto ref = [](Op op, std::uint32_t old, std::uint32_t b, std::uint32_t c) -> std::uint32_t {
    const std::int64_t so = static_cast<std::int32_t>(old), sb = static_cast<std::int32_t>(b);
    switch (op) {
      case Op::kAtomAdd: return static_cast<std::uint32_t>(std::uint64_t{old} + b);
      case Op::kAtomMin: return static_cast<std::uint32_t>(std::min(so, sb));
      case Op::kAtomMax: return static_cast<std::uint32_t>(std::max(so, sb));
      case Op::kAtomMinU: return std::min(old, b);
      case Op::kAtomMaxU: return std::max(old, b);
      case Op::kAtomExch: return b;
      case Op::kAtomAnd: return old & b;
      case Op::kAtomOr: return old | b;
      case Op::kAtomXor: return old ^ b;
      case Op::kAtomInc: return old >= b ? 0 : old + 1;  // PTX atom.inc.u32
      case Op::kAtomDec: return (old == 0 || old > b) ? b : old - 1;
      case Op::kAtomCas: return old == b ? c : old;
      default: return 0;
    }
  };
  auto pairs = operand_pairs(100, 5);
  for (int i = 0; i < kOpCount; ++i) {
    const Op op = static_cast<Op>(i);
    if (!is_atomic(op)) continue;
    const Program p = one_instruction(op);
    for (auto [old, b] : pairs) {
      const std::uint32_t c = old ^ 0x5a5a5a5au;
      if (op == Op::kAtomCas && (old & 1)) b = old;  // take the swap branch half the time
      auto r = interpret_program(p, {arr("m", {s32(old), s32(b), s32(c), 0})}, {});
      ASSERT_TRUE(r) << r.status().to_string();
      EXPECT_EQ(static_cast<std::uint32_t>(r->arrays[0].array[3]), old) << op_info(op).mnemonic;
      EXPECT_EQ(static_cast<std::uint32_t>(r->arrays[0].array[0]), ref(op, old, b, c)) << op_info(op).mnemonic;
    }
  }
}

// CUDA's shfl.sync on a 32-lane warp, from the PTX ISA pseudo-code (c = ((32 - w) << 8) | clamp).
std::pair<int, bool> ptx_shfl_source(Op op, int lane, std::uint32_t b, int width) {
  const std::uint32_t c = ((32u - width) << 8) | (op == Op::kShflUp ? 0u : 0x1fu);
  const int seg = (c >> 8) & 0x1f;
  const int max_lane = (lane & seg) | (c & 0x1f & ~seg), min_lane = lane & seg;
  long j = lane;
  bool p = true;
  switch (op) {
    case Op::kShflUp:
      j = lane - static_cast<long>(b);
      p = j >= max_lane;
      break;
    case Op::kShflDown:
      j = lane + static_cast<long>(b);
      p = j <= max_lane;
      break;
    case Op::kShflBfly:
      j = lane ^ static_cast<long>(b);
      p = j <= max_lane;
      break;
    default:
      j = min_lane | (b & 0x1f & ~seg);
      p = j <= max_lane;
      break;
  }
  if (!p) j = lane;
  return {static_cast<int>(j), p};
}

TEST(Semantics, ShufflesMatchPtxWithinFourLanes) {
  for (Op op : {Op::kShflIdx, Op::kShflUp, Op::kShflDown, Op::kShflBfly})
    for (int width : {1, 2, 4})
      for (std::uint32_t b = 0; b < (op == Op::kShflBfly ? 4u : 7u); ++b)
        for (bool pred : {false, true}) {
          // r1 = 100 + 7 * tid; r2 = shfl r1 by b; m[tid] = r2
          Program p;
          p.kernel_name = "shfl";
          p.params = {{"m", true}};
          p.shape = {1, 4};
          Slot s0, s1, s2, s3;
          s0.in = {Op::kMul, 1, 0, 0, 0, Kind::kSpecial, Kind::kImm, 0, 7};
          s0.in.a = static_cast<std::uint8_t>(Special::kTid);
          s1.in = {Op::kAdd, 1, 1, 0, 0, Kind::kReg, Kind::kImm, 0, 100};
          s2.in = {op, 2, 1, 0, 0, Kind::kReg, Kind::kImm, 0, b};
          s2.in.flags = static_cast<std::uint8_t>((std::countr_zero(static_cast<unsigned>(width)) << kFlagWidthShift) |
                                                  (pred ? kFlagPred : 0));
          s3.in = {Op::kShl, 3, 0, 0, 0, Kind::kSpecial, Kind::kImm, 0, 2};
          s3.in.a = static_cast<std::uint8_t>(Special::kTid);
          MachineBlock b0, b1;
          b0.slots = {s0, s1, s2, s3};
          b0.term.in = {Op::kBr, 0, 0, 0, 0, Kind::kReg, Kind::kReg, 0, 1};
          Slot st;
          st.in = {Op::kSt, 0, 3, 2, 0, Kind::kReg, Kind::kReg, 0, 0};
          b1.slots = {st};
          b1.term.in.op = Op::kExit;
          p.blocks = {b0, b1};
          auto r = interpret_program(p, {arr("m", {0, 0, 0, 0})}, {});
          ASSERT_TRUE(r) << r.status().to_string();
          for (int lane = 0; lane < 4; ++lane) {
            auto [j, ok] = ptx_shfl_source(op, lane, b, width);
            const int want = pred ? ok : 100 + 7 * j;
            EXPECT_EQ(r->arrays[0].array[lane], want)
                << op_info(op).mnemonic << " width " << width << " b " << b << " lane " << lane << " pred " << pred;
          }
        }
}

// ---------------------------------------------------------------------------- kernels

MachineConfig big_config() {
  MachineConfig c;
  c.global_words = 4096;
  c.max_threads = 1024;
  c.max_block_threads = 256;
  return c;
}

// out[i] = op(a[i], b[i]) for i < n, lowered through KernelIR (exercises the expansions).
sdk::KernelIR binary_kernel(Opcode op, bool unary) {
  IrBuilder b("binop");
  const ValueId pa = b.ptr_param("a"), pb = b.ptr_param("b"), po = b.ptr_param("out");
  const ValueId i = b.global_index();
  const ValueId x = b.load(b.element(pa, i));
  const ValueId y = b.load(b.element(pb, i));
  const ValueId r = unary ? b.un(op, x) : b.bin(op, x, y);
  b.store(b.element(po, i), r);
  b.ret();
  return b.k;
}

void check_binary(Opcode op, bool unary, const std::function<std::uint32_t(std::uint32_t, std::uint32_t)>& ref) {
  const sdk::KernelIR k = binary_kernel(op, unary);
  const MachineConfig cfg = big_config();
  auto prog = lower_kernel(k, {8, 64}, cfg);
  ASSERT_TRUE(prog) << prog.status().to_string();
  std::vector<std::pair<std::uint32_t, std::uint32_t>> pairs = operand_pairs(1700, static_cast<std::uint32_t>(op));
  for (std::size_t start = 0; start < pairs.size(); start += 512) {
    std::vector<std::int32_t> a(512), b(512);
    for (std::size_t j = 0; j < 512; ++j) {
      const auto [x, y] = pairs[(start + j) % pairs.size()];
      a[j] = s32(x), b[j] = s32(y);
    }
    auto r = interpret_program(**prog, {arr("a", a), arr("b", b), arr("out", std::vector<std::int32_t>(512, 0))}, {});
    ASSERT_TRUE(r) << r.status().to_string();
    for (std::size_t j = 0; j < 512; ++j)
      ASSERT_EQ(static_cast<std::uint32_t>(r->arrays[2].array[j]), ref(a[j], b[j])) << "a=" << a[j] << " b=" << b[j];
  }
}

TEST(Expansions, UnsignedDivisionAndRemainder) {
  check_binary(Opcode::kUDiv, false, [](std::uint32_t a, std::uint32_t b) { return b ? a / b : 0xffffffffu; });
  check_binary(Opcode::kURem, false, [](std::uint32_t a, std::uint32_t b) { return b ? a % b : a; });
}

TEST(Expansions, SignedDivisionAndRemainder) {
  // Documented choices: x / 0 = (x < 0 ? 1 : -1), x % 0 = x, INT_MIN / -1 = INT_MIN, INT_MIN % -1 = 0.
  check_binary(Opcode::kSDiv, false, [](std::uint32_t ua, std::uint32_t ub) -> std::uint32_t {
    const std::int64_t a = s32(ua), b = s32(ub);
    if (b == 0) return a < 0 ? 1u : 0xffffffffu;
    return static_cast<std::uint32_t>(a / b);
  });
  check_binary(Opcode::kSRem, false, [](std::uint32_t ua, std::uint32_t ub) -> std::uint32_t {
    const std::int64_t a = s32(ua), b = s32(ub);
    if (b == 0) return ua;
    return static_cast<std::uint32_t>(a % b);
  });
}

TEST(Expansions, MulHi) {
  check_binary(Opcode::kMulHiU, false, [](std::uint32_t a, std::uint32_t b) {
    return static_cast<std::uint32_t>((std::uint64_t{a} * b) >> 32);
  });
  check_binary(Opcode::kMulHiS, false, [](std::uint32_t a, std::uint32_t b) {
    return static_cast<std::uint32_t>(static_cast<std::uint64_t>(std::int64_t{s32(a)} * s32(b)) >> 32);
  });
}

// Division by constants reaches the machine as mul.hi with a constant (clang -O2); the
// expansions fold constants, so check them separately.
TEST(Expansions, ConstantOperands) {
  const std::uint32_t constants[] = {0u,          1u,          2u,          3u,          7u,
                                     0xfffffffdu, 0xffffffffu, 0x80000000u, 0x6db6db6du, 0x92492493u,
                                     0x55555555u, 0x55555556u, 0x10000u,    0xffffu};
  for (Opcode op : {Opcode::kMulHiS, Opcode::kMulHiU, Opcode::kUDiv, Opcode::kSRem})
    for (std::uint32_t k : constants) {
      IrBuilder b("const_op");
      const ValueId pa = b.ptr_param("a"), po = b.ptr_param("out");
      const ValueId i = b.global_index();
      b.store(b.element(po, i), b.bin(op, b.load(b.element(pa, i)), b.c32(s32(k))));
      b.ret();
      std::vector<std::int32_t> a(64);
      for (std::size_t j = 0; j < a.size(); ++j)
        a[j] = s32(j < kEdge.size() ? kEdge[j] : static_cast<std::uint32_t>(j * 2654435761u));
      auto r = run(b.k, {2, 32}, {arr("a", a), arr("out", std::vector<std::int32_t>(64, 0))}, big_config());
      ASSERT_TRUE(r) << r.status().to_string();
      for (std::size_t j = 0; j < a.size(); ++j) {
        const std::uint32_t x = static_cast<std::uint32_t>(a[j]);
        std::uint32_t want = 0;
        switch (op) {
          case Opcode::kMulHiS:
            want = static_cast<std::uint32_t>(static_cast<std::uint64_t>(std::int64_t{a[j]} * s32(k)) >> 32);
            break;
          case Opcode::kMulHiU: want = static_cast<std::uint32_t>((std::uint64_t{x} * k) >> 32); break;
          case Opcode::kUDiv: want = k ? x / k : 0xffffffffu; break;
          default: want = k == 0 ? x : static_cast<std::uint32_t>(std::int64_t{a[j]} % s32(k)); break;
        }
        ASSERT_EQ(static_cast<std::uint32_t>(r->arrays[1].array[j]), want)
            << "op " << static_cast<int>(op) << " k " << k << " x " << x;
      }
    }
}

TEST(Expansions, BitCounts) {
  check_binary(Opcode::kPopc, true,
               [](std::uint32_t a, std::uint32_t) { return static_cast<std::uint32_t>(std::popcount(a)); });
  check_binary(Opcode::kClz, true,
               [](std::uint32_t a, std::uint32_t) { return static_cast<std::uint32_t>(std::countl_zero(a)); });
  check_binary(Opcode::kBrev, true, [](std::uint32_t a, std::uint32_t) {
    std::uint32_t r = 0;
    for (int i = 0; i < 32; ++i) r |= ((a >> i) & 1u) << (31 - i);
    return r;
  });
  check_binary(Opcode::kAbs, true, [](std::uint32_t a, std::uint32_t) { return s32(a) < 0 ? 0u - a : a; });
}

std::vector<std::int32_t> random_ints(std::size_t n, std::uint32_t seed, int lo = -1000, int hi = 1000) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<std::int32_t> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(Kernels, VectorAddWithGuard) {
  const auto a = random_ints(32, 1), bv = random_ints(32, 2);
  auto r = run(vadd_kernel(), {2, 16},
               {arr("a", a), arr("b", bv), arr("c", std::vector<std::int32_t>(32, -7)), scalar("n", 30)});
  ASSERT_TRUE(r) << r.status().to_string();
  ASSERT_EQ(r->arrays.size(), 3u);
  EXPECT_EQ(r->arrays[0].array, a);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(r->arrays[2].array[i], i < 30 ? a[i] + bv[i] : -7) << i;
  EXPECT_GT(stat(*r, "warp_instructions"), 0);
}

TEST(Kernels, DotProductWithAtomicAdd) {
  const sdk::KernelIR k = dot_guarded_kernel();
  {
    auto r = run(k, {1, 4}, {arr("a", {1, 2, 3}), arr("b", {4, 5, 6}), arr("out", {0}), scalar("n", 3)});
    ASSERT_TRUE(r) << r.status().to_string();
    EXPECT_EQ(r->arrays[2].array[0], 32);
    EXPECT_EQ(stat(*r, "atomics"), 3);
  }
  const auto a = random_ints(40, 3), bv = random_ints(40, 4);
  std::int32_t want = 0;
  for (int i = 0; i < 40; ++i) want += a[i] * bv[i];
  auto r = run(k, {3, 16}, {arr("a", a), arr("b", bv), arr("out", {0}), scalar("n", 40)});
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ(r->arrays[2].array[0], want);
}

TEST(Kernels, LoopWithBlockArgumentsAndDivergentTripCounts) {
  // out[i] = sum_{j < a[i]} (j ^ i), a rotated loop as clang emits it.
  const sdk::KernelIR k = loop_kernel();
  const auto a = random_ints(8, 9, -3, 20);
  auto r = run(k, {1, 8}, {arr("a", a), arr("out", std::vector<std::int32_t>(8, 99))});
  ASSERT_TRUE(r) << r.status().to_string();
  for (int t = 0; t < 8; ++t) {
    int want = 0;
    for (int jj = 0; jj < a[t]; ++jj) want += jj ^ t;
    EXPECT_EQ(r->arrays[1].array[t], want) << t;
  }
}

TEST(Kernels, SharedMemoryReductionWithBarriers) {
  const sdk::KernelIR k = reduce_kernel();
  const auto in = random_ints(24, 12);
  auto r = run(k, {3, 8}, {arr("in", in), arr("out", {0, 0, 0})});
  ASSERT_TRUE(r) << r.status().to_string();
  for (int blk = 0; blk < 3; ++blk) {
    int want = 0;
    for (int k = 0; k < 8; ++k) want += in[blk * 8 + k];
    EXPECT_EQ(r->arrays[1].array[blk], want) << blk;
  }
  EXPECT_EQ(stat(*r, "barriers"), 3 * 4);  // one after the store, three in the loop, per thread block
}

TEST(Kernels, WidthFourShuffleReductions) {
  // down-reduction to lane 0 of each group of 4, and an xor all-reduce.
  IrBuilder b("shfl");
  const ValueId pin = b.ptr_param("in"), psum = b.ptr_param("sum"), pall = b.ptr_param("all");
  const ValueId gid = b.global_index();
  const ValueId v = b.load(b.element(pin, gid));
  ValueId d = b.bin(Opcode::kAdd, v, b.shfl(sdk::ShflMode::kDown, v, b.c32(2), 4));
  d = b.bin(Opcode::kAdd, d, b.shfl(sdk::ShflMode::kDown, d, b.c32(1), 4));
  ValueId x = b.bin(Opcode::kAdd, v, b.shfl(sdk::ShflMode::kBfly, v, b.c32(1), 4));
  x = b.bin(Opcode::kAdd, x, b.shfl(sdk::ShflMode::kBfly, x, b.c32(2), 4));
  b.store(b.element(pall, gid), x);
  const ValueId lane0 =
      b.icmp(CmpPred::kEq, b.bin(Opcode::kAnd, b.special(sdk::SpecialReg::kLaneId), b.c32(3)), b.c32(0));
  const int wr = b.block("write"), exit = b.block("exit");
  b.at(0);
  b.cond_br(lane0, wr, {}, exit);
  b.at(wr);
  b.store(b.element(psum, b.bin(Opcode::kLShr, gid, b.c32(2))), d);
  b.br(exit);
  b.at(exit);
  b.ret();
  const auto in = random_ints(24, 21);
  auto r =
      run(b.k, {2, 12},
          {arr("in", in), arr("sum", std::vector<std::int32_t>(6, 0)), arr("all", std::vector<std::int32_t>(24, 0))});
  ASSERT_TRUE(r) << r.status().to_string();
  for (int g = 0; g < 6; ++g) {
    const int want = in[4 * g] + in[4 * g + 1] + in[4 * g + 2] + in[4 * g + 3];
    EXPECT_EQ(r->arrays[1].array[g], want) << g;
    for (int l = 0; l < 4; ++l) EXPECT_EQ(r->arrays[2].array[4 * g + l], want) << g << "." << l;
  }
}

// A CUDA warp of 32 threads on 4-lane machine warps: shuffles at widths 8, 16 and 32, with
// constant and per-thread source operands, on a full warp and a partial one (20 threads, where a
// thread that does not exist reads 0), against the PTX ISA's shfl.sync pseudo-code.
TEST(Kernels, CudaWarpShufflesAcrossMachineWarps) {
  auto reference = [](sdk::ShflMode mode, int lane, std::uint32_t b, int width) {
    const int bval = static_cast<int>(b & 31), seg = (32 - width) & 31;  // PTX reads b[4:0]
    const int max_lane = (lane & seg) | (31 & ~seg), min_lane = lane & seg;
    int j = lane;
    bool p = true;
    switch (mode) {
      case sdk::ShflMode::kIdx: j = min_lane | (bval & ~seg & 31), p = j <= max_lane; break;
      case sdk::ShflMode::kUp: j = lane - bval, p = j >= min_lane; break;
      case sdk::ShflMode::kDown: j = lane + bval, p = j <= max_lane; break;
      case sdk::ShflMode::kBfly: j = lane ^ bval, p = j <= max_lane; break;
    }
    return std::pair<int, bool>(p ? j : lane, p);
  };
  std::mt19937 rng(77);
  for (sdk::ShflMode mode : {sdk::ShflMode::kIdx, sdk::ShflMode::kUp, sdk::ShflMode::kDown, sdk::ShflMode::kBfly})
    for (int width : {8, 16, 32})
      for (int b : {-1, 0, 1, 3, 5, 8, 16, 31, 33})  // -1: a different source operand per thread
        for (std::uint32_t block : {32u, 20u}) {
          IrBuilder k("shfl32");
          const ValueId pin = k.ptr_param("in"), pb = k.ptr_param("b"), pout = k.ptr_param("out"),
                        ppred = k.ptr_param("pred");
          const ValueId t = k.tid();
          const ValueId v = k.load(k.element(pin, t));
          const ValueId lane = b < 0 ? k.load(k.element(pb, t)) : k.c32(b);
          const ValueId sh = k.shfl(mode, v, lane, width);
          const ValueId p = k.emit(Opcode::kShflPred, IrType::kI1, {sh});
          k.store(k.element(pout, t), sh);
          k.store(k.element(ppred, t), k.un(Opcode::kZExt, p, IrType::kI32));
          k.ret();
          std::vector<std::int32_t> in(block), bs(block);
          for (auto& x : in) x = static_cast<std::int32_t>(rng() % 1000) + 1;
          for (auto& x : bs) x = static_cast<std::int32_t>(rng() % 40);
          MachineConfig cfg;
          cfg.global_words = 256;
          auto r = run(k.k, {1, block},
                       {arr("in", in), arr("b", bs), arr("out", std::vector<std::int32_t>(block, 0)),
                        arr("pred", std::vector<std::int32_t>(block, 0))},
                       cfg);
          ASSERT_TRUE(r) << r.status().to_string();
          for (int l = 0; l < static_cast<int>(block); ++l) {
            auto [j, ok] =
                reference(mode, l, b < 0 ? static_cast<std::uint32_t>(bs[l]) : static_cast<std::uint32_t>(b), width);
            const int want = j < static_cast<int>(block) ? in[j] : 0;
            EXPECT_EQ(r->arrays[2].array[l], want) << "mode " << static_cast<int>(mode) << " width " << width << " b "
                                                   << b << " block " << block << " lane " << l;
            EXPECT_EQ(r->arrays[3].array[l], ok ? 1 : 0)
                << "pred: mode " << static_cast<int>(mode) << " width " << width << " b " << b << " lane " << l;
          }
        }
}

// The standard warp reduction (offsets 16 ... 1) and votes over 32-thread blocks, several blocks.
TEST(Kernels, CudaWarpReductionAndVotes) {
  IrBuilder k("warp");
  const ValueId pin = k.ptr_param("in"), pout = k.ptr_param("out");
  const ValueId gid = k.global_index();
  const ValueId x = k.load(k.element(pin, gid));
  ValueId v = x;
  for (int o = 16; o > 0; o /= 2) v = k.bin(Opcode::kAdd, v, k.shfl(sdk::ShflMode::kDown, v, k.c32(o), 32));
  const ValueId p = k.icmp(CmpPred::kSgt, x, k.c32(500));
  const ValueId ballot = k.vote(sdk::VoteMode::kBallot, p);
  const ValueId any = k.un(Opcode::kZExt, k.vote(sdk::VoteMode::kAny, p), IrType::kI32);
  const ValueId all = k.un(Opcode::kZExt, k.vote(sdk::VoteMode::kAll, p), IrType::kI32);
  const ValueId uni = k.un(Opcode::kZExt, k.vote(sdk::VoteMode::kUni, p), IrType::kI32);
  const ValueId base = k.bin(Opcode::kMul, gid, k.c32(5));
  auto put = [&](int i, ValueId val) { k.store(k.element(pout, k.bin(Opcode::kAdd, base, k.c32(i))), val); };
  put(0, v);
  put(1, ballot);
  put(2, any);
  put(3, all);
  put(4, uni);
  k.ret();
  MachineConfig cfg;  // 4 reductions and 4 votes need more than the default 32 ROM blocks
  cfg.global_words = 1024;
  cfg.shared_words = 64;
  cfg.rom_blocks = 64;
  for (int variant = 0; variant < 3; ++variant) {
    std::vector<std::int32_t> in(96);
    for (std::size_t i = 0; i < in.size(); ++i)
      in[i] = variant == 0 ? static_cast<std::int32_t>(i * 37 % 1000) : variant == 1 ? 501 + static_cast<int>(i) : 7;
    auto r = run(k.k, {3, 32}, {arr("in", in), arr("out", std::vector<std::int32_t>(5 * 96, 0))}, cfg);
    ASSERT_TRUE(r) << r.status().to_string();
    for (int blk = 0; blk < 3; ++blk) {
      std::uint32_t want_ballot = 0;
      for (int l = 0; l < 32; ++l) want_ballot |= static_cast<std::uint32_t>(in[32 * blk + l] > 500) << l;
      for (int l = 0; l < 32; ++l) {
        // The down-reduction: lane l holds the sum of lanes l .. 31 reached through offsets 16 ... 1,
        // lanes past 31 keeping their own values; lane 0 gets the block's sum.
        std::vector<std::int64_t> w(in.begin() + 32 * blk, in.begin() + 32 * blk + 32);
        for (int o = 16; o > 0; o /= 2) {
          std::vector<std::int64_t> n = w;
          for (int q = 0; q < 32; ++q) n[q] = w[q] + (q + o < 32 ? w[q + o] : w[q]);
          w = n;
        }
        const int at = 5 * (32 * blk + l);
        EXPECT_EQ(r->arrays[1].array[at], static_cast<std::int32_t>(w[l])) << variant << " " << blk << " " << l;
        EXPECT_EQ(static_cast<std::uint32_t>(r->arrays[1].array[at + 1]), want_ballot);
        EXPECT_EQ(r->arrays[1].array[at + 2], want_ballot != 0);
        EXPECT_EQ(r->arrays[1].array[at + 3], want_ballot == 0xffffffffu);
        EXPECT_EQ(r->arrays[1].array[at + 4], want_ballot == 0 || want_ballot == 0xffffffffu);
      }
    }
  }
  // Default shared_words (32): the 32 shuffle slots and the vote word do not fit together.
  auto r = run(k.k, {1, 32},
               {arr("in", std::vector<std::int32_t>(32, 1)), arr("out", std::vector<std::int32_t>(160, 0))}, [] {
                 MachineConfig c;
                 c.global_words = 1024;
                 c.rom_blocks = 64;
                 return c;
               }());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().to_string(),
            "test.cu:1:1: error: kernel 'warp': shared memory needs 33 words per thread block (0 for __shared__ "
            "variables, 33 of scratch "
            "for warp collectives across machine warps), the machine has 32 (over by 1); raise the machine option "
            "shared_words (the circuit holds 512)");
}

// A collective under a branch that every thread of the block takes the same way (on the block index)
// is accepted; under a branch on the thread index it is refused (the Diagnostics test).
TEST(Kernels, CudaWarpCollectiveUnderUniformBranch) {
  // if (blockIdx.x == 1) out[gid] = __shfl_sync(~0u, in[gid], 5); else out[gid] = -1;
  IrBuilder k("uniform");
  const ValueId pin = k.ptr_param("in"), pout = k.ptr_param("out");
  const ValueId gid = k.global_index();
  const int then_b = k.block("then"), else_b = k.block("else"), exit = k.block("exit");
  k.at(0);
  k.cond_br(k.icmp(CmpPred::kEq, k.ctaid(), k.c32(1)), then_b, {}, else_b);
  k.at(then_b);
  k.store(k.element(pout, gid), k.shfl(sdk::ShflMode::kIdx, k.load(k.element(pin, gid)), k.c32(5), 32));
  k.br(exit);
  k.at(else_b);
  k.store(k.element(pout, gid), k.c32(-1));
  k.br(exit);
  k.at(exit);
  k.ret();
  const auto in = random_ints(64, 91);
  MachineConfig cfg;
  cfg.global_words = 256;
  auto r = run(k.k, {2, 32}, {arr("in", in), arr("out", std::vector<std::int32_t>(64, 0))}, cfg);
  ASSERT_TRUE(r) << r.status().to_string();
  for (int t = 0; t < 32; ++t) {
    EXPECT_EQ(r->arrays[1].array[t], -1) << t;
    EXPECT_EQ(r->arrays[1].array[32 + t], in[32 + 5]) << t;
  }
}

TEST(Kernels, DivergentIfElseRejoins) {
  // r = (a[i] & 1) ? a[i] - 100 : a[i] * 3; out[i] = r + i
  const sdk::KernelIR k = ifelse_kernel();
  const auto a = random_ints(8, 31);
  sdk::InterpretOptions opt;
  opt.trace = true;
  auto r = run(k, {1, 8}, {arr("a", a), arr("out", std::vector<std::int32_t>(8, 0))}, {}, opt);
  ASSERT_TRUE(r) << r.status().to_string();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(r->arrays[1].array[t], ((a[t] & 1) ? a[t] - 100 : a[t] * 3) + t) << t;
  // Every warp ends with one execution of the join block by all four lanes.
  const std::regex line("^warp ([0-9]+) block ([0-9]+) mask (0b[01]{4})$");
  int full_last = 0;
  std::string prev_warp;
  for (std::size_t k = 0; k < r->trace.size(); ++k) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(r->trace[k], m, line)) << r->trace[k];
    const bool last_of_warp = k + 1 == r->trace.size() || r->trace[k + 1].rfind("warp " + m[1].str() + " ", 0) != 0;
    if (last_of_warp) full_last += m[3] == "0b1111";
  }
  EXPECT_EQ(full_last, 2);
}

TEST(Kernels, GridStrideLoop) {
  // for (i = gid; i < n; i += blockDim * gridDim) out[i] = 2 * in[i] + 1;
  IrBuilder b("stride");
  const ValueId pin = b.ptr_param("in"), po = b.ptr_param("out"), n = b.int_param("n");
  const ValueId gid = b.global_index();
  const ValueId step = b.bin(Opcode::kMul, b.ntid(), b.nctaid());
  const int loop = b.block("loop", {IrType::kI32}), exit = b.block("exit");
  b.at(0);
  b.cond_br(b.icmp(CmpPred::kSlt, gid, n), loop, {gid}, exit);
  b.at(loop);
  const ValueId i = b.arg(loop, 0);
  const ValueId v = b.load(b.element(pin, i));
  b.store(b.element(po, i), b.bin(Opcode::kAdd, b.bin(Opcode::kShl, v, b.c32(1)), b.c32(1)));
  const ValueId i2 = b.bin(Opcode::kAdd, i, step);
  b.cond_br(b.icmp(CmpPred::kSlt, i2, n), loop, {i2}, exit);
  b.at(exit);
  b.ret();
  const auto in = random_ints(30, 41);
  auto r = run(b.k, {2, 4}, {arr("in", in), arr("out", std::vector<std::int32_t>(30, 0)), scalar("n", 30)});
  ASSERT_TRUE(r) << r.status().to_string();
  for (int k = 0; k < 30; ++k) EXPECT_EQ(r->arrays[1].array[k], 2 * in[k] + 1) << k;
}

TEST(Kernels, VotesExactForBlocksOfFourThreads) {
  IrBuilder b("vote");
  const ValueId pa = b.ptr_param("a"), po = b.ptr_param("out");
  const ValueId t = b.tid();
  const ValueId p = b.icmp(CmpPred::kSgt, b.load(b.element(pa, t)), b.c32(0));
  const ValueId ballot = b.vote(sdk::VoteMode::kBallot, p);
  const std::uint32_t ballot_line = b.last().loc.line;
  const ValueId any = b.un(Opcode::kZExt, b.vote(sdk::VoteMode::kAny, p), IrType::kI32);
  const ValueId all = b.un(Opcode::kZExt, b.vote(sdk::VoteMode::kAll, p), IrType::kI32);
  const ValueId packed =
      b.bin(Opcode::kAdd, ballot,
            b.bin(Opcode::kAdd, b.bin(Opcode::kShl, any, b.c32(8)), b.bin(Opcode::kShl, all, b.c32(9))));
  b.store(b.element(po, t), packed);
  b.ret();
  for (const std::vector<std::int32_t>& a : {std::vector<std::int32_t>{1, -1, 5, 0}, {1, 2, 3}, {0, 0, 0, -4}}) {
    auto r = run(b.k, {1, static_cast<std::uint32_t>(a.size())},
                 {arr("a", a), arr("out", std::vector<std::int32_t>(a.size(), 0))});
    ASSERT_TRUE(r) << r.status().to_string();
    int ballot_want = 0;
    for (std::size_t l = 0; l < a.size(); ++l) ballot_want |= (a[l] > 0) << l;
    const int all_want = ballot_want == (1 << a.size()) - 1, any_want = ballot_want != 0;
    for (std::size_t l = 0; l < a.size(); ++l)
      EXPECT_EQ(r->arrays[1].array[l], ballot_want + (any_want << 8) + (all_want << 9));
  }
  // 8 threads: two machine warps, one CUDA warp (through shared memory and block barriers).
  auto r = run(b.k, {1, 8}, {arr("a", {1, 1, 1, 1, 1, 1, 1, 1}), arr("out", std::vector<std::int32_t>(8, 0))});
  ASSERT_TRUE(r) << r.status().to_string();
  for (int l = 0; l < 8; ++l) EXPECT_EQ(r->arrays[1].array[l], 0xff + (1 << 8) + (1 << 9));
  r = run(b.k, {1, 8}, {arr("a", {1, 0, 1, 1, 1, 1, 1, 9}), arr("out", std::vector<std::int32_t>(8, 0))});
  ASSERT_TRUE(r) << r.status().to_string();
  for (int l = 0; l < 8; ++l) EXPECT_EQ(r->arrays[1].array[l], 0xfd + (1 << 8)) << ballot_line;
}

TEST(Kernels, NarrowIntegersAsClangEmitsThem) {
  // out[4i..4i+3] = (signed char)v, (unsigned short)v, (short)v < (short)w, (short)((unsigned short)v >> 3)
  IrBuilder b("narrow");
  const ValueId px = b.ptr_param("x"), py = b.ptr_param("y"), po = b.ptr_param("out");
  const ValueId i = b.tid();
  const ValueId v = b.load(b.element(px, i)), w = b.load(b.element(py, i));
  const ValueId v8 = b.un(Opcode::kTrunc, v, IrType::kI8), v16 = b.un(Opcode::kTrunc, v, IrType::kI16);
  const ValueId w16 = b.un(Opcode::kTrunc, w, IrType::kI16);
  const ValueId base = b.bin(Opcode::kShl, i, b.c32(2));
  auto put = [&](int k, ValueId val) { b.store(b.element(po, b.bin(Opcode::kAdd, base, b.c32(k))), val); };
  put(0, b.un(Opcode::kSExt, v8, IrType::kI32));
  put(1, b.un(Opcode::kZExt, v16, IrType::kI32));
  put(2, b.un(Opcode::kZExt, b.icmp(CmpPred::kSlt, v16, w16), IrType::kI32));
  const ValueId sh = b.bin(Opcode::kLShr, v16, b.emit(Opcode::kConst, IrType::kI16, {}, 3));
  put(3, b.un(Opcode::kSExt, sh, IrType::kI32));
  b.ret();
  const auto x = random_ints(8, 51, INT_MIN / 2, INT_MAX / 2), y = random_ints(8, 52, -70000, 70000);
  auto r = run(b.k, {1, 8}, {arr("x", x), arr("y", y), arr("out", std::vector<std::int32_t>(32, 0))});
  ASSERT_TRUE(r) << r.status().to_string();
  for (int t = 0; t < 8; ++t) {
    const auto& o = r->arrays[2].array;
    EXPECT_EQ(o[4 * t + 0], static_cast<std::int8_t>(x[t] & 0xff)) << t;
    EXPECT_EQ(o[4 * t + 1], x[t] & 0xffff) << t;
    EXPECT_EQ(o[4 * t + 2], static_cast<std::int16_t>(x[t] & 0xffff) < static_cast<std::int16_t>(y[t] & 0xffff)) << t;
    EXPECT_EQ(o[4 * t + 3], static_cast<std::int16_t>((x[t] & 0xffff) >> 3)) << t;
  }
}

// Byte k of a packed array (little-endian within words), and halfword k.
std::uint32_t byte_at(const std::vector<std::int32_t>& words, int k) {
  return (static_cast<std::uint32_t>(words[k / 4]) >> (8 * (k % 4))) & 0xffu;
}
std::uint32_t half_at(const std::vector<std::int32_t>& words, int k) {
  return (static_cast<std::uint32_t>(words[k / 2]) >> (16 * (k % 2))) & 0xffffu;
}

TEST(Kernels, SubWordLoadsAndStores) {
  // subword_kernel (kernels.h) on 16 threads: 4 warps, every lane pair of a warp writes one word.
  const auto in8 = random_ints(4, 81, INT_MIN, INT_MAX), in16 = random_ints(8, 82, INT_MIN, INT_MAX);
  const auto o8 = random_ints(8, 83, INT_MIN, INT_MAX), o16 = random_ints(8, 84, INT_MIN, INT_MAX);
  auto r = run(subword_kernel(), {1, 16},
               {arr("in8", in8), arr("in16", in16), arr("o8", o8), arr("o16", o16),
                arr("out", std::vector<std::int32_t>(48, 0))});
  ASSERT_TRUE(r) << r.status().to_string();
  const auto& out = r->arrays[4].array;
  for (int t = 0; t < 16; ++t) {
    const std::uint32_t b = byte_at(in8, t), h = half_at(in16, t);
    EXPECT_EQ(out[3 * t], b < 128 ? static_cast<std::int32_t>(b) : static_cast<std::int32_t>(b) - 256) << t;
    EXPECT_EQ(out[3 * t + 1], static_cast<std::int32_t>(h)) << t;
    EXPECT_EQ(out[3 * t + 2], h < 32768 ? static_cast<std::int32_t>(h) : static_cast<std::int32_t>(h) - 65536) << t;
  }
  for (int k = 0; k < 32; ++k)  // odd bytes written, even bytes as they were
    EXPECT_EQ(byte_at(r->arrays[2].array, k), k % 2 ? (byte_at(in8, k / 2) + 1) & 0xffu : byte_at(o8, k)) << k;
  for (int k = 0; k < 16; ++k) EXPECT_EQ(half_at(r->arrays[3].array, k), (half_at(in16, k) * 3) & 0xffffu) << k;
}

TEST(Kernels, SubWordConstantStores) {
  // a[2t] = 0 (one atom.and), a[2t+1] = 0xff (one atom.or), ((short*)b)[t] = 0xffff, over random words.
  IrBuilder b("bytes_const");
  const ValueId pa = b.ptr_param("a"), pb = b.ptr_param("b");
  const ValueId twice = b.bin(Opcode::kShl, b.sext64(b.tid()), b.c64(1));
  const ValueId at = b.bin(Opcode::kAdd, pa, twice);
  b.store(at, b.emit(Opcode::kConst, IrType::kI8, {}, 0));
  b.store(b.bin(Opcode::kAdd, at, b.c64(1)), b.emit(Opcode::kConst, IrType::kI8, {}, -1));
  b.store(b.bin(Opcode::kAdd, pb, twice), b.emit(Opcode::kConst, IrType::kI16, {}, 0xffff));
  b.ret();
  auto p = lower_kernel(b.k, {1, 8}, {});
  ASSERT_TRUE(p) << p.status().to_string();
  int atomics = 0;
  for (const auto& blk : (*p)->blocks)
    for (const auto& slot : blk.slots) atomics += slot.in.op == Op::kAtomAnd || slot.in.op == Op::kAtomOr;
  EXPECT_EQ(atomics, 3);
  const auto a = random_ints(4, 91, INT_MIN, INT_MAX), bw = random_ints(6, 92, INT_MIN, INT_MAX);
  auto r = interpret_program(**p, {arr("a", a), arr("b", bw)}, {});
  ASSERT_TRUE(r) << r.status().to_string();
  for (int k = 0; k < 16; ++k) EXPECT_EQ(byte_at(r->arrays[0].array, k), k % 2 ? 0xffu : 0u) << k;
  for (int k = 0; k < 12; ++k) EXPECT_EQ(half_at(r->arrays[1].array, k), k < 8 ? 0xffffu : half_at(bw, k)) << k;
}

TEST(Kernels, SixtyFourBitLoadsAndStores) {
  // out[t] = in[t] (long long: both words), low[t] = (int)in[t] (the low word only),
  // wide[t] = (long long)x[t] (the high word is the sign).
  IrBuilder b("dwords");
  const ValueId pin = b.ptr_param("in"), pout = b.ptr_param("out"), plow = b.ptr_param("low"), px = b.ptr_param("x"),
                pwide = b.ptr_param("wide");
  const ValueId t = b.tid();
  const ValueId eight = b.bin(Opcode::kShl, b.sext64(t), b.c64(3));
  auto at8 = [&](ValueId p) { return b.bin(Opcode::kAdd, p, eight); };
  b.store(at8(pout), b.load(at8(pin), AddressSpace::kGlobal, IrType::kI64));
  b.store(b.element(plow, t),
          b.un(Opcode::kTrunc, b.load(at8(pin), AddressSpace::kGlobal, IrType::kI64), IrType::kI32));
  b.store(at8(pwide), b.sext64(b.load(b.element(px, t))));
  b.ret();
  const auto in = random_ints(16, 93, INT_MIN, INT_MAX), x = random_ints(8, 94, INT_MIN, INT_MAX);
  auto r =
      run(b.k, {1, 8},
          {arr("in", in), arr("out", std::vector<std::int32_t>(16, 7)), arr("low", std::vector<std::int32_t>(8, 7)),
           arr("x", x), arr("wide", std::vector<std::int32_t>(16, 7))});
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ(r->arrays[1].array, in);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(r->arrays[2].array[i], in[2 * i]) << i;
    EXPECT_EQ(r->arrays[4].array[2 * i], x[i]) << i;
    EXPECT_EQ(r->arrays[4].array[2 * i + 1], x[i] < 0 ? -1 : 0) << i;
  }
}

TEST(Kernels, SubWordSharedMemory) {
  // __shared__ unsigned char s[32]; s[t] = t * 7 + 1; __syncthreads(); out[t] = s[31 - t];
  IrBuilder b("bytes_shared");
  const ValueId pout = b.ptr_param("out");
  b.k.shared.push_back({"s", 32, 1});
  const ValueId t = b.tid();
  const ValueId s = b.shared_addr(0);
  const ValueId v = b.un(Opcode::kTrunc, b.bin(Opcode::kAdd, b.bin(Opcode::kMul, t, b.c32(7)), b.c32(1)), IrType::kI8);
  b.store(b.bin(Opcode::kAdd, s, b.sext64(t)), v, AddressSpace::kShared);
  b.barrier();
  const ValueId back = b.sext64(b.bin(Opcode::kSub, b.c32(31), t));
  const ValueId x = b.load(b.bin(Opcode::kAdd, s, back), AddressSpace::kShared, IrType::kI8);
  b.store(b.element(pout, t), b.un(Opcode::kZExt, x, IrType::kI32));
  b.ret();
  auto r = run(b.k, {1, 32}, {arr("out", std::vector<std::int32_t>(32, -1))});
  ASSERT_TRUE(r) << r.status().to_string();
  for (int i = 0; i < 32; ++i) EXPECT_EQ(r->arrays[0].array[i], ((31 - i) * 7 + 1) & 255) << i;
}

TEST(Diagnostics, MisalignedHalfword) {
  // A 16-bit load at an odd address faults like a misaligned word (its word address x & ~2 is odd).
  IrBuilder b("misaligned16");
  const ValueId pa = b.ptr_param("a");
  const ValueId x = b.load(b.bin(Opcode::kAdd, pa, b.sext64(b.bin(Opcode::kAdd, b.tid(), b.c32(1)))),
                           AddressSpace::kGlobal, IrType::kI16);
  b.store(pa, b.un(Opcode::kZExt, x, IrType::kI32));
  b.ret();
  auto r = run(b.k, {1, 1}, {arr("a", {1, 2})});
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("misaligned global load by thread 0 of thread block 0 (warp 0, lane 0)"),
            std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("byte address 1 is not a multiple of 4"), std::string::npos)
      << r.status().message();
}

TEST(Kernels, SixtyFourBitClosedFormsAsClangEmitsThem) {
  // clang -O2 replaces sum loops by closed forms in 64 bits, e.g. for c = count[i]:
  //   lo = (u32)((u64)(c-1) * (c-2) * (c-3) >> 1), plus sext/add/sub/ashr/shl variants.
  IrBuilder b("closed_form");
  const ValueId px = b.ptr_param("x"), py = b.ptr_param("y"), po = b.ptr_param("out");
  const ValueId i = b.tid();
  const ValueId vx = b.load(b.element(px, i)), vy = b.load(b.element(py, i));
  auto z64 = [&](ValueId v) { return b.emit(Opcode::kZExt, IrType::kI64, {v}); };
  auto t32 = [&](ValueId v) { return b.un(Opcode::kTrunc, v, IrType::kI32); };
  const ValueId base = b.bin(Opcode::kShl, i, b.c32(2));
  auto put = [&](int k, ValueId v) { b.store(b.element(po, b.bin(Opcode::kAdd, base, b.c32(k))), v); };
  const ValueId m1 = b.bin(Opcode::kAdd, vx, b.c32(-1)), m2 = b.bin(Opcode::kAdd, vx, b.c32(-2));
  const ValueId wide = b.bin(Opcode::kMul, z64(m1), z64(m2));                               // mul.wide.u32
  const ValueId cube = b.bin(Opcode::kMul, wide, z64(b.bin(Opcode::kAdd, vx, b.c32(-3))));  // mul.lo.s64
  put(0, t32(b.bin(Opcode::kLShr, cube, b.c64(1))));
  put(1, t32(b.bin(Opcode::kLShr, wide, b.c64(33))));
  const ValueId s = b.bin(Opcode::kSub, b.bin(Opcode::kAdd, b.sext64(vx), b.sext64(vy)), b.c64(5));
  put(2, t32(b.bin(Opcode::kAShr, b.bin(Opcode::kShl, s, b.c64(7)), b.c64(9))));
  put(3, t32(b.bin(Opcode::kAShr, b.un(Opcode::kNeg, b.sext64(vy)), b.c64(40))));
  b.ret();
  const auto x = random_ints(8, 71, INT_MIN, INT_MAX), y = random_ints(8, 72, INT_MIN, INT_MAX);
  auto r = run(b.k, {1, 8}, {arr("x", x), arr("y", y), arr("out", std::vector<std::int32_t>(32, 0))});
  ASSERT_TRUE(r) << r.status().to_string();
  for (int t = 0; t < 8; ++t) {
    const auto& o = r->arrays[2].array;
    const std::uint64_t ux = static_cast<std::uint32_t>(x[t]);
    const std::uint64_t w = ((ux - 1) & 0xffffffffu) * ((ux - 2) & 0xffffffffu);
    EXPECT_EQ(static_cast<std::uint32_t>(o[4 * t + 0]), static_cast<std::uint32_t>((w * ((ux - 3) & 0xffffffffu)) >> 1))
        << t;
    EXPECT_EQ(static_cast<std::uint32_t>(o[4 * t + 1]), static_cast<std::uint32_t>(w >> 33)) << t;
    const std::int64_t sum = std::int64_t{x[t]} + y[t] - 5;
    EXPECT_EQ(o[4 * t + 2],
              static_cast<std::int32_t>(static_cast<std::int64_t>(static_cast<std::uint64_t>(sum) << 7) >> 9))
        << t;
    EXPECT_EQ(o[4 * t + 3], static_cast<std::int32_t>((-std::int64_t{y[t]}) >> 40)) << t;
  }
}

TEST(Kernels, AtomicsThroughTheLowering) {
  // atomicMax(&m[0], a[i]); m[1 + i] = atomicExch(&m[9], i); atomicCAS(&m[10], 0, i + 1)
  const sdk::KernelIR k = atomics_kernel();
  const auto a = random_ints(8, 61);
  std::vector<std::int32_t> m(11, 0);
  m[0] = INT_MIN;
  m[9] = -5;
  auto r = run(k, {2, 4}, {arr("a", a), arr("m", m)});
  ASSERT_TRUE(r) << r.status().to_string();
  const auto& o = r->arrays[1].array;
  EXPECT_EQ(o[0], *std::max_element(a.begin(), a.end()));
  // Exchanges apply in thread order (thread blocks, warps and lanes in order: docs/ISA.md section 5).
  EXPECT_EQ(o[1], -5);
  for (int t = 1; t < 8; ++t) EXPECT_EQ(o[1 + t], t - 1) << t;
  EXPECT_EQ(o[9], 7);
  EXPECT_EQ(o[10], 1);  // only thread 0 found 0
}

// ---------------------------------------------------------------------------- limits and diagnostics

TEST(Limits, ThreadsPerBlockAndLaunch) {
  auto r = lower_kernel(vadd_kernel(), {1, 64}, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(),
            "kernel 'vadd': thread block of 64 threads exceeds max_block_threads 32 (over by 32)");
  r = lower_kernel(vadd_kernel(), {5, 32}, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(),
            "kernel 'vadd': launch of 160 threads (grid 5 x block 32) exceeds max_threads 128 (over by 32)");
  EXPECT_EQ(r.status().code(), sdk::ErrorCode::kLimitExceeded);
}

TEST(Limits, RomBlocks) {
  MachineConfig cfg;
  cfg.rom_blocks = 2;
  auto r = lower_kernel(vadd_kernel(), {1, 4}, cfg);
  ASSERT_FALSE(r);
  std::smatch m;
  const std::string msg = r.status().to_string();
  ASSERT_TRUE(std::regex_match(msg, m,
                               std::regex("test.cu:1:1: error: kernel 'vadd': the program needs ([0-9]+) ROM "
                                          "blocks \\(of 4 instructions \\+ a terminator\\), the machine has 2 "
                                          "\\(over by ([0-9]+)\\); unrolled loops are the usual cause: write "
                                          "'#pragma unroll 1' before the loop, or set the frontend option "
                                          "'clang_flags: -fno-unroll-loops'")))
      << msg;
  EXPECT_EQ(std::stoi(m[1]) - 2, std::stoi(m[2]));
  cfg.rom_blocks = std::stoi(m[1]);
  EXPECT_TRUE(lower_kernel(vadd_kernel(), {1, 4}, cfg));  // exactly enough
}

TEST(Limits, GlobalMemory) {
  auto p = lower_kernel(vadd_kernel(), {1, 4}, {});
  ASSERT_TRUE(p);
  auto r = interpret_program(**p,
                             {arr("a", std::vector<std::int32_t>(50)), arr("b", std::vector<std::int32_t>(50)),
                              arr("c", std::vector<std::int32_t>(26)), scalar("n", 4)},
                             {});
  EXPECT_TRUE(r) << r.status().to_string();  // exactly the 126 words
}

TEST(Limits, GlobalMemoryOver) {
  auto p = lower_kernel(vadd_kernel(), {1, 4}, {});
  ASSERT_TRUE(p);
  auto r = interpret_program(**p,
                             {arr("a", std::vector<std::int32_t>(50)), arr("b", std::vector<std::int32_t>(50)),
                              arr("c", std::vector<std::int32_t>(30)), scalar("n", 4)},
                             {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(),
            "kernel 'vadd': the launch's arrays need 130 words of global memory, the machine has 126 (over by 4)");
  r = interpret_program(**p, {arr("a", {1}), arr("b", {1})}, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(), "kernel 'vadd': takes 4 parameters (a, b, c, n), got 2 launch arguments");
}

TEST(Limits, SharedMemory) {
  IrBuilder b("big_shared");
  b.block("entry");
  b.k.shared.push_back({"s", 160, 4});
  b.ret();
  auto r = lower_kernel(b.k, {1, 4}, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(),
            "kernel 'big_shared': shared memory needs 40 words per thread block, the machine has 32 (over by 8)");
}

TEST(Limits, RegisterPressureSpillsToSharedMemory) {
  // Four threads: the values that find no register live in per-thread slots after the kernel's
  // shared memory (here none): one word per thread per spilled value.
  auto p = lower_kernel(pressure_kernel(), {1, 4}, {});
  ASSERT_TRUE(p) << p.status().to_string();
  const int slots = (*p)->shared_words_used;
  EXPECT_GE(slots, 4 * 5) << "at least 20 - 15 values spilled";
  EXPECT_EQ(slots % 4, 0);
  EXPECT_EQ((*p)->registers_used, 15);
  const std::vector<std::int32_t> a = random_ints(80, 5);
  for (const MachineConfig& cfg : {MachineConfig{}, [] {
                                     MachineConfig c;
                                     c.registers = 8;  // r1-r7: most values spilled
                                     c.shared_words = 128;
                                     return c;
                                   }()}) {
    auto r = run(pressure_kernel(), {1, 4}, {arr("a", a)}, cfg, sdk::InterpretOptions{.racecheck = true});
    ASSERT_TRUE(r) << r.status().to_string();
    for (int t = 0; t < 4; ++t) {
      int sum = 0;
      for (int k = 0; k < 20; ++k) sum += a[20 * t + k];
      EXPECT_EQ(r->arrays[0].array[20 * t], sum) << "thread " << t << ", registers " << cfg.registers;
      for (int k = 1; k < 20; ++k) EXPECT_EQ(r->arrays[0].array[20 * t + k], a[20 * t + k]);
    }
  }
  // Thirty-two threads need 32 words per spilled value: more than the default 32 words of shared
  // memory for two values; the message says how many and what to raise.
  auto big = lower_kernel(pressure_kernel(), {1, 32}, {});
  ASSERT_FALSE(big);
  const std::string msg = big.status().message();
  EXPECT_TRUE(std::regex_search(
      msg, std::regex("register pressure: needs 2[0-9] registers at .*, the machine has 15 \\(r1-r15\\); spilling 2 "
                      "values to shared memory needs 64 words per thread block \\(0 for the kernel, 32 per value\\), "
                      "the machine has 32 \\(over by 32\\): raise the machine option shared_words \\(the circuit "
                      "holds 512\\)$")))
      << msg;
  // Fifteen live values fit exactly: nothing spilled.
  IrBuilder ok("fits");
  const ValueId qa = ok.ptr_param("a");
  std::vector<ValueId> w;
  for (int k = 0; k < 14; ++k) w.push_back(ok.load(ok.bin(Opcode::kAdd, qa, ok.c64(4 * k))));
  ValueId t = w.back();
  for (int k = 12; k >= 0; --k) t = ok.bin(Opcode::kAdd, t, w[k]);
  ok.store(qa, t);
  ok.ret();
  auto fits = lower_kernel(ok.k, {1, 1}, {});
  ASSERT_TRUE(fits) << fits.status().to_string();
  EXPECT_EQ((*fits)->shared_words_used, 0);
  std::vector<std::int32_t> b = random_ints(14, 3);
  auto run_ok = run(ok.k, {1, 1}, {arr("a", b)});
  ASSERT_TRUE(run_ok) << run_ok.status().to_string();
  int sum = 0;
  for (int x : b) sum += x;
  EXPECT_EQ(run_ok->arrays[0].array[0], sum);
}

TEST(Diagnostics, OutOfBoundsStore) {
  // n = 9 with arrays of 8: thread 8 stores c[8], one word past the last array.
  auto r = run(vadd_kernel(), {1, 12},
               {arr("a", std::vector<std::int32_t>(8)), arr("b", std::vector<std::int32_t>(8)),
                arr("c", std::vector<std::int32_t>(8)), scalar("n", 9)});
  ASSERT_FALSE(r);
  const std::string msg = r.status().message();
  EXPECT_TRUE(
      std::regex_match(msg, std::regex("kernel 'vadd': out-of-bounds global store by thread 8 of thread block 0 "
                                       "\\(warp 2, lane 0\\) at B[0-9]+ slot [0-9] `st \\[r[0-9]+\\+64\\], "
                                       "r[0-9]+` \\(test.cu:[0-9]+:3\\): byte address 96 \\(word 24\\) is "
                                       "outside the 24 words holding the launch's arrays \\(global memory "
                                       "has 126\\)")))
      << msg;
}

TEST(Diagnostics, MisalignedLoad) {
  IrBuilder b("misaligned");
  const ValueId pa = b.ptr_param("a");
  b.store(pa, b.load(b.bin(Opcode::kAdd, pa, b.c64(2))));
  b.ret();
  auto r = run(b.k, {1, 1}, {arr("a", {1, 2})});
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("misaligned global load by thread 0 of thread block 0 (warp 0, lane 0)"),
            std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("byte address 2 is not a multiple of 4"), std::string::npos);
}

TEST(Diagnostics, StepLimit) {
  IrBuilder b("forever");
  b.block("entry");
  const int loop = b.block("loop");
  b.at(0);
  b.br(loop);
  b.at(loop);
  b.br(loop);
  sdk::InterpretOptions opt;
  opt.max_steps = 1000;
  auto r = run(b.k, {1, 1}, {}, {}, opt);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().code(), sdk::ErrorCode::kLimitExceeded);
  EXPECT_TRUE(std::regex_match(r.status().message(),
                               std::regex("kernel 'forever': step limit reached: 1000 block executions \\(max_steps\\) "
                                          "without finishing; next was thread block 0 warp 0 block B[0-9]+")))
      << r.status().message();
}

TEST(Diagnostics, RejectsWhatTheMachineCannotComputeExactly) {
  {
    IrBuilder b("wide_shfl");
    const ValueId pa = b.ptr_param("a");
    const ValueId v = b.load(pa);
    const ValueId sh = b.shfl(sdk::ShflMode::kDown, v, b.c32(16), 32);
    const std::uint32_t line = b.last().loc.line;
    b.store(pa, sh);
    b.ret();
    ASSERT_TRUE(lower_kernel(b.k, {1, 32}, {}));  // one CUDA warp: exact
    MachineConfig cfg;
    cfg.max_block_threads = 64;
    auto r = lower_kernel(b.k, {1, 64}, cfg);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.status().to_string(),
              "test.cu:" + std::to_string(line) +
                  ":3: error: kernel 'wide_shfl': shfl.down across a 32-thread CUDA warp is lowered with block "
                  "barriers, which is exact only when the thread block is one CUDA warp (at most 32 threads; this "
                  "launch has 64)");
  }
  {
    IrBuilder b("half_mask");
    const ValueId pa = b.ptr_param("a");
    const ValueId v = b.load(pa);
    const ValueId sh = b.emit(Opcode::kShfl, IrType::kI32, {v, b.c32(1), b.c32(0x1f), b.c32(0xffff)});
    b.last().shfl = sdk::ShflMode::kDown;
    const std::uint32_t line = b.last().loc.line;
    b.store(pa, sh);
    b.ret();
    auto r = lower_kernel(b.k, {1, 32}, {});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.status().to_string(),
              "test.cu:" + std::to_string(line) +
                  ":3: error: kernel 'half_mask': shfl.down needs the full member mask (0xffffffff); this one is "
                  "0xffff: a collective of part of a CUDA warp is not supported (the machine synchronises the whole "
                  "thread block)");
  }
  {
    // if (a[tid] > 0) a[tid] = __ballot_sync(~0u, 1): only some threads reach the vote.
    IrBuilder b("divergent_vote");
    const ValueId pa = b.ptr_param("a");
    const ValueId addr = b.element(pa, b.tid());
    const ValueId v = b.load(addr);
    const int body = b.block("body"), exit = b.block("exit");
    b.at(0);
    b.cond_br(b.icmp(CmpPred::kSgt, v, b.c32(0)), body, {}, exit);
    b.at(body);
    const ValueId ballot = b.vote(sdk::VoteMode::kBallot, b.emit(Opcode::kConst, IrType::kI1, {}, 1));
    const std::uint32_t line = b.last().loc.line;
    b.store(addr, ballot);
    b.br(exit);
    b.at(exit);
    b.ret();
    auto r = lower_kernel(b.k, {1, 32}, {});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.status().to_string(),
              "test.cu:" + std::to_string(line) +
                  ":3: error: kernel 'divergent_vote': vote.ballot may be reached by only some threads of the CUDA "
                  "warp (it is under a branch on a thread-dependent condition); the machine exchanges through a block "
                  "barrier that needs every thread there: move it out of the branch (compute its operand with a "
                  "select)");
  }
  {
    IrBuilder b("wide_i64");
    const ValueId pa = b.ptr_param("a");
    const ValueId v = b.sext64(b.load(pa));
    const ValueId sh = b.bin(Opcode::kLShr, v, b.emit(Opcode::kZExt, IrType::kI64, {b.load(pa)}));
    const std::uint32_t line = b.last().loc.line;
    b.store(pa, b.un(Opcode::kTrunc, sh, IrType::kI32));
    b.ret();
    auto r = lower_kernel(b.k, {1, 1}, {});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.status().to_string(), "test.cu:" + std::to_string(line) +
                                          ":3: error: kernel 'wide_i64': i64 lshr by a variable amount is not "
                                          "supported (constant amounts are)");
  }
  {
    IrBuilder b("i64_div");
    const ValueId pa = b.ptr_param("a");
    const ValueId v = b.sext64(b.load(pa));
    const ValueId q = b.bin(Opcode::kUDiv, v, b.c64(3));
    const std::uint32_t line = b.last().loc.line;
    b.store(pa, b.un(Opcode::kTrunc, q, IrType::kI32));
    b.ret();
    auto r = lower_kernel(b.k, {1, 1}, {});
    ASSERT_FALSE(r);
    EXPECT_NE(r.status().to_string().find("test.cu:" + std::to_string(line) +
                                          ":3: error: kernel 'i64_div': i64 udiv is not supported"),
              std::string::npos)
        << r.status().to_string();
  }
  {
    IrBuilder b("bytes");
    const ValueId pa = b.ptr_param("a");
    b.emit(Opcode::kAtomic, IrType::kI8, {pa, b.emit(Opcode::kConst, IrType::kI8, {}, 1)});
    b.last().atomic = sdk::AtomicOp::kAdd;
    b.ret();
    auto r = lower_kernel(b.k, {1, 1}, {});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.status().message(),
              "kernel 'bytes': i8 atomic is not supported: memory holds 32-bit words; the machine accesses whole "
              "words, and 8- and 16-bit loads and stores (not atomics) through the containing word");
  }
}

TEST(Program, DumpListsBlocksAndLaunchConstants) {
  auto p = lower_kernel(vadd_kernel(), {2, 16}, {});
  ASSERT_TRUE(p) << p.status().to_string();
  const std::string d = (*p)->dump();
  EXPECT_NE(d.find("kernel vadd: grid 2 x block 16;"), std::string::npos) << d;
  EXPECT_NE(d.find("B0:"), std::string::npos) << d;
  EXPECT_NE(d.find("@a"), std::string::npos) << d;
  EXPECT_NE(d.find("exit"), std::string::npos) << d;
  // The image has block_instructions + 1 rows per block and links the array bases.
  const auto image = (*p)->image({0, 400, 800, 9});
  EXPECT_EQ(image.size(), (*p)->blocks.size() * 5);
  if (std::getenv("QGPU_PRINT_DUMPS")) {
    std::cout << d;
    for (auto op : {Opcode::kSDiv, Opcode::kMulHiS, Opcode::kClz}) {
      auto q = lower_kernel(binary_kernel(op, op == Opcode::kClz), {1, 4}, {});
      ASSERT_TRUE(q) << q.status().to_string();
      std::cout << (*q)->dump();
    }
  }
}

}  // namespace
}  // namespace qgpu::simt::test
