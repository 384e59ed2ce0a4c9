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
//
// The assembled machine (machine.h) instead fetches just in time: build_fetch_rams
// builds the RAMs only, and each slot's row is read (fetch_slot) and its opcode decoded
// (decode_ops) right before the slot runs, with enables that become final late; what
// is needed long before that has ports of its own at the start (fetch_dest_early: each
// slot's destination and writes bit; fetch_term_early: the terminator's opcode bits and
// branch targets for control). docs/MACHINE_CIRCUIT.md §8.1.
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
  weights::Bit valid;        // decode() would succeed (not built by fetch_slot)
  // Built by fetch_slot only: copies in fields of their own, so the raw halves can die
  // with the slot's own units while what later slots and the write-back need lives on.
  weights::Word dest;        // 4 bits: d
  weights::Word flag_bits;   // 6 bits: flags
  weights::Bit writes;       // the opcode writes d (isa.h writes_d)
  weights::Word writes_op;   // kOpCount bits: `writes` at the first writing opcode, 0 elsewhere
                             // (for the units that only sum the writing opcodes' bits)
};

struct FetchDecode {
  int slots = 0;    // block_instructions + 1 (the terminator is the last slot)
  Records records;  // the token inputs and their reassembly (records.h)
  // The ROM write (records.rom): nonzero select only at a ROM record's second DATA token.
  weights::Word rom_block;    // kProtoBlockBits: the block (write row)
  weights::Word rom_select;   // slots*2 bits, one-hot at slot*2 + half: the RAM written
  weights::Word rom_payload;  // 32 bits: the half's bits
  // Embedding inputs of EXEC headers (0 on every other token).
  weights::Word exec_is;     // 1 bit: the token is an EXEC record
  weights::Word exec_block;  // kProtoBlockBits
  weights::Word exec_warp;   // 3 bits
  weights::Word exec_lanes;  // 4 bits
  std::vector<int> rams;     // per slot*2 + half
  std::vector<SlotFields> slot;
};

// Adds the record inputs (build_records), the ROM RAMs and the fetch/decode
// stage to `c`, for `slots` ROM rows per block (1..kProtoRowsPerBlock).
sdk::Expected<FetchDecode> build_fetch_decode(weights::Circuit& c, int slots);

// The same with only the ROM RAMs and their write ports: no slot is read. The caller
// reads each slot with fetch_slot where it needs it (a read port is its own replica,
// placed by its enable), so a slot's fields live only from just before it runs.
sdk::Expected<FetchDecode> build_fetch_rams(weights::Circuit& c, int slots);

// Reads slot k's row (lo and hi, z gate `enable`: a bit equal to exec.is on every token,
// possibly final only late, which places the reads) and decodes it into fd.slot[k]: the
// views, the opcode one-hot and the compact copies (dest, flag_bits, writes, writes_op);
// not the kinds' one-hots nor valid. With decode = false only the views (no neurons).
sdk::Status fetch_slot(weights::Circuit& c, FetchDecode& fd, int k, weights::Bit enable, const std::string& tag,
                       bool decode = true);

// Slot k's destination and writes bit (the compact copies of fetch_slot) from a read of
// its lo half of their own (z = exec.is) at the start: the write-back analysis's final
// bits and the bypass matches need them long before the slot runs (5 bits instead of
// the row and its decode). A later fetch_slot of the slot keeps them and builds the rest.
sdk::Status fetch_dest_early(weights::Circuit& c, FetchDecode& fd, int k);

// The opcode one-hot and flag_bits of a slot fetched with fetch_slot(decode = false),
// gated by `enable` (a bit equal to exec.is, possibly final late, which places them).
sdk::Status decode_ops(weights::Circuit& c, FetchDecode& fd, int k, weights::Bit enable, const std::string& tag);

// The terminator's fields that control needs early, read with its own ports (z = exec.is)
// at the start: the opcode one-hot with only br, brc, bar and exit built (0 elsewhere) and
// imm with only bits 0-4 and 16-20 (the two targets) built, one field of 9 bits.
struct TermEarly {
  weights::Word opcode;  // kOpCount bits
  weights::Word imm;     // 32 bits
};
sdk::Expected<TermEarly> fetch_term_early(weights::Circuit& c, FetchDecode& fd, int k);

// The embedding inputs of a one-token record (EXEC, CTA, SCHED, ...): those of
// its token id. A record with DATA tokens is refused: feed its token ids
// (record_inputs / token_inputs in records.h). Errors name what does not fit.
sdk::Expected<TokenInputs> token_inputs(const FetchDecode& fd, const Record& record);

}  // namespace qgpu::simt::circuit
