// KernelIR -> Program: instruction selection (with the expansions of
// div/rem/mul.hi/popc/clz/brev), out-of-SSA, register allocation, block
// splitting and ordering, and every limit check. docs/ISA.md "Lowering".
#pragma once

#include <memory>

#include "config.h"
#include "program.h"
#include "qgpu/sdk/kernel_ir.h"
#include "qgpu/sdk/machine.h"

namespace qgpu::simt {

// Block rules the circuit relies on (docs/ISA.md "Block rules"): at most this
// many loads per block; at most one store or atomic, after every load; no
// load address computed from a load of the same block; a multiply (mul, mad)
// and a memory write (st, atom.*) only in the block's last slot (the one slot
// with a multiplier and a writing memory unit; nops pad the slots before it).
inline constexpr int kMaxLoadsPerBlock = 2;
inline constexpr int kMaxWritesPerBlock = 1;

sdk::Expected<std::unique_ptr<Program>> lower_kernel(const sdk::KernelIR& kernel, const sdk::LaunchShape& shape,
                                                     const MachineConfig& config);

}  // namespace qgpu::simt
