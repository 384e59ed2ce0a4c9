// Register allocation: liveness over the lowering's IR, an interference graph with copy hints,
// and greedy colouring in order of first definition. A value that finds no register is spilled
// (lower/spill.h) to a per-thread slot in shared memory and the colouring runs again; a kernel whose
// slots do not fit the shared memory fails with the pressure and where it peaks.
#pragma once

#include <vector>

#include "config.h"
#include "lower/diagnostics.h"
#include "lower/ir.h"
#include "qgpu/sdk/kernel_ir.h"
#include "qgpu/sdk/machine.h"

namespace qgpu::simt::lower {

struct Registers {
  std::vector<int> color;  // by virtual register: r1..r(registers-1), or 0 if never written
  int highest = 0;         // highest register used
  int spilled = 0;         // values spilled: as many shared-memory words per thread of a block
};

// `shared_words`: the words per thread block before the spill slots (__shared__ variables and warp
// scratch); the slots follow, `shape.block` words per spilled value. Spilling rewrites `function`.
sdk::Expected<Registers> allocate_registers(Function& function, const MachineConfig& config,
                                            const sdk::KernelIR& kernel, const sdk::LaunchShape& shape,
                                            int shared_words, const Diagnostics& diag);

}  // namespace qgpu::simt::lower
