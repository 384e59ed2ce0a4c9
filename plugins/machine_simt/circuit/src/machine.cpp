#include "machine.h"

#include <utility>

#include "alu.h"
#include "isa.h"
#include "mul.h"
#include "names.h"
#include "operands.h"
#include "qgpu/weights/primitives.h"
#include "shuffle.h"

namespace qgpu::simt::circuit {
namespace {

constexpr int kBlockBits = kProtoBlockBits;
// The lane of the previous slot's memory chain whose load a slot's ROM reads wait for.
constexpr int kFetchLane = kProtoLanes - 2;

template <typename T>
sdk::Status take(sdk::Expected<T> r, T& out) {
  if (!r) return r.status();
  out = std::move(*r);
  return sdk::Status::ok();
}

class Builder {
 public:
  Builder(Circuit& c, int choice_gain, MemoryLayout layout) : c_(c), choice_gain_(choice_gain), layout_(layout) {}
  sdk::Status build();
  Machine& machine() { return m_; }

 private:
  sdk::Status slot(int s);
  // A bit equal to exec.is on every token but final only after `after` (one selector per
  // polarity of `after`): ops gated by it are placed after `after`.
  sdk::Expected<Bit> late_enable(const std::string& name, Bit after);
  sdk::Status terminator();
  // The first memory fault so far in (slot, lane) order, after slot s's checks (fault_).
  sdk::Status fault_code(int s, const Memory& mem);
  sdk::Status outputs();

  Circuit& c_;
  int choice_gain_ = 1;
  MemoryLayout layout_ = MemoryLayout::kStandard;
  Machine m_;
  Bit en_;
  std::vector<Memory> mem_;  // per slot
  Bit reads_after_;          // the bit the last slot's operand reads wait for (the terminator's too)
  TermEarly term_;           // the terminator's opcode bits and targets, fetched at the start (control)
  int bounds_ram_ = -1;      // the launch's memory bounds (BOUND records), read by every memory unit
  Word fault_;               // kFaultCodeBits: the first memory fault so far (SuccessorIn::fault)
};

sdk::Status Builder::build() {
  // The ROM is read slot by slot just before each slot runs (Builder::slot): only slot 0
  // and the terminator's fields that control needs are fetched at the start.
  QGPU_RETURN_IF_ERROR(take(build_fetch_rams(c_, kMachineSlots + 1), m_.fd));
  en_ = m_.fd.exec_is[0];
  // EXEC-only fields (gated by exec.is) and the record tokens' write data (zero on EXEC
  // tokens) may share channels (docs/CIRCUITS.md §4, "Token modes").
  QGPU_RETURN_IF_ERROR(c_.declare_mode_bit(en_));
  QGPU_RETURN_IF_ERROR(take(fetch_term_early(c_, m_.fd, kMachineSlots), term_));
  QGPU_RETURN_IF_ERROR(fetch_slot(c_, m_.fd, 0, en_, "s0"));
  // Every later slot's destination and writes bit (5 bits each) now: the write-back
  // analysis's final bits and the sequencer's value window select depend on them, and
  // the window's read ports (which hold the slots' values live until they run) go early.
  for (int s = 1; s < kMachineSlots; ++s) QGPU_RETURN_IF_ERROR(fetch_dest_early(c_, m_.fd, s));
  ControlIn ci;
  ci.enable = en_;
  ci.warp = m_.fd.exec_warp;
  ci.lanes = m_.fd.exec_lanes;
  ci.term_opcode = term_.opcode;
  ci.term_imm = term_.imm;
  auto stage = begin_control(c_, ci, m_.fd.records);
  if (!stage) return stage.status();
  m_.control = stage->control();
  // The register file and the shared memory (the banks after the global ones) are
  // erased by every CTA token, before their first read port.
  if (layout_ == MemoryLayout::kCompact)
    return sdk::invalid_argument("the machine's shared memory needs banks of its own (kStandard or kWide)");
  QGPU_RETURN_IF_ERROR(take(build_register_file(c_, m_.fd, {}), m_.regs));
  QGPU_RETURN_IF_ERROR(take(build_memory_rams(c_, layout_, m_.fd.records), m_.memory));
  const Bit cta = m_.control.cta_is[0];
  for (int ram : m_.regs.rams) QGPU_RETURN_IF_ERROR(c_.ram_clear(ram, cta));
  for (std::size_t k = static_cast<std::size_t>(bank_row(layout_, true, 0).ram); k < m_.memory.rams.size(); ++k)
    QGPU_RETURN_IF_ERROR(c_.ram_clear(m_.memory.rams[k], cta));
  {  // The bounds of both spaces (rows 0 global, 1 shared), from the prompt's BOUND records.
    BoundWrite bw;
    QGPU_RETURN_IF_ERROR(take(build_bound_write(c_, m_.fd.records), bw));
    QGPU_RETURN_IF_ERROR(take(c_.add_ram("fault", "bounds", 2, kBoundBits), bounds_ram_));
    QGPU_RETURN_IF_ERROR(c_.ram_write(bounds_ram_, Word{bw.row}, bw.words, bw.enable));
  }
  for (int s = 0; s < kMachineSlots; ++s) QGPU_RETURN_IF_ERROR(slot(s));
  QGPU_RETURN_IF_ERROR(terminator());
  QGPU_RETURN_IF_ERROR(take(finish_control(*stage, m_.cond), m_.control));
  return outputs();
}

sdk::Expected<Bit> Builder::late_enable(const std::string& name, Bit after) {
  auto late = c_.computed("machine", name, 1);
  if (!late) return late.status();
  c_.push_enable(en_);
  MlpBuilder op(c_);
  op.select({after}, weights::Affine{{}, 1}, {Term{(*late)[0], 1}});
  op.select({!after}, weights::Affine{{}, 1}, {Term{(*late)[0], 1}});
  sdk::Status st = op.commit("machine." + name);
  c_.pop_enable();
  if (!st.is_ok()) return st;
  return (*late)[0];
}

// Slot s: operands (bypass from the earlier slots), ALU + memory (+ the multiplier in
// slot kMulSlot, the only slot a block may multiply in) on the same operands, their
// results added.
sdk::Status Builder::slot(int s) {
  const std::string so = "s" + std::to_string(s);
  Bit unit_en = en_;  // the enable of the slot's opcode decode and memory unit
  if (s > 0) {
    // The slot's ROM row is read just in time (docs/MACHINE_CIRCUIT.md §8.1): its enable
    // (exec.is, recomputed) waits for the previous slot's memory unit's third lane, two
    // layers before the bit this slot's register reads wait for, which leaves the operand
    // match and keep bits their two MLPs. Its destination and writes bit were fetched at
    // the start (build).
    const Memory& pm = mem_.back();
    Bit fetch_en;
    QGPU_RETURN_IF_ERROR(take(late_enable("fetch.late" + so, pm.lane[kFetchLane].loaded[31]), fetch_en));
    QGPU_RETURN_IF_ERROR(fetch_slot(c_, m_.fd, s, fetch_en, so, false));
    // The reads wait for the previous slot's deepest unit (its memory unit's last lane,
    // final one MLP before the slot's value; its multiplier ends earlier), so that each
    // slot's 384 read bits live for one layer only instead of waiting through the memory
    // unit's chain.
    reads_after_ = pm.lane[kProtoLanes - 1].loaded[31];
    // The units' enable (exec.is, recomputed) waits for the bit the operand reads wait
    // for: the memory unit's opcode-only work
    // and the slot's opcode one-hot (decoded here, next to the operand select, not at the
    // fetch) would otherwise sit in the residual from the fetch on.
    QGPU_RETURN_IF_ERROR(take(late_enable("mem.late" + so, reads_after_), unit_en));
    QGPU_RETURN_IF_ERROR(decode_ops(c_, m_.fd, s, unit_en, so));
  }
  const SlotFields& f = m_.fd.slot[static_cast<std::size_t>(s)];
  OperandsIn oi = operands_in(m_.fd, m_.regs, s);
  oi.ntid = m_.control.ntid;
  oi.ctaid = m_.control.ctaid;
  oi.nctaid = m_.control.nctaid;
  for (int j = 0; j < s; ++j) {
    const MachineSlot& e = m_.slot[static_cast<std::size_t>(j)];
    oi.earlier.push_back(EarlierSlot{e.opcode, e.d, e.value});
  }
  if (s > 0) oi.after = reads_after_;
  OperandsOut ops;
  QGPU_RETURN_IF_ERROR(take(build_operands(c_, oi), ops));

  AluIn ai;
  ai.owner = "alu." + so;
  ai.enable = en_;
  ai.opcode = f.opcode;
  for (int l = 0; l < kProtoLanes; ++l) ai.lane[l] = AluLaneIn{ops.a[l], ops.b[l], ops.c[l]};
  AluOut alu;
  QGPU_RETURN_IF_ERROR(take(build_alu(c_, ai), alu));

  const bool has_mul = s == kMulSlot;
  MulOut mul;
  if (has_mul) {
    MulIn mi;
    mi.owner = "mul." + so;
    mi.enable = en_;
    mi.is_mul = f.opcode[static_cast<int>(Op::kMul)];
    mi.is_mad = f.opcode[static_cast<int>(Op::kMad)];
    mi.a = ops.a;
    mi.b = ops.b;
    mi.c = ops.c;
    QGPU_RETURN_IF_ERROR(take(build_mul(c_, mi), mul));
  }

  MemoryIn me;
  me.owner = "mem." + so;
  me.enable = en_;
  me.enable = unit_en;
  me.writes = s == kMemWriteSlot;
  me.opcode = f.opcode;
  me.shared = f.flag_bits[0];
  me.imm = f.imm;
  for (int l = 0; l < kProtoLanes; ++l) me.active[l] = m_.fd.exec_lanes[l];
  me.a = ops.a;
  me.b = ops.b;
  me.c = ops.c;
  me.bounds = FaultBounds{bounds_ram_};
  Memory mem;
  QGPU_RETURN_IF_ERROR(take(build_memory(c_, m_.memory, me), mem));
  mem_.push_back(mem);
  QGPU_RETURN_IF_ERROR(fault_code(s, mem));

  // The shuffle unit's last MLP adds the other units' results: its d is the slot's value.
  ShuffleIn si;
  si.owner = "shfl." + so;
  si.enable = en_;
  si.opcode = f.opcode;
  si.flags = f.flag_bits;
  si.lanes = m_.fd.exec_lanes;
  si.a = ops.a;
  si.b = ops.b;
  for (int l = 0; l < kProtoLanes; ++l) {
    si.also_add[l] = {alu.d[l], mem.lane[l].loaded};
    if (has_mul) si.also_add[l].push_back(mul.d[l]);
  }
  ShuffleOut sh;
  QGPU_RETURN_IF_ERROR(take(build_shuffle(c_, si), sh));
  MachineSlot& out = m_.slot[static_cast<std::size_t>(s)];
  out.opcode = f.writes_op;  // what later slots and the write-back read: writes_d only
  out.d = f.dest;
  out.value = sh.d;
  return sdk::Status::ok();
}

// The code (SuccessorIn::fault) of the first faulting lane of the block so far: slot s's first
// faulting lane where no earlier slot faulted, else the earlier code. One MLP on the memory
// unit's misaligned / out-of-bounds bits (exclusive per lane): lane l is the first of the slot
// to fault when [f_l − Σ_{k<l} f_k ≥ 1], f = misaligned + out of bounds.
sdk::Status Builder::fault_code(int s, const Memory& mem) {
  Word code;
  QGPU_RETURN_IF_ERROR(take(c_.computed("fault", "code.s" + std::to_string(s), kFaultCodeBits), code));
  const bool chained = s > 0;
  constexpr double kGate = 8;  // ¬(an earlier fault) as a literal: weight 8, the threshold 8 higher
  auto fault_terms = [&](int l, double w) {
    return std::vector<Term>{{mem.lane[l].misaligned, w}, {mem.lane[l].out_of_bounds, w}};
  };
  c_.push_enable(en_);
  MlpBuilder mb(c_);
  sdk::Status st = [&]() -> sdk::Status {
    auto step = [&](std::vector<Term> t, double at, std::vector<Term> outs) -> sdk::Status {
      if (chained) {
        t.push_back(Term{!fault_[0], kGate});
        at += kGate;
      }
      return mb.step(std::move(t), at, outs);
    };
    std::vector<Term> any, slot_bits{{code[0], 1}};
    for (int i = 0; i < 3; ++i)
      if ((s >> i) & 1) slot_bits.push_back(Term{code[1 + i], 1});
    for (int l = 0; l < kProtoLanes; ++l)
      for (const Term& t : fault_terms(l, 1)) any.push_back(t);
    QGPU_RETURN_IF_ERROR(step(any, 1, slot_bits));
    for (int l = 0; l < kProtoLanes; ++l) {
      std::vector<Term> first = fault_terms(l, 1), kind{{mem.lane[l].out_of_bounds, 2}};
      for (int k = 0; k < l; ++k)
        for (const Term& t : fault_terms(k, -1)) {
          first.push_back(t);
          kind.push_back(Term{t.bit, -2});
        }
      std::vector<Term> lane_bits;
      if (l & 1) lane_bits.push_back(Term{code[4], 1});
      if (l & 2) lane_bits.push_back(Term{code[5], 1});
      if (!lane_bits.empty()) QGPU_RETURN_IF_ERROR(step(first, 1, lane_bits));
      QGPU_RETURN_IF_ERROR(step(kind, 2, {Term{code[6], 1}}));
    }
    if (chained)
      for (int b = 0; b < kFaultCodeBits; ++b)
        mb.select({fault_[0], fault_[b]}, weights::Affine{{}, 1}, {Term{code[b], 1}});
    return mb.commit("fault.code.s" + std::to_string(s));
  }();
  c_.pop_enable();
  QGPU_RETURN_IF_ERROR(st);
  fault_ = code;
  return sdk::Status::ok();
}

// The terminator: brc's condition per lane and every lane's next block.
sdk::Status Builder::terminator() {
  // The terminator's operand fields (views only: control took its opcode bits and targets
  // at the start), read one layer after the last slot's row. Its register reads and select
  // then run one layer after the last slot's, so they do not add to that slot's reads (the
  // earlier slots' values live one layer longer for it; measured: model-run peak 2,487
  // bits instead of 2,504 with the terminator's row read next to the last slot's).
  {
    const Memory& pm = mem_[static_cast<std::size_t>(kMachineSlots - 2)];
    Bit en;
    QGPU_RETURN_IF_ERROR(take(late_enable("fetch.late.term", pm.lane[kFetchLane].step), en));
    QGPU_RETURN_IF_ERROR(fetch_slot(c_, m_.fd, kMachineSlots, en, "s" + std::to_string(kMachineSlots), false));
  }
  const TermEarly& t = term_;
  OperandsIn oi = operands_in(m_.fd, m_.regs, kMachineSlots);
  oi.owner = "ops.term";
  oi.ntid = m_.control.ntid;
  oi.ctaid = m_.control.ctaid;
  oi.nctaid = m_.control.nctaid;
  oi.want_b = oi.want_c = false;
  for (const MachineSlot& e : m_.slot) oi.earlier.push_back(EarlierSlot{e.opcode, e.d, e.value});
  // The operand is read and selected from slots 0-2 next to slot 3's operands, and only
  // [a != 0] (4 bits) waits for slot 3: the earlier slots' values (3 × 128 bits) die at
  // slot 3's select instead of living through slot 3. Slot 3's bypass joins the condition.
  const MachineSlot& last = m_.slot[kMachineSlots - 1];
  oi.earlier.back().value = {};
  oi.defer_last = true;
  oi.after = reads_after_;
  OperandsOut ops;
  QGPU_RETURN_IF_ERROR(take(build_operands(c_, oi), ops));
  c_.push_enable(en_);
  sdk::Status st = [&]() -> sdk::Status {
    Word early;  // [a != 0] without slot 3's bypass; exactly 0 where slot 3 bypasses the lane
    QGPU_RETURN_IF_ERROR(take(c_.computed("term", "cond_early", kProtoLanes), early));
    MlpBuilder eop(c_);
    for (int l = 0; l < kProtoLanes; ++l) {
      std::vector<Term> any;
      for (const Bit& b : ops.a[l]) any.push_back(Term{b, 1});
      QGPU_RETURN_IF_ERROR(eop.step(any, 1, {Term{early[l], 1}}));
    }
    QGPU_RETURN_IF_ERROR(eop.commit("term.cond_early"));
    // cond = early ∨ [take_last ∧ active ∧ slot 3's value != 0]: the two are exclusive, and
    // the second is one step on Σ value + 64·take_last + 64·active (≤ 31 above its threshold).
    QGPU_RETURN_IF_ERROR(take(c_.computed("term", "cond", kProtoLanes), m_.cond));
    const Bit take_last = ops.take_last[0];
    MlpBuilder cop(c_);
    for (int l = 0; l < kProtoLanes; ++l) {
      cop.select({early[l]}, weights::Affine{{}, 1}, {Term{m_.cond[l], 1}});
      std::vector<Term> any{Term{take_last, 64}, Term{m_.fd.exec_lanes[l], 64}};
      for (const Bit& b : last.value[l]) any.push_back(Term{b, 1});
      QGPU_RETURN_IF_ERROR(cop.step(any, 129, {Term{m_.cond[l], 1}}));
    }
    QGPU_RETURN_IF_ERROR(cop.commit("term.cond"));
    const Bit br = t.opcode[static_cast<int>(Op::kBr)], brc = t.opcode[static_cast<int>(Op::kBrc)],
              bar = t.opcode[static_cast<int>(Op::kBar)];
    const Word t0 = slice(t.imm, 0, kBlockBits), t1 = slice(t.imm, 16, kBlockBits);
    MlpBuilder nop(c_);
    for (int l = 0; l < kProtoLanes; ++l) {
      QGPU_RETURN_IF_ERROR(take(c_.computed("term", "next" + std::to_string(l), kBlockBits), m_.next_block[l]));
      for (int i = 0; i < kBlockBits; ++i) {
        const std::vector<Term> out{Term{m_.next_block[l][i], 1}};
        const weights::Affine one{{}, 1};
        nop.select({br, t0[i]}, one, out);
        nop.select({bar, t0[i]}, one, out);
        nop.select({brc, m_.cond[l], t0[i]}, one, out);
        nop.select({brc, !m_.cond[l], t1[i]}, one, out);
      }
    }
    QGPU_RETURN_IF_ERROR(nop.commit("term.next"));
    return sdk::Status::ok();
  }();
  c_.pop_enable();
  QGPU_RETURN_IF_ERROR(st);
  const Bit ex = t.opcode[static_cast<int>(Op::kExit)];
  m_.exited = Word(kProtoLanes, ex);
  return sdk::Status::ok();
}

// Write-back analysis and the sequencer's inputs.
sdk::Status Builder::outputs() {
  // The LIVE records write the live-in sets and the shuffle sources (`LIVE exited`,
  // what stays live in exited lanes: PROTOCOL.md §3.3); the analysis owns their RAMs.
  LiveWrite lw;
  QGPU_RETURN_IF_ERROR(take(build_live_write(c_, m_.fd.records), lw));
  WbAnalysisIn wi;
  wi.enable = en_;
  wi.warp = m_.fd.exec_warp;
  wi.lanes = m_.fd.exec_lanes;
  for (int s = 0; s < kWbSlots; ++s) {
    const MachineSlot& e = m_.slot[static_cast<std::size_t>(s)];
    wi.slot[s] = WbSlotIn{e.opcode, e.d, e.value};
  }
  wi.next_block = m_.next_block;
  wi.exited = m_.exited;
  wi.reg_rams = m_.regs.rams;
  wi.live_write = lw;
  // Each slot's register-row reads wait for the slot's value.
  for (int s = 0; s < kWbSlots; ++s) {
    auto late =
        late_enable("wba.late" + std::to_string(s), m_.slot[static_cast<std::size_t>(s)].value[kProtoLanes - 1][31]);
    if (!late) return late.status();
    wi.read_enable[s] = *late;
  }
  QGPU_RETURN_IF_ERROR(take(build_wb_analysis(c_, wi), m_.wb));
  m_.writes = m_.wb.slot;

  // Memory writes: only slot kMemWriteSlot's unit writes (ISA.md §6); its lanes' words
  // and values gated by their write bits, and the space.
  // The memory unit's word (9 bits, kWide 10), zero-extended to the protocol's below.
  const int wbits = static_cast<int>(mem_[kMemWriteSlot].lane[0].word.size());
  c_.push_enable(en_);
  sdk::Status st = [&]() -> sdk::Status {
    MemWriteIn& mw = m_.mem_writes;
    mw.enable = en_;
    const weights::Affine one{{}, 1};
    Word acc;  // per lane: writes, word (wbits), value (32); then shared
    const int lane_bits = 1 + wbits + 32;
    for (int s : {kMemWriteSlot}) {
      Word next;
      QGPU_RETURN_IF_ERROR(take(c_.computed("memw", "s" + std::to_string(s), kProtoLanes * lane_bits + 1), next));
      MlpBuilder op(c_);
      for (std::size_t i = 0; i < acc.size(); ++i) op.select({acc[i]}, one, {Term{next[i], 1}});
      for (int l = 0; l < kProtoLanes; ++l) {
        const MemoryLane& ml = mem_[static_cast<std::size_t>(s)].lane[l];
        const int o = l * lane_bits;
        op.select({ml.writes}, one, {Term{next[o], 1}});
        for (int i = 0; i < wbits; ++i) op.select({ml.writes, ml.word[i]}, one, {Term{next[o + 1 + i], 1}});
        for (int i = 0; i < 32; ++i) op.select({ml.value[i]}, one, {Term{next[o + 1 + wbits + i], 1}});
      }
      // The space: the writing slot's flag (any lane writes).
      std::vector<Term> any;
      for (int l = 0; l < kProtoLanes; ++l) any.push_back(Term{mem_[static_cast<std::size_t>(s)].lane[l].writes, 1});
      any.push_back(Term{m_.fd.slot[static_cast<std::size_t>(s)].flag_bits[0], kProtoLanes});
      QGPU_RETURN_IF_ERROR(op.step(any, kProtoLanes + 1, {Term{next.back(), 1}}));
      QGPU_RETURN_IF_ERROR(op.commit("memw.s" + std::to_string(s)));
      acc = next;
    }
    for (int l = 0; l < kProtoLanes; ++l) {
      const int o = l * lane_bits;
      mw.writes[l] = acc[static_cast<std::size_t>(o)];
      mw.word[l] = slice(acc, o + 1, wbits);
      while (mw.word[l].size() < static_cast<std::size_t>(kProtoWordBits)) mw.word[l].push_back(c_.zero());
      mw.value[l] = slice(acc, o + 1 + wbits, 32);
    }
    mw.shared = acc.back();

    // Scheduler groups, packed (control may leave its first group empty and fill the
    // second; the sequencer takes valid groups first) and in the protocol's status
    // encoding: control's (s1, s0) → LaneStatus bit 1 = s1, bit 0 = [s0 == s1].
    const SchedWrite& g0 = m_.control.groups[0];
    const SchedWrite& g1 = m_.control.groups[1];
    const Bit v0 = g0.valid, v1 = g1.valid;
    constexpr int kGroupBits = 7 + kBlockBits;
    Word pa, pb;  // valid, lanes (4), status (2), block
    QGPU_RETURN_IF_ERROR(take(c_.computed("groups", "first", kGroupBits), pa));
    QGPU_RETURN_IF_ERROR(take(c_.computed("groups", "second", kGroupBits), pb));
    auto fields = [&](const SchedWrite& g) {
      std::vector<std::vector<std::vector<Bit>>> f;  // per output bit: the patterns that set it
      f.push_back({{g.valid}});
      for (int i = 0; i < 4; ++i) f.push_back({{g.lanes[i]}});
      f.push_back({{g.status[0], g.status[1]}, {!g.status[0], !g.status[1]}});
      f.push_back({{g.status[1]}});
      for (int i = 0; i < kBlockBits; ++i) f.push_back({{g.block[i]}});
      return f;
    };
    const auto f0 = fields(g0), f1 = fields(g1);
    MlpBuilder gop(c_);
    for (int b = 0; b < kGroupBits; ++b) {
      for (std::vector<Bit> p : f0[static_cast<std::size_t>(b)]) {  // first = g0 where g0 is valid
        p.push_back(v0);
        gop.select(p, one, {Term{pa[b], 1}});
      }
      for (const std::vector<Bit>& q : f1[static_cast<std::size_t>(b)]) {
        std::vector<Bit> p = q;  // first = g1 where g0 is not valid
        p.push_back(!v0);
        gop.select(p, one, {Term{pa[b], 1}});
        p.back() = v0;  // second = g1 where both are valid
        p.push_back(v1);
        gop.select(p, one, {Term{pb[b], 1}});
      }
    }
    QGPU_RETURN_IF_ERROR(gop.commit("groups.pack"));
    for (int g = 0; g < kExecGroups; ++g) {
      const Word& w = g == 0 ? pa : pb;
      m_.groups.push_back(SchedGroup{w[0], slice(w, 1, 4), slice(w, 5, 2), slice(w, 7, kBlockBits), {}});
    }
    return sdk::Status::ok();
  }();
  c_.pop_enable();
  QGPU_RETURN_IF_ERROR(st);
  // A CTA token's groups: SCHED w <lanes> running B0 for warps 1-7 (control's cta_sched;
  // the existing warps come first, so the valid groups are contiguous).
  {
    Word valid;
    QGPU_RETURN_IF_ERROR(take(c_.computed("groups", "cta_valid", kProtoWarps - 1), valid));
    c_.push_enable(m_.control.cta_is[0]);
    MlpBuilder op(c_);
    for (int v = 1; v < kProtoWarps; ++v) {
      std::vector<Term> any;
      for (int l = 0; l < kProtoLanes; ++l) any.push_back(Term{m_.control.cta_sched[v * kProtoLanes + l], 1});
      QGPU_RETURN_IF_ERROR(op.step(any, 1, {Term{valid[v - 1], 1}}));
    }
    sdk::Status vs = op.commit("groups.cta");
    c_.pop_enable();
    QGPU_RETURN_IF_ERROR(vs);
    for (int v = 1; v < kProtoWarps; ++v)
      m_.groups.push_back(SchedGroup{valid[v - 1], slice(m_.control.cta_sched, v * kProtoLanes, kProtoLanes),
                                     Word(2, c_.zero()),  // LaneStatus::kRunning
                                     Word(kBlockBits, c_.zero()),
                                     weights::constant_word(c_, static_cast<unsigned>(v), 3)});
  }
  const ControlRecord& r = m_.control.next;
  m_.next.exec = r.kind[static_cast<int>(NextKind::kExec)];
  m_.next.sync = r.kind[static_cast<int>(NextKind::kSync)];
  m_.next.cta = r.kind[static_cast<int>(NextKind::kCta)];
  m_.next.halt = r.kind[static_cast<int>(NextKind::kHalt)];
  m_.next.block = r.block;
  m_.next.warp = r.warp;
  m_.next.lanes = r.lanes;
  m_.next.cta_index = slice(r.cta, 0, 7);

  SequencerIn qi;
  qi.slot = m_.writes;
  qi.mem = m_.mem_writes;
  qi.sched = m_.groups;
  qi.control = m_.next;
  qi.exec = m_.control.on[0];
  qi.final = m_.wb.is_final;
  qi.fault = fault_;
  qi.choice_gain = choice_gain_;
  return take(build_sequencer(c_, qi, m_.fd.records), m_.sequencer);
}

}  // namespace

weights::Target machine_target() {
  weights::Target t;
  t.shapes = weights::qwen35_2b_shapes();
  t.shapes.hidden_size = kMachineHidden;
  t.keep_unread_fields = false;
  return t;
}

sdk::Expected<Machine> build_machine(Circuit& c, int choice_gain, MemoryLayout memory) {
  Builder b(c, choice_gain, memory);
  QGPU_RETURN_IF_ERROR(b.build());
  return std::move(b.machine());
}

}  // namespace qgpu::simt::circuit
