#include "qgpu/core/gpu_tool.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <system_error>
#include <tuple>

#include "qgpu/core/launch_args.h"
#include "qgpu/core/text.h"

namespace qgpu::core {
namespace {

using Clock = std::chrono::steady_clock;

std::string trimmed(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(first, last - first + 1));
}

std::string limit_text(std::int64_t value) {
  return value >= 0 ? std::to_string(value) : std::string("the machine's");
}

// "a=[1, 2], b=zeros(3), 5": split at the commas outside brackets and parentheses.
std::vector<std::string> split_args(std::string_view text) {
  std::vector<std::string> items;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    const char c = i < text.size() ? text[i] : ',';
    if (c == '[' || c == '(') ++depth;
    if (c == ']' || c == ')') --depth;
    if (c != ',' || depth > 0) continue;
    std::string item = trimmed(text.substr(start, i - start));
    if (!item.empty() || i < text.size()) items.push_back(std::move(item));
    start = i + 1;
  }
  return items;
}

sdk::Expected<std::uint32_t> parse_count(const std::string& name, const std::string& text) {
  std::uint32_t value = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || p != end || value == 0)
    return sdk::invalid_argument("'" + name + "' must be a positive integer (1-D launches only), got '" + text + "'");
  return value;
}

// The call's parameters by name: every one must be known, the required ones present.
sdk::Expected<std::map<std::string, std::string>> parameters(const sdk::ToolCall& call,
                                                             const std::vector<std::string>& known,
                                                             const std::vector<std::string>& required) {
  std::map<std::string, std::string> out;
  for (const auto& p : call.parameters) {
    if (std::find(known.begin(), known.end(), p.name) == known.end())
      return sdk::invalid_argument(call.name + " has no parameter '" + p.name + "'; its parameters: " + join(known));
    if (!out.emplace(p.name, p.value).second)
      return sdk::invalid_argument(call.name + ": parameter '" + p.name + "' given twice");
  }
  for (const auto& name : required)
    if (!out.contains(name)) return sdk::invalid_argument(call.name + ": the parameter '" + name + "' is missing");
  return out;
}

std::string schema(const std::vector<std::tuple<std::string, std::string, std::string>>& properties,
                   const std::vector<std::string>& required) {
  // Hand-written JSON: keys in a fixed order, as a model reads them in the tools block.
  auto quote = [](const std::string& s) {
    std::string q = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') q += '\\';
      q += c;
    }
    return q + "\"";
  };
  std::string json = "{\"type\": \"object\", \"properties\": {";
  for (std::size_t i = 0; i < properties.size(); ++i) {
    const auto& [name, type, description] = properties[i];
    json += (i ? ", " : "") + quote(name) + ": {\"type\": " + quote(type) + ", \"description\": " + quote(description) +
            "}";
  }
  json += "}, \"required\": [";
  for (std::size_t i = 0; i < required.size(); ++i) json += (i ? ", " : "") + quote(required[i]);
  return json + "]}";
}

}  // namespace

sdk::Expected<GpuToolMode> parse_gpu_tool_mode(std::string_view text) {
  if (text == "off") return GpuToolMode::kOff;
  if (text == "normal") return GpuToolMode::kNormal;
  if (text == "advanced") return GpuToolMode::kAdvanced;
  return sdk::invalid_argument("GPU mode '" + std::string(text) + "': choose normal, advanced or off");
}

std::string_view to_string(GpuToolMode mode) {
  switch (mode) {
    case GpuToolMode::kOff: return "off";
    case GpuToolMode::kNormal: return "normal";
    case GpuToolMode::kAdvanced: return "advanced";
  }
  return "off";
}

sdk::Expected<std::unique_ptr<GpuTool>> GpuTool::open(Launcher& launcher, GpuToolOptions options) {
  QGPU_ASSIGN_OR_RETURN(sdk::Description description, launcher.describe_machine());
  std::unique_ptr<GpuTool> tool(new GpuTool(launcher, std::move(options), machine_limits(description)));
  std::error_code ec;
  tool->scratch_ = std::filesystem::temp_directory_path(ec) / ("qgpu-chat-" + std::to_string(::getpid()));
  if (!ec) std::filesystem::create_directories(tool->scratch_, ec);
  if (ec || !std::filesystem::is_directory(tool->scratch_))
    return sdk::io_error("cannot create the directory for gpu_kernel sources '" + tool->scratch_.string() + "'" +
                         (ec ? ": " + ec.message() : ""));
  return tool;
}

GpuTool::~GpuTool() {
  std::error_code ec;
  if (!scratch_.empty()) std::filesystem::remove_all(scratch_, ec);
}

std::vector<sdk::ToolDeclaration> GpuTool::declarations(GpuToolMode mode) const {
  std::vector<sdk::ToolDeclaration> tools;
  if (mode == GpuToolMode::kOff) return tools;
  const std::string words = limit_text(limits_.global_words);
  tools.push_back(
      {std::string(kGpuEvalTool),
       "Computes an integer expression exactly on the GPU inside this model and returns its value. 32-bit signed "
       "integers only (no floating point, no division). Values: integers, vectors [1, 2, 3], matrices [[1, 2], [3, "
       "4]]. Operations: a @ b (dot product, matrix @ vector, matrix @ matrix), elementwise + - *, sum, max, min, "
       "cumsum, sort, popcount (elementwise), gcd(a, b), pow_mod(b, e, m), is_prime(n), fib(n). All arrays of one "
       "operation together hold at most " +
           words +
           " numbers. A result that does not fit 32 bits is an error, never a wrapped number. Use it for every "
           "number you would otherwise compute in your head.",
       schema({{"expression", "string", "the expression, e.g. [1, 2, 3] @ [4, 5, 6] or gcd(84, 36)"}},
              {"expression"})});
  if (mode != GpuToolMode::kAdvanced) return tools;
  tools.push_back(
      {std::string(kGpuKernelTool),
       "Compiles a CUDA kernel you write and runs it on the GPU inside this model; returns every array argument "
       "after the launch. Write `extern \"C\" __global__` kernels over 32-bit int (int, unsigned): no float, "
       "double, 64-bit, char or short data. Pointer parameters are int arrays in global memory (" +
           words + " words for all of them), other parameters int scalars. 1-D launches: grid x block at most " +
           limit_text(limits_.max_threads) + " threads, at most " + limit_text(limits_.max_block_threads) +
           " per block; warps have " + limit_text(limits_.lanes) + " lanes; shared memory " +
           limit_text(limits_.shared_words) +
           " words per block. A compile error, a machine limit or a fault comes back as the response: fix the "
           "kernel and call again (" +
           std::to_string(options_.attempts) + " failed attempts per question).",
       schema({{"source", "string", "the CUDA source"},
               {"kernel", "string", "the kernel to launch (optional when the source has one)"},
               {"grid", "integer", "thread blocks (default 1)"},
               {"block", "integer", "threads per block"},
               {"args", "string",
                "the kernel's arguments, comma-separated, in parameter order or as NAME=VALUE: an integer 5, an "
                "array [1, 2, 3], or zeros(N) for an output array of N words"}},
              {"source", "block", "args"})});
  return tools;
}

bool GpuTool::fail(GpuToolCall& out, const sdk::Status& status) const {
  if (status.code() == sdk::ErrorCode::kCancelled) return false;
  std::string message = one_line((status.location().empty() ? "" : status.location() + ": ") + status.message());
  // Sources are compiled from the scratch directory: messages name the file as the model knows it.
  const std::string prefix = scratch_.string() + "/";
  for (std::size_t at; (at = message.find(prefix)) != std::string::npos;) message.erase(at, prefix.size());
  out.ok = false;
  out.response = "error: " + message;
  return true;
}

GpuToolCall GpuTool::malformed(const sdk::Status& problem) const {
  GpuToolCall out;
  out.tool = "(malformed)";
  (void)fail(out, problem);
  out.response += " (write <tool_call><function=NAME><parameter=NAME>value</parameter></function></tool_call>)";
  return out;
}

sdk::Expected<GpuToolCall> GpuTool::call(const sdk::ToolCall& call, GpuToolMode mode) {
  std::vector<std::string> names;
  for (const auto& d : declarations(mode)) names.push_back(d.name);
  if (std::find(names.begin(), names.end(), call.name) == names.end()) {
    GpuToolCall out;
    out.tool = call.name;
    std::string hint = closest_match(call.name, names);
    out.response = "error: there is no tool '" + call.name + "'" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
                   "; the tools: " + (names.empty() ? std::string("none (the GPU is off)") : join(names));
    return out;
  }
  auto started = Clock::now();
  auto out = call.name == kGpuEvalTool ? evaluate(call) : run_kernel(call);
  if (out) {
    out->tool = call.name;
    out->engine = launch_engine_name(launcher_.options().engine);
    out->seconds = std::chrono::duration<double>(Clock::now() - started).count();
  }
  return out;
}

sdk::Expected<GpuToolCall> GpuTool::evaluate(const sdk::ToolCall& call) {
  GpuToolCall out;
  auto params = parameters(call, {"expression"}, {"expression"});
  if (!params) return fail(out, params.error()), out;
  out.subject = trimmed(params->at("expression"));
  auto expression = parse_gpu_expression(out.subject);
  if (!expression) return fail(out, expression.error()) ? sdk::Expected<GpuToolCall>(out) : expression.error();
  GpuEvalOptions eval_options;
  eval_options.kernel_dir = options_.kernel_dir;
  auto result = evaluate_gpu_expression(*expression, launcher_, eval_options);
  if (!result) return fail(out, result.error()) ? sdk::Expected<GpuToolCall>(out) : result.error();
  out.ok = true;
  out.response = format_value(result->value);
  out.min_margin = std::numeric_limits<double>::infinity();
  for (const auto& r : result->launches) {
    ++out.launches;
    out.generated_tokens += std::max<std::int64_t>(r.generated_tokens, 0);
    out.block_executions += std::max<std::int64_t>(r.block_executions, 0);
    if (r.generated_tokens >= 0) out.min_margin = std::min(out.min_margin, r.min_margin);
    if (!r.check.empty()) out.checks.push_back(r.check);
  }
  if (out.generated_tokens == 0) out.min_margin = 0;
  return out;
}

sdk::Expected<GpuToolCall> GpuTool::run_kernel(const sdk::ToolCall& call) {
  GpuToolCall out;
  if (failed_kernels_ >= options_.attempts) {
    out.response = "error: no attempts left for this question (" + std::to_string(options_.attempts) +
                   " failed gpu_kernel calls): answer without the GPU and say that the kernel failed";
    return out;
  }
  out.attempt = failed_kernels_ + 1;
  auto failed = [&](const sdk::Status& status) -> sdk::Expected<GpuToolCall> {
    if (!fail(out, status)) return status;
    ++failed_kernels_;
    out.response += " (attempt " + std::to_string(out.attempt) + " of " + std::to_string(options_.attempts) + ")";
    return out;
  };
  auto params = parameters(call, {"source", "kernel", "grid", "block", "args"}, {"source", "block", "args"});
  if (!params) return failed(params.error());
  const std::string kernel_name = params->contains("kernel") ? trimmed(params->at("kernel")) : "";
  auto grid = params->contains("grid") ? parse_count("grid", trimmed(params->at("grid"))) : 1u;
  if (!grid) return failed(grid.error());
  auto block = parse_count("block", trimmed(params->at("block")));
  if (!block) return failed(block.error());
  std::vector<ArgSpec> args;
  for (const auto& item : split_args(params->at("args"))) {
    auto arg = parse_arg(item);
    if (!arg) return failed(arg.error().with_context("args"));
    args.push_back(std::move(*arg));
  }
  out.subject = (kernel_name.empty() ? std::string("kernel") : kernel_name) + "<<<" + std::to_string(*grid) + ", " +
                std::to_string(*block) + ">>>";

  const std::filesystem::path file = scratch_ / "kernel.cu";
  {
    std::ofstream source(file, std::ios::binary | std::ios::trunc);
    source << params->at("source");
    if (!source) return failed(sdk::io_error("cannot write '" + file.string() + "'"));
  }
  auto module = launcher_.compile(file.string());
  if (!module) return failed(module.error());
  auto kernel = choose_kernel(*module, kernel_name, "kernel.cu");
  if (!kernel) return failed(kernel.error());
  out.subject = (*kernel)->name + "<<<" + std::to_string(*grid) + ", " + std::to_string(*block) + ">>>";
  std::vector<ArrayLayout> layouts;
  auto bound = bind_args(**kernel, args, &layouts);
  if (!bound) return failed(bound.error());
  auto program = launcher_.lower(**kernel, sdk::LaunchShape{*grid, *block});
  if (!program) return failed(program.error());
  auto outcome = launcher_.launch(**program, *bound);
  if (!outcome) return failed(outcome.error());

  out.ok = true;
  out.launches = 1;
  for (const auto& a : outcome->arrays())
    out.response += (out.response.empty() ? "" : "\n") + a.param + " = " +
                    format_array(unpack_elements(a.array, layout_of(**kernel, layouts, a.param)));
  if (out.response.empty()) out.response = "(the kernel has no array parameters: nothing to return)";
  for (const auto& [key, value] : outcome->interp.stats)
    if (key == "block_executions") out.block_executions = value;
  if (outcome->modelled) {
    out.generated_tokens = outcome->model.generated_tokens;
    out.min_margin = outcome->model.min_margin;
    if (outcome->model.checked) out.checks.push_back(outcome->model.check);
  }
  return out;
}

std::string describe_call(const GpuToolCall& call, const std::string& dtype) {
  std::string line = call.tool + ": " + (call.subject.empty() ? "" : call.subject + " ");
  if (!call.ok) return line + "-> " + call.response;
  std::string result;  // one line: the arrays of gpu_kernel separated by "; "
  for (char c : call.response) result += c == '\n' ? std::string("; ") : std::string(1, c);
  line += "-> " + result + "; " + call.engine;
  if (call.engine != "interp") line += " (" + dtype + ")";
  char how[160];
  if (call.engine == "interp")
    std::snprintf(how, sizeof how, ": %lld launch%s, %lld block executions, %.2f s", static_cast<long long>(call.launches),
                  call.launches == 1 ? "" : "es", static_cast<long long>(call.block_executions), call.seconds);
  else
    std::snprintf(how, sizeof how, ": %lld launch%s, %lld generated tokens, %.2f s, min margin %g",
                  static_cast<long long>(call.launches), call.launches == 1 ? "" : "es",
                  static_cast<long long>(call.generated_tokens), call.seconds, call.min_margin);
  line += how;
  if (!call.checks.empty()) line += "; " + join(call.checks, "; ");  // each "check: ..."
  return line;
}

}  // namespace qgpu::core
