// Instruction selection for 8-, 16- and (at the end) 64-bit loads and stores. Memory holds 32-bit
// words, so a sub-word access works on the word that contains it (little-endian: byte k of the word
// at byte address 4w is the byte at address 4w + k), with existing machine instructions only:
//
//   load:  w = ld [x & ~3]; v = w >> 8 * (x & 3)
//          (v's low 8 or 16 bits are the value; the KernelIR's zext/sext that follows makes it whole)
//   store: atom.and [x & ~3], ~(mask << s); atom.or [x & ~3], (v << s) & (mask << s)   (s = 8 * (x & 3))
//          (a constant 0 needs only the first, a constant 0xff/0xffff only the second)
//
// The store is two atomics because the lanes of a warp run in lockstep: a read-modify-write with
// ld/st would let the last lane's word overwrite the bytes the other lanes wrote to the same word.
// Atomics apply lane by lane (docs/ISA.md §5), so stores to different bytes of a word compose.
//
// A 16-bit access must be 2-aligned: its word address is x & ~2 instead of x & ~3, which equals
// x & ~3 when x is even and is odd (the interpreter's "misaligned" error) when x is odd.
#include <string>

#include "lower/select.h"

namespace qgpu::simt::lower {

using sdk::IrType;
using sdk::Opcode;
using sdk::Status;
using Form = LoweredValue::Form;

Status Selector::select_subword(const sdk::Instr& in, bool shared) {
  const bool load = in.op == Opcode::kLoad;
  const int bits = bits_of(load ? in.type : analysis_.type(in.operands[1]));
  const std::uint32_t mask = bits == 8 ? 0xffu : 0xffffu;
  const std::uint32_t align_mask = bits == 8 ? ~3u : ~2u;  // keeps bit 0 of a 16-bit address: odd faults
  if (load && result_unused(in)) return {};
  QGPU_ASSIGN_OR_RETURN(auto* address, lookup(in, in.operands[0]));

  // The memory operand [base + offset] of the containing word, and the shift s = 8 * (x & 3).
  // Launch constants (array bases) and shared offsets are multiples of 4, so only the plain part
  // of an offset moves the byte within its word.
  Instruction mi;
  mi.flags = shared ? kFlagShared : 0;
  Operand shift;
  const auto key = std::make_tuple(current_ir_, in.operands[0], align_mask);
  if (auto it = subword_addresses_.find(key); it != subword_addresses_.end()) {
    mi.a = it->second.word;
    mi.offset = it->second.offset;
    mi.reloc = it->second.reloc;
    shift = it->second.shift;
  } else if (address->form == Form::kConst) {
    mi.a = Operand::zero();
    mi.offset = address->imm & align_mask;
    mi.reloc = address->reloc;
    shift = imm(8 * (address->imm & 3));
  } else {
    Operand x;
    mi.offset = 0;
    if (address->form == Form::kRegOffset) {
      // [reg + off]: the low bits of off go into the register, the rest stays an offset.
      x = Operand::reg(address->vreg);
      if (address->imm & 3) x = builder_.compute(Op::kAdd, x, imm(address->imm & 3));
      mi.offset = address->imm & ~3u;
      mi.reloc = address->reloc;
    } else {
      x = builder_.in_register(resolve(*address));
    }
    mi.a = builder_.in_register(builder_.compute(Op::kAnd, x, imm(align_mask)));
    shift = builder_.compute(Op::kShl, builder_.compute(Op::kAnd, x, imm(3)), imm(3));
    subword_addresses_[key] = SubwordAddress{mi.a, shift, mi.offset, mi.reloc};
  }

  if (load) {
    mi.op = Op::kLd;
    mi.dest = builder_.new_vreg();
    const Operand word = Operand::reg(mi.dest);
    builder_.append(mi);
    define(in, LoweredValue::of(builder_.compute(Op::kShr, word, shift)));
    return {};
  }

  QGPU_ASSIGN_OR_RETURN(const Operand value, resolved(in, in.operands[1]));
  const Operand field = builder_.compute(Op::kShl, imm(mask), shift);  // mask << s
  // A constant 0 only clears (one atomic), a constant of all ones only sets.
  const bool zeros = value.is_plain_imm() && (value.imm & mask) == 0;
  const bool ones = value.is_plain_imm() && (value.imm & mask) == mask;
  if (!ones) {
    Instruction clear_op = mi;
    clear_op.op = Op::kAtomAnd;
    clear_op.b = builder_.in_register(builder_.compute(Op::kNot, field));
    builder_.append(std::move(clear_op));
  }
  if (!zeros) {
    Instruction set_op = mi;
    set_op.op = Op::kAtomOr;
    set_op.b = builder_.in_register(ones ? field
                                         : builder_.compute(Op::kAnd, builder_.compute(Op::kShl, value, shift), field));
    builder_.append(std::move(set_op));
  }
  return {};
}

// A 64-bit load or store is two word accesses, the low word at x and the high word at x + 4
// (little-endian). A load whose high word nothing observes (Analysis::wide) reads only the low word;
// a stored value is always wide (the analysis marks it), so both words are written.
Status Selector::select_doubleword(const sdk::Instr& in, bool shared) {
  const bool load = in.op == Opcode::kLoad;
  if (load && result_unused(in)) return {};
  QGPU_ASSIGN_OR_RETURN(auto* address, lookup(in, in.operands[0]));
  Instruction mi;
  mi.flags = shared ? kFlagShared : 0;
  if (address->form == Form::kConst || address->form == Form::kRegOffset) {
    mi.a = address->form == Form::kConst ? Operand::zero() : Operand::reg(address->vreg);
    mi.offset = address->imm;
    mi.reloc = address->reloc;
  } else {
    mi.a = builder_.in_register(resolve(*address));
  }
  Instruction high = mi;
  high.offset += 4;
  if (load) {
    mi.op = high.op = Op::kLd;
    mi.dest = builder_.new_vreg();
    values_[in.result] = LoweredValue::in_register(mi.dest);
    builder_.append(std::move(mi));
    if (analysis_.wide[in.result]) {
      high.dest = builder_.new_vreg();
      high_[in.result] = Operand::reg(high.dest);
      builder_.append(std::move(high));
    }
    return {};
  }
  QGPU_ASSIGN_OR_RETURN(const Operand lo, resolved(in, in.operands[1]));
  QGPU_ASSIGN_OR_RETURN(const Operand hi, high_word(in, in.operands[1]));
  mi.op = high.op = Op::kSt;
  mi.b = builder_.in_register(lo);
  high.b = builder_.in_register(hi);
  builder_.append(std::move(mi));
  builder_.append(std::move(high));
  return {};
}

}  // namespace qgpu::simt::lower
