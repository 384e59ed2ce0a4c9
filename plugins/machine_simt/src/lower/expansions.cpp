#include "lower/expansions.h"

namespace qgpu::simt::lower {

Operand abs_of(Builder& b, Operand a) {
  const Operand s = b.compute(Op::kSra, a, imm(31));
  return b.compute(Op::kSub, b.compute(Op::kXor, a, s), s);
}

// From 16-bit halves, every partial sum below 2^32 (Hacker's Delight mulhu): 11 instructions (13
// without a constant operand).
Operand mulhi_u(Builder& b, Operand x, Operand y) {
  if (x.is_plain_imm()) std::swap(x, y);
  // Ordered so that each half dies as soon as possible (register pressure).
  const Operand xl = b.compute(Op::kAnd, x, imm(0xffff)), yl = b.compute(Op::kAnd, y, imm(0xffff));
  const Operand s0 = b.compute(Op::kShr, b.compute(Op::kMul, xl, yl), imm(16));
  const Operand xh = b.compute(Op::kShr, x, imm(16));
  const Operand t1 = b.multiply_add(xh, yl, s0);
  const Operand yh = b.compute(Op::kShr, y, imm(16));
  const Operand t2 = b.multiply_add(xl, yh, b.compute(Op::kAnd, t1, imm(0xffff)));
  const Operand hi = b.multiply_add(xh, yh, b.compute(Op::kShr, t1, imm(16)));
  return b.compute(Op::kAdd, hi, b.compute(Op::kShr, t2, imm(16)));
}

// Signed from unsigned: hi_s = hi_u - (x < 0 ? y : 0) - (y < 0 ? x : 0).
Operand mulhi_s(Builder& b, Operand x, Operand y) {
  Operand hi = mulhi_u(b, x, y);
  hi = b.compute(Op::kSub, hi, b.compute(Op::kAnd, b.compute(Op::kSra, x, imm(31)), y));
  return b.compute(Op::kSub, hi, b.compute(Op::kAnd, b.compute(Op::kSra, y, imm(31)), x));
}

// Restoring shift-subtract division, 32 iterations of one loop (3 blocks).
std::pair<Operand, Operand> udivrem(Builder& b, Operand n, Operand d) {
  if (n.is_plain_imm() && d.is_plain_imm())
    return {imm(d.imm ? n.imm / d.imm : 0xffffffffu), imm(d.imm ? n.imm % d.imm : n.imm)};
  if (d.form == Operand::Form::kSpecial || (d.form == Operand::Form::kImm && d.reloc >= 0))
    d = Operand::reg(b.emit(Op::kMov, d));
  const int q = b.emit(Op::kMov, imm(0)), r = b.emit(Op::kMov, imm(0));
  const int shifted = b.emit(Op::kMov, n), count = b.emit(Op::kMov, imm(32));
  const int loop = b.split_block("div"), end = b.split_block("div.end");
  b.terminate(Terminator{Op::kBr, -1, loop, -1, b.loc()});
  b.set_current(loop);
  const int top = b.emit(Op::kShr, Operand::reg(shifted), imm(31));
  b.emit_into(r, Op::kShl, Operand::reg(r), imm(1));
  b.emit_into(r, Op::kOr, Operand::reg(r), Operand::reg(top));
  b.emit_into(shifted, Op::kShl, Operand::reg(shifted), imm(1));
  const int ge = b.emit(Op::kSetGeU, Operand::reg(r), d);
  const int diff = b.emit(Op::kSub, Operand::reg(r), d);
  b.emit_into(r, Op::kSel, Operand::reg(diff), Operand::reg(r), Operand::reg(ge));
  b.emit_into(q, Op::kShl, Operand::reg(q), imm(1));
  b.emit_into(q, Op::kOr, Operand::reg(q), Operand::reg(ge));
  b.emit_into(count, Op::kSub, Operand::reg(count), imm(1));
  b.terminate(Terminator{Op::kBrc, count, loop, end, b.loc()});
  b.set_current(end);
  // Fresh names, so later uses never see the loop's redefinitions as SSA values.
  return {Operand::reg(b.emit(Op::kMov, Operand::reg(q))), Operand::reg(b.emit(Op::kMov, Operand::reg(r)))};
}

// Division on magnitudes; the quotient takes sign(x)^sign(y), the remainder sign(x).
Operand sdivrem(Builder& b, Operand x, Operand y, bool quotient) {
  if (x.is_plain_imm() && y.is_plain_imm() && y.imm != 0 && !(x.imm == 0x80000000u && y.imm == 0xffffffffu))
    return imm(quotient ? u32(static_cast<std::int64_t>(s32(x.imm) / s32(y.imm)))
                        : u32(static_cast<std::int64_t>(s32(x.imm) % s32(y.imm))));
  const Operand sx = b.compute(Op::kSra, x, imm(31)), sy = b.compute(Op::kSra, y, imm(31));
  const Operand ux = b.compute(Op::kSub, b.compute(Op::kXor, x, sx), sx),
                uy = b.compute(Op::kSub, b.compute(Op::kXor, y, sy), sy);
  auto [q, r] = udivrem(b, ux, uy);
  if (quotient) {
    const Operand s = b.compute(Op::kXor, sx, sy);
    return b.compute(Op::kSub, b.compute(Op::kXor, q, s), s);
  }
  return b.compute(Op::kSub, b.compute(Op::kXor, r, sx), sx);
}

Operand popc(Builder& b, Operand x) {
  x = b.compute(Op::kSub, x, b.compute(Op::kAnd, b.compute(Op::kShr, x, imm(1)), imm(0x55555555)));
  x = b.compute(Op::kAdd, b.compute(Op::kAnd, x, imm(0x33333333)),
                b.compute(Op::kAnd, b.compute(Op::kShr, x, imm(2)), imm(0x33333333)));
  x = b.compute(Op::kAnd, b.compute(Op::kAdd, x, b.compute(Op::kShr, x, imm(4))), imm(0x0f0f0f0f));
  return b.compute(Op::kShr, b.compute(Op::kMul, x, imm(0x01010101)), imm(24));
}

// Binary search: shift the value left while its top 16/8/4/2/1 bits are zero.
Operand clz(Builder& b, Operand x) {
  Operand v = x, n = imm(0);
  const std::pair<std::uint32_t, std::uint32_t> steps[] = {
      {0x10000u, 4}, {0x1000000u, 3}, {0x10000000u, 2}, {0x40000000u, 1}};
  for (auto [below, log_shift] : steps) {
    const Operand s = b.compute(Op::kShl, b.compute(Op::kSetLtU, v, imm(below)), imm(log_shift));
    v = b.compute(Op::kShl, v, s);
    n = b.compute(Op::kAdd, n, s);
  }
  n = b.compute(Op::kAdd, n, b.compute(Op::kSetLtU, v, imm(0x80000000u)));
  return b.compute(Op::kAdd, n, b.compute(Op::kSetEq, x, imm(0)));
}

Operand brev(Builder& b, Operand x) {
  const std::pair<std::uint32_t, std::uint32_t> steps[] = {
      {0x55555555u, 1}, {0x33333333u, 2}, {0x0f0f0f0fu, 4}, {0x00ff00ffu, 8}};
  for (auto [mask, s] : steps)
    x = b.compute(Op::kOr, b.compute(Op::kAnd, b.compute(Op::kShr, x, imm(s)), imm(mask)),
                  b.compute(Op::kShl, b.compute(Op::kAnd, x, imm(mask)), imm(s)));
  return b.compute(Op::kOr, b.compute(Op::kShr, x, imm(16)), b.compute(Op::kShl, x, imm(16)));
}

Operand widen(Builder& b, Operand v, int bits, bool sign) {
  if (!narrow(bits)) return v;
  const std::uint32_t sh = 32 - static_cast<std::uint32_t>(bits);
  if (sign) return b.compute(Op::kSra, b.compute(Op::kShl, v, imm(sh)), imm(sh));
  return b.compute(Op::kAnd, v, imm((1u << bits) - 1));
}

}  // namespace qgpu::simt::lower
