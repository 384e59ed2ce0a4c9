// qgpu-host batch: many launches in one process, one JSON line in and one out per launch. The
// frontend, the machine and (engine circuit/model) the compiled circuit or merged model are set up
// once, so a batch of small launches costs what the launches cost (`run` compiles the circuit at
// every start). A launch that fails is a result line with its error; the batch goes on.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"
#include "progress.h"
#include "qgpu/core/launch_args.h"
#include "qgpu/core/launcher.h"
#include "qgpu/core/text.h"
#include "qgpu/sdk/sdk.h"

namespace qgpu::host {
namespace {

struct BatchLine {
  std::string file, kernel, grid, block;
  std::vector<std::string> args;
};

// {"file": "k.cu", "kernel": "k", "grid": "2", "block": "32", "args": ["a=[1,2]", "n=2"]}; grid and
// block as strings ("2,3") or numbers; "kernel" and "args" optional. Relative files are taken from
// `dir` (the batch file's directory).
sdk::Expected<BatchLine> parse_line(const std::string& text, const std::filesystem::path& dir) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return sdk::parse_error("not a JSON object");
  BatchLine line;
  auto text_of = [&](const char* key, bool required, std::string& into) -> sdk::Status {
    if (!j.contains(key)) {
      return required ? sdk::invalid_argument(std::string("no \"") + key + "\"") : sdk::Status::ok();
    }
    const auto& v = j[key];
    if (v.is_string())
      into = v.get<std::string>();
    else if (v.is_number_unsigned())
      into = std::to_string(v.get<std::uint64_t>());
    else
      return sdk::invalid_argument(std::string("\"") + key + "\" must be a string" +
                                   (std::string(key) == "grid" || std::string(key) == "block" ? " or a number" : ""));
    return sdk::Status::ok();
  };
  QGPU_RETURN_IF_ERROR(text_of("file", true, line.file));
  QGPU_RETURN_IF_ERROR(text_of("kernel", false, line.kernel));
  QGPU_RETURN_IF_ERROR(text_of("grid", true, line.grid));
  QGPU_RETURN_IF_ERROR(text_of("block", true, line.block));
  if (j.contains("args")) {
    if (!j["args"].is_array()) return sdk::invalid_argument("\"args\" must be an array of strings");
    for (const auto& a : j["args"]) {
      if (!a.is_string()) return sdk::invalid_argument("\"args\" must be an array of strings");
      line.args.push_back(a.get<std::string>());
    }
  }
  for (const auto& [key, value] : j.items()) {
    if (key != "file" && key != "kernel" && key != "grid" && key != "block" && key != "args")
      return sdk::invalid_argument("unknown key \"" + key + "\" (file, kernel, grid, block, args)");
  }
  std::filesystem::path file(line.file);
  if (file.is_relative()) line.file = (dir / file).lexically_normal().string();
  return line;
}

// One launch: compile (cached by file), lower, run. The result object, or the error.
class BatchRunner {
 public:
  explicit BatchRunner(core::Launcher& launcher) : launcher_(launcher) {}

  sdk::Expected<nlohmann::ordered_json> launch(const BatchLine& line) {
    QGPU_ASSIGN_OR_RETURN(const sdk::LaunchShape shape, core::parse_launch_shape(line.grid, line.block));
    std::vector<core::ArgSpec> args;
    for (const auto& text : line.args) {
      QGPU_ASSIGN_OR_RETURN(core::ArgSpec arg, core::parse_arg(text));
      args.push_back(std::move(arg));
    }
    std::error_code ec;
    if (!std::filesystem::is_regular_file(line.file, ec))
      return sdk::not_found("kernel file '" + line.file + "' does not exist");
    QGPU_ASSIGN_OR_RETURN(const sdk::KernelModule* module, compiled(line.file));
    QGPU_ASSIGN_OR_RETURN(const sdk::KernelIR* kernel, core::choose_kernel(*module, line.kernel, line.file));
    std::vector<core::ArrayLayout> layouts;
    QGPU_ASSIGN_OR_RETURN(auto bound, core::bind_args(*kernel, args, &layouts));
    QGPU_ASSIGN_OR_RETURN(auto program, launcher_.lower(*kernel, shape));
    QGPU_ASSIGN_OR_RETURN(const core::LaunchOutcome outcome, launcher_.launch(*program, bound));

    nlohmann::ordered_json out;
    out["kernel"] = kernel->name;
    out["arrays"] = nlohmann::ordered_json::object();
    for (const auto& a : outcome.arrays())
      out["arrays"][a.param] = core::unpack_elements(a.array, core::layout_of(*kernel, layouts, a.param));
    for (const auto& a : outcome.arrays())
      if (const core::ArrayLayout l = core::layout_of(*kernel, layouts, a.param); l.element != core::ElementType::kI32)
        out["array_types"][a.param] = core::element_type_name(l.element);
    out["stats"] = nlohmann::ordered_json::object();
    for (const auto& [key, value] : outcome.interp.stats) out["stats"][key] = value;
    for (const auto& [key, value] : outcome.model.stats) out["stats"][key] = value;
    if (outcome.modelled) {
      const core::ModelRunResult& m = outcome.model;
      out["tokens"] = {{"prompt", m.prompt_tokens}, {"generated", m.generated_tokens}};
      out["margin"] = m.min_margin;
      if (launcher_.options().model.check) out["check"] = {{"ok", m.checked}, {"summary", m.check}};
      generated_ += m.generated_tokens;
    }
    return out;
  }

  std::int64_t generated_tokens() const { return generated_; }

 private:
  // A batch often launches one file many times (other arguments, other shapes): compile it once.
  sdk::Expected<const sdk::KernelModule*> compiled(const std::string& file) {
    if (file != module_file_ || !module_) {
      module_.reset();
      auto module = launcher_.compile(file);
      if (!module) return module.error();
      module_ = std::make_unique<sdk::KernelModule>(std::move(*module));
      module_file_ = file;
    }
    return module_.get();
  }

  core::Launcher& launcher_;
  std::string module_file_;
  std::unique_ptr<sdk::KernelModule> module_;
  std::int64_t generated_ = 0;
};

nlohmann::ordered_json error_json(const sdk::Status& status) {
  // "file:line:col: what" when the error points into a file, else "what" (as `run` prints it, without
  // "error: ", which the key says).
  std::string message = status.message();
  if (!status.location().empty()) message = status.location() + ": " + message;
  return {{"code", std::string(sdk::error_code_name(status.code()))}, {"message", core::one_line(message)}};
}

}  // namespace

int run_batch(const core::Host& host, const BatchOptions& options) {
  const bool from_stdin = options.file == "-";
  std::ifstream file;
  if (!from_stdin) {
    file.open(options.file);
    if (!file) return report(sdk::not_found("batch file '" + options.file + "' cannot be read"));
  }
  std::istream& in = from_stdin ? std::cin : file;
  const std::filesystem::path dir =
      from_stdin ? std::filesystem::current_path() : std::filesystem::absolute(options.file).parent_path();
  if (options.check && options.engine == "interp")
    return report(sdk::invalid_argument("--check compares a model engine with the interpreter: it needs --engine "
                                        "circuit or model"));

  if ((options.memcheck || options.racecheck) && options.engine != "interp")
    return report(sdk::invalid_argument(std::string(options.memcheck ? "--memcheck" : "--racecheck") +
                                        " runs on the interpreter only: use --engine interp"));
  core::LauncherOptions launcher_options;
  launcher_options.interpret.memcheck = options.memcheck;
  launcher_options.interpret.racecheck = options.racecheck;
  auto engine = core::parse_launch_engine(options.engine);
  if (!engine) return report(engine.error());
  launcher_options.engine = *engine;
  if (options.max_steps > 0) launcher_options.interpret.max_steps = options.max_steps;
  auto dtype = core::layer_dtype(options.dtype);
  if (!dtype) return report(dtype.error());
  launcher_options.model.dtype = *dtype;
  launcher_options.model.check = options.check;
  if (options.max_tokens > 0) launcher_options.model.max_tokens = options.max_tokens;
  launcher_options.model.speculate = options.speculate;
  launcher_options.model.circuit_threads = options.circuit_threads;
  if (options.verbose) {
    launcher_options.model.on_progress = [](std::string_view line) {
      std::fprintf(stderr, "qgpu-host: %.*s\n", static_cast<int>(line.size()), line.data());
    };
  }
  InterruptFlag interrupt;
  launcher_options.model.cancel = interrupt.flag();
  auto launcher = core::Launcher::open(host, launcher_options);
  if (!launcher) return report(launcher.error());
  BatchRunner runner(**launcher);

  const auto t0 = std::chrono::steady_clock::now();
  std::int64_t lines = 0, launches = 0, failed = 0;
  std::string text;
  while (std::getline(in, text)) {
    ++lines;
    const std::size_t first = text.find_first_not_of(" \t\r");
    if (first == std::string::npos || text[first] == '#') continue;  // blank lines and comments
    ++launches;
    nlohmann::ordered_json out;
    out["line"] = lines;
    auto line = parse_line(text, dir);
    sdk::Expected<nlohmann::ordered_json> result =
        line ? runner.launch(*line) : sdk::Expected<nlohmann::ordered_json>(line.error());
    if (result) {
      for (auto& [key, value] : result->items()) out[key] = std::move(value);
    } else {
      if (result.error().code() == sdk::ErrorCode::kCancelled) return report(result.error());
      ++failed;
      out["error"] = error_json(result.error());
    }
    std::cout << out.dump() << std::endl;  // a line per launch as it completes
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "qgpu-host: batch: %lld launches, %lld failed, %lld generated tokens in %.1f s\n",
               static_cast<long long>(launches), static_cast<long long>(failed),
               static_cast<long long>(runner.generated_tokens()), s);
  return failed > 0 ? kExitFailure : kExitOk;
}

}  // namespace qgpu::host
