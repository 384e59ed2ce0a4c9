#include "memory.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "qgpu/weights/numerics.h"
#include "qgpu/weights/primitives.h"

namespace qgpu::simt::circuit {
namespace {

using weights::Affine;
using weights::Bit;
using weights::Circuit;
using weights::concat;
using weights::MlpBuilder;
using weights::slice;
using weights::Term;
using weights::Word;

constexpr int kLanes = kProtoLanes;
constexpr int kBanks = 4;
constexpr int kRamRows = 128;  // dk
constexpr int kRowBits = 7;
constexpr int kGroup = 8;  // digit group of the adders and comparators (bf16: ≤ 8 bits per MLP)
// A gating literal adds kGate·lit to a step's sum and kGate to its threshold: when the
// literal is 0 the direct form's gate is ≤ K(256 − 512) (exactly off), and the
// positive-side range, which decides exactness, does not change.
constexpr double kGate = 512;
const Affine kOne{{}, 1};

std::vector<Term> out(Bit b, double coef = 1) {
  return {Term{b, coef}};
}
Affine up(Bit b) {
  return Affine{{Term{b, 1}}, 0};
}
std::string lane_name(int l) {
  return "lane" + std::to_string(l);
}
std::string set_name(unsigned s) {
  std::string n = "S";
  for (int j = 0; j < kLanes; ++j)
    if ((s >> j) & 1) n += std::to_string(j);
  return n;
}
int highest(unsigned s) {
  for (int j = kLanes - 1; j >= 0; --j)
    if ((s >> j) & 1) return j;
  return -1;
}
std::vector<int> members(unsigned s) {
  std::vector<int> m;
  for (int j = 0; j < kLanes; ++j)
    if ((s >> j) & 1) m.push_back(j);
  return m;
}

sdk::Expected<Word> field(Circuit& c, const std::string& owner, const std::string& name, int width) {
  return c.computed(owner, name, width);
}

// [Σ terms ≥ t] ∧ (every literal is 1), added to `outs`.
sdk::Status gated_step(MlpBuilder& mb, std::vector<Term> terms, double t, const std::vector<Bit>& lits,
                       const std::vector<Term>& outs) {
  for (const Bit& b : lits) terms.push_back(Term{b, kGate});
  return mb.step(std::move(terms), t + kGate * static_cast<double>(lits.size()), outs);
}

// x + y (carry-in 0) in two MLPs, by digit groups of 7 bits so that every
// step has the direct form and can be gated by literals (docs/CIRCUITS.md §2
// uses 8 and the flipped form for the top bit). Layer 1: the group sums
// without (s0) and with (s1) an incoming carry, generate and propagate; group
// 0's s0 is final. Layer 2: the carry into group m is [E_m ≥ 2^m], E_m =
// Σ_{p<m} 2^p (G_p + P_p), folded into
// out = [2^(m+1)·s0 − E_m ≥ 2^m + 1] + [2^(m+1)·s1 + E_m ≥ 3·2^m].
// With s1 = G = P = 0 (the add's literals off) layer 2 passes s0 through, so
// other results (and/or/xor) share the s0 field.
constexpr int kAddGroup = 7;

struct AddDigits {
  Word s0, s1, g, p;
};

sdk::Expected<AddDigits> add_fields(Circuit& c, const std::string& owner, const std::string& name, int n) {
  const int ng = (n + kAddGroup - 1) / kAddGroup;
  auto s0 = field(c, owner, name + ".s0", n);
  auto s1 = field(c, owner, name + ".s1", n - kAddGroup);
  auto g = field(c, owner, name + ".G", ng);
  auto p = field(c, owner, name + ".P", ng);
  if (!s0 || !s1 || !g || !p) return sdk::invalid_argument(owner + "." + name + ": field names clash");
  return AddDigits{*s0, *s1, *g, *p};
}

sdk::Status add_digits(MlpBuilder& mb, const AddDigits& d, const Word& x, const Word& y, const std::vector<Bit>& lits) {
  const int n = static_cast<int>(x.size());
  for (int lo = 0, m = 0; lo < n; lo += kAddGroup, ++m) {
    const int gw = std::min(kAddGroup, n - lo);
    std::vector<Term> t;
    for (int k = 0; k < gw; ++k) {
      const double w = std::ldexp(1.0, k);
      t.push_back(Term{x[lo + k], w});
      t.push_back(Term{y[lo + k], w});
      // bit k of the group sum T (+ carry): [T ≥ 2^k] − [T ≥ 2^(k+1)] + [T ≥ 3·2^k]
      for (int carry = 0; carry <= (m > 0 ? 1 : 0); ++carry) {
        const Bit o = carry ? d.s1[lo - kAddGroup + k] : d.s0[lo + k];
        QGPU_RETURN_IF_ERROR(gated_step(mb, t, w - carry, lits, out(o)));
        QGPU_RETURN_IF_ERROR(gated_step(mb, t, 2 * w - carry, lits, out(o, -1)));
        QGPU_RETURN_IF_ERROR(gated_step(mb, t, 3 * w - carry, lits, out(o)));
      }
    }
    QGPU_RETURN_IF_ERROR(gated_step(mb, t, std::ldexp(1.0, gw), lits, out(d.g[m])));
    QGPU_RETURN_IF_ERROR(gated_step(mb, t, std::ldexp(1.0, gw) - 1, lits, out(d.p[m])));
  }
  return sdk::Status::ok();
}

// Layer 2 into `o` (coefficient +1), only where every literal is 1.
sdk::Status add_final(MlpBuilder& mb, const AddDigits& d, const Word& o, const std::vector<Bit>& lits) {
  const int n = static_cast<int>(d.s0.size());
  for (int i = 0; i < std::min(kAddGroup, n); ++i) mb.select(lits, up(d.s0[i]), out(o[i]));
  for (int lo = kAddGroup, m = 1; lo < n; lo += kAddGroup, ++m) {
    const double pm = std::ldexp(1.0, m);
    for (int i = lo; i < std::min(lo + kAddGroup, n); ++i) {
      std::vector<Term> t1{{d.s0[i], 2 * pm}}, t2{{d.s1[i - kAddGroup], 2 * pm}};
      for (int p = 0; p < m; ++p) {
        for (const Bit& b : {d.g[p], d.p[p]}) {
          t1.push_back(Term{b, -std::ldexp(1.0, p)});
          t2.push_back(Term{b, std::ldexp(1.0, p)});
        }
      }
      QGPU_RETURN_IF_ERROR(gated_step(mb, t1, pm + 1, lits, out(o[i])));
      QGPU_RETURN_IF_ERROR(gated_step(mb, t2, 3 * pm, lits, out(o[i])));
    }
  }
  return sdk::Status::ok();
}

// Opcode bits the comparisons below are gated by.
struct MinMaxOps {
  Bit min, max, minu, maxu;
};

// "x is strictly better than y" for the min/max atomics (x < y for min/minu,
// x > y for max/maxu, signed or not by the opcode), for (x, y) and (y, x), in
// 2 MLP layers: group generate/propagate of x + ¬y + 1 and y + ¬x + 1 (the signed
// variant inverts both sign bits: only the top group differs), then
// lt = [Σ_m 2^m (G_m + P_m) < 16] per opcode, gated by that opcode's bit.
struct Beats {
  Bit xy, yx;
};

sdk::Expected<Beats> beats(Circuit& c, const std::string& owner, const std::string& name, const Word& x, const Word& y,
                           const MinMaxOps& ops) {
  constexpr int kGroups = 32 / kGroup;
  // gp[dir]: G (kGroups bits) then P (kGroups bits) of the unsigned compare; top[dir]: the
  // top group's G and P with both sign bits inverted (signed). dir 0: x + ¬y + 1, dir 1: y + ¬x + 1.
  Word gp[2], top[2];
  MlpBuilder l1(c);
  for (int dir = 0; dir < 2; ++dir) {
    const Word& u = dir == 0 ? x : y;
    const Word& v = dir == 0 ? y : x;
    auto f = field(c, owner, name + ".gp" + std::to_string(dir), 2 * kGroups);
    auto ft = field(c, owner, name + ".gp" + std::to_string(dir) + "s", 2);
    if (!f || !ft) return sdk::invalid_argument(owner + "." + name + ": field names clash");
    gp[dir] = *f;
    top[dir] = *ft;
    for (int m = 0; m <= kGroups; ++m) {
      const bool sg = m == kGroups;  // the signed top group
      const int g = sg ? kGroups - 1 : m;
      std::vector<Term> t;
      for (int k = 0; k < kGroup; ++k) {
        const int i = g * kGroup + k;
        const bool flip = sg && i == 31;
        t.push_back(Term{flip ? !u[i] : u[i], std::ldexp(1.0, k)});
        t.push_back(Term{flip ? v[i] : !v[i], std::ldexp(1.0, k)});
      }
      if (g == 0) t.push_back(Term{c.one(), 1});  // the +1 of the subtraction
      QGPU_RETURN_IF_ERROR(l1.step(t, 256, out(sg ? top[dir][0] : gp[dir][m])));
      QGPU_RETURN_IF_ERROR(l1.step(t, 255, out(sg ? top[dir][1] : gp[dir][kGroups + m])));
    }
  }
  QGPU_RETURN_IF_ERROR(l1.commit(owner + "." + name + ".gp"));
  auto lt = [&](int dir, int sg) {  // −E ≥ −15 ⟺ no carry out ⟺ less than
    std::vector<Term> t;
    for (int m = 0; m < kGroups; ++m) {
      const bool sgn = sg && m == kGroups - 1;
      t.push_back(Term{sgn ? top[dir][0] : gp[dir][m], -std::ldexp(1.0, m)});
      t.push_back(Term{sgn ? top[dir][1] : gp[dir][kGroups + m], -std::ldexp(1.0, m)});
    }
    return t;
  };
  auto f = field(c, owner, name, 2);
  if (!f) return f.status();
  Beats b{(*f)[0], (*f)[1]};
  MlpBuilder l2(c);
  // xy: min: x <s y (dir 0 signed); max: y <s x (dir 1 signed); minu/maxu unsigned. yx: the reverse.
  QGPU_RETURN_IF_ERROR(gated_step(l2, lt(0, 1), -15, {ops.min}, out(b.xy)));
  QGPU_RETURN_IF_ERROR(gated_step(l2, lt(1, 1), -15, {ops.max}, out(b.xy)));
  QGPU_RETURN_IF_ERROR(gated_step(l2, lt(0, 0), -15, {ops.minu}, out(b.xy)));
  QGPU_RETURN_IF_ERROR(gated_step(l2, lt(1, 0), -15, {ops.maxu}, out(b.xy)));
  QGPU_RETURN_IF_ERROR(gated_step(l2, lt(1, 1), -15, {ops.min}, out(b.yx)));
  QGPU_RETURN_IF_ERROR(gated_step(l2, lt(0, 1), -15, {ops.max}, out(b.yx)));
  QGPU_RETURN_IF_ERROR(gated_step(l2, lt(1, 0), -15, {ops.minu}, out(b.yx)));
  QGPU_RETURN_IF_ERROR(gated_step(l2, lt(0, 0), -15, {ops.maxu}, out(b.yx)));
  QGPU_RETURN_IF_ERROR(l2.commit(owner + "." + name));
  return b;
}

// [x + t ≥ y], unsigned 32-bit, t ∈ 0..3, in 2 MLPs: the carry out of
// x + ¬y + 1 + t. Group 0 (8 bits) can carry 0, 1 or 2: C1 = G0 + G0' with
// G0 = [T0 ≥ 256], G0' = [T0 ≥ 512]; the later groups carry 0 or 1, and with
// G ⟹ P ⟹ P' (P' = [T ≥ 254] for group 1) the carry chain unrolls into one
// threshold: C4 = [6(G3+P3) + 3(G2+P2) + G1 + P1 + P1' + G0 + G0' ≥ 12]. 10 bits, ~22 neurons.
sdk::Expected<Bit> plus_ge(Circuit& c, const std::string& owner, const std::string& name, const Word& x, const Word& y,
                           int t) {
  auto f = field(c, owner, name + ".gp", 9);
  auto o = field(c, owner, name, 1);
  if (!f || !o) return sdk::invalid_argument(owner + "." + name + ": field names clash");
  const Word& g = *f;  // G0 G0' | G1 P1 P1' | G2 P2 | G3 P3
  MlpBuilder l1(c);
  for (int m = 0; m < 4; ++m) {
    std::vector<Term> terms;
    for (int k = 0; k < 8; ++k) {
      terms.push_back(Term{x[8 * m + k], std::ldexp(1.0, k)});
      terms.push_back(Term{!y[8 * m + k], std::ldexp(1.0, k)});
    }
    if (m == 0) {
      terms.push_back(Term{c.one(), 1.0 + t});
      QGPU_RETURN_IF_ERROR(l1.step(terms, 256, out(g[0])));
      QGPU_RETURN_IF_ERROR(l1.step(terms, 512, out(g[1])));
    } else {
      const int at = m == 1 ? 2 : m == 2 ? 5 : 7;
      QGPU_RETURN_IF_ERROR(l1.step(terms, 256, out(g[at])));
      QGPU_RETURN_IF_ERROR(l1.step(terms, 255, out(g[at + 1])));
      if (m == 1) QGPU_RETURN_IF_ERROR(l1.step(terms, 254, out(g[at + 2])));
    }
  }
  QGPU_RETURN_IF_ERROR(l1.commit(owner + "." + name + ".gp"));
  const double w[9] = {1, 1, 1, 1, 1, 3, 3, 6, 6};
  std::vector<Term> e;
  for (int i = 0; i < 9; ++i) e.push_back(Term{g[i], w[i]});
  MlpBuilder l2(c);
  QGPU_RETURN_IF_ERROR(l2.step(e, 12, out((*o)[0])));
  QGPU_RETURN_IF_ERROR(l2.commit(owner + "." + name));
  return (*o)[0];
}

// b − d for a constant d ∈ 1..3 in one MLP (no carry chain): bit i ≥ 2 is b_i
// XOR borrow_i, borrow_i = [b mod 2^i < d] = [4·Σ_{2≤k<i} b_k + b_0 + 2b_1 ≤ d − 1];
// bits 0 and 1 by the 4 values of (b_1, b_0). About 4 neurons per bit.
sdk::Expected<Word> minus_small(Circuit& c, const std::string& owner, const std::string& name, const Word& b, int d) {
  auto f = field(c, owner, name, 32);
  if (!f) return f.status();
  MlpBuilder mb(c);
  for (int v = 0; v < 4; ++v) {  // the low two bits
    const int low = (v - d) & 3;
    std::vector<Term> outs;
    for (int i = 0; i < 2; ++i)
      if ((low >> i) & 1) outs.push_back(Term{(*f)[i], 1});
    if (!outs.empty()) mb.select({(v & 1) ? b[0] : !b[0], (v & 2) ? b[1] : !b[1]}, kOne, outs);
  }
  for (int i = 2; i < 32; ++i) {
    std::vector<Term> t{{b[0], 1}, {b[1], 2}};  // t ≥ d ⟺ no borrow
    for (int k = 2; k < i; ++k) t.push_back(Term{b[k], 4});
    std::vector<Term> neg;
    for (const Term& x : t) neg.push_back(Term{x.bit, -x.weight});
    QGPU_RETURN_IF_ERROR(gated_step(mb, t, d, {b[i]}, out((*f)[i])));         // b_i ∧ no borrow
    QGPU_RETURN_IF_ERROR(gated_step(mb, neg, 1 - d, {!b[i]}, out((*f)[i])));  // ¬b_i ∧ borrow
  }
  QGPU_RETURN_IF_ERROR(mb.commit(owner + "." + name));
  return f;
}

sdk::Status check_word(const Word& w, std::size_t width, const std::string& what) {
  if (w.size() != width)
    return sdk::invalid_argument("memory: " + what + " has " + std::to_string(w.size()) + " bits, expected " +
                                 std::to_string(width));
  return sdk::Status::ok();
}

}  // namespace

bool memory_circuit_supports(Op op) {
  return op == Op::kLd || op == Op::kSt || is_atomic(op);
}

int memory_words(MemoryLayout layout) {
  return layout == MemoryLayout::kCompact ? kBanks * kRamRows / 2 : kBanks * kRamRows;
}

sdk::Expected<MemoryRams> build_memory_rams(Circuit& c, MemoryLayout layout, Records& records) {
  const bool compact = layout == MemoryLayout::kCompact;
  const int spaces = compact ? 1 : 2;  // sets of bank RAMs
  MemoryRams m;
  m.layout = layout;
  auto w = build_wmem_write(c, records);
  if (!w) return w.status();
  m.write = std::move(*w);
  if (compact) {  // the token layout addresses 512 words; this layout holds 256
    const int words = memory_words(layout);
    records.check(RecordKind::kWmem, [words](const Record& r) -> sdk::Status {
      if (r.word + r.count <= static_cast<std::uint32_t>(words)) return sdk::Status::ok();
      return sdk::invalid_argument("WMEM record: words " + std::to_string(r.word) + ".." +
                                   std::to_string(r.word + r.count - 1) + " run past the " + std::to_string(words) +
                                   " words of a space in the compact memory layout (over by " +
                                   std::to_string(r.word + r.count - words) + ")");
    });
  }
  for (int s = 0; s < spaces; ++s)
    for (int k = 0; k < kBanks; ++k) {
      const std::string name =
          (compact ? std::string("bank") : std::string(s ? "shared.bank" : "global.bank")) + std::to_string(k);
      auto ram = c.add_ram("mem", name, kRamRows, 32);
      if (!ram) return ram.status();
      // Row: word >> 2 (protocol); space·64 + (word >> 2) with word < 256 (compact).
      Word addr = slice(m.write.row[k], 0, compact ? kRowBits - 1 : kRowBits);
      if (compact) addr.push_back(m.write.row[k][kRowBits]);
      const Bit we = compact ? m.write.bank_enable[k] : m.write.enable[s * kBanks + k];
      QGPU_RETURN_IF_ERROR(c.ram_write(*ram, addr, m.write.value[k], we));
      m.rams.push_back(*ram);
    }
  return m;
}

sdk::Expected<Memory> build_memory(Circuit& c, MemoryLayout layout, Records& records, const MemoryIn& in) {
  auto rams = build_memory_rams(c, layout, records);
  if (!rams) return rams.status();
  return build_memory(c, *rams, in);
}

sdk::Expected<Memory> build_memory(Circuit& c, const MemoryRams& rams, const MemoryIn& in) {
  QGPU_RETURN_IF_ERROR(check_word(in.opcode, kOpCount, "opcode"));
  QGPU_RETURN_IF_ERROR(check_word(in.imm, 32, "imm"));
  for (int l = 0; l < kLanes; ++l) {
    QGPU_RETURN_IF_ERROR(check_word(in.a[l], 32, lane_name(l) + ".a"));
    QGPU_RETURN_IF_ERROR(check_word(in.b[l], 32, lane_name(l) + ".b"));
    QGPU_RETURN_IF_ERROR(check_word(in.c[l], 32, lane_name(l) + ".c"));
  }
  const std::string& owner = in.owner;
  const bool compact = rams.layout == MemoryLayout::kCompact;
  const int spaces = compact ? 1 : 2;     // sets of bank RAMs
  const int word_bits = compact ? 8 : 9;  // word address within a space
  const int addr_bits = word_bits + 2;    // bits of x = a + imm that matter
  if (rams.rams.size() != static_cast<std::size_t>(spaces * kBanks))
    return sdk::invalid_argument("memory: " + std::to_string(rams.rams.size()) + " bank RAMs, the layout has " +
                                 std::to_string(spaces * kBanks));
  Memory mem;
  mem.rams = rams;

  c.push_enable(in.enable);
  struct PopEnable {
    Circuit& c;
    ~PopEnable() { c.pop_enable(); }
  } pop{c};
  auto op = [&](Op o) { return in.opcode[static_cast<int>(o)]; };
  // Built atomics (atom.inc / atom.dec are not: they read and write nothing).
  std::vector<Op> atomics;
  for (int o = 0; o < kOpCount; ++o)
    if (is_atomic(static_cast<Op>(o)) && memory_circuit_supports(static_cast<Op>(o)))
      atomics.push_back(static_cast<Op>(o));

  // --- Opcode classes (MLP 0): sums of one-hot bits.
  auto any_of = [&](const std::string& name, std::vector<Op> ops) -> sdk::Expected<Bit> {
    std::vector<Term> t;
    for (Op o : ops) t.push_back(Term{op(o), 1});
    return weights::threshold(c, owner, name, std::move(t), 1);
  };
  std::vector<Op> reads_ops = atomics, writes_ops = atomics;
  reads_ops.push_back(Op::kLd);
  writes_ops.push_back(Op::kSt);
  auto is_read = any_of("is_read", reads_ops);
  auto is_write = any_of("is_write", writes_ops);
  auto is_xs = any_of("is_exch_st", {Op::kSt, Op::kAtomExch});
  auto is_mm = any_of("is_minmax", {Op::kAtomMin, Op::kAtomMax, Op::kAtomMinU, Op::kAtomMaxU});
  auto is_sel =
      any_of("is_select", {Op::kAtomExch, Op::kAtomMin, Op::kAtomMax, Op::kAtomMinU, Op::kAtomMaxU, Op::kAtomCas});
  auto is_zop = any_of("is_add_logic", {Op::kAtomAdd, Op::kAtomAnd, Op::kAtomOr, Op::kAtomXor});
  auto is_addinc = any_of("is_adder", {Op::kAtomAdd, Op::kAtomInc, Op::kAtomDec});
  for (auto* e : {&is_read, &is_write, &is_xs, &is_mm, &is_sel, &is_zop, &is_addinc})
    if (!*e) return e->status();
  const MinMaxOps mm{op(Op::kAtomMin), op(Op::kAtomMax), op(Op::kAtomMinU), op(Op::kAtomMaxU)};

  // --- Addresses (MLP 0-1) and read enables (MLP 1: the bank bits are in adder group 0).
  std::array<Word, kLanes> word;
  for (int l = 0; l < kLanes; ++l) {
    auto x = weights::add(c, owner, lane_name(l) + ".x", slice(in.a[l], 0, addr_bits), slice(in.imm, 0, addr_bits),
                          c.zero());
    if (!x) return x.status();
    word[l] = slice(x->sum, 2, word_bits);
    mem.lane[l].word = word[l];
  }
  std::array<Word, kLanes> en;
  {
    MlpBuilder mb(c);
    for (int l = 0; l < kLanes; ++l) {
      auto f = field(c, owner, lane_name(l) + ".read_en", spaces * kBanks);
      if (!f) return f.status();
      en[l] = *f;
      for (int s = 0; s < spaces; ++s)
        for (int k = 0; k < kBanks; ++k) {
          std::vector<Bit> m{in.active[l], *is_read, (k & 1) ? word[l][0] : !word[l][0],
                             (k & 2) ? word[l][1] : !word[l][1]};
          if (!compact) m.push_back(s ? in.shared : !in.shared);
          mb.select(m, kOne, out(en[l][s * kBanks + k]));
        }
    }
    QGPU_RETURN_IF_ERROR(mb.commit(owner + ".read_en"));
  }

  // --- Reads: one port per lane, bank and space, all of a lane's ports into one 32-bit
  // field (ram_read_shared: the enables are one-hot, so only the addressed bank adds its
  // row and the field is the lane's word right after the Gated DeltaNet).
  std::array<Word, kLanes> r;
  for (int l = 0; l < kLanes; ++l) {
    QGPU_RETURN_IF_ERROR(c.declare_one_hot(en[l]));
    Word key = slice(word[l], 2, word_bits - 2);
    if (compact) key.push_back(in.shared);
    std::vector<weights::RamReadSpec> ports;
    for (int s = 0; s < spaces; ++s)
      for (int k = 0; k < kBanks; ++k) ports.push_back({rams.rams[s * kBanks + k], key, en[l][s * kBanks + k], 0});
    auto f = c.ram_read_shared(owner, lane_name(l) + ".ld_value", ports);
    if (!f) return f.status();
    r[l] = *f;
    mem.lane[l].ld_value = r[l];
  }

  // --- Same word: e[j][l] (j < l) = both active ∧ word_j == word_l. The low 6
  // word bits are final a layer before the high ones: eq_lo = [d ≥ 0] − [d ≥ 1]
  // over them, then [8·eq_lo + d_hi + 16(act_j + act_l) ≥ 40] − [… ≥ 41].
  constexpr int kLoBits = 6;
  Bit e[kLanes][kLanes];
  {
    MlpBuilder lo_mb(c), hi_mb(c);
    constexpr int kPairs = kLanes * (kLanes - 1) / 2;
    auto eq_lo = field(c, owner, "same_word.lo", kPairs);
    auto eq = field(c, owner, "same_word", kPairs);
    int pair = 0;
    if (!eq_lo || !eq) return sdk::invalid_argument(owner + ".same_word: field names clash");
    for (int l = 0; l < kLanes; ++l)
      for (int j = 0; j < l; ++j) {
        const Bit lo = (*eq_lo)[pair];
        e[j][l] = (*eq)[pair++];
        std::vector<Term> d, h;
        for (int i = 0; i < kLoBits; ++i) {
          d.push_back(Term{word[j][i], std::ldexp(1.0, i)});
          d.push_back(Term{word[l][i], -std::ldexp(1.0, i)});
        }
        QGPU_RETURN_IF_ERROR(lo_mb.step(d, 0, out(lo)));
        QGPU_RETURN_IF_ERROR(lo_mb.step(d, 1, out(lo, -1)));
        for (int i = kLoBits; i < word_bits; ++i) {
          h.push_back(Term{word[j][i], std::ldexp(1.0, i - kLoBits)});
          h.push_back(Term{word[l][i], -std::ldexp(1.0, i - kLoBits)});
        }
        h.push_back(Term{lo, 8});
        h.push_back(Term{in.active[j], 16});
        h.push_back(Term{in.active[l], 16});
        QGPU_RETURN_IF_ERROR(hi_mb.step(h, 40, out(e[j][l])));
        QGPU_RETURN_IF_ERROR(hi_mb.step(h, 41, out(e[j][l], -1)));
      }
    QGPU_RETURN_IF_ERROR(lo_mb.commit(owner + ".same_word.lo"));
    QGPU_RETURN_IF_ERROR(hi_mb.commit(owner + ".same_word"));
  }
  // writes_l = active ∧ writing opcode ∧ no later lane on the same word.
  {
    auto f = field(c, owner, "writes", kLanes);
    if (!f) return f.status();
    MlpBuilder mb(c);
    for (int l = 0; l < kLanes; ++l) {
      std::vector<Term> t{{in.active[l], 1}, {*is_write, 1}};
      for (int k = l + 1; k < kLanes; ++k) t.push_back(Term{e[l][k], -2});
      QGPU_RETURN_IF_ERROR(mb.step(t, 2, out((*f)[l])));
      mem.lane[l].writes = (*f)[l];
    }
    QGPU_RETURN_IF_ERROR(mb.commit(owner + ".writes"));
  }

  // --- Operand-only precomputations (b and c come from registers, early).
  // agg_S (|S| ≥ 2): by the opcode, Σ_{j∈S} b_j (add), or the AND / OR / XOR of
  // the b_j (else 0), in one field: the add's second layer and the logic share
  // it. Pairs from the b's (MLP 0-1), larger sets from the lowest pair and the
  // rest (MLP 2-3); subsets are visited in increasing order, so the parts exist.
  std::array<Word, 16> agg;
  for (unsigned s = 1; s < 16; ++s) {
    const auto mbrs = members(s);
    if (mbrs.size() < 2) {
      agg[s] = in.b[mbrs[0]];  // not op-gated: its readers are
      continue;
    }
    const std::string sn = set_name(s);
    const unsigned first = (1u << mbrs[0]) | (1u << mbrs[1]);
    const bool pair = mbrs.size() == 2;
    auto f = field(c, owner, sn + ".agg", 32);
    auto d = add_fields(c, owner, sn + ".sum", 32);
    if (!f) return f.status();
    if (!d) return d.status();
    agg[s] = *f;
    MlpBuilder l1(c), l2(c);
    QGPU_RETURN_IF_ERROR(add_digits(l1, *d, pair ? in.b[mbrs[0]] : agg[first], pair ? in.b[mbrs[1]] : agg[s & ~first],
                                    {op(Op::kAtomAdd)}));
    QGPU_RETURN_IF_ERROR(l1.commit(owner + "." + sn + ".sum.digits"));
    QGPU_RETURN_IF_ERROR(add_final(l2, *d, agg[s], {}));
    for (int i = 0; i < 32; ++i) {
      std::vector<Bit> all{op(Op::kAtomAnd)}, none{op(Op::kAtomOr)};
      std::vector<Term> t;
      for (int j : mbrs) {
        all.push_back(in.b[j][i]);
        none.push_back(!in.b[j][i]);
        t.push_back(Term{in.b[j][i], 1});
      }
      l2.select(all, kOne, out(agg[s][i]));
      l2.select({op(Op::kAtomOr)}, kOne, out(agg[s][i]));
      l2.select(none, kOne, out(agg[s][i], -1));
      for (std::size_t q = 1; q <= mbrs.size(); ++q)  // parity: alternating steps
        QGPU_RETURN_IF_ERROR(
            gated_step(l2, t, static_cast<double>(q), {op(Op::kAtomXor)}, out(agg[s][i], (q & 1) ? 1 : -1)));
    }
    QGPU_RETURN_IF_ERROR(l2.commit(owner + "." + sn + ".agg"));
  }
  Beats bb[kLanes][kLanes];  // bb[p][q] (p < q): .xy = b_p beats b_q, .yx = b_q beats b_p
  for (int p = 0; p < kLanes; ++p)
    for (int q = p + 1; q < kLanes; ++q) {
      auto b = beats(c, owner, "beats.b" + std::to_string(p) + "b" + std::to_string(q), in.b[p], in.b[q], mm);
      if (!b) return b.status();
      bb[p][q] = *b;
    }
  auto b_beats_b = [&](int p, int q) { return p < q ? bb[p][q].xy : bb[q][p].yx; };
  Bit eqc[kLanes][kLanes];  // c_i == b_j, i < j (a cas chain: lane j sees lane i's c)
  for (int i = 0; i < kLanes; ++i)
    for (int j = i + 1; j < kLanes; ++j) {
      auto q = weights::equal(c, owner, "eq.c" + std::to_string(i) + "b" + std::to_string(j), in.c[i], in.b[j]);
      if (!q) return q.status();
      eqc[i][j] = *q;
    }

  // --- The read word against the lane's own operand. Lanes of one same-word set
  // S read the same word, so a set compares M[x] with b_j through lane j itself.
  std::array<Bit, kLanes> eqr, b_beats_r;  // r_j == b_j; b_j beats r_j
  for (int j = 0; j < kLanes; ++j) {
    auto q = weights::equal(c, owner, "eq.r" + std::to_string(j), r[j], in.b[j]);
    if (!q) return q.status();
    eqr[j] = *q;
    auto b = beats(c, owner, "beats.r" + std::to_string(j), r[j], in.b[j], mm);
    if (!b) return b.status();
    b_beats_r[j] = b->yx;
  }

  // atom.inc: lane j at position t of its set (t earlier lanes, no wrap yet) sees
  // M[x] + t and wraps to 0 iff r_j + t ≥ b_j; after a wrap the word is small
  // (≤ 3) and lane j wraps iff b_j ≤ u.
  Bit wraps[kLanes][kLanes];  // [j][t], t ≤ j
  for (int j = 0; j < kLanes; ++j)
    for (int t = 0; t <= j; ++t) {
      auto q = plus_ge(c, owner, "inc.r" + std::to_string(j) + "p" + std::to_string(t), r[j], in.b[j], t);
      if (!q) return q.status();
      wraps[j][t] = *q;
    }
  Bit small_le[kLanes][3];  // [j][u]: b_j ≤ u
  {
    auto f = field(c, owner, "inc.small", kLanes * 3);
    if (!f) return f.status();
    MlpBuilder mb(c);
    for (int j = 0; j < kLanes; ++j)
      for (int u = 0; u < 3; ++u) {
        small_le[j][u] = (*f)[j * 3 + u];
        std::vector<Term> t{{in.b[j][0], -1}, {in.b[j][1], -2}};
        for (int i = 2; i < 32; ++i) t.push_back(Term{in.b[j][i], -4});
        QGPU_RETURN_IF_ERROR(mb.step(t, -u, out(small_le[j][u])));
      }
    QGPU_RETURN_IF_ERROR(mb.commit(owner + ".inc.small"));
  }
  // atom.dec: while no lane reloads, lane j at position t sees M[x] − t (no wrap:
  // an earlier lane would have seen 0) and reloads b_j iff r_j == t or r_j − t > b_j,
  // i.e. ¬(b_j + t ≥ r_j). After a reload by lane k the word is b_k − d (d ≥ 0
  // decrements since), and lane j reloads iff b_k == d or ¬(b_j + d ≥ b_k): bits of
  // the b's alone. The words b_k − d (d ≥ 1) are extra candidates.
  auto equals_const = [&](const std::string& name,
                          const std::vector<std::pair<const Word*, int>>& tests) -> sdk::Expected<Word> {
    auto f = field(c, owner, name, static_cast<int>(tests.size()));
    if (!f) return f.status();
    MlpBuilder mb(c);
    for (std::size_t i = 0; i < tests.size(); ++i) {
      std::vector<Bit> m;
      for (int k = 0; k < 32; ++k)
        m.push_back(((tests[i].second >> k) & 1) ? (*tests[i].first)[k] : !(*tests[i].first)[k]);
      mb.select(m, kOne, out((*f)[i]));
    }
    QGPU_RETURN_IF_ERROR(mb.commit(owner + "." + name));
    return f;
  };
  Bit r_is[kLanes][kLanes], r_fits[kLanes][kLanes];  // [j][t]: r_j == t; b_j + t ≥ r_j
  {
    std::vector<std::pair<const Word*, int>> tests;
    for (int j = 0; j < kLanes; ++j)
      for (int t = 0; t <= j; ++t) tests.emplace_back(&r[j], t);
    auto f = equals_const("dec.r_is", tests);
    if (!f) return f.status();
    int i = 0;
    for (int j = 0; j < kLanes; ++j)
      for (int t = 0; t <= j; ++t) {
        r_is[j][t] = (*f)[i++];
        auto q = plus_ge(c, owner, "dec.r" + std::to_string(j) + "p" + std::to_string(t), in.b[j], r[j], t);
        if (!q) return q.status();
        r_fits[j][t] = *q;
      }
  }
  Bit b_is[kLanes][3];            // [k][d]: b_k == d (k < 3)
  Bit b_fits[kLanes][kLanes][3];  // [j][k][d]: b_j + d ≥ b_k (k < j, d < j − k)
  constexpr int kDecWords = 6;    // b_k − d: (0,1) (0,2) (0,3) (1,1) (1,2) (2,1)
  auto dec_index = [](int k, int d) { return k == 0 ? d - 1 : k == 1 ? 2 + d : 5; };
  std::array<Word, kDecWords> dec_word;
  {
    std::vector<std::pair<const Word*, int>> tests;
    for (int k = 0; k < kLanes - 1; ++k)
      for (int d = 0; d < 3; ++d) tests.emplace_back(&in.b[k], d);
    auto f = equals_const("dec.b_is", tests);
    if (!f) return f.status();
    for (int k = 0; k < kLanes - 1; ++k)
      for (int d = 0; d < 3; ++d) b_is[k][d] = (*f)[k * 3 + d];
    for (int k = 0; k < kLanes; ++k)
      for (int j = k + 1; j < kLanes; ++j)
        for (int d = 0; d < j - k; ++d) {
          auto q = plus_ge(c, owner, "dec.b" + std::to_string(j) + "b" + std::to_string(k) + "p" + std::to_string(d),
                           in.b[j], in.b[k], d);
          if (!q) return q.status();
          b_fits[j][k][d] = *q;
        }
    for (int k = 0; k < kLanes - 1; ++k)
      for (int d = 1; d < kLanes - k; ++d) {
        auto x = minus_small(c, owner, "dec.b" + std::to_string(k) + "m" + std::to_string(d), in.b[k], d);
        if (!x) return x.status();
        dec_word[static_cast<std::size_t>(dec_index(k, d))] = *x;
      }
  }

  // --- Per lane and role (value: the lanes before l on its word and l itself;
  // loaded: the lanes before l on its word), by the same-word pattern π of
  // the earlier lanes. The set S of lanes applied to M[x] is known only as
  // a pattern, so every result is a sum over patterns of pattern-gated terms.
  auto pattern = [&](int l, unsigned pi) {
    std::vector<Bit> p;
    for (int j = 0; j < l; ++j) p.push_back(((pi >> j) & 1) ? e[j][l] : !e[j][l]);
    return p;
  };
  auto with = [](std::vector<Bit> v, std::initializer_list<Bit> more) {
    v.insert(v.end(), more.begin(), more.end());
    return v;
  };
  // Candidate words of the selecting atomics (exch/st, min/max, cas, dec): r, b_0..3, c_0..3, b_k − d;
  // then `arith` (the r + z / r op z result counts: add, logic, inc without a wrap)
  // and the constants 1..3 (inc after a wrap).
  constexpr int kDecWord = 1 + 2 * kLanes, kCand = kDecWord + kDecWords, kArith = kCand, kConst = kCand + 1,
                kChoices = kCand + 4;
  struct Role {
    Word z;       // add / logic operand: Σ b_S, or the logic aggregate of b_S (identity when S = ∅)
    Word w;       // kChoices bits: which candidate / result the atomic leaves
    AddDigits u;  // layer 1 of r + z; its s0 holds the logic result for and/or/xor
  };
  std::array<Role, kLanes> val, old;
  for (int l = 0; l < kLanes; ++l)
    for (int role = 0; role < 2; ++role) {
      if (role == 1 && l == 0) continue;  // lane 0 has no earlier lane: loaded = r
      Role& R = role == 0 ? val[l] : old[l];
      const std::string rn = lane_name(l) + (role == 0 ? ".value" : ".loaded");
      auto z = field(c, owner, rn + ".z", 32);
      auto w = field(c, owner, rn + ".w", kChoices);
      if (!z || !w) return sdk::invalid_argument(owner + "." + rn + ": field names clash");
      R.z = *z;
      R.w = *w;
      MlpBuilder zb(c), wb(c);
      wb.select({*is_zop}, kOne, out(R.w[kArith]));
      for (unsigned pi = 0; pi < (1u << l); ++pi) {
        const std::vector<Bit> pat = pattern(l, pi);
        const unsigned s = role == 0 ? (pi | (1u << l)) : pi;
        // inc: the first wrap position (none: r + |S| from the adder), then the small word.
        {
          const auto mbrs = members(s);
          const int m = static_cast<int>(mbrs.size());
          std::vector<Term> count;
          for (int i = 0; i < 3; ++i)
            if ((m >> i) & 1) count.push_back(Term{R.z[i], 1});
          if (m > 0) zb.select(with(pat, {op(Op::kAtomInc)}), kOne, count);
          for (int first = 0; first <= m; ++first) {
            std::vector<Bit> lits = with(pat, {op(Op::kAtomInc)});
            for (int t = 0; t < first; ++t) lits.push_back(!wraps[mbrs[t]][t]);
            if (first == m) {
              wb.select(lits, kOne, out(R.w[kArith]));
              continue;
            }
            lits.push_back(wraps[mbrs[first]][first]);
            const int rest = m - first - 1;
            for (unsigned path = 0; path < (1u << rest); ++path) {
              std::vector<Bit> pl = lits;
              int u = 0;
              for (int t = 0; t < rest; ++t) {
                const int j = mbrs[first + 1 + t];
                const bool wrap = (path >> t) & 1;
                pl.push_back(wrap ? small_le[j][u] : !small_le[j][u]);
                u = wrap ? 0 : u + 1;
              }
              if (u > 0) wb.select(pl, kOne, out(R.w[kConst + u - 1]));
            }
          }
        }
        // dec: every path of decrements and reloads (3 exclusive branches per lane).
        {
          const auto mbrs = members(s);
          const int m = static_cast<int>(mbrs.size());
          std::vector<Term> minus;  // 2^32 − m: the adder gives r − m when no lane reloads
          for (int i = 0; i < 32; ++i)
            if (((std::uint32_t{0} - static_cast<std::uint32_t>(m)) >> i) & 1) minus.push_back(Term{R.z[i], 1});
          if (m > 0) zb.select(with(pat, {op(Op::kAtomDec)}), kOne, minus);
          std::function<void(int, int, int, std::vector<Bit>)> walk = [&](int pos, int k, int n,
                                                                          std::vector<Bit> lits) {
            if (pos == m) {  // k < 0: r − n by the adder; else b_k − n
              const int choice = k < 0 ? kArith : n == 0 ? 1 + k : kDecWord + dec_index(k, n);
              wb.select(lits, kOne, out(R.w[choice]));
              return;
            }
            const int j = mbrs[pos];
            const Bit zero = k < 0 ? r_is[j][n] : b_is[k][n];
            const Bit fits = k < 0 ? r_fits[j][n] : b_fits[j][k][n];
            walk(pos + 1, j, 0, with(lits, {zero}));             // the word was 0: reload b_j
            walk(pos + 1, j, 0, with(lits, {!zero, !fits}));     // the word exceeds b_j: reload
            walk(pos + 1, k, n + 1, with(lits, {!zero, fits}));  // decrement
          };
          walk(0, -1, 0, with(pat, {op(Op::kAtomDec)}));
        }
        if (s == 0) {
          zb.select(with(pat, {op(Op::kAtomAnd)}), kOne, [&] {  // AND's identity: all ones
            std::vector<Term> t;
            for (const Bit& b : R.z) t.push_back(Term{b, 1});
            return t;
          }());
          wb.select(with(pat, {*is_sel}), kOne, out(R.w[0]));
          continue;
        }
        const auto mbrs = members(s);
        const int hi = highest(s);
        for (int i = 0; i < 32; ++i) {
          zb.select(mbrs.size() == 1 ? with(pat, {*is_zop}) : pat, up(agg[s][i]), out(R.z[i]));
        }
        // exch (and st, for the value): the last lane's b.
        wb.select(with(pat, {role == 0 ? *is_xs : op(Op::kAtomExch)}), kOne, out(R.w[1 + hi]));
        // min/max: the first candidate (r, then b_j ascending) strictly better than every
        // earlier one and not beaten by a later one.
        {
          std::vector<Bit> cr = with(pat, {*is_mm});
          for (int j : mbrs) cr.push_back(!b_beats_r[j]);
          wb.select(cr, kOne, out(R.w[0]));
          for (int j : mbrs) {
            std::vector<Bit> cj = with(pat, {*is_mm, b_beats_r[j]});
            for (int k : mbrs) {
              if (k < j) cj.push_back(b_beats_b(j, k));
              if (k > j) cj.push_back(!b_beats_b(k, j));
            }
            wb.select(cj, kOne, out(R.w[1 + j]));
          }
        }
        // cas: every success/failure path; the word is r until the first success, then
        // the c of the last success.
        for (unsigned path = 0; path < (1u << mbrs.size()); ++path) {
          std::vector<Bit> lits = with(pat, {op(Op::kAtomCas)});
          int cur = -1;
          for (std::size_t t = 0; t < mbrs.size(); ++t) {
            const int j = mbrs[t];
            const Bit eqb = cur < 0 ? eqr[j] : eqc[cur][j];
            const bool success = (path >> t) & 1;
            lits.push_back(success ? eqb : !eqb);
            if (success) cur = j;
          }
          wb.select(lits, kOne, out(R.w[cur < 0 ? 0 : 1 + kLanes + cur]));
        }
      }
      QGPU_RETURN_IF_ERROR(zb.commit(owner + "." + rn + ".z"));
      QGPU_RETURN_IF_ERROR(wb.commit(owner + "." + rn + ".w"));
      // r + z (add), r op z (and/or/xor) in the add's s0.
      auto u = add_fields(c, owner, rn + ".add", 32);
      if (!u) return u.status();
      R.u = *u;
      MlpBuilder ub(c);
      QGPU_RETURN_IF_ERROR(add_digits(ub, R.u, r[l], R.z, {*is_addinc}));
      for (int i = 0; i < 32; ++i) {
        const Bit o = R.u.s0[i], zi = R.z[i], ri = r[l][i];
        ub.select({op(Op::kAtomAnd), zi}, up(ri), out(o));
        ub.select({op(Op::kAtomOr), zi}, kOne, out(o));
        ub.select({op(Op::kAtomOr), !zi}, up(ri), out(o));
        ub.select({op(Op::kAtomXor), zi}, up(!ri), out(o));
        ub.select({op(Op::kAtomXor), !zi}, up(ri), out(o));
      }
      QGPU_RETURN_IF_ERROR(ub.commit(owner + "." + rn + ".add.digits"));
    }

  // --- Outputs: the add's second layer (or the logic result passed through)
  // plus the chosen candidate word.
  for (int l = 0; l < kLanes; ++l) {
    auto valf = field(c, owner, lane_name(l) + ".value", 32);
    auto ldf = field(c, owner, lane_name(l) + ".loaded", 32);
    if (!valf || !ldf) return sdk::invalid_argument(owner + ": lane output names clash");
    MemoryLane& ln = mem.lane[l];
    ln.value = *valf;
    ln.loaded = *ldf;
    std::array<const Word*, kCand> cand{&r[l],    &in.b[0], &in.b[1], &in.b[2], &in.b[3],
                                        &in.c[0], &in.c[1], &in.c[2], &in.c[3]};
    for (int i = 0; i < kDecWords; ++i)
      cand[static_cast<std::size_t>(kDecWord + i)] = &dec_word[static_cast<std::size_t>(i)];
    MlpBuilder mb(c);
    auto constants = [&](const Word& w, const Word& o, std::vector<Bit> lits) {
      for (int u = 1; u <= 3; ++u) {
        std::vector<Term> bits;
        for (int i = 0; i < 2; ++i)
          if ((u >> i) & 1) bits.push_back(Term{o[i], 1});
        std::vector<Bit> m = lits;
        m.push_back(w[kConst + u - 1]);
        mb.select(m, kOne, bits);
      }
    };
    QGPU_RETURN_IF_ERROR(add_final(mb, val[l].u, ln.value, {ln.writes, val[l].w[kArith]}));
    constants(val[l].w, ln.value, {ln.writes});
    for (int k = 0; k < kCand; ++k)
      for (int i = 0; i < 32; ++i) mb.select({ln.writes, val[l].w[k]}, up((*cand[k])[i]), out(ln.value[i]));
    if (l == 0) {
      for (int i = 0; i < 32; ++i) mb.select({*is_read}, up(r[0][i]), out(ln.loaded[i]));
    } else {
      QGPU_RETURN_IF_ERROR(add_final(mb, old[l].u, ln.loaded, {old[l].w[kArith]}));
      constants(old[l].w, ln.loaded, {});
      for (int k = 0; k < kCand; ++k)
        for (int i = 0; i < 32; ++i) mb.select({old[l].w[k]}, up((*cand[k])[i]), out(ln.loaded[i]));
      for (int i = 0; i < 32; ++i) mb.select({op(Op::kLd)}, up(r[l][i]), out(ln.loaded[i]));
    }
    QGPU_RETURN_IF_ERROR(mb.commit(owner + "." + lane_name(l) + ".out"));
  }
  return mem;
}

}  // namespace qgpu::simt::circuit
