// Spilling: a virtual register that does not get a machine register lives in a slot of its own
// thread in shared memory (after the kernel's __shared__ variables and the warp scratch), stored
// right after every definition and loaded right before every use (docs/ISA.md "Lowering").
#pragma once

#include <cstdint>
#include <vector>

#include "lower/ir.h"

namespace qgpu::simt::lower {

// Rewrites every definition and use of `vreg` in `function`: a definition writes a new virtual
// register that is stored to the slot after it, a use (operands, parallel-copy sources, a branch
// condition) reads a new one loaded from the slot before it. The slot is the shared-memory byte
// address `offset + 4 * %tid`. Every virtual register it adds is marked in `temporary` (indexed by
// virtual register, grown to function.vregs): their ranges are a few instructions long.
void spill_everywhere(Function& function, int vreg, std::uint32_t offset, std::vector<bool>& temporary);

}  // namespace qgpu::simt::lower
