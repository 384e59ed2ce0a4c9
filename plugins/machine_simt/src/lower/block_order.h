// The order in which KernelIR blocks are lowered and laid out.
#pragma once

#include <cstddef>
#include <vector>

#include "qgpu/sdk/kernel_ir.h"

namespace qgpu::simt::lower {

struct BlockOrder {
  std::vector<std::size_t> order;  // reachable blocks, the entry first
  std::vector<bool> reachable;     // by block index
};

// Reverse post-order in which a loop's exits are visited first by the DFS so that they come
// after the whole loop: then "run the lowest pending block" finishes a loop (and both arms of an
// if) before the code after it.
BlockOrder order_blocks(const sdk::KernelIR& kernel);

}  // namespace qgpu::simt::lower
