// The host session: a config, the plugins found on the search path, and the
// plugin each config section selects. Knows no concrete plugin.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "qgpu/core/config.h"
#include "qgpu/core/plugin_registry.h"

namespace qgpu::core {

struct HostOptions {
  std::optional<std::filesystem::path> config_file;
  std::vector<std::filesystem::path> plugin_dirs;  // --plugin-dir, searched first
  std::filesystem::path executable;                // the running binary; its ../lib/qgpu/plugins is searched last
};

// One directory of the plugin search path and why it is there.
struct SearchDir {
  std::filesystem::path path;
  std::string origin;  // "--plugin-dir", "config", "QGPU_PLUGIN_PATH", "next to the executable"
  bool exists = true;
};

// A config section resolved to a loaded plugin and validated options.
struct Selection {
  const PluginSection* section = nullptr;
  const PluginInfo* plugin = nullptr;
  sdk::Options options;
};

class Host {
 public:
  // Reads the config (if any) and scans the search path, in this order:
  // --plugin-dir, the config's plugin_paths, $QGPU_PLUGIN_PATH (':'-separated),
  // <executable>/../lib/qgpu/plugins. The first plugin of a kind and name wins.
  static sdk::Expected<std::unique_ptr<Host>> open(const HostOptions& options);

  const Config* config() const { return config_ ? &*config_ : nullptr; }
  const PluginRegistry& registry() const { return registry_; }
  const std::vector<SearchDir>& search_path() const { return search_path_; }

  // The plugin the config selects for `kind`, with options checked against its table.
  sdk::Expected<Selection> select(QgpuPluginKind kind) const;

  // Creates the selected plugin of interface T.
  template <typename T>
  sdk::Expected<std::shared_ptr<T>> instantiate() const {
    auto selection = select(T::kKind);
    if (!selection) return selection.error();
    return registry_.create<T>(*selection->plugin, selection->options);
  }
  // The same with some of the config's option values replaced (e.g. the backend's dtype
  // from `run --dtype`); each key must be an option the plugin declares.
  template <typename T>
  sdk::Expected<std::shared_ptr<T>> instantiate(const std::map<std::string, std::string>& overrides) const {
    auto selection = select(T::kKind);
    if (!selection) return selection.error();
    std::map<std::string, std::string> values = selection->options.values();
    for (const auto& [key, value] : overrides) {
      if (!values.count(key))
        return sdk::invalid_argument("plugin '" + selection->plugin->name + "' has no option '" + key + "'");
      values[key] = value;
    }
    return registry_.create<T>(*selection->plugin, sdk::Options(std::move(values)));
  }

 private:
  Host() = default;
  sdk::Status load_explicit_libraries();

  std::optional<Config> config_;
  std::vector<SearchDir> search_path_;
  PluginRegistry registry_;
  std::vector<Selection> selections_;
};

// The default plugin directory for an executable: <dir>/../lib/qgpu/plugins.
std::filesystem::path default_plugin_dir(const std::filesystem::path& executable);

}  // namespace qgpu::core
