// How a command-line tool ends on an error: one line on stderr and an exit status that says what
// kind of failure it was.
#pragma once

#include <string_view>

#include "qgpu/sdk/status.h"

namespace qgpu::core {

inline constexpr int kExitFailure = 1;      // the run failed
inline constexpr int kExitUsage = 2;        // the input was wrong: arguments, files, limits
inline constexpr int kExitInterrupted = 130;  // Ctrl-C (128 + SIGINT), as shells report it

// The exit status for `status`: kExitUsage for an invalid argument, a missing file, a parse error,
// something unsupported or a limit exceeded; kExitInterrupted for a cancelled run; else kExitFailure.
int exit_status(const sdk::Status& status);

// Prints `status` as one line on stderr ("TOOL: error: ..." unless it names its own location, e.g.
// "file.cu:3:5: error: ...") and returns exit_status(status).
int report_error(std::string_view tool, const sdk::Status& status);

}  // namespace qgpu::core
