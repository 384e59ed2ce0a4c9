#include "memory.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <initializer_list>
#include <string>

#include "names.h"
#include "qgpu/weights/numerics.h"
#include "qgpu/weights/primitives.h"

namespace qgpu::simt::circuit {
namespace {

constexpr int kLanes = kProtoLanes;
constexpr int kBanks = 4;
constexpr int kRamRows = 128;  // dk
constexpr int kRowBits = 7;
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
std::vector<Bit> with(std::vector<Bit> v, std::initializer_list<Bit> more) {
  v.insert(v.end(), more.begin(), more.end());
  return v;
}
std::string lane_name(int l) {
  return "lane" + std::to_string(l);
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
// uses 8 and the flipped form for the top bit). Layer 1: each group's sum
// without an incoming carry (s0, mod 2^g), generate G = [T ≥ 2^g] and propagate
// P = [T ≥ 2^g − 1]; group 0's s0 is final. Layer 2: the carry into group m is
// C_m = [E_m ≥ 2^m], E_m = Σ_{p<m} 2^p (G_p + P_p) (≤ 2^(m+1) − 2), and bit i
// (k bits above the group's lowest) flips iff C_m and the k bits below it in s0
// are all 1: c_i = [2^(m+1)·Σ_below s0 + E_m ≥ 2^m + 2^(m+1)·k] (one step: with
// a 0 below, the sum is at most 2^(m+1)·k − 2), out_i = s0_i ⊕ c_i. Unlike the
// carry-select of CIRCUITS.md §2 there is no second group sum (s1) to keep.
// With G = P = 0 (the add's literals off) layer 2 passes s0 through, so other
// results (and/or/xor) share the s0 field.
constexpr int kAddGroup = 7;

struct AddDigits {
  Word s0, g, p;
};

sdk::Expected<AddDigits> add_fields(Circuit& c, const std::string& owner, const std::string& name, int n) {
  const int ng = (n + kAddGroup - 1) / kAddGroup;
  auto s0 = field(c, owner, name + ".s0", n);
  auto g = field(c, owner, name + ".G", ng);
  auto p = field(c, owner, name + ".P", ng);
  if (!s0 || !g || !p) return sdk::invalid_argument(owner + "." + name + ": field names clash");
  return AddDigits{*s0, *g, *p};
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
      // bit k of the group sum T: [T ≥ 2^k] − [T ≥ 2^(k+1)] + [T ≥ 3·2^k]
      const Bit o = d.s0[lo + k];
      QGPU_RETURN_IF_ERROR(gated_step(mb, t, w, lits, out(o)));
      QGPU_RETURN_IF_ERROR(gated_step(mb, t, 2 * w, lits, out(o, -1)));
      QGPU_RETURN_IF_ERROR(gated_step(mb, t, 3 * w, lits, out(o)));
    }
    QGPU_RETURN_IF_ERROR(gated_step(mb, t, std::ldexp(1.0, gw), lits, out(d.g[m])));
    QGPU_RETURN_IF_ERROR(gated_step(mb, t, std::ldexp(1.0, gw) - 1, lits, out(d.p[m])));
  }
  return sdk::Status::ok();
}

// Layer 2: bits [from, n) of the sum into o[i − from] (coefficient +1), only where
// every literal is 1.
sdk::Status add_final(MlpBuilder& mb, const AddDigits& d, const Word& o, const std::vector<Bit>& lits, int from = 0) {
  const int n = static_cast<int>(d.s0.size());
  for (int i = from; i < std::min(kAddGroup, n); ++i) mb.select(lits, up(d.s0[i]), out(o[i - from]));
  for (int lo = kAddGroup, m = 1; lo < n; lo += kAddGroup, ++m) {
    const double pm = std::ldexp(1.0, m);
    for (int i = std::max(lo, from); i < std::min(lo + kAddGroup, n); ++i) {
      std::vector<Term> c;
      for (int p = 0; p < m; ++p) {
        c.push_back(Term{d.g[p], std::ldexp(1.0, p)});
        c.push_back(Term{d.p[p], std::ldexp(1.0, p)});
      }
      for (int q = lo; q < i; ++q) c.push_back(Term{d.s0[q], 2 * pm});
      const double t = pm + 2 * pm * (i - lo);
      std::vector<Term> nc;
      for (const Term& x : c) nc.push_back(Term{x.bit, -x.weight});
      const Bit s = d.s0[i];
      QGPU_RETURN_IF_ERROR(gated_step(mb, nc, 1 - t, with(lits, {s}), out(o[i - from])));  // s0_i ∧ ¬c_i
      QGPU_RETURN_IF_ERROR(gated_step(mb, c, t, with(lits, {!s}), out(o[i - from])));      // ¬s0_i ∧ c_i
    }
  }
  return sdk::Status::ok();
}

// The fault checks of one lane (MemoryIn::bounds), beside the address adder (`lo`: its
// digits over x's low n = addr_bits bits; `word`: x[2, n)) in four MLPs:
//  1. (with the adder's first) the high bits n..31 of a + imm in 7-bit groups h, each with
//     its group sum T_h: generate G_h = [T_h ≥ 2^g], propagate P_h = [T_h ≥ 2^g − 1] and
//     Z_h = [T_h mod 2^g = 0] = [T_h = 0] + [T_h = 2^g];
//  2. group h of x is zero ⟺ (Z_h ∧ no carry in) ∨ (P_h ∧ ¬G_h ∧ a carry in), the carry into
//     overall group m being [E_m ≥ 2^m], E_m = Σ_{p<m} 2^p (G_p + P_p) over the low groups,
//     then the high ones (add_final's carry); `misaligned` = active ∧ access ∧ (x0 ∨ x1);
//  3. word vs the space's bound B (read from the bounds RAM just before) in two digit groups
//     (bits 0-4, bits 5 up), D = Σ 2^i (word_i − B_i) per group, with the high groups folded in
//     (NZ of them nonzero): gt = [D_hi ≥ 1] ∨ NZ > 0, eq = [D_hi = 0] ∧ NZ = 0, ge_lo = [D_lo ≥ 0];
//  4. `out_of_bounds` = active ∧ access ∧ ¬misaligned ∧ (x ≥ 4·B ⟺ gt ∨ (eq ∧ ge_lo)):
//     [2·gt + eq + ge_lo ≥ 2].
sdk::Status build_fault_checks(Circuit& c, const std::string& owner, const Word& bound, const Word& a, const Word& imm,
                               const std::vector<Bit>& lits, const AddDigits& lo, const Word& word, MemoryLane& lane) {
  const int n = static_cast<int>(lo.s0.size());
  const int low_groups = static_cast<int>(lo.g.size());
  const int high = (32 - n + kAddGroup - 1) / kAddGroup;
  if (static_cast<int>(bound.size()) != kBoundBits)
    return sdk::invalid_argument(owner + ": a fault bound has " + std::to_string(kBoundBits) + " bits");
  auto g = field(c, owner, "x.hi.G", high);
  auto p = field(c, owner, "x.hi.P", high);
  auto z = field(c, owner, "x.hi.Z", high);
  auto zero = field(c, owner, "x.hi.zero", high);
  auto cmp = field(c, owner, "fault.cmp", 3);  // gt_hi, eq_hi, ge_lo
  auto mis = field(c, owner, "fault.misaligned", 1);
  auto oob = field(c, owner, "fault.out_of_bounds", 1);
  for (auto* f : {&g, &p, &z, &zero, &cmp, &mis, &oob})
    if (!*f) return sdk::invalid_argument(owner + ": fault field names clash");
  // The carry-lookahead sum E_m over every group below overall group m (low groups first).
  auto carry_terms = [&](int m, double sign) {
    std::vector<Term> t;
    for (int q = 0; q < m; ++q) {
      const double w = sign * std::ldexp(1.0, q);
      const bool is_low = q < low_groups;
      t.push_back(Term{is_low ? lo.g[q] : (*g)[q - low_groups], w});
      t.push_back(Term{is_low ? lo.p[q] : (*p)[q - low_groups], w});
    }
    return t;
  };
  {  // 1.
    MlpBuilder mb(c);
    for (int h = 0, from = n; h < high; ++h, from += kAddGroup) {
      const int gw = std::min(kAddGroup, 32 - from);
      std::vector<Term> t, neg;
      for (int k = 0; k < gw; ++k) {
        const double w = std::ldexp(1.0, k);
        for (const Bit& b : {a[from + k], imm[from + k]}) {
          t.push_back(Term{b, w});
          neg.push_back(Term{b, -w});
        }
      }
      const double top = std::ldexp(1.0, gw);
      QGPU_RETURN_IF_ERROR(mb.step(t, top, out((*g)[h])));
      QGPU_RETURN_IF_ERROR(mb.step(t, top - 1, out((*p)[h])));
      QGPU_RETURN_IF_ERROR(mb.step(neg, 0, out((*z)[h])));
      QGPU_RETURN_IF_ERROR(mb.step(t, top, out((*z)[h])));
      QGPU_RETURN_IF_ERROR(mb.step(t, top + 1, out((*z)[h], -1)));
    }
    QGPU_RETURN_IF_ERROR(mb.commit(owner + ".x.hi"));
  }
  {  // 2.
    MlpBuilder mb(c);
    for (int h = 0; h < high; ++h) {
      const int m = low_groups + h;
      const double pm = std::ldexp(1.0, m);
      std::vector<Term> zt = carry_terms(m, -1);
      zt.push_back(Term{(*z)[h], 2 * pm});
      QGPU_RETURN_IF_ERROR(mb.step(zt, pm + 1, out((*zero)[h])));
      std::vector<Term> ot = carry_terms(m, 1);
      ot.push_back(Term{(*p)[h], 2 * pm});
      ot.push_back(Term{(*g)[h], -2 * pm});
      QGPU_RETURN_IF_ERROR(mb.step(ot, 3 * pm, out((*zero)[h])));
    }
    QGPU_RETURN_IF_ERROR(gated_step(mb, {Term{lo.s0[0], 1}, Term{lo.s0[1], 1}}, 1, lits, out((*mis)[0])));
    QGPU_RETURN_IF_ERROR(mb.commit(owner + ".x.hi.zero"));
  }
  {  // 3.
    constexpr int kLoBits = 5;
    MlpBuilder mb(c);
    std::vector<Term> dlo, dhi;
    for (int i = 0; i < kBoundBits; ++i) {
      std::vector<Term>& d = i < kLoBits ? dlo : dhi;
      const double w = std::ldexp(1.0, i < kLoBits ? i : i - kLoBits);
      if (i < static_cast<int>(word.size())) d.push_back(Term{word[i], w});
      d.push_back(Term{bound[i], -w});
    }
    // With NZ = H − Σ_h zero_h high groups nonzero: gt = [D_hi + 64·NZ ≥ 1], eq = [D_hi − 64·NZ = 0].
    std::vector<Term> gt = dhi, eq = dhi;
    for (int h = 0; h < high; ++h) {
      gt.push_back(Term{(*zero)[h], -64});
      eq.push_back(Term{(*zero)[h], 64});
    }
    QGPU_RETURN_IF_ERROR(mb.step(gt, 1 - 64 * high, out((*cmp)[0])));
    QGPU_RETURN_IF_ERROR(mb.step(eq, 64 * high, out((*cmp)[1])));
    QGPU_RETURN_IF_ERROR(mb.step(eq, 64 * high + 1, out((*cmp)[1], -1)));
    QGPU_RETURN_IF_ERROR(mb.step(dlo, 0, out((*cmp)[2])));
    QGPU_RETURN_IF_ERROR(mb.commit(owner + ".fault.cmp"));
  }
  {  // 4.
    MlpBuilder mb(c);
    std::vector<Bit> all = lits;
    all.push_back(!(*mis)[0]);  // active ∧ access ∧ ¬misaligned: aligned (x's low bits die in MLP 2)
    QGPU_RETURN_IF_ERROR(gated_step(mb, {{(*cmp)[0], 2}, {(*cmp)[1], 1}, {(*cmp)[2], 1}}, 2, all, out((*oob)[0])));
    QGPU_RETURN_IF_ERROR(mb.commit(owner + ".fault.out_of_bounds"));
  }
  lane.misaligned = (*mis)[0];
  lane.out_of_bounds = (*oob)[0];
  return sdk::Status::ok();
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
  switch (layout) {
    case MemoryLayout::kStandard: return kBanks * kRamRows;
    case MemoryLayout::kWide: return 2 * kBanks * kRamRows;
    case MemoryLayout::kCompact: return kBanks * kRamRows / 2;
  }
  return 0;
}

int shared_memory_words(MemoryLayout layout) {
  return layout == MemoryLayout::kCompact ? kBanks * kRamRows / 2 : kBanks * kRamRows;
}

sdk::Expected<MemoryLayout> memory_layout_for(int global_words, int shared_words) {
  if (shared_words > shared_memory_words(MemoryLayout::kStandard))
    return sdk::unsupported("shared_words " + std::to_string(shared_words) + " is beyond the circuit, which takes at most " +
                            std::to_string(shared_memory_words(MemoryLayout::kStandard)));
  for (MemoryLayout l : {MemoryLayout::kStandard, MemoryLayout::kWide})
    if (global_words <= memory_words(l)) return l;
  return sdk::unsupported("global_words " + std::to_string(global_words) + " is beyond the circuit, which takes at most " +
                          std::to_string(memory_words(MemoryLayout::kWide)));
}

namespace {

// A space's banks in MemoryRams::rams: the first RAM and the word bits that select one.
struct Banks {
  int first = 0;
  int bits = 2;
};
Banks banks_of(MemoryLayout layout, bool shared) {
  switch (layout) {
    case MemoryLayout::kStandard: return {shared ? kBanks : 0, 2};
    case MemoryLayout::kWide: return shared ? Banks{2 * kBanks, 2} : Banks{0, 3};
    case MemoryLayout::kCompact: return {0, 2};
  }
  return {};
}
int spaces_of(MemoryLayout layout) {
  return layout == MemoryLayout::kCompact ? 1 : 2;  // sets of bank RAMs
}
// Word address bits the unit keeps: x >> 2 wrapped to the layout's largest space.
int word_bits_of(MemoryLayout layout) {
  return std::bit_width(static_cast<unsigned>(memory_words(layout) - 1));
}

}  // namespace

BankRow bank_row(MemoryLayout layout, bool shared, int word) {
  const Banks b = banks_of(layout, shared);
  const int bank = word & ((1 << b.bits) - 1);
  const int row = word >> b.bits;
  if (layout == MemoryLayout::kCompact) return {bank, (shared ? kRamRows / 2 : 0) + row};
  return {b.first + bank, row};
}

sdk::Expected<MemoryRams> build_memory_rams(Circuit& c, MemoryLayout layout, Records& records) {
  MemoryRams m;
  m.layout = layout;
  auto w = build_wmem_write(c, records);
  if (!w) return w.status();
  m.write = std::move(*w);
  // The token layout addresses 1,024 global and 512 shared words.
  records.check(RecordKind::kWmem, [layout](const Record& r) -> sdk::Status {
    const int words = r.shared ? shared_memory_words(layout) : memory_words(layout);
    if (r.word + r.count <= static_cast<std::uint32_t>(words)) return sdk::Status::ok();
    return sdk::invalid_argument("WMEM record: " + std::string(r.shared ? "shared" : "global") + " words " +
                                 std::to_string(r.word) + ".." + std::to_string(r.word + r.count - 1) +
                                 " run past the " + std::to_string(words) + " words of the circuit's memory layout (over by " +
                                 std::to_string(r.word + r.count - words) + ")");
  });
  // Port p (word & 3) writes row (word >> 2): bits 0-7, the space in bit 8.
  const WmemWrite& wr = m.write;
  auto row_bits = [&](int p, int from, int n) { return slice(wr.row[p], from, n); };
  auto add = [&](const std::string& name, const Word& addr, const Word& value, Bit we) -> sdk::Status {
    auto ram = c.add_ram("mem", name, kRamRows, 32);
    if (!ram) return ram.status();
    QGPU_RETURN_IF_ERROR(c.ram_write(*ram, addr, value, we));
    m.rams.push_back(*ram);
    return sdk::Status::ok();
  };
  switch (layout) {
    case MemoryLayout::kCompact:  // row: space·64 + (word >> 2)
      for (int p = 0; p < kBanks; ++p) {
        Word addr = row_bits(p, 0, kRowBits - 1);
        addr.push_back(wr.row[p][kRowBits + 1]);
        QGPU_RETURN_IF_ERROR(add("bank" + std::to_string(p), addr, wr.value[p], wr.bank_enable[p]));
      }
      break;
    case MemoryLayout::kStandard:
      for (int s = 0; s < 2; ++s)
        for (int p = 0; p < kBanks; ++p)
          QGPU_RETURN_IF_ERROR(add(std::string(s ? "shared.bank" : "global.bank") + std::to_string(p),
                                   row_bits(p, 0, kRowBits), wr.value[p], wr.enable[s * kBanks + p]));
      break;
    case MemoryLayout::kWide: {
      // Global bank k = word & 7 is port k & 3 where the port's row has bit 0 = k >> 2; its
      // enable is one MLP later than the port's, off on EXEC tokens as the port's (so that
      // the write data keeps sharing channels with the EXEC pass's, docs/CIRCUITS.md).
      auto en = c.computed("wmem", "wide_enable", 2 * kBanks);
      if (!en) return sdk::invalid_argument("wmem: the write fields are declared twice (one per circuit)");
      MlpBuilder mb(c);
      for (int k = 0; k < 2 * kBanks; ++k) {
        const Bit lsb = wr.row[k % kBanks][0];
        mb.select({wr.enable[k % kBanks], k >= kBanks ? lsb : !lsb}, kOne, out((*en)[k]));
      }
      c.push_enable(!records.exec_is[0]);
      const sdk::Status st = mb.commit("wmem.wide_enable");
      c.pop_enable();
      QGPU_RETURN_IF_ERROR(st);
      for (int k = 0; k < 2 * kBanks; ++k)
        QGPU_RETURN_IF_ERROR(
            add("global.bank" + std::to_string(k), row_bits(k % kBanks, 1, kRowBits), wr.value[k % kBanks], (*en)[k]));
      for (int p = 0; p < kBanks; ++p)
        QGPU_RETURN_IF_ERROR(
            add("shared.bank" + std::to_string(p), row_bits(p, 0, kRowBits), wr.value[p], wr.enable[kBanks + p]));
      break;
    }
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
  const int spaces = spaces_of(rams.layout);
  const int word_bits = word_bits_of(rams.layout);  // word address within a space
  const int addr_bits = word_bits + 2;               // bits of x = a + imm that matter
  int nrams = 0;
  for (int s = 0; s < spaces; ++s) nrams += 1 << banks_of(rams.layout, s == 1).bits;
  if (rams.rams.size() != static_cast<std::size_t>(nrams))
    return sdk::invalid_argument("memory: " + std::to_string(rams.rams.size()) + " bank RAMs, the layout has " +
                                 std::to_string(nrams));
  Memory mem;
  mem.rams = rams;

  c.push_enable(in.enable);
  struct PopEnable {
    Circuit& c;
    ~PopEnable() { c.pop_enable(); }
  } pop{c};
  auto op = [&](Op o) { return in.opcode[static_cast<int>(o)]; };
  // The atomics (every atom.* is built).
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
  if (!in.writes) reads_ops.clear();  // loads only
  reads_ops.push_back(Op::kLd);
  writes_ops.push_back(Op::kSt);
  auto is_read = any_of("is_read", reads_ops);
  if (!is_read) return is_read.status();

  // --- Addresses (MLP 0-1) and read enables (MLP 1: the bank bits are in adder group 0).
  // Only the word address x >> 2 is kept (`word`); the group sums die in MLP 1.
  std::array<Word, kLanes> word, low;  // low: x's group 0 (bits 0..6), final after MLP 0
  std::array<AddDigits, kLanes> digits;
  for (int l = 0; l < kLanes; ++l) {
    auto d = add_fields(c, owner, lane_name(l) + ".x", addr_bits);
    auto w = field(c, owner, lane_name(l) + ".word", word_bits);
    if (!d) return d.status();
    if (!w) return w.status();
    MlpBuilder l1(c), l2(c);
    QGPU_RETURN_IF_ERROR(add_digits(l1, *d, slice(in.a[l], 0, addr_bits), slice(in.imm, 0, addr_bits), {}));
    QGPU_RETURN_IF_ERROR(l1.commit(owner + "." + lane_name(l) + ".x"));
    QGPU_RETURN_IF_ERROR(add_final(l2, *d, *w, {}, 2));
    QGPU_RETURN_IF_ERROR(l2.commit(owner + "." + lane_name(l) + ".word"));
    word[l] = *w;
    low[l] = slice(d->s0, 0, kAddGroup);
    digits[l] = *d;
    mem.lane[l].word = word[l];
    mem.lane[l].misaligned = mem.lane[l].out_of_bounds = c.zero();
  }
  if (in.bounds) {
    std::vector<Op> access = reads_ops;
    if (in.writes) access.push_back(Op::kSt);
    auto is_access = any_of("is_access", access);
    if (!is_access) return is_access.status();
    // The bound of the instruction's space, read where the word compare needs it: the read's
    // enable (the unit's, recomputed) waits for the address adder's first MLP.
    auto late = field(c, owner, "bound.enable", 1);
    if (!late) return late.status();
    MlpBuilder lm(c);
    const Bit anchor = digits[0].g[0];
    lm.select({anchor}, kOne, out((*late)[0]));
    lm.select({!anchor}, kOne, out((*late)[0]));
    QGPU_RETURN_IF_ERROR(lm.commit(owner + ".bound.enable"));
    auto bound = c.ram_read(in.bounds->ram, owner + ".bound", Word{in.shared}, (*late)[0]);
    if (!bound) return bound.status();
    for (int l = 0; l < kLanes; ++l)
      QGPU_RETURN_IF_ERROR(build_fault_checks(c, owner + "." + lane_name(l), *bound, in.a[l], in.imm,
                                              {in.active[l], *is_access}, digits[l], word[l], mem.lane[l]));
  }
  // Read enables in MLP 1: the bank bits (x[3:2], or x[4:2]) are in adder group 0.
  std::array<Word, kLanes> en;
  {
    MlpBuilder mb(c);
    for (int l = 0; l < kLanes; ++l) {
      auto f = field(c, owner, lane_name(l) + ".read_en", nrams);
      if (!f) return f.status();
      en[l] = *f;
      for (int s = 0; s < spaces; ++s) {
        const Banks b = banks_of(rams.layout, s == 1);
        for (int k = 0; k < 1 << b.bits; ++k) {
          std::vector<Bit> m{in.active[l], *is_read};
          for (int i = 0; i < b.bits; ++i) m.push_back((k >> i) & 1 ? low[l][2 + i] : !low[l][2 + i]);
          if (!compact) m.push_back(s ? in.shared : !in.shared);
          mb.select(m, kOne, out(en[l][b.first + k]));
        }
      }
    }
    QGPU_RETURN_IF_ERROR(mb.commit(owner + ".read_en"));
  }

  // --- Reads: one port per lane and bank, all of a lane's ports into one 32-bit field
  // (ram_read_shared: the enables are one-hot, so only the addressed bank adds its row
  // and the field is the lane's word right after the Gated DeltaNet). A bank's row is
  // the word without its bank bits (7 bits; kCompact: 6 and the space).
  std::array<Word, kLanes> r;
  for (int l = 0; l < kLanes; ++l) {
    QGPU_RETURN_IF_ERROR(c.declare_one_hot(en[l]));
    std::vector<weights::RamReadSpec> ports;
    for (int s = 0; s < spaces; ++s) {
      const Banks b = banks_of(rams.layout, s == 1);
      Word key = slice(word[l], b.bits, std::min(kRowBits, word_bits - b.bits));
      if (compact) key.push_back(in.shared);
      for (int k = 0; k < 1 << b.bits; ++k) ports.push_back({rams.rams[b.first + k], key, en[l][b.first + k], 0});
    }
    auto f = c.ram_read_shared(owner, lane_name(l) + ".ld_value", ports);
    if (!f) return f.status();
    r[l] = *f;
    mem.lane[l].ld_value = r[l];
  }
  if (!in.writes) {  // loads only: no lane chain, nothing written
    for (int l = 0; l < kLanes; ++l) {
      mem.lane[l].loaded = r[l];
      mem.lane[l].step = r[l][31];  // no chain: the read itself
      mem.lane[l].writes = c.zero();
      mem.lane[l].value = weights::constant_word(c, 0, 32);
    }
    return mem;
  }
  auto is_write = any_of("is_write", writes_ops);
  auto is_xs = any_of("is_exch_st", {Op::kSt, Op::kAtomExch});
  auto is_mm = any_of("is_minmax", {Op::kAtomMin, Op::kAtomMax, Op::kAtomMinU, Op::kAtomMaxU});
  auto is_atomic = any_of("is_atomic", atomics);
  auto is_zop = any_of("is_add_logic", {Op::kAtomAdd, Op::kAtomAnd, Op::kAtomOr, Op::kAtomXor});
  for (auto* e : {&is_write, &is_xs, &is_mm, &is_atomic, &is_zop})
    if (!*e) return e->status();

  // --- Same word: e[j][l] (j < l) = both active ∧ word_j == word_l. The low 5
  // word bits (x's group 0) are final a layer before the high ones: eq_lo =
  // [d ≥ 0] − [d ≥ 1] over them, then with the H high bits (W = 2^H, |d_hi| < W)
  // [W·eq_lo + d_hi + 2W(act_j + act_l) ≥ 5W] − [… ≥ 5W + 1].
  constexpr int kLoBits = kAddGroup - 2;
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
          d.push_back(Term{low[j][2 + i], std::ldexp(1.0, i)});
          d.push_back(Term{low[l][2 + i], -std::ldexp(1.0, i)});
        }
        QGPU_RETURN_IF_ERROR(lo_mb.step(d, 0, out(lo)));
        QGPU_RETURN_IF_ERROR(lo_mb.step(d, 1, out(lo, -1)));
        for (int i = kLoBits; i < word_bits; ++i) {
          h.push_back(Term{word[j][i], std::ldexp(1.0, i - kLoBits)});
          h.push_back(Term{word[l][i], -std::ldexp(1.0, i - kLoBits)});
        }
        const double w = std::ldexp(1.0, word_bits - kLoBits);
        h.push_back(Term{lo, w});
        h.push_back(Term{in.active[j], 2 * w});
        h.push_back(Term{in.active[l], 2 * w});
        QGPU_RETURN_IF_ERROR(hi_mb.step(h, 5 * w, out(e[j][l])));
        QGPU_RETURN_IF_ERROR(hi_mb.step(h, 5 * w + 1, out(e[j][l], -1)));
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

  // --- The lanes in order (docs/ISA.md §5): lane j's operation f_j(x) = f(x, b_j, c_j)
  // on the word as the earlier lanes left it, x = B_j (`loaded`, B_0 = r_0), in two
  // MLPs. Layer 1 from x and b_j into shared fields whose meaning is the opcode's: u
  // (add: the adder's group sums s0; and/or/xor: the result; inc: x + 1; dec: x − 1),
  // G/P (add: x + b; min/max: b vs x; inc, cas: x vs b; dec: b vs x),
  // zero (dec: x == 0). Layer 2 gives A_j = f_j(x) and, in the same MLP, the next
  // lane's B_{j+1}: A of its latest earlier lane on the same word, else its own read.
  // Only one lane's intermediates live at a time; A_0..2 wait for the last lane,
  // which writes every `value`.
  std::array<Word, kLanes> loaded, after;
  for (int l = 0; l < kLanes; ++l) {
    auto f = field(c, owner, lane_name(l) + ".loaded", 32);
    auto v = field(c, owner, lane_name(l) + ".value", 32);
    if (!f || !v) return sdk::invalid_argument(owner + ": lane output names clash");
    loaded[l] = *f;
    mem.lane[l].loaded = *f;
    mem.lane[l].value = *v;
  }
  // E = Σ_m 2^m (G_m + P_m) over the 7-bit groups: the carry out of y + ¬w + 1 is
  // [E + 1 ≥ 32] (add_final's carry chain with carry-in 1), so y < w ⟺ [−E ≥ −30]; y == w ⟺
  // every group of y + ¬w is all ones ⟺ [Σ (P_m − G_m) ≥ 5].
  constexpr int kGroups = (32 + kAddGroup - 1) / kAddGroup;
  auto carry_sum = [](const AddDigits& d, double sign) {
    std::vector<Term> t;
    for (int m = 0; m < kGroups; ++m) {
      t.push_back(Term{d.g[m], sign * std::ldexp(1.0, m)});
      t.push_back(Term{d.p[m], sign * std::ldexp(1.0, m)});
    }
    return t;
  };
  auto all_ones = [](const AddDigits& d, double sign) {
    std::vector<Term> t;
    for (int m = 0; m < kGroups; ++m) {
      t.push_back(Term{d.p[m], sign});
      t.push_back(Term{d.g[m], -sign});
    }
    return t;
  };
  for (int j = 0; j < kLanes; ++j) {
    const std::string ln = lane_name(j);
    const Word& b = in.b[j];
    const Word& cw = in.c[j];
    auto dg = add_fields(c, owner, ln + ".f", 32);
    if (!dg) return dg.status();
    const AddDigits d = *dg;
    auto zf = field(c, owner, ln + ".f.zero", 1);
    if (!zf) return zf.status();
    const Bit zero = (*zf)[0];
    mem.lane[j].step = zero;
    const Word& u = d.s0;

    // Layer 1.
    {
      const Word& x = j == 0 ? r[0] : loaded[j];
      MlpBuilder mb(c);
      if (j == 0)
        for (int i = 0; i < 32; ++i) mb.select({*is_read}, up(r[0][i]), out(loaded[0][i]));
      QGPU_RETURN_IF_ERROR(add_digits(mb, d, x, b, {op(Op::kAtomAdd)}));
      for (int i = 0; i < 32; ++i) {
        const Bit xi = x[i], bi = b[i];
        mb.select({op(Op::kAtomAnd), xi, bi}, kOne, out(u[i]));
        mb.select({op(Op::kAtomOr), xi}, kOne, out(u[i]));
        mb.select({op(Op::kAtomOr), !xi, bi}, kOne, out(u[i]));
        mb.select({op(Op::kAtomXor), xi, !bi}, kOne, out(u[i]));
        mb.select({op(Op::kAtomXor), !xi, bi}, kOne, out(u[i]));
        // x ± 1: bit i flips iff every lower bit is 1 (inc) / 0 (dec); L = ones below i.
        if (i == 0) {
          mb.select({op(Op::kAtomInc), !xi}, kOne, out(u[0]));
          mb.select({op(Op::kAtomDec), !xi}, kOne, out(u[0]));
          continue;
        }
        std::vector<Term> lo, neg;
        for (int k = 0; k < i; ++k) {
          lo.push_back(Term{x[k], 1});
          neg.push_back(Term{x[k], -1});
        }
        QGPU_RETURN_IF_ERROR(gated_step(mb, neg, 1 - i, {op(Op::kAtomInc), xi}, out(u[i])));
        QGPU_RETURN_IF_ERROR(gated_step(mb, lo, i, {op(Op::kAtomInc), !xi}, out(u[i])));
        QGPU_RETURN_IF_ERROR(gated_step(mb, lo, 1, {op(Op::kAtomDec), xi}, out(u[i])));
        QGPU_RETURN_IF_ERROR(gated_step(mb, neg, 0, {op(Op::kAtomDec), !xi}, out(u[i])));
      }
      {
        std::vector<Term> neg;
        for (const Bit& xi : x) neg.push_back(Term{xi, -1});
        QGPU_RETURN_IF_ERROR(gated_step(mb, neg, 0, {op(Op::kAtomDec)}, out(zero)));
      }
      // G/P of y + ¬w (signed: both sign bits inverted) under the opcode's literal.
      auto compare = [&](const Word& y, const Word& w, bool is_signed, Bit lit) -> sdk::Status {
        for (int lo = 0, m = 0; lo < 32; lo += kAddGroup, ++m) {
          const int gw = std::min(kAddGroup, 32 - lo);
          std::vector<Term> t;
          for (int k = 0; k < gw; ++k) {
            const int i = lo + k;
            const bool flip = is_signed && i == 31;
            t.push_back(Term{flip ? !y[i] : y[i], std::ldexp(1.0, k)});
            t.push_back(Term{flip ? w[i] : !w[i], std::ldexp(1.0, k)});
          }
          QGPU_RETURN_IF_ERROR(gated_step(mb, t, std::ldexp(1.0, gw), {lit}, out(d.g[m])));
          QGPU_RETURN_IF_ERROR(gated_step(mb, t, std::ldexp(1.0, gw) - 1, {lit}, out(d.p[m])));
        }
        return sdk::Status::ok();
      };
      QGPU_RETURN_IF_ERROR(compare(b, x, true, op(Op::kAtomMin)));    // b < x
      QGPU_RETURN_IF_ERROR(compare(x, b, true, op(Op::kAtomMax)));    // x < b
      QGPU_RETURN_IF_ERROR(compare(b, x, false, op(Op::kAtomMinU)));  // b < x
      QGPU_RETURN_IF_ERROR(compare(x, b, false, op(Op::kAtomMaxU)));  // x < b
      QGPU_RETURN_IF_ERROR(compare(x, b, false, op(Op::kAtomInc)));   // x < b: no wrap
      QGPU_RETURN_IF_ERROR(compare(x, b, false, op(Op::kAtomCas)));   // x == b
      QGPU_RETURN_IF_ERROR(compare(b, x, false, op(Op::kAtomDec)));   // b < x: reload
      QGPU_RETURN_IF_ERROR(mb.commit(owner + "." + ln + ".f"));
    }

    // Layer 2: f_j(x) into `o` where every literal of `lits` is 1 (for a `loaded`
    // word, st's b is not the old value: exch only).
    const Word& x = loaded[j];
    MlpBuilder mb(c);
    auto emit = [&](const Word& o, const std::vector<Bit>& lits, bool for_loaded) -> sdk::Status {
      QGPU_RETURN_IF_ERROR(add_final(mb, d, o, with(lits, {*is_zop})));  // r + b, or the logic result
      const std::vector<Term> lt = carry_sum(d, -1), ge = carry_sum(d, 1);
      const std::vector<Term> eq = all_ones(d, 1), ne = all_ones(d, -1);
      for (int i = 0; i < 32; ++i) {
        mb.select(with(lits, {for_loaded ? op(Op::kAtomExch) : *is_xs, b[i]}), kOne, out(o[i]));
        QGPU_RETURN_IF_ERROR(gated_step(mb, lt, -30, with(lits, {*is_mm, b[i]}), out(o[i])));
        QGPU_RETURN_IF_ERROR(gated_step(mb, ge, 31, with(lits, {*is_mm, x[i]}), out(o[i])));
        QGPU_RETURN_IF_ERROR(gated_step(mb, eq, kGroups, with(lits, {op(Op::kAtomCas), cw[i]}), out(o[i])));
        QGPU_RETURN_IF_ERROR(gated_step(mb, ne, 1 - kGroups, with(lits, {op(Op::kAtomCas), x[i]}), out(o[i])));
        QGPU_RETURN_IF_ERROR(gated_step(mb, lt, -30, with(lits, {op(Op::kAtomInc), u[i]}), out(o[i])));
        mb.select(with(lits, {op(Op::kAtomDec), zero, b[i]}), kOne, out(o[i]));
        QGPU_RETURN_IF_ERROR(gated_step(mb, lt, -30, with(lits, {op(Op::kAtomDec), b[i]}), out(o[i])));
        QGPU_RETURN_IF_ERROR(gated_step(mb, ge, 31, with(lits, {op(Op::kAtomDec), !zero, u[i]}), out(o[i])));
      }
      return sdk::Status::ok();
    };
    if (j + 1 < kLanes) {
      auto a = field(c, owner, ln + ".after", 32);
      if (!a) return a.status();
      after[j] = *a;
      QGPU_RETURN_IF_ERROR(emit(after[j], {}, false));
      // B_{j+1}: ld, or an atomic with no earlier lane on the word: the read; else A of
      // the latest earlier lane on the word (lane j's straight from layer 1).
      const int n = j + 1;
      const Word& rn = r[n];
      std::vector<Bit> none{*is_atomic};
      for (int k = 0; k < n; ++k) none.push_back(!e[k][n]);
      for (int i = 0; i < 32; ++i) {
        mb.select({op(Op::kLd)}, up(rn[i]), out(loaded[n][i]));
        mb.select(none, up(rn[i]), out(loaded[n][i]));
      }
      for (int k = 0; k < j; ++k) {
        std::vector<Bit> latest{*is_atomic, e[k][n]};
        for (int q = k + 1; q < n; ++q) latest.push_back(!e[q][n]);
        for (int i = 0; i < 32; ++i) mb.select(latest, up(after[k][i]), out(loaded[n][i]));
      }
      QGPU_RETURN_IF_ERROR(emit(loaded[n], {e[j][n]}, true));
    } else {
      QGPU_RETURN_IF_ERROR(emit(mem.lane[j].value, {mem.lane[j].writes}, false));
      for (int k = 0; k < j; ++k)
        for (int i = 0; i < 32; ++i) mb.select({mem.lane[k].writes}, up(after[k][i]), out(mem.lane[k].value[i]));
    }
    QGPU_RETURN_IF_ERROR(mb.commit(owner + "." + ln + ".after"));
  }
  return mem;
}

}  // namespace qgpu::simt::circuit
