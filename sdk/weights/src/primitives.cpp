#include "qgpu/weights/primitives.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace qgpu::weights {

namespace {

constexpr double kK = kGain;

// Folds terms on the constant field into a bias and merges repeated rails (dropping those
// whose weights cancel).
void normalize_terms(const Circuit& c, std::vector<Term>& terms, double& bias) {
  std::vector<Term> out;
  for (const Term& t : terms) {
    if (t.bit.field == c.one().field) {
      if (!t.bit.neg) bias += t.weight;
      continue;
    }
    if (t.weight == 0) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const Term& o) { return o.bit == t.bit; });
    if (it != out.end())
      it->weight += t.weight;
    else
      out.push_back(t);
  }
  std::erase_if(out, [](const Term& t) { return t.weight == 0; });  // rails that cancelled
  terms = std::move(out);
}

std::vector<Term> scaled(const std::vector<Term>& outs, double f) {
  std::vector<Term> r = outs;
  for (Term& t : r) t.weight *= f;
  return r;
}

Affine gate_of(const std::vector<Term>& terms, double sign, double bias) {
  Affine a;
  for (const Term& t : terms) a.terms.push_back(Term{t.bit, sign * kK * t.weight});
  a.bias = kK * bias + 0.0;  // + 0.0: a -0 bias would defeat deduplication
  return a;
}

const Affine kUpOne{{}, 1};

sdk::Expected<Word> new_word(Circuit& c, const std::string& owner, const std::string& name, int width) {
  return c.computed(owner, name, width);
}

std::vector<Term> out_bit(Bit b, double coef = 1) {
  return {Term{b, coef}};
}

}  // namespace

sdk::Status MlpBuilder::step(std::vector<Term> terms, double t, const std::vector<Term>& outs) {
  return step(std::move(terms), t, kUpOne, outs);
}

sdk::Status MlpBuilder::step(std::vector<Term> terms, double t, const Affine& up, const std::vector<Term>& outs) {
  double bias = 0;
  normalize_terms(circuit_, terms, bias);
  t -= bias;  // Σ w·b + bias ≥ t  <=>  Σ w·b ≥ t - bias
  double smax = 0, smin = 0;
  for (const Term& x : terms) (x.weight > 0 ? smax : smin) += x.weight;
  if (t > smax) return sdk::Status::ok();  // never fires
  if (t <= smin) {                         // always fires
    constant(up, outs);
    return sdk::Status::ok();
  }
  if (smax - t <= 255) {
    op_.neurons.push_back(Neuron{gate_of(terms, 1, -t + 1), up, scaled(outs, 1 / kK)});
    op_.neurons.push_back(Neuron{gate_of(terms, 1, -t), up, scaled(outs, -1 / kK)});
    return sdk::Status::ok();
  }
  if (t - smin <= 256) {
    constant(up, outs);
    op_.neurons.push_back(Neuron{gate_of(terms, -1, t), up, scaled(outs, -1 / kK)});
    op_.neurons.push_back(Neuron{gate_of(terms, -1, t - 1), up, scaled(outs, 1 / kK)});
    return sdk::Status::ok();
  }
  return sdk::unsupported("threshold step [S >= " + std::to_string(static_cast<long long>(t)) + "] over S in [" +
                          std::to_string(static_cast<long long>(smin)) + ", " +
                          std::to_string(static_cast<long long>(smax)) +
                          "] is not exact in bf16: needs max(S)-t <= 255 or t-min(S) <= 256 (over by " +
                          std::to_string(static_cast<long long>(std::min(smax - t - 255, t - smin - 256))) + ")");
}

void MlpBuilder::select(const std::vector<Bit>& match, const Affine& x, const std::vector<Term>& outs) {
  Affine g;
  for (const Bit& b : match) g.terms.push_back(Term{b, 2 * kK});
  g.bias = -kK * (2.0 * static_cast<double>(match.size()) - 1);
  op_.neurons.push_back(Neuron{g, x, scaled(outs, 1 / kK)});
}

void MlpBuilder::select_groups(const std::vector<std::vector<Bit>>& groups, const Affine& x,
                               const std::vector<Term>& outs) {
  Affine g;
  for (const std::vector<Bit>& group : groups)
    for (const Bit& b : group) g.terms.push_back(Term{b, 2 * kK});
  g.bias = -kK * (2.0 * static_cast<double>(groups.size()) - 1);
  op_.neurons.push_back(Neuron{g, x, scaled(outs, 1 / kK)});
}

void MlpBuilder::constant(const std::vector<Term>& outs) { constant(kUpOne, outs); }

void MlpBuilder::constant(const Affine& up, const std::vector<Term>& outs) {
  op_.neurons.push_back(Neuron{Affine{{}, kK}, up, scaled(outs, 1 / kK)});
}

void MlpBuilder::scale_writes(const Word& bits, double g) {
  auto listed = [&](Bit b) {
    for (const Bit& x : bits)
      if (x.field == b.field && x.bit == b.bit) return true;
    return false;
  };
  for (Neuron& n : op_.neurons)
    for (Term& t : n.down)
      if (listed(t.bit)) t.weight *= g;
}

sdk::Status MlpBuilder::commit(const std::string& name, int overwrites) {
  return circuit_.add_mlp(name, std::move(op_), overwrites);
}

std::vector<Bit> spells(const Word& w, unsigned v) {
  std::vector<Bit> m;
  for (std::size_t i = 0; i < w.size(); ++i) m.push_back(((v >> i) & 1) ? w[i] : !w[i]);
  return m;
}

sdk::Expected<Bit> threshold(Circuit& c, const std::string& owner, const std::string& name, std::vector<Term> terms,
                             double t) {
  auto w = new_word(c, owner, name, 1);
  if (!w) return w.status();
  MlpBuilder b(c);
  QGPU_RETURN_IF_ERROR(b.step(std::move(terms), t, out_bit((*w)[0])));
  QGPU_RETURN_IF_ERROR(b.commit(owner + "." + name));
  return (*w)[0];
}

sdk::Expected<Word> bitwise(Circuit& c, const std::string& owner, const std::string& name, Logic op, const Word& a,
                            const Word& b) {
  if (a.size() != b.size()) return sdk::invalid_argument(owner + "." + name + ": operand widths differ");
  auto w = new_word(c, owner, name, static_cast<int>(a.size()));
  if (!w) return w.status();
  MlpBuilder mb(c);
  for (std::size_t i = 0; i < a.size(); ++i) {
    Bit o = (*w)[i];
    switch (op) {
      case Logic::kAnd: mb.select({a[i]}, Affine{{Term{b[i], 1}}, 0}, out_bit(o)); break;
      case Logic::kOr:  // o = 1 - (¬a ∧ ¬b)
        mb.constant(out_bit(o));
        mb.select({!a[i]}, Affine{{Term{!b[i], 1}}, 0}, out_bit(o, -1));
        break;
      case Logic::kXor:
        mb.select({a[i]}, Affine{{Term{!b[i], 1}}, 0}, out_bit(o));
        mb.select({!a[i]}, Affine{{Term{b[i], 1}}, 0}, out_bit(o));
        break;
    }
  }
  QGPU_RETURN_IF_ERROR(mb.commit(owner + "." + name));
  return w;
}

sdk::Expected<Bit> and2(Circuit& c, const std::string& owner, const std::string& name, Bit a, Bit b) {
  auto w = bitwise(c, owner, name, Logic::kAnd, {a}, {b});
  if (!w) return w.status();
  return (*w)[0];
}

sdk::Expected<Bit> or2(Circuit& c, const std::string& owner, const std::string& name, Bit a, Bit b) {
  auto w = bitwise(c, owner, name, Logic::kAnd, {!a}, {!b});
  if (!w) return w.status();
  return !(*w)[0];
}

sdk::Expected<Bit> xor2(Circuit& c, const std::string& owner, const std::string& name, Bit a, Bit b) {
  auto w = bitwise(c, owner, name, Logic::kXor, {a}, {b});
  if (!w) return w.status();
  return (*w)[0];
}

sdk::Expected<Word> copy(Circuit& c, const std::string& owner, const std::string& name, const Word& x) {
  auto w = new_word(c, owner, name, static_cast<int>(x.size()));
  if (!w) return w.status();
  MlpBuilder mb(c);
  for (std::size_t i = 0; i < x.size(); ++i) mb.select({x[i]}, kUpOne, out_bit((*w)[i]));
  QGPU_RETURN_IF_ERROR(mb.commit(owner + "." + name));
  return w;
}

sdk::Expected<Word> scale_by_bit(Circuit& c, const std::string& owner, const std::string& name, Bit s, const Word& x) {
  Word sv(x.size(), s);
  return bitwise(c, owner, name, Logic::kAnd, sv, x);
}

sdk::Expected<Word> mux2(Circuit& c, const std::string& owner, const std::string& name, Bit s, const Word& x1,
                         const Word& x0) {
  return mux_onehot(c, owner, name, {!s, s}, {x0, x1});
}

sdk::Expected<Word> mux_onehot(Circuit& c, const std::string& owner, const std::string& name,
                               const std::vector<Bit>& sel, const std::vector<Word>& inputs) {
  if (sel.size() != inputs.size() || inputs.empty())
    return sdk::invalid_argument(owner + "." + name + ": needs one selector bit per input");
  std::size_t width = inputs[0].size();
  for (const Word& in : inputs)
    if (in.size() != width) return sdk::invalid_argument(owner + "." + name + ": input widths differ");
  auto w = new_word(c, owner, name, static_cast<int>(width));
  if (!w) return w.status();
  MlpBuilder mb(c);
  for (std::size_t k = 0; k < inputs.size(); ++k)
    for (std::size_t i = 0; i < width; ++i) mb.select({sel[k]}, Affine{{Term{inputs[k][i], 1}}, 0}, out_bit((*w)[i]));
  QGPU_RETURN_IF_ERROR(mb.commit(owner + "." + name));
  return w;
}

namespace {
std::vector<Bit> match_bits(const Word& sel, std::uint64_t k) {
  std::vector<Bit> m;
  for (std::size_t j = 0; j < sel.size(); ++j) m.push_back(((k >> j) & 1) ? sel[j] : !sel[j]);
  return m;
}
}  // namespace

sdk::Expected<Word> mux_binary(Circuit& c, const std::string& owner, const std::string& name, const Word& sel,
                               const std::vector<Word>& inputs) {
  if (inputs.empty() || sel.size() > 16 || (1ULL << sel.size()) < inputs.size())
    return sdk::invalid_argument(owner + "." + name + ": " + std::to_string(sel.size()) +
                                 " selector bits cannot choose among " + std::to_string(inputs.size()) + " inputs");
  std::size_t width = inputs[0].size();
  for (const Word& in : inputs)
    if (in.size() != width) return sdk::invalid_argument(owner + "." + name + ": input widths differ");
  auto w = new_word(c, owner, name, static_cast<int>(width));
  if (!w) return w.status();
  MlpBuilder mb(c);
  for (std::size_t k = 0; k < inputs.size(); ++k)
    for (std::size_t i = 0; i < width; ++i)
      mb.select(match_bits(sel, k), Affine{{Term{inputs[k][i], 1}}, 0}, out_bit((*w)[i]));
  QGPU_RETURN_IF_ERROR(mb.commit(owner + "." + name));
  return w;
}

namespace {
// T_i = Σ_{j≤i} 2^j (a_lo+j + b_lo+j) (+ cin when it is a variable bit).
std::vector<Term> prefix_terms(const Word& a, const Word& b, int lo, int i, const Bit* cin) {
  std::vector<Term> t;
  for (int j = 0; j <= i; ++j) {
    t.push_back(Term{a[lo + j], std::ldexp(1.0, j)});
    t.push_back(Term{b[lo + j], std::ldexp(1.0, j)});
  }
  if (cin) t.push_back(Term{*cin, 1});
  return t;
}

// Bit i of (T_i + plus) = [T ≥ 2^i] - [T ≥ 2^(i+1)] + [T ≥ 3·2^i], with T over bits lo..lo+i.
sdk::Status sum_bit(MlpBuilder& mb, const Word& a, const Word& b, int lo, int i, const Bit* cin, double plus, Bit out) {
  auto t = prefix_terms(a, b, lo, i, cin);
  double p = std::ldexp(1.0, i);
  QGPU_RETURN_IF_ERROR(mb.step(t, p - plus, out_bit(out, 1)));
  QGPU_RETURN_IF_ERROR(mb.step(t, 2 * p - plus, out_bit(out, -1)));
  return mb.step(t, 3 * p - plus, out_bit(out, 1));
}

struct GroupInfo {
  int lo, width;
};

std::vector<GroupInfo> groups_of(int n, int g) {
  std::vector<GroupInfo> r;
  for (int lo = 0; lo < n; lo += g) r.push_back({lo, std::min(g, n - lo)});
  return r;
}

// Carry-in constant or variable: returns the variable bit (or null) and the constant part.
void split_cin(const Circuit& c, const Bit& cin, const Bit*& var, double& plus) {
  var = nullptr;
  plus = 0;
  if (cin == c.one())
    plus = 1;
  else if (cin == c.zero())
    plus = 0;
  else
    var = &cin;
}
}  // namespace

sdk::Expected<AddResult> add(Circuit& c, const std::string& owner, const std::string& name, const Word& a,
                             const Word& b, Bit cin, int group) {
  if (a.size() != b.size() || a.empty()) return sdk::invalid_argument(owner + "." + name + ": operand widths differ");
  if (group < 1 || group > 8)
    return sdk::invalid_argument(owner + "." + name + ": digit group of " + std::to_string(group) +
                                 " bits; bf16 allows at most 8 bits per MLP");
  const int n = static_cast<int>(a.size());
  auto gs = groups_of(n, group);
  const int ng = static_cast<int>(gs.size());
  auto sum = new_word(c, owner, name, n);
  if (!sum) return sum.status();
  auto carry = new_word(c, owner, name + ".carry", 1);
  if (!carry) return carry.status();
  const Bit* cvar;
  double plus;
  Bit cin_copy = cin;
  split_cin(c, cin_copy, cvar, plus);
  Word s0, s1, gen, prop;
  if (ng > 1) {
    auto w0 = new_word(c, owner, name + ".s0", n - gs[0].width);
    auto w1 = new_word(c, owner, name + ".s1", n - gs[0].width);
    auto wg = new_word(c, owner, name + ".G", ng);
    auto wp = new_word(c, owner, name + ".P", ng);
    if (!w0 || !w1 || !wg || !wp) return sdk::invalid_argument(owner + "." + name + ": field names clash");
    s0 = *w0, s1 = *w1, gen = *wg, prop = *wp;
  }
  MlpBuilder l1(c);
  for (int m = 0; m < ng; ++m) {
    const auto [lo, gw] = gs[m];
    const Bit* cv = m == 0 ? cvar : nullptr;
    const double pl = m == 0 ? plus : 0;
    if (m == 0) {
      for (int i = 0; i < gw; ++i) QGPU_RETURN_IF_ERROR(sum_bit(l1, a, b, lo, i, cv, pl, (*sum)[lo + i]));
    } else {
      for (int i = 0; i < gw; ++i) {
        QGPU_RETURN_IF_ERROR(sum_bit(l1, a, b, lo, i, nullptr, 0, s0[lo - gs[0].width + i]));
        QGPU_RETURN_IF_ERROR(sum_bit(l1, a, b, lo, i, nullptr, 1, s1[lo - gs[0].width + i]));
      }
    }
    auto t = prefix_terms(a, b, lo, gw - 1, cv);
    double top = std::ldexp(1.0, gw);
    if (ng == 1) {
      QGPU_RETURN_IF_ERROR(l1.step(t, top - pl, out_bit((*carry)[0])));
    } else {
      QGPU_RETURN_IF_ERROR(l1.step(t, top - pl, out_bit(gen[m])));
      QGPU_RETURN_IF_ERROR(l1.step(t, top - 1 - pl, out_bit(prop[m])));
    }
  }
  QGPU_RETURN_IF_ERROR(l1.commit(owner + "." + name + ".digits"));
  if (ng > 1) {
    MlpBuilder l2(c);
    auto e_terms = [&](int m, double sign) {
      std::vector<Term> e;
      for (int l = 0; l < m; ++l) {
        e.push_back(Term{gen[l], sign * std::ldexp(1.0, l)});
        e.push_back(Term{prop[l], sign * std::ldexp(1.0, l)});
      }
      return e;
    };
    for (int m = 1; m < ng; ++m) {
      const auto [lo, gw] = gs[m];
      double pm = std::ldexp(1.0, m);
      for (int i = 0; i < gw; ++i) {
        int k = lo - gs[0].width + i;
        auto t1 = e_terms(m, -1);  // s0 ∧ ¬C
        t1.push_back(Term{s0[k], 2 * pm});
        QGPU_RETURN_IF_ERROR(l2.step(t1, pm + 1, out_bit((*sum)[lo + i])));
        auto t2 = e_terms(m, 1);  // s1 ∧ C
        t2.push_back(Term{s1[k], 2 * pm});
        QGPU_RETURN_IF_ERROR(l2.step(t2, 3 * pm, out_bit((*sum)[lo + i])));
      }
    }
    QGPU_RETURN_IF_ERROR(l2.step(e_terms(ng, 1), std::ldexp(1.0, ng), out_bit((*carry)[0])));
    QGPU_RETURN_IF_ERROR(l2.commit(owner + "." + name + ".select"));
  }
  return AddResult{*sum, (*carry)[0]};
}

sdk::Expected<AddResult> sub(Circuit& c, const std::string& owner, const std::string& name, const Word& a,
                             const Word& b, int group) {
  return add(c, owner, name, a, ~b, c.one(), group);
}

sdk::Expected<Bit> equal(Circuit& c, const std::string& owner, const std::string& name, const Word& a, const Word& b) {
  if (a.size() != b.size() || a.empty()) return sdk::invalid_argument(owner + "." + name + ": operand widths differ");
  const int n = static_cast<int>(a.size());
  auto gs = groups_of(n, 8);
  auto out = new_word(c, owner, name, 1);
  if (!out) return out.status();
  Word eg;
  if (gs.size() > 1) {
    auto w = new_word(c, owner, name + ".groups", static_cast<int>(gs.size()));
    if (!w) return w.status();
    eg = *w;
  }
  MlpBuilder l1(c);
  for (std::size_t m = 0; m < gs.size(); ++m) {
    std::vector<Term> d;
    for (int j = 0; j < gs[m].width; ++j) {
      d.push_back(Term{a[gs[m].lo + j], std::ldexp(1.0, j)});
      d.push_back(Term{b[gs[m].lo + j], -std::ldexp(1.0, j)});
    }
    Bit o = gs.size() > 1 ? eg[m] : (*out)[0];
    QGPU_RETURN_IF_ERROR(l1.step(d, 0, out_bit(o, 1)));
    QGPU_RETURN_IF_ERROR(l1.step(d, 1, out_bit(o, -1)));
  }
  QGPU_RETURN_IF_ERROR(l1.commit(owner + "." + name + ".groups"));
  if (gs.size() > 1) {
    MlpBuilder l2(c);
    std::vector<Term> t;
    for (Bit e : eg) t.push_back(Term{e, 1});
    QGPU_RETURN_IF_ERROR(l2.step(t, static_cast<double>(gs.size()), out_bit((*out)[0])));
    QGPU_RETURN_IF_ERROR(l2.commit(owner + "." + name + ".all"));
  }
  return (*out)[0];
}

sdk::Expected<Bit> less_than(Circuit& c, const std::string& owner, const std::string& name, const Word& a,
                             const Word& b, bool is_signed) {
  if (a.size() != b.size() || a.empty()) return sdk::invalid_argument(owner + "." + name + ": operand widths differ");
  Word x = a, y = ~b;  // a + ¬b + 1: carry out is 1 iff a >= b
  if (is_signed) {
    x.back() = !x.back();
    y.back() = !y.back();
  }
  const int n = static_cast<int>(a.size());
  auto gs = groups_of(n, 8);
  const int ng = static_cast<int>(gs.size());
  auto out = new_word(c, owner, name, 1);
  if (!out) return out.status();
  Word gen, prop;
  if (ng > 1) {
    auto wg = new_word(c, owner, name + ".G", ng);
    auto wp = new_word(c, owner, name + ".P", ng);
    if (!wg || !wp) return sdk::invalid_argument(owner + "." + name + ": field names clash");
    gen = *wg, prop = *wp;
  }
  MlpBuilder l1(c);
  for (int m = 0; m < ng; ++m) {
    auto t = prefix_terms(x, y, gs[m].lo, gs[m].width - 1, nullptr);
    double pl = m == 0 ? 1 : 0;
    double top = std::ldexp(1.0, gs[m].width);
    if (ng == 1) {  // out = ¬[T + 1 ≥ 2^w]
      for (Term& term : t) term.weight = -term.weight;
      QGPU_RETURN_IF_ERROR(l1.step(t, -(top - 1 - pl), out_bit((*out)[0])));
    } else {
      QGPU_RETURN_IF_ERROR(l1.step(t, top - pl, out_bit(gen[m])));
      QGPU_RETURN_IF_ERROR(l1.step(t, top - 1 - pl, out_bit(prop[m])));
    }
  }
  QGPU_RETURN_IF_ERROR(l1.commit(owner + "." + name + ".digits"));
  if (ng > 1) {
    MlpBuilder l2(c);
    std::vector<Term> e;
    for (int l = 0; l < ng; ++l) {
      e.push_back(Term{gen[l], -std::ldexp(1.0, l)});
      e.push_back(Term{prop[l], -std::ldexp(1.0, l)});
    }
    QGPU_RETURN_IF_ERROR(l2.step(e, -(std::ldexp(1.0, ng) - 1), out_bit((*out)[0])));
    QGPU_RETURN_IF_ERROR(l2.commit(owner + "." + name + ".carry"));
  }
  return (*out)[0];
}

sdk::Expected<Word> shift(Circuit& c, const std::string& owner, const std::string& name, const Word& x,
                          const Word& amount, Shift kind) {
  if (x.empty() || amount.empty() || amount.size() > 16)
    return sdk::invalid_argument(owner + "." + name + ": bad shift operand widths");
  const int n = static_cast<int>(x.size());
  Word cur = x;
  const int na = static_cast<int>(amount.size());
  for (int p = 0; p < na; p += 3) {
    int nb = std::min(3, na - p);
    bool last = p + nb >= na;
    auto w = new_word(c, owner, last ? name : name + ".stage" + std::to_string(p), n);
    if (!w) return w.status();
    Word digit(amount.begin() + p, amount.begin() + p + nb);
    MlpBuilder mb(c);
    for (int i = 0; i < n; ++i) {
      for (int k = 0; k < (1 << nb); ++k) {
        long long dist = static_cast<long long>(k) << p;
        long long src = kind == Shift::kLeft ? i - dist : i + dist;
        Bit in;
        if (src >= 0 && src < n)
          in = cur[src];
        else if (kind == Shift::kRightArithmetic)
          in = cur[n - 1];
        else
          continue;  // shifted-in zero: no neuron
        mb.select(match_bits(digit, k), Affine{{Term{in, 1}}, 0}, out_bit((*w)[i]));
      }
    }
    QGPU_RETURN_IF_ERROR(mb.commit(owner + "." + (last ? name : name + ".stage" + std::to_string(p))));
    cur = *w;
  }
  return cur;
}

sdk::Expected<Word> clear(Circuit& c, const std::string& name, const Word& field) {
  MlpBuilder mb(c);
  auto w = c.alias(field, name);
  if (!w) return w.status();
  for (std::size_t i = 0; i < field.size(); ++i) mb.select({field[i]}, kUpOne, out_bit((*w)[i], -1));
  QGPU_RETURN_IF_ERROR(mb.commit(c.fields()[w->front().field].full_name(), field.front().field));
  return w;
}

sdk::Expected<Word> overwrite(Circuit& c, const std::string& name, const Word& field, const Word& value) {
  if (field.size() != value.size()) return sdk::invalid_argument("overwrite " + name + ": widths differ");
  auto w = c.alias(field, name);
  if (!w) return w.status();
  MlpBuilder mb(c);
  for (std::size_t i = 0; i < field.size(); ++i) {
    mb.select({value[i]}, kUpOne, out_bit((*w)[i], 1));
    mb.select({field[i]}, kUpOne, out_bit((*w)[i], -1));
  }
  QGPU_RETURN_IF_ERROR(mb.commit(c.fields()[w->front().field].full_name(), field.front().field));
  return w;
}

}  // namespace qgpu::weights

namespace qgpu::weights {

sdk::Expected<Word> lookup(Circuit& c, const std::string& owner, const std::string& name, const Word& in, int out_width,
                           const std::vector<Cube>& cubes) {
  const std::string what = owner + "." + name;
  if (in.empty() || in.size() > 32)
    return sdk::invalid_argument(what + ": a table takes 1 to 32 input bits, got " + std::to_string(in.size()));
  if (out_width < 1 || out_width > 64)
    return sdk::invalid_argument(what + ": a table gives 1 to 64 output bits, got " + std::to_string(out_width));
  const std::uint64_t in_mask = (in.size() == 64) ? ~0ULL : ((1ULL << in.size()) - 1);
  const std::uint64_t out_mask = (out_width == 64) ? ~0ULL : ((1ULL << out_width) - 1);
  std::vector<const Cube*> live;
  for (const Cube& k : cubes) {
    if ((k.care & ~in_mask) != 0 || (k.value & ~k.care) != 0)
      return sdk::invalid_argument(what + ": cube value " + std::to_string(k.value) + " / care " +
                                   std::to_string(k.care) + " names bits outside the " + std::to_string(in.size()) +
                                   "-bit input or outside its care mask");
    if ((k.out & ~out_mask) != 0)
      return sdk::invalid_argument(what + ": cube output " + std::to_string(k.out) + " does not fit " +
                                   std::to_string(out_width) + " bits");
    if (k.out != 0) live.push_back(&k);
  }
  // Two cubes overlap when they agree on every bit both care about.
  for (std::size_t i = 0; i < live.size(); ++i)
    for (std::size_t j = i + 1; j < live.size(); ++j)
      if (((live[i]->value ^ live[j]->value) & live[i]->care & live[j]->care) == 0)
        return sdk::invalid_argument(what + ": cubes " + std::to_string(live[i]->value) + "/" +
                                     std::to_string(live[i]->care) + " and " + std::to_string(live[j]->value) + "/" +
                                     std::to_string(live[j]->care) + " overlap");
  auto w = new_word(c, owner, name, out_width);
  if (!w) return w.status();
  MlpBuilder mb(c);
  for (const Cube* k : live) {
    std::vector<Bit> match;
    for (std::size_t i = 0; i < in.size(); ++i)
      if ((k->care >> i) & 1) match.push_back(((k->value >> i) & 1) ? in[i] : !in[i]);
    std::vector<Term> outs;
    for (int b = 0; b < out_width; ++b)
      if ((k->out >> b) & 1) outs.push_back(Term{(*w)[b], 1});
    if (match.empty())
      mb.constant(outs);
    else
      mb.select(match, kUpOne, outs);
  }
  QGPU_RETURN_IF_ERROR(mb.commit(what));
  // Disjoint cubes: at most one selector fires, so outputs of single-bit cubes are one-hot.
  if (std::all_of(live.begin(), live.end(), [](const Cube* k) { return std::popcount(k->out) <= 1; }))
    QGPU_RETURN_IF_ERROR(c.declare_one_hot(*w));
  return w;
}

sdk::Expected<Word> lookup(Circuit& c, const std::string& owner, const std::string& name, const Word& in, int out_width,
                           const std::function<std::uint64_t(std::uint64_t)>& f) {
  if (in.empty() || in.size() > 16)
    return sdk::invalid_argument(owner + "." + name + ": a full table takes 1 to 16 input bits, got " +
                                 std::to_string(in.size()));
  std::vector<Cube> cubes;
  const std::uint64_t all = (1ULL << in.size()) - 1;
  for (std::uint64_t x = 0; x <= all; ++x)
    if (std::uint64_t y = f(x); y != 0) cubes.push_back(Cube{x, all, y});
  return lookup(c, owner, name, in, out_width, cubes);
}

}  // namespace qgpu::weights
