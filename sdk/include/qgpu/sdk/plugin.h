// The plugin base class, what the host hands a plugin, and QGPU_DEFINE_PLUGIN.
//
// A plugin is a shared library exporting one C function (see descriptor.h).
// Its object is a C++ class deriving from one of the four interfaces
// (Frontend, Machine, BaseModel, TensorBackend). Every interface method
// returns Status/Expected; QGPU_DEFINE_PLUGIN turns exceptions thrown while
// creating the object into error messages, and the host guards every other
// call, so an exception never takes the host down.
#pragma once

#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "qgpu/sdk/descriptor.h"
#include "qgpu/sdk/status.h"

#define QGPU_SDK_API __attribute__((visibility("default")))

namespace qgpu::sdk {

// Option values after the host validated them against the plugin's
// QgpuOptionSpec list: every declared key is present (defaults filled in),
// typed values parse, paths are absolute.
class QGPU_SDK_API Options {
 public:
  Options() = default;
  explicit Options(std::map<std::string, std::string> values) : values_(std::move(values)) {}

  bool has(std::string_view key) const;
  // The raw text; an error names the key when it is absent.
  Expected<std::string> get_string(std::string_view key) const;
  Expected<std::int64_t> get_int(std::string_view key) const;
  Expected<double> get_float(std::string_view key) const;
  Expected<bool> get_bool(std::string_view key) const;
  const std::map<std::string, std::string>& values() const { return values_; }

 private:
  std::map<std::string, std::string> values_;
};

enum class LogLevel : int { kTrace = 0, kDebug, kInfo, kWarn, kError };

// Forwards a plugin's log lines to the host's logger.
class QGPU_SDK_API Logger {
 public:
  using Sink = void (*)(void* user, int level, const char* message);
  Logger() = default;
  Logger(Sink sink, void* user) : sink_(sink), user_(user) {}
  void log(LogLevel level, std::string_view message) const;
  void debug(std::string_view m) const { log(LogLevel::kDebug, m); }
  void info(std::string_view m) const { log(LogLevel::kInfo, m); }
  void warn(std::string_view m) const { log(LogLevel::kWarn, m); }

 private:
  Sink sink_ = nullptr;
  void* user_ = nullptr;
};

// What the plugin's constructor receives.
struct PluginContext {
  Options options;
  Logger logger;
};

// What a plugin reports it can do: capabilities are data, the host decides.
struct Capability {
  std::string name;    // e.g. "compile.cuda", "interpret", "forward.bf16"
  bool available = false;
  std::string detail;  // why not, or a qualifier
};

struct Description {
  std::vector<std::pair<std::string, std::string>> properties;  // e.g. {"lanes", "4"}
  std::vector<Capability> capabilities;
};

class QGPU_SDK_API Plugin {
 public:
  virtual ~Plugin();
  virtual Expected<Description> describe() const = 0;
};

// Helper for descriptors: an empty option list.
inline constexpr std::span<const QgpuOptionSpec> kNoOptions{};

// Option spec constructors, so descriptor tables read as data.
constexpr QgpuOptionSpec option_string(const char* name, const char* def, const char* help) {
  return {name, QGPU_OPTION_STRING, def, nullptr, help, 1, 0};
}
constexpr QgpuOptionSpec option_int(const char* name, const char* def, std::int64_t min, std::int64_t max,
                                    const char* help) {
  return {name, QGPU_OPTION_INT, def, nullptr, help, min, max};
}
constexpr QgpuOptionSpec option_float(const char* name, const char* def, const char* help) {
  return {name, QGPU_OPTION_FLOAT, def, nullptr, help, 1, 0};
}
constexpr QgpuOptionSpec option_bool(const char* name, const char* def, const char* help) {
  return {name, QGPU_OPTION_BOOL, def, nullptr, help, 1, 0};
}
constexpr QgpuOptionSpec option_enum(const char* name, const char* def, const char* choices, const char* help) {
  return {name, QGPU_OPTION_ENUM, def, choices, help, 1, 0};
}
constexpr QgpuOptionSpec option_path(const char* name, const char* def, const char* keywords, const char* help) {
  return {name, QGPU_OPTION_PATH, def, keywords, help, 1, 0};
}

namespace detail {
void copy_error(char* buffer, std::size_t size, std::string_view message);
}  // namespace detail

}  // namespace qgpu::sdk

// The host side of QgpuHostContext (opaque in the C header).
struct QgpuHostContext {
  std::uint32_t struct_size;
  const qgpu::sdk::Options* options;
  qgpu::sdk::Logger::Sink log_sink;
  void* log_user;
};

// Defines the plugin's exported descriptor. `Class` derives from one of the
// four interfaces and has a constructor taking `const qgpu::sdk::PluginContext&`.
// `options` is any contiguous range of QgpuOptionSpec with static storage.
#define QGPU_DEFINE_PLUGIN(Class, plugin_name, plugin_version, plugin_summary, plugin_options)                  \
  namespace {                                                                                            \
  using QgpuPluginInterface_ = typename Class::Interface;                                                \
  static_assert(std::is_base_of_v<QgpuPluginInterface_, Class>, "plugin class must derive its interface"); \
  int qgpu_plugin_create_(const QgpuHostContext* context, void** out, char* error, std::size_t size) {   \
    try {                                                                                                \
      if (context == nullptr || context->struct_size < sizeof(QgpuHostContext)) {                        \
        ::qgpu::sdk::detail::copy_error(error, size, "host context missing or too small");               \
        return 1;                                                                                        \
      }                                                                                                  \
      ::qgpu::sdk::PluginContext ctx{*context->options,                                                  \
                                     ::qgpu::sdk::Logger(context->log_sink, context->log_user)};         \
      QgpuPluginInterface_* object = new Class(ctx);                                                     \
      *out = static_cast<void*>(object);                                                                 \
      return 0;                                                                                          \
    } catch (const std::exception& e) {                                                                  \
      ::qgpu::sdk::detail::copy_error(error, size, e.what());                                            \
    } catch (...) {                                                                                      \
      ::qgpu::sdk::detail::copy_error(error, size, "unknown exception");                                 \
    }                                                                                                    \
    return 1;                                                                                            \
  }                                                                                                      \
  void qgpu_plugin_destroy_(void* object) { delete static_cast<QgpuPluginInterface_*>(object); }         \
  }                                                                                                      \
  extern "C" QGPU_SDK_API const QgpuPluginDescriptor* qgpu_plugin_descriptor(void) {                     \
    static const QgpuPluginDescriptor descriptor = {                                                     \
        QGPU_ABI_VERSION,                                                                                \
        sizeof(QgpuPluginDescriptor),                                                                    \
        QGPU_SDK_VERSION_STRING,                                                                         \
        QGPU_BUILD_FINGERPRINT,                                                                          \
        QgpuPluginInterface_::kKind,                                                                     \
        plugin_name,                                                                                     \
        plugin_version,                                                                                  \
        plugin_summary,                                                                                  \
        std::data(plugin_options),                                                                            \
        static_cast<std::uint32_t>(std::size(plugin_options)),                                                \
        &qgpu_plugin_create_,                                                                            \
        &qgpu_plugin_destroy_,                                                                           \
    };                                                                                                   \
    return &descriptor;                                                                                  \
  }
