// Circuit unit "write-back analysis": which lanes of which slot an EXEC writes
// back as WREG records (docs/PROTOCOL.md §3.3, docs/MACHINE_CIRCUIT.md §3).
//
// Per instruction slot s and lane l the unit decides
//   final_s  = the opcode writes d, d_s != r0, and no later slot of the block
//              writes d_s (only the block's last write of a register matters);
//   emit_s,l = l in the EXEC mask ∧ final_s ∧ d_s live at l's next block
//              ∧ value_s,l != the register row (warp, d_s) of lane l,
// where "live" is bit d_s of the LIVE row of the lane's next block, or, for a
// lane that exited in this block, bit d_s of the shuffle-source mask (a
// shuffle may read an exited lane's register; protocol.cpp's recorder).
//
// State, owned by this unit and written by the LIVE records' write port
// (records.h LiveWrite): the LIVE RAM (32 rows = block, 16 bits; `LIVE B`) and
// the shuffle-source RAM (1 row, 16 bits; `LIVE exited`, never written when no
// shuffle reads a register: then it reads 0). The register rows are read from
// the register file's lane RAMs (register_file.h).
//
// Schedule (each op at the earliest layer its inputs allow):
//   MLP   conflict: per slot pair s < t, writes_t ∧ d_t == d_s      (from decode)
//   MLP   final_s                                                   (from decode)
//   GDN   16 read ports: lane l's register row (warp, d_s), per slot
//   MLP   per (slot, lane, byte) e = [value byte == row byte]       (with the reads)
//   GDN   4 read ports: the LIVE row of each lane's next block
//   GDN   1 read port: the shuffle-source row (enabled by the last slot's read_enable)
//   MLP   emit: one threshold per (slot, lane, register, live source)
// so the unit adds 2 layers after the slots' values and 1 layer after the
// lanes' next blocks. Every neuron and read is gated by `enable`.
#pragma once

#include <array>
#include <optional>

#include "protocol.h"
#include "qgpu/sdk/status.h"
#include "qgpu/weights/circuit.h"
#include "records.h"
#include "writeback.h"

namespace qgpu::simt::circuit {

// One instruction slot as decode and the execution units leave it.
struct WbSlotIn {
  weights::Word opcode;                          // kOpCount bits, one-hot (all 0: writes nothing)
  weights::Word d;                               // 4 bits: the destination register
  std::array<weights::Word, kProtoLanes> value;  // 32 bits per lane: the slot's result
};

struct WbAnalysisIn {
  weights::Bit enable;  // exec.is
  weights::Word warp;   // 3 bits: the EXEC's warp
  weights::Word lanes;  // 4 bits: the EXEC's lane mask
  std::array<WbSlotIn, kWbSlots> slot;
  // Each lane's state after the block (control): its next block, and whether it exited
  // (then its next block is ignored).
  std::array<weights::Word, kProtoLanes> next_block;        // kProtoBlockBits per lane
  weights::Word exited;                                     // 4 bits: bit l = lane l exited
  std::array<int, kProtoLanes> reg_rams{{-1, -1, -1, -1}};  // RegisterFile::rams: rows warp·16 + register
  LiveWrite live_write;  // the LIVE and shuffle-source RAMs' write port (a LIVE record's DATA token)
  // Per slot, optional: the enable of its 4 register-row reads instead of `enable` (equal to
  // it on every token, but final later), so that the reads land next to the slot's value
  // instead of right after decode. The last slot's also enables the shuffle-source read.
  std::array<std::optional<weights::Bit>, kWbSlots> read_enable;
};

struct WbAnalysis {
  int live_ram = -1;
  int shuffled_ram = -1;
  std::array<weights::Bit, kWbSlots> is_final{};  // the slot's write is the block's last of its register
  // Per slot: dest = d (a view), emit (computed, 0 on every other token), value = the inputs.
  std::array<SlotWrite, kWbSlots> slot;
};

// Adds the LIVE RAM and the analysis to `c`. Errors name the input of the wrong width.
sdk::Expected<WbAnalysis> build_wb_analysis(weights::Circuit& c, const WbAnalysisIn& in);

}  // namespace qgpu::simt::circuit
