// Emission: the allocated lowering IR as the Program's physical blocks. Parallel copies become
// moves (xor swaps for cycles); each block is split where the block rules (lower.h) or its
// instruction count say so; empty blocks that only branch on are forwarded; every branch target
// becomes a block index; the ROM's block count is checked.
#pragma once

#include <memory>

#include "config.h"
#include "lower/diagnostics.h"
#include "lower/ir.h"
#include "lower/register_allocation.h"
#include "program.h"
#include "qgpu/sdk/kernel_ir.h"
#include "qgpu/sdk/machine.h"

namespace qgpu::simt::lower {

sdk::Expected<std::unique_ptr<Program>> emit_program(const Function& function, const Registers& registers,
                                                     const sdk::KernelIR& kernel, const sdk::LaunchShape& shape,
                                                     const MachineConfig& config, int shared_words,
                                                     const Diagnostics& diag);

}  // namespace qgpu::simt::lower
