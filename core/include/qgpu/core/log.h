// Logging setup for the host: spdlog to stderr.
#pragma once

#include <string_view>

#include "qgpu/sdk/status.h"

namespace qgpu::core {

// Levels: trace, debug, info, warn, error, off.
sdk::Status set_log_level(std::string_view level);
void init_logging();

}  // namespace qgpu::core
