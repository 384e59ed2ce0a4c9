#include "lower/diagnostics.h"

namespace qgpu::simt::lower {

sdk::Status Diagnostics::error(sdk::ErrorCode code, sdk::IrLoc loc, const std::string& msg) const {
  const std::string m = "kernel '" + kernel_.name + "': " + msg;
  if (loc.line == 0) return sdk::Status(code, m);
  const std::string file = kernel_.source_path.empty() ? std::string("<kernel>") : kernel_.source_path;
  return sdk::error_at(file + ":" + std::to_string(loc.line) + ":" + std::to_string(loc.column), code, m);
}

sdk::Status Diagnostics::limit(const std::string& what, long need, long have, const std::string& unit_and_context,
                               const std::string& hint) const {
  return error(sdk::ErrorCode::kLimitExceeded, kernel_.loc,
               what + " needs " + std::to_string(need) + " " + unit_and_context + ", the machine has " +
                   std::to_string(have) + " (over by " + std::to_string(need - have) + ")" +
                   (hint.empty() ? "" : "; " + hint));
}

std::string Diagnostics::label(std::size_t block) const {
  return kernel_.blocks[block].label.empty() ? "bb" + std::to_string(block) : kernel_.blocks[block].label;
}

}  // namespace qgpu::simt::lower
