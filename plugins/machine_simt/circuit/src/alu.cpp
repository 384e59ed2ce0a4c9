#include "alu.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <utility>
#include <vector>

#include "names.h"
#include "qgpu/weights/numerics.h"
#include "qgpu/weights/primitives.h"

namespace qgpu::simt::circuit {
namespace {

constexpr int kWidth = 32;
constexpr int kGroup = 8;  // adder digit: one MLP adds at most 8 bits exactly in bf16
constexpr int kGroups = kWidth / kGroup;

// Flag bits of a lane (one field): carry chain, group-0 extras, shift and sel tests.
constexpr int kFlagG = 0;     // G_m = [local sum of group m >= 2^8] (m = 0..3)
constexpr int kFlagP = 4;     // P_m = [local sum >= 2^8 - 1]
constexpr int kFlagH0 = 8;    // [T0 >= 256] of the a + ~b path (T0 without the carry-in)
constexpr int kFlagH1 = 9;    // [T0 >= 257]
constexpr int kFlagBig = 10;  // b >= 32
constexpr int kFlagCnz = 11;  // c != 0
constexpr int kFlags = 12;

// Operations that compare a and b through a + ~b + 1, by the order of the top bit.
const std::vector<Op> kSignedCmp = {Op::kMin, Op::kMax, Op::kSetLt, Op::kSetLe, Op::kSetGt, Op::kSetGe};
const std::vector<Op> kUnsignedCmp = {Op::kMinU,   Op::kMaxU,   Op::kSetEq,  Op::kSetNe,
                                      Op::kSetLtU, Op::kSetLeU, Op::kSetGtU, Op::kSetGeU};

std::vector<Op> cat(std::initializer_list<std::vector<Op>> groups) {
  std::vector<Op> r;
  for (const auto& g : groups) r.insert(r.end(), g.begin(), g.end());
  return r;
}

// The opcode bits of a group of operations (at most one is 1).
struct Ops {
  const Word& opcode;
  std::vector<Bit> bits(std::initializer_list<Op> ops) const {
    std::vector<Bit> r;
    for (Op o : ops) r.push_back(opcode[static_cast<std::size_t>(o)]);
    return r;
  }
  // Σ op: the up projection that enables a neuron for these operations.
  Affine any(const std::vector<Op>& ops) const {
    Affine a;
    for (Op o : ops) a.terms.push_back(Term{opcode[static_cast<std::size_t>(o)], 1});
    return a;
  }
  // Σ coef·op (+ bias): a neuron that adds different multiples for different operations.
  Affine up(std::initializer_list<std::pair<Op, double>> ops, double bias = 0) const {
    Affine a;
    for (const auto& [o, w] : ops) a.terms.push_back(Term{opcode[static_cast<std::size_t>(o)], w});
    a.bias = bias;
    return a;
  }
};

const Affine kUpOne{{}, 1};

std::vector<Term> out(Bit b, double coef = 1) {
  return {Term{b, coef}};
}

// Conditions "the bits of w spell v" for a selector.
std::vector<std::vector<Bit>> pattern(const Word& w, unsigned v) {
  std::vector<std::vector<Bit>> m;
  for (const Bit& b : weights::spells(w, v)) m.push_back({b});
  return m;
}

// T = Σ_{j<=i} 2^j (x_{lo+j} + y_{lo+j}): the local sum of a digit group up to bit i.
std::vector<Term> prefix(const Word& x, const Word& y, int lo, int i) {
  std::vector<Term> t;
  for (int j = 0; j <= i; ++j) {
    t.push_back(Term{x[lo + j], std::ldexp(1.0, j)});
    t.push_back(Term{y[lo + j], std::ldexp(1.0, j)});
  }
  return t;
}

// E_m = Σ_{l<m} 2^l (G_l + P_l): the carry into group m is [E_m >= 2^m] (CIRCUITS.md §2).
std::vector<Term> carry_terms(const Word& f, int m, double sign) {
  std::vector<Term> e;
  for (int l = 0; l < m; ++l) {
    e.push_back(Term{f[kFlagG + l], sign * std::ldexp(1.0, l)});
    e.push_back(Term{f[kFlagP + l], sign * std::ldexp(1.0, l)});
  }
  return e;
}

// One adder path of layer 1: x + y + plus (plus = carry-in, 0 or 1). Group 0's
// sum bits are final, groups 1-3 hold local sums (carry-in 0), each bit as
// [T ≥ 2^i] − [T ≥ 2^(i+1)] + [T ≥ 3·2^i]; G_m/P_m of groups < `gp_groups`.
// `up_lo` enables groups 0-2, `up_hi` group 3.
sdk::Status adder_digits(weights::MlpBuilder& mb, const Word& x, const Word& y, int plus, const Affine& up_lo, const Affine& up_hi,
                         int gp_groups, const Word& sum, const Word& f) {
  for (int m = 0; m < kGroups; ++m) {
    const int lo = m * kGroup;
    const double pl = m == 0 ? plus : 0;
    const Affine& up = m == kGroups - 1 ? up_hi : up_lo;
    for (int i = 0; i < kGroup; ++i) {
      const auto t = prefix(x, y, lo, i);
      const double p = std::ldexp(1.0, i);
      QGPU_RETURN_IF_ERROR(mb.step(t, p - pl, up, out(sum[lo + i], 1)));
      QGPU_RETURN_IF_ERROR(mb.step(t, 2 * p - pl, up, out(sum[lo + i], -1)));
      QGPU_RETURN_IF_ERROR(mb.step(t, 3 * p - pl, up, out(sum[lo + i], 1)));
    }
    if (m >= gp_groups) continue;
    const auto t = prefix(x, y, lo, kGroup - 1);
    QGPU_RETURN_IF_ERROR(mb.step(t, 256 - pl, up, out(f[kFlagG + m])));  // dedups with the sum's [T ≥ 256]
    QGPU_RETURN_IF_ERROR(mb.step(t, 255 - pl, up, out(f[kFlagP + m])));
  }
  return sdk::Status::ok();
}

struct Lane {
  const AluLaneIn& in;
  Word x;  // layer 1 scratch, overwritten in place by d in layer 2
  Word f;  // flags
  Word d;
};

// Layer 1 of one lane: adder digits of both paths, carry flags, shift stage 1, big, cnz.
sdk::Status layer1(Circuit& c, const Ops& op, const std::string& name, Lane& ln) {
  const Word& a = ln.in.a;
  const Word& b = ln.in.b;
  weights::MlpBuilder mb(c);
  // add: a + b.
  QGPU_RETURN_IF_ERROR(adder_digits(mb, a, b, 0, op.any({Op::kAdd}), op.any({Op::kAdd}), kGroups - 1, ln.x, ln.f));
  // sub and every compare: a + ~b + 1. The top group's G/P is unsigned here (sub, unsigned
  // compares, ==) and again below with both sign bits flipped (signed compares).
  const Affine neg_lo = op.any(cat({{Op::kSub}, kSignedCmp, kUnsignedCmp}));
  const Affine neg_hi = op.any(cat({{Op::kSub}, kUnsignedCmp}));
  const Affine signed_hi = op.any(kSignedCmp);
  const Word nb = ~b;
  QGPU_RETURN_IF_ERROR(adder_digits(mb, a, nb, 1, neg_lo, neg_hi, kGroups, ln.x, ln.f));
  {
    // Group 0 without the carry-in: T0 = a + ~b over bits 0-7 (G0 = [T0 ≥ 255] above).
    // a == b iff T0 == 255 and every upper group sums to 255 (P − G); b − a has its
    // carry iff [T0 ≥ 256] + [T0 ≥ 257] + Σ 2^m (G_m + P_m) <= 14 (its G/P are ¬P/¬G).
    const auto t0 = prefix(a, nb, 0, kGroup - 1);
    QGPU_RETURN_IF_ERROR(mb.step(t0, 256, neg_lo, out(ln.f[kFlagH0])));
    QGPU_RETURN_IF_ERROR(mb.step(t0, 257, neg_lo, out(ln.f[kFlagH1])));
    Word sa = a, sb = nb;  // signed order: invert both sign bits (free)
    sa.back() = !sa.back();
    sb.back() = !sb.back();
    const int lo = (kGroups - 1) * kGroup;
    const auto t3 = prefix(sa, sb, lo, kGroup - 1);
    QGPU_RETURN_IF_ERROR(mb.step(t3, 256, signed_hi, out(ln.f[kFlagG + kGroups - 1])));
    QGPU_RETURN_IF_ERROR(mb.step(t3, 255, signed_hi, out(ln.f[kFlagP + kGroups - 1])));
  }
  // Shift stage 1: shl shifts a left by k = b[1:0]; shr/sra shift reverse(a) left
  // (the result is reversed back in layer 2), sra filling with a[31].
  const std::vector<Bit> shl = op.bits({Op::kShl}), shr = op.bits({Op::kShr, Op::kSra}), sra = op.bits({Op::kSra});
  const Word d0(b.begin(), b.begin() + 2);
  for (int k = 0; k < 4; ++k) {
    auto cl = pattern(d0, static_cast<unsigned>(k)), cr = cl, cf = cl;
    cl.push_back(shl);
    cr.push_back(shr);
    cf.push_back(sra);
    for (int i = k; i < kWidth; ++i) {
      mb.select_groups(cl, Affine{{Term{a[i - k], 1}}, 0}, out(ln.x[i]));
      mb.select_groups(cr, Affine{{Term{a[kWidth - 1 - (i - k)], 1}}, 0}, out(ln.x[i]));
    }
    std::vector<Term> fill;
    for (int i = 0; i < k; ++i) fill.push_back(Term{ln.x[i], 1});
    if (!fill.empty()) mb.select_groups(cf, Affine{{Term{a.back(), 1}}, 0}, fill);
  }
  // PTX clamp: any of b[31:5] set means b >= 32.
  std::vector<Term> hi;
  for (int j = 5; j < kWidth; ++j) hi.push_back(Term{b[j], 1});
  QGPU_RETURN_IF_ERROR(mb.step(hi, 1, kUpOne, out(ln.f[kFlagBig])));
  std::vector<Term> cs;
  for (const Bit& bit : ln.in.c) cs.push_back(Term{bit, 1});
  QGPU_RETURN_IF_ERROR(mb.step(cs, 1, kUpOne, out(ln.f[kFlagCnz])));
  return mb.commit(name);
}

// Layer 2 of one lane: d written over x's slot (d = x + Σ contributions − x where x is scratch).
sdk::Status layer2(Circuit& c, const Ops& op, const std::string& name, Lane& ln) {
  const Word& a = ln.in.a;
  const Word& b = ln.in.b;
  const Word& x = ln.x;
  const Word& f = ln.f;
  const Word& d = ln.d;
  weights::MlpBuilder mb(c);
  const std::vector<Bit> addsub = op.bits({Op::kAdd, Op::kSub});
  // The NOT of a: 1 − a (the constant here, −a below).
  std::vector<Term> all;
  for (const Bit& bit : d) all.push_back(Term{bit, 1});
  mb.constant(op.up({{Op::kNot, 1}}), all);
  std::vector<Term> e_pos = carry_terms(f, kGroups, 1), e_neg = carry_terms(f, kGroups, -1);
  for (int i = 0; i < kWidth; ++i) {
    const Affine a_minus_b{{Term{a[i], 1}, Term{b[i], -1}}, 0};
    // x is scratch except for add/sub, where it already holds the sum bit (group 0)
    // or the group's local sum: remove it for every other operation.
    mb.select_groups({{x[i]}}, op.up({{Op::kAdd, -1}, {Op::kSub, -1}}, 1), out(d[i], -1));
    // Carry-select, groups 1-3: flip the local sum bit when the carry comes in and
    // every lower bit of the group is 1: [W·(those bits + add/sub) + E_m ≥ W·n + 2^m],
    // W = 2^(m+1) > max E_m, times (1 − 2x_i).
    if (i >= kGroup) {
      const int m = i / kGroup, lo = m * kGroup;
      const double w = std::ldexp(1.0, m + 1);
      std::vector<Term> t = carry_terms(f, m, 1);
      for (int j = lo; j < i; ++j) t.push_back(Term{x[j], w});
      for (const Bit& o : addsub) t.push_back(Term{o, w});
      const double n = i - lo + 1;
      QGPU_RETURN_IF_ERROR(
          mb.step(t, w * n + std::ldexp(1.0, m), Affine{{Term{!x[i], 1}, Term{x[i], -1}}, 0}, out(d[i])));
    }
    // Logic from a and b: mov/or/xor/not take a, or/xor/min/max/sel take b, a∧b corrects.
    mb.select_groups({{a[i]}}, op.up({{Op::kMov, 1}, {Op::kOr, 1}, {Op::kXor, 1}, {Op::kNot, -1}}), out(d[i]));
    mb.select_groups(
        {{b[i]}},
        op.up(
            {{Op::kOr, 1}, {Op::kXor, 1}, {Op::kMin, 1}, {Op::kMinU, 1}, {Op::kMax, 1}, {Op::kMaxU, 1}, {Op::kSel, 1}}),
        out(d[i]));
    mb.select_groups({{a[i]}, {b[i]}}, op.up({{Op::kAnd, 1}, {Op::kOr, -1}, {Op::kXor, -2}}), out(d[i]));
    // sel, min, max: b + cond·(a − b) with cond = c != 0, a < b, a >= b.
    mb.select_groups({{f[kFlagCnz]}, op.bits({Op::kSel})}, a_minus_b, out(d[i]));
    std::vector<Term> lt = e_neg;  // [32·min − E ≥ 17]: min and a < b (E <= 15)
    for (const Bit& o : op.bits({Op::kMin, Op::kMinU})) lt.push_back(Term{o, 32});
    QGPU_RETURN_IF_ERROR(mb.step(lt, 17, a_minus_b, out(d[i])));
    std::vector<Term> ge = e_pos;  // [32·max + E ≥ 48]: max and a >= b (E >= 16)
    for (const Bit& o : op.bits({Op::kMax, Op::kMaxU})) ge.push_back(Term{o, 32});
    QGPU_RETURN_IF_ERROR(mb.step(ge, 48, a_minus_b, out(d[i])));
  }
  // set*: one threshold each on the carry chain, into bit 0.
  std::vector<Term> q{{f[kFlagG], 1}, {f[kFlagH0], -1}};  // Q = 4 iff a == b
  for (int m = 1; m < kGroups; ++m) q.insert(q.end(), {Term{f[kFlagP + m], 1}, Term{f[kFlagG + m], -1}});
  std::vector<Term> nq = q;
  for (Term& t : nq) t.weight = -t.weight;
  std::vector<Term> r{{f[kFlagH0], 1}, {f[kFlagH1], 1}};  // R <= 14 iff b − a has its carry (a <= b)
  for (int m = 1; m < kGroups; ++m)
    r.insert(r.end(), {Term{f[kFlagG + m], std::ldexp(1.0, m)}, Term{f[kFlagP + m], std::ldexp(1.0, m)}});
  std::vector<Term> nr = r;
  for (Term& t : nr) t.weight = -t.weight;
  const auto d0 = out(d[0]);
  QGPU_RETURN_IF_ERROR(mb.step(q, 4, op.up({{Op::kSetEq, 1}}), d0));
  QGPU_RETURN_IF_ERROR(mb.step(nq, -3, op.up({{Op::kSetNe, 1}}), d0));
  QGPU_RETURN_IF_ERROR(mb.step(e_neg, -15, op.up({{Op::kSetLt, 1}, {Op::kSetLtU, 1}}), d0));
  QGPU_RETURN_IF_ERROR(mb.step(e_pos, 16, op.up({{Op::kSetGe, 1}, {Op::kSetGeU, 1}}), d0));
  QGPU_RETURN_IF_ERROR(mb.step(nr, -14, op.up({{Op::kSetLe, 1}, {Op::kSetLeU, 1}}), d0));
  QGPU_RETURN_IF_ERROR(mb.step(r, 15, op.up({{Op::kSetGt, 1}, {Op::kSetGtU, 1}}), d0));
  // Shift stage 2: by 4·k, k = b[4:2], unless b >= 32; shr/sra write bit i to d[31 − i].
  const std::vector<Bit> shl = op.bits({Op::kShl}), shr = op.bits({Op::kShr, Op::kSra}), sra = op.bits({Op::kSra});
  const Word d1(b.begin() + 2, b.begin() + 5);
  for (unsigned k = 0; k < 8; ++k) {
    auto cl = pattern(d1, k);
    cl.push_back({!f[kFlagBig]});
    auto cr = cl, cf = cl;
    cl.push_back(shl);
    cr.push_back(shr);
    cf.push_back(sra);
    const int dist = static_cast<int>(4 * k);
    for (int i = dist; i < kWidth; ++i) {
      mb.select_groups(cl, Affine{{Term{x[i - dist], 1}}, 0}, out(d[i]));
      mb.select_groups(cr, Affine{{Term{x[i - dist], 1}}, 0}, out(d[kWidth - 1 - i]));
    }
    std::vector<Term> fill;
    for (int i = 0; i < dist; ++i) fill.push_back(Term{d[kWidth - 1 - i], 1});
    if (!fill.empty()) mb.select_groups(cf, Affine{{Term{a.back(), 1}}, 0}, fill);
  }
  mb.select_groups({{f[kFlagBig]}, sra}, Affine{{Term{a.back(), 1}}, 0}, all);  // sra by >= 32: the sign
  return mb.commit(name, x.front().field);
}

sdk::Status check_width(const Word& w, std::size_t want, const std::string& what) {
  if (w.size() == want) return sdk::Status::ok();
  return sdk::invalid_argument("alu: " + what + " has " + std::to_string(w.size()) + " bits, needs " +
                               std::to_string(want));
}

}  // namespace

sdk::Expected<AluOut> build_alu(Circuit& c, const AluIn& in) {
  if (in.enable.field < 0) return sdk::invalid_argument("alu: no enable bit");
  QGPU_RETURN_IF_ERROR(check_width(in.opcode, static_cast<std::size_t>(kOpCount), "opcode"));
  for (int l = 0; l < kProtoLanes; ++l) {
    const std::string ln = "lane " + std::to_string(l) + " operand ";
    QGPU_RETURN_IF_ERROR(check_width(in.lane[l].a, kWidth, ln + "a"));
    QGPU_RETURN_IF_ERROR(check_width(in.lane[l].b, kWidth, ln + "b"));
    QGPU_RETURN_IF_ERROR(check_width(in.lane[l].c, kWidth, ln + "c"));
  }
  const Ops op{in.opcode};
  AluOut res;
  c.push_enable(in.enable);
  struct PopEnable {
    Circuit& c;
    ~PopEnable() { c.pop_enable(); }
  } pop{c};
  for (int l = 0; l < kProtoLanes; ++l) {
    const std::string lane = "lane" + std::to_string(l);
    auto x = c.computed(in.owner, lane + ".x", kWidth);
    if (!x) return x.status();
    auto f = c.computed(in.owner, lane + ".flags", kFlags);
    if (!f) return f.status();
    Lane ln{in.lane[l], *x, *f, {}};
    QGPU_RETURN_IF_ERROR(layer1(c, op, in.owner + "." + lane + ".digits", ln));
    auto d = c.alias(ln.x, lane + ".d");
    if (!d) return d.status();
    ln.d = *d;
    QGPU_RETURN_IF_ERROR(layer2(c, op, in.owner + "." + lane + ".d", ln));
    res.d[l] = std::move(ln.d);
  }
  return res;
}

}  // namespace qgpu::simt::circuit
