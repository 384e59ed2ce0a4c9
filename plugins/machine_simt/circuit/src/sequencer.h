// The write-back sequencer across tokens (docs/MACHINE_CIRCUIT.md §4).
//
// An EXEC token computes its results once; the WREG / WMEM / SCHED records
// that follow it and the next control record are generated one token per
// forward pass, and a later token can see what the EXEC computed only through
// recurrent state. The EXEC pass therefore builds the write-back plans
// (writeback.h) and stores everything the successor needs in **pending RAMs**
// (Gated DeltaNet RAMs of one row, address the constant 0, written with beta =
// exec.is, read on every sequencer token; a read in the write's own layer sees
// the write, so the EXEC reads its own plans). Every token of the sequence
// then computes its identity from its id and the conv1d window (the header of
// a DATA token is at lag = its DATA index) and evaluates build_successor over
// the pending reads.
//
// Pending RAMs (1 row each; 32 bits per value head):
//   pend.dest   dest + emit (or final) of the 4 slots (≤ 32 bits, 1 head): read first, it
//               selects the slot whose values a WREG token needs;
//   pend.s0..3  each slot's 4 lane values (128 bits, 4 heads each) and
//   pend.mem    the memory values in ascending word order (128 bits, 4 heads):
//               read ports sharing one 128-bit window field, z-gated by a
//               one-hot select (the slot writing the current WREG register, or
//               a WMEM token), so only one value set is ever in the residual;
//   pend.ctl    scheduler groups, control record, the EXEC's warp (constant bits of the
//               groups, e.g. a CTA group's warp, status and block, are not stored);
//   pend.wreg   the WREG plan: records per slot, follow / first / last (175 bits, 6 heads);
//   pend.wmem   the WMEM plan: records and words (83 bits, 3 heads).
//
// Together 1,004 bits in 33 value heads; with the 3 window heads (seq.lag1..3,
// 18 bits each) the unit uses 36 q/k heads (one value head each at 2B shapes).
//
// Schedule when every input is in the embedding (the test): layer 0 window
// reads + pend.dest, the identity MLP and the plans' first layers; layer 1 the
// slot value ports (16 heads); layer 2 pend.ctl; layer 3 pend.wreg; layer 4 the
// memory value port; layer 6 pend.wmem and the successor's first MLP; layer 7
// its second: 8 layers, the EXEC's NextToken after the WMEM plan's 6 MLPs + 2.
//
// Identity (one MLP after layer 0's window reads): is_wreg / is_wmem / is_sched,
// the DATA index, the header fields of the current record (a 15-bit union
// field: WREG reg | lanes << 4 | format << 8, WMEM word | count << 10 | format
// << 13, SCHED lanes), the enable (EXEC or one of those) and the window select.
// Its neurons are selectors over record-kind bits: exactly 0 on every other token.
#pragma once

#include <array>
#include <optional>
#include <vector>

#include "qgpu/sdk/status.h"
#include "qgpu/weights/circuit.h"
#include "records.h"
#include "writeback.h"

namespace qgpu::simt::circuit {

// What the EXEC leaves to write back (the same inputs as build_wreg_plan /
// build_wmem_plan / build_successor). Read only on the EXEC token (exec.is of
// `records`); their values on other tokens do not matter.
struct SequencerIn {
  std::array<SlotWrite, kWbSlots> slot;       // emitting slots have distinct destinations
  MemWriteIn mem;                             // `enable` is ignored (the EXEC token's is used)
  std::vector<SchedGroup> sched;              // in stream order; the valid ones contiguous (writeback.h)
  ControlNext control;
  // The tokens that store these inputs as the plan (and read it as "the EXEC"): by
  // default records.exec_is. The machine passes control's `on` (EXEC, SYNC, RUN, CTA): on
  // a SYNC or RUN token every write-back input is 0, so the plan is empty and the next
  // token is the control record; on a CTA token only the new thread block's SCHED
  // groups are valid.
  std::optional<weights::Bit> exec;
  // Optional: per slot, its write is the block's last of its register (wbanalysis's
  // is_final). Given, it replaces emit_s != 0 in telling which slot a WREG token's values
  // come from; known right after decode, it lets the value ports (and the slot values
  // they store) sit next to each slot instead of after the write-back analysis.
  std::optional<std::array<weights::Bit, kWbSlots>> final;
  // Optional: the EXEC's first memory fault (SuccessorIn::fault): the next token may be FAULT.
  std::optional<weights::Word> fault;
  // The NextToken fields' scale (build_successor's choice_gain): 1 for the circuit alone.
  int choice_gain = 1;
};

// The current token's identity as the sequencer derived it (also what build_successor read).
struct SequencerOut {
  NextToken next;
  SuccessorIn current;
  weights::Word window;      // 128 bits: the pending values of the current record
  weights::Word select;      // 5 bits, one-hot: slot 0..3 (WREG), memory (WMEM)
  std::vector<int> pending;  // the pending RAMs
  std::array<int, kWbSlots> slot_values{};  // pend.s0..3: each slot's 4 lane values (lane l: bits 32l..32l+31)
  int pending_bits = 0;      // their total width
};

// Declares the sequencer's header fields on `records` (WREG, WMEM, SCHED), its
// window reads, the pending RAMs, the plans and the successor.
sdk::Expected<SequencerOut> build_sequencer(weights::Circuit& c, const SequencerIn& in, Records& records);

}  // namespace qgpu::simt::circuit
