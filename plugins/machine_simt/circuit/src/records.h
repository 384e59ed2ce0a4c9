// Record tokens as circuit inputs (docs/PROTOCOL.md §11).
//
// The host feeds token ids, and the model's embedding holds one row per id, so
// a token's circuit inputs are a function of its id alone: a header carries
// its fields (decoded from its row number, plus anything derived from them,
// such as which lanes a WREG's DATA tokens complete), a DATA token its 16-bit
// payload. build_records() declares these inputs and the stage that, at the
// token completing a RAM row, reassembles what the write ports need from the
// conv1d window (the header and the record's earlier DATA at lags 1..3): the
// ROM half at the second DATA of a ROM record, and per lane the register value
// of a WREG record (byte / half / word DATA, or the header itself for zero).
//
// Schedule: layer 0's Gated DeltaNet reads the window (one previous() head
// per lag); the ROM write takes views of it (no neurons); layer 0's MLP
// computes the register write (row, lane enables, one value word per lane).
// The RAM replicas that these writes feed therefore sit in layer 1 or later.
// The memory, control and write-back units add the WMEM bank writes (3 more
// heads + MLP), the LAUNCH latch and the LIVE row writes (one head each)
// with build_wmem_write / build_launch_write / build_live_write, and their
// header-only fields (SCHED, CTA, SYNC, RUN) with add_header_field / bind.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "protocol.h"
#include "qgpu/sdk/status.h"
#include "qgpu/weights/circuit.h"

namespace qgpu::simt::circuit {

// The embedding inputs of one token: (field, value) pairs for weights::embed.
using TokenInputs = std::vector<std::pair<weights::Word, std::uint64_t>>;

// An embedding field of one header kind: `value` maps the header (decoded from
// the token id; no payload) to the field's bits, or names why it cannot.
struct HeaderField {
  RecordKind kind = RecordKind::kHalt;
  weights::Word word;
  std::function<sdk::Expected<std::uint64_t>(const Record&)> value;
};

// The ROM write of a ROM record's second DATA token (header at lag 2): views of
// the conv1d window and of the current token, no neurons.
struct RomWrite {
  weights::Word row;     // kProtoBlockBits: the block
  weights::Word select;  // rom_slots·2 bits, one-hot at slot·2 + half (all 0 on every other token)
  weights::Word data;    // 32 bits: DATA at lag 1 (low 16 bits), the current DATA (high 16 bits)
};

// The register write of the token that completes a WREG value (layer 0's MLP).
struct WregWrite {
  weights::Word row;                             // 7 bits: register (bits 0-3), warp (bits 4-6)
  weights::Word enable;                          // 4 bits: lane l's RAM is written
  std::array<weights::Word, kProtoLanes> value;  // lane l's 32-bit value (0 where enable is 0)
};

// Which lane takes which value of a WREG record's DATA token at position p
// (the header at lag p): `lo` the low byte / the half / the word completed there,
// `hi` the high byte (byte format only). Lanes that can never hold a role at p
// have no bit (docs/PROTOCOL.md §11).
inline constexpr std::array<unsigned, 3> kWregLoLanes = {0b1111, 0b1111, 0b1100};
inline constexpr std::array<unsigned, 3> kWregHiLanes = {0b1110, 0b1000, 0b0000};

// The memory-bank write of the token that completes WMEM words (layer 0's MLP,
// build_wmem_write): word w goes through port w & 3 with row w >> 2 (a record's up to 4
// consecutive words take 4 different ports); memory.h's layouts map a port's row to a
// bank RAM and a row of it.
struct WmemWrite {
  std::array<weights::Word, 4> row;    // per port, 9 bits: (word >> 2) in bits 0-7, the space (1 = shared) in bit 8
  weights::Word enable;                // 8 bits: space·4 + port
  weights::Word bank_enable;           // 4 bits: port, either space
  std::array<weights::Word, 4> value;  // per port, 32 bits (0 where the port does not write)
};

// The launch-constant latch write of a LAUNCH record's DATA token (header at lag 1):
// views of the window and of the current payload `threads | grid << 8`, no neurons.
struct LaunchWrite {
  weights::Bit enable;    // the header at lag 1 is LAUNCH
  weights::Word threads;  // 6 bits: payload bits 0-5 (threads per thread block <= 32)
  weights::Word grid;     // 8 bits: payload bits 8-15 (thread blocks <= 128)
};

// The live-in row write of a LIVE record's DATA token (header at lag 1): views, no neurons.
// `enable` and `exited` are exclusive: one of them is 1 on a LIVE record's DATA token.
struct LiveWrite {
  weights::Bit enable;  // the header at lag 1 is LIVE B (a block's row)
  weights::Bit exited;  // the header at lag 1 is LIVE exited (the shuffle sources)
  weights::Word row;    // kProtoBlockBits: B (0 for LIVE exited)
  weights::Word mask;   // 16 bits: bit r = register r live at B's entry (in an exited lane)
};

// The bounds write of a BOUND record's DATA token (header at lag 1): views, no neurons.
struct BoundWrite {
  weights::Bit enable;  // the header at lag 1 is BOUND
  weights::Bit row;     // its space, the bounds RAM's row: 0 global, 1 shared
  weights::Word words;  // kProtoWordBits + 1 bits: payload bits 0-10
};

struct Records {
  std::int64_t base = kQwen35VocabRows;  // first machine token id
  int rom_slots = 0;                     // ROM rows per block held by the circuit
  // Embedding inputs.
  weights::Word data_is;                                     // 1 bit: a DATA token
  weights::Word data_value;                                  // 16 bits: its payload
  weights::Word row;                                         // 7 bits: ROM: block; WREG: register | warp << 4
  weights::Word rom_select;                                  // rom_slots·2 bits, one-hot at slot·2 + half
  weights::Word exec_is, exec_block, exec_warp, exec_lanes;  // 1, kProtoBlockBits, 3, 4 bits
  weights::Word wreg_zero;                                   // 4 bits: a zero-format header's lane mask
  std::array<weights::Word, 3> wreg_lo, wreg_hi;  // per DATA position p = 1..3: one bit per lane of kWreg*Lanes[p-1]
  weights::Word wreg_byte;                        // 2 bits: the record is byte format and has DATA p (p = 1, 2)
  weights::Word wreg_word;                        // 1 bit: word format (its DATA 2 completes the value)
  std::vector<HeaderField> header_fields;
  // Layer 0's conv1d reads: window[p - 1] is what the token at lag p held.
  std::array<weights::Word, 3> window;
  RomWrite rom;
  WregWrite wreg;

  // Declares an input field owner.name set on headers of `kind` to value(header);
  // the memory, control and EXEC units add their fields this way.
  sdk::Expected<weights::Word> add_header_field(weights::Circuit& c, RecordKind kind, const std::string& owner,
                                                const std::string& name, int width,
                                                std::function<sdk::Expected<std::uint64_t>(const Record&)> value);
  // Sets an existing input field on headers of another kind too (a field shared by kinds).
  void bind(RecordKind kind, const weights::Word& word,
            std::function<sdk::Expected<std::uint64_t>(const Record&)> value);
  // A check of headers of `kind` without a field (a row the circuit cannot hold): an
  // error from `check` makes token_inputs refuse the id.
  void check(RecordKind kind, std::function<sdk::Status(const Record&)> check);
};

// Declares the record inputs and the reassembly stage for a ROM of `rom_slots`
// rows per block (1..kProtoRowsPerBlock); `base` is the first machine token id.
sdk::Expected<Records> build_records(weights::Circuit& c, int rom_slots, std::int64_t base = kQwen35VocabRows);

// WMEM records (docs/PROTOCOL.md §11): declares the WMEM header fields, one
// previous() head per lag for their DATA roles, and layer 0's MLP that, on the
// token completing words (the header itself for format zero, else the DATA
// token holding the word's last byte / half / high half), gives each written
// bank its row, enable and value. One per circuit.
sdk::Expected<WmemWrite> build_wmem_write(weights::Circuit& c, Records& records);
// LAUNCH records: a 1-bit header field read at lag 1 (one head); the latch data
// are views of the DATA payload. One per circuit.
sdk::Expected<LaunchWrite> build_launch_write(weights::Circuit& c, Records& records);
// LIVE records: a 2-bit header field (LIVE B, LIVE exited) read at lag 1 (one head); the
// block is the shared rec.row at lag 1, the mask the DATA payload. One per circuit.
sdk::Expected<LiveWrite> build_live_write(weights::Circuit& c, Records& records);

// BOUND records: a 2-bit header field (BOUND, its space) read at lag 1 (one head); the words are
// the DATA payload. One per circuit.
sdk::Expected<BoundWrite> build_bound_write(weights::Circuit& c, Records& records);

// The header a machine token id denotes (kind and header fields; payload fields
// 0), or for a DATA id a kData record with `data` set. Errors: a text token, an
// id past the machine's rows, a reserved row.
sdk::Expected<Record> record_of_token(std::int64_t id, std::int64_t base = kQwen35VocabRows);

// The embedding inputs of token `id` (a function of the id alone).
sdk::Expected<TokenInputs> token_inputs(const Records& records, std::int64_t id);

// The token ids of a record (protocol.h's encoding) and the inputs of each.
sdk::Expected<std::vector<std::int64_t>> record_token_ids(const Records& records, const Record& record);
sdk::Expected<std::vector<TokenInputs>> record_inputs(const Records& records, const Record& record);

}  // namespace qgpu::simt::circuit
