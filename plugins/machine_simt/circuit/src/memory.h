// The SIMT machine's global and shared memory: banked Gated DeltaNet RAMs
// written by WMEM tokens, and one memory instruction (ld, st, atom.*) of a
// whole warp on an EXEC token, lanes combined in lane order (docs/ISA.md §5).
//
// Banks: word w of a space lives in bank w & 3, row w >> 2, so one WMEM token
// writes up to 4 consecutive words (one per bank). Two layouts:
//  * kProtocol (docs/PROTOCOL.md §2): 512 words per space, one set of 4 bank
//    RAMs (128 rows) per space: 32 read heads (4 lanes × 4 banks × 2 spaces),
//    i.e. two Gated DeltaNet layers.
//  * kCompact: 256 words per space, both spaces in the same 4 bank RAMs (row =
//    space·64 + (w >> 2)): 16 read heads, one layer shorter. The machine's
//    default sizes (126 global + 32 shared words) fit it.
//
// The EXEC-token unit applies the lanes in lane order as a chain: lane j's
// operation f_j(x) = f(x, b_j, c_j) on x = B_j, the word as the earlier lanes
// left it (B_j = `loaded`: A_k of the latest earlier active lane k on the same
// word, else M[x] as read), in two MLPs per lane whose fields are shared by
// every opcode (layer 1: an adder's group sums, or x op b, x ± 1, and the
// group generate/propagate bits of x + b or of a comparison; layer 2: A_j and,
// in the same MLP, B_{j+1}). Only one lane's intermediates are live at a time.
// Schedule (both layouts; kProtocol's lanes 2-3 read in GDN 3, in time):
//  MLP 0-1  x = a + imm (bits 2.. are the word; the bank bits are final after
//           MLP 0, so the read enables follow in MLP 1); opcode classes
//  GDN 2    4 lanes × 4 banks (× 2 spaces) read ports z-gated by (lane active ∧
//           reading opcode ∧ bank = x[3:2]), each lane's ports writing one shared
//           field (ram_read_shared under the one-hot enables): `ld_value`
//  MLP 2    lane 0 layer 1 (and loaded_0); same-word bits e_jl (low word bits
//           compared in MLP 1)
//  MLP 3..8 lane 0 layer 2 (loaded_1) and `writes`, lane 1 layers 1-2
//           (loaded_2), lane 2 layers 1-2 (loaded_3), lane 3 layer 1
//  MLP 9    lane 3 layer 2: every lane's `value`
// Every neuron is gated by `enable`; the RAMs change only on WMEM tokens.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "isa.h"
#include "protocol.h"
#include "qgpu/sdk/status.h"
#include "qgpu/weights/circuit.h"
#include "records.h"

namespace qgpu::simt::circuit {

enum class MemoryLayout { kProtocol, kCompact };

// Words per space of a layout: 512 (kProtocol) or 256 (kCompact).
int memory_words(MemoryLayout layout);

struct MemoryIn {
  weights::Bit enable;                           // exec.is: the token executes the block's memory instruction
  weights::Word opcode;                          // kOpCount bits, one-hot (the slot's decoded opcode)
  weights::Bit shared;                           // flags bit 0
  weights::Word imm;                             // 32 bits: the address offset
  std::array<weights::Bit, kProtoLanes> active;  // the lane is in the EXEC mask
  std::array<weights::Word, kProtoLanes> a;      // 32 bits: address register
  std::array<weights::Word, kProtoLanes> b;      // 32 bits: store value / atomic operand
  std::array<weights::Word, kProtoLanes> c;      // 32 bits: atom.cas new value
  std::string owner = "mem";  // field names: one owner per instance (a block may have 2 memory reads)
  // false: a loads-only unit (the block's memory write is in another slot, docs/ISA.md §6):
  // ld only, `loaded` is the read itself (no lane chain), `writes` and `value` are 0.
  bool writes = true;
};

struct MemoryLane {
  weights::Word word;      // word address (x >> 2, wrapped to the space: 9 or 8 bits)
  weights::Word ld_value;  // M[x] for ld and atomics of an active lane, else 0: after GDN 2 (kProtocol lanes 2-3: 3)
  weights::Word loaded;    // ld: M[x]; atomics: the old value in lane order; else 0
  weights::Bit writes;     // the last active lane in lane order that writes its word
  weights::Word value;     // where `writes`: the word's final value; else 0
  weights::Bit step;       // a bit of the lane's first chain MLP: final one layer after `loaded`
                           // (and one before the next lane's): a placement anchor for later ops
};

// The banked RAMs of both spaces, written by WMEM records' tokens through
// records.h's build_wmem_write (one set per circuit, shared by every memory
// unit instance).
struct MemoryRams {
  MemoryLayout layout = MemoryLayout::kProtocol;
  WmemWrite write;        // the write ports' fields (layer 0); kCompact uses bank_enable
  std::vector<int> rams;  // kProtocol: space·4 + bank; kCompact: bank
};

struct Memory {
  MemoryRams rams;
  std::array<MemoryLane, kProtoLanes> lane;
};

// The RAMs and their WMEM write ports (build_wmem_write on `records`). With
// kCompact, token_inputs refuses WMEM rows past its 256 words.
sdk::Expected<MemoryRams> build_memory_rams(weights::Circuit& c, MemoryLayout layout, Records& records);

// Adds one EXEC-token memory unit over `rams` to `c` (its fields are named
// in.owner.*). Non-memory opcodes read and write nothing: loaded, writes and
// value stay 0.
sdk::Expected<Memory> build_memory(weights::Circuit& c, const MemoryRams& rams, const MemoryIn& in);
// The RAMs and one unit.
sdk::Expected<Memory> build_memory(weights::Circuit& c, MemoryLayout layout, Records& records, const MemoryIn& in);

// Whether the unit computes `op` (ld, st and every atom.*).
bool memory_circuit_supports(Op op);

}  // namespace qgpu::simt::circuit
