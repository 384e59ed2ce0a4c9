// The SIMT machine's instruction set: opcodes (from isa.def), operand kinds,
// the 64-bit encoding and the ALU semantics shared by the interpreter and the
// lowering's constant folding. docs/ISA.md describes the same thing in prose.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace qgpu::simt {

inline constexpr std::int32_t s32(std::uint32_t x) {
  return static_cast<std::int32_t>(x);
}
inline constexpr std::uint32_t u32(std::int64_t x) {
  return static_cast<std::uint32_t>(x);
}
inline constexpr std::uint32_t u32(std::int32_t x) {
  return static_cast<std::uint32_t>(x);
}
inline constexpr std::uint32_t u32(bool x) {
  return x ? 1u : 0u;
}

enum class Op : std::uint8_t {
#define QGPU_SIMT_OP(name, mnemonic, format, unit, expr, doc) name,
#include "isa.def"
#undef QGPU_SIMT_OP
  kCount
};
inline constexpr int kOpCount = static_cast<int>(Op::kCount);

// Which encoded fields an instruction reads or writes.
enum class Format : std::uint8_t {
  kFmtNone,   // nothing (nop, exit)
  kFmtDA,     // d <- f(a)
  kFmtDAB,    // d <- f(a, b)
  kFmtDABC,   // d <- f(a, b, c); c is a register
  kFmtLoad,   // d <- M[a + imm]; a is a register
  kFmtStore,  // M[a + imm] <- b; a, b are registers
  kFmtAtom,   // d <- M[a + imm]; M[...] <- f(old, b); a, b registers
  kFmtCas,    // as kFmtAtom with compare b and new value c
  kFmtShfl,   // d <- a of another lane selected by b; width in flags
  kFmtBr,     // terminator with one target in imm[15:0]
  kFmtBrc,    // terminator on register a with targets imm[15:0] / imm[31:16]
};
using enum Format;

// The hardware unit an instruction needs; the block rules (lower.h) count them.
enum class Unit : std::uint8_t {
  kUnitNone,
  kUnitAlu,
  kUnitMul,
  kUnitLoad,
  kUnitStore,
  kUnitAtomic,
  kUnitShuffle,
  kUnitTerminator
};
using enum Unit;

// How an operand field (a or b) is read.
enum class Kind : std::uint8_t {
  kReg = 0,      // register r0..r15 (r0 reads 0)
  kImm = 1,      // the instruction's 32-bit immediate
  kSpecial = 2,  // a special value, numbered by the field
};

enum class Special : std::uint8_t { kTid = 0, kNtid = 1, kCtaid = 2, kNctaid = 3, kLaneId = 4, kCount };
std::string_view special_name(Special s);  // "tid", "ntid", ...

// Flag bits (6 bits, encoded at bit 26).
inline constexpr std::uint8_t kFlagShared = 1u << 0;  // ld/st/atom: shared memory instead of global
inline constexpr std::uint8_t kFlagWidthShift = 1;    // shfl: log2(width) in bits 1..2 (width 1, 2 or 4)
inline constexpr std::uint8_t kFlagWidthMask = 3u << 1;
inline constexpr std::uint8_t kFlagPred = 1u << 3;  // shfl: d gets 1/0 (source lane in range) instead of the value

struct OpInfo {
  Op op;
  std::string_view mnemonic;
  Format format;
  Unit unit;
  std::string_view doc;
};
const OpInfo& op_info(Op op);
inline bool is_terminator(Op op) {
  return op_info(op).unit == kUnitTerminator;
}
inline bool is_atomic(Op op) {
  return op_info(op).unit == kUnitAtomic;
}
// Whether the instruction writes its destination register d (ALU, mul, load,
// atomic, shuffle, ballot); writes to r0 are discarded.
inline bool writes_d(Op op) {
  switch (op_info(op).unit) {
    case kUnitAlu:
    case kUnitMul:
    case kUnitLoad:
    case kUnitAtomic:
    case kUnitShuffle: return true;
    default: return false;
  }
}

// A decoded instruction (also what the lowering builds).
struct Instr {
  Op op = Op::kNop;
  std::uint8_t d = 0, a = 0, b = 0, c = 0;  // register numbers, or the special's number for kSpecial
  Kind ak = Kind::kReg, bk = Kind::kReg;
  std::uint8_t flags = 0;
  std::uint32_t imm = 0;
};

// Field positions of the 64-bit encoding (docs/ISA.md "Encoding").
inline constexpr int kOpcodeBits = 6;
inline constexpr int kRegBits = 4;
inline constexpr int kPosD = 6, kPosA = 10, kPosB = 14, kPosC = 18, kPosAk = 22, kPosBk = 24, kPosFlags = 26,
                     kPosImm = 32;

std::uint64_t encode(const Instr& in);
// Fails (returns false) on an opcode or operand kind outside the table.
bool decode(std::uint64_t word, Instr& out);

// The result of an ALU row of the table (formats DA/DAB/DABC), and the new
// memory word of an atomic row given old = a. Other rows return 0.
std::uint32_t eval(Op op, std::uint32_t a, std::uint32_t b, std::uint32_t c);

// One instruction in assembly syntax, e.g. "add r3, r1, 16" or "ld.s r2, [r1+4]".
// `imm_text`, when given, is printed in place of the immediate (e.g. "@a+16").
std::string disassemble(const Instr& in, std::string_view imm_text = {});

// The instruction-table section of docs/ISA.md, generated from isa.def.
std::string isa_markdown_table();

}  // namespace qgpu::simt
