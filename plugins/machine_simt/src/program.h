// A lowered kernel: machine blocks with allocated registers, ready to encode.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config.h"
#include "isa.h"
#include "qgpu/sdk/kernel_ir.h"
#include "qgpu/sdk/machine.h"

namespace qgpu::simt {

// One instruction slot. `reloc` >= 0 makes the immediate a launch constant:
// at link time the value of kernel parameter #reloc (a scalar's value, or an
// array's base byte address) is added to `in.imm` (the addend).
struct Slot {
  Instr in;
  int reloc = -1;
  sdk::IrLoc loc;  // where the KernelIR instruction came from (0:0 if synthesised)
};

struct MachineBlock {
  std::string label;        // "bb3", "bb3.1" (a split), "edge.bb1.bb3", "div.loop" ...
  std::vector<Slot> slots;  // at most block_instructions; the image pads with nop
  Slot term;                // br / brc / bar / exit
};

struct ProgramParam {
  std::string name;
  bool pointer = false;
};

class Program final : public sdk::MachineProgram {
 public:
  std::string kernel_name;
  std::string source_path;
  std::vector<ProgramParam> params;
  sdk::LaunchShape shape;
  MachineConfig config;
  int shared_words_used = 0;
  int registers_used = 0;            // highest register number used
  std::vector<MachineBlock> blocks;  // block 0 is the entry

  std::string dump() const override;

  // Rows per block in the image: block_instructions slots + the terminator.
  int rows_per_block() const { return config.block_instructions + 1; }
  // The encoded ROM image; relocations resolved with `param_values` (one per
  // parameter), or left as their addends when it is empty.
  std::vector<std::uint64_t> image(const std::vector<std::uint32_t>& param_values) const;
  // "file:line:col" of a slot's source, or "" when unknown.
  std::string slot_location(const Slot& slot) const;
};

}  // namespace qgpu::simt
