#include "mul.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "names.h"
#include "qgpu/weights/numerics.h"
#include "qgpu/weights/primitives.h"

namespace qgpu::simt::circuit {
namespace {

using weights::MlpOp;

constexpr int kBits = 32;
constexpr int kDigits = kBits / 2;  // radix-4 Booth digits of b
constexpr int kWin = 4;             // columns per window sum
constexpr int kWindows = kBits / kWin;
constexpr int kGroup = 8;  // digit group of the final addition (one MLP adds at most 8 bits in bf16)
const Affine kOne{{}, 1};

double pow2(int e) {
  return std::ldexp(1.0, e);
}

// Where every bit of the three scratch slots sits; the same for every lane.
struct Layout {
  // rows slot: Booth bits of digit k at columns 2k..31 (first[k] + j is column 2k + j), then c ∧ is_mad.
  std::array<int, kDigits> first{};
  int booth_bits = 0;
  int rows_width = 0;
  // window slot: bit i of V_m, or -1 when it is final (written to d) or not needed.
  std::array<std::vector<int>, kWindows> win_index;
  std::array<int, kWindows> win_width{};
  int win_width_total = 0;
  int first_shared = kBits;  // lowest column holding two window bits
  // addition: digit groups [lo, hi) from first_shared; sum slot = s0 of groups 1.. then G, P of groups 0..n-2.
  std::vector<std::pair<int, int>> groups;
  std::vector<int> s0_first;  // per group (-1 for group 0, whose sum is final)
  int gp_first = 0;
  int sum_width = 0;
};

Layout make_layout(MadAddend addend) {
  Layout l;
  for (int k = 0; k < kDigits; ++k) {
    l.first[k] = l.booth_bits;
    l.booth_bits += kBits - 2 * k;
  }
  l.rows_width = l.booth_bits + (addend == MadAddend::kRow ? kBits : 0);
  // Window maxima: column j holds floor(j/2)+1 Booth bits, one c bit and, at even j, the +1 of digit j/2.
  std::array<int, kBits> contributors{};
  for (int m = 0; m < kWindows; ++m) {
    int max = 0;
    for (int i = 0; i < kWin; ++i) {
      const int col = kWin * m + i;
      max += (col / 2 + 1 + 1 + (col % 2 == 0 ? 1 : 0)) << i;
    }
    const int width = std::min(static_cast<int>(std::bit_width(static_cast<unsigned>(max))), kBits - kWin * m);
    l.win_width[m] = width;
    for (int i = 0; i < width; ++i) ++contributors[kWin * m + i];
  }
  for (int col = 0; col < kBits; ++col)
    if (contributors[col] >= 2) {
      l.first_shared = col;
      break;
    }
  for (int m = 0; m < kWindows; ++m) {
    l.win_index[m].assign(l.win_width[m], -1);
    for (int i = 0; i < l.win_width[m]; ++i)
      if (kWin * m + i >= l.first_shared) l.win_index[m][i] = l.win_width_total++;
  }
  for (int lo = l.first_shared; lo < kBits;) {
    const int hi = std::min(kBits, (lo / kGroup + 1) * kGroup);
    l.groups.emplace_back(lo, hi);
    lo = hi;
  }
  for (std::size_t h = 0; h < l.groups.size(); ++h) {
    l.s0_first.push_back(h == 0 ? -1 : l.sum_width);
    if (h > 0) l.sum_width += l.groups[h].second - l.groups[h].first;
  }
  l.gp_first = l.sum_width;
  l.sum_width += 2 * (static_cast<int>(l.groups.size()) - 1);
  return l;
}

const Layout& layout(MadAddend addend) {
  static const Layout row = make_layout(MadAddend::kRow), windows = make_layout(MadAddend::kWindows);
  return addend == MadAddend::kRow ? row : windows;
}

// The scratch slots of the lane being built; lane 0 creates them, lane k > 0
// overwrites lane k-1's (`old`) in place.
struct Slot {
  Word now;
  std::optional<Word> old;
};

sdk::Expected<Slot> next_slot(Circuit& c, const std::string& owner, const std::string& name, int width,
                              const std::optional<Word>& prev, int lane) {
  const std::string n = name + ".lane" + std::to_string(lane);
  auto w = prev ? c.alias(*prev, n) : c.computed(owner, n, width);
  if (!w) return w.status();
  return Slot{*w, prev};
}

// Appends `part`'s neurons to `op`, each gate shifted by -2^17·(Σ on - 1): off
// unless exactly one of `on` is 1 (an opcode guard beside the enable guard).
void append_guarded(MlpOp& op, const MlpBuilder& part, const std::vector<Bit>& on) {
  for (weights::Neuron n : part.op().neurons) {
    for (const Bit& b : on) n.gate.terms.push_back(Term{b, weights::kEnableGain});
    if (!on.empty()) n.gate.bias -= weights::kEnableGain;
    op.neurons.push_back(std::move(n));
  }
}

// Commits `op` writing `slot` (and whatever else it writes): clear neurons
// subtract the old lane's bits from the shared slot.
sdk::Status commit(Circuit& c, const std::string& name, MlpOp op, const Slot& slot) {
  int overwrites = -1;
  if (slot.old) {
    MlpBuilder clear(c);
    for (std::size_t i = 0; i < slot.old->size(); ++i) clear.select({(*slot.old)[i]}, kOne, {Term{slot.now[i], -1}});
    for (const weights::Neuron& n : clear.op().neurons) op.neurons.push_back(n);
    overwrites = slot.old->front().field;
  }
  return c.add_mlp(name, std::move(op), overwrites);
}

// Stage rows (the lane's first layer): the Booth rows and c ∧ is_mad. Digit k of b (b[-1] = 0) is
// d = -2·b[2k+1] + b[2k] + b[2k-1]; row bit j (column 2k + j) by pattern
// (b[2k+1] b[2k] b[2k-1]): 001,010 → a[j]; 011 → a[j-1]; 100 → ¬a[j-1] (1 at j = 0);
// 101,110 → ¬a[j]; 111 → 1. One selector neuron per pattern; the constant
// ones merge per digit.
sdk::Status build_rows(Circuit& c, const MulIn& in, int lane, const Slot& rows) {
  const Layout& l = layout(in.addend);
  const Word& a = in.a[lane];
  const Word& b = in.b[lane];
  MlpBuilder mb(c);
  for (int k = 0; k < kDigits; ++k) {
    for (int j = 0; 2 * k + j < kBits; ++j) {
      const Bit out = rows.now[l.first[k] + j];
      auto sel = [&](unsigned pattern, const Affine& up) {
        if (k == 0 && (pattern & 1)) return;  // b[-1] = 0
        std::vector<Bit> match = {(pattern & 4) ? b[2 * k + 1] : !b[2 * k + 1], (pattern & 2) ? b[2 * k] : !b[2 * k]};
        if (k > 0) match.push_back((pattern & 1) ? b[2 * k - 1] : !b[2 * k - 1]);
        mb.select(match, up, {Term{out, 1}});
      };
      auto bit = [](Bit x) { return Affine{{Term{x, 1}}, 0}; };
      sel(0b001, bit(a[j]));
      sel(0b010, bit(a[j]));
      if (j > 0) {
        sel(0b011, bit(a[j - 1]));
        sel(0b100, bit(!a[j - 1]));
      } else {
        sel(0b100, kOne);
      }
      sel(0b101, bit(!a[j]));
      sel(0b110, bit(!a[j]));
      sel(0b111, kOne);
    }
  }
  if (in.addend == MadAddend::kRow)
    for (int i = 0; i < kBits; ++i)
      mb.select({in.is_mad}, Affine{{Term{in.c[lane][i], 1}}, 0}, {Term{rows.now[l.booth_bits + i], 1}});
  return commit(c, in.owner + ".lane" + std::to_string(lane) + ".rows", mb.op(), rows);
}

// Adds coef·(bit i of S) for every i in `outs` (bit index → output): bit i of an
// integer S >= 0 is Σ_q (-1)^(q+1)·[S >= q·2^i]; one step per threshold, shared.
sdk::Status sum_bits(MlpBuilder& mb, const std::vector<Term>& terms, const std::vector<std::pair<int, Bit>>& outs) {
  double max = 0;
  for (const Term& t : terms) max += std::max(0.0, t.weight);
  for (long long t = 1; t <= static_cast<long long>(max); ++t) {
    std::vector<Term> o;
    for (const auto& [i, out] : outs) {
      const long long p = 1LL << i;
      if (t % p == 0) o.push_back(Term{out, ((t / p) % 2) ? 1.0 : -1.0});
    }
    if (!o.empty()) QGPU_RETURN_IF_ERROR(mb.step(terms, static_cast<double>(t), o));
  }
  return sdk::Status::ok();
}

// Stage win: the window sums V_m of the rows, the Booth +1s (b[2k+1] at column 2k) and c;
// off unless is_mul or is_mad (the opcode folded into every gate). With
// MadAddend::kWindows, one copy without c (is_mul) and one with c read directly (is_mad).
sdk::Status build_windows(Circuit& c, const MulIn& in, int lane, const Word& rows, const Slot& win, const Word& d) {
  const Layout& l = layout(in.addend);
  const bool split = in.addend == MadAddend::kWindows;
  MlpBuilder mb(c), mad(c);
  for (int m = 0; m < kWindows; ++m) {
    std::vector<Term> terms, c_terms;
    const int lo = kWin * m;
    for (int k = 0; k < kDigits; ++k)
      for (int j = 0; 2 * k + j < kBits; ++j) {
        const int col = 2 * k + j;
        if (col >= lo && col < lo + kWin) terms.push_back(Term{rows[l.first[k] + j], pow2(col - lo)});
      }
    for (int col = lo; col < lo + kWin; ++col) {
      if (col % 2 == 0) terms.push_back(Term{in.b[lane][col + 1], pow2(col - lo)});
      c_terms.push_back(Term{split ? in.c[lane][col] : rows[l.booth_bits + col], pow2(col - lo)});
    }
    std::vector<std::pair<int, Bit>> outs;
    for (int i = 0; i < l.win_width[m]; ++i)
      outs.emplace_back(i, l.win_index[m][i] < 0 ? d[lo + i] : win.now[l.win_index[m][i]]);
    if (split) QGPU_RETURN_IF_ERROR(sum_bits(mb, terms, outs));
    terms.insert(terms.end(), c_terms.begin(), c_terms.end());
    QGPU_RETURN_IF_ERROR(sum_bits(split ? mad : mb, terms, outs));
  }
  MlpOp op;
  if (split) {
    append_guarded(op, mb, {in.is_mul});
    append_guarded(op, mad, {in.is_mad});
  } else {
    append_guarded(op, mb, {in.is_mul, in.is_mad});
  }
  return commit(c, in.owner + ".lane" + std::to_string(lane) + ".win", std::move(op), win);
}

// The window bits landing on each column (at most two: V_m bit i and V_{m-1} bit i + 4).
std::array<std::vector<Bit>, kBits> column_bits(const Layout& l, const Word& win) {
  std::array<std::vector<Bit>, kBits> col;
  for (int m = 0; m < kWindows; ++m)
    for (int i = 0; i < l.win_width[m]; ++i)
      if (l.win_index[m][i] >= 0) col[kWin * m + i].push_back(win[l.win_index[m][i]]);
  return col;
}

// Stage sum1: per digit group h, T_i = Σ_{p <= lo+i} 2^(p-lo)·(bits at column p); the
// group's sum without carry-in (final for group 0), G_h = [T >= 2^w], P_h = [T >= 2^w - 1].
sdk::Status build_sum1(Circuit& c, const MulIn& in, int lane, const Word& win, const Slot& sum, const Word& d) {
  const Layout& l = layout(in.addend);
  const auto col = column_bits(l, win);
  MlpBuilder mb(c);
  for (std::size_t h = 0; h < l.groups.size(); ++h) {
    const auto [lo, hi] = l.groups[h];
    std::vector<Term> prefix;
    for (int i = 0; lo + i < hi; ++i) {
      for (const Bit& x : col[lo + i]) prefix.push_back(Term{x, pow2(i)});
      const Bit out = h == 0 ? d[lo + i] : sum.now[l.s0_first[h] + i];
      QGPU_RETURN_IF_ERROR(sum_bits(mb, prefix, {{i, out}}));
    }
    if (h + 1 == l.groups.size()) continue;
    const int w = hi - lo;
    double max = 0;
    for (const Term& t : prefix) max += t.weight;
    if (max >= pow2(w + 1))
      return sdk::invalid_argument("mul: digit group [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                   ") sums to " + std::to_string(static_cast<long long>(max)) +
                                   ", its carry would exceed 1 (limit " +
                                   std::to_string(static_cast<long long>(pow2(w + 1) - 1)) + ")");
    const int gp = l.gp_first + 2 * static_cast<int>(h);
    QGPU_RETURN_IF_ERROR(mb.step(prefix, pow2(w), {Term{sum.now[gp], 1}}));
    QGPU_RETURN_IF_ERROR(mb.step(prefix, pow2(w) - 1, {Term{sum.now[gp + 1], 1}}));
  }
  return commit(c, in.owner + ".lane" + std::to_string(lane) + ".sum1", mb.op(), sum);
}

// Stage sum2: out_i = σ_i ⊕ z_i with z_i = C_h ∧ σ_0..σ_(i-1) = [F >= θ],
// F = E_h + 2^(h+1)·Σ_{j<i} σ_j, E_h = Σ_{l<h} 2^l(G_l + P_l) < 2^(h+1), θ = 2^h + 2^(h+1)·i:
// [F + W·¬σ_i >= θ + W] + [W·σ_i - F >= W - θ + 1] with W = 2^(h+1)·(i+1) > F. 4 neurons per bit.
sdk::Status build_sum2(Circuit& c, const MulIn& in, int lane, const Word& sum, const Word& d) {
  const Layout& l = layout(in.addend);
  MlpBuilder mb(c);
  for (std::size_t h = 1; h < l.groups.size(); ++h) {
    const auto [lo, hi] = l.groups[h];
    const double unit = pow2(static_cast<int>(h) + 1);
    std::vector<Term> f;
    for (std::size_t g = 0; g < h; ++g) {
      const int gp = l.gp_first + 2 * static_cast<int>(g);
      f.push_back(Term{sum[gp], pow2(static_cast<int>(g))});
      f.push_back(Term{sum[gp + 1], pow2(static_cast<int>(g))});
    }
    for (int i = 0; lo + i < hi; ++i) {
      const Bit s = sum[l.s0_first[h] + i];
      const double theta = pow2(static_cast<int>(h)) + unit * i;
      const double w = unit * (i + 1);
      std::vector<Term> ta = f, tb;
      ta.push_back(Term{!s, w});
      for (const Term& t : f) tb.push_back(Term{t.bit, -t.weight});
      tb.push_back(Term{s, w});
      QGPU_RETURN_IF_ERROR(mb.step(ta, theta + w, {Term{d[lo + i], 1}}));
      QGPU_RETURN_IF_ERROR(mb.step(tb, w - theta + 1, {Term{d[lo + i], 1}}));
      f.push_back(Term{s, unit});
    }
  }
  return c.add_mlp(in.owner + ".lane" + std::to_string(lane) + ".sum2", mb.op());
}

sdk::Status check_inputs(const MulIn& in) {
  if (in.parallel_lanes < 1 || in.parallel_lanes > kProtoLanes)
    return sdk::invalid_argument(in.owner + ": parallel_lanes " + std::to_string(in.parallel_lanes) + " outside 1.." +
                                 std::to_string(kProtoLanes));
  for (int lane = 0; lane < kProtoLanes; ++lane)
    for (const auto& [name, w] : {std::pair{"a", &in.a[lane]}, {"b", &in.b[lane]}, {"c", &in.c[lane]}})
      if (w->size() != static_cast<std::size_t>(kBits))
        return sdk::invalid_argument(in.owner + ": lane " + std::to_string(lane) + " operand " + name + " has " +
                                     std::to_string(w->size()) + " bits, the multiplier takes " +
                                     std::to_string(kBits));
  return sdk::Status::ok();
}

sdk::Expected<Word> result_word(Circuit& c, const std::string& owner, int lane) {
  const Layout& l = layout(MadAddend::kRow);  // the same split of d either way
  const std::string p = "lane" + std::to_string(lane) + ".d";
  const int lo = l.first_shared, mid = l.groups.front().second - lo;
  Word d;
  for (const auto& [name, width] : {std::pair{p + ".lo", lo}, {p + ".mid", mid}, {p + ".hi", kBits - lo - mid}}) {
    auto w = c.computed(owner, name, width);
    if (!w) return w.status();
    d.insert(d.end(), w->begin(), w->end());
  }
  return d;
}

struct EnableScope {
  Circuit& c;
  EnableScope(Circuit& circuit, Bit enable) : c(circuit) { c.push_enable(enable); }
  ~EnableScope() { c.pop_enable(); }
};

}  // namespace

sdk::Expected<MulOut> build_mul(Circuit& c, const MulIn& in) {
  QGPU_RETURN_IF_ERROR(check_inputs(in));
  const Layout& l = layout(in.addend);
  EnableScope guard(c, in.enable);
  MulOut out;
  // Lane k shares the slots of lane k - parallel_lanes (none for the first ones).
  std::array<std::optional<Word>, kProtoLanes> rows_prev, win_prev, sum_prev;
  for (int lane = 0; lane < kProtoLanes; ++lane) {
    const int chain = lane % in.parallel_lanes;
    // d in three fields, one per op writing it, so that each is live only from its writer on.
    auto d = result_word(c, in.owner, lane);
    if (!d) return d.status();
    auto rows = next_slot(c, in.owner, "rows", l.rows_width, rows_prev[chain], lane);
    if (!rows) return rows.status();
    QGPU_RETURN_IF_ERROR(build_rows(c, in, lane, *rows));
    auto win = next_slot(c, in.owner, "win", l.win_width_total, win_prev[chain], lane);
    if (!win) return win.status();
    QGPU_RETURN_IF_ERROR(build_windows(c, in, lane, rows->now, *win, *d));
    auto sum = next_slot(c, in.owner, "sum", l.sum_width, sum_prev[chain], lane);
    if (!sum) return sum.status();
    QGPU_RETURN_IF_ERROR(build_sum1(c, in, lane, win->now, *sum, *d));
    QGPU_RETURN_IF_ERROR(build_sum2(c, in, lane, sum->now, *d));
    rows_prev[chain] = rows->now;
    win_prev[chain] = win->now;
    sum_prev[chain] = sum->now;
    out.d[lane] = std::move(*d);
  }
  return out;
}

}  // namespace qgpu::simt::circuit
