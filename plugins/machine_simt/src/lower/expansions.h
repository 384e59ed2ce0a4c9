// Operations the machine has no instruction for, expanded into ones it has (docs/ISA.md
// "Expansions"): multiply-high, division and remainder, population count, leading zeros, bit
// reverse, absolute value, and the extension of narrow (i8/i16) values.
#pragma once

#include <utility>

#include "lower/builder.h"

namespace qgpu::simt::lower {

Operand abs_of(Builder& b, Operand a);
// High word of the unsigned / signed 64-bit product.
Operand mulhi_u(Builder& b, Operand x, Operand y);
Operand mulhi_s(Builder& b, Operand x, Operand y);
// Unsigned quotient and remainder (a loop of its own blocks); x / 0 gives 0xffffffff, x % 0 gives x.
std::pair<Operand, Operand> udivrem(Builder& b, Operand n, Operand d);
// The signed quotient (or remainder), truncating as C does.
Operand sdivrem(Builder& b, Operand x, Operand y, bool quotient);
Operand popc(Builder& b, Operand x);
Operand clz(Builder& b, Operand x);
Operand brev(Builder& b, Operand x);

inline bool narrow(int bits) {
  return bits == 8 || bits == 16;
}
// A narrow value (low `bits` of a word) made whole: sign- or zero-extended to 32 bits.
Operand widen(Builder& b, Operand v, int bits, bool sign);

}  // namespace qgpu::simt::lower
