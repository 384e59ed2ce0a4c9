// Stage 2 of the SIMT machine's circuit: the register file as Gated DeltaNet
// RAMs written by WREG tokens, and the operand reads of an EXEC token.
//
// Register file: one RAM per lane (4), rows = warp·16 + register (128) × 32
// bits, as in docs/PROTOCOL.md §2, written where the records stage (records.h)
// says a WREG value completes: lane l's RAM takes lane l's value word. r0 is
// never written (no WREG token names it).
// On an EXEC token each requested (slot, operand) reads, for every lane, the
// row (EXEC warp, decoded register field) — one read port each, in a layer
// after the decode MLP — and an MLP turns the read into the operand value in
// place (docs/PROTOCOL.md §11.2 "Register file and operand reads").
// The machine uses operands.h instead: one slot at a time, with the bypass from
// earlier slots and the special words; build_register_file(c, fd, {}) gives the
// RAMs alone for it.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "fetch_decode.h"
#include "protocol.h"
#include "qgpu/sdk/status.h"
#include "qgpu/weights/circuit.h"

namespace qgpu::simt::circuit {

enum class Operand { kA, kB, kC };

// One operand of one slot, read for every lane.
struct OperandRead {
  int slot = 0;
  Operand operand = Operand::kA;
  std::array<weights::Word, kProtoLanes> value;  // 32 bits per lane: regs.slot<S>.lane<L>.<a|b|c>
};

struct RegisterFile {
  // The write port (records.wreg, computed in layer 0 from the WREG record's tokens).
  weights::Word wreg_warp;                                 // 3 bits
  weights::Word wreg_reg;                                  // 4 bits (1..15)
  weights::Word wreg_lanes;                                // 4 bits: the write enable of each lane's RAM
  weights::Word wreg_value;                                // 32 bits: lane 0's value (wreg_lane_value[0])
  std::array<weights::Word, kProtoLanes> wreg_lane_value;  // 32 bits: lane l's value
  std::array<int, kProtoLanes> rams{};
  std::vector<OperandRead> reads;
};

// Adds the register RAMs and the operand reads `reads` (slot, operand) to `c`,
// after the fetch/decode stage `fd`. Operand values: a and b by their decoded
// kind — register (0 for r0), the immediate, or for specials %tid and %laneid
// (warp·4 + lane, both < 32); %ntid, %ctaid and %nctaid read 0 here because
// they come from the launch/CTA latches, which a later stage adds. c is always
// a register (ISA.md).
sdk::Expected<RegisterFile> build_register_file(weights::Circuit& c, const FetchDecode& fd,
                                                const std::vector<std::pair<int, Operand>>& reads);

const char* operand_name(Operand o);  // "a", "b", "c"

}  // namespace qgpu::simt::circuit
