// Register allocation: liveness over the lowering's IR, an interference graph with copy hints,
// and greedy colouring in order of first definition. There is no spilling: a kernel that needs
// more registers than the machine has fails with the pressure and where it peaks.
#pragma once

#include <vector>

#include "config.h"
#include "lower/diagnostics.h"
#include "lower/ir.h"
#include "qgpu/sdk/kernel_ir.h"

namespace qgpu::simt::lower {

struct Registers {
  std::vector<int> color;  // by virtual register: r1..r(registers-1), or 0 if never written
  int highest = 0;         // highest register used
};

sdk::Expected<Registers> allocate_registers(const Function& function, const MachineConfig& config,
                                            const sdk::KernelIR& kernel, const Diagnostics& diag);

}  // namespace qgpu::simt::lower
