#include "control.h"

#include <functional>
#include <string>

#include "isa.h"
#include "names.h"
#include "qgpu/weights/primitives.h"

namespace qgpu::simt::circuit {
namespace {

constexpr int kL = kProtoLanes;
constexpr int kW = kProtoWarps;
constexpr int kBlockBits = kProtoBlockBits;
constexpr int kWarpBits = 3;
constexpr int kRowBits = 2 + kBlockBits;  // s0, s1, block
constexpr int kThreadBits = 6;            // threads per thread block <= 32
constexpr int kGridBits = 8;              // thread blocks <= 128 (and ctaid + 1 <= 128)
constexpr int kCtaBits = 7;
static_assert(kProtoBlocks == 1 << kBlockBits && kW == 1 << kWarpBits && kProtoCtas == 1 << kCtaBits);
constexpr int kPairs = kL * (kL - 1);  // ordered lane pairs
const Affine kOne{{}, 1};

// Index of the ordered lane pair (i, j), i != j.
int pair(int i, int j) {
  return i * (kL - 1) + (j < i ? j : j - 1);
}

// One MLP op: threshold steps and selectors into output bits, errors kept until commit.
class Mlp {
 public:
  Mlp(Circuit& c, std::string name) : mb_(c), name_(std::move(name)), c_one_(c.one()) {}
  void step(std::vector<Term> t, double th, Bit out, double coef = 1) {
    if (st_.is_ok()) st_ = mb_.step(std::move(t), th, {Term{out, coef}});
  }
  // [a == b] for words given as Σ 2^k (a_k - b_k) terms: [d >= 0] - [d >= 1].
  void equal(const std::vector<Term>& d, Bit out) {
    step(d, 0, out, 1);
    step(d, 1, out, -1);
  }
  // [a == b and every literal holds]: a false literal pushes d below any difference of two
  // blocks, so each step's sum stays within bf16's exact range above its threshold.
  void equal_if(std::vector<Term> d, const std::vector<Bit>& literals, Bit out) {
    for (const Bit& b : literals) {
      d.push_back(Term{b, kProtoBlocks});
      d.push_back(Term{c_one_, -kProtoBlocks});
    }
    equal(d, out);
  }
  void sel(std::vector<Bit> match, Bit out) { mb_.select(match, kOne, {Term{out, 1}}); }
  sdk::Status commit() {
    QGPU_RETURN_IF_ERROR(st_);
    return mb_.commit(name_);
  }

 private:
  MlpBuilder mb_;
  std::string name_;
  Bit c_one_;
  sdk::Status st_;
};

Word padded(const Circuit& c, const Word& w, int width) {
  return concat(w, weights::constant_word(c, 0, width - static_cast<int>(w.size())));
}
// Σ coef·2^k·w_k appended to t.
void add_value(std::vector<Term>& t, const Word& w, double coef) {
  for (std::size_t k = 0; k < w.size(); ++k) t.push_back(Term{w[k], coef * static_cast<double>(1u << k)});
}
// Σ coef·b appended to t.
void add_bits(std::vector<Term>& t, const std::vector<Bit>& bits, double coef) {
  for (const Bit& b : bits) t.push_back(Term{b, coef});
}
std::vector<Term> cat(std::vector<Term> a, const std::vector<Term>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// [key_i <= key_j] with key = block + kProtoBlocks if the lane is not running.
std::vector<Term> key_le(const Word& bi, Bit runi, const Word& bj, Bit runj) {
  std::vector<Term> t;
  add_value(t, bj, 1);
  add_value(t, bi, -1);
  t.push_back(Term{!runj, kProtoBlocks});
  t.push_back(Term{!runi, -kProtoBlocks});
  return t;
}

// From the pairwise key comparisons (indexed by pair()) of 4 lanes: the running lanes at the
// lowest key (ismin) and the lowest of them (lead).
void minima(Mlp& op, const Word& run, const Word& le, const Word& ismin, const Word& lead) {
  for (int i = 0; i < kL; ++i) {
    std::vector<Term> a{{run[i], 1}}, b{{run[i], 1}};
    for (int j = 0; j < kL; ++j) {
      if (j == i) continue;
      a.push_back(Term{le[pair(i, j)], 1});
      b.push_back(j > i ? Term{le[pair(i, j)], 1} : Term{!le[pair(j, i)], 1});
    }
    op.step(a, kL, ismin[i]);
    op.step(b, kL, lead[i]);
  }
}

struct Row {  // a scheduler row as read
  Bit s0, s1;
  Word block;
};
Row row_of(const Word& w) {
  return Row{w[0], w[1], slice(w, 2, kBlockBits)};
}

class Builder {
 public:
  Builder(Circuit& c, const ControlIn& in, Records& rec) : c_(c), in_(in), rec_(rec) {}

  sdk::Status field(const std::string& owner, const std::string& name, int width, Word& out) {
    auto w = c_.computed(owner, name, width);
    if (!w) return w.status();
    out = std::move(*w);
    return sdk::Status::ok();
  }

  // build(): begin() then finish(). begin() builds everything that does not read the
  // branch conditions; finish() the rest, with the conditions set.
  sdk::Status build();
  sdk::Status begin();
  sdk::Status finish(const Word& cond);
  const Control& control() const { return k_; }

 private:
  sdk::Status state();
  sdk::Status early();
  sdk::Status late();

  Circuit& c_;
  ControlIn in_;
  Records& rec_;
  Control k_;
  // Reads.
  std::array<std::array<Row, kL>, kW> rows_;  // every warp's rows
  std::array<Row, kL> cur_;                   // the EXEC warp's rows
  Word launch_, cta_;
  Bit parity_;
  // Terminator.
  Bit br_, brc_, bar_, exit_;
  Word t0_, t1_;
  // Early fields (no cond).
  Word gt_, eqw_, fm_, term_, orun_, owait_, urun_, uwait_, state0_, held1_, ex_, more_;
  Word first_, any_, leu_, cmp_, held0_, csched_;
  Word mu_, leadu_, ule_, end_;
  Word mpp_, bpp_, u_, k0_;
  // Late fields (cond).
  Word g0_, g1_, a0_, a1_, o_;
  std::array<Word, 2> valid_;
};

sdk::Status Builder::state() {
  // Header fields: flags of the control kinds, CTA c, SCHED w m s B (docs/PROTOCOL.md §3).
  using Value = std::function<sdk::Expected<std::uint64_t>(const Record&)>;
  auto in = [&](const std::string& name, int width, Word& out, std::initializer_list<RecordKind> kinds,
                Value v) -> sdk::Status {
    auto w = rec_.add_header_field(c_, *kinds.begin(), "ctl", name, width, v);
    if (!w) return w.status();
    out = std::move(*w);
    for (auto it = kinds.begin() + 1; it != kinds.end(); ++it) rec_.bind(*it, out, v);
    return sdk::Status::ok();
  };
  const Value one = [](const Record&) -> sdk::Expected<std::uint64_t> { return 1; };
  using K = RecordKind;
  QGPU_RETURN_IF_ERROR(in("on", 1, k_.on, {K::kExec, K::kRun, K::kSync, K::kCta}, one));
  QGPU_RETURN_IF_ERROR(in("gen", 1, k_.gen, {K::kExec, K::kRun, K::kSync}, one));
  QGPU_RETURN_IF_ERROR(in("cta_is", 1, k_.cta_is, {K::kCta}, one));
  QGPU_RETURN_IF_ERROR(in("sync_is", 1, k_.sync_is, {K::kSync}, one));
  QGPU_RETURN_IF_ERROR(in("parity_we", 1, k_.parity_we, {K::kCta, K::kSync}, one));
  QGPU_RETURN_IF_ERROR(in("cta_id", kCtaBits, k_.cta_id, {K::kCta},
                          [](const Record& r) -> sdk::Expected<std::uint64_t> { return r.cta; }));
  QGPU_RETURN_IF_ERROR(in("cta_next", kGridBits, k_.cta_next, {K::kCta},
                          [](const Record& r) -> sdk::Expected<std::uint64_t> { return r.cta + 1; }));
  QGPU_RETURN_IF_ERROR(in("sched_warp", kWarpBits, k_.sched_warp, {K::kSched},
                          [](const Record& r) -> sdk::Expected<std::uint64_t> { return r.warp; }));
  QGPU_RETURN_IF_ERROR(in("sched_lanes", kL, k_.sched_lanes, {K::kSched},
                          [](const Record& r) -> sdk::Expected<std::uint64_t> { return r.lanes; }));
  QGPU_RETURN_IF_ERROR(
      in("sched_state", kRowBits, k_.sched_state, {K::kSched},
         [](const Record& r) -> sdk::Expected<std::uint64_t> { return sched_row_value(r.status, r.block); }));
  auto lw = build_launch_write(c_, rec_);
  if (!lw) return lw.status();
  k_.launch = *lw;
  const Bit on = k_.on[0];
  const Word row0 = weights::constant_word(c_, 0, 1);  // the address of a one-row latch
  for (int l = 0; l < kL; ++l) {
    auto ram = c_.add_ram("sched", "lane" + std::to_string(l), kW, kRowBits);
    if (!ram) return ram.status();
    k_.sched_rams[l] = *ram;
    QGPU_RETURN_IF_ERROR(c_.ram_write(*ram, k_.sched_warp, k_.sched_state, k_.sched_lanes[l]));
  }
  auto launch = c_.add_ram("ctl", "launch", 1, kThreadBits + kGridBits);
  if (!launch) return launch.status();
  k_.launch_ram = *launch;
  QGPU_RETURN_IF_ERROR(c_.ram_write(*launch, row0, concat(k_.launch.threads, k_.launch.grid), k_.launch.enable));
  auto cta = c_.add_ram("ctl", "cta", 1, kCtaBits + kGridBits);
  if (!cta) return cta.status();
  k_.cta_ram = *cta;
  QGPU_RETURN_IF_ERROR(c_.ram_write(*cta, row0, concat(k_.cta_id, k_.cta_next), k_.cta_is[0]));
  // Reads: the latches and the EXEC warp's rows first, then every warp's rows.
  auto lr = c_.ram_read(*launch, "launch", row0, on);
  if (!lr) return lr.status();
  launch_ = *lr;
  auto cr = c_.ram_read(*cta, "cta", row0, on);
  if (!cr) return cr.status();
  cta_ = *cr;
  for (int l = 0; l < kL; ++l) {
    auto r = c_.ram_read(k_.sched_rams[l], "cur.l" + std::to_string(l), in_.warp, in_.enable);
    if (!r) return r.status();
    cur_[l] = row_of(*r);
  }
  for (int v = 0; v < kW; ++v)
    for (int l = 0; l < kL; ++l) {
      auto r = c_.ram_read(k_.sched_rams[l], "row.w" + std::to_string(v) + ".l" + std::to_string(l),
                           weights::constant_word(c_, static_cast<unsigned>(v), kWarpBits), on);
      if (!r) return r.status();
      rows_[v][l] = row_of(*r);
    }
  // The new parity of a SYNC token: 1 iff no row holds barrier.odd (s0 = 1 at a SYNC).
  Word pnext;
  QGPU_RETURN_IF_ERROR(field("ctl", "parity_next", 1, pnext));
  {
    c_.push_enable(k_.sync_is[0]);
    Mlp m(c_, "ctl.parity_next");
    std::vector<Term> t;
    for (int v = 0; v < kW; ++v)
      for (int l = 0; l < kL; ++l) t.push_back(Term{rows_[v][l].s0, -1});
    m.step(t, 0, pnext[0]);
    sdk::Status s = m.commit();
    c_.pop_enable();
    QGPU_RETURN_IF_ERROR(s);
  }
  auto par = c_.add_ram("ctl", "parity", 1, 1);
  if (!par) return par.status();
  k_.parity_ram = *par;
  QGPU_RETURN_IF_ERROR(c_.ram_write(*par, row0, pnext, k_.parity_we[0]));
  auto pr = c_.ram_read(*par, "parity", row0, on);
  if (!pr) return pr.status();
  parity_ = (*pr)[0];
  k_.ntid = padded(c_, slice(launch_, 0, kThreadBits), 32);
  k_.nctaid = padded(c_, slice(launch_, kThreadBits, kGridBits), 32);
  k_.ctaid = padded(c_, slice(cta_, 0, kCtaBits), 32);
  return sdk::Status::ok();
}

// Everything that does not depend on the branch conditions: it runs beside the ALU.
sdk::Status Builder::early() {
  const Bit en = in_.enable;
  const Word& m = in_.lanes;
  const Bit gen = k_.gen[0];
  // Warp comparisons and the lowest masked lane (embedding bits only).
  QGPU_RETURN_IF_ERROR(field("ctl", "gt", kW, gt_));     // v > warp, or not an EXEC
  QGPU_RETURN_IF_ERROR(field("ctl", "eqw", kW, eqw_));   // v == warp on an EXEC
  QGPU_RETURN_IF_ERROR(field("ctl", "fm", kL, fm_));     // the lowest lane of the mask
  QGPU_RETURN_IF_ERROR(field("ctl", "term", 2, term_));  // same (t0 == t1), le01 (t0 <= t1)
  {
    Mlp op(c_, "ctl.warp_cmp");
    for (int v = 0; v < kW; ++v) {
      std::vector<Term> t;
      add_value(t, in_.warp, -1);
      t.push_back(Term{!en, 8});
      op.step(t, 1 - v, gt_[v]);
      std::vector<Bit> p = weights::spells(in_.warp, static_cast<unsigned>(v));
      p.push_back(en);
      op.sel(p, eqw_[v]);
    }
    for (int i = 0; i < kL; ++i) {
      std::vector<Bit> p{m[i]};
      for (int j = 0; j < i; ++j) p.push_back(!m[j]);
      op.sel(p, fm_[i]);
    }
    std::vector<Term> d;
    add_value(d, t0_, 1);
    add_value(d, t1_, -1);
    op.equal(d, term_[0]);
    std::vector<Term> le;
    add_value(le, t1_, 1);
    add_value(le, t0_, -1);
    op.step(le, 0, term_[1]);
    QGPU_RETURN_IF_ERROR(op.commit());
  }
  // Effective states of the rows (barrier entries of the other parity read as running).
  QGPU_RETURN_IF_ERROR(field("ctl", "orun", kW * kL, orun_));    // running, warp > EXEC warp
  QGPU_RETURN_IF_ERROR(field("ctl", "owait", kW * kL, owait_));  // waiting, warp != EXEC warp
  QGPU_RETURN_IF_ERROR(field("ctl", "urun", kL, urun_));         // EXEC warp, outside the mask, running
  QGPU_RETURN_IF_ERROR(field("ctl", "uwait", kL, uwait_));       // ... waiting
  {
    const Bit p = parity_;
    Mlp op(c_, "ctl.rows");
    for (int v = 0; v < kW; ++v)
      for (int l = 0; l < kL; ++l) {
        const Row& r = rows_[v][l];
        const Bit o = orun_[v * kL + l], w = owait_[v * kL + l];
        op.sel({gen, gt_[v], !r.s1, r.s0}, o);
        op.sel({gen, gt_[v], r.s1, !r.s0, p}, o);
        op.sel({gen, gt_[v], r.s1, r.s0, !p}, o);
        op.sel({gen, !eqw_[v], r.s1, r.s0, p}, w);
        op.sel({gen, !eqw_[v], r.s1, !r.s0, !p}, w);
      }
    for (int l = 0; l < kL; ++l) {
      const Row& r = cur_[l];
      op.sel({!m[l], !r.s1, r.s0}, urun_[l]);
      op.sel({!m[l], r.s1, !r.s0, p}, urun_[l]);
      op.sel({!m[l], r.s1, r.s0, !p}, urun_[l]);
      op.sel({!m[l], r.s1, r.s0, p}, uwait_[l]);
      op.sel({!m[l], r.s1, !r.s0, !p}, uwait_[l]);
    }
    QGPU_RETURN_IF_ERROR(op.commit());
  }
  // The state of the masked lanes' first group (br/brc: running at t0; bar: waiting at t0;
  // exit: exited), and whether each row already holds the second group's (running, t1).
  QGPU_RETURN_IF_ERROR(field("ctl", "state0", kRowBits, state0_));
  QGPU_RETURN_IF_ERROR(field("ctl", "held1", kL, held1_));
  {
    Mlp op(c_, "ctl.state0");
    op.sel({br_}, state0_[0]);
    op.sel({brc_}, state0_[0]);
    op.sel({bar_, parity_}, state0_[0]);
    op.sel({bar_}, state0_[1]);
    for (int b = 0; b < kBlockBits; ++b)
      for (Bit t : {br_, brc_, bar_}) op.sel({t, t0_[b]}, state0_[2 + b]);
    for (int l = 0; l < kL; ++l) {
      std::vector<Term> d;
      add_value(d, cur_[l].block, 1);
      add_value(d, t1_, -1);
      op.equal_if(d, {cur_[l].s0, !cur_[l].s1}, held1_[l]);  // running at t1
    }
    QGPU_RETURN_IF_ERROR(op.commit());
  }
  // Latches: which lanes exist (lane l of warp v: threads >= 4v + l + 1), more thread blocks.
  QGPU_RETURN_IF_ERROR(field("ctl", "exists", kW * kL, ex_));
  QGPU_RETURN_IF_ERROR(field("ctl", "more", 1, more_));
  {
    Mlp op(c_, "ctl.latch");
    const Word threads = slice(launch_, 0, kThreadBits), grid = slice(launch_, kThreadBits, kGridBits);
    for (int i = 0; i < kW * kL; ++i) {
      std::vector<Term> t;
      add_value(t, threads, 1);
      op.step(t, i + 1, ex_[i]);
    }
    std::vector<Term> t;
    add_value(t, grid, 1);
    add_value(t, slice(cta_, kCtaBits, kGridBits), -1);
    op.step(t, 1, more_[0]);
    QGPU_RETURN_IF_ERROR(op.commit());
  }
  // Per-warp order of the lanes' keys (block + kProtoBlocks if not running), summaries, comparisons
  // of the EXEC warp's unmasked lanes with the branch targets.
  QGPU_RETURN_IF_ERROR(field("ctl", "first", kW, first_));  // the next warp with running lanes
  QGPU_RETURN_IF_ERROR(field("ctl", "any", 4, any_));       // any_other, cont, any_wait, hasU
  QGPU_RETURN_IF_ERROR(field("ctl", "leu", kPairs, leu_));
  QGPU_RETURN_IF_ERROR(field("ctl", "cmp", 4 * kL, cmp_));  // per lane: b <= t0, b < t0, b <= t1, b < t1 (running)
  QGPU_RETURN_IF_ERROR(field("ctl", "held0", kL, held0_));
  QGPU_RETURN_IF_ERROR(field("ctl", "cta_sched", kW * kL, csched_));
  k_.cta_sched = csched_;
  {
    Mlp op(c_, "ctl.order");
    std::vector<Term> all;
    for (int v = 0; v < kW; ++v) {
      std::vector<Term> t;
      for (int l = 0; l < kL; ++l) t.push_back(Term{orun_[v * kL + l], 1});
      for (int u = 0; u < v; ++u)
        for (int l = 0; l < kL; ++l) t.push_back(Term{orun_[u * kL + l], -8});
      op.step(t, 1, first_[v]);
      for (int l = 0; l < kL; ++l) all.push_back(Term{orun_[v * kL + l], 1});
    }
    op.step(all, 1, any_[0]);
    for (int i = 0; i < kL; ++i)
      for (int j = 0; j < kL; ++j)
        if (i != j) op.step(key_le(cur_[i].block, urun_[i], cur_[j].block, urun_[j]), 0, leu_[pair(i, j)]);
    std::vector<Term> u;
    add_bits(u, urun_, 1);
    op.step(cat(u, {{br_, 4}, {brc_, 4}}), 1, any_[1]);  // cont: the EXEC warp keeps running lanes
    std::vector<Term> w;
    add_bits(w, owait_, 1);
    add_bits(w, uwait_, 1);
    w.push_back(Term{bar_, 4});
    op.step(w, 1, any_[2]);  // any lane waits at a barrier
    op.step(u, 1, any_[3]);  // hasU
    for (int l = 0; l < kL; ++l)
      for (int x = 0; x < 2; ++x) {
        std::vector<Term> t;
        add_value(t, x ? t1_ : t0_, 1);
        add_value(t, cur_[l].block, -1);
        t.push_back(Term{urun_[l], 2 * kProtoBlocks});  // above any difference of two blocks
        op.step(t, 2 * kProtoBlocks, cmp_[l * 4 + 2 * x]);      // running and b <= target
        op.step(t, 2 * kProtoBlocks + 1, cmp_[l * 4 + 2 * x + 1]);  // running and b < target
      }
    for (int l = 0; l < kL; ++l) {
      std::vector<Term> d;
      add_value(d, cur_[l].block, 1);
      add_value(d, slice(state0_, 2, kBlockBits), -1);
      for (int st = 0; st < 4; ++st) {  // the same status: one pair of steps per status value
        const Bit a = st & 1 ? cur_[l].s0 : !cur_[l].s0, b = st & 2 ? cur_[l].s1 : !cur_[l].s1;
        const Bit x = st & 1 ? state0_[0] : !state0_[0], y = st & 2 ? state0_[1] : !state0_[1];
        op.equal_if(d, {a, b, x, y}, held0_[l]);
      }
    }
    for (int v = 1; v < kW; ++v)
      for (int l = 0; l < kL; ++l) {
        const Row& r = rows_[v][l];
        // Both flags (weighted above the row's 2 + kBlockBits bits) and any row bit set.
        constexpr int kFlag = 16;
        static_assert(2 + kBlockBits < kFlag);
        std::vector<Term> t{{ex_[v * kL + l], kFlag}, {k_.cta_is[0], kFlag}, {r.s1, 1}, {!r.s0, 1}};
        add_bits(t, r.block, 1);
        op.step(t, 2 * kFlag + 1, csched_[v * kL + l]);
      }
    QGPU_RETURN_IF_ERROR(op.commit());
  }
  const Bit any_other = any_[0], cont = any_[1], any_wait = any_[2];
  // The minima: per warp the lanes at the lowest key (ismin) and the lowest such lane (lead).
  QGPU_RETURN_IF_ERROR(field("ctl", "mu", kL, mu_));
  QGPU_RETURN_IF_ERROR(field("ctl", "leadu", kL, leadu_));
  QGPU_RETURN_IF_ERROR(field("ctl", "ule", 4, ule_));  // U <= t0, U < t0, U <= t1, U < t1 (U present)
  QGPU_RETURN_IF_ERROR(field("ctl", "end", 1, end_));
  QGPU_RETURN_IF_ERROR(field("next", "kind", 4, k_.next.kind));
  QGPU_RETURN_IF_ERROR(field("next", "cta", kGridBits, k_.next.cta));
  {
    Mlp op(c_, "ctl.minima");
    minima(op, urun_, leu_, mu_, leadu_);
    for (int x = 0; x < 4; ++x) {
      std::vector<Term> t;
      for (int l = 0; l < kL; ++l) t.push_back(Term{cmp_[l * 4 + x], 1});
      op.step(t, 1, ule_[x]);
    }
    const Bit ce = k_.cta_is[0];
    const std::vector<Bit> stop{gen, !cont, !any_other, !any_wait};
    auto with = [](std::vector<Bit> v, std::initializer_list<Bit> more) {
      v.insert(v.end(), more);
      return v;
    };
    op.sel(stop, end_[0]);
    const Word& kind = k_.next.kind;
    op.sel({gen, cont}, kind[0]);
    op.sel({gen, !cont, any_other}, kind[0]);
    op.sel({ce}, kind[0]);
    op.sel({gen, !cont, !any_other, any_wait}, kind[1]);
    op.sel(with(stop, {more_[0]}), kind[2]);
    op.sel(with(stop, {!more_[0]}), kind[3]);
    const Word next = slice(cta_, kCtaBits, kGridBits);
    for (int b = 0; b < kGridBits; ++b) op.sel(with(stop, {more_[0], next[b]}), k_.next.cta[b]);
    QGPU_RETURN_IF_ERROR(op.commit());
  }
  // The next warp (first): its rows selected, then the lowest key among its lanes: the lanes
  // there (m'') and the block (B''). Selecting first keeps one warp's comparisons alive
  // instead of eight (a longer chain, but it runs beside the ALU).
  Word sb, srun, sle, slead;
  QGPU_RETURN_IF_ERROR(field("ctl", "sel_block", kL * kBlockBits, sb));
  QGPU_RETURN_IF_ERROR(field("ctl", "sel_run", kL, srun));
  {
    Mlp op(c_, "ctl.select");
    for (int v = 0; v < kW; ++v)
      for (int l = 0; l < kL; ++l) {
        op.sel({first_[v], orun_[v * kL + l]}, srun[l]);
        for (int b = 0; b < kBlockBits; ++b) op.sel({first_[v], rows_[v][l].block[b]}, sb[l * kBlockBits + b]);
      }
    QGPU_RETURN_IF_ERROR(op.commit());
  }
  auto sblock = [&](int l) { return slice(sb, l * kBlockBits, kBlockBits); };
  QGPU_RETURN_IF_ERROR(field("ctl", "sel_le", kPairs, sle));
  {
    Mlp op(c_, "ctl.sel_order");
    for (int i = 0; i < kL; ++i)
      for (int j = 0; j < kL; ++j)
        if (i != j) op.step(key_le(sblock(i), srun[i], sblock(j), srun[j]), 0, sle[pair(i, j)]);
    QGPU_RETURN_IF_ERROR(op.commit());
  }
  QGPU_RETURN_IF_ERROR(field("ctl", "mpp", kL, mpp_));
  QGPU_RETURN_IF_ERROR(field("ctl", "sel_lead", kL, slead));
  {
    Mlp op(c_, "ctl.sel_minima");
    minima(op, srun, sle, mpp_, slead);
    QGPU_RETURN_IF_ERROR(op.commit());
  }
  // B'', the EXEC warp's unmasked minimum U, whether the first group is kept, the warp.
  QGPU_RETURN_IF_ERROR(field("ctl", "bpp", kBlockBits, bpp_));
  QGPU_RETURN_IF_ERROR(field("ctl", "u", kBlockBits, u_));
  QGPU_RETURN_IF_ERROR(field("ctl", "k0", 1, k0_));  // the first group is kept: not running, or t0 > U
  QGPU_RETURN_IF_ERROR(field("next", "warp", kWarpBits, k_.next.warp));
  {
    Mlp op(c_, "ctl.pick");
    for (int l = 0; l < kL; ++l)
      for (int b = 0; b < kBlockBits; ++b) op.sel({slead[l], sblock(l)[b]}, bpp_[b]);
    for (int l = 0; l < kL; ++l)
      for (int b = 0; b < kBlockBits; ++b) op.sel({leadu_[l], cur_[l].block[b]}, u_[b]);
    op.sel({!br_, !brc_}, k0_[0]);
    op.sel({br_, ule_[1]}, k0_[0]);
    op.sel({brc_, ule_[1]}, k0_[0]);
    for (int b = 0; b < kWarpBits; ++b) {
      op.sel({cont, in_.warp[b]}, k_.next.warp[b]);
      for (int v = 0; v < kW; ++v)
        if ((v >> b) & 1) op.sel({!cont, first_[v]}, k_.next.warp[b]);
    }
    QGPU_RETURN_IF_ERROR(op.commit());
  }
  return sdk::Status::ok();
}

// The part after the branch conditions: two MLPs to every output.
sdk::Status Builder::late() {
  const Word& m = in_.lanes;
  const Bit same = term_[0], le01 = term_[1];
  const Bit cont = any_[1], has_u = any_[3];
  const Bit ule0 = ule_[0], ult0 = ule_[1], ule1 = ule_[2], ult1 = ule_[3];
  // C1: per lane, the group of its new state (g0: running at t0, g1: running at t1 != t0),
  // the lanes whose rows do not hold it yet (a0, a1), and the emission order (o = 1: the
  // lowest masked lane is in the t1 group).
  QGPU_RETURN_IF_ERROR(field("ctl", "g0", kL, g0_));
  QGPU_RETURN_IF_ERROR(field("ctl", "g1", kL, g1_));
  QGPU_RETURN_IF_ERROR(field("ctl", "a0", kL, a0_));
  QGPU_RETURN_IF_ERROR(field("ctl", "a1", kL, a1_));
  QGPU_RETURN_IF_ERROR(field("ctl", "o", 1, o_));
  {
    Mlp op(c_, "ctl.cond");
    for (int l = 0; l < kL; ++l) {
      const Bit c = in_.cond[l], h0 = !held0_[l], h1 = !held1_[l];
      op.sel({m[l], br_}, g0_[l]);
      op.sel({m[l], brc_, same}, g0_[l]);
      op.sel({m[l], brc_, !same, c}, g0_[l]);
      op.sel({m[l], brc_, !same, !c}, g1_[l]);
      for (Bit t : {br_, bar_, exit_}) op.sel({m[l], t, h0}, a0_[l]);
      op.sel({m[l], brc_, same, h0}, a0_[l]);
      op.sel({m[l], brc_, !same, c, h0}, a0_[l]);
      op.sel({m[l], brc_, !same, !c, h1}, a1_[l]);
      op.sel({fm_[l], brc_, !same, !c}, o_[0]);
    }
    QGPU_RETURN_IF_ERROR(op.commit());
  }
  std::vector<Term> G0, G1;  // lanes going to t0 / t1 (br's all in G0)
  for (int l = 0; l < kL; ++l) G0.push_back(Term{g0_[l], 1}), G1.push_back(Term{g1_[l], 1});
  auto neg = [](std::vector<Term> t, double f) {
    for (Term& x : t) x.weight *= f;
    return t;
  };
  // C2: the next EXEC's block and lanes, and the two SCHED groups.
  QGPU_RETURN_IF_ERROR(field("next", "block", kBlockBits, k_.next.block));
  QGPU_RETURN_IF_ERROR(field("next", "lanes", kL, k_.next.lanes));
  for (int g = 0; g < 2; ++g) {
    const std::string owner = "sched.g" + std::to_string(g);
    QGPU_RETURN_IF_ERROR(field(owner, "valid", 1, valid_[g]));
    k_.groups[g].valid = valid_[g][0];
    QGPU_RETURN_IF_ERROR(field(owner, "lanes", kL, k_.groups[g].lanes));
    QGPU_RETURN_IF_ERROR(field(owner, "status", 2, k_.groups[g].status));
    QGPU_RETURN_IF_ERROR(field(owner, "block", kBlockBits, k_.groups[g].block));
  }
  {
    Mlp op(c_, "ctl.next");
    // Block: U if U is a minimum; else t0 if it is present and a minimum; else t1.
    for (int b = 0; b < kBlockBits; ++b) {
      const Bit out = k_.next.block[b];
      op.step(cat(G0, {{!ule0, 8}, {le01, 8}, {t0_[b], 8}}), 25, out);
      op.step(cat(cat(G0, neg(G1, -5)), {{!ule0, 8}, {!le01, 8}, {t0_[b], 8}}), 25, out);
      op.step(cat(G1, {{!ule1, 8}, {!le01, 8}, {t1_[b], 8}}), 25, out);
      op.step(cat(cat(G1, neg(G0, -5)), {{!ule1, 8}, {le01, 8}, {t1_[b], 8}}), 25, out);
      op.step({{ule0, 8}, {ule1, 8}, {u_[b], 8}}, 24, out);
      op.step(cat(neg(G1, -1), {{ule0, 8}, {!ule1, 8}, {has_u, 8}, {u_[b], 8}}), 32, out);
      op.step(cat(neg(G0, -1), {{!ule0, 8}, {ule1, 8}, {has_u, 8}, {u_[b], 8}}), 32, out);
      op.step(cat(cat(neg(G0, -1), neg(G1, -1)), {{!ule0, 8}, {!ule1, 8}, {has_u, 8}, {u_[b], 8}}), 32, out);
      op.sel({!cont, bpp_[b]}, out);
    }
    // Lanes: the running lanes at that block (ties included), or the next warp's, or on a CTA
    // token the first warp's existing lanes.
    const Word threads = slice(launch_, 0, kThreadBits);
    for (int l = 0; l < kL; ++l) {
      const Bit out = k_.next.lanes[l];
      op.step({{g0_[l], 8}, {!ult0, 8}, {le01, 8}}, 24, out);
      op.step(cat(neg(G1, -1), {{g0_[l], 8}, {!ult0, 8}, {!le01, 8}}), 24, out);
      op.step({{g1_[l], 8}, {!ult1, 8}, {!le01, 8}}, 24, out);
      op.step(cat(neg(G0, -1), {{g1_[l], 8}, {!ult1, 8}, {le01, 8}}), 24, out);
      op.step({{mu_[l], 8}, {ule0, 8}, {ule1, 8}}, 24, out);
      op.step(cat(neg(G1, -1), {{mu_[l], 8}, {ule0, 8}, {!ule1, 8}}), 24, out);
      op.step(cat(neg(G0, -1), {{mu_[l], 8}, {!ule0, 8}, {ule1, 8}}), 24, out);
      op.step(cat(cat(neg(G0, -1), neg(G1, -1)), {{mu_[l], 8}, {!ule0, 8}, {!ule1, 8}}), 24, out);
      op.sel({!cont, mpp_[l]}, out);
      std::vector<Term> t{{k_.cta_is[0], 64}};
      add_value(t, threads, 1);
      op.step(t, 64 + l + 1, out);
    }
    // Groups: slot 0 holds the group of the lowest masked lane. A group is dropped when the
    // next EXEC (same warp) implies it, when the thread block ends, lane by lane where the
    // row already holds it.
    for (int g = 0; g < 2; ++g) {
      const Bit take0 = g == 0 ? !o_[0] : o_[0];  // this slot holds the first group
      const Bit take1 = !take0;
      const SchedWrite& sg = k_.groups[g];
      for (int l = 0; l < kL; ++l) {
        const Bit out = sg.lanes[l];
        op.step({{a0_[l], 8}, {!end_[0], 8}, {k0_[0], 8}, {take0, 8}}, 32, out);
        op.step(cat(G1, {{a0_[l], 8}, {!end_[0], 8}, {!k0_[0], 8}, {!le01, 8}, {take0, 8}}), 41, out);
        op.step({{a1_[l], 8}, {!end_[0], 8}, {ult1, 8}, {take1, 8}}, 32, out);
        op.step(cat(G0, {{a1_[l], 8}, {!end_[0], 8}, {!ult1, 8}, {le01, 8}, {take1, 8}}), 41, out);
      }
      // valid = any lane: the same cases over the count of a0 (a1) lanes, or, where a case
      // also needs the other group's count, split by the lowest such lane.
      std::vector<Term> A0, A1;
      for (int l = 0; l < kL; ++l) A0.push_back(Term{a0_[l], 1}), A1.push_back(Term{a1_[l], 1});
      const Bit valid = valid_[g][0];
      op.step(cat(A0, {{!end_[0], 8}, {k0_[0], 8}, {take0, 8}}), 25, valid);
      op.step(cat(A1, {{!end_[0], 8}, {ult1, 8}, {take1, 8}}), 25, valid);
      for (int l = 0; l < kL; ++l) {
        std::vector<Term> t0{{a0_[l], 8}, {!end_[0], 8}, {!k0_[0], 8}, {!le01, 8}, {take0, 8}};
        std::vector<Term> t1{{a1_[l], 8}, {!end_[0], 8}, {!ult1, 8}, {le01, 8}, {take1, 8}};
        for (int j = 0; j < l; ++j) t0.push_back(Term{!a0_[j], 8}), t1.push_back(Term{!a1_[j], 8});
        op.step(cat(G1, t0), 8 * (5 + l) + 1, valid);
        op.step(cat(G0, t1), 8 * (5 + l) + 1, valid);
      }
      for (int s = 0; s < 2; ++s) op.sel({take0, state0_[s]}, sg.status[s]);
      op.sel({take1, brc_, !same}, sg.status[0]);  // running
      for (int b = 0; b < kBlockBits; ++b) {
        op.sel({take0, state0_[2 + b]}, sg.block[b]);
        op.sel({take1, brc_, !same, t1_[b]}, sg.block[b]);
      }
    }
    QGPU_RETURN_IF_ERROR(op.commit());
  }
  return sdk::Status::ok();
}

sdk::Status Builder::begin() {
  auto width = [](const Word& w, std::size_t n, const char* what) -> sdk::Status {
    if (w.size() == n) return sdk::Status::ok();
    return sdk::invalid_argument(std::string("control: input ") + what + " has " + std::to_string(w.size()) +
                                 " bits, expected " + std::to_string(n));
  };
  QGPU_RETURN_IF_ERROR(width(in_.warp, kWarpBits, "warp"));
  QGPU_RETURN_IF_ERROR(width(in_.lanes, kL, "lanes"));
  QGPU_RETURN_IF_ERROR(width(in_.term_opcode, kOpCount, "term_opcode"));
  QGPU_RETURN_IF_ERROR(width(in_.term_imm, 32, "term_imm"));
  br_ = in_.term_opcode[static_cast<int>(Op::kBr)];
  brc_ = in_.term_opcode[static_cast<int>(Op::kBrc)];
  bar_ = in_.term_opcode[static_cast<int>(Op::kBar)];
  exit_ = in_.term_opcode[static_cast<int>(Op::kExit)];
  t0_ = slice(in_.term_imm, 0, kBlockBits);
  t1_ = slice(in_.term_imm, 16, kBlockBits);
  QGPU_RETURN_IF_ERROR(state());
  c_.push_enable(k_.on[0]);
  sdk::Status s = early();
  c_.pop_enable();
  return s;
}

sdk::Status Builder::finish(const Word& cond) {
  if (cond.size() != static_cast<std::size_t>(kL))
    return sdk::invalid_argument("control: input cond has " + std::to_string(cond.size()) + " bits, expected " +
                                 std::to_string(kL));
  in_.cond = cond;
  c_.push_enable(k_.on[0]);
  sdk::Status s = late();
  c_.pop_enable();
  return s;
}

sdk::Status Builder::build() {
  QGPU_RETURN_IF_ERROR(begin());
  return finish(in_.cond);
}

}  // namespace

std::uint32_t sched_row_value(LaneStatus status, std::uint32_t block) {
  switch (status) {
    case LaneStatus::kRunning: return 1u | (block << 2);
    case LaneStatus::kBarrierEven: return 2u | (block << 2);
    case LaneStatus::kBarrierOdd: return 3u | (block << 2);
    case LaneStatus::kExited: return 0u;
  }
  return 0u;
}

sdk::Expected<Control> build_control(Circuit& c, const ControlIn& in, Records& records) {
  Builder b(c, in, records);
  QGPU_RETURN_IF_ERROR(b.build());
  return b.control();
}

struct ControlStage::Impl {
  Builder b;
};

ControlStage::ControlStage() = default;
ControlStage::~ControlStage() = default;
ControlStage::ControlStage(ControlStage&&) noexcept = default;
ControlStage& ControlStage::operator=(ControlStage&&) noexcept = default;
const Control& ControlStage::control() const {
  return impl_->b.control();
}

sdk::Expected<ControlStage> begin_control(Circuit& c, const ControlIn& in, Records& records) {
  ControlStage st;
  st.impl_ = std::make_unique<ControlStage::Impl>(ControlStage::Impl{Builder(c, in, records)});
  QGPU_RETURN_IF_ERROR(st.impl_->b.begin());
  return st;
}

sdk::Expected<Control> finish_control(ControlStage& stage, const Word& cond) {
  if (!stage.impl_) return sdk::invalid_argument("control: finish_control on a stage begin_control did not make");
  QGPU_RETURN_IF_ERROR(stage.impl_->b.finish(cond));
  Control k = stage.impl_->b.control();
  stage.impl_.reset();
  return k;
}

}  // namespace qgpu::simt::circuit
