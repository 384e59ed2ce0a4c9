#include "shuffle.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "names.h"
#include "qgpu/weights/numerics.h"

namespace qgpu::simt::circuit {
namespace {

using weights::MlpOp;
using weights::Neuron;

constexpr double kK = weights::kGain;
constexpr int kWidth = 32;
constexpr int kLowBits = 3;  // b[2:0]: every in-range source is decided by them (and b >= 8)

// The four shuffles, in the order of the cube tables' op masks.
constexpr std::array<Op, 4> kShuffles = {Op::kShflIdx, Op::kShflUp, Op::kShflDown, Op::kShflBfly};
constexpr unsigned kIdxMask = 1u;         // shfl.idx: its source ignores b >= 8
constexpr unsigned kRangedMask = 0b1110;  // up, down, bfly: in range only when b < 8

// A point of the source table of one lane: shuffle s, width code, b[2:0], b >= 8.
struct Point {
  int shuffle = 0;
  int code = 0;
  int low = 0;
  bool high = false;
};

struct Source {
  int lane = 0;
  bool in_range = true;
};

// interp.cpp's rule for lane `lane` (an int64 there: no wrap for any b).
Source source(int lane, const Point& p, int machine_lanes) {
  const std::int64_t width = std::int64_t{1} << p.code, l = lane;
  const std::int64_t b = p.low + (p.high ? (std::int64_t{1} << kLowBits) : 0);
  const std::int64_t first = l & ~(width - 1), last = l | (width - 1);
  std::int64_t j = l;
  bool ok = true;
  switch (kShuffles[static_cast<std::size_t>(p.shuffle)]) {
    case Op::kShflIdx: j = first | (b & (width - 1)); break;
    case Op::kShflUp:
      j = l - b;
      ok = j >= first;
      break;
    case Op::kShflDown:
      j = l + b;
      ok = j <= last;
      break;
    default:
      j = l ^ b;
      ok = j <= last;
      break;
  }
  if (!ok || j >= machine_lanes) j = l;
  return {static_cast<int>(j), ok};
}

// A cube over the table: a set of shuffles (one-hot opcode bits, so "one of
// them" is one selector condition), literals on flags[1], flags[2], b[0..2]
// (-1: don't care) and optionally b[31:3] == 0.
struct Cube {
  unsigned shuffles = 0;
  std::array<int, 5> lit{-1, -1, -1, -1, -1};
  bool low_only = false;

  bool contains(const Point& p) const {
    if (!((shuffles >> p.shuffle) & 1)) return false;
    const int vars[5] = {p.code & 1, (p.code >> 1) & 1, p.low & 1, (p.low >> 1) & 1, (p.low >> 2) & 1};
    for (int v = 0; v < 5; ++v)
      if (lit[v] >= 0 && lit[v] != vars[v]) return false;
    return !(low_only && p.high);
  }
  int size() const {
    int n = std::popcount(shuffles) * (low_only ? 1 : 2);
    for (int v : lit) n *= v < 0 ? 2 : 1;
    return n;
  }
  int literals() const {
    int n = low_only ? kWidth - kLowBits : 0;
    for (int v : lit) n += v < 0 ? 0 : 1;
    return n;
  }
};

std::vector<Point> all_points() {
  std::vector<Point> pts;
  for (int s = 0; s < 4; ++s)
    for (int code = 0; code < 4; ++code)
      for (int low = 0; low < 8; ++low)
        for (bool high : {false, true}) pts.push_back({s, code, low, high});
  return pts;
}

// Candidate cubes, largest first: shfl.idx alone with b >= 8 free (its source
// ignores it), any set of the other three with b[31:3] == 0.
std::vector<Cube> candidates() {
  std::vector<Cube> v;
  for (unsigned mask = 1; mask < 16; ++mask) {
    if (mask != kIdxMask && (mask & kIdxMask)) continue;
    for (int code = 0; code < 243; ++code) {  // 3^5 literal patterns
      Cube c;
      c.shuffles = mask;
      c.low_only = mask != kIdxMask;
      for (int v = 0, x = code; v < 5; ++v, x /= 3) c.lit[v] = x % 3 - 1;
      v.push_back(c);
    }
  }
  std::stable_sort(v.begin(), v.end(), [](const Cube& x, const Cube& y) {
    return x.size() != y.size() ? x.size() > y.size() : x.literals() < y.literals();
  });
  return v;
}

// A disjoint cover of the points where `in_set` holds, greedily largest cube first.
sdk::Expected<std::vector<Cube>> cover(const std::function<bool(const Point&)>& in_set, const std::string& what) {
  static const std::vector<Point> kPoints = all_points();
  static const std::vector<Cube> kCandidates = candidates();
  std::vector<bool> covered(kPoints.size(), false);
  std::vector<Cube> chosen;
  for (const Cube& c : kCandidates) {
    bool fits = true;
    for (std::size_t p = 0; p < kPoints.size() && fits; ++p)
      if (c.contains(kPoints[p])) fits = in_set(kPoints[p]) && !covered[p];
    if (!fits) continue;
    chosen.push_back(c);
    for (std::size_t p = 0; p < kPoints.size(); ++p)
      if (c.contains(kPoints[p])) covered[p] = true;
  }
  for (std::size_t p = 0; p < kPoints.size(); ++p)
    if (in_set(kPoints[p]) && !covered[p])
      return sdk::internal_error("shuffle: " + what + " is not a union of cubes over b[2:0] and b[31:3] == 0");
  return chosen;
}

// silu(K(2·Σ conds − 2n + 1))·up: exactly K·up when every condition holds, 0
// otherwise; a condition is a group of bits of which at most one is 1.
Neuron selector(const std::vector<std::vector<Bit>>& conds, Affine up, const std::vector<Term>& outs) {
  Neuron n;
  for (const auto& cond : conds)
    for (const Bit& b : cond) n.gate.terms.push_back(Term{b, 2 * kK});
  n.gate.bias = -kK * (2.0 * static_cast<double>(conds.size()) - 1) + 0.0;
  n.up = std::move(up);
  for (const Term& t : outs) n.down.push_back(Term{t.bit, t.weight / kK});
  return n;
}

// The selector conditions of a cube for lane operand b.
std::vector<std::vector<Bit>> conditions(const Cube& c, const Word& opcode, const Word& flags, const Word& b) {
  std::vector<std::vector<Bit>> conds;
  std::vector<Bit> ops;
  for (int s = 0; s < 4; ++s)
    if ((c.shuffles >> s) & 1) ops.push_back(opcode[static_cast<std::size_t>(kShuffles[static_cast<std::size_t>(s)])]);
  conds.push_back(ops);
  const Bit vars[5] = {flags[1], flags[2], b[0], b[1], b[2]};
  for (int v = 0; v < 5; ++v)
    if (c.lit[v] >= 0) conds.push_back({c.lit[v] ? vars[v] : !vars[v]});
  if (c.low_only)
    for (int i = kLowBits; i < kWidth; ++i) conds.push_back({!b[i]});
  return conds;
}

sdk::Status check_width(const Word& w, std::size_t want, const std::string& what) {
  if (w.size() == want) return sdk::Status::ok();
  return sdk::invalid_argument("shuffle: " + what + " has " + std::to_string(w.size()) + " bits, needs " +
                               std::to_string(want));
}

}  // namespace

sdk::Expected<ShuffleOut> build_shuffle(Circuit& c, const ShuffleIn& in) {
  QGPU_RETURN_IF_ERROR(check_width(in.opcode, kOpCount, "opcode"));
  QGPU_RETURN_IF_ERROR(check_width(in.flags, 6, "flags"));
  QGPU_RETURN_IF_ERROR(check_width(in.lanes, kProtoLanes, "lanes"));
  for (int l = 0; l < kProtoLanes; ++l) {
    QGPU_RETURN_IF_ERROR(check_width(in.a[l], kWidth, "lane " + std::to_string(l) + " operand a"));
    QGPU_RETURN_IF_ERROR(check_width(in.b[l], kWidth, "lane " + std::to_string(l) + " operand b"));
    for (std::size_t k = 0; k < in.also_add[l].size(); ++k)
      QGPU_RETURN_IF_ERROR(
          check_width(in.also_add[l][k], kWidth, "lane " + std::to_string(l) + " also_add word " + std::to_string(k)));
  }
  if (in.machine_lanes < 1 || in.machine_lanes > kProtoLanes)
    return sdk::invalid_argument("shuffle: machine_lanes " + std::to_string(in.machine_lanes) + " is outside 1.." +
                                 std::to_string(kProtoLanes));

  const Bit pred = in.flags[3];
  std::vector<Bit> shuffle_ops;
  for (Op s : kShuffles) shuffle_ops.push_back(in.opcode[static_cast<std::size_t>(s)]);
  const Bit ballot = in.opcode[static_cast<std::size_t>(Op::kBallot)];

  // The cubes of "lane L reads lane j" (j != L) and of "lane L's source is in range".
  std::array<std::array<std::vector<Cube>, kProtoLanes>, kProtoLanes> reads;
  std::array<std::vector<Cube>, kProtoLanes> in_range;
  for (int l = 0; l < kProtoLanes; ++l) {
    for (int j = 0; j < kProtoLanes; ++j) {
      if (j == l) continue;
      auto r = cover([&](const Point& p) { return source(l, p, in.machine_lanes).lane == j; },
                     "lane " + std::to_string(l) + " reading lane " + std::to_string(j));
      if (!r) return r.status();
      reads[l][j] = std::move(*r);
    }
    auto r = cover([&](const Point& p) { return source(l, p, in.machine_lanes).in_range; },
                   "lane " + std::to_string(l) + " in range");
    if (!r) return r.status();
    in_range[l] = std::move(*r);
  }

  ShuffleOut out;
  for (int l = 0; l < kProtoLanes; ++l) {
    auto d = c.computed(in.owner, "lane" + std::to_string(l) + ".d", kWidth);
    if (!d) return d.status();
    out.d[l] = std::move(*d);
  }

  c.push_enable(in.enable);
  // The base conditions of lane L's value path: active, a shuffle, no predicate flag.
  auto value_path = [&](int l) { return std::vector<std::vector<Bit>>{{in.lanes[l]}, shuffle_ops, {!pred}}; };
  // MLP 1 (unless single_layer): src_Lj = [lane L active ∧ value shuffle ∧ L reads j].
  std::array<std::array<Bit, kProtoLanes>, kProtoLanes> src{};
  if (!in.single_layer) {
    auto s = c.computed(in.owner, "src", kProtoLanes * (kProtoLanes - 1));
    if (!s) {
      c.pop_enable();
      return s.status();
    }
    MlpOp op;
    int k = 0;
    for (int l = 0; l < kProtoLanes; ++l)
      for (int j = 0; j < kProtoLanes; ++j) {
        if (j == l) continue;
        src[l][j] = (*s)[static_cast<std::size_t>(k++)];
        for (const Cube& cube : reads[l][j]) {
          auto conds = conditions(cube, in.opcode, in.flags, in.b[l]);
          conds.push_back({in.lanes[l]});
          conds.push_back({!pred});
          op.neurons.push_back(selector(conds, Affine{{}, 1}, {Term{src[l][j], 1}}));
        }
      }
    if (auto st = c.add_mlp(in.owner + ".src", std::move(op)); !st.is_ok()) {
      c.pop_enable();
      return st;
    }
  }

  // MLP 2: every bit of d.
  MlpOp op;
  for (int l = 0; l < kProtoLanes; ++l) {
    const Word& d = out.d[l];
    for (int i = 0; i < kWidth; ++i) {
      // Own value; every other source adds a_j − a_L (disjoint cubes: at most one fires).
      op.neurons.push_back(selector(value_path(l), Affine{{Term{in.a[l][i], 1}}, 0}, {Term{d[i], 1}}));
      for (int j = 0; j < kProtoLanes; ++j) {
        if (j == l) continue;
        const Affine diff{{Term{in.a[j][i], 1}, Term{in.a[l][i], -1}}, 0};
        if (!in.single_layer) {
          op.neurons.push_back(selector({{src[l][j]}}, diff, {Term{d[i], 1}}));
          continue;
        }
        for (const Cube& cube : reads[l][j]) {
          auto conds = conditions(cube, in.opcode, in.flags, in.b[l]);
          for (auto& base : value_path(l)) conds.push_back(base);
          op.neurons.push_back(selector(conds, diff, {Term{d[i], 1}}));
        }
      }
    }
    // Predicate: 1 in bit 0 where the source is in range.
    for (const Cube& cube : in_range[l]) {
      auto conds = conditions(cube, in.opcode, in.flags, in.b[l]);
      conds.push_back({in.lanes[l]});
      conds.push_back({pred});
      op.neurons.push_back(selector(conds, Affine{{}, 1}, {Term{d[0], 1}}));
    }
    // Results of other units: exclusive with this one, so a plain sum.
    for (const Word& w : in.also_add[l])
      for (int i = 0; i < kWidth; ++i) op.neurons.push_back(selector({{w[i]}}, Affine{{}, 1}, {Term{d[i], 1}}));
    // Ballot bit m: [Σ a_m + 64·(ballot + active_L + active_m) >= 193], direct form
    // silu(K(S − 192)) − silu(K(S − 193)); S − 193 <= 31 keeps it exact in bf16.
    for (int m = 0; m < kProtoLanes; ++m) {
      Affine s;
      for (int i = 0; i < kWidth; ++i) s.terms.push_back(Term{in.a[m][i], kK});
      s.terms.push_back(Term{ballot, 64 * kK});
      s.terms.push_back(Term{in.lanes[l], (m == l ? 128 : 64) * kK});
      if (m != l) s.terms.push_back(Term{in.lanes[m], 64 * kK});
      Neuron on{s, Affine{{}, 1}, {Term{d[m], 1 / kK}}}, off{s, Affine{{}, 1}, {Term{d[m], -1 / kK}}};
      on.gate.bias = -192 * kK;
      off.gate.bias = -193 * kK;
      op.neurons.push_back(std::move(on));
      op.neurons.push_back(std::move(off));
    }
  }
  auto st = c.add_mlp(in.owner + ".d", std::move(op));
  c.pop_enable();
  if (!st.is_ok()) return st;
  return out;
}

}  // namespace qgpu::simt::circuit
