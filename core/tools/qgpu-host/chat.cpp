// qgpu-host chat: a conversation with the model in its chat format (stdin, one user turn per line),
// with the machine declared as a tool (docs/CHAT.md). A complete tool call in the assistant's
// text ends its turn; the call runs through the GpuTool (each launch in the merged model's own
// sequence, never in the chat's context), its response is appended as a tool turn and the model
// continues.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "chat_script.h"
#include "commands.h"
#include "generation.h"
#include "progress.h"
#include "qgpu/core/gpu_tool.h"
#include "qgpu/core/merged_model.h"
#include "qgpu/core/text.h"

namespace qgpu::host {
namespace {

// Tool calls one question may make before its turn is ended (a model that calls in a loop).
constexpr int kMaxCallsPerQuestion = 8;

nlohmann::ordered_json turn_json(const sdk::ChatTurn& t) {
  nlohmann::ordered_json j{{"role", t.role}, {"content", t.content}};
  if (!t.tool_calls.empty()) {
    j["tool_calls"] = nlohmann::ordered_json::array();
    for (const auto& c : t.tool_calls) {
      nlohmann::ordered_json params = nlohmann::ordered_json::object();
      for (const auto& p : c.parameters) params[p.name] = p.value;
      j["tool_calls"].push_back({{"name", c.name}, {"parameters", params}});
    }
  }
  return j;
}

nlohmann::ordered_json call_json(const core::GpuToolCall& c, std::size_t turn) {
  nlohmann::ordered_json j{{"turn", turn}, {"tool", c.tool}, {"subject", c.subject}, {"ok", c.ok},
                           {"response", c.response}};
  if (c.attempt > 0) j["attempt"] = c.attempt;
  if (c.launches > 0) {
    j["engine"] = c.engine;
    j["launches"] = c.launches;
    if (c.engine == "interp")
      j["block_executions"] = c.block_executions;
    else {
      j["generated_tokens"] = c.generated_tokens;
      j["min_margin"] = c.min_margin;
    }
    if (!c.checks.empty()) j["checks"] = c.checks;
    j["seconds"] = c.seconds;
  }
  return j;
}

// One line on stderr, dim on a terminal.
void dim_line(const std::string& line) {
  if (stderr_is_terminal())
    std::fprintf(stderr, "\x1b[2m%s\x1b[0m\n", line.c_str());
  else
    std::fprintf(stderr, "%s\n", line.c_str());
}

std::string trimmed_end(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n')) s.pop_back();
  return s;
}

// The chat's pieces: the launcher and tool (when the config has a machine and the GPU is used)
// and the model its text runs on. Members are destroyed in reverse: the text model's references
// first, then the tool, then the launcher with the merged model.
struct ChatSession {
  std::unique_ptr<core::Launcher> launcher;
  std::unique_ptr<core::GpuTool> tool;
  std::unique_ptr<LoadedModel> model;
};

sdk::Expected<ChatSession> open_session(const core::Host& host, const ChatOptions& options, bool with_gpu,
                                        LaunchProgressLine& progress, const std::atomic<bool>* cancel) {
  ChatSession s;
  if (with_gpu) {
    core::LauncherOptions lo;
    QGPU_ASSIGN_OR_RETURN(lo.engine, core::parse_launch_engine(options.engine));
    if (options.max_steps > 0) lo.interpret.max_steps = options.max_steps;
    QGPU_ASSIGN_OR_RETURN(lo.model.dtype, core::layer_dtype(options.dtype));
    lo.model.check = options.check && options.engine != "interp";
    if (options.max_launch_tokens > 0) lo.model.max_tokens = options.max_launch_tokens;
    lo.model.on_progress = [](std::string_view line) {
      std::fprintf(stderr, "qgpu-host: %.*s\n", static_cast<int>(line.size()), line.data());
    };
    lo.model.on_step = [&progress](const core::LaunchProgress& p) { progress(p); };
    lo.model.cancel = cancel;
    QGPU_ASSIGN_OR_RETURN(s.launcher, core::Launcher::open(host, lo));
    QGPU_ASSIGN_OR_RETURN(auto kernel_dir, core::find_kernel_library(options.kernel_dir, options.executable));
    QGPU_ASSIGN_OR_RETURN(s.tool, core::GpuTool::open(*s.launcher, {kernel_dir, options.attempts}));
  }
  // Engine model: the chat's text runs on the base the launches are merged into (one copy of the weights).
  QGPU_ASSIGN_OR_RETURN(core::LoadedMerge * merge,
                        s.launcher ? s.launcher->merge() : sdk::Expected<core::LoadedMerge*>(nullptr));
  if (merge != nullptr && merge->host == nullptr)
    return sdk::unsupported(
        "chat --engine model on a built checkpoint is not supported yet (its launches and the chat would share one "
        "sequence); use --engine circuit, or the config it was built from");
  if (merge != nullptr) {
    s.model = std::make_unique<LoadedModel>();
    s.model->backend = merge->backend;
    s.model->model = merge->base;
    s.model->info = merge->host->info();
    s.model->name = host.select(QGPU_PLUGIN_BASE_MODEL)->plugin->name;
  } else {
    QGPU_ASSIGN_OR_RETURN(s.model, load_model(host));
  }
  return s;
}

// Where the prompt's last complete turn ends: after its last end-of-turn id.
std::size_t last_turn_end(const std::vector<std::int64_t>& prompt, const std::vector<std::int64_t>& stops) {
  for (std::size_t i = prompt.size(); i > 0; --i)
    if (std::find(stops.begin(), stops.end(), prompt[i - 1]) != stops.end()) return i;
  return 0;
}

}  // namespace

int run_chat(const core::Host& host, const ChatOptions& options) {
  const GenerateOptions& text_options = options.text;
  if (auto s = core::validate(core::resolve_sampling({}, text_options.sampling)); !s) return report(s);
  const bool has_machine = static_cast<bool>(host.select(QGPU_PLUGIN_MACHINE));
  auto mode = core::parse_gpu_tool_mode(options.gpu.empty() ? (has_machine ? "normal" : "off") : options.gpu);
  if (!mode) return report(mode.error().with_context("--gpu"));
  if (*mode != core::GpuToolMode::kOff && !has_machine)
    return report(sdk::invalid_argument("--gpu " + std::string(core::to_string(*mode)) +
                                        ": the config selects no machine (use --gpu off)"));
  std::optional<ChatScript> script;
  if (!options.script.empty()) {
    auto loaded = load_chat_script(options.script);
    if (!loaded) return report(loaded.error());
    script = std::move(*loaded);
  }

  LaunchProgressLine progress(options.engine, stderr_is_terminal() && !options.json);
  InterruptFlag interrupt;
  auto session = open_session(host, options, has_machine, progress, interrupt.flag());
  if (!session) return report(session.error());
  LoadedModel& m = *session->model;
  core::GpuTool* tool = session->tool.get();
  const core::SamplingOptions sampling = core::resolve_sampling(m.info.generation, text_options.sampling);
  if (auto s = core::validate(sampling); !s) return report(s);
  core::Sampler sampler(sampling);

  std::vector<sdk::ChatTurn> turns;
  if (!text_options.system.empty()) turns.push_back({"system", text_options.system});
  nlohmann::ordered_json calls = nlohmann::ordered_json::array();
  auto describe_gpu = [&] {
    if (*mode == core::GpuToolMode::kOff) return std::string("GPU off");
    std::string how = "GPU " + std::string(core::to_string(*mode)) + " on the " + options.engine + " engine";
    if (options.engine != "interp") how += std::string(" (") + options.dtype + (options.check ? ", checked" : "") + ")";
    return how;
  };
  std::fprintf(stderr, "chat with %s (%s), %s%s; /gpu normal|advanced|off, /reset, /exit or end of input\n",
               m.name.c_str(), m.info.checkpoint.c_str(), describe_gpu().c_str(),
               script ? (", assistant turns from " + script->file).c_str() : "");

  auto context_handle = ChatSequence::create(m);
  if (!context_handle) return report(context_handle.error());
  TextGeneration text;
  text.sequence = (*context_handle)->sequence();
  text.max_tokens = text_options.max_tokens;
  text.stops = m.model->stop_ids();  // the checkpoint's eos ids and the chat format's end of turn
  text.suppress = m.info.generation.suppress_token_ids;
  text.stream = !options.json;
  std::vector<std::int64_t> forced;
  bool script_ended = false;
  std::string line;
  ChatSequence* context = context_handle->get();
  while (!script_ended) {
    std::fprintf(stderr, "> ");
    std::fflush(stderr);
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line == "/reset") {
      turns.resize(text_options.system.empty() ? 0 : 1);
      continue;
    }
    if (line == "/gpu" || line.starts_with("/gpu ")) {
      auto next = core::parse_gpu_tool_mode(line.size() > 5 ? std::string_view(line).substr(5) : "");
      if (line == "/gpu")
        std::fprintf(stderr, "%s\n", describe_gpu().c_str());
      else if (!next)
        std::fprintf(stderr, "%s\n", next.error().message().c_str());
      else if (*next != core::GpuToolMode::kOff && tool == nullptr)
        std::fprintf(stderr, "the config selects no machine: the GPU stays off\n");
      else {
        *mode = *next;
        std::fprintf(stderr, "%s\n", describe_gpu().c_str());
      }
      continue;
    }
    if (line.empty()) continue;
    turns.push_back({"user", line});
    if (tool) tool->begin_question();
    for (int calls_made = 0;;) {
      std::vector<sdk::ToolDeclaration> tools;
      if (tool) tools = tool->declarations(*mode);
      // The whole conversation is re-encoded each reply (the chat's context never holds a launch);
      // the chat's sequence keeps what it already holds of it.
      auto prompt = core::guarded_call(m.name, "encode_chat()", [&] { return m.model->encode_chat(turns, tools); });
      if (!prompt) return report(prompt.error());
      auto rest = context->prepare(*prompt, last_turn_end(*prompt, text.stops));
      if (!rest) return report(rest.error());
      text.forced = nullptr;
      if (script) {
        if (script->next >= script->turns.size()) {
          std::fprintf(stderr, "chat: the script's %zu assistant turns are used up; the chat ends\n",
                       script->turns.size());
          script_ended = true;
          break;
        }
        auto ids = m.model->encode(script->turns[script->next++]);
        if (!ids) return report(ids.error().with_context(script->file));
        forced = std::move(*ids);
        text.forced = &forced;
      }
      text.stop_after = nullptr;
      if (*mode != core::GpuToolMode::kOff)
        text.stop_after = [](std::string_view so_far) { return so_far.find("</tool_call>") != std::string_view::npos; };
      auto g = generate(m, *rest, text, sampler);
      if (!g) return report(g.error());
      context->fed(*rest, *g);
      if (!options.json) std::printf("\n");
      std::fflush(stdout);
      print_stats(text_options.stats, prompt->size(), *g);
      if (text_options.stats)
        std::fprintf(stderr, "stats: %zu of the prompt's tokens were already in the chat's sequence\n",
                     context->reused());
      if (!g->ended_by_text) {
        turns.push_back({"assistant", g->text});
        break;
      }
      // A tool call ends the turn: run it and hand the response back.
      auto found = m.model->find_tool_call(g->text);
      std::optional<core::GpuToolCall> outcome;
      if (found && *found) {
        turns.push_back({"assistant", trimmed_end(g->text.substr(0, (*found)->begin)), {(*found)->call}});
        progress.finish();
        auto done = tool->call((*found)->call, *mode);
        progress.finish();
        if (!done) return report(done.error());
        outcome = std::move(*done);
      } else {
        turns.push_back({"assistant", g->text});
        outcome = tool->malformed(found ? sdk::internal_error("no tool call found") : found.error());
      }
      dim_line("tool: " + core::describe_call(*outcome, options.dtype));
      calls.push_back(call_json(*outcome, turns.size() - 1));
      turns.push_back({"tool", outcome->response});
      if (++calls_made >= kMaxCallsPerQuestion) {
        std::fprintf(stderr, "chat: %d tool calls for one question; the turn ends here\n", calls_made);
        break;
      }
    }
  }
  if (script && script->next < script->turns.size())
    std::fprintf(stderr, "chat: %zu of the script's %zu assistant turns were not used\n",
                 script->turns.size() - script->next, script->turns.size());
  // --silence: the merged model against the base on the conversation as it stands (text only:
  // tool calls and responses are text in the chat's context).
  nlohmann::ordered_json silence;
  if (options.silence) {
    core::LoadedMerge* merge = session->launcher ? session->launcher->loaded_merge() : nullptr;
    if (merge == nullptr || merge->host == nullptr || merge->host->merged() == nullptr)
      return report(sdk::invalid_argument("--silence: no launch merged the model (it needs --engine model and a tool call)"));
    std::vector<sdk::ToolDeclaration> tools;
    if (tool) tools = tool->declarations(*mode);
    auto ids = m.model->encode_chat(turns, tools);
    if (!ids) return report(ids.error().with_context("--silence"));
    auto r = core::measure_silence(*merge->host->merged(), *merge->base, *merge->backend, *ids);
    if (!r) return report(r.error().with_context("--silence"));
    const std::int64_t identical = r->before_identical + r->after_identical, rows = r->before + r->after;
    const double kl_max = std::max(r->kl_before_max, r->kl_after_max);
    std::fprintf(stderr,
                 "silence: the conversation (%zu tokens, %zu tool calls): %lld of %lld next-token distributions "
                 "identical to the base's, max KL(base||merged) = %g\n",
                 ids->size(), calls.size(), static_cast<long long>(identical), static_cast<long long>(rows), kl_max);
    silence = {{"tokens", ids->size()}, {"identical", identical}, {"positions", rows}, {"kl_max", kl_max}};
  }
  if (options.json) {
    nlohmann::ordered_json out;
    out["gpu"] = std::string(core::to_string(*mode));
    out["engine"] = options.engine;
    out["dtype"] = options.dtype;
    out["check"] = options.check && options.engine != "interp";
    out["tools"] = nlohmann::ordered_json::array();
    if (tool)
      for (const auto& d : tool->declarations(*mode)) out["tools"].push_back(d.name);
    out["turns"] = nlohmann::ordered_json::array();
    for (const auto& t : turns) out["turns"].push_back(turn_json(t));
    out["calls"] = calls;
    if (options.silence) out["silence"] = silence;
    std::cout << out.dump() << "\n";
  }
  return interrupt.raised() ? kExitInterrupted : kExitOk;
}

}  // namespace qgpu::host
