#include "qgpu/sdk/status.h"

namespace qgpu::sdk {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidArgument: return "invalid-argument";
    case ErrorCode::kNotFound: return "not-found";
    case ErrorCode::kNotAvailable: return "not-available";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kLimitExceeded: return "limit-exceeded";
    case ErrorCode::kParseError: return "parse-error";
    case ErrorCode::kIoError: return "io-error";
    case ErrorCode::kPluginError: return "plugin-error";
    case ErrorCode::kInternal: return "internal";
    case ErrorCode::kCancelled: return "cancelled";
  }
  return "unknown";
}

Status Status::with_context(std::string_view context) const {
  if (is_ok()) return *this;
  return Status(code_, std::string(context) + ": " + message_, location_);
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  if (location_.empty()) return "error: " + message_;
  return location_ + ": error: " + message_;
}

Status error_at(std::string location, ErrorCode code, std::string message) {
  return {code, std::move(message), std::move(location)};
}

Status invalid_argument(std::string message) { return {ErrorCode::kInvalidArgument, std::move(message)}; }
Status not_found(std::string message) { return {ErrorCode::kNotFound, std::move(message)}; }
Status unsupported(std::string message) { return {ErrorCode::kUnsupported, std::move(message)}; }
Status limit_exceeded(std::string message) { return {ErrorCode::kLimitExceeded, std::move(message)}; }
Status parse_error(std::string message) { return {ErrorCode::kParseError, std::move(message)}; }
Status io_error(std::string message) { return {ErrorCode::kIoError, std::move(message)}; }
Status plugin_error(std::string message) { return {ErrorCode::kPluginError, std::move(message)}; }
Status internal_error(std::string message) { return {ErrorCode::kInternal, std::move(message)}; }
Status cancelled(std::string message) { return {ErrorCode::kCancelled, std::move(message)}; }

Status not_available(std::string_view what) {
  return {ErrorCode::kNotAvailable, std::string(what) + " is not available in this build"};
}

}  // namespace qgpu::sdk
