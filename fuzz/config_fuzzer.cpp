// libFuzzer harness: arbitrary text through the YAML config loader (core/src/config.cpp): yaml-cpp, the
// top-level schema, then every plugin section's settings against option tables that hold one option of
// each type (as a plugin's descriptor declares them). Expected: a config or a one-line
// "config.yaml:L:C: error: ...". Relative paths resolve under a directory that does not exist, so the
// file-system checks only ever answer "no such file".
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "qgpu/core/config.h"
#include "qgpu/sdk/plugin.h"

namespace {

const std::vector<QgpuOptionSpec>& all_defaults() {
  static const std::vector<QgpuOptionSpec> kSpecs = {
      qgpu::sdk::option_string("name", "x", "a string"),
      qgpu::sdk::option_int("lanes", "4", 1, 64, "an integer in a range"),
      qgpu::sdk::option_int("seed", "0", 1, 0, "an integer, any value"),
      qgpu::sdk::option_float("scale", "1.5", "a number"),
      qgpu::sdk::option_bool("check", "false", "a boolean"),
      qgpu::sdk::option_enum("dtype", "f32", "f32|bf16", "a choice"),
      qgpu::sdk::option_path("checkpoint", "synthetic", "synthetic|none", "a path or a keyword"),
  };
  return kSpecs;
}

const std::vector<QgpuOptionSpec>& one_required() {
  static const std::vector<QgpuOptionSpec> kSpecs = {
      qgpu::sdk::option_int("lanes", nullptr, -8, 8, "a required integer"),
      qgpu::sdk::option_enum("engine", "interp", "interp|circuit|model", "a choice"),
  };
  return kSpecs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace qgpu;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = core::parse_config(text, "/nonexistent-qgpu-fuzz/config.yaml");
  if (!config) {
    fuzz::check_error(config.error(), text);
    return 0;
  }
  fuzz::check(config->version == core::kConfigVersion, "a parsed config has the supported version");
  for (const core::PluginSection& section : config->sections) {
    for (const auto* specs : {&all_defaults(), &one_required()}) {
      auto options = core::resolve_options(*specs, section.settings, config->directory(), "'" + section.name + "'",
                                           section.where);
      if (!options) {
        fuzz::check_error(options.error(), text);
        continue;
      }
      for (const auto& spec : *specs) fuzz::check(options->has(spec.name), "every declared option is present");
    }
  }
  return 0;
}
