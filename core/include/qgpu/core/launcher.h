// One kernel launch through the configured plugins, the path `qgpu-host run` and `eval` share:
// compile with the frontend, lower with the machine, then run on the interpreter, on the machine's
// circuit, or on the circuit merged in front of the base model (engine "model").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "qgpu/core/host.h"
#include "qgpu/core/launch_session.h"
#include "qgpu/core/merged_model.h"
#include "qgpu/sdk/sdk.h"

namespace qgpu::core {

// Where a launcher's launches run: the interpreter, the machine's circuit alone, the circuit merged in
// front of the base (sdk::Engine), or both the interpreter and the circuit with their arrays compared.
enum class LaunchEngine : std::uint8_t { kInterp, kCircuit, kModel, kBoth };
const char* launch_engine_name(LaunchEngine engine);  // "interp", "circuit", "model", "both"
sdk::Expected<LaunchEngine> parse_launch_engine(std::string_view name);

struct LauncherOptions {
  LaunchEngine engine = LaunchEngine::kInterp;
  bool dense = false;               // engine model: circuit layers dense on the backend
  sdk::InterpretOptions interpret;  // trace, records, max_steps of the interpreter
  // dtype, check, trace, max_tokens and the sinks of the model engines.
  ModelRunOptions model;
};

// What a launch returned: the interpreter's result when it ran, the model engine's when it ran.
struct LaunchOutcome {
  bool interpreted = false, modelled = false;
  sdk::LaunchResult interp;
  ModelRunResult model;
  // The final arrays: the model engine's when it ran (equal to the interpreter's with "both").
  const std::vector<sdk::LaunchArg>& arrays() const { return modelled ? model.arrays : interp.arrays; }
};

class Launcher {
 public:
  // Creates the configured frontend and machine. The base and backend of engine "model" load on
  // the first launch that needs them (merge()).
  static sdk::Expected<std::unique_ptr<Launcher>> open(const Host& host, LauncherOptions options);

  const LauncherOptions& options() const { return options_; }
  bool uses_interpreter() const {
    return options_.engine == LaunchEngine::kInterp || options_.engine == LaunchEngine::kBoth;
  }
  bool uses_model() const { return options_.engine != LaunchEngine::kInterp; }

  sdk::Expected<sdk::KernelModule> compile(const std::string& file);
  sdk::Expected<std::unique_ptr<sdk::MachineProgram>> lower(const sdk::KernelIR& kernel, sdk::LaunchShape shape);
  sdk::Expected<LaunchOutcome> launch(const sdk::MachineProgram& program, const std::vector<sdk::LaunchArg>& args);
  // The machine's description (limits such as global_words, max_threads, max_block_threads).
  sdk::Expected<sdk::Description> describe_machine() const;
  // Engine model: the merged model, loading it on the first call; nullptr for other engines.
  sdk::Expected<LoadedMerge*> merge();
  LoadedMerge* loaded_merge() const { return merge_.get(); }
  // Engines circuit and model: the machine's circuit (compiled on the first call, ~30 s).
  sdk::Expected<std::shared_ptr<const sdk::MachineCircuit>> circuit();

 private:
  Launcher(const Host& host, LauncherOptions options) : host_(host), options_(std::move(options)) {}

  const Host& host_;
  LauncherOptions options_;
  std::shared_ptr<sdk::Frontend> frontend_;
  std::shared_ptr<sdk::Machine> machine_;
  std::string frontend_name_, machine_name_;
  std::unique_ptr<LoadedMerge> merge_;
  std::shared_ptr<const sdk::MachineCircuit> circuit_;
  std::unique_ptr<CircuitEngine> circuit_engine_;  // engine circuit: shared by the launches
};

// The kernel `wanted` of a compiled file, or its only kernel when `wanted` is empty; errors name
// the kernels the file has.
sdk::Expected<const sdk::KernelIR*> choose_kernel(const sdk::KernelModule& module, const std::string& wanted,
                                                  const std::string& file);

}  // namespace qgpu::core
