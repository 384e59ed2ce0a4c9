#include "lower/builder.h"

#include <bit>

namespace qgpu::simt::lower {

int Builder::new_block(std::string label) {
  function_.blocks.push_back(Block{std::move(label), {}, {}});
  return static_cast<int>(function_.blocks.size() - 1);
}

int Builder::split_block(const std::string& suffix) {
  const int id = new_block(chain_label_ + "." + suffix);
  chain_->push_back(id);
  return id;
}

void Builder::append(Instruction instruction) {
  instruction.loc = loc_;
  function_.blocks[current_].code.push_back(std::move(instruction));
}

int Builder::emit_into(int dest, Op op, Operand a, Operand b, Operand c) {
  if (a.form == Operand::Form::kImm && b.form == Operand::Form::kImm) a = Operand::reg(emit_into(-1, Op::kMov, a));
  if (dest < 0) dest = new_vreg();
  Instruction instruction;
  instruction.op = op;
  instruction.dest = dest;
  instruction.a = a;
  instruction.b = b;
  instruction.c = c;
  append(std::move(instruction));
  return dest;
}

Operand Builder::compute(Op op, Operand a, Operand b) {
  if (a.is_plain_imm() && (b.is_none() || b.is_plain_imm())) return Operand::immediate(eval(op, a.imm, b.imm, 0));
  const bool commutes = op == Op::kAdd || op == Op::kMul || op == Op::kAnd || op == Op::kOr || op == Op::kXor;
  if (commutes && a.is_plain_imm()) std::swap(a, b);
  if (b.is_plain_imm()) {
    const std::uint32_t k = b.imm;
    switch (op) {
      case Op::kAdd:
      case Op::kSub:
      case Op::kOr:
      case Op::kXor:
      case Op::kShl:
      case Op::kShr:
      case Op::kSra:
        if (k == 0) return a;
        break;
      case Op::kAnd:
        if (k == 0xffffffffu) return a;
        if (k == 0) return imm(0);
        break;
      case Op::kMul:
        if (k == 1) return a;
        if (k == 0) return imm(0);
        if (std::has_single_bit(k))
          return Operand::reg(emit(Op::kShl, a, imm(static_cast<std::uint32_t>(std::countr_zero(k)))));
        break;
      default: break;
    }
  }
  return Operand::reg(emit(op, a, b));
}

Operand Builder::multiply_add(Operand a, Operand b, Operand c) {
  if (a.is_plain_imm() && b.is_plain_imm()) return compute(Op::kAdd, imm(a.imm * b.imm), c);
  if ((a.is_plain_imm() && a.imm == 0) || (b.is_plain_imm() && b.imm == 0)) return c;
  if (c.is_plain_imm() && c.imm == 0) return compute(Op::kMul, a, b);
  if (a.is_plain_imm() && a.imm == 1) return compute(Op::kAdd, b, c);
  if (b.is_plain_imm() && b.imm == 1) return compute(Op::kAdd, a, c);
  return Operand::reg(emit(Op::kMad, a, b, in_register(c)));
}

int Builder::multiply(Operand a, Operand b) {
  if (a.is_plain_imm()) std::swap(a, b);
  if (b.is_plain_imm() && b.imm != 0 && std::has_single_bit(b.imm))
    return emit(Op::kShl, a, imm(static_cast<std::uint32_t>(std::countr_zero(b.imm))));
  return emit(Op::kMul, a, b);
}

Operand Builder::in_register(Operand m) {
  if (m.is_reg()) return m;
  if (m.is_plain_imm() && m.imm == 0) return Operand::zero();
  return Operand::reg(emit(Op::kMov, m));
}

}  // namespace qgpu::simt::lower
