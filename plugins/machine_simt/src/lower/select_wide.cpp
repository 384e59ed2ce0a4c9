// Instruction selection for i64 values whose high word is needed (Analysis::wide): each carries
// a second register, the high word, and every operation on it computes both words.
#include <string>

#include "lower/expansions.h"
#include "lower/select.h"

namespace qgpu::simt::lower {

using sdk::ErrorCode;
using sdk::Opcode;
using sdk::Status;

sdk::Expected<Operand> Selector::high_word(const sdk::Instr& in, sdk::ValueId v) const {
  const Operand h = high_[v];
  if (h.is_none()) return diag_.error(in, ErrorCode::kInternal, "no high word for %" + std::to_string(v));
  return h;
}

Status Selector::select_wide(const sdk::Instr& in) {
  // Both words of the result: the low one as the value, the high one beside it.
  auto done = [&](Operand lo, Operand hi) {
    values_[in.result] = LoweredValue::of(lo);
    high_[in.result] = hi;
    return Status{};
  };
  Builder& b = builder_;
  switch (in.op) {
    case Opcode::kConst: {
      const auto v = static_cast<std::uint64_t>(in.imm);
      return done(imm(static_cast<std::uint32_t>(v)), imm(static_cast<std::uint32_t>(v >> 32)));
    }
    case Opcode::kParam: {
      if (in.imm < 0 || static_cast<std::size_t>(in.imm) >= kernel_.params.size())
        return diag_.error(in, ErrorCode::kInvalidArgument, "param #" + std::to_string(in.imm) + " does not exist");
      const Operand lo = Operand::immediate(0, static_cast<int>(in.imm));
      const bool ptr = kernel_.params[in.imm].kind == sdk::KernelParam::Kind::kPointer;
      return done(lo, ptr ? imm(0) : b.compute(Op::kSra, lo, imm(31)));  // scalars are int32 launch values
    }
    case Opcode::kZExt:
    case Opcode::kSExt: {
      QGPU_RETURN_IF_ERROR(need(in, 1));
      const int from_bits = bits_of(analysis_.type(in.operands[0]));
      QGPU_ASSIGN_OR_RETURN(const Operand a, resolved(in, in.operands[0]));
      if (from_bits == 64) {
        QGPU_ASSIGN_OR_RETURN(const Operand h, high_word(in, in.operands[0]));
        return done(a, h);
      }
      const bool sign = in.op == Opcode::kSExt;
      Operand lo = from_bits == 1 ? (sign ? b.compute(Op::kSub, imm(0), a) : a) : widen(b, a, from_bits, sign);
      return done(lo, sign ? b.compute(Op::kSra, lo, imm(31)) : imm(0));
    }
    case Opcode::kAdd:
    case Opcode::kSub:
    case Opcode::kMul:
    case Opcode::kAnd:
    case Opcode::kOr:
    case Opcode::kXor: {
      QGPU_RETURN_IF_ERROR(need(in, 2));
      QGPU_ASSIGN_OR_RETURN(const Operand al, resolved(in, in.operands[0]));
      QGPU_ASSIGN_OR_RETURN(const Operand bl, resolved(in, in.operands[1]));
      QGPU_ASSIGN_OR_RETURN(const Operand ah, high_word(in, in.operands[0]));
      QGPU_ASSIGN_OR_RETURN(const Operand bh, high_word(in, in.operands[1]));
      switch (in.op) {
        case Opcode::kAdd: {
          const Operand lo = b.compute(Op::kAdd, al, bl);
          const Operand carry = b.compute(Op::kSetLtU, lo, al);
          return done(lo, b.compute(Op::kAdd, b.compute(Op::kAdd, ah, bh), carry));
        }
        case Opcode::kSub: {
          const Operand borrow = b.compute(Op::kSetLtU, al, bl);
          const Operand lo = b.compute(Op::kSub, al, bl);
          return done(lo, b.compute(Op::kSub, b.compute(Op::kSub, ah, bh), borrow));
        }
        case Opcode::kMul: {
          // (ah:al) * (bh:bl) mod 2^64 = al*bl + ((mulhi(al, bl) + al*bh + ah*bl) << 32)
          const Operand hi = b.compute(Op::kAdd, mulhi_u(b, al, bl),
                                       b.compute(Op::kAdd, b.compute(Op::kMul, al, bh), b.compute(Op::kMul, ah, bl)));
          return done(b.compute(Op::kMul, al, bl), hi);
        }
        default: {
          const Op op = in.op == Opcode::kAnd ? Op::kAnd : in.op == Opcode::kOr ? Op::kOr : Op::kXor;
          return done(b.compute(op, al, bl), b.compute(op, ah, bh));
        }
      }
    }
    case Opcode::kNot:
    case Opcode::kNeg: {
      QGPU_RETURN_IF_ERROR(need(in, 1));
      QGPU_ASSIGN_OR_RETURN(const Operand al, resolved(in, in.operands[0]));
      QGPU_ASSIGN_OR_RETURN(const Operand ah, high_word(in, in.operands[0]));
      if (in.op == Opcode::kNot) return done(b.compute(Op::kNot, al), b.compute(Op::kNot, ah));
      const Operand borrow = b.compute(Op::kSetNe, al, imm(0));
      return done(b.compute(Op::kSub, imm(0), al), b.compute(Op::kSub, b.compute(Op::kSub, imm(0), ah), borrow));
    }
    case Opcode::kShl:
    case Opcode::kLShr:
    case Opcode::kAShr: {
      QGPU_RETURN_IF_ERROR(need(in, 2));
      QGPU_ASSIGN_OR_RETURN(const Operand l, resolved(in, in.operands[0]));
      QGPU_ASSIGN_OR_RETURN(const Operand h, high_word(in, in.operands[0]));
      QGPU_ASSIGN_OR_RETURN(const Operand amount, resolved(in, in.operands[1]));
      if (!amount.is_plain_imm())
        return diag_.unsupported(
            in, "i64 " + op_str(in.op) + " by a variable amount is not supported (constant amounts are)");
      const std::uint32_t k = amount.imm;
      if (in.op == Opcode::kShl) {
        if (k >= 64) return done(imm(0), imm(0));
        if (k >= 32) return done(imm(0), b.compute(Op::kShl, l, imm(k - 32)));
        if (k == 0) return done(l, h);
        return done(b.compute(Op::kShl, l, imm(k)),
                    b.compute(Op::kOr, b.compute(Op::kShl, h, imm(k)), b.compute(Op::kShr, l, imm(32 - k))));
      }
      const bool arith = in.op == Opcode::kAShr;
      const Op down = arith ? Op::kSra : Op::kShr;
      const Operand fill = arith ? b.compute(Op::kSra, h, imm(31)) : imm(0);
      if (k >= 64) return done(fill, fill);
      if (k >= 32) return done(b.compute(down, h, imm(k - 32)), fill);
      if (k == 0) return done(l, h);
      return done(b.compute(Op::kOr, b.compute(Op::kShr, l, imm(k)), b.compute(Op::kShl, h, imm(32 - k))),
                  b.compute(down, h, imm(k)));
    }
    case Opcode::kSelect: {
      QGPU_RETURN_IF_ERROR(need(in, 3));
      QGPU_ASSIGN_OR_RETURN(const Operand c, resolved(in, in.operands[0]));
      QGPU_ASSIGN_OR_RETURN(const Operand al, resolved(in, in.operands[1]));
      QGPU_ASSIGN_OR_RETURN(const Operand bl, resolved(in, in.operands[2]));
      QGPU_ASSIGN_OR_RETURN(const Operand ah, high_word(in, in.operands[1]));
      QGPU_ASSIGN_OR_RETURN(const Operand bh, high_word(in, in.operands[2]));
      if (c.is_plain_imm()) return c.imm ? done(al, ah) : done(bl, bh);
      const Operand cr = b.in_register(c);
      return done(Operand::reg(b.emit(Op::kSel, al, bl, cr)), Operand::reg(b.emit(Op::kSel, ah, bh, cr)));
    }
    case Opcode::kLoad: return select_memory(in);  // both words (select_subword.cpp)
    default: break;
  }
  return diag_.unsupported(
      in, "i64 " + op_str(in.op) + " whose high 32 bits are used (by a 64-bit right shift, store or compare) is not supported");
}

// A compare of two i64 values whose high words are known (Analysis::wide): the high words decide
// unless they are equal, then the low words, unsigned. `op` is the 32-bit compare of the predicate.
Status Selector::select_wide_compare(const sdk::Instr& in, Op op) {
  Builder& b = builder_;
  QGPU_ASSIGN_OR_RETURN(const Operand al, resolved(in, in.operands[0]));
  QGPU_ASSIGN_OR_RETURN(const Operand bl, resolved(in, in.operands[1]));
  QGPU_ASSIGN_OR_RETURN(const Operand ah, high_word(in, in.operands[0]));
  QGPU_ASSIGN_OR_RETURN(const Operand bh, high_word(in, in.operands[1]));
  if (op == Op::kSetEq || op == Op::kSetNe) {
    const Operand lo = b.compute(Op::kXor, al, bl), hi = b.compute(Op::kXor, ah, bh);
    define(in, LoweredValue::of(b.compute(op, b.compute(Op::kOr, lo, hi), imm(0))));
    return {};
  }
  const bool sign = op == Op::kSetLt || op == Op::kSetLe || op == Op::kSetGt || op == Op::kSetGe;
  // x < y over both words: hi(x) < hi(y) (signed or not), or equal high words and lo(x) <u lo(y).
  auto less = [&](Operand xl, Operand xh, Operand yl, Operand yh) {
    const Operand high_less = b.compute(sign ? Op::kSetLt : Op::kSetLtU, xh, yh);
    const Operand tie = b.compute(Op::kAnd, b.compute(Op::kSetEq, xh, yh), b.compute(Op::kSetLtU, xl, yl));
    return b.compute(Op::kOr, high_less, tie);
  };
  Operand r;
  if (op == Op::kSetLt || op == Op::kSetLtU) r = less(al, ah, bl, bh);
  else if (op == Op::kSetGt || op == Op::kSetGtU) r = less(bl, bh, al, ah);
  else if (op == Op::kSetLe || op == Op::kSetLeU) r = b.compute(Op::kXor, less(bl, bh, al, ah), imm(1));
  else r = b.compute(Op::kXor, less(al, ah, bl, bh), imm(1));
  define(in, LoweredValue::of(r));
  return {};
}

}  // namespace qgpu::simt::lower
