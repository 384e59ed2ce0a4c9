// Status and Expected<T>: how every SDK call reports failure.
//
// No exception crosses a plugin boundary. A plugin method returns a Status
// (success or an error with a code and a one-line message) or an Expected<T>
// (a value or such an error). Messages are single lines that name the problem
// (file, line, instruction, limit) so the host can print them verbatim.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace qgpu::sdk {

enum class ErrorCode : std::uint32_t {
  kOk = 0,
  kInvalidArgument,  // bad input from the user (arguments, config values)
  kNotFound,         // a file, kernel, plugin or name that does not exist
  kNotAvailable,     // an operation this build or plugin does not provide
  kUnsupported,      // input that is valid in general but outside what we handle
  kLimitExceeded,    // input over one of the machine's limits
  kParseError,       // malformed text or binary input
  kIoError,          // the operating system refused a read or write
  kPluginError,      // a plugin misbehaved (threw, returned garbage)
  kInternal,         // a bug in qgpu
  kCancelled,        // the user stopped the work (Ctrl-C)
};

// A short lower-case name for the code ("not-available", ...).
std::string_view error_code_name(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // success
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  // An error that points into an input file: `location` is "file:line:col" (or "file:line").
  Status(ErrorCode code, std::string message, std::string location)
      : code_(code), message_(std::move(message)), location_(std::move(location)) {}

  static Status ok() { return {}; }

  bool is_ok() const { return code_ == ErrorCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  const std::string& location() const { return location_; }
  // "file:line:col: error: message" or "error: message": how tools print it.
  std::string to_string() const;

  // Prepends context ("while loading X: ") to the message of an error; no-op on success.
  Status with_context(std::string_view context) const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
  std::string location_;
};

// Constructors for the common error kinds.
Status invalid_argument(std::string message);
Status not_found(std::string message);
Status unsupported(std::string message);
Status limit_exceeded(std::string message);
Status parse_error(std::string message);
Status io_error(std::string message);
Status plugin_error(std::string message);
Status internal_error(std::string message);
Status cancelled(std::string message);
// "<what> is not available in this build": the one way an unbuilt operation answers.
Status not_available(std::string_view what);
// A parse or validation error at "file:line:col".
Status error_at(std::string location, ErrorCode code, std::string message);

template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : storage_(std::in_place_index<0>, std::move(value)) {}  // NOLINT(implicit)
  Expected(Status error) : storage_(std::in_place_index<1>, std::move(error)) {  // NOLINT(implicit)
    if (std::get<1>(storage_).is_ok()) {
      storage_.template emplace<1>(ErrorCode::kInternal, "Expected constructed from a success status");
    }
  }

  bool has_value() const { return storage_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  T& value() & { return std::get<0>(storage_); }
  const T& value() const& { return std::get<0>(storage_); }
  T&& value() && { return std::get<0>(std::move(storage_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // The error; Status::ok() when a value is held.
  Status status() const { return has_value() ? Status::ok() : std::get<1>(storage_); }
  const Status& error() const { return std::get<1>(storage_); }

 private:
  std::variant<T, Status> storage_;
};

}  // namespace qgpu::sdk

// Returns the error of a Status-returning expression from the enclosing function.
#define QGPU_RETURN_IF_ERROR(expr)                 \
  do {                                             \
    ::qgpu::sdk::Status qgpu_status_ = (expr);     \
    if (!qgpu_status_.is_ok()) return qgpu_status_; \
  } while (false)

// Evaluates an Expected<T> expression; on error returns its Status from the enclosing function
// (which returns a Status or an Expected<U>), else moves the value into `lhs`: an existing
// variable or member (`QGPU_ASSIGN_OR_RETURN(x, f())`) or a declaration that lives on after the
// macro (`QGPU_ASSIGN_OR_RETURN(auto x, f())`). The expression may contain commas.
//
// It expands to several statements (a declaration must outlive it), so it cannot be the whole
// body of an unbraced if/else/for: there the temporary leaves scope and the code does not compile.
// The temporary is named after the line, so use it at most once per line.
#define QGPU_ASSIGN_OR_RETURN(lhs, ...) \
  QGPU_ASSIGN_OR_RETURN_IMPL_(QGPU_STATUS_CONCAT_(qgpu_expected_, __LINE__), lhs, __VA_ARGS__)
#define QGPU_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, ...) \
  auto tmp = (__VA_ARGS__);                        \
  if (!tmp.has_value()) return tmp.error();        \
  lhs = std::move(tmp).value()
#define QGPU_STATUS_CONCAT_(a, b) QGPU_STATUS_CONCAT_INNER_(a, b)
#define QGPU_STATUS_CONCAT_INNER_(a, b) a##b
