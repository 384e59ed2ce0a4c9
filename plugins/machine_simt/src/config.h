// The machine's parameters, read from the plugin's validated options.
#pragma once

#include <cstdint>

#include "qgpu/sdk/plugin.h"

namespace qgpu::simt {

// The encoding and the interpreter's lane arrays are sized for this many lanes.
inline constexpr int kMaxLanes = 4;

struct MachineConfig {
  int lanes = 4;
  int registers = 16;  // r0 reads zero; r1..r(registers-1) are allocatable
  int rom_blocks = 32;
  int block_instructions = 4;
  int global_words = 126;
  int shared_words = 32;
  int max_threads = 128;
  int max_block_threads = 32;

  static sdk::Expected<MachineConfig> from_options(const sdk::Options& options);
};

}  // namespace qgpu::simt
