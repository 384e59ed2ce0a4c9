// Circuit unit "control": the scheduler state, the launch latches and the
// choice of the next control record (docs/ISA.md §5, docs/PROTOCOL.md §2-§3.3).
//
// State (Gated DeltaNet RAMs, CIRCUITS.md §3):
//   sched.lane<L>  8 rows (warp) x 7 bits: bit 0 s0, bit 1 s1, bits 2-6 the pending block;
//                  (s1, s0) = exited 00, running 01, barrier.even 10, barrier.odd 11, so a
//                  row never written (a warp the thread block lacks) reads as exited.
//   ctl.launch     1 row: threads (6 bits) + grid (8 bits), written by LAUNCH
//   ctl.cta        1 row: ctaid (7 bits) + ctaid + 1 (8 bits), written by CTA
//   ctl.parity     1 row, 1 bit: the barrier parity, written by CTA (even) and SYNC.
// A SYNC token cannot read the parity latch and write its complement (every replica of a
// RAM is written before any of its reads in the token), so the SYNC token derives the old
// parity from the scheduler rows instead: at a SYNC every warp is stopped and every row is
// correct, so the rows hold exited or waiting entries only, all with the current parity;
// the new parity is 1 iff no row holds barrier.odd.
//
// On EXEC, SYNC, RUN and CTA tokens (input ctl.on) the unit computes the next control
// record exactly as record_launch() emits it, and on EXEC tokens the SCHED write-backs
// that precede it (at most two groups: a terminator gives the masked lanes at most two
// distinct states, brc's taken and not-taken targets). Every neuron is gated by ctl.on.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "protocol.h"
#include "qgpu/sdk/status.h"
#include "qgpu/weights/circuit.h"
#include "records.h"

namespace qgpu::simt::circuit {

// What the unit consumes on an EXEC token (made by earlier stages in the machine).
struct ControlIn {
  weights::Bit enable;        // exec.is: the token is an EXEC record
  weights::Word warp;         // 3 bits: the EXEC's warp
  weights::Word lanes;        // 4 bits: the EXEC's lane mask
  weights::Word term_opcode;  // kOpCount bits, one-hot: the decoded terminator slot
  weights::Word term_imm;     // 32 bits: its immediate (targets in bits 0-15 and 16-31)
  weights::Word cond;         // 4 bits: per lane, the brc condition (a != 0); ignored outside the mask
};

// The next control record, one-hot kind plus the fields of that kind.
enum class NextKind { kExec = 0, kSync = 1, kCta = 2, kHalt = 3 };
struct ControlRecord {
  weights::Word kind;   // 4 bits, one-hot by NextKind
  weights::Word block;  // kProtoBlockBits (EXEC)
  weights::Word warp;   // 3 bits (EXEC)
  weights::Word lanes;  // 4 bits (EXEC)
  weights::Word cta;    // 8 bits (CTA: ctaid + 1)
};

// One SCHED write-back of an EXEC token: warp = the EXEC's warp.
struct SchedWrite {
  weights::Bit valid;    // emit this record (lanes != 0)
  weights::Word lanes;   // 4 bits
  weights::Word status;  // 2 bits: (s1, s0) as in the rows above
  weights::Word block;   // kProtoBlockBits
};

struct Control {
  // Header fields (records.h: set from the token id; 0 on every other token).
  weights::Word on;           // 1: EXEC, SYNC, RUN or CTA (the unit's enable)
  weights::Word gen;          // 1: EXEC, SYNC or RUN (choose the next record from the scheduler rows)
  weights::Word cta_is;       // 1: CTA
  weights::Word sync_is;      // 1: SYNC
  weights::Word parity_we;    // 1: CTA or SYNC (write enable of the parity latch)
  weights::Word cta_id;       // 7 bits (CTA c: c)
  weights::Word cta_next;     // 8 bits (CTA c: c + 1)
  weights::Word sched_warp;   // 3 bits (SCHED w)
  weights::Word sched_lanes;  // 4 bits (SCHED m): write enable of each lane's RAM
  weights::Word sched_state;  // 7 bits (SCHED s B): the row value, sched_row_value(s, B)
  // The launch latch's write: LAUNCH's DATA token (header at lag 1), threads | grid << 8.
  LaunchWrite launch;
  std::array<int, kProtoLanes> sched_rams{};
  int launch_ram = -1, cta_ram = -1, parity_ram = -1;

  // Outputs for other units (32-bit words, upper bits constant 0; nonzero only where ctl.on).
  weights::Word ntid, ctaid, nctaid;
  // The next control record (EXEC, SYNC, RUN and CTA tokens).
  ControlRecord next;
  // EXEC tokens: the SCHED write-backs before the next record, in emission order.
  std::array<SchedWrite, 2> groups;
  // CTA tokens: bit 4v + l set where the new thread block's SCHED "running B0" writes lane l
  // of warp v (warps 1-7; warp 0's is implied by the first EXEC), in the order warp, lane.
  weights::Word cta_sched;  // 32 bits
};

// Adds the scheduler RAMs, the latches and the record choice to `c`; the unit's
// token inputs are header fields of `records` (SCHED w m s B, CTA c, SYNC, RUN, EXEC)
// and LAUNCH's DATA (build_launch_write). EXEC tokens get ctl.on and ctl.gen only:
// ControlIn's fields come from the records (exec.*), fetch/decode and ALU stages.
sdk::Expected<Control> build_control(weights::Circuit& c, const ControlIn& in, Records& records);

// The same in two steps, for a machine whose branch conditions are computed after the
// unit's outputs are needed (operands read %ntid / %ctaid / %nctaid before the
// terminator's condition exists): begin_control builds the state, the latches and
// every part that does not read ControlIn::cond (ignored there); control() then
// holds the latch words and the header fields; finish_control adds the rest with
// `cond` (4 bits) and returns the whole unit.
class ControlStage {
 public:
  ControlStage();
  ~ControlStage();
  ControlStage(ControlStage&&) noexcept;
  ControlStage& operator=(ControlStage&&) noexcept;
  const Control& control() const;  // valid until finish_control

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  friend sdk::Expected<ControlStage> begin_control(weights::Circuit&, const ControlIn&, Records&);
  friend sdk::Expected<Control> finish_control(ControlStage&, const weights::Word&);
};
sdk::Expected<ControlStage> begin_control(weights::Circuit& c, const ControlIn& in, Records& records);
sdk::Expected<Control> finish_control(ControlStage& stage, const weights::Word& cond);

// The 7-bit row value of a scheduler state (the encoding above).
std::uint32_t sched_row_value(LaneStatus status, std::uint32_t block);

}  // namespace qgpu::simt::circuit
