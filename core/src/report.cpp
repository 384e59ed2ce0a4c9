#include "qgpu/core/report.h"

#include <cstdio>
#include <string>

#include "qgpu/core/text.h"

namespace qgpu::core {

int exit_status(const sdk::Status& status) {
  switch (status.code()) {
    case sdk::ErrorCode::kInvalidArgument:
    case sdk::ErrorCode::kNotFound:
    case sdk::ErrorCode::kParseError:
    case sdk::ErrorCode::kUnsupported:
    case sdk::ErrorCode::kLimitExceeded: return kExitUsage;
    case sdk::ErrorCode::kCancelled: return kExitInterrupted;
    default: return kExitFailure;
  }
}

int report_error(std::string_view tool, const sdk::Status& status) {
  std::string line = status.to_string();
  if (status.location().empty()) line = std::string(tool) + ": " + line;
  std::fprintf(stderr, "%s\n", one_line(line).c_str());
  return exit_status(status);
}

}  // namespace qgpu::core
