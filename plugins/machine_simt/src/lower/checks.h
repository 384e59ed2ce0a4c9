// The checks before lowering: the launch against the machine's thread limits, the KernelIR's
// structure (terminators, operands, branch targets), and the shared-memory layout against the
// machine's shared words. Each returns the first problem it finds as a one-line error.
#pragma once

#include <cstdint>
#include <vector>

#include "config.h"
#include "lower/diagnostics.h"
#include "qgpu/sdk/kernel_ir.h"
#include "qgpu/sdk/machine.h"

namespace qgpu::simt::lower {

sdk::Status check_launch(const sdk::KernelIR& kernel, const sdk::LaunchShape& shape, const MachineConfig& config,
                         const Diagnostics& diag);

// Every block ends in its one terminator; every value, result, branch target and branch argument
// is in range; br has one target and cond_br two.
sdk::Status check_structure(const sdk::KernelIR& kernel, const Diagnostics& diag);

// Shared variables in declaration order, each aligned to max(4, its alignment) bytes.
struct SharedLayout {
  std::vector<std::uint64_t> offsets;  // byte offset of each shared variable
  int words = 0;                       // words used per thread block
};
sdk::Expected<SharedLayout> layout_shared(const sdk::KernelIR& kernel, const MachineConfig& config,
                                          const Diagnostics& diag);

}  // namespace qgpu::simt::lower
