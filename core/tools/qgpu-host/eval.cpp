// qgpu-host eval: an integer expression evaluated on the machine (docs/GPU_TOOL.md). Prints the
// value on stdout and one line per launch on stderr (kernel, engine, generated tokens, seconds).
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "progress.h"
#include "qgpu/core/gpu_evaluator.h"

namespace qgpu::host {
namespace {

// "eval: sum at column 1: kernels/sum.cu:sum, grid 1 x block 4, interp: 43 block executions in 0.01 s"
std::string launch_line(const core::GpuLaunchReport& r) {
  char head[256];
  std::snprintf(head, sizeof head,
                "eval: %s at column %d: kernels/%s:%s, grid %u x block %u, %s: ", r.operation.c_str(), r.column,
                r.file.c_str(), r.kernel.c_str(), r.shape.grid, r.shape.block, r.engine.c_str());
  char tail[256];
  if (r.generated_tokens >= 0)
    std::snprintf(tail, sizeof tail, "generated %lld tokens in %.2f s, min margin %g",
                  static_cast<long long>(r.generated_tokens), r.seconds, r.min_margin);
  else
    std::snprintf(tail, sizeof tail, "%lld block executions in %.2f s", static_cast<long long>(r.block_executions),
                  r.seconds);
  std::string line = std::string(head) + tail;
  if (!r.check.empty()) line += "; " + r.check;
  return line;
}

nlohmann::ordered_json value_json(const core::GpuValue& v) {
  if (v.shape == core::GpuValue::Shape::kScalar) return v.data.at(0);
  if (v.shape == core::GpuValue::Shape::kVector) return v.data;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (std::int64_t r = 0; r < v.rows; ++r)
    rows.push_back(std::vector<std::int32_t>(v.data.begin() + r * v.cols, v.data.begin() + (r + 1) * v.cols));
  return rows;
}

}  // namespace

int run_eval(const core::Host& host, const EvalOptions& options) {
  if (options.check && options.engine == "interp")
    return report(
        sdk::invalid_argument("--check compares a model engine with the interpreter: it needs --engine "
                              "circuit or model"));
  auto expression = core::parse_gpu_expression(options.expression);
  if (!expression) return report(expression.error());
  auto kernel_dir = core::find_kernel_library(options.kernel_dir, options.executable);
  if (!kernel_dir) return report(kernel_dir.error());

  core::LauncherOptions launcher_options;
  auto engine = core::parse_launch_engine(options.engine);
  if (!engine) return report(engine.error());
  launcher_options.engine = *engine;
  auto dtype = core::layer_dtype(options.dtype);
  if (!dtype) return report(dtype.error());
  launcher_options.model.dtype = *dtype;
  launcher_options.model.check = options.check;
  launcher_options.model.on_progress = [](std::string_view line) {
    std::fprintf(stderr, "qgpu-host: %.*s\n", static_cast<int>(line.size()), line.data());
  };
  // While a model engine generates: a live line on a terminal, a line every 10 s otherwise; Ctrl-C
  // stops the launch with how far it got (exit 130).
  LaunchProgressLine line(options.engine, stderr_is_terminal() && !options.json);
  launcher_options.model.on_step = [&line](const core::LaunchProgress& p) { line(p); };
  InterruptFlag interrupt;
  launcher_options.model.cancel = interrupt.flag();
  auto launcher = core::Launcher::open(host, launcher_options);
  if (!launcher) return report(launcher.error());

  core::GpuEvalOptions eval_options;
  eval_options.kernel_dir = *kernel_dir;
  eval_options.on_launch = [&line](const core::GpuLaunchReport& r) {
    line.finish();
    std::fprintf(stderr, "%s\n", launch_line(r).c_str());
  };
  auto result = core::evaluate_gpu_expression(*expression, **launcher, eval_options);
  line.finish();
  if (!result) return report(result.error());

  if (options.json) {
    nlohmann::ordered_json out;
    out["expression"] = options.expression;
    out["parsed"] = core::to_string(*expression);
    out["engine"] = options.engine;
    out["value"] = value_json(result->value);
    out["launches"] = nlohmann::ordered_json::array();
    for (const auto& r : result->launches) {
      nlohmann::ordered_json l;
      l["operation"] = r.operation;
      l["column"] = r.column;
      l["kernel"] = "kernels/" + r.file + ":" + r.kernel;
      l["grid"] = r.shape.grid;
      l["block"] = r.shape.block;
      if (r.block_executions >= 0) l["block_executions"] = r.block_executions;
      if (r.generated_tokens >= 0) {
        l["generated_tokens"] = r.generated_tokens;
        l["margin"] = r.min_margin;
      }
      if (!r.check.empty()) l["check"] = r.check;
      l["seconds"] = r.seconds;
      out["launches"].push_back(std::move(l));
    }
    std::cout << out.dump() << "\n";
    return kExitOk;
  }
  std::printf("%s\n", core::format_value(result->value).c_str());
  return kExitOk;
}

}  // namespace qgpu::host
