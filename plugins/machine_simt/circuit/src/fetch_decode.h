// Stage 1 of the SIMT machine's circuit: the ROM as Gated DeltaNet RAMs written
// by ROM records, and the fetch + decode of a whole block on an EXEC token.
//
// ROM: one RAM per (slot, half), 32 rows (block) × 32 bits, as in
// docs/PROTOCOL.md §2, written at the second DATA token of a ROM record with
// what the records stage (records.h) reassembles in layer 0. An EXEC token
// reads its block's row from every RAM in parallel (one read port each, Gated
// DeltaNet of layer 1) and the MLP of the same layer decodes every slot into
// named fields (isa.h's decode()); the validity bit takes one more MLP. Token
// embeddings and ROM write: docs/PROTOCOL.md §11; this stage: §11.1.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "isa.h"
#include "protocol.h"
#include "qgpu/sdk/status.h"
#include "qgpu/weights/circuit.h"
#include "records.h"

namespace qgpu::simt::circuit {

// The decoded fields of one ROM slot (all written only on EXEC tokens; 0 elsewhere).
struct SlotFields {
  weights::Word lo, hi;      // the raw halves as read from the ROM
  weights::Word opcode;      // kOpCount bits, one-hot (all 0 for an opcode outside the table)
  weights::Word d, a, b, c;  // 4-bit register / special numbers (views of lo)
  weights::Word ak, bk;      // 3 bits one-hot: reg, imm, special (all 0 for kind 3)
  weights::Word flags;       // 6 bits (a view of lo)
  weights::Word imm;         // 32 bits (a view of hi)
  weights::Bit valid;        // decode() would succeed
};

struct FetchDecode {
  int slots = 0;    // block_instructions + 1 (the terminator is the last slot)
  Records records;  // the token inputs and their reassembly (records.h)
  // The ROM write (records.rom): nonzero select only at a ROM record's second DATA token.
  weights::Word rom_block;    // 5 bits: the block (write row)
  weights::Word rom_select;   // slots*2 bits, one-hot at slot*2 + half: the RAM written
  weights::Word rom_payload;  // 32 bits: the half's bits
  // Embedding inputs of EXEC headers (0 on every other token).
  weights::Word exec_is;     // 1 bit: the token is an EXEC record
  weights::Word exec_block;  // 5 bits
  weights::Word exec_warp;   // 3 bits
  weights::Word exec_lanes;  // 4 bits
  std::vector<int> rams;     // per slot*2 + half
  std::vector<SlotFields> slot;
};

// Adds the record inputs (build_records), the ROM RAMs and the fetch/decode
// stage to `c`, for `slots` ROM rows per block (1..kProtoRowsPerBlock).
sdk::Expected<FetchDecode> build_fetch_decode(weights::Circuit& c, int slots);

// The embedding inputs of a one-token record (EXEC, CTA, SCHED, ...): those of
// its token id. A record with DATA tokens is refused: feed its token ids
// (record_inputs / token_inputs in records.h). Errors name what does not fit.
sdk::Expected<TokenInputs> token_inputs(const FetchDecode& fd, const Record& record);

}  // namespace qgpu::simt::circuit
