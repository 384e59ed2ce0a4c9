// qgpu-host info: which plugins were found, from which files, their versions
// and what each reports it can do; load failures are shown, not fatal.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "commands.h"
#include "qgpu/core/merged_model.h"
#include "qgpu/core/silence_json.h"
#include "qgpu/core/text.h"
#include "qgpu/sdk/sdk.h"

namespace qgpu::host {
namespace {

using core::PluginInfo;

struct PluginReport {
  const PluginInfo* info = nullptr;
  bool selected = false;
  sdk::Options options;
  sdk::Expected<sdk::Description> description = sdk::not_available("description");
};

template <typename T>
sdk::Expected<sdk::Description> describe_as(const core::PluginRegistry& registry, const PluginInfo& info,
                                            const sdk::Options& options) {
  auto object = core::guarded_call(info.name, "create()", [&] { return registry.create<T>(info, options); });
  if (!object) return object.error();
  std::shared_ptr<T> plugin = std::move(*object);
  return core::guarded_call(info.name, "describe()", [&] { return plugin->describe(); });
}

sdk::Expected<sdk::Description> describe(const core::PluginRegistry& registry, const PluginInfo& info,
                                         const sdk::Options& options) {
  switch (info.kind) {
    case QGPU_PLUGIN_FRONTEND: return describe_as<sdk::Frontend>(registry, info, options);
    case QGPU_PLUGIN_MACHINE: return describe_as<sdk::Machine>(registry, info, options);
    case QGPU_PLUGIN_BASE_MODEL: return describe_as<sdk::BaseModel>(registry, info, options);
    case QGPU_PLUGIN_TENSOR_BACKEND: return describe_as<sdk::TensorBackend>(registry, info, options);
  }
  return sdk::internal_error("unknown plugin kind");
}

std::string options_line(const sdk::Options& options) {
  std::vector<std::string> items;
  for (const auto& [key, value] : options.values()) items.push_back(key + "=" + value);
  return items.empty() ? "(none)" : core::join(items, " ");
}

void print_text(const core::Host& host, const std::vector<PluginReport>& reports,
                const std::optional<core::SilenceCertificate>& silence) {
  std::printf("qgpu-host %s (SDK %s, plugin ABI %u, %s)\n", QGPU_SDK_VERSION_STRING, QGPU_SDK_VERSION_STRING,
              QGPU_ABI_VERSION, QGPU_BUILD_FINGERPRINT);
  if (const core::Config* config = host.config()) {
    std::printf("config: %s\n", config->file.c_str());
  } else {
    std::printf("config: none (pass --config FILE to select plugins)\n");
  }
  std::printf("plugin search path:\n");
  for (const auto& dir : host.search_path()) {
    std::printf("  %s  (%s%s)\n", dir.path.c_str(), dir.origin.c_str(), dir.exists ? "" : ", missing");
  }
  std::printf("\nplugins (%zu):\n", reports.size());
  for (const PluginReport& r : reports) {
    const PluginInfo& p = *r.info;
    std::printf("  %-8s %-16s %-8s%s\n", std::string(core::kind_name(p.kind)).c_str(), p.name.c_str(),
                p.version.c_str(), r.selected ? "  [selected by config]" : "");
    std::printf("    file:         %s\n", p.path.c_str());
    std::printf("    summary:      %s\n", p.summary.c_str());
    std::printf("    sdk:          %s\n", p.sdk_version.c_str());
    std::printf("    options:      %s\n", options_line(r.options).c_str());
    if (!r.description) {
      std::printf("    error:        %s\n", core::one_line(r.description.error().message()).c_str());
      continue;
    }
    for (const auto& [key, value] : r.description->properties) {
      std::printf("    %-13s %s\n", (key + ":").c_str(), value.c_str());
    }
    for (const auto& cap : r.description->capabilities) {
      std::printf("    %s %s%s%s\n", cap.available ? "[x]" : "[ ]", cap.name.c_str(), cap.detail.empty() ? "" : ": ",
                  cap.detail.c_str());
    }
  }
  const auto& failures = host.registry().failures();
  if (!failures.empty()) {
    std::printf("\nload failures (%zu):\n", failures.size());
    for (const auto& f : failures) std::printf("  %s: %s\n", f.path.c_str(), core::one_line(f.reason).c_str());
  }
  const auto& shadowed = host.registry().shadowed();
  if (!shadowed.empty()) {
    std::printf("\nshadowed by an earlier directory (%zu):\n", shadowed.size());
    for (const auto& s : shadowed) std::printf("  %s\n", s.c_str());
  }
  if (silence)
    std::printf("\nsilence on text (the base's %lld embedding rows, mute direction over up to %lld channels):\n  %s\n",
                static_cast<long long>(silence->rows), static_cast<long long>(silence->channels_available),
                silence->to_string().c_str());
}

void print_json(const core::Host& host, const std::vector<PluginReport>& reports,
                const std::optional<core::SilenceCertificate>& silence) {
  using nlohmann::json;
  json out;
  out["version"] = QGPU_SDK_VERSION_STRING;
  out["abi_version"] = QGPU_ABI_VERSION;
  out["fingerprint"] = QGPU_BUILD_FINGERPRINT;
  out["config"] = host.config() ? json(host.config()->file.string()) : json(nullptr);
  out["search_path"] = json::array();
  for (const auto& dir : host.search_path()) {
    out["search_path"].push_back({{"path", dir.path.string()}, {"origin", dir.origin}, {"exists", dir.exists}});
  }
  out["plugins"] = json::array();
  for (const PluginReport& r : reports) {
    const PluginInfo& p = *r.info;
    json j = {{"kind", core::kind_name(p.kind)},
              {"name", p.name},
              {"version", p.version},
              {"sdk_version", p.sdk_version},
              {"path", p.path.string()},
              {"summary", p.summary},
              {"selected", r.selected},
              {"options", r.options.values()}};
    if (r.description) {
      json props = json::object();
      for (const auto& [key, value] : r.description->properties) props[key] = value;
      json caps = json::array();
      for (const auto& c : r.description->capabilities) {
        caps.push_back({{"name", c.name}, {"available", c.available}, {"detail", c.detail}});
      }
      j["properties"] = props;
      j["capabilities"] = caps;
    } else {
      j["error"] = r.description.error().message();
    }
    out["plugins"].push_back(j);
  }
  out["failures"] = json::array();
  for (const auto& f : host.registry().failures()) {
    out["failures"].push_back({{"path", f.path.string()}, {"reason", f.reason}});
  }
  out["shadowed"] = json::array();
  for (const auto& s : host.registry().shadowed()) out["shadowed"].push_back(s.string());
  if (silence) out["silence"] = core::to_json(*silence);
  std::cout << out.dump(2) << "\n";
}

}  // namespace

int run_info(const core::Host& host, const InfoOptions& options) {
  std::vector<PluginReport> reports;
  // Config errors (unknown plugin, bad option) are fatal: the listing would describe a config that cannot run.
  std::vector<core::Selection> selections;
  if (const core::Config* config = host.config()) {
    for (const auto& section : config->sections) {
      auto selection = host.select(section.kind);
      if (!selection) return report(selection.error());
      selections.push_back(std::move(*selection));
    }
  }
  for (const auto& p : host.registry().plugins()) {
    PluginReport r;
    r.info = p.get();
    auto chosen = std::find_if(selections.begin(), selections.end(),
                               [&](const core::Selection& s) { return s.plugin == p.get(); });
    if (chosen != selections.end()) {
      r.selected = true;
      r.options = chosen->options;
    } else {
      auto defaults = core::default_options(p->options);
      if (defaults) r.options = *defaults;
    }
    r.description = describe(host.registry(), *p, r.options);
    reports.push_back(std::move(r));
  }
  std::stable_sort(reports.begin(), reports.end(), [](const PluginReport& a, const PluginReport& b) {
    return a.info->kind != b.info->kind ? a.info->kind < b.info->kind : a.info->name < b.info->name;
  });

  // --silence: the mute direction over the configured base's embedding, certified as a merge
  // certifies it (docs/MACHINE_CIRCUIT.md §6.1), without compiling a circuit: the merge
  // also bounds the circuit's own terms when it sets the gain.
  std::optional<core::SilenceCertificate> silence;
  if (options.silence) {
    auto backend = host.instantiate<sdk::TensorBackend>();
    if (!backend) return report(backend.error().with_context("--silence"));
    auto base = host.instantiate<sdk::BaseModel>();
    if (!base) return report(base.error().with_context("--silence"));
    auto info = core::guarded_call("base", "load()", [&] { return (*base)->load(**backend); });
    if (!info) return report(info.error().with_context("--silence"));
    core::MuteBounds bounds;
    bounds.dtype = (*backend)->dtype();
    bounds.terms = info->shapes.hidden_size;
    bounds.eps = info->shapes.rms_norm_eps;
    const int width = options.mute_width > 0 ? options.mute_width : core::kMuteWidth;
    auto cert = core::base_silence(**base, **backend, info->shapes.hidden_size, info->vocab_size, width, bounds);
    (*base)->reset();
    if (!cert) return report(cert.error().with_context("--silence"));
    silence = std::move(*cert);
  }
  if (options.json) {
    print_json(host, reports, silence);
  } else {
    print_text(host, reports, silence);
  }
  std::fflush(stdout);
  // A selected plugin that cannot start is an error; others are only shown.
  for (const PluginReport& r : reports) {
    if (r.selected && !r.description) {
      return report(r.description.error().with_context("selected " + std::string(core::kind_name(r.info->kind)) +
                                                       " plugin '" + r.info->name + "'"));
    }
  }
  return kExitOk;
}

}  // namespace qgpu::host
