// Instruction selection: the driver, values, operand checks and the arithmetic families.
#include "lower/select.h"

#include <string>
#include <utility>

#include "lower/expansions.h"

namespace qgpu::simt::lower {

using sdk::ErrorCode;
using sdk::IrType;
using sdk::Opcode;
using sdk::Status;
using sdk::ValueId;
using Form = LoweredValue::Form;

sdk::Expected<Function> select_instructions(const sdk::KernelIR& kernel, const sdk::LaunchShape& shape,
                                            const MachineConfig& config, const BlockOrder& order,
                                            const Analysis& analysis, const SharedLayout& shared,
                                            const Diagnostics& diag) {
  return Selector(kernel, shape, config, order, analysis, shared, diag).run();
}

LoweredValue LoweredValue::of(Operand m) {
  switch (m.form) {
    case Operand::Form::kImm: return constant(m.imm, m.reloc);
    case Operand::Form::kZero: return constant(0);
    case Operand::Form::kSpecial: {
      LoweredValue v;
      v.form = Form::kSpecial;
      v.special = m.special;
      return v;
    }
    case Operand::Form::kVReg: return in_register(m.vreg);
    case Operand::Form::kNone: break;
  }
  return LoweredValue{};
}

sdk::Expected<Function> Selector::run() {
  const std::size_t values = kernel_.value_types.size();
  values_.assign(values, LoweredValue{});
  high_.assign(values, Operand{});
  chains_.assign(kernel_.blocks.size(), {});
  edges_before_.assign(kernel_.blocks.size(), {});
  // Every block's first machine block, and a register (two for a wide value) per live argument,
  // before any code: branches and edge copies refer to them.
  for (std::size_t b : order_.order) {
    chains_[b].push_back(builder_.new_block(diag_.label(b)));
    for (ValueId a : kernel_.blocks[b].args) {
      if (bits_of(analysis_.type(a)) == 0)
        return diag_.error(ErrorCode::kUnsupported, kernel_.loc,
                           "block argument %" + std::to_string(a) + " of " + diag_.label(b) + " has type " +
                               type_str(analysis_.type(a)) +
                               "; the machine computes i1, i32 and i64 (as its low 32 bits) only");
      values_[a] = analysis_.unused(a) ? LoweredValue{} : LoweredValue::in_register(builder_.new_vreg());
      if (analysis_.wide[a]) high_[a] = Operand::reg(builder_.new_vreg());
      if (analysis_.unused(a)) dead_args_.insert(a);
    }
  }
  for (std::size_t b : order_.order) {
    current_ir_ = b;
    builder_.enter(&chains_[b], diag_.label(b));
    builder_.set_current(chains_[b][0]);
    for (const sdk::Instr& in : kernel_.blocks[b].instrs) {
      builder_.set_loc(in.loc);
      QGPU_RETURN_IF_ERROR(select(in));
    }
  }
  QGPU_RETURN_IF_ERROR(finish_warp_scratch());
  // Each block's edge copies just before it, then its chain.
  for (std::size_t b : order_.order) {
    for (int e : edges_before_[b]) function_.layout.push_back(e);
    for (int m : chains_[b]) function_.layout.push_back(m);
  }
  return std::move(function_);
}

Status Selector::select(const sdk::Instr& in) {
  const bool wide_shift = (in.op == Opcode::kLShr || in.op == Opcode::kAShr) && bits_of(in.type) == 64;
  if (in.result != 0 && (analysis_.wide[in.result] || wide_shift)) return select_wide(in);
  switch (in.op) {
    case Opcode::kConst:
    case Opcode::kParam:
    case Opcode::kSharedAddr: return select_constant(in);
    case Opcode::kSpecial: return select_special(in);
    case Opcode::kAdd:
    case Opcode::kSub: return select_add_sub(in);
    case Opcode::kMul: return select_mul(in);
    case Opcode::kAnd:
    case Opcode::kOr:
    case Opcode::kXor:
    case Opcode::kShl:
    case Opcode::kLShr:
    case Opcode::kAShr:
    case Opcode::kSMin:
    case Opcode::kSMax:
    case Opcode::kUMin:
    case Opcode::kUMax: return select_binary(in);
    case Opcode::kNot:
    case Opcode::kNeg:
    case Opcode::kAbs: return select_unary(in);
    case Opcode::kMulHiS:
    case Opcode::kMulHiU:
    case Opcode::kSDiv:
    case Opcode::kUDiv:
    case Opcode::kSRem:
    case Opcode::kURem: return select_mulhi_div_rem(in);
    case Opcode::kPopc:
    case Opcode::kClz:
    case Opcode::kBrev: return select_bit_count(in);
    case Opcode::kICmp: return select_compare(in);
    case Opcode::kSelect: return select_select(in);
    case Opcode::kZExt:
    case Opcode::kSExt:
    case Opcode::kTrunc: return select_cast(in);
    case Opcode::kLoad:
    case Opcode::kStore:
    case Opcode::kAtomic: return select_memory(in);
    case Opcode::kShfl:
    case Opcode::kShflPred: return select_shuffle(in);
    case Opcode::kVote: return select_vote(in);
    case Opcode::kBarrier: return select_barrier(in);
    case Opcode::kRet: builder_.terminate(Terminator{Op::kExit, -1, -1, -1, in.loc}); return {};
    case Opcode::kBr: return select_branch(in);
    case Opcode::kCondBr: return select_cond_branch(in);
  }
  return diag_.unsupported(in, "opcode " + op_str(in.op) + " is not supported by machine_simt");
}

// ---------------------------------------------------------------- values

sdk::Expected<LoweredValue*> Selector::lookup(const sdk::Instr& in, ValueId v) {
  if (values_[v].form == Form::kNone)
    return diag_.error(
        in, ErrorCode::kInvalidArgument,
        op_str(in.op) + " uses %" + std::to_string(v) + " before its definition (or it is never defined)");
  return &values_[v];
}

sdk::Expected<Operand> Selector::resolved(const sdk::Instr& in, ValueId v) {
  QGPU_ASSIGN_OR_RETURN(auto* value, lookup(in, v));
  return resolve(*value);
}

Operand Selector::resolve(LoweredValue& v) {
  switch (v.form) {
    case Form::kReg: return Operand::reg(v.vreg);
    case Form::kConst: return Operand::immediate(v.imm, v.reloc);
    case Form::kSpecial: return Operand::special_reg(v.special);
    case Form::kRegOffset:
      return Operand::reg(builder_.emit(Op::kAdd, Operand::reg(v.vreg), Operand::immediate(v.imm, v.reloc)));
    case Form::kPendingMul: {
      const int d = builder_.multiply(v.factor_a, v.factor_b);
      v = LoweredValue::in_register(d);
      return Operand::reg(d);
    }
    case Form::kNone: break;
  }
  return {};
}

// ---------------------------------------------------------------- operand checks

Status Selector::need(const sdk::Instr& in, std::size_t n) const {
  if (in.operands.size() != n)
    return diag_.error(
        in, ErrorCode::kInvalidArgument,
        op_str(in.op) + " has " + std::to_string(in.operands.size()) + " operands, expected " + std::to_string(n));
  if (n > 0 && in.result == 0 && in.op != Opcode::kStore && in.op != Opcode::kAtomic && in.op != Opcode::kBarrier &&
      !sdk::is_terminator(in.op))
    return diag_.error(in, ErrorCode::kInvalidArgument, op_str(in.op) + " has no result value");
  return {};
}

// Types the machine computes: i1 (0/1), i32; i64, i16 and i8 live in a word as their low bits, which
// is exact for operations whose low bits do not depend on higher ones (i8/i16 values are sign- or
// zero-extended first where an operation needs them whole).
Status Selector::need_word(const sdk::Instr& in, IrType t, bool i64_ok, bool i1_ok, bool narrow_ok) const {
  const int bits = bits_of(t);
  if (bits == 32 || (bits == 64 && i64_ok) || (bits == 1 && i1_ok) || ((bits == 8 || bits == 16) && narrow_ok))
    return {};
  if (bits == 64)
    return diag_.unsupported(in, "i64 " + op_str(in.op) +
                                     " is not supported: the machine keeps 64-bit values as their low 32 bits, which "
                                     "is exact only for address arithmetic (add, sub, mul, shl, and/or/xor, "
                                     "compares, sext/zext/trunc)");
  return diag_.unsupported(in, type_str(t) + " " + op_str(in.op) +
                                   " is not supported: the machine computes on 32-bit words" +
                                   (bits == 1 ? " (predicates: and/or/xor/not/select/icmp/zext/sext only)" : ""));
}

// ---------------------------------------------------------------- constants

Status Selector::select_constant(const sdk::Instr& in) {
  const IrType t = in.type;
  switch (in.op) {
    case Opcode::kConst: {
      std::uint32_t v = static_cast<std::uint32_t>(in.imm);
      if (bits_of(t) == 1) v &= 1;
      if (narrow(bits_of(t))) v &= (1u << bits_of(t)) - 1;
      define(in, LoweredValue::constant(v));
      return {};
    }
    case Opcode::kParam: {
      if (in.imm < 0 || static_cast<std::size_t>(in.imm) >= kernel_.params.size())
        return diag_.error(
            in, ErrorCode::kInvalidArgument,
            "param #" + std::to_string(in.imm) + " but the kernel has " + std::to_string(kernel_.params.size()));
      define(in, LoweredValue::constant(0, static_cast<int>(in.imm)));
      return {};
    }
    default: {  // kSharedAddr
      if (in.imm < 0 || static_cast<std::size_t>(in.imm) >= shared_.offsets.size())
        return diag_.error(in, ErrorCode::kInvalidArgument,
                           "shared variable #" + std::to_string(in.imm) + " does not exist");
      define(in, LoweredValue::constant(static_cast<std::uint32_t>(shared_.offsets[in.imm])));
      return {};
    }
  }
}

// ---------------------------------------------------------------- arithmetic

Status Selector::select_add_sub(const sdk::Instr& in) {
  const IrType t = in.type;
  QGPU_RETURN_IF_ERROR(need(in, 2));
  QGPU_RETURN_IF_ERROR(need_word(in, t, true, true, true));
  if (result_unused(in)) return {};
  QGPU_ASSIGN_OR_RETURN(auto* lhs, lookup(in, in.operands[0]));
  QGPU_ASSIGN_OR_RETURN(auto* rhs, lookup(in, in.operands[1]));
  LoweredValue& a = *lhs;
  LoweredValue& b = *rhs;
  const bool sub = in.op == Opcode::kSub;
  if (bits_of(t) == 1) {  // i1: add and sub are xor
    define(in, LoweredValue::of(builder_.compute(Op::kXor, resolve(a), resolve(b))));
    return {};
  }
  // Constant folding, including launch constants plus an offset.
  if (a.form == Form::kConst && b.form == Form::kConst && (b.reloc < 0 || (!sub && a.reloc < 0))) {
    const int reloc = a.reloc >= 0 ? a.reloc : b.reloc;
    define(in, LoweredValue::constant(sub ? a.imm - b.imm : a.imm + b.imm, reloc));
    return {};
  }
  // mul feeding this add: mad.
  if (!sub && (a.form == Form::kPendingMul || b.form == Form::kPendingMul)) {
    LoweredValue& m = a.form == Form::kPendingMul ? a : b;
    LoweredValue& o = a.form == Form::kPendingMul ? b : a;
    if (o.form != Form::kConst) {
      const Operand c = resolve(o);
      define(in, LoweredValue::of(builder_.multiply_add(m.factor_a, m.factor_b, c)));
      m = LoweredValue{};
      return {};
    }
  }
  // reg + constant used only as addresses: fold into the memory offset.
  const bool b_const = b.form == Form::kConst, a_const = !sub && a.form == Form::kConst;
  if ((b_const || a_const) && analysis_.only_addresses(in.result)) {
    LoweredValue& base = b_const ? a : b;
    const LoweredValue& off = b_const ? b : a;
    if (!(sub && off.reloc >= 0)) {
      const std::uint32_t delta = sub ? 0u - off.imm : off.imm;
      if (base.form == Form::kRegOffset && (base.reloc < 0 || off.reloc < 0)) {
        LoweredValue r = base;
        r.imm += delta;
        if (r.reloc < 0) r.reloc = off.reloc;
        define(in, r);
        return {};
      }
      if (base.form != Form::kRegOffset) {
        const Operand bm = builder_.in_register(resolve(base));
        if (bm.is_vreg()) {
          LoweredValue r;
          r.form = Form::kRegOffset;
          r.vreg = bm.vreg;
          r.imm = delta;
          r.reloc = off.reloc;
          define(in, r);
          return {};
        }
      }
    }
  }
  define(in, LoweredValue::in_register(builder_.emit(sub ? Op::kSub : Op::kAdd, resolve(a), resolve(b))));
  return {};
}

Status Selector::select_mul(const sdk::Instr& in) {
  QGPU_RETURN_IF_ERROR(need(in, 2));
  QGPU_RETURN_IF_ERROR(need_word(in, in.type, true, false, true));
  if (result_unused(in)) return {};
  QGPU_ASSIGN_OR_RETURN(auto* x, lookup(in, in.operands[0]));
  QGPU_ASSIGN_OR_RETURN(auto* y, lookup(in, in.operands[1]));
  Operand a = resolve(*x), b = resolve(*y);
  if (a.is_plain_imm() && b.is_plain_imm()) {
    define(in, LoweredValue::constant(a.imm * b.imm));
    return {};
  }
  if (analysis_.mad_candidate(in)) {  // the add that uses it emits a mad
    LoweredValue v;
    v.form = Form::kPendingMul;
    v.factor_a = a;
    v.factor_b = b;
    define(in, v);
    return {};
  }
  define(in, LoweredValue::in_register(builder_.multiply(a, b)));
  return {};
}

Status Selector::select_binary(const sdk::Instr& in) {
  const IrType t = in.type;
  QGPU_RETURN_IF_ERROR(need(in, 2));
  const bool logic = in.op == Opcode::kAnd || in.op == Opcode::kOr || in.op == Opcode::kXor;
  QGPU_RETURN_IF_ERROR(need_word(in, t, logic || in.op == Opcode::kShl, logic, true));
  if (result_unused(in)) return {};
  static const std::pair<Opcode, Op> kMap[] = {
      {Opcode::kAnd, Op::kAnd},   {Opcode::kOr, Op::kOr},    {Opcode::kXor, Op::kXor},  {Opcode::kShl, Op::kShl},
      {Opcode::kLShr, Op::kShr},  {Opcode::kAShr, Op::kSra}, {Opcode::kSMin, Op::kMin}, {Opcode::kSMax, Op::kMax},
      {Opcode::kUMin, Op::kMinU}, {Opcode::kUMax, Op::kMaxU}};
  Op op = Op::kNop;
  for (auto [from_op, to_op] : kMap)
    if (from_op == in.op) op = to_op;
  QGPU_ASSIGN_OR_RETURN(auto* x, lookup(in, in.operands[0]));
  QGPU_ASSIGN_OR_RETURN(auto* y, lookup(in, in.operands[1]));
  Operand a = resolve(*x), b = resolve(*y);
  if (narrow(bits_of(t)) && !logic) {  // whole values where the high bits matter
    const bool sign = in.op == Opcode::kAShr || in.op == Opcode::kSMin || in.op == Opcode::kSMax;
    if (in.op != Opcode::kShl) a = widen(builder_, a, bits_of(t), sign);
    b = widen(builder_, b, bits_of(t), in.op == Opcode::kSMin || in.op == Opcode::kSMax);
  }
  if (in.op == Opcode::kShl && bits_of(t) == 64 && b.is_plain_imm() && b.imm >= 32 && b.imm < 64)
    b = imm(32);  // i64 shl by 32..63: low 32 bits are 0
  define(in, LoweredValue::of(builder_.compute(op, a, b)));
  return {};
}

Status Selector::select_unary(const sdk::Instr& in) {
  const IrType t = in.type;
  QGPU_RETURN_IF_ERROR(need(in, 1));
  QGPU_RETURN_IF_ERROR(need_word(in, t, in.op != Opcode::kAbs, in.op == Opcode::kNot, true));
  if (result_unused(in)) return {};
  QGPU_ASSIGN_OR_RETURN(Operand a, resolved(in, in.operands[0]));
  if (in.op == Opcode::kAbs) a = widen(builder_, a, bits_of(t), true);
  if (in.op == Opcode::kNot)
    define(in,
           LoweredValue::of(bits_of(t) == 1 ? builder_.compute(Op::kXor, a, imm(1)) : builder_.compute(Op::kNot, a)));
  else if (in.op == Opcode::kNeg)
    define(in, LoweredValue::of(builder_.compute(Op::kSub, Operand::immediate(0), a)));
  else
    define(in, LoweredValue::of(abs_of(builder_, a)));
  return {};
}

Status Selector::select_mulhi_div_rem(const sdk::Instr& in) {
  QGPU_RETURN_IF_ERROR(need(in, 2));
  // i8/i16 (clang narrows `x % 7u` when x fits 16 bits, and emits mul.hi.u16/.s16): quotients and
  // remainders are the 32-bit ones of the operands extended; the high half of a product is the
  // 32-bit product (exact: at most 2 x 16 bits) shifted down by the width.
  QGPU_RETURN_IF_ERROR(need_word(in, in.type, false, false, true));
  if (result_unused(in)) return {};
  QGPU_ASSIGN_OR_RETURN(auto* x, lookup(in, in.operands[0]));
  QGPU_ASSIGN_OR_RETURN(auto* y, lookup(in, in.operands[1]));
  Operand a = resolve(*x), b = resolve(*y);
  if (const int bits = bits_of(in.type); narrow(bits)) {
    const bool sign = in.op == Opcode::kSDiv || in.op == Opcode::kSRem || in.op == Opcode::kMulHiS;
    a = widen(builder_, a, bits, sign);
    b = widen(builder_, b, bits, sign);
    if (in.op == Opcode::kMulHiU || in.op == Opcode::kMulHiS) {
      const Operand product = builder_.compute(Op::kMul, a, b);
      define(in, LoweredValue::of(builder_.compute(sign ? Op::kSra : Op::kShr, product, imm(bits))));
      return {};
    }
  }
  switch (in.op) {
    case Opcode::kMulHiU: define(in, LoweredValue::of(mulhi_u(builder_, a, b))); break;
    case Opcode::kMulHiS: define(in, LoweredValue::of(mulhi_s(builder_, a, b))); break;
    case Opcode::kUDiv: define(in, LoweredValue::of(udivrem(builder_, a, b).first)); break;
    case Opcode::kURem: define(in, LoweredValue::of(udivrem(builder_, a, b).second)); break;
    case Opcode::kSDiv: define(in, LoweredValue::of(sdivrem(builder_, a, b, true))); break;
    default: define(in, LoweredValue::of(sdivrem(builder_, a, b, false))); break;
  }
  return {};
}

Status Selector::select_bit_count(const sdk::Instr& in) {
  QGPU_RETURN_IF_ERROR(need(in, 1));
  QGPU_RETURN_IF_ERROR(need_word(in, analysis_.type(in.operands[0]), false));
  if (result_unused(in)) return {};
  QGPU_ASSIGN_OR_RETURN(Operand a, resolved(in, in.operands[0]));
  define(in, LoweredValue::of(in.op == Opcode::kPopc  ? popc(builder_, a)
                              : in.op == Opcode::kClz ? clz(builder_, a)
                                                      : brev(builder_, a)));
  return {};
}

Status Selector::select_compare(const sdk::Instr& in) {
  QGPU_RETURN_IF_ERROR(need(in, 2));
  QGPU_RETURN_IF_ERROR(need_word(in, analysis_.type(in.operands[0]), true, true, true));
  if (result_unused(in)) return {};
  QGPU_ASSIGN_OR_RETURN(auto* x, lookup(in, in.operands[0]));
  QGPU_ASSIGN_OR_RETURN(auto* y, lookup(in, in.operands[1]));
  using P = sdk::CmpPred;
  const int bits = bits_of(analysis_.type(in.operands[0]));
  const bool sign = !(in.pred == P::kUlt || in.pred == P::kUle || in.pred == P::kUgt || in.pred == P::kUge);
  static const std::pair<P, Op> kMap[] = {{P::kEq, Op::kSetEq},   {P::kNe, Op::kSetNe},   {P::kSlt, Op::kSetLt},
                                          {P::kSle, Op::kSetLe},  {P::kSgt, Op::kSetGt},  {P::kSge, Op::kSetGe},
                                          {P::kUlt, Op::kSetLtU}, {P::kUle, Op::kSetLeU}, {P::kUgt, Op::kSetGtU},
                                          {P::kUge, Op::kSetGeU}};
  Op op = Op::kSetEq;
  for (auto [p, o] : kMap)
    if (p == in.pred) op = o;
  if (analysis_.wide[in.operands[0]] || analysis_.wide[in.operands[1]]) return select_wide_compare(in, op);
  define(in, LoweredValue::of(builder_.compute(op, widen(builder_, resolve(*x), bits, sign),
                                               widen(builder_, resolve(*y), bits, sign))));
  return {};
}

Status Selector::select_select(const sdk::Instr& in) {
  QGPU_RETURN_IF_ERROR(need(in, 3));
  QGPU_RETURN_IF_ERROR(need_word(in, in.type, true, true, true));
  if (result_unused(in)) return {};
  QGPU_ASSIGN_OR_RETURN(auto* condition, lookup(in, in.operands[0]));
  QGPU_ASSIGN_OR_RETURN(auto* if_true, lookup(in, in.operands[1]));
  QGPU_ASSIGN_OR_RETURN(auto* if_false, lookup(in, in.operands[2]));
  const Operand c = resolve(*condition);
  if (c.is_plain_imm()) {
    define(in, c.imm ? *if_true : *if_false);
    return {};
  }
  Operand a = resolve(*if_true), b = resolve(*if_false);
  define(in, LoweredValue::in_register(builder_.emit(Op::kSel, a, b, builder_.in_register(c))));
  return {};
}

Status Selector::select_cast(const sdk::Instr& in) {
  QGPU_RETURN_IF_ERROR(need(in, 1));
  const int from_bits = bits_of(analysis_.type(in.operands[0])), to_bits = bits_of(in.type);
  if (from_bits == 0 || to_bits == 0)
    return diag_.unsupported(in, op_str(in.op) + " " + type_str(analysis_.type(in.operands[0])) + " to " +
                                     type_str(in.type) + " is not supported");
  if (result_unused(in)) return {};
  QGPU_ASSIGN_OR_RETURN(auto* x, lookup(in, in.operands[0]));
  LoweredValue& a = *x;
  if (analysis_.is_alias(in) || from_bits == to_bits) {
    define(in, a);
    return {};
  }
  if (in.op == Opcode::kTrunc) {
    // Keep the low bits; an i1 must be exactly 0 or 1.
    if (to_bits == 1)
      define(in, LoweredValue::of(builder_.compute(Op::kAnd, resolve(a), imm(1))));
    else
      define(in, a);
    return {};
  }
  if (from_bits == 1) {  // zext keeps 0/1; sext gives 0 or all ones
    define(in, in.op == Opcode::kZExt
                   ? a
                   : LoweredValue::of(builder_.compute(Op::kSub, Operand::immediate(0), resolve(a))));
    return {};
  }
  define(in, LoweredValue::of(widen(builder_, resolve(a), from_bits, in.op == Opcode::kSExt)));
  return {};
}

}  // namespace qgpu::simt::lower
