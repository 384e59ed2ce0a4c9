#include "qgpu/core/host.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

#include "qgpu/core/text.h"

namespace qgpu::core {
namespace fs = std::filesystem;
using sdk::ErrorCode;
using sdk::Expected;
using sdk::Status;

fs::path default_plugin_dir(const fs::path& executable) {
  return (executable.parent_path() / ".." / "lib" / "qgpu" / "plugins").lexically_normal();
}

Expected<std::unique_ptr<Host>> Host::open(const HostOptions& options) {
  std::unique_ptr<Host> host(new Host());
  if (options.config_file) {
    auto config = load_config(*options.config_file);
    if (!config) return config.error();
    host->config_ = std::move(*config);
  }

  std::error_code ec;
  for (const auto& dir : options.plugin_dirs) {
    if (!fs::is_directory(dir, ec)) {
      return sdk::not_found("--plugin-dir '" + dir.string() + "' does not exist or is not a directory");
    }
    host->search_path_.push_back({fs::absolute(dir, ec).lexically_normal(), "--plugin-dir", true});
  }
  if (host->config_) {
    for (const auto& dir : host->config_->plugin_paths) host->search_path_.push_back({dir, "config", true});
  }
  if (const char* env = std::getenv("QGPU_PLUGIN_PATH"); env != nullptr && *env != '\0') {
    std::string_view rest(env);
    while (!rest.empty()) {
      auto colon = rest.find(':');
      std::string_view entry = rest.substr(0, colon);
      if (!entry.empty()) {
        fs::path dir(entry);
        host->search_path_.push_back(
            {fs::absolute(dir, ec).lexically_normal(), "QGPU_PLUGIN_PATH", fs::is_directory(dir, ec)});
      }
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  if (!options.executable.empty()) {
    fs::path dir = default_plugin_dir(options.executable);
    host->search_path_.push_back({dir, "next to the executable", fs::is_directory(dir, ec)});
  }

  // Explicit `library:` entries come first: the user asked for exactly that file.
  QGPU_RETURN_IF_ERROR(host->load_explicit_libraries());
  for (auto& dir : host->search_path_) {
    if (!dir.exists) {
      spdlog::debug("plugin directory {} ({}) does not exist; skipped", dir.path.string(), dir.origin);
      continue;
    }
    QGPU_RETURN_IF_ERROR(host->registry_.scan_directory(dir.path));
  }
  return host;
}

Status Host::load_explicit_libraries() {
  if (!config_) return Status::ok();
  for (const PluginSection& section : config_->sections) {
    if (!section.library) continue;
    auto loaded = registry_.load_file(*section.library);
    if (!loaded) {
      return sdk::error_at(section.library_where.str(), ErrorCode::kPluginError,
                           section.name + ".library: cannot load plugin '" + section.library->string() +
                               "': " + loaded.error().message());
    }
    const PluginInfo* info = *loaded;
    if (info->kind != section.kind || info->name != section.plugin) {
      return sdk::error_at(section.library_where.str(), ErrorCode::kInvalidArgument,
                           section.name + ".library: '" + section.library->string() + "' holds the " +
                               std::string(kind_name(info->kind)) + " plugin '" + info->name +
                               "', but the section asks for the " + section.name + " plugin '" + section.plugin + "'");
    }
  }
  return Status::ok();
}

Expected<Selection> Host::select(QgpuPluginKind kind) const {
  const std::string section_name(kind_name(kind));
  if (!config_) return sdk::invalid_argument("no config given (use --config FILE)");
  const PluginSection* section = config_->section(kind);
  if (section == nullptr) {
    return sdk::invalid_argument("config '" + config_->file.string() + "' has no '" + section_name + "' section");
  }
  const PluginInfo* plugin = registry_.find(kind, section->plugin);
  if (plugin == nullptr) {
    std::string message;
    if (const PluginInfo* other = registry_.find_any_kind(section->plugin)) {
      message = "'" + section->plugin + "' is a " + std::string(kind_name(other->kind)) + " plugin, not a " +
                section_name + " plugin";
    } else {
      message = "unknown " + section_name + " plugin '" + section->plugin + "'";
      std::vector<std::string> names;
      for (const PluginInfo* p : registry_.of_kind(kind)) names.push_back(p->name);
      std::string hint = closest_match(section->plugin, names);
      if (!hint.empty()) message += " (did you mean '" + hint + "'?)";
      message += names.empty() ? "; no " + section_name + " plugins were found" : "; available: " + join(names);
    }
    if (!registry_.failures().empty()) {
      message += " (" + std::to_string(registry_.failures().size()) +
                 " plugin files failed to load; 'qgpu-host info' lists why)";
    }
    return sdk::error_at(section->plugin_where.str(), ErrorCode::kNotFound, message);
  }
  auto options = resolve_options(plugin->options, section->settings, config_->directory(),
                                 "'" + section->name + "' (plugin " + plugin->name + ")", section->where);
  if (!options) return options.error();
  return Selection{section, plugin, std::move(*options)};
}

}  // namespace qgpu::core
