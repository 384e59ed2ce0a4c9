// The machine as a chat tool (docs/CHAT.md): the tools declared to the model in its chat format and
// the execution of the calls it writes. Two tools:
//
//   gpu_eval(expression)                           normal mode: an integer expression on the kernels/
//                                                  library (gpu_expression.h, docs/GPU_TOOL.md)
//   gpu_kernel(source, kernel, grid, block, args)  advanced mode (with gpu_eval): CUDA the model wrote
//
// Every call launches through a Launcher (the merged model's own sequence for engine "model": the
// chat's context only sees the call and the response text). A call never fails the chat: a parse
// error, a limit, a compile error or a fault becomes the response, one line the model can act on.
// The host computes no value of a launch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "qgpu/core/gpu_evaluator.h"
#include "qgpu/core/launcher.h"
#include "qgpu/sdk/chat.h"

namespace qgpu::core {

enum class GpuToolMode { kOff, kNormal, kAdvanced };
sdk::Expected<GpuToolMode> parse_gpu_tool_mode(std::string_view text);  // off, normal, advanced
std::string_view to_string(GpuToolMode mode);

inline constexpr std::string_view kGpuEvalTool = "gpu_eval";
inline constexpr std::string_view kGpuKernelTool = "gpu_kernel";

struct GpuToolOptions {
  std::filesystem::path kernel_dir;  // the kernels/ library (find_kernel_library)
  // Failed gpu_kernel calls allowed per question (begin_question()); each failure's response says
  // which attempt it was, and calls after the last are refused without compiling.
  int attempts = 3;
};

// What one call did, for the dim line, --json and the response.
struct GpuToolCall {
  std::string tool;     // as called (may be unknown)
  std::string subject;  // the expression, or "KERNEL<<<grid, block>>>"; empty when malformed
  bool ok = false;
  std::string response;  // the tool response handed to the model
  int attempt = 0;       // gpu_kernel: which attempt of GpuToolOptions::attempts (failed ones count)
  std::string engine;    // interp, circuit or model
  std::int64_t launches = 0;
  std::int64_t generated_tokens = 0;  // model engines: over the call's launches, HALT included
  std::int64_t block_executions = 0;  // interpreter
  double min_margin = 0;              // model engines: the smallest over the call's launches
  std::vector<std::string> checks;    // model engines with check: each launch's summary
  double seconds = 0;
};

class GpuTool {
 public:
  // `launcher` must outlive the tool; its engine and check options are the tool's.
  static sdk::Expected<std::unique_ptr<GpuTool>> open(Launcher& launcher, GpuToolOptions options);
  ~GpuTool();

  // The tools a mode declares (none when off), with the machine's limits in their descriptions.
  std::vector<sdk::ToolDeclaration> declarations(GpuToolMode mode) const;
  // A new user question: the gpu_kernel attempts start again.
  void begin_question() { failed_kernels_ = 0; }
  // Runs a call the model wrote in `mode`. Fails only when the work was interrupted
  // (ErrorCode::kCancelled) or the model engine can no longer run; everything else is a response.
  sdk::Expected<GpuToolCall> call(const sdk::ToolCall& call, GpuToolMode mode);
  // A call the chat format could not parse: the response names the problem.
  GpuToolCall malformed(const sdk::Status& problem) const;

 private:
  GpuTool(Launcher& launcher, GpuToolOptions options, MachineLimits limits)
      : launcher_(launcher), options_(std::move(options)), limits_(limits) {}
  sdk::Expected<GpuToolCall> evaluate(const sdk::ToolCall& call);
  sdk::Expected<GpuToolCall> run_kernel(const sdk::ToolCall& call);
  // Fills `out` from a failed step: the response is the error's one line. Returns false when the
  // failure must end the chat (cancelled).
  bool fail(GpuToolCall& out, const sdk::Status& status) const;

  Launcher& launcher_;
  GpuToolOptions options_;
  MachineLimits limits_;
  int failed_kernels_ = 0;
  std::filesystem::path scratch_;  // where gpu_kernel sources are written to compile
};

// "[1, 2, 3] @ [4, 5, 6] = 32" / "dot<<<1, 4>>> -> out = [32]" / "error: ..." plus how it ran:
// the line the chat shows the user for a call.
std::string describe_call(const GpuToolCall& call, const std::string& dtype);

}  // namespace qgpu::core
