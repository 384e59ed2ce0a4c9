#include "qgpu/core/launcher.h"

#include "qgpu/core/text.h"

namespace qgpu::core {
namespace {

// --engine both: the circuit's arrays must be the interpreter's.
sdk::Status compare_arrays(const sdk::LaunchResult& interp, const ModelRunResult& model) {
  if (interp.arrays.size() != model.arrays.size())
    return sdk::internal_error("--engine both: the interpreter returned " + std::to_string(interp.arrays.size()) +
                               " arrays, the circuit " + std::to_string(model.arrays.size()));
  for (std::size_t i = 0; i < interp.arrays.size(); ++i) {
    const auto& a = interp.arrays[i].array;
    const auto& b = model.arrays[i].array;
    for (std::size_t j = 0; j < a.size() || j < b.size(); ++j) {
      if (j < a.size() && j < b.size() && a[j] == b[j]) continue;
      auto text = [j](const std::vector<std::int32_t>& v) { return j < v.size() ? std::to_string(v[j]) : "nothing"; };
      return sdk::internal_error("--engine both: array '" + interp.arrays[i].param + "' element " + std::to_string(j) +
                                 ": interpreter " + text(a) + ", circuit " + text(b));
    }
  }
  return sdk::Status::ok();
}

// The plugin's capability `name` (Plugin::describe) must be there and available.
sdk::Status require_capability(const sdk::Plugin& plugin, const std::string& plugin_name, const std::string& name) {
  QGPU_ASSIGN_OR_RETURN(sdk::Description description,
                        guarded_call(plugin_name, "describe()", [&] { return plugin.describe(); }));
  for (const auto& capability : description.capabilities) {
    if (capability.name != name) continue;
    if (capability.available) return sdk::Status::ok();
    return sdk::unsupported(plugin_name + ": capability '" + name + "' is not available" +
                            (capability.detail.empty() ? "" : " (" + capability.detail + ")"));
  }
  return sdk::unsupported(plugin_name + " has no capability '" + name + "'");
}

}  // namespace

const char* launch_engine_name(LaunchEngine engine) {
  switch (engine) {
    case LaunchEngine::kInterp: return "interp";
    case LaunchEngine::kCircuit: return "circuit";
    case LaunchEngine::kModel: return "model";
    case LaunchEngine::kBoth: return "both";
  }
  return "?";
}

sdk::Expected<LaunchEngine> parse_launch_engine(std::string_view name) {
  for (LaunchEngine e : {LaunchEngine::kInterp, LaunchEngine::kCircuit, LaunchEngine::kModel, LaunchEngine::kBoth})
    if (name == launch_engine_name(e)) return e;
  return sdk::invalid_argument("engine '" + std::string(name) + "' is not one of interp, circuit, model, both");
}

sdk::Expected<const sdk::KernelIR*> choose_kernel(const sdk::KernelModule& module, const std::string& wanted,
                                                  const std::string& file) {
  std::vector<std::string> names;
  for (const auto& k : module.kernels) names.push_back(k.name);
  if (module.kernels.empty()) return sdk::not_found("'" + file + "' defines no kernel (no .entry / __global__)");
  if (wanted.empty()) {
    if (module.kernels.size() == 1) return &module.kernels.front();
    return sdk::invalid_argument("'" + file + "' defines " + std::to_string(names.size()) + " kernels (" + join(names) +
                                 "); choose one with --kernel");
  }
  for (const auto& k : module.kernels) {
    if (k.name == wanted) return &k;
  }
  std::string message = "no kernel '" + wanted + "' in '" + file + "'";
  std::string hint = closest_match(wanted, names);
  if (!hint.empty()) message += " (did you mean '" + hint + "'?)";
  return sdk::not_found(message + "; kernels: " + join(names));
}

sdk::Expected<std::unique_ptr<Launcher>> Launcher::open(const Host& host, LauncherOptions options) {
  std::unique_ptr<Launcher> l(new Launcher(host, std::move(options)));
  QGPU_ASSIGN_OR_RETURN(l->machine_, host.instantiate<sdk::Machine>());
  l->machine_name_ = host.select(QGPU_PLUGIN_MACHINE)->plugin->name;
  // The machine says which engines it has: the others are refused before anything compiles.
  const LaunchEngine engine = l->options_.engine;
  for (const auto& [needed, capability] :
       {std::pair{true, "lower"}, std::pair{l->uses_interpreter(), "interpret"},
        std::pair{engine == LaunchEngine::kCircuit || engine == LaunchEngine::kBoth, "circuit"},
        std::pair{engine == LaunchEngine::kModel, "model"}}) {
    if (needed) QGPU_RETURN_IF_ERROR(require_capability(*l->machine_, l->machine_name_, capability));
  }
  QGPU_ASSIGN_OR_RETURN(l->frontend_, host.instantiate<sdk::Frontend>());
  l->frontend_name_ = host.select(QGPU_PLUGIN_FRONTEND)->plugin->name;
  return l;
}

sdk::Expected<sdk::KernelModule> Launcher::compile(const std::string& file) {
  sdk::SourceInput input{file, sdk::SourceLanguage::kAuto};
  return guarded_call(frontend_name_, "compile()", [&] { return frontend_->compile(input); });
}

sdk::Expected<std::unique_ptr<sdk::MachineProgram>> Launcher::lower(const sdk::KernelIR& kernel,
                                                                    sdk::LaunchShape shape) {
  return guarded_call(machine_name_, "lower()", [&] { return machine_->lower(kernel, shape); });
}

sdk::Expected<sdk::Description> Launcher::describe_machine() const {
  return guarded_call(machine_name_, "describe()", [&] { return machine_->describe(); });
}

sdk::Expected<LoadedMerge*> Launcher::merge() {
  if (options_.engine != LaunchEngine::kModel) return static_cast<LoadedMerge*>(nullptr);
  if (!merge_) {
    QGPU_ASSIGN_OR_RETURN(
        merge_, load_merge(host_, {{"dtype", std::string(sdk::dtype_name(options_.model.dtype))}}, !options_.dense));
  }
  return merge_.get();
}

sdk::Expected<std::shared_ptr<const sdk::MachineCircuit>> Launcher::circuit() {
  if (!uses_model()) return sdk::internal_error("engine interp runs no circuit");
  if (!circuit_) {
    QGPU_ASSIGN_OR_RETURN(LoadedMerge * m, merge());
    QGPU_ASSIGN_OR_RETURN(circuit_, machine_circuit(*machine_, machine_name_,
                                                    m ? sdk::Engine::kModel : sdk::Engine::kCircuit,
                                                    m ? m->model_host() : nullptr, options_.model.on_progress));
  }
  return circuit_;
}

sdk::Expected<LaunchOutcome> Launcher::launch(const sdk::MachineProgram& program,
                                              const std::vector<sdk::LaunchArg>& args) {
  LaunchOutcome out;
  if (uses_interpreter()) {
    QGPU_ASSIGN_OR_RETURN(out.interp, guarded_call(machine_name_, "interpret()", [&] {
                            return machine_->interpret(program, args, options_.interpret);
                          }));
    out.interpreted = true;
  }
  if (uses_model()) {
    QGPU_ASSIGN_OR_RETURN(std::shared_ptr<const sdk::MachineCircuit> compiled, circuit());
    QGPU_ASSIGN_OR_RETURN(std::unique_ptr<sdk::LaunchCodec> codec, guarded_call(machine_name_, "encode_launch()", [&] {
                            return machine_->encode_launch(program, args, *compiled);
                          }));
    ModelHost* model = merge_ ? merge_->model_host() : nullptr;
    if (model == nullptr && !circuit_engine_)
      circuit_engine_ = std::make_unique<CircuitEngine>(compiled, options_.model.dtype, options_.model.circuit_threads);
    // The codec's calls are the machine's code too: an exception from them is reported as its.
    QGPU_ASSIGN_OR_RETURN(out.model, guarded_call(machine_name_, "a launch", [&] {
                            return run_launch(compiled, std::move(codec), model, options_.model,
                                              circuit_engine_.get());
                          }));
    out.modelled = true;
    if (out.interpreted) QGPU_RETURN_IF_ERROR(compare_arrays(out.interp, out.model));
  }
  return out;
}

}  // namespace qgpu::core
