// Runs a parsed GPU expression (gpu_expression.h) on the machine: every operation is a launch of
// the matching kernels/ kernel through a Launcher, nested operations are several launches whose
// results feed the next. Sizes are checked against the machine's limits before each launch, and a
// kernel's overflow flag is an error: no value is ever computed on the host.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "qgpu/core/gpu_expression.h"
#include "qgpu/core/launcher.h"

namespace qgpu::core {

// The machine's limits that a launch's sizes must respect, from its describe() properties (-1 where
// the machine does not report one: its own checks still apply).
struct MachineLimits {
  std::int64_t global_words = -1, shared_words = -1, max_threads = -1, max_block_threads = -1, lanes = -1;
};
MachineLimits machine_limits(const sdk::Description& d);

// One launch of an evaluation, for the per-launch summary line and --json.
struct GpuLaunchReport {
  std::string operation;  // "sum", "@ (dot)", "+"
  int column = 1;         // where the operation is in the expression
  std::string file;       // the kernel library file, e.g. "dot.cu"
  std::string kernel;     // the kernel in it
  sdk::LaunchShape shape;
  std::string engine;                  // interp, circuit or model
  std::int64_t block_executions = -1;  // the interpreter's count (-1: did not run)
  std::int64_t generated_tokens = -1;  // model engines: tokens generated, HALT included (-1: did not run)
  double min_margin = 0;               // model engines
  std::string check;                   // model engines with check: the check's summary
  double seconds = 0;                  // wall time of the operation: compile (first use of a file), lower, launch
};

struct GpuEvalOptions {
  std::filesystem::path kernel_dir;  // the kernels/ library (find_kernel_library)
  // Called after each launch, in order.
  std::function<void(const GpuLaunchReport&)> on_launch;
};

struct GpuEvalResult {
  GpuValue value;
  std::vector<GpuLaunchReport> launches;
};

// Evaluates `e` on `launcher`'s engine. Errors point into the expression
// ("expression:1:5: error: sum: ...").
sdk::Expected<GpuEvalResult> evaluate_gpu_expression(const GpuExpression& e, Launcher& launcher,
                                                     const GpuEvalOptions& options);

// The kernels/ library: `wanted` if not empty, else $QGPU_KERNEL_DIR, else
// <executable>/../share/qgpu/kernels (the build tree mirrors the install tree). The directory must hold dot.cu.
sdk::Expected<std::filesystem::path> find_kernel_library(const std::filesystem::path& wanted,
                                                         const std::filesystem::path& executable);

}  // namespace qgpu::core
