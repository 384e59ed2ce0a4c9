#include "qgpu/core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <string>

namespace qgpu::core {

void init_logging() {
  auto logger = spdlog::stderr_color_mt("qgpu");
  logger->set_pattern("%^%l%$: %v");
  logger->set_level(spdlog::level::warn);
  spdlog::set_default_logger(logger);
}

sdk::Status set_log_level(std::string_view level) {
  const std::string name(level);
  spdlog::level::level_enum parsed = spdlog::level::from_str(name);
  // from_str maps unknown names to "off"; only accept the names we document.
  if (parsed == spdlog::level::off && name != "off") {
    return sdk::invalid_argument("unknown log level '" + name + "'; allowed: trace, debug, info, warn, error, off");
  }
  if (name == "warning" || name == "err" || name == "critical") {
    return sdk::invalid_argument("unknown log level '" + name + "'; allowed: trace, debug, info, warn, error, off");
  }
  spdlog::set_level(parsed);
  return sdk::Status::ok();
}

}  // namespace qgpu::core
