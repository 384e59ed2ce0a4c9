#include "isa.h"

#include <cstdio>

namespace qgpu::simt {
namespace {

constexpr OpInfo kTable[] = {
#define QGPU_SIMT_OP(name, mnemonic, format, unit, expr, doc) {Op::name, mnemonic, format, unit, doc},
#include "isa.def"
#undef QGPU_SIMT_OP
};
static_assert(std::size(kTable) == static_cast<std::size_t>(kOpCount));
static_assert(kOpCount <= (1 << kOpcodeBits), "opcodes must fit the 6-bit field");

std::string operand(Kind kind, std::uint8_t field, std::uint32_t imm, std::string_view imm_text) {
  switch (kind) {
    case Kind::kReg: return "r" + std::to_string(field);
    case Kind::kImm: return imm_text.empty() ? std::to_string(s32(imm)) : std::string(imm_text);
    case Kind::kSpecial: return "%" + std::string(special_name(static_cast<Special>(field)));
  }
  return "?";
}

std::string escape_pipes(std::string_view text) {
  std::string out;
  for (char ch : text) {
    if (ch == '|') out += '\\';
    out += ch;
  }
  return out;
}

std::string reg(std::uint8_t r) {
  return "r" + std::to_string(r);
}

std::string address(const Instr& in, std::string_view imm_text) {
  std::string s = "[" + reg(in.a);
  if (!imm_text.empty())
    s += "+" + std::string(imm_text);
  else if (in.imm != 0)
    s += (s32(in.imm) < 0 ? "" : "+") + std::to_string(s32(in.imm));
  return s + "]";
}

}  // namespace

std::string_view special_name(Special s) {
  switch (s) {
    case Special::kTid: return "tid";
    case Special::kNtid: return "ntid";
    case Special::kCtaid: return "ctaid";
    case Special::kNctaid: return "nctaid";
    case Special::kLaneId: return "laneid";
    case Special::kCount: break;
  }
  return "?";
}

const OpInfo& op_info(Op op) {
  return kTable[static_cast<int>(op)];
}

std::uint64_t encode(const Instr& in) {
  std::uint64_t w = static_cast<std::uint64_t>(in.op) & 0x3f;
  w |= static_cast<std::uint64_t>(in.d & 0xf) << kPosD;
  w |= static_cast<std::uint64_t>(in.a & 0xf) << kPosA;
  w |= static_cast<std::uint64_t>(in.b & 0xf) << kPosB;
  w |= static_cast<std::uint64_t>(in.c & 0xf) << kPosC;
  w |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(in.ak) & 3) << kPosAk;
  w |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(in.bk) & 3) << kPosBk;
  w |= static_cast<std::uint64_t>(in.flags & 0x3f) << kPosFlags;
  w |= static_cast<std::uint64_t>(in.imm) << kPosImm;
  return w;
}

bool decode(std::uint64_t w, Instr& out) {
  const unsigned opcode = w & 0x3f;
  if (opcode >= static_cast<unsigned>(kOpCount)) return false;
  out.op = static_cast<Op>(opcode);
  out.d = (w >> kPosD) & 0xf;
  out.a = (w >> kPosA) & 0xf;
  out.b = (w >> kPosB) & 0xf;
  out.c = (w >> kPosC) & 0xf;
  const unsigned ak = (w >> kPosAk) & 3, bk = (w >> kPosBk) & 3;
  if (ak > 2 || bk > 2) return false;
  out.ak = static_cast<Kind>(ak);
  out.bk = static_cast<Kind>(bk);
  if ((out.ak == Kind::kSpecial && out.a >= static_cast<unsigned>(Special::kCount)) ||
      (out.bk == Kind::kSpecial && out.b >= static_cast<unsigned>(Special::kCount)))
    return false;
  out.flags = (w >> kPosFlags) & 0x3f;
  out.imm = static_cast<std::uint32_t>(w >> kPosImm);
  return true;
}

std::uint32_t eval(Op op, std::uint32_t a, std::uint32_t b, std::uint32_t c) {
  switch (op) {
#define QGPU_SIMT_OP(name, mnemonic, format, unit, expr, doc) \
  case Op::name:                                              \
    return static_cast<std::uint32_t>(expr);
#include "isa.def"
#undef QGPU_SIMT_OP
    case Op::kCount: break;
  }
  return 0;
}

std::string disassemble(const Instr& in, std::string_view t) {
  const OpInfo& info = op_info(in.op);
  std::string m(info.mnemonic);
  const std::string space = (in.flags & kFlagShared) ? ".s" : "";
  switch (info.format) {
    case kFmtNone: return m;
    case kFmtDA: return m + " " + reg(in.d) + ", " + operand(in.ak, in.a, in.imm, t);
    case kFmtDAB:
      return m + " " + reg(in.d) + ", " + operand(in.ak, in.a, in.imm, t) + ", " + operand(in.bk, in.b, in.imm, t);
    case kFmtDABC:
      return m + " " + reg(in.d) + ", " + operand(in.ak, in.a, in.imm, t) + ", " + operand(in.bk, in.b, in.imm, t) +
             ", " + reg(in.c);
    case kFmtLoad: return m + space + " " + reg(in.d) + ", " + address(in, t);
    case kFmtStore: return m + space + " " + address(in, t) + ", " + reg(in.b);
    case kFmtAtom: return m + space + " " + reg(in.d) + ", " + address(in, t) + ", " + reg(in.b);
    case kFmtCas: return m + space + " " + reg(in.d) + ", " + address(in, t) + ", " + reg(in.b) + ", " + reg(in.c);
    case kFmtShfl: {
      const int width = 1 << ((in.flags & kFlagWidthMask) >> kFlagWidthShift);
      return m + ((in.flags & kFlagPred) ? ".p" : "") + " " + reg(in.d) + ", " + operand(in.ak, in.a, in.imm, t) +
             ", " + operand(in.bk, in.b, in.imm, t) + ", w" + std::to_string(width);
    }
    case kFmtBr: return m + " B" + std::to_string(in.imm & 0xffff);
    case kFmtBrc:
      return m + " " + reg(in.a) + ", B" + std::to_string(in.imm & 0xffff) + ", B" + std::to_string(in.imm >> 16);
  }
  return m;
}

std::string isa_markdown_table() {
  static constexpr std::string_view kFormatNames[] = {"-",
                                                      "d, a",
                                                      "d, a, b",
                                                      "d, a, b, c",
                                                      "d, [a+imm]",
                                                      "[a+imm], b",
                                                      "d, [a+imm], b",
                                                      "d, [a+imm], b, c",
                                                      "d, a, b (w)",
                                                      "target",
                                                      "a, taken, not-taken"};
  static constexpr std::string_view kUnitNames[] = {"-", "alu", "mul", "load", "store", "atomic", "shuffle", "control"};
  std::string out = "| opcode | mnemonic | operands | unit | semantics |\n|---:|---|---|---|---|\n";
  for (const OpInfo& info : kTable) {
    char code[8];
    std::snprintf(code, sizeof code, "%d", static_cast<int>(info.op));
    out += "| " + std::string(code) + " | `" + std::string(info.mnemonic) + "` | " +
           std::string(kFormatNames[static_cast<int>(info.format)]) + " | " +
           std::string(kUnitNames[static_cast<int>(info.unit)]) + " | " + escape_pipes(info.doc) + " |\n";
  }
  return out;
}

}  // namespace qgpu::simt
