// qgpu-host run: compile a kernel with the frontend, lower it for the launch
// with the machine and run it on the chosen engine.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include "commands.h"
#include "qgpu/core/launch_args.h"
#include "qgpu/core/text.h"
#include "qgpu/sdk/sdk.h"

namespace qgpu::host {
namespace {

sdk::Expected<const sdk::KernelIR*> choose_kernel(const sdk::KernelModule& module, const std::string& wanted,
                                                   const std::string& file) {
  std::vector<std::string> names;
  for (const auto& k : module.kernels) names.push_back(k.name);
  if (module.kernels.empty()) return sdk::not_found("'" + file + "' defines no kernel (no .entry / __global__)");
  if (wanted.empty()) {
    if (module.kernels.size() == 1) return &module.kernels.front();
    return sdk::invalid_argument("'" + file + "' defines " + std::to_string(names.size()) + " kernels (" +
                                 core::join(names) + "); choose one with --kernel");
  }
  for (const auto& k : module.kernels) {
    if (k.name == wanted) return &k;
  }
  std::string message = "no kernel '" + wanted + "' in '" + file + "'";
  std::string hint = core::closest_match(wanted, names);
  if (!hint.empty()) message += " (did you mean '" + hint + "'?)";
  return sdk::not_found(message + "; kernels: " + core::join(names));
}

}  // namespace

int run_kernel(const core::Host& host, const RunOptions& options) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(options.kernel_file, ec)) {
    return report(sdk::not_found("kernel file '" + options.kernel_file + "' does not exist"));
  }
  if (options.grid == 0 || options.block == 0) {
    return report(sdk::invalid_argument("--grid and --block must be at least 1"));
  }
  if (options.engine != "interp") {
    return report(sdk::not_available("--engine " + options.engine + " (running kernels through the model)"));
  }
  std::vector<core::ArgSpec> args;
  for (const auto& text : options.args) {
    auto arg = core::parse_arg(text);
    if (!arg) return report(arg.error());
    args.push_back(std::move(*arg));
  }

  auto frontend = host.instantiate<sdk::Frontend>();
  if (!frontend) return report(frontend.error());
  auto machine = host.instantiate<sdk::Machine>();
  if (!machine) return report(machine.error());
  const std::string frontend_name = host.select(QGPU_PLUGIN_FRONTEND)->plugin->name;
  const std::string machine_name = host.select(QGPU_PLUGIN_MACHINE)->plugin->name;

  sdk::SourceInput input{options.kernel_file, sdk::SourceLanguage::kAuto};
  auto module = core::guarded_call(frontend_name, "compile()", [&] { return (*frontend)->compile(input); });
  if (!module) return report(module.error());
  auto kernel = choose_kernel(*module, options.kernel_name, options.kernel_file);
  if (!kernel) return report(kernel.error());

  auto launch = core::bind_args(**kernel, args);
  if (!launch) return report(launch.error());

  sdk::LaunchShape shape{options.grid, options.block};
  auto program = core::guarded_call(machine_name, "lower()", [&] { return (*machine)->lower(**kernel, shape); });
  if (!program) return report(program.error());
  if (options.dump_program) {
    std::string listing = (*program)->dump();
    std::printf("%s%s", listing.c_str(), listing.empty() || listing.back() == '\n' ? "" : "\n");
  }

  sdk::InterpretOptions interpret_options;
  interpret_options.trace = options.trace;
  interpret_options.records = options.records;
  if (options.max_steps > 0) interpret_options.max_steps = options.max_steps;
  auto result = core::guarded_call(machine_name, "interpret()", [&] {
    return (*machine)->interpret(**program, *launch, interpret_options);
  });
  if (!result) return report(result.error());

  if (options.json) {
    nlohmann::ordered_json out;
    out["kernel"] = (*kernel)->name;
    out["engine"] = options.engine;
    out["grid"] = options.grid;
    out["block"] = options.block;
    out["arrays"] = nlohmann::ordered_json::object();
    for (const auto& a : result->arrays) out["arrays"][a.param] = a.array;
    out["stats"] = nlohmann::ordered_json::object();
    for (const auto& [key, value] : result->stats) out["stats"][key] = value;
    if (options.trace) out["trace"] = result->trace;
    if (options.records) {
      out["prompt_records"] = result->prompt_records;
      out["generated_records"] = result->generated_records;
    }
    std::cout << out.dump() << "\n";
    return kExitOk;
  }
  if (options.trace) {
    for (const auto& line : result->trace) std::printf("trace: %s\n", line.c_str());
  }
  if (options.records) {
    for (const auto& line : result->prompt_records) std::printf("prompt: %s\n", line.c_str());
    for (const auto& line : result->generated_records) std::printf("generate: %s\n", line.c_str());
  }
  for (const auto& a : result->arrays) std::printf("%s = %s\n", a.param.c_str(), core::format_array(a.array).c_str());
  if (options.stats) {
    for (const auto& [key, value] : result->stats) std::printf("stat: %s = %lld\n", key.c_str(), static_cast<long long>(value));
  }
  return kExitOk;
}

}  // namespace qgpu::host
