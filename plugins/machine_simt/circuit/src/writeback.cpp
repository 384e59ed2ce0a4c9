// The write-back unit (writeback.h): the WREG plan, the WMEM plan and the successor that sequences
// their records. Kept in one file over 700 lines: the three share the slot order, the lane classes,
// the DATA-chunk tables and the equality steps below, are assembled together by build_machine and
// tested together (circuit_writeback_test).
#include "writeback.h"

#include <algorithm>
#include <bit>
#include <string>

#include "names.h"
#include "qgpu/weights/primitives.h"

namespace qgpu::simt::circuit {
namespace {

using weights::Cube;

constexpr const char* kOwner = "wb";

std::string slot_name(int s) {
  return "s" + std::to_string(s);
}

Affine bit_of(Bit b) {
  return Affine{{Term{b, 1}}, 0};
}
const Affine kOne{{}, 1};

std::vector<Term> out(Bit b) {
  return {Term{b, 1}};
}

// A representative value of each class for the split oracle.
constexpr std::uint32_t kClassValue[4] = {0, 1, 300, 0x12345678};

// Lane class inputs of the split table: (zero, int8, int16) per class.
constexpr std::uint32_t kClassBits[4] = {0b111, 0b110, 0b100, 0b000};

// 8-bit (or narrower) equality a == b into `eq`: D = Σ 2^j (a_j − b_j),
// [D ≥ 0] − [D ≥ 1]; |D| ≤ 255 keeps both steps inside the bf16 range.
sdk::Status equal_into(MlpBuilder& mb, const Word& a, const Word& b, Bit eq) {
  std::vector<Term> d;
  for (std::size_t j = 0; j < a.size(); ++j) {
    d.push_back(Term{a[j], static_cast<double>(1u << j)});
    d.push_back(Term{b[j], -static_cast<double>(1u << j)});
  }
  QGPU_RETURN_IF_ERROR(mb.step(d, 0, {Term{eq, 1}}));
  return mb.step(d, 1, {Term{eq, -1}});
}

// Ranks of the emitting slots under the pairwise order bits; false when the
// bits contradict each other (impossible for distinct destinations).
bool order_of(std::uint64_t x, std::array<int, kWbSlots>& order, int& count) {
  auto lt = [&](int s, int t) {  // d_s < d_t
    static const int kPair[4][4] = {{-1, 0, 1, 2}, {0, -1, 3, 4}, {1, 3, -1, 5}, {2, 4, 5, -1}};
    const bool bit = (x >> kPair[s][t]) & 1;
    return s < t ? bit : !bit;
  };
  count = 0;
  std::array<int, kWbSlots> rank{};
  std::array<bool, kWbSlots> seen{};
  for (int s = 0; s < kWbSlots; ++s) {
    if (!((x >> (6 + s)) & 1)) continue;
    ++count;
    for (int t = 0; t < kWbSlots; ++t)
      if (t != s && ((x >> (6 + t)) & 1) && lt(t, s)) ++rank[s];
  }
  for (int s = 0; s < kWbSlots; ++s) {
    if (!((x >> (6 + s)) & 1)) continue;
    if (rank[s] >= count || seen[rank[s]]) return false;
    seen[rank[s]] = true;
    order[rank[s]] = s;
  }
  return true;
}

// Adds `x`·[match] to each bit of a header (valid := 1).
void header_select(MlpBuilder& mb, const std::vector<Bit>& match, const WregHeader& to, const Word& reg,
                   const Word& lanes, const Word& format) {
  mb.select(match, kOne, out(to.valid));
  for (int j = 0; j < 4; ++j) mb.select(match, bit_of(reg[j]), out(to.reg[j]));
  for (int j = 0; j < 4; ++j) mb.select(match, bit_of(lanes[j]), out(to.lanes[j]));
  for (int j = 0; j < 2; ++j) mb.select(match, bit_of(format[j]), out(to.format[j]));
}

sdk::Expected<WregHeader> new_header(Circuit& c, const std::string& name) {
  WregHeader h;
  auto v = c.computed(kOwner, name + ".valid", 1);
  if (!v) return v.status();
  h.valid = (*v)[0];
  auto r = c.computed(kOwner, name + ".reg", 4);
  if (!r) return r.status();
  h.reg = *r;
  auto l = c.computed(kOwner, name + ".lanes", 4);
  if (!l) return l.status();
  h.lanes = *l;
  auto f = c.computed(kOwner, name + ".format", 2);
  if (!f) return f.status();
  h.format = *f;
  return h;
}

// (zero, int8, int16) of a 32-bit value: the inputs of the split tables.
sdk::Expected<std::array<Bit, 3>> lane_class(Circuit& c, const std::string& name, const Word& v) {
  std::vector<Term> all_neg;
  for (Bit b : v) all_neg.push_back(Term{b, -1});
  auto zero = weights::threshold(c, kOwner, name + ".zero", all_neg, 0);
  if (!zero) return zero.status();
  std::array<Bit, 3> cls{*zero};
  for (int k = 0; k < 2; ++k) {  // int8: bits 7..31 equal; int16: bits 15..31 equal
    const int lo = k == 0 ? 7 : 15;
    auto f = c.computed(kOwner, name + (k == 0 ? ".int8" : ".int16"), 1);
    if (!f) return f.status();
    std::vector<Term> pos, neg;
    for (int j = lo; j < 32; ++j) {
      pos.push_back(Term{v[j], 1});
      neg.push_back(Term{v[j], -1});
    }
    MlpBuilder mb(c);
    QGPU_RETURN_IF_ERROR(mb.step(pos, 32 - lo, out((*f)[0])));
    QGPU_RETURN_IF_ERROR(mb.step(neg, 0, out((*f)[0])));
    QGPU_RETURN_IF_ERROR(mb.commit(std::string(kOwner) + "." + name + ".fits" + std::to_string(k)));
    cls[1 + k] = (*f)[0];
  }
  return cls;
}

}  // namespace

std::vector<std::pair<std::uint32_t, ValueFormat>> wreg_split(std::uint32_t emit, const std::array<int, 4>& cls) {
  std::array<std::uint32_t, 4> values{};
  for (int l = 0; l < 4; ++l) values[l] = kClassValue[cls[l] & 3];
  std::vector<std::pair<std::uint32_t, ValueFormat>> out;
  for (const Record& r : wreg_records(0, 1, emit, values)) out.emplace_back(r.lanes, r.format);
  return out;
}

sdk::Expected<WregPlan> build_wreg_plan(Circuit& c, const WregPlanIn& in) {
  WregPlan plan;
  plan.slot = in.slot;
  for (const SlotWrite& s : in.slot) {
    if (s.dest.size() != 4 || s.emit.size() != 4) return sdk::invalid_argument("wreg plan: dest and emit are 4 bits");
    for (const Word& v : s.value)
      if (v.size() != 32) return sdk::invalid_argument("wreg plan: lane values are 32 bits");
  }
  c.push_enable(in.enable);
  // Layer 1: lane classes, slot order bits, emitting bits.
  std::array<Word, kWbSlots> split_in;
  Word order_in;
  for (int s = 0; s < kWbSlots; ++s) {
    const SlotWrite& sw = in.slot[s];
    split_in[s] = sw.emit;
    for (int l = 0; l < kProtoLanes; ++l) {
      const std::string name = slot_name(s) + ".lane" + std::to_string(l);
      auto k = lane_class(c, name, sw.value[l]);
      if (!k) return k.status();
      for (Bit b : *k) split_in[s].push_back(b);
    }
  }
  for (int s = 0; s < kWbSlots; ++s)
    for (int t = s + 1; t < kWbSlots; ++t) {  // d_s < d_t: [Σ 2^j (d_t,j − d_s,j) ≥ 1]
      std::vector<Term> d;
      for (int j = 0; j < 4; ++j) {
        d.push_back(Term{in.slot[t].dest[j], static_cast<double>(1 << j)});
        d.push_back(Term{in.slot[s].dest[j], -static_cast<double>(1 << j)});
      }
      auto lt = weights::threshold(c, kOwner, "lt" + std::to_string(s) + std::to_string(t), d, 1);
      if (!lt) return lt.status();
      order_in.push_back(*lt);
    }
  for (int s = 0; s < kWbSlots; ++s) {
    std::vector<Term> e;
    for (Bit b : in.slot[s].emit) e.push_back(Term{b, 1});
    auto nz = weights::threshold(c, kOwner, slot_name(s) + ".emits", e, 1);
    if (!nz) return nz.status();
    order_in.push_back(*nz);
  }

  // Layer 2: the split of each slot (one cube per emit mask and class of each emitted lane).
  std::vector<Cube> split_cubes;
  for (std::uint32_t emit = 1; emit < 16; ++emit) {
    const int n = std::popcount(emit);
    for (std::uint32_t assign = 0; assign < (1u << (2 * n)); ++assign) {
      std::array<int, 4> cls{};
      Cube k{emit, 0xf, 0};
      int used = 0;
      for (int l = 0; l < 4; ++l) {
        if (!((emit >> l) & 1)) continue;
        cls[l] = static_cast<int>((assign >> (2 * used++)) & 3);
        k.care |= 0x7ull << (4 + 3 * l);
        k.value |= static_cast<std::uint64_t>(kClassBits[cls[l]]) << (4 + 3 * l);
      }
      auto recs = wreg_split(emit, cls);
      if (recs.size() > kWbRecords) return sdk::internal_error("wreg plan: more records than the plan holds");
      for (std::size_t r = 0; r < recs.size(); ++r)
        k.out |=
            (static_cast<std::uint64_t>(recs[r].first) | static_cast<std::uint64_t>(recs[r].second) << 4 | 1ull << 6)
            << (7 * r);
      split_cubes.push_back(k);
    }
  }
  for (int s = 0; s < kWbSlots; ++s) {
    auto t = weights::lookup(c, kOwner, slot_name(s) + ".split", split_in[s], 7 * kWbRecords, split_cubes);
    if (!t) return t.status();
    for (int r = 0; r < kWbRecords; ++r) {
      plan.rec_lanes[s][r] = slice(*t, 7 * r, 4);
      plan.rec_format[s][r] = slice(*t, 7 * r + 4, 2);
      plan.rec_valid[s][r] = (*t)[7 * r + 6];
    }
  }
  auto order = weights::lookup(c, kOwner, "order", order_in, 3 + 3 * kWbSlots, [](std::uint64_t x) {
    std::array<int, kWbSlots> ord{};
    int count = 0;
    if (!order_of(x, ord, count) || count == 0) return std::uint64_t{0};
    std::uint64_t y = 1 | static_cast<std::uint64_t>(ord[0]) << 1;  // first: valid, slot
    for (int r = 0; r + 1 < count; ++r) y |= (1 | static_cast<std::uint64_t>(ord[r + 1]) << 1) << (3 + 3 * ord[r]);
    return y;
  });
  if (!order) return order.status();

  // Layer 3: the first record of the first slot, and of each slot's successor.
  auto first_of_slot = [&](const std::string& name, Bit valid, const Word& which) -> sdk::Expected<WregHeader> {
    auto h = new_header(c, name);
    if (!h) return h;
    MlpBuilder mb(c);
    for (int t = 0; t < kWbSlots; ++t) {
      std::vector<Bit> match{valid, (t & 1) ? which[0] : !which[0], (t & 2) ? which[1] : !which[1]};
      header_select(mb, match, *h, in.slot[t].dest, plan.rec_lanes[t][0], plan.rec_format[t][0]);
    }
    QGPU_RETURN_IF_ERROR(mb.commit(std::string(kOwner) + "." + name));
    return h;
  };
  auto first = first_of_slot("first", (*order)[0], slice(*order, 1, 2));
  if (!first) return first.status();
  plan.first = *first;
  for (int s = 0; s < kWbSlots; ++s) {
    auto f = first_of_slot(slot_name(s) + ".follow", (*order)[3 + 3 * s], slice(*order, 4 + 3 * s, 2));
    if (!f) return f.status();
    plan.follow[s] = *f;
  }
  // The last record: the last valid record of the slot that has no successor.
  auto last = new_header(c, "last");
  if (!last) return last.status();
  plan.last = *last;
  {
    MlpBuilder mb(c);
    for (int s = 0; s < kWbSlots; ++s)
      for (int k = 0; k < kWbRecords; ++k) {
        std::vector<Bit> match{plan.rec_valid[s][0], !(*order)[3 + 3 * s], plan.rec_valid[s][k]};
        if (k + 1 < kWbRecords) match.push_back(!plan.rec_valid[s][k + 1]);
        header_select(mb, match, plan.last, in.slot[s].dest, plan.rec_lanes[s][k], plan.rec_format[s][k]);
      }
    QGPU_RETURN_IF_ERROR(mb.commit(std::string(kOwner) + ".last"));
  }
  c.pop_enable();
  return plan;
}

namespace {

// [Σ 2^j (x_j − y_j) == k] into `eq` for words of <= 5 bits.
sdk::Status diff_is(MlpBuilder& mb, const Word& x, const Word& y, int k, Bit eq) {
  std::vector<Term> d;
  for (std::size_t j = 0; j < x.size(); ++j) {
    d.push_back(Term{x[j], static_cast<double>(1u << j)});
    d.push_back(Term{y[j], -static_cast<double>(1u << j)});
  }
  QGPU_RETURN_IF_ERROR(mb.step(d, k, {Term{eq, 1}}));
  return mb.step(d, k + 1, {Term{eq, -1}});
}

std::vector<Bit> operator+(std::vector<Bit> a, const std::vector<Bit>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Which DATA chunk comes next inside a record of n values in format f after
// i DATA tokens: bit 0 "more"; then one-hot over value ranks for: the low 16
// bits (half, word low), the high 16 bits (word high), the low byte into DATA
// bits 0-7 and the low byte into DATA bits 8-15 (byte).
std::uint64_t data_source(int n, ValueFormat f, int i, const std::array<int, 4>& rank) {
  if (n == 0) return 0;
  const int need = f == ValueFormat::kZero   ? 0
                   : f == ValueFormat::kByte ? (n + 1) / 2
                   : f == ValueFormat::kHalf ? n
                                             : 2;
  if ((f == ValueFormat::kWord && n != 1) || need > kMaxDataTokens || i >= need) return 0;  // reserved or over
  std::uint64_t y = 1;
  switch (f) {
    case ValueFormat::kByte:
      y |= 1ull << (9 + rank[2 * i]);
      if (2 * i + 1 < n) y |= 1ull << (13 + rank[2 * i + 1]);
      break;
    case ValueFormat::kHalf: y |= 1ull << (1 + rank[i]); break;
    case ValueFormat::kWord: y |= 1ull << ((i == 0 ? 1 : 5) + rank[0]); break;
    case ValueFormat::kZero: break;
  }
  return y;
}

// Adds the chunk of `v` that `src` selects for source `q` (one-hot index into src's groups) to the DATA value.
void data_chunks(MlpBuilder& mb, const std::vector<Bit>& match, const Word& src, int q, const Word& v,
                 const Word& value) {
  for (int j = 0; j < 16; ++j) {
    mb.select(match + std::vector<Bit>{src[1 + q]}, bit_of(v[j]), out(value[j]));
    mb.select(match + std::vector<Bit>{src[5 + q]}, bit_of(v[16 + j]), out(value[j]));
  }
  for (int j = 0; j < 8; ++j) {
    mb.select(match + std::vector<Bit>{src[9 + q]}, bit_of(v[j]), out(value[j]));
    mb.select(match + std::vector<Bit>{src[13 + q]}, bit_of(v[j]), out(value[8 + j]));
  }
}

}  // namespace

sdk::Expected<WmemPlan> build_wmem_plan(Circuit& c, const MemWriteIn& in) {
  for (int l = 0; l < kProtoLanes; ++l)
    if (in.word[l].size() != kProtoWordBits || in.value[l].size() != 32)
      return sdk::invalid_argument("wmem plan: words are " + std::to_string(kProtoWordBits) +
                                   " bits and values 32 bits");
  WmemPlan plan;
  plan.shared = in.shared;
  c.push_enable(in.enable);
  auto lo = [&](int l) { return slice(in.word[l], 0, 4); };
  constexpr int kHiBits = kProtoWordBits - 4;
  auto hi = [&](int l) { return slice(in.word[l], 4, kHiBits); };
  // Layer 1: comparisons of the word halves, value classes.
  auto pair = c.computed(kOwner, "m.pair", 6 * 3);  // per s < t: hi_lt, hi_eq, lo_lt
  if (!pair) return pair.status();
  auto step1 = c.computed(kOwner, "m.plus1", 12 * 2);  // per ordered s != t: hi_t == hi_s + 1, lo_t == lo_s + 1
  if (!step1) return step1.status();
  auto ends = c.computed(kOwner, "m.ends", 8);  // per lane: lo == 15, lo == 0
  if (!ends) return ends.status();
  std::array<std::array<int, 4>, 4> pidx{}, oidx{};
  {
    MlpBuilder mb(c);
    int p = 0, o = 0;
    for (int s = 0; s < 4; ++s)
      for (int t = 0; t < 4; ++t) {
        if (s == t) continue;
        if (s < t) {
          pidx[s][t] = p;
          std::vector<Term> dh, dl;
          for (int j = 0; j < kHiBits; ++j) {
            dh.push_back(Term{hi(t)[j], static_cast<double>(1 << j)});
            dh.push_back(Term{hi(s)[j], -static_cast<double>(1 << j)});
          }
          for (int j = 0; j < 4; ++j) {
            dl.push_back(Term{lo(t)[j], static_cast<double>(1 << j)});
            dl.push_back(Term{lo(s)[j], -static_cast<double>(1 << j)});
          }
          QGPU_RETURN_IF_ERROR(mb.step(dh, 1, out((*pair)[3 * p])));
          QGPU_RETURN_IF_ERROR(diff_is(mb, hi(t), hi(s), 0, (*pair)[3 * p + 1]));
          QGPU_RETURN_IF_ERROR(mb.step(dl, 1, out((*pair)[3 * p + 2])));
          ++p;
        }
        oidx[s][t] = o;
        QGPU_RETURN_IF_ERROR(diff_is(mb, hi(t), hi(s), 1, (*step1)[2 * o]));
        QGPU_RETURN_IF_ERROR(diff_is(mb, lo(t), lo(s), 1, (*step1)[2 * o + 1]));
        ++o;
      }
    for (int l = 0; l < 4; ++l) {
      std::vector<Term> pos, neg;
      for (Bit b : lo(l)) {
        pos.push_back(Term{b, 1});
        neg.push_back(Term{b, -1});
      }
      QGPU_RETURN_IF_ERROR(mb.step(pos, 4, out((*ends)[2 * l])));
      QGPU_RETURN_IF_ERROR(mb.step(neg, 0, out((*ends)[2 * l + 1])));
    }
    QGPU_RETURN_IF_ERROR(mb.commit(std::string(kOwner) + ".m.compare"));
  }
  std::array<std::array<Bit, 3>, 4> cls;
  for (int l = 0; l < 4; ++l) {
    auto k = lane_class(c, "m.lane" + std::to_string(l), in.value[l]);
    if (!k) return k.status();
    cls[l] = *k;
  }
  // Layer 2: w_s < w_t, and w_t == w_s + 1.
  auto lt = c.computed(kOwner, "m.lt", 6);
  if (!lt) return lt.status();
  auto adj = c.computed(kOwner, "m.adjacent", 12);
  if (!adj) return adj.status();
  {
    MlpBuilder mb(c);
    for (int s = 0; s < 4; ++s)
      for (int t = 0; t < 4; ++t) {
        if (s == t) continue;
        const int p = pidx[std::min(s, t)][std::max(s, t)];
        if (s < t)
          QGPU_RETURN_IF_ERROR(mb.step(
              {Term{(*pair)[3 * p], 2}, Term{(*pair)[3 * p + 1], 1}, Term{(*pair)[3 * p + 2], 1}}, 2, out((*lt)[p])));
        const int o = oidx[s][t];
        QGPU_RETURN_IF_ERROR(mb.step({Term{(*pair)[3 * p + 1], 1}, Term{(*step1)[2 * o + 1], 1}}, 2, out((*adj)[o])));
        QGPU_RETURN_IF_ERROR(mb.step({Term{(*step1)[2 * o], 1}, Term{(*ends)[2 * s], 1}, Term{(*ends)[2 * t + 1], 1}},
                                     3, out((*adj)[o])));
      }
    QGPU_RETURN_IF_ERROR(mb.commit(std::string(kOwner) + ".m.order_bits"));
  }
  // Layer 3: lanes in ascending word order.
  Word order_in = *lt;
  for (int l = 0; l < 4; ++l) order_in.push_back(in.writes[l]);
  auto pos = weights::lookup(c, kOwner, "m.order", order_in, 12, [](std::uint64_t x) {
    std::array<int, kWbSlots> ord{};
    int count = 0;
    if (!order_of(x, ord, count)) return std::uint64_t{0};
    std::uint64_t y = 0;
    for (int j = 0; j < count; ++j) y |= (1 | static_cast<std::uint64_t>(ord[j]) << 1) << (3 * j);
    return y;
  });
  if (!pos) return pos.status();
  auto pos_is = [&](int j, int lane) {
    return std::vector<Bit>{(*pos)[3 * j], (lane & 1) ? (*pos)[3 * j + 1] : !(*pos)[3 * j + 1],
                            (lane & 2) ? (*pos)[3 * j + 2] : !(*pos)[3 * j + 2]};
  };
  // Layer 4: each position's class, word and value; adjacency of neighbouring positions.
  auto pcls = c.computed(kOwner, "m.pos.class", 12);
  if (!pcls) return pcls.status();
  auto padj = c.computed(kOwner, "m.pos.adjacent", 3);
  if (!padj) return padj.status();
  std::array<Word, 4> pword;
  {
    MlpBuilder mb(c);
    for (int j = 0; j < 4; ++j) {
      auto w = c.computed(kOwner, "m.pos" + std::to_string(j) + ".word", kProtoWordBits);
      if (!w) return w.status();
      pword[j] = *w;
      auto v = c.computed(kOwner, "m.pos" + std::to_string(j) + ".value", 32);
      if (!v) return v.status();
      plan.pos_value[j] = *v;
      for (int l = 0; l < 4; ++l) {
        const auto m = pos_is(j, l);
        for (int b = 0; b < 3; ++b) mb.select(m, bit_of(cls[l][b]), out((*pcls)[3 * j + b]));
        for (int b = 0; b < kProtoWordBits; ++b) mb.select(m, bit_of(in.word[l][b]), out(pword[j][b]));
        for (int b = 0; b < 32; ++b) mb.select(m, bit_of(in.value[l][b]), out(plan.pos_value[j][b]));
        if (j + 1 < 4)
          for (int t = 0; t < 4; ++t)
            if (t != l) mb.select(m + pos_is(j + 1, t), bit_of((*adj)[oidx[l][t]]), out((*padj)[j]));
      }
    }
    QGPU_RETURN_IF_ERROR(mb.commit(std::string(kOwner) + ".m.positions"));
  }
  // Layer 5: the records, as protocol.h splits runs (one cube per count, adjacency and classes).
  Word split_in;
  for (int j = 0; j < 4; ++j) split_in.push_back((*pos)[3 * j]);
  split_in.insert(split_in.end(), pcls->begin(), pcls->end());
  split_in.insert(split_in.end(), padj->begin(), padj->end());
  std::vector<Cube> cubes;
  for (int n = 1; n <= 4; ++n)
    for (std::uint32_t a = 0; a < (1u << (n - 1)); ++a)
      for (std::uint32_t assign = 0; assign < (1u << (2 * n)); ++assign) {
        Cube k;
        k.care = 0xf;
        k.value = (1u << n) - 1;
        std::vector<std::uint32_t> words, values;
        std::uint32_t w = 100;
        for (int j = 0; j < n; ++j) {
          const int cl = static_cast<int>((assign >> (2 * j)) & 3);
          k.care |= 0x7ull << (4 + 3 * j);
          k.value |= static_cast<std::uint64_t>(kClassBits[cl]) << (4 + 3 * j);
          words.push_back(w);
          values.push_back(kClassValue[cl]);
          if (j + 1 < n) {
            const bool next = (a >> j) & 1;
            k.care |= 1ull << (16 + j);
            k.value |= static_cast<std::uint64_t>(next) << (16 + j);
            w += next ? 1 : 2;
          }
        }
        // Maximal runs of consecutive words (at most 4), each split by wmem_records().
        std::vector<Record> recs;
        for (std::size_t i = 0; i < words.size();) {
          std::size_t e = i + 1;
          while (e < words.size() && e - i < static_cast<std::size_t>(kProtoRunWords) && words[e] == words[e - 1] + 1)
            ++e;
          for (const Record& r : wmem_records(false, words[i], std::span(values).subspan(i, e - i))) recs.push_back(r);
          i = e;
        }
        for (std::size_t r = 0; r < recs.size(); ++r) {
          const auto start =
              static_cast<std::uint64_t>(std::find(words.begin(), words.end(), recs[r].word) - words.begin());
          k.out |= (1 | start << 1 | static_cast<std::uint64_t>(recs[r].count) << 3 |
                    static_cast<std::uint64_t>(recs[r].format) << 6)
                   << (8 * r);
        }
        cubes.push_back(k);
      }
  auto split = weights::lookup(c, kOwner, "m.split", split_in, 8 * kWmRecords, cubes);
  if (!split) return split.status();
  for (int r = 0; r < kWmRecords; ++r) {
    plan.rec_valid[r] = (*split)[8 * r];
    plan.rec_start[r] = slice(*split, 8 * r + 1, 2);
    plan.rec_count[r] = slice(*split, 8 * r + 3, 3);
    plan.rec_format[r] = slice(*split, 8 * r + 6, 2);
  }
  // Layer 6: each record's first word, and the last record's.
  {
    MlpBuilder mb(c);
    auto last = c.computed(kOwner, "m.last.word", kProtoWordBits);
    if (!last) return last.status();
    plan.last_word = *last;
    for (int r = 0; r < kWmRecords; ++r) {
      auto w = c.computed(kOwner, "m.rec" + std::to_string(r) + ".word", kProtoWordBits);
      if (!w) return w.status();
      plan.rec_word[r] = *w;
      for (int j = 0; j < 4; ++j) {
        const auto m =
            std::vector<Bit>{plan.rec_valid[r]} + weights::spells(plan.rec_start[r], static_cast<std::uint32_t>(j));
        for (int b = 0; b < kProtoWordBits; ++b) mb.select(m, bit_of(pword[j][b]), out((*w)[b]));
        auto ml = m;
        if (r + 1 < kWmRecords) ml.push_back(!plan.rec_valid[r + 1]);
        for (int b = 0; b < kProtoWordBits; ++b) mb.select(ml, bit_of(pword[j][b]), out((*last)[b]));
      }
    }
    QGPU_RETURN_IF_ERROR(mb.commit(std::string(kOwner) + ".m.words"));
  }
  c.pop_enable();
  return plan;
}

sdk::Expected<NextToken> build_successor(Circuit& c, const WregPlan& wreg, const WmemPlan& wmem,
                                         std::span<const SchedGroup> sched, const ControlNext& control,
                                         const SuccessorIn& in, const std::array<Word, kProtoLanes>* window,
                                         int choice_gain) {
  const int groups = static_cast<int>(sched.size());
  if (groups == 0) return sdk::invalid_argument("successor: no scheduler groups");
  if (choice_gain < 1 || choice_gain > kMaxChoiceGain || (choice_gain & (choice_gain - 1)) != 0 || choice_gain == 256)
    return sdk::invalid_argument("successor: choice gain " + std::to_string(choice_gain) +
                                 " is not a power of two from 1 to 128 or from 512 to " +
                                 std::to_string(kMaxChoiceGain));
  bool named_warps = false;
  for (const SchedGroup& g : sched) {
    if (g.lanes.size() != 4 || g.status.size() != 2 || g.block.size() != kProtoBlockBits || (!g.warp.empty() && g.warp.size() != 3))
      return sdk::invalid_argument("successor: a scheduler group is lanes 4, status 2, block " + std::to_string(kProtoBlockBits) + " (warp 3) bits");
    named_warps |= !g.warp.empty();
  }
  if (named_warps && in.sched_warp.size() != 3)
    return sdk::invalid_argument("successor: groups name their warps but the SCHED header's warp is not given");
  if (window)
    for (const Word& w : *window)
      if (w.size() != 32) return sdk::invalid_argument("successor: window values are 32 bits");
  if (in.wreg_reg.size() != 4 || in.wreg_lanes.size() != 4 || in.wreg_format.size() != 2 || in.index.size() != 2 ||
      in.wmem_word.size() != kProtoWordBits || in.wmem_count.size() != 3 || in.wmem_format.size() != 2 ||
      in.sched_lanes.size() != 4 || in.warp.size() != 3)
    return sdk::invalid_argument("successor: header fields have the wrong widths");
  c.push_enable(in.enable);
  // Layer 1: where the current token is.
  auto wsel = c.computed(kOwner, "cur.wreg.record", kWbSlots * kWbRecords);
  if (!wsel) return wsel.status();
  // Which slot writes the current register (only without a window, which is already that slot's).
  Word weq;
  if (!window) {
    auto w = c.computed(kOwner, "cur.wreg.slot", kWbSlots);
    if (!w) return w.status();
    weq = *w;
  }
  auto wlast = c.computed(kOwner, "cur.wreg.last", 1);
  if (!wlast) return wlast.status();
  auto msel = c.computed(kOwner, "cur.wmem.record", 2 * kWmRecords + 2);  // (hi ==, lo ==) per record, then last
  if (!msel) return msel.status();
  auto gsel = c.computed(kOwner, "cur.sched.group", groups);
  if (!gsel) return gsel.status();
  {
    MlpBuilder mb(c);
    Word cur = in.wreg_reg;
    cur.insert(cur.end(), in.wreg_lanes.begin(), in.wreg_lanes.end());
    for (int s = 0; s < kWbSlots; ++s) {
      if (!window) QGPU_RETURN_IF_ERROR(equal_into(mb, wreg.slot[s].dest, in.wreg_reg, weq[s]));
      for (int k = 0; k < kWbRecords; ++k) {
        Word key = wreg.slot[s].dest;
        key.insert(key.end(), wreg.rec_lanes[s][k].begin(), wreg.rec_lanes[s][k].end());
        QGPU_RETURN_IF_ERROR(equal_into(mb, key, cur, (*wsel)[s * kWbRecords + k]));
      }
    }
    Word last = wreg.last.reg;
    last.insert(last.end(), wreg.last.lanes.begin(), wreg.last.lanes.end());
    QGPU_RETURN_IF_ERROR(equal_into(mb, last, cur, (*wlast)[0]));
    for (int r = 0; r <= kWmRecords; ++r) {
      const Word& w = r < kWmRecords ? wmem.rec_word[r] : wmem.last_word;
      QGPU_RETURN_IF_ERROR(diff_is(mb, slice(w, 4, kProtoWordBits - 4), slice(in.wmem_word, 4, kProtoWordBits - 4), 0, (*msel)[2 * r]));
      QGPU_RETURN_IF_ERROR(diff_is(mb, slice(w, 0, 4), slice(in.wmem_word, 0, 4), 0, (*msel)[2 * r + 1]));
    }
    // A SCHED header is group g's when its lanes (and the warp, where g names one) are g's.
    for (int g = 0; g < groups; ++g)
      QGPU_RETURN_IF_ERROR(sched[g].warp.empty() ? equal_into(mb, sched[g].lanes, in.sched_lanes, (*gsel)[g])
                                                 : equal_into(mb, concat(sched[g].lanes, sched[g].warp),
                                                              concat(in.sched_lanes, in.sched_warp), (*gsel)[g]));
    QGPU_RETURN_IF_ERROR(mb.commit(std::string(kOwner) + ".cur"));
  }
  Word wdata_in = in.wreg_lanes;
  wdata_in.insert(wdata_in.end(), in.wreg_format.begin(), in.wreg_format.end());
  wdata_in.insert(wdata_in.end(), in.index.begin(), in.index.end());
  auto wsrc = weights::lookup(c, kOwner, "wreg.data.source", wdata_in, 17, [](std::uint64_t x) {
    std::array<int, 4> rank{};
    int n = 0;
    for (int l = 0; l < 4; ++l)
      if ((x >> l) & 1) rank[n++] = l;
    return data_source(n, static_cast<ValueFormat>((x >> 4) & 3), static_cast<int>((x >> 6) & 3), rank);
  });
  if (!wsrc) return wsrc.status();
  Word mdata_in = in.wmem_count;
  mdata_in.insert(mdata_in.end(), in.wmem_format.begin(), in.wmem_format.end());
  mdata_in.insert(mdata_in.end(), in.index.begin(), in.index.end());
  auto msrc = weights::lookup(c, kOwner, "wmem.data.source", mdata_in, 17, [](std::uint64_t x) {
    const int n = static_cast<int>(x & 7);
    if (n < 1 || n > 4) return std::uint64_t{0};
    return data_source(n, static_cast<ValueFormat>((x >> 3) & 3), static_cast<int>((x >> 5) & 3), {0, 1, 2, 3});
  });
  if (!msrc) return msrc.status();
  const Bit wmore = (*wsrc)[0], mmore = (*msrc)[0];

  // Layer 2: the next token.
  NextToken t;
  struct Spec {
    Word* w;
    const char* name;
    int width;
  };
  Word kinds;
  auto kind = c.computed(kOwner, "next.kind", 8);
  if (!kind) return kind.status();
  t.wreg = (*kind)[0], t.wmem = (*kind)[1], t.sched = (*kind)[2], t.data = (*kind)[3];
  t.exec = (*kind)[4], t.sync = (*kind)[5], t.cta = (*kind)[6], t.halt = (*kind)[7];
  auto wshared = c.computed(kOwner, "next.wmem.shared", 1);
  if (!wshared) return wshared.status();
  t.wmem_shared = (*wshared)[0];
  for (const Spec& sp : {Spec{&t.warp, "next.warp", 3}, Spec{&t.wreg_reg, "next.wreg.reg", 4},
                         Spec{&t.wreg_lanes, "next.wreg.lanes", 4}, Spec{&t.wreg_format, "next.wreg.format", 2},
                         Spec{&t.wmem_word, "next.wmem.word", kProtoWordBits}, Spec{&t.wmem_count, "next.wmem.count", 3},
                         Spec{&t.wmem_format, "next.wmem.format", 2}, Spec{&t.sched_lanes, "next.sched.lanes", 4},
                         Spec{&t.sched_status, "next.sched.status", 2}, Spec{&t.sched_block, "next.sched.block", kProtoBlockBits},
                         Spec{&t.exec_block, "next.exec.block", kProtoBlockBits}, Spec{&t.exec_lanes, "next.exec.lanes", 4},
                         Spec{&t.cta_index, "next.cta", 7}, Spec{&t.data_value, "next.data", 16}}) {
    auto w = c.computed(kOwner, sp.name, sp.width);
    if (!w) return w.status();
    *sp.w = *w;
  }
  auto one = c.computed(kOwner, "next.one", 1);
  if (!one) return one.status();
  t.one = (*one)[0];
  t.fault = t.fault_kind = c.zero();
  t.fault_slot = weights::constant_word(c, 0, 3);
  t.fault_lane = weights::constant_word(c, 0, 2);
  if (in.fault) {
    if (in.fault->size() != kFaultCodeBits)
      return sdk::invalid_argument("successor: the fault code has " + std::to_string(kFaultCodeBits) + " bits");
    auto f = c.computed(kOwner, "next.fault", 7);
    if (!f) return f.status();
    t.fault = (*f)[0];
    t.fault_slot = slice(*f, 1, 3);
    t.fault_lane = slice(*f, 4, 2);
    t.fault_kind = (*f)[6];
  }
  MlpBuilder mb(c);
  mb.constant(out(t.one));
  if (in.fault) {  // the EXEC's fault, as it is: FAULT outscores whatever else it chooses
    mb.select({in.is_exec, (*in.fault)[0]}, kOne, out(t.fault));
    for (int b = 1; b < kFaultCodeBits; ++b)
      mb.select({in.is_exec, (*in.fault)[b]}, kOne,
                out(b < 4   ? t.fault_slot[b - 1]
                    : b < 6 ? t.fault_lane[b - 4]
                            : t.fault_kind));
  }
  auto copy = [&](const std::vector<Bit>& m, const Word& from, const Word& to) {
    for (std::size_t b = 0; b < to.size(); ++b) mb.select(m, bit_of(from[b]), out(to[b]));
  };
  auto wreg_header = [&](const std::vector<Bit>& m, const Word& reg, const Word& lanes, const Word& format) {
    mb.select(m, kOne, out(t.wreg));
    copy(m, in.warp, t.warp);
    copy(m, reg, t.wreg_reg);
    copy(m, lanes, t.wreg_lanes);
    copy(m, format, t.wreg_format);
  };
  auto wmem_header = [&](const std::vector<Bit>& m, int r) {
    mb.select(m, kOne, out(t.wmem));
    mb.select(m, bit_of(wmem.shared), out(t.wmem_shared));
    copy(m, wmem.rec_word[r], t.wmem_word);
    copy(m, wmem.rec_count[r], t.wmem_count);
    copy(m, wmem.rec_format[r], t.wmem_format);
  };
  auto sched_header = [&](const std::vector<Bit>& m, int g) {
    mb.select(m, kOne, out(t.sched));
    copy(m, sched[g].warp.empty() ? in.warp : sched[g].warp, t.warp);
    copy(m, sched[g].lanes, t.sched_lanes);
    copy(m, sched[g].status, t.sched_status);
    copy(m, sched[g].block, t.sched_block);
  };
  auto control_record = [&](const std::vector<Bit>& m) {
    const auto me = m + std::vector<Bit>{control.exec};
    mb.select(me, kOne, out(t.exec));
    copy(me, control.warp, t.warp);
    copy(me, control.block, t.exec_block);
    copy(me, control.lanes, t.exec_lanes);
    mb.select(m + std::vector<Bit>{control.sync}, kOne, out(t.sync));
    const auto mc = m + std::vector<Bit>{control.cta};
    mb.select(mc, kOne, out(t.cta));
    copy(mc, control.cta_index, t.cta_index);
    mb.select(m + std::vector<Bit>{control.halt}, kOne, out(t.halt));
  };
  // What follows the memory records (or their absence): the first valid scheduler group,
  // else the control record.
  auto after_wmem = [&](std::vector<Bit> m) {
    for (int g = 0; g < groups; ++g) {
      sched_header(m + std::vector<Bit>{sched[g].valid}, g);
      m.push_back(!sched[g].valid);
    }
    control_record(m);
  };
  auto after_wreg = [&](const std::vector<Bit>& m) {
    wmem_header(m + std::vector<Bit>{wmem.rec_valid[0]}, 0);
    after_wmem(m + std::vector<Bit>{!wmem.rec_valid[0]});
  };
  // On the EXEC.
  wreg_header({in.is_exec, wreg.first.valid}, wreg.first.reg, wreg.first.lanes, wreg.first.format);
  after_wreg({in.is_exec, !wreg.first.valid});
  // WREG: the next DATA token, the next record, or what follows the registers.
  mb.select({in.is_wreg, wmore}, kOne, out(t.data));
  if (window)
    for (int l = 0; l < kProtoLanes; ++l) data_chunks(mb, {in.is_wreg}, *wsrc, l, (*window)[l], t.data_value);
  else
    for (int s = 0; s < kWbSlots; ++s)
      for (int l = 0; l < kProtoLanes; ++l)
        data_chunks(mb, {in.is_wreg, weq[s], wreg.rec_valid[s][0]}, *wsrc, l, wreg.slot[s].value[l], t.data_value);
  for (int s = 0; s < kWbSlots; ++s)
    for (int k = 0; k < kWbRecords; ++k) {
      std::vector<Bit> at{in.is_wreg, !wmore, (*wsel)[s * kWbRecords + k]};
      if (k + 1 < kWbRecords) {
        wreg_header(at + std::vector<Bit>{wreg.rec_valid[s][k + 1]}, wreg.slot[s].dest, wreg.rec_lanes[s][k + 1],
                    wreg.rec_format[s][k + 1]);
        at.push_back(!wreg.rec_valid[s][k + 1]);
      }
      wreg_header(at + std::vector<Bit>{wreg.follow[s].valid}, wreg.follow[s].reg, wreg.follow[s].lanes,
                  wreg.follow[s].format);
    }
  after_wreg({in.is_wreg, !wmore, (*wlast)[0], wreg.first.valid});
  // WMEM: the next DATA token, the next record, or what follows the memory words.
  mb.select({in.is_wmem, mmore}, kOne, out(t.data));
  for (int r = 0; r < kWmRecords; ++r) {
    const std::vector<Bit> at{in.is_wmem, wmem.rec_valid[r], (*msel)[2 * r], (*msel)[2 * r + 1]};
    for (int st = 0; st < 4; ++st)
      for (int q = 0; st + q < 4; ++q)
        data_chunks(mb, at + weights::spells(wmem.rec_start[r], static_cast<std::uint32_t>(st)), *msrc, q,
                    window ? (*window)[st + q] : wmem.pos_value[st + q], t.data_value);
    if (r + 1 < kWmRecords) wmem_header(at + std::vector<Bit>{!mmore, wmem.rec_valid[r + 1]}, r + 1);
  }
  after_wmem({in.is_wmem, !mmore, wmem.rec_valid[0], (*msel)[2 * kWmRecords], (*msel)[2 * kWmRecords + 1]});
  // SCHED: the next group (valid groups are contiguous), or the control record.
  for (int g = 0; g < groups; ++g) {
    const std::vector<Bit> at{in.is_sched, sched[g].valid, (*gsel)[g]};
    if (g + 1 < groups) {
      sched_header(at + std::vector<Bit>{sched[g + 1].valid}, g + 1);
      control_record(at + std::vector<Bit>{!sched[g + 1].valid});
    } else {
      control_record(at);
    }
  }
  if (choice_gain > 1) {
    // b -> gain·b - (gain-1)/2 in bit units: the channel goes from ±u to ±gain·u. The shift is
    // -gain/2 + 1/2, written by two neurons so that every weight is exact in bf16 at any gain.
    const Word bits = choice_bits(t);
    mb.scale_writes(bits, choice_gain);
    std::vector<Term> shift, half;
    for (const Bit& b : bits) {
      shift.push_back(Term{b, -choice_gain / 2.0});
      half.push_back(Term{b, 1});
    }
    mb.constant(shift);
    mb.select({}, Affine{{}, 0.5}, half);  // silu(K)·0.5 / K: a second constant neuron, 1/2 per bit
  }
  QGPU_RETURN_IF_ERROR(mb.commit(std::string(kOwner) + ".next"));
  c.pop_enable();
  return t;
}

Word choice_bits(const NextToken& n) {
  Word all{n.wreg, n.wmem, n.sched, n.data, n.exec, n.sync, n.cta, n.halt, n.wmem_shared, n.fault, n.fault_kind};
  for (const Word* w : {&n.warp, &n.wreg_reg, &n.wreg_lanes, &n.wreg_format, &n.wmem_word, &n.wmem_count,
                        &n.wmem_format, &n.sched_lanes, &n.sched_status, &n.sched_block, &n.exec_block, &n.exec_lanes,
                        &n.cta_index, &n.data_value, &n.fault_slot, &n.fault_lane})
    all.insert(all.end(), w->begin(), w->end());
  all.push_back(n.one);
  Word out;
  for (const Bit& b : all)
    if (b.field > 0) out.push_back(Bit{b.field, b.bit, false});  // constants (0) and unset fields (-1) carry no channel
  return out;
}
}  // namespace qgpu::simt::circuit
