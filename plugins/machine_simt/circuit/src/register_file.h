// Stage 2 of the SIMT machine's circuit: the register file as Gated DeltaNet
// RAMs written by WREG tokens, and the operand reads of an EXEC token.
//
// Register file: one RAM per lane (4), rows = warp·16 + register (128) × 32
// bits, as in docs/PROTOCOL.md §2. r0 is never written (token inputs refuse it).
// On an EXEC token each requested (slot, operand) reads, for every lane, the
// row (EXEC warp, decoded register field) — one read port each, in a layer
// after the decode MLP — and an MLP turns the read into the operand value in
// place (docs/PROTOCOL.md §11 "Register file and operand reads").
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
  // Embedding inputs of a WREG token (one token per group of lanes that share a value).
  weights::Word wreg_warp;   // 3 bits
  weights::Word wreg_reg;    // 4 bits (1..15)
  weights::Word wreg_lanes;  // 4 bits: the write enable of each lane's RAM
  weights::Word wreg_value;  // 32 bits
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

// The tokens of a WREG record: one per distinct value among the lanes of its
// mask (that value and the mask of the lanes holding it). Errors name the
// field that does not fit (r0 included).
sdk::Expected<std::vector<std::vector<std::pair<weights::Word, std::uint64_t>>>> wreg_token_inputs(
    const RegisterFile& rf, const Record& record);

const char* operand_name(Operand o);  // "a", "b", "c"

}  // namespace qgpu::simt::circuit
