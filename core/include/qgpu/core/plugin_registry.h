// Plugin discovery and loading.
//
// Plugins are shared libraries named qgpu_<name>.so exporting the SDK's
// descriptor. The registry loads them once and never unloads them; every
// object a plugin makes is held by a pointer whose deleter keeps the library
// alive. A file that fails to load is recorded as a failure (path + reason)
// and does not stop the host.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "qgpu/sdk/plugin.h"

namespace qgpu::core {

// "frontend", "machine", "base", "backend" (the config section names).
std::string_view kind_name(QgpuPluginKind kind);

// A plugin that passed every descriptor check.
struct PluginInfo {
  std::filesystem::path path;
  QgpuPluginKind kind{};
  std::string name;
  std::string version;
  std::string sdk_version;
  std::string fingerprint;
  std::string summary;
  std::vector<QgpuOptionSpec> options;  // strings point into the library, which stays loaded
  const QgpuPluginDescriptor* descriptor = nullptr;
  std::shared_ptr<void> library;  // keeps the shared library loaded
};

struct LoadFailure {
  std::filesystem::path path;
  std::string reason;
};

// The fingerprint this host was built with; a plugin's must equal it.
std::string_view host_fingerprint();

class PluginRegistry {
 public:
  PluginRegistry() = default;
  PluginRegistry(const PluginRegistry&) = delete;
  PluginRegistry& operator=(const PluginRegistry&) = delete;

  // Loads every qgpu_*.so in `dir` (sorted by name). A plugin whose kind and
  // name were already registered is recorded as shadowed, not loaded twice.
  // Fails only when `dir` is not a readable directory.
  sdk::Status scan_directory(const std::filesystem::path& dir);

  // Loads one file. On failure the reason is also recorded in failures().
  sdk::Expected<const PluginInfo*> load_file(const std::filesystem::path& file);

  const std::vector<std::unique_ptr<PluginInfo>>& plugins() const { return plugins_; }
  const std::vector<LoadFailure>& failures() const { return failures_; }
  // Files that held a plugin already registered from an earlier directory.
  const std::vector<std::filesystem::path>& shadowed() const { return shadowed_; }

  const PluginInfo* find(QgpuPluginKind kind, std::string_view name) const;
  const PluginInfo* find_any_kind(std::string_view name) const;
  std::vector<const PluginInfo*> of_kind(QgpuPluginKind kind) const;

  // Creates the plugin object with validated options. T is one of the four SDK
  // interfaces and must match the plugin's kind.
  template <typename T>
  sdk::Expected<std::shared_ptr<T>> create(const PluginInfo& info, const sdk::Options& options) const {
    if (info.kind != T::kKind) {
      return sdk::invalid_argument("plugin '" + info.name + "' is a " + std::string(kind_name(info.kind)) +
                                   " plugin, not a " + std::string(kind_name(T::kKind)) + " plugin");
    }
    auto raw = create_raw(info, options);
    if (!raw) return raw.error();
    T* object = static_cast<T*>(*raw);
    auto destroy = info.descriptor->destroy;
    std::shared_ptr<void> library = info.library;
    return std::shared_ptr<T>(object, [destroy, library](T* p) { destroy(static_cast<void*>(p)); });
  }

 private:
  sdk::Expected<void*> create_raw(const PluginInfo& info, const sdk::Options& options) const;
  sdk::Status record_failure(const std::filesystem::path& file, sdk::Status status);

  std::vector<std::unique_ptr<PluginInfo>> plugins_;
  std::vector<LoadFailure> failures_;
  std::vector<std::filesystem::path> shadowed_;
};

// Runs a plugin call, turning an exception thrown by the plugin into an error
// that names the plugin. `call` returns sdk::Status or sdk::Expected<...>.
template <typename Call>
auto guarded_call(std::string_view plugin, std::string_view what, Call&& call) -> decltype(call()) {
  try {
    return call();
  } catch (const std::exception& e) {
    return sdk::plugin_error("plugin '" + std::string(plugin) + "' threw from " + std::string(what) + ": " + e.what());
  } catch (...) {
    return sdk::plugin_error("plugin '" + std::string(plugin) + "' threw a non-standard exception from " +
                             std::string(what));
  }
}

}  // namespace qgpu::core
