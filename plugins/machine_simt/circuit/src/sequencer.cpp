#include "sequencer.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <string>

#include "names.h"
#include "qgpu/weights/primitives.h"

namespace qgpu::simt::circuit {
namespace {

constexpr const char* kOwner = "seq";
constexpr int kHdrBits = kProtoWordBits + 5;  // the union of the current record's header fields (WMEM: word, count, format)
constexpr int kLagBits = 3 + kHdrBits;
const Affine kOne{{}, 1};

Affine bit_of(Bit b) {
  return Affine{{Term{b, 1}}, 0};
}

// One pending RAM (one row at the constant address 0): the words `parts` point
// to, concatenated, are written on the EXEC token and read back under
// `read_enable`; each part is then replaced by its slice of the read.
class Pending {
 public:
  Pending(Circuit& c, Bit exec) : c_(c), exec_(exec) {}
  void add(Word* w) { parts_.push_back(w); }
  void add(Bit* b) { bits_.push_back(b); }
  // Constant bits (Circuit::one / zero) are not stored: they stay what they are.
  sdk::Status store(const std::string& name, std::optional<Bit> read_enable, SequencerOut& out) {
    auto stored = [](Bit b) { return b.field != 0; };
    Word data;
    for (Word* w : parts_) std::copy_if(w->begin(), w->end(), std::back_inserter(data), stored);
    for (Bit* b : bits_)
      if (stored(*b)) data.push_back(*b);
    if (data.empty()) return sdk::invalid_argument("pending RAM " + name + ": every bit is constant");
    auto ram = c_.add_ram(kOwner, name, 1, static_cast<int>(data.size()));
    if (!ram) return ram.status();
    const Word row0{c_.zero()};
    QGPU_RETURN_IF_ERROR(c_.ram_write(*ram, row0, data, exec_));
    auto r = c_.ram_read(*ram, name, row0, read_enable);
    if (!r) return r.status();
    out.pending.push_back(*ram);
    out.pending_bits += static_cast<int>(data.size());
    std::size_t pos = 0;
    for (Word* w : parts_)
      for (Bit& b : *w)
        if (stored(b)) b = (*r)[pos++];
    for (Bit* b : bits_)
      if (stored(*b)) *b = (*r)[pos++];
    parts_.clear();
    bits_.clear();
    return sdk::Status::ok();
  }

 private:
  Circuit& c_;
  Bit exec_;
  std::vector<Word*> parts_;
  std::vector<Bit*> bits_;
};

sdk::Status check_widths(const SequencerIn& in) {
  for (const SlotWrite& s : in.slot) {
    if (s.dest.size() != 4 || s.emit.size() != 4) return sdk::invalid_argument("sequencer: dest and emit are 4 bits");
    for (const Word& v : s.value)
      if (v.size() != 32) return sdk::invalid_argument("sequencer: lane values are 32 bits");
  }
  for (const SchedGroup& g : in.sched)
    if (g.lanes.size() != 4 || g.status.size() != 2 || g.block.size() != kProtoBlockBits)
      return sdk::invalid_argument("sequencer: a scheduler group is lanes 4, status 2, block " + std::to_string(kProtoBlockBits) + " bits");
  const ControlNext& k = in.control;
  if (k.block.size() != kProtoBlockBits || k.warp.size() != 3 || k.lanes.size() != 4 || k.cta_index.size() != 7)
    return sdk::invalid_argument("sequencer: the control record is block " + std::to_string(kProtoBlockBits) + ", warp 3, lanes 4, cta 7 bits");
  return sdk::Status::ok();
}

}  // namespace

sdk::Expected<SequencerOut> build_sequencer(Circuit& c, const SequencerIn& in, Records& rec) {
  QGPU_RETURN_IF_ERROR(check_widths(in));
  if (rec.exec_is.size() != 1 || rec.exec_warp.size() != 3 || rec.data_is.size() != 1)
    return sdk::invalid_argument("sequencer: the records have no EXEC / DATA fields (build_records first)");
  SequencerOut out;
  // The tokens that store a plan: EXEC tokens, or the caller's wider set (SYNC and RUN
  // tokens store an empty plan whose first token is the control record).
  const Bit exec = in.exec.value_or(rec.exec_is[0]);

  // --- Header fields: the kind (WREG, WMEM, SCHED header) and the union of their fields.
  auto kind = rec.add_header_field(c, RecordKind::kWreg, kOwner, "kind", 3,
                                   [](const Record&) -> sdk::Expected<std::uint64_t> { return 1; });
  if (!kind) return kind.status();
  rec.bind(RecordKind::kWmem, *kind, [](const Record&) -> sdk::Expected<std::uint64_t> { return 2; });
  rec.bind(RecordKind::kSched, *kind, [](const Record&) -> sdk::Expected<std::uint64_t> { return 4; });
  auto hdr = rec.add_header_field(c, RecordKind::kWreg, kOwner, "hdr", kHdrBits,
                                  [](const Record& r) -> sdk::Expected<std::uint64_t> {
                                    return r.reg | r.lanes << 4 | static_cast<std::uint32_t>(r.format) << 8;
                                  });
  if (!hdr) return hdr.status();
  rec.bind(RecordKind::kWmem, *hdr, [](const Record& r) -> sdk::Expected<std::uint64_t> {
    return r.word | r.count << kProtoWordBits | static_cast<std::uint32_t>(r.format) << (kProtoWordBits + 3);
  });
  rec.bind(RecordKind::kSched, *hdr, [](const Record& r) -> sdk::Expected<std::uint64_t> {
    return r.lanes | r.warp << 4;
  });

  // --- Layer 0's window: per lag p = 1..3, (WREG header, WMEM header, DATA, header fields); one head each.
  Word src{(*kind)[0], (*kind)[1], rec.data_is[0]};
  src.insert(src.end(), hdr->begin(), hdr->end());
  std::array<Word, 4> lag;  // lag[0]: the current token
  lag[0] = src;
  for (int p = 1; p <= 3; ++p) {
    auto w = c.previous("lag" + std::to_string(p), src, p, std::nullopt);  // seq.lagP
    if (!w) return w.status();
    lag[p] = *w;
  }
  auto wk = [&](int p) { return lag[p][0]; };
  auto mk = [&](int p) { return lag[p][1]; };
  auto hdr_at = [&](int p) { return slice(lag[p], 3, kHdrBits); };
  // The current token belongs to the header at lag p: p = 0 a header itself, else a DATA token
  // whose lags 1..p-1 are DATA and lag p is the header (`k` is that header's kind bit).
  auto at = [&](int p, Bit k) {
    std::vector<Bit> m;
    if (p > 0) m.push_back(rec.data_is[0]);
    for (int q = 1; q < p; ++q) m.push_back(lag[q][2]);
    m.push_back(k);
    return m;
  };

  // --- Pending slot destinations (read on every token: the window select needs them in MLP 0).
  Pending pend(c, exec);
  // `emit` here is what tells the slot of a WREG register among slots of the same
  // destination: emit_s (4 bits), or the slot's final bit where the caller gives it.
  std::array<Word, kWbSlots> dest, emit;
  for (int s = 0; s < kWbSlots; ++s) {
    dest[s] = in.slot[s].dest;
    emit[s] = in.final ? Word{(*in.final)[s]} : in.slot[s].emit;
    pend.add(&dest[s]);
  }
  for (int s = 0; s < kWbSlots; ++s) pend.add(&emit[s]);
  QGPU_RETURN_IF_ERROR(pend.store("pend.dest", std::nullopt, out));

  // --- Identity (one MLP): kinds, DATA index, header fields, enable, window select.
  auto flags = c.computed(kOwner, "cur.flags", 5);  // is_wreg, is_sched, enable, index (2 bits)
  if (!flags) return flags.status();
  auto cur_hdr = c.computed(kOwner, "cur.hdr", kHdrBits);
  if (!cur_hdr) return cur_hdr.status();
  auto sel = c.computed(kOwner, "select", kWbSlots + 1);
  if (!sel) return sel.status();
  const Bit is_wreg = (*flags)[0], is_sched = (*flags)[1], enable = (*flags)[2];
  const Word index = slice(*flags, 3, 2);
  const Bit is_wmem = (*sel)[kWbSlots];
  {
    MlpBuilder mb(c);
    mb.select({exec}, kOne, {Term{enable, 1}});
    mb.select({(*kind)[2]}, kOne, {Term{is_sched, 1}, Term{enable, 1}});
    for (int j = 0; j < kHdrBits; ++j) mb.select({(*hdr)[j]}, kOne, {Term{(*cur_hdr)[j], 1}});
    for (int p = 0; p <= 3; ++p)
      for (Bit k : {wk(p), mk(p)}) {
        const auto m = at(p, k);
        std::vector<Term> o{Term{k == wk(p) ? is_wreg : is_wmem, 1}, Term{enable, 1}};
        if (p & 1) o.push_back(Term{index[0], 1});
        if (p & 2) o.push_back(Term{index[1], 1});
        mb.select(m, kOne, o);
        if (p > 0)
          for (int j = 0; j < kHdrBits; ++j) mb.select(m, bit_of(hdr_at(p)[j]), {Term{(*cur_hdr)[j], 1}});
      }
    // Slot s holds the current WREG register: dest_s == reg and emit_s != 0 (or final_s),
    // i.e. for x = dest_s - reg and E = |emit_s|: [8x + E >= 1] - [x >= 1], each step also
    // requiring every bit G of at(p) (128·ΣG and 16·ΣG against |G|: one missing bit
    // outweighs the largest 8x + E = 124, resp. x = 15).
    for (int s = 0; s < kWbSlots; ++s)
      for (int p = 0; p <= 3; ++p) {
        const auto g = at(p, wk(p));
        const double n = static_cast<double>(g.size());
        const Word reg = slice(hdr_at(p), 0, 4);
        std::vector<Term> a, b;
        for (Bit e : emit[s]) a.push_back(Term{e, 1});
        for (int j = 0; j < 4; ++j) {
          a.push_back(Term{dest[s][j], 8.0 * (1 << j)});
          a.push_back(Term{reg[j], -8.0 * (1 << j)});
          b.push_back(Term{dest[s][j], 1.0 * (1 << j)});
          b.push_back(Term{reg[j], -1.0 * (1 << j)});
        }
        for (Bit x : g) {
          a.push_back(Term{x, 128});
          b.push_back(Term{x, 16});
        }
        QGPU_RETURN_IF_ERROR(mb.step(a, 128 * n + 1, {Term{(*sel)[s], 1}}));
        QGPU_RETURN_IF_ERROR(mb.step(b, 16 * n + 1, {Term{(*sel)[s], -1}}));
      }
    QGPU_RETURN_IF_ERROR(mb.commit(std::string(kOwner) + ".identity"));
  }
  // Emitting slots have distinct destinations and a token is one kind: at most one select bit is 1.
  QGPU_RETURN_IF_ERROR(c.declare_one_hot(*sel));

  // --- The plans, on the EXEC token.
  WregPlanIn wpin;
  wpin.enable = exec;
  wpin.slot = in.slot;
  auto wplan = build_wreg_plan(c, wpin);
  if (!wplan) return wplan.status();
  MemWriteIn min = in.mem;
  min.enable = exec;
  auto mplan = build_wmem_plan(c, min);
  if (!mplan) return mplan.status();

  // --- The value window: the slot of the current WREG register, or the memory values.
  std::vector<weights::RamReadSpec> ports;
  for (int s = 0; s <= kWbSlots; ++s) {
    Word data;
    const auto& vals = s < kWbSlots ? in.slot[s].value : mplan->pos_value;
    for (const Word& v : vals) data.insert(data.end(), v.begin(), v.end());
    const std::string name = s < kWbSlots ? "pend.s" + std::to_string(s) : std::string("pend.mem");
    auto ram = c.add_ram(kOwner, name, 1, static_cast<int>(data.size()));
    if (!ram) return ram.status();
    QGPU_RETURN_IF_ERROR(c.ram_write(*ram, Word{c.zero()}, data, exec));
    out.pending.push_back(*ram);
    if (s < kWbSlots) out.slot_values[static_cast<std::size_t>(s)] = *ram;
    out.pending_bits += static_cast<int>(data.size());
    ports.push_back(weights::RamReadSpec{*ram, Word{c.zero()}, (*sel)[s], 0});
  }
  auto window = c.ram_read_shared(kOwner, "window", ports);
  if (!window) return window.status();
  out.window = *window;
  out.select = *sel;
  std::array<Word, kProtoLanes> lanes;
  for (int l = 0; l < kProtoLanes; ++l) lanes[l] = slice(*window, 32 * l, 32);

  // --- Scheduler groups, control record, the EXEC's warp.
  std::vector<SchedGroup> sched = in.sched;
  ControlNext ctl = in.control;
  Word warp = rec.exec_warp;
  for (SchedGroup& g : sched) {
    pend.add(&g.valid);
    pend.add(&g.lanes);
    pend.add(&g.status);
    pend.add(&g.block);
    if (!g.warp.empty()) pend.add(&g.warp);
  }
  for (Bit* b : {&ctl.exec, &ctl.sync, &ctl.cta, &ctl.halt}) pend.add(b);
  for (Word* w : {&ctl.block, &ctl.warp, &ctl.lanes, &ctl.cta_index, &warp}) pend.add(w);
  QGPU_RETURN_IF_ERROR(pend.store("pend.ctl", enable, out));

  // --- The WREG plan (what the successor reads of it; the destinations come from pend.dest).
  WregPlan wp = *wplan;
  for (int s = 0; s < kWbSlots; ++s) {
    wp.slot[s].dest = dest[s];
    wp.slot[s].emit.clear();
    for (Word& v : wp.slot[s].value) v.clear();
    for (int k = 0; k < kWbRecords; ++k) {
      pend.add(&wp.rec_lanes[s][k]);
      pend.add(&wp.rec_format[s][k]);
      pend.add(&wp.rec_valid[s][k]);
    }
    pend.add(&wp.follow[s].valid);
    pend.add(&wp.follow[s].reg);
    pend.add(&wp.follow[s].lanes);
    pend.add(&wp.follow[s].format);
  }
  pend.add(&wp.first.valid);
  pend.add(&wp.first.reg);
  pend.add(&wp.first.lanes);
  pend.add(&wp.first.format);
  pend.add(&wp.last.reg);
  pend.add(&wp.last.lanes);
  wp.last.valid = c.zero();  // not read by the successor
  wp.last.format.clear();
  QGPU_RETURN_IF_ERROR(pend.store("pend.wreg", enable, out));

  // --- The WMEM plan.
  WmemPlan mp = *mplan;
  for (Word& v : mp.pos_value) v.clear();
  pend.add(&mp.shared);
  for (int r = 0; r < kWmRecords; ++r) {
    pend.add(&mp.rec_valid[r]);
    pend.add(&mp.rec_start[r]);
    pend.add(&mp.rec_count[r]);
    pend.add(&mp.rec_format[r]);
    pend.add(&mp.rec_word[r]);
  }
  pend.add(&mp.last_word);
  QGPU_RETURN_IF_ERROR(pend.store("pend.wmem", enable, out));

  // --- The successor.
  SuccessorIn sin;
  sin.enable = enable;
  sin.is_exec = exec;
  sin.is_wreg = is_wreg;
  sin.is_wmem = is_wmem;
  sin.is_sched = is_sched;
  sin.index = index;
  sin.wreg_reg = slice(*cur_hdr, 0, 4);
  sin.wreg_lanes = slice(*cur_hdr, 4, 4);
  sin.wreg_format = slice(*cur_hdr, 8, 2);
  sin.wmem_word = slice(*cur_hdr, 0, kProtoWordBits);
  sin.wmem_count = slice(*cur_hdr, kProtoWordBits, 3);
  sin.wmem_format = slice(*cur_hdr, kProtoWordBits + 3, 2);
  sin.sched_lanes = slice(*cur_hdr, 0, 4);
  sin.sched_warp = slice(*cur_hdr, 4, 3);
  sin.warp = warp;
  sin.fault = in.fault;
  auto next = build_successor(c, wp, mp, sched, ctl, sin, &lanes, in.choice_gain);
  if (!next) return next.status();
  out.next = *next;
  out.current = sin;
  return out;
}

}  // namespace qgpu::simt::circuit
