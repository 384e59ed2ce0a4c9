// The qgpu-host subcommands. Each returns the process exit code.
#pragma once

#include "qgpu/core/host.h"

namespace qgpu::host {

// Exit codes: 0 success, 1 a failure while working, 2 bad usage or input.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Prints an error as one line on stderr and returns the matching exit code.
int report(const sdk::Status& status);

struct InfoOptions {
  bool json = false;
};
int run_info(const core::Host& host, const InfoOptions& options);

}  // namespace qgpu::host
