// qgpu-host run: compile a kernel with the frontend, lower it for the launch
// with the machine and run it on the chosen engine.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"
#include "progress.h"
#include "qgpu/core/launch_args.h"
#include "qgpu/core/launcher.h"
#include "qgpu/core/merged_model.h"
#include "qgpu/core/silence_json.h"
#include "qgpu/core/text.h"
#include "qgpu/sdk/sdk.h"

namespace qgpu::host {
namespace {

// The model engines' summary line, e.g. "circuit (f32): prompt 96 tokens, generated 13 tokens in
// 0.31 s (23.8 ms/token), min margin 1; check: ...".
std::string model_summary(const std::string& engine, const std::string& dtype, const core::ModelRunResult& r) {
  double generate_s = 0;
  for (const auto& [key, value] : r.timings)
    if (key == "generate_s") generate_s = value;
  char line[256];
  std::snprintf(
      line, sizeof line, "%s (%s): prompt %lld tokens, generated %lld tokens in %.2f s (%.1f ms/token), min margin %g",
      engine.c_str(), dtype.c_str(), static_cast<long long>(r.prompt_tokens),
      static_cast<long long>(r.generated_tokens), generate_s,
      r.generated_tokens > 0 ? 1e3 * generate_s / static_cast<double>(r.generated_tokens) : 0.0, r.min_margin);
  std::string s = line;
  if (r.checked) s += "; " + r.check;
  return s;
}

}  // namespace

int run_kernel(const core::Host& host, const RunOptions& options) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(options.kernel_file, ec)) {
    return report(sdk::not_found("kernel file '" + options.kernel_file + "' does not exist"));
  }
  auto shape = core::parse_launch_shape(options.grid, options.block);
  if (!shape) return report(shape.error());
  const bool use_interp = options.engine == "interp" || options.engine == "both";
  const bool merged = options.engine == "model";
  const bool use_model = options.engine == "circuit" || options.engine == "both" || merged;
  if (options.memcheck && options.engine != "interp")
    return report(sdk::invalid_argument(
        "--memcheck runs on the interpreter only (its red zones move the arrays apart): use --engine interp"));
  if (options.racecheck && options.engine != "interp")
    return report(sdk::invalid_argument(
        "--racecheck runs on the interpreter only (it watches every access of every thread): use --engine interp"));
  if (options.memcheck && options.records)
    return report(
        sdk::invalid_argument("--memcheck and --records exclude each other (the protocol's arrays are adjacent)"));
  if (options.dense && !merged) return report(sdk::invalid_argument("--dense applies to --engine model only"));
  if (!options.silence.empty() && !merged)
    return report(sdk::invalid_argument("--silence applies to --engine model only"));
  if (options.check && !use_model) {
    return report(
        sdk::invalid_argument("--check compares a model engine with the interpreter: it needs --engine "
                              "circuit, model or both"));
  }
  std::vector<core::ArgSpec> args;
  for (const auto& text : options.args) {
    auto arg = core::parse_arg(text);
    if (!arg) return report(arg.error());
    args.push_back(std::move(*arg));
  }

  core::LauncherOptions launcher_options;
  auto engine = core::parse_launch_engine(options.engine);
  if (!engine) return report(engine.error());
  launcher_options.engine = *engine;
  launcher_options.dense = options.dense;
  launcher_options.interpret.trace = options.trace;
  launcher_options.interpret.records = options.records;
  launcher_options.interpret.memcheck = options.memcheck;
  launcher_options.interpret.racecheck = options.racecheck;
  if (options.max_steps > 0) launcher_options.interpret.max_steps = options.max_steps;
  core::ModelRunOptions& model_options = launcher_options.model;
  auto dtype = core::layer_dtype(options.dtype);
  if (!dtype) return report(dtype.error());
  model_options.dtype = *dtype;
  model_options.check = options.check;
  model_options.trace = options.trace;
  if (options.max_tokens > 0) model_options.max_tokens = options.max_tokens;
  model_options.speculate = options.speculate;
  model_options.circuit_threads = options.circuit_threads;
  // Records stream as they complete (stdout, unless the answer is one JSON object); progress on stderr.
  if (options.trace && !options.json) {
    model_options.on_record = [](std::string_view line) {
      std::printf("generated: %.*s\n", static_cast<int>(line.size()), line.data());
      std::fflush(stdout);
    };
  }
  model_options.on_progress = [](std::string_view line) {
    std::fprintf(stderr, "qgpu-host: %.*s\n", static_cast<int>(line.size()), line.data());
  };
  // While a model engine generates: a live line on a terminal (not with --trace, whose records
  // stream, nor with --json), a line every 10 s otherwise; Ctrl-C stops it with how far it got.
  LaunchProgressLine line(options.engine == "model" ? "model" : "circuit",
                          stderr_is_terminal() && !options.trace && !options.json);
  model_options.on_step = [&line](const core::LaunchProgress& p) { line(p); };
  InterruptFlag interrupt;
  model_options.cancel = interrupt.flag();
  auto launcher = core::Launcher::open(host, launcher_options);
  if (!launcher) return report(launcher.error());

  auto module = (*launcher)->compile(options.kernel_file);
  if (!module) return report(module.error());
  auto kernel = core::choose_kernel(*module, options.kernel_name, options.kernel_file);
  if (!kernel) return report(kernel.error());

  std::vector<core::ArrayLayout> layouts;
  auto launch = core::bind_args(**kernel, args, &layouts);
  if (!launch) return report(launch.error());

  auto program = (*launcher)->lower(**kernel, *shape);
  if (!program) return report(program.error());
  if (options.dump_program) {
    std::string listing = (*program)->dump();
    std::printf("%s%s", listing.c_str(), listing.empty() || listing.back() == '\n' ? "" : "\n");
  }

  // Engine model loads the base on the backend (in --dtype) and merges the machine's circuit in front.
  auto outcome = (*launcher)->launch(**program, *launch);
  line.finish();
  if (!outcome) return report(outcome.error());
  const sdk::LaunchResult& interp = outcome->interp;
  const core::ModelRunResult& model = outcome->model;
  const core::LoadedMerge* merge = (*launcher)->loaded_merge();
  const std::vector<sdk::LaunchArg>& arrays = outcome->arrays();
  // --silence: the base alone against the merged model around the launch (docs/MACHINE_CIRCUIT.md §6).
  std::string silence_line;
  if (!options.silence.empty()) {
    if (merge->host == nullptr)
      return report(sdk::unsupported("--silence compares the base with the merged model; a built checkpoint has "
                                     "no separate base (run it from the config it was built with)"));
    auto text = merge->base->encode(options.silence);
    if (!text) return report(text.error().with_context("--silence"));
    if (text->empty()) return report(sdk::invalid_argument("--silence: the text encodes to no tokens"));
    std::vector<std::int64_t> only = *text, around = *text;
    only.insert(only.end(), text->begin(), text->end());
    for (const auto* ids : {&model.prompt_ids, &model.generated_ids})
      around.insert(around.end(), ids->begin(), ids->end());
    around.insert(around.end(), text->begin(), text->end());
    auto a = core::measure_silence(*merge->host->merged(), *merge->base, *merge->backend, only);
    if (!a) return report(a.error().with_context("--silence: text only"));
    auto b = core::measure_silence(*merge->host->merged(), *merge->base, *merge->backend, around);
    if (!b) return report(b.error().with_context("--silence: around the launch"));
    char line[384];
    std::snprintf(line, sizeof line,
                  "silence: text only: %lld of %lld logit rows identical to the base's, max KL(base||merged) = %g; "
                  "text after the launch's %lld tokens: KL mean %.3g, max %.3g over %lld positions (%lld identical)",
                  static_cast<long long>(a->before_identical + a->after_identical),
                  static_cast<long long>(a->before + a->after), std::max(a->kl_before_max, a->kl_after_max),
                  static_cast<long long>(b->records), b->kl_after_mean, b->kl_after_max,
                  static_cast<long long>(b->after), static_cast<long long>(b->after_identical));
    silence_line = line;
  }

  if (options.json) {
    nlohmann::ordered_json out;
    out["kernel"] = (*kernel)->name;
    out["engine"] = options.engine;
    out["grid"] = shape->grid;  // totals over all dimensions; the extents beside them
    out["block"] = shape->block;
    out["grid_dims"] = {shape->grid_x(), shape->grid_y, shape->grid_z};
    out["block_dims"] = {shape->block_x(), shape->block_y, shape->block_z};
    out["arrays"] = nlohmann::ordered_json::object();
    for (const auto& a : arrays)
      out["arrays"][a.param] = core::unpack_elements(a.array, core::layout_of(**kernel, layouts, a.param));
    // 8- and 16-bit arrays (given as u8[...] etc.) are their elements above; their types here.
    for (const auto& a : arrays)
      if (const core::ArrayLayout l = core::layout_of(**kernel, layouts, a.param); l.element != core::ElementType::kI32)
        out["array_types"][a.param] = core::element_type_name(l.element);
    out["stats"] = nlohmann::ordered_json::object();
    for (const auto& [key, value] : interp.stats) out["stats"][key] = value;
    for (const auto& [key, value] : model.stats) out["stats"][key] = value;
    if (options.trace && use_interp) out["trace"] = interp.trace;
    if (options.records && use_interp) {
      out["prompt_records"] = interp.prompt_records;
      out["generated_records"] = interp.generated_records;
    }
    if (use_model) {
      out["dtype"] = options.dtype;
      out["tokens"] = {{"prompt", model.prompt_tokens}, {"generated", model.generated_tokens}};
      // The launch's token ids (the merged model's numbering with engine model), so that another
      // runtime can be checked against this one token for token.
      out["prompt_ids"] = model.prompt_ids;
      out["generated_ids"] = model.generated_ids;
      // Where each array element lives in the circuit's state (sdk::WordLocation): another runtime
      // reads the results from its own state with it (bench/build/transformers_check.py).
      out["readout"] = nlohmann::ordered_json::object();
      for (std::size_t i = 0; i < model.readout.size() && i < model.arrays.size(); ++i) {
        nlohmann::ordered_json words = nlohmann::ordered_json::array();
        for (const sdk::WordLocation& w : model.readout[i])
          words.push_back({w.layer, w.first_head, w.heads, w.bits_per_head, w.row});
        out["readout"][model.arrays[i].param] = std::move(words);
      }
      out["margin"] = model.min_margin;
      if (options.check) out["check"] = {{"ok", model.checked}, {"summary", model.check}};
      if (options.trace) out["model_records"] = model.generated_records;
      out["timings"] = nlohmann::ordered_json::object();
      for (const auto& [key, value] : model.timings) out["timings"][key] = value;
    }
    if (merge && merge->host && merge->host->merged() != nullptr) {
      const core::MergedModel& mm = *merge->host->merged();
      out["merge"] = {{"silence", core::to_json(mm.silence())},
                      {"choice", core::to_json(mm.placement())},
                      {"guarded_tokens", merge->host->guarded()},
                      {"guard_ratio", merge->host->guarded() > 0 ? nlohmann::ordered_json(merge->host->guard_ratio())
                                                                 : nlohmann::ordered_json(nullptr)}};
    }
    std::cout << out.dump() << "\n";
    return kExitOk;
  }
  if (options.trace) {
    for (const auto& line : interp.trace) std::printf("trace: %s\n", line.c_str());
  }
  if (options.records) {
    for (const auto& line : interp.prompt_records) std::printf("prompt: %s\n", line.c_str());
    for (const auto& line : interp.generated_records) std::printf("generate: %s\n", line.c_str());
  }
  for (const auto& a : arrays)
    std::printf("%s = %s\n", a.param.c_str(),
                core::format_array(core::unpack_elements(a.array, core::layout_of(**kernel, layouts, a.param))).c_str());
  if (use_model)
    std::printf("%s\n", model_summary(use_interp ? "interp = circuit" : options.engine, options.dtype, model).c_str());
  if (merge && merge->host && merge->host->guarded() > 0)
    std::printf(
        "choice guard: %lld record positions; what the base's layers added moved the record logits by at "
        "most %.3g of half the circuit's own margin (below 1: the base could not have changed a choice)\n",
        static_cast<long long>(merge->host->guarded()), merge->host->guard_ratio());
  if (!silence_line.empty()) std::printf("%s\n", silence_line.c_str());
  if (options.stats) {
    for (const auto& [key, value] : interp.stats)
      std::printf("stat: %s = %lld\n", key.c_str(), static_cast<long long>(value));
    for (const auto& [key, value] : model.stats)
      std::printf("stat: %s = %lld\n", key.c_str(), static_cast<long long>(value));
    for (const auto& [key, value] : model.timings) std::printf("stat: %s = %.3f\n", key.c_str(), value);
  }
  return kExitOk;
}

}  // namespace qgpu::host
