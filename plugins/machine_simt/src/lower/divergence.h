// Which KernelIR blocks some threads of a thread block may reach while others do not: the blocks
// between a branch on a thread-dependent condition and the point where its paths join again. A
// CUDA-warp collective lowered with block barriers (select_warp.cpp) must not sit in one: the
// machine's barrier releases when the other threads exit or wait elsewhere, so it would exchange
// values with threads that never arrived.
#pragma once

#include <vector>

#include "lower/block_order.h"
#include "qgpu/sdk/kernel_ir.h"

namespace qgpu::simt::lower {

// By block index. Conservative: a condition is uniform only when it is computed (through pure
// operations) from constants, parameters, shared addresses, the block and grid sizes, the block
// index and warp votes; loads, atomics, shuffles and the thread index are thread-dependent, and a
// block argument is uniform only when every edge into its block passes a uniform value from a
// block outside any divergent region.
std::vector<bool> divergent_blocks(const sdk::KernelIR& kernel, const BlockOrder& order);

}  // namespace qgpu::simt::lower
