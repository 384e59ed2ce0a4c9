// Register write-back sequencing (docs/MACHINE_CIRCUIT.md §4): the plan an
// EXEC token computes from its results, and the successor function that every
// following token evaluates to choose the next WREG header or DATA token.
//
// Plan (3 MLP layers, on the EXEC token): per slot the value class of each
// lane (zero / int8 / int16 / word), the protocol's split of the slot's
// emitted lanes into records (PROTOCOL.md §3.4, a table per slot), the order
// of the slots by destination register, and for each slot the first record of
// the slot that follows it ("follow").
//
// Successor (2 MLP layers, on any token): given the plans, the scheduler
// groups and the control record (PROTOCOL.md §3.3 order: WREG, WMEM, SCHED,
// then EXEC / SYNC / CTA / HALT) and the current token — the EXEC itself, or a
// header / DATA token of a write-back record described by its header's fields
// and DATA index — the next token.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "protocol.h"
#include "qgpu/sdk/status.h"
#include "qgpu/weights/circuit.h"

namespace qgpu::simt::circuit {

inline constexpr int kWbSlots = 4;    // instruction slots that can write a register
inline constexpr int kWbRecords = 4;  // records one register's lanes can split into

// What one instruction slot leaves to write back. Emitting slots must have
// distinct destinations (the machine keeps only the block's last write of a register).
struct SlotWrite {
  weights::Word dest;                            // 4 bits (1..15 when emit != 0)
  weights::Word emit;                            // 4 bits: lanes whose value is written back
  std::array<weights::Word, kProtoLanes> value;  // 32 bits per lane
};

struct WregPlanIn {
  weights::Bit enable;  // the EXEC token
  std::array<SlotWrite, kWbSlots> slot;
};

// A WREG header's fields as the circuit carries them.
struct WregHeader {
  weights::Bit valid;
  weights::Word reg;     // 4 bits
  weights::Word lanes;   // 4 bits
  weights::Word format;  // 2 bits (ValueFormat)
};

struct WregPlan {
  std::array<SlotWrite, kWbSlots> slot;  // the inputs, carried for the successor
  // Per slot, per record k: lanes (0 when there is no record k), format, valid.
  std::array<std::array<weights::Word, kWbRecords>, kWbSlots> rec_lanes, rec_format;
  std::array<std::array<weights::Bit, kWbRecords>, kWbSlots> rec_valid;
  std::array<WregHeader, kWbSlots> follow;  // first record of the next slot in register order
  WregHeader first;                         // the first record of all
  WregHeader last;                          // the last record of all (its reg and lanes identify it)
};

sdk::Expected<WregPlan> build_wreg_plan(weights::Circuit& c, const WregPlanIn& in);

// Memory words an EXEC writes back (from the memory unit): per lane, whether
// the lane's word is written (the lane is the last writer of that word), the
// word (kProtoWordBits) and its final value; one space for the whole block.
struct MemWriteIn {
  weights::Bit enable;  // the EXEC token
  weights::Bit shared;
  std::array<weights::Bit, kProtoLanes> writes;
  std::array<weights::Word, kProtoLanes> word;   // kProtoWordBits
  std::array<weights::Word, kProtoLanes> value;  // 32 bits
};

struct WmemHeader {
  weights::Bit valid;
  weights::Bit shared;
  weights::Word word;    // kProtoWordBits
  weights::Word count;   // 3 bits (1..4)
  weights::Word format;  // 2 bits
};

inline constexpr int kWmRecords = 4;

// The WMEM records of an EXEC (5 MLP layers): the written words in ascending
// order (positions), maximal runs of consecutive words split as protocol.h's
// wmem_records() does; record r starts at position start[r].
struct WmemPlan {
  weights::Bit shared;
  std::array<weights::Word, kProtoLanes> pos_value;  // values in ascending word order
  std::array<weights::Bit, kWmRecords> rec_valid;
  std::array<weights::Word, kWmRecords> rec_start, rec_count, rec_format, rec_word;  // 2, 3, 2, kProtoWordBits bits
  weights::Word last_word;  // the last record's word (identifies it)
};

sdk::Expected<WmemPlan> build_wmem_plan(weights::Circuit& c, const MemWriteIn& in);

// Scheduler groups and the control record from the control unit.
// One SCHED record a write-back sequence may emit. The valid groups of a sequence are
// contiguous (the first valid one is emitted first, then the next while valid).
struct SchedGroup {
  weights::Bit valid;
  weights::Word lanes;   // 4 bits
  weights::Word status;  // 2 bits (LaneStatus)
  weights::Word block;   // kProtoBlockBits
  weights::Word warp;    // 3 bits, or empty: the EXEC's warp (SuccessorIn::warp)
};
struct ControlNext {
  weights::Bit exec, sync, cta, halt;  // one-hot: the record after the write-backs
  weights::Word block, warp, lanes;    // EXEC: kProtoBlockBits, 3, 4 bits
  weights::Word cta_index;             // CTA: 7 bits
};

// The token being read (after the EXEC: the EXEC itself, or a header / DATA
// token of a write-back record, identified by its header's fields and index).
struct SuccessorIn {
  weights::Bit enable;   // a token of the write-back sequence (EXEC included)
  weights::Bit is_exec;  // the current token is the EXEC
  weights::Bit is_wreg;  // a WREG header or one of its DATA tokens
  weights::Bit is_wmem;  // a WMEM header or one of its DATA tokens
  weights::Bit is_sched;
  weights::Word index;                               // 2 bits: 0 = the header, i = its i-th DATA token
  weights::Word wreg_reg, wreg_lanes, wreg_format;   // 4, 4, 2 bits
  weights::Word wmem_word, wmem_count, wmem_format;  // kProtoWordBits, 3, 2 bits
  weights::Word sched_lanes;                         // 4 bits
  weights::Word sched_warp;  // 3 bits: the SCHED header's warp (read where a group names its warp)
  weights::Word warp;        // 3 bits: the EXEC's warp (WREG and SCHED headers carry it)
  // The EXEC's first memory fault (kFaultCodeBits, 0 on other tokens): bit 0 a fault, bits 1-3
  // its slot, bits 4-5 its lane, bit 6 out of bounds (else misaligned). Given, the next token
  // may be FAULT (NextToken::fault); without it the circuit never generates FAULT.
  std::optional<weights::Word> fault;
};
inline constexpr int kFaultCodeBits = 7;

// The next token, one-hot over its kind, with the kind's fields.
struct NextToken {
  weights::Bit wreg, wmem, sched, data, exec, sync, cta, halt;
  weights::Word warp;                               // WREG, SCHED, EXEC: 3 bits
  weights::Word wreg_reg, wreg_lanes, wreg_format;  // 4, 4, 2
  weights::Bit wmem_shared;
  weights::Word wmem_word, wmem_count, wmem_format;      // kProtoWordBits, 3, 2
  weights::Word sched_lanes, sched_status, sched_block;  // 4, 2, kProtoBlockBits
  weights::Word exec_block, exec_lanes;                  // kProtoBlockBits, 4
  weights::Word cta_index;                               // 7
  weights::Word data_value;                              // 16
  // FAULT (its kind bit outweighs the others': record_unembedding), its slot, lane and kind;
  // constants 0 where the successor has no fault input.
  weights::Bit fault;
  weights::Word fault_slot, fault_lane;  // 3, 2
  weights::Bit fault_kind;               // 1: out of bounds
  // 1 on every token of the write-back sequence (where a next token is chosen): the
  // unembedding's constant, scaled with the fields by the choice gain.
  weights::Bit one;
};

// The NextToken fields that carry channels (the constant bits excluded), `one` last.
weights::Word choice_bits(const NextToken& n);

// With `window` (the sequencer's pending reads, docs/MACHINE_CIRCUIT.md §4.2) the DATA
// values come from one 4 × 32-bit field that already holds, on a WREG token, the lane
// values of the slot writing the current register and, on a WMEM token, the memory
// values in ascending word order (WmemPlan::pos_value); wreg.slot[s].value and
// wmem.pos_value are then not read. Without it they are taken from the plans.
//
// `choice_gain` (a power of two, 1 to kMaxChoiceGain) scales the NextToken fields: a bit
// is ±gain·u instead of ±u on the tokens it is computed on (the same MLP writes gain × its
// value and moves the placeholder by -gain/2 + 1/2, every weight bf16-exact). A merged
// model's choice reads these fields after the base's layers and its final norm:
// amplified, they dominate the residual there, so what the base adds hardly moves the
// logits. Nothing in the circuit may read them after this (their normalized value is no
// longer 0/1).
// The largest gain: the fields at ±2^18·u = ±2^21, every sum in the MLP's down projection
// a multiple of u well inside fp32's exact integers. bf16 rounds the MLP's output
// (gain ± 1)·u: exact up to 128; from 512 on it rounds to ±gain·u and the residual's sum
// lands on ±gain·u exactly; at 256 it would end one u short (refused).
inline constexpr int kMaxChoiceGain = 1 << 18;
// The merged machine's gain (docs/MACHINE_CIRCUIT.md §5): the largest. On the stress base
// (qgpu-synth-qwen35 --stress, whose layers add ~1.6e4 to every channel of a record token)
// 128 let the base change the choice at the first token; 2^16 and 2^18 kept it.
inline constexpr int kMergedChoiceGain = kMaxChoiceGain;
sdk::Expected<NextToken> build_successor(weights::Circuit& c, const WregPlan& wreg, const WmemPlan& wmem,
                                         std::span<const SchedGroup> sched, const ControlNext& control,
                                         const SuccessorIn& in,
                                         const std::array<weights::Word, kProtoLanes>* window = nullptr,
                                         int choice_gain = 1);

// The split table's oracle-independent description: for lane classes
// (0 zero, 1 int8, 2 int16, 3 word) and an emit mask, the records
// (lanes, format) the protocol emits, computed with protocol.h's wreg_records().
std::vector<std::pair<std::uint32_t, ValueFormat>> wreg_split(std::uint32_t emit, const std::array<int, 4>& cls);

}  // namespace qgpu::simt::circuit
