// The SIMT machine's global and shared memory: banked Gated DeltaNet RAMs
// written by WMEM tokens, and one memory instruction (ld, st, atom.*) of a
// whole warp on an EXEC token, lanes combined in lane order (docs/ISA.md §5).
//
// Banks: one WMEM token writes up to 4 consecutive words, so a space is held by
// banks of 128 rows selected by the word's low bits. Three layouts:
//  * kStandard: 512 words per space, 4 bank RAMs per space (bank w & 3, row
//    w >> 2): 32 read heads (4 lanes × 4 banks × 2 spaces), i.e. two Gated
//    DeltaNet layers.
//  * kWide: 1,024 words of global memory in 8 banks (bank w & 7, row w >> 3) and
//    shared memory as kStandard: 48 read heads, three layers.
//  * kCompact: 256 words per space, both spaces in the same 4 bank RAMs (row =
//    space·64 + (w >> 2)): 16 read heads, one layer. The plugin's default sizes
//    (126 global + 32 shared words) fit it.
// The token layout addresses 1,024 global words (docs/PROTOCOL.md); a layout with
// fewer refuses the WMEM rows past its words.
// The EXEC-token unit applies the lanes in lane order as a chain: lane j's
// operation f_j(x) = f(x, b_j, c_j) on x = B_j, the word as the earlier lanes
// left it (B_j = `loaded`: A_k of the latest earlier active lane k on the same
// word, else M[x] as read), in two MLPs per lane whose fields are shared by
// every opcode (layer 1: an adder's group sums, or x op b, x ± 1, and the
// group generate/propagate bits of x + b or of a comparison; layer 2: A_j and,
// in the same MLP, B_{j+1}). Only one lane's intermediates are live at a time.
// Schedule (every layout; the reads that do not fit GDN 2's heads follow, in time):
//  MLP 0-1  x = a + imm (bits 2.. are the word; the bank bits are final after
//           MLP 0, so the read enables follow in MLP 1); opcode classes
//  GDN 2    4 lanes × every bank read ports z-gated by (lane active ∧ reading
//           opcode ∧ bank = x[3:2], or x[4:2] for kWide's global banks ∧ space),
//           each lane's ports writing one shared field (ram_read_shared under the
//           one-hot enables): `ld_value`
//  MLP 2    lane 0 layer 1 (and loaded_0); same-word bits e_jl (low word bits
//           compared in MLP 1)
//  MLP 3..8 lane 0 layer 2 (loaded_1) and `writes`, lane 1 layers 1-2
//           (loaded_2), lane 2 layers 1-2 (loaded_3), lane 3 layer 1
//  MLP 9    lane 3 layer 2: every lane's `value`
// Every neuron is gated by `enable`; the RAMs change only on WMEM tokens.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "isa.h"
#include "protocol.h"
#include "qgpu/sdk/status.h"
#include "qgpu/weights/circuit.h"
#include "records.h"

namespace qgpu::simt::circuit {

enum class MemoryLayout { kStandard, kWide, kCompact };

// Words of global memory of a layout: 512 (kStandard), 1,024 (kWide), 256 (kCompact).
int memory_words(MemoryLayout layout);
// Words of shared memory of a layout: 512, 512, 256.
int shared_memory_words(MemoryLayout layout);
// The smallest layout that holds `global_words` and `shared_words` (kStandard or kWide),
// or an error naming the limit.
sdk::Expected<MemoryLayout> memory_layout_for(int global_words, int shared_words);
// The bank RAM and its row that hold word `word` of a space (host read-back).
struct BankRow {
  int ram = 0;  // index into MemoryRams::rams
  int row = 0;
};
BankRow bank_row(MemoryLayout layout, bool shared, int word);

// The launch's bounds for fault detection (MemoryIn::bounds): an access faults where its
// byte address x = a + imm (mod 2^32) is not a multiple of 4 (misaligned) or, aligned,
// where x / 4 is not below its space's bound (out of bounds), as the interpreter checks.
// The bounds are a RAM of 2 rows (0: global, the words holding the launch's arrays; 1:
// shared, the words the kernel declares) of kBoundBits bits, each at most the layout's
// words of its space (BOUND records write it: records.h's build_bound_write).
inline constexpr int kBoundBits = kProtoWordBits + 1;
struct FaultBounds {
  int ram = -1;
};

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
  // Given, every lane's access is checked against them (MemoryLane::misaligned, out_of_bounds).
  std::optional<FaultBounds> bounds;
};

struct MemoryLane {
  weights::Word word;      // word address (x >> 2, wrapped to the layout: 9, 10 or 8 bits)
  weights::Word ld_value;  // M[x] for ld and atomics of an active lane, else 0: after the read heads
  weights::Word loaded;    // ld: M[x]; atomics: the old value in lane order; else 0
  weights::Bit writes;     // the last active lane in lane order that writes its word
  weights::Word value;     // where `writes`: the word's final value; else 0
  weights::Bit step;       // a bit of the lane's first chain MLP: final one layer after `loaded`
                           // (and one before the next lane's): a placement anchor for later ops
  // With MemoryIn::bounds (else the constant 0): the lane is active, the opcode accesses
  // memory, and its address is misaligned / aligned and out of bounds. Four MLPs after
  // the operands, beside the lane chain; the space's bound is read from the RAM in the
  // layer of the third (the word compare), so it is in the residual for one layer only.
  weights::Bit misaligned;
  weights::Bit out_of_bounds;
};

// The banked RAMs of both spaces, written by WMEM records' tokens through
// records.h's build_wmem_write (one set per circuit, shared by every memory
// unit instance).
struct MemoryRams {
  MemoryLayout layout = MemoryLayout::kStandard;
  WmemWrite write;        // the write ports' fields (layer 0); kCompact uses bank_enable
  std::vector<int> rams;  // the global banks, then the shared ones (kCompact: the 4 banks)
};

struct Memory {
  MemoryRams rams;
  std::array<MemoryLane, kProtoLanes> lane;
};

// The RAMs and their WMEM write ports (build_wmem_write on `records`);
// token_inputs refuses WMEM rows past the layout's words.
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
