// The SIMT machine's circuit assembled from its units (docs/MACHINE_CIRCUIT.md):
// the pass of an EXEC token, from the record inputs to everything the
// write-back records and the next control record are made of.
//
// Per EXEC token (one block of one warp), in data-dependence order (the weight
// compiler's scheduler places every op at the earliest layer its inputs allow):
//   records + fetch/decode   slot 0's ROM row, decoded; each later slot's destination
//                            and writes bit; the terminator's opcode bits and targets
//                            (fetch_decode.h). Slots 1-3 (and the terminator's operand)
//                            read and decode their rows just in time, before they run
//   control, first part      latches (%ntid, %ctaid, %nctaid), scheduler rows,
//                            everything that does not read a branch condition
//   slot s = 0..3            operand select with bypass from slots < s
//                            (operands.h), then the ALU, the multiplier, the memory
//                            unit and the shuffle unit side by side on the same
//                            operands (each gives exactly 0 for an opcode that is not
//                            its own); the shuffle's last MLP adds the others' results
//                            into the slot's value
//   terminator               operand a of slot 4: read and bypassed from slots 0-2
//                            next to slot 3's operands, [a != 0] per lane at once;
//                            slot 3's bypass joins cond after slot 3 (so slots 0-2's
//                            values die at slot 3's select); each lane's next block
//   control, second part     SCHED groups and the next control record
//   write-back analysis      final ∧ live ∧ changed per slot and lane (wbanalysis.h)
//   sequencer                the write-back plans, stored in pending RAMs; on every
//                            later token its successor: the next token (sequencer.h)
// The outputs are the inputs of the write-back sequencer (writeback.h): the slot
// writes, the block's memory writes, the scheduler groups in the protocol's
// status encoding and the next control record.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "control.h"
#include "fetch_decode.h"
#include "memory.h"
#include "protocol.h"
#include "qgpu/sdk/status.h"
#include "qgpu/weights/circuit.h"
#include "qgpu/weights/compile.h"
#include "register_file.h"
#include "sequencer.h"
#include "wbanalysis.h"
#include "writeback.h"

namespace qgpu::simt::circuit {

inline constexpr int kMachineSlots = 4;  // instruction slots per block (the terminator is slot 4)
// The one slot with a multiplier: the lowering puts a block's multiply (mul, mad) last
// (docs/ISA.md §6). Slot 3 carries the earlier slots' values for its bypass, but in a
// model run what it needs of them dies early, and a multiply last in its block keeps
// the load-then-multiply pattern in one block (the dot product: 22 generated tokens).
inline constexpr int kMulSlot = kMachineSlots - 1;
// The one slot whose memory unit writes (st, atom.*: the lane chain); the others load
// only (no chain: 3-4 layers instead of 10). A block's write follows its reads anyway, so
// the rule costs no tokens over the suite (docs/ISA.md §6).
inline constexpr int kMemWriteSlot = kMachineSlots - 1;

// The residual width the assembled machine compiles to: Qwen3.5-2B's. Its live peak in a
// model run is 1,900 bits (1,912 with MemoryLayout::kWide), one channel each, with the record write data sharing channels
// with the EXEC pass's scratch by token mode (docs/MACHINE_CIRCUIT.md §8.1).
inline constexpr std::int64_t kMachineHidden = 2048;

// One instruction slot after it ran.
struct MachineSlot {
  weights::Word opcode;                          // kOpCount bits, one-hot (decode)
  weights::Word d;                               // 4 bits
  std::array<weights::Word, kProtoLanes> value;  // 32 bits per lane: its result (0 for non-writing opcodes)
};

struct Machine {
  FetchDecode fd;     // record inputs (fd.records), ROM, decode
  RegisterFile regs;  // the register RAMs (lane l: rows warp·16 + register)
  MemoryRams memory;  // the memory banks (kStandard or kWide: shared memory in RAMs of its own)
  Control control;    // scheduler RAMs, latches, next record
  std::array<MachineSlot, kMachineSlots> slot;
  weights::Word cond;                                 // 4 bits: the terminator's per-lane condition
  std::array<weights::Word, kProtoLanes> next_block;  // kProtoBlockBits per lane
  weights::Word exited;                               // 4 bits: the terminator is exit (every lane)
  WbAnalysis wb;
  // The write-back sequencer's inputs.
  std::array<SlotWrite, kWbSlots> writes;
  MemWriteIn mem_writes;
  // Groups 0-1: an EXEC's, from control (its warp); 2-8: a CTA token's "running B0" for
  // warps 1-7 (control's cta_sched). Valid groups are contiguous.
  std::vector<SchedGroup> groups;
  ControlNext next;
  // The write-back sequencer (sequencer.h): the next token to generate, after every
  // EXEC, SYNC, RUN and CTA token and every token of their write-back records.
  SequencerOut sequencer;
};

// Scheduler groups of the machine's write-back sequences: an EXEC's (kExecGroups) then a CTA's.
inline constexpr int kExecGroups = 2;
inline constexpr int kMachineGroups = kExecGroups + kProtoWarps - 1;

// Adds the machine's EXEC pass to `c` (an empty circuit). A CTA token erases the
// register file and the shared memory (Circuit::ram_clear): ISA.md's "registers and
// shared memory start at 0" for every thread block, with no write-back records.
// `choice_gain` scales the next token's fields (build_successor): 1 for the circuit
// alone, a power of two up to 128 for a circuit merged in front of a base model.
// `memory`: kStandard (512 global words) or kWide (1,024, three layers more).
sdk::Expected<Machine> build_machine(weights::Circuit& c, int choice_gain = 1,
                                     MemoryLayout memory = MemoryLayout::kStandard);

// The compile target of the machine: Qwen3.5-2B's layer shapes at kMachineHidden,
// dead fields' channels reused.
weights::Target machine_target();

}  // namespace qgpu::simt::circuit
