#include "qgpu/core/plugin_registry.h"

#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/dll/shared_library.hpp>
#include <cstring>
#include <system_error>

#include "qgpu/core/text.h"

namespace qgpu::core {
namespace fs = std::filesystem;
using sdk::Expected;
using sdk::Status;

std::string_view kind_name(QgpuPluginKind kind) {
  switch (kind) {
    case QGPU_PLUGIN_FRONTEND: return "frontend";
    case QGPU_PLUGIN_MACHINE: return "machine";
    case QGPU_PLUGIN_BASE_MODEL: return "base";
    case QGPU_PLUGIN_TENSOR_BACKEND: return "backend";
  }
  return "unknown";
}

std::string_view host_fingerprint() {
  return QGPU_BUILD_FINGERPRINT;
}

namespace {

bool is_plugin_file_name(const fs::path& file) {
  const std::string name = file.filename().string();
#if defined(__APPLE__)
  constexpr std::string_view kSuffix = ".dylib";
#else
  constexpr std::string_view kSuffix = ".so";
#endif
  return name.rfind("qgpu_", 0) == 0 && name.size() > kSuffix.size() + 5 &&
         name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}

bool valid_plugin_name(std::string_view name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

bool valid_kind(std::uint32_t kind) {
  return kind >= QGPU_PLUGIN_FRONTEND && kind <= QGPU_PLUGIN_TENSOR_BACKEND;
}

std::string safe_string(const char* s) {
  return s == nullptr ? std::string() : std::string(s);
}

// Checks the option table a plugin declares; a malformed table is the plugin's bug.
Status check_option_specs(const QgpuPluginDescriptor& d) {
  if (d.option_count > 0 && d.options == nullptr) return sdk::plugin_error("declares options but no option table");
  for (std::uint32_t i = 0; i < d.option_count; ++i) {
    const QgpuOptionSpec& o = d.options[i];
    if (o.name == nullptr || !valid_plugin_name(o.name)) {
      return sdk::plugin_error("option " + std::to_string(i) + " has an invalid name");
    }
    if (o.type < QGPU_OPTION_STRING || o.type > QGPU_OPTION_PATH) {
      return sdk::plugin_error("option '" + std::string(o.name) + "' has unknown type " + std::to_string(o.type));
    }
    if (o.type == QGPU_OPTION_ENUM && (o.choices == nullptr || *o.choices == '\0')) {
      return sdk::plugin_error("enum option '" + std::string(o.name) + "' lists no choices");
    }
    for (std::uint32_t j = 0; j < i; ++j) {
      if (std::strcmp(d.options[j].name, o.name) == 0) {
        return sdk::plugin_error("option '" + std::string(o.name) + "' is declared twice");
      }
    }
  }
  return Status::ok();
}

void plugin_log_sink(void* user, int level, const char* message) {
  const auto* name = static_cast<const std::string*>(user);
  auto spd_level = static_cast<spdlog::level::level_enum>(std::clamp(level, 0, 4));
  spdlog::log(spd_level, "[{}] {}", name != nullptr ? *name : std::string("plugin"), message ? message : "");
}

}  // namespace

Status PluginRegistry::record_failure(const fs::path& file, Status status) {
  failures_.push_back({file, status.message()});
  spdlog::debug("plugin {} failed to load: {}", file.string(), status.message());
  return status;
}

Status PluginRegistry::scan_directory(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return sdk::not_found("plugin directory '" + dir.string() + "' does not exist or is not a directory");
  }
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (is_plugin_file_name(it->path())) files.push_back(it->path());
  }
  if (ec) return sdk::io_error("cannot list plugin directory '" + dir.string() + "': " + ec.message());
  std::sort(files.begin(), files.end());
  spdlog::debug("scanning {} ({} plugin files)", dir.string(), files.size());
  for (const fs::path& file : files) {
    (void)load_file(file);  // failures are recorded; scanning goes on
  }
  return Status::ok();
}

Expected<const PluginInfo*> PluginRegistry::load_file(const fs::path& requested) {
  std::error_code ec;
  fs::path file = fs::absolute(requested, ec);
  if (ec) file = requested;
  if (!fs::exists(file, ec)) return record_failure(file, sdk::not_found("no such file"));
  for (const auto& p : plugins_) {
    if (fs::equivalent(p->path, file, ec)) return p.get();
  }

  auto library = std::make_shared<boost::dll::shared_library>();
  boost::dll::fs::error_code load_error;
  library->load(file, boost::dll::load_mode::rtld_lazy | boost::dll::load_mode::rtld_local, load_error);
  if (load_error) {
    const char* detail = dlerror();  // Boost's message is generic; the loader's names the cause
    return record_failure(file, sdk::plugin_error("cannot load shared library: " +
                                                  (detail ? std::string(detail) : load_error.message())));
  }
  if (!library->has(QGPU_PLUGIN_ENTRY_SYMBOL)) {
    return record_failure(file, sdk::plugin_error("not a qgpu plugin: no '" QGPU_PLUGIN_ENTRY_SYMBOL "' symbol"));
  }

  const QgpuPluginDescriptor* d = nullptr;
  try {
    d = library->get<const QgpuPluginDescriptor*()>(QGPU_PLUGIN_ENTRY_SYMBOL)();
  } catch (const std::exception& e) {
    return record_failure(file, sdk::plugin_error(std::string("descriptor function threw: ") + e.what()));
  } catch (...) {
    return record_failure(file, sdk::plugin_error("descriptor function threw a non-standard exception"));
  }
  if (d == nullptr) return record_failure(file, sdk::plugin_error("descriptor function returned null"));

  // The ABI version is the only field read before it is known to match.
  if (d->abi_version != QGPU_ABI_VERSION) {
    return record_failure(
        file, sdk::plugin_error("plugin ABI version " + std::to_string(d->abi_version) + ", expected " +
                                std::to_string(QGPU_ABI_VERSION) + " (rebuild the plugin against this SDK)"));
  }
  if (d->struct_size != sizeof(QgpuPluginDescriptor)) {
    return record_failure(file, sdk::plugin_error("descriptor size " + std::to_string(d->struct_size) + ", expected " +
                                                  std::to_string(sizeof(QgpuPluginDescriptor))));
  }
  const std::string fingerprint = safe_string(d->build_fingerprint);
  if (fingerprint != host_fingerprint()) {
    return record_failure(file, sdk::plugin_error("build fingerprint '" + fingerprint + "', expected '" +
                                                  std::string(host_fingerprint()) + "'"));
  }
  if (!valid_kind(d->kind)) {
    return record_failure(file, sdk::plugin_error("unknown plugin kind " + std::to_string(d->kind)));
  }
  const std::string name = safe_string(d->name);
  if (!valid_plugin_name(name)) {
    return record_failure(
        file, sdk::plugin_error("invalid plugin name '" + name + "' (lower-case letters, digits and '_', at most 64)"));
  }
  if (d->create == nullptr || d->destroy == nullptr) {
    return record_failure(file, sdk::plugin_error("descriptor of '" + name + "' lacks create/destroy"));
  }
  if (Status s = check_option_specs(*d); !s) return record_failure(file, s.with_context("plugin '" + name + "'"));

  if (const PluginInfo* existing = find(d->kind, name)) {
    spdlog::debug("{} plugin '{}' in {} is shadowed by {}", kind_name(d->kind), name, file.string(),
                  existing->path.string());
    shadowed_.push_back(file);
    return existing;
  }

  auto info = std::make_unique<PluginInfo>();
  info->path = file;
  info->kind = d->kind;
  info->name = name;
  info->version = safe_string(d->version);
  info->sdk_version = safe_string(d->sdk_version);
  info->fingerprint = fingerprint;
  info->summary = safe_string(d->summary);
  info->options.assign(d->options, d->options + d->option_count);
  info->descriptor = d;
  info->library = library;
  spdlog::debug("loaded {} plugin '{}' {} from {}", kind_name(info->kind), info->name, info->version, file.string());
  plugins_.push_back(std::move(info));
  return plugins_.back().get();
}

const PluginInfo* PluginRegistry::find(QgpuPluginKind kind, std::string_view name) const {
  for (const auto& p : plugins_) {
    if (p->kind == kind && p->name == name) return p.get();
  }
  return nullptr;
}

const PluginInfo* PluginRegistry::find_any_kind(std::string_view name) const {
  for (const auto& p : plugins_) {
    if (p->name == name) return p.get();
  }
  return nullptr;
}

std::vector<const PluginInfo*> PluginRegistry::of_kind(QgpuPluginKind kind) const {
  std::vector<const PluginInfo*> out;
  for (const auto& p : plugins_) {
    if (p->kind == kind) out.push_back(p.get());
  }
  return out;
}

Expected<void*> PluginRegistry::create_raw(const PluginInfo& info, const sdk::Options& options) const {
  QgpuHostContext context{sizeof(QgpuHostContext), &options, &plugin_log_sink, const_cast<std::string*>(&info.name)};
  char error[1024] = {};
  void* object = nullptr;
  int rc = 0;
  try {
    rc = info.descriptor->create(&context, &object, error, sizeof(error));
  } catch (...) {
    // create() is generated by QGPU_DEFINE_PLUGIN and catches everything; a
    // hand-written one might not.
    return sdk::plugin_error("plugin '" + info.name + "' threw from create()");
  }
  if (rc != 0) {
    std::string message(error);
    return sdk::plugin_error("plugin '" + info.name + "' failed to start: " +
                             (message.empty() ? std::string("no reason given") : one_line(message)));
  }
  if (object == nullptr) return sdk::plugin_error("plugin '" + info.name + "' create() returned no object");
  return object;
}

}  // namespace qgpu::core
