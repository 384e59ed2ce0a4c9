// The host's YAML configuration.
//
// A config names one plugin per section (frontend, machine, base, backend)
// and that plugin's settings. The core knows the top-level keys; each
// plugin's keys are checked against the option table its descriptor declares
// (resolve_options). Every error points at "file:line:col" and, for an
// unknown key or value, says what is allowed.
//
//   version: 1
//   log_level: info              # trace|debug|info|warn|error|off
//   plugin_paths: [../build/lib/qgpu/plugins]   # relative to this file
//   machine:
//     plugin: machine_simt       # a plugin name
//     library: ./qgpu_x.so       # optional: load this file explicitly
//     lanes: 4                   # every other key is a plugin option
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "qgpu/sdk/plugin.h"

namespace qgpu::core {

inline constexpr int kConfigVersion = 1;

struct SourceLocation {
  std::string file;
  int line = 0;             // 1-based; 0 = unknown
  int column = 0;           // 1-based; 0 = unknown
  std::string str() const;  // "file:line:col"
};

// A plugin setting as written in the file, before the plugin's table is applied.
struct ConfigSetting {
  std::string key;
  std::string text;          // scalar text ("" for non-scalars)
  std::string node_kind;     // "scalar", "sequence", "mapping" or "null"
  SourceLocation where;      // of the value (of the key when the value is empty)
  SourceLocation key_where;  // of the key
};

struct PluginSection {
  std::string name;  // "frontend", "machine", "base", "backend"
  QgpuPluginKind kind{};
  SourceLocation where;
  std::string plugin;
  SourceLocation plugin_where;
  std::optional<std::filesystem::path> library;  // absolute
  SourceLocation library_where;
  std::vector<ConfigSetting> settings;  // in file order
};

struct Config {
  std::filesystem::path file;  // absolute
  int version = kConfigVersion;
  std::string description;
  std::optional<std::string> log_level;
  std::vector<std::filesystem::path> plugin_paths;  // absolute, each an existing directory
  std::vector<PluginSection> sections;

  const PluginSection* section(QgpuPluginKind kind) const;
  std::filesystem::path directory() const { return file.parent_path(); }
};

// The names of the four sections and the kind each selects.
const std::vector<std::pair<std::string, QgpuPluginKind>>& config_sections();

// Reads and validates a config file (top-level schema only).
sdk::Expected<Config> load_config(const std::filesystem::path& file);
// The same from text; `file` is used for messages and to resolve relative paths.
sdk::Expected<Config> parse_config(const std::string& text, const std::filesystem::path& file);

// Checks a section's settings against a plugin's option table: unknown keys,
// wrong types, values out of range or not among the choices, missing paths,
// missing required keys. Fills in defaults; resolves paths against `base_dir`.
sdk::Expected<sdk::Options> resolve_options(const std::vector<QgpuOptionSpec>& specs,
                                            const std::vector<ConfigSetting>& settings,
                                            const std::filesystem::path& base_dir, const std::string& section_label,
                                            const SourceLocation& section_where);

// The plugin's defaults alone (for a plugin that no config section selects).
sdk::Expected<sdk::Options> default_options(const std::vector<QgpuOptionSpec>& specs);

std::string_view option_type_name(QgpuOptionType type);

}  // namespace qgpu::core
