// qgpu-host: the command-line driver. Parses arguments, opens the host
// session (config + plugins) and dispatches to a subcommand.
#include <CLI/CLI.hpp>
#include <boost/dll/runtime_symbol_info.hpp>
#include <cstdio>
#include <exception>
#include <string>

#include "commands.h"
#include "qgpu/core/log.h"
#include "qgpu/core/text.h"
#include "qgpu/sdk/version.h"

namespace qgpu::host {

namespace {

std::string version_line() {
  return std::string("qgpu-host ") + QGPU_SDK_VERSION_STRING + " (SDK " + QGPU_SDK_VERSION_STRING + ", plugin ABI " +
         std::to_string(QGPU_ABI_VERSION) + ", " + QGPU_BUILD_FINGERPRINT + ")";
}

int main_impl(int argc, char** argv) {
  core::init_logging();

  CLI::App app{
      "qgpu-host: runs CUDA kernels on a SIMT GPU compiled into a language model's weights.\n"
      "Plugins (frontend, machine, base model, tensor backend) are chosen by a YAML config."};
  app.set_version_flag("--version", version_line());
  core::HostOptions host_options;
  std::string config_file;
  std::string log_level;
  std::vector<std::string> plugin_dirs;
  app.add_option("-c,--config", config_file, "YAML config (e.g. configs/simt_qwen2b.yaml)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off (default: warn, or the config's)");
  app.add_option("--plugin-dir", plugin_dirs, "extra directory to search for plugins (repeatable, searched first)");
  app.require_subcommand(1);

  InfoOptions info_options;
  CLI::App* info = app.add_subcommand("info", "list the plugins found, where from, their versions and capabilities");
  info->add_flag("--json", info_options.json, "print one JSON object instead of text");
  CLI::Option* silence_flag =
      info->add_flag("--silence", info_options.silence,
                     "load the base and certify the circuit's silence on its text rows (the mute direction, "
                     "docs/MACHINE_CIRCUIT.md §6.1)");
  info->add_option("--mute-width", info_options.mute_width,
                   "with --silence: channels the direction may use (default: what a merge uses, 64)")
      ->check(CLI::Range(1, 1 << 20))
      ->needs(silence_flag);

  RunOptions run_options;
  CLI::App* run = app.add_subcommand("run", "compile a CUDA (.cu) or PTX (.ptx) kernel and run one launch");
  run->add_option("kernel", run_options.kernel_file, "kernel source (.cu or .ptx)")->required();
  run->add_option("--kernel", run_options.kernel_name, "kernel to launch when the file defines several");
  run->add_option("--grid", run_options.grid, "thread blocks: X, X,Y or X,Y,Z (x fastest, as CUDA's dim3)")->required();
  run->add_option("--block", run_options.block, "threads per block: X, X,Y or X,Y,Z")->required();
  run->add_option("--arg", run_options.args,
                  "[NAME=]VALUE: int32 scalar (42, -7, 0xff), array [1,2,-3] or zeros(N), 8-/16-bit array u8[...], i8, u16, "
                  "i16 or zeros(N, u8); in parameter order")
      ->allow_extra_args(false);
  auto* engine = run->add_option("--engine", run_options.engine,
                                 "interp (the reference interpreter; the default without --check), circuit (the "
                                 "machine's compiled layers generate the launch on the reference layer math), model "
                                 "(the circuit merged in front of the base model generates it from the model's own "
                                 "logits; the default with --check), or both (interp and circuit, arrays compared)")
                     ->check(CLI::IsMember({"interp", "circuit", "model", "both"}));
  run->add_flag("--check", run_options.check,
                "circuit/model/both: compare every generated token with the interpreter's stream (stops at the "
                "first difference) and the final arrays");
  run->add_option("--dtype", run_options.dtype, "circuit/model: the layer math's dtype, f32 (default) or bf16")
      ->check(CLI::IsMember({"f32", "bf16"}));
  run->add_flag("--dense", run_options.dense,
                "model: run the circuit layers dense on the backend (default: on the host over their sparse weights, "
                "the same results bit for bit)");
  run->add_option("--silence", run_options.silence,
                  "model: after the launch, KL(base || merged) of the next-token distributions on TEXT + TEXT and on "
                  "TEXT + the launch's tokens + TEXT (both from a fresh sequence)");
  run->add_option("--max-tokens", run_options.max_tokens,
                  "circuit/model: stop with an error after this many generated tokens (default 100000)")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40));
  run->add_option("--speculate", run_options.speculate,
                  "model: the circuit layers draft up to N tokens, the whole model verifies them in one call "
                  "(default 16; the generated tokens are the same, docs/SPECULATION.md)")
      ->check(CLI::Range(2, 256));
  run->add_flag_callback("--no-speculate", [&run_options] { run_options.speculate = 0; },
                         "model: one forward of the whole model per generated token");
  run->add_option("--circuit-threads", run_options.circuit_threads,
                  "circuit: threads of the layer math, 1 or 2 (default 2 where the system has two cores or more; "
                  "the same tokens either way)")
      ->check(CLI::Range(1, 2));
  run->add_flag("--json", run_options.json,
                "print one JSON object: kernel, engine, arrays, stats (model engines: tokens, margin, check)");
  run->add_flag("--trace", run_options.trace,
                "print every executed block (warp, block, active lanes); model engines: every generated record");
  run->add_flag("--stats", run_options.stats, "print execution statistics");
  run->add_flag("--records", run_options.records,
                "print the launch in the machine's token protocol: prompt records and the records the model must "
                "generate");
  run->add_flag("--memcheck", run_options.memcheck,
                "interp: red zones around every array; an access past the end of its own array (or before its "
                "start) stops the launch naming the array and the element, as compute-sanitizer's memcheck does");
  run->add_flag("--racecheck", run_options.racecheck,
                "interp: two accesses to one word by different threads with no barrier between them (a store "
                "and a load, two different stores, a plain access and an atomic) stop the launch naming both, as "
                "compute-sanitizer's racecheck does; warp-synchronous code without __syncwarp() is such a race");
  run->add_flag("--dump-program", run_options.dump_program, "print the lowered machine program");
  run->add_option("--max-steps", run_options.max_steps, "stop with an error after this many block executions");

  BatchOptions batch_options;
  CLI::App* batch = app.add_subcommand(
      "batch", "many launches in one process: a JSON line per launch in FILE (or - for stdin), a JSON line per "
               "result on stdout; the machine and its circuit are set up once");
  batch->add_option("file", batch_options.file,
                    "JSON lines: {\"file\": K.cu, \"kernel\": NAME, \"grid\": \"X[,Y,Z]\", \"block\": ..., "
                    "\"args\": [\"NAME=VALUE\", ...]}; relative files from FILE's directory")
      ->required();
  batch->add_option("--engine", batch_options.engine, "interp (default), circuit or model")
      ->check(CLI::IsMember({"interp", "circuit", "model"}));
  batch->add_flag("--check", batch_options.check,
                  "circuit/model: compare every generated token with the interpreter's stream");
  batch->add_option("--dtype", batch_options.dtype, "circuit/model: the layer math's dtype, f32 (default) or bf16")
      ->check(CLI::IsMember({"f32", "bf16"}));
  batch->add_option("--max-tokens", batch_options.max_tokens,
                    "circuit/model: stop a launch with an error after this many generated tokens");
  batch->add_option("--speculate", batch_options.speculate,
                    "model: tokens the circuit layers draft per verification of the whole model (default 16)")
      ->check(CLI::Range(2, 256));
  batch->add_flag_callback("--no-speculate", [&batch_options] { batch_options.speculate = 0; },
                           "model: one forward of the whole model per generated token");
  batch->add_option("--circuit-threads", batch_options.circuit_threads,
                    "circuit: threads of the layer math, 1 or 2 (default 2 where the system has two cores or more)")
      ->check(CLI::Range(1, 2));
  batch->add_option("--max-steps", batch_options.max_steps, "interp: stop a launch after this many block executions");
  batch->add_flag("--memcheck", batch_options.memcheck, "interp: every launch with run --memcheck's red zones");
  batch->add_flag("--racecheck", batch_options.racecheck,
                  "interp: every launch with run --racecheck's check of unordered accesses (a race is that "
                  "launch's error line)");
  batch->add_flag("--verbose", batch_options.verbose, "the engines' progress lines on stderr");

  CircuitOptions circuit_options;
  CLI::App* circuit = app.add_subcommand(
      "circuit", "the machine's circuit as an engine compiles it: layer by layer, what each unit uses");
  circuit
      ->add_option("--engine", circuit_options.engine,
                   "model (default: as merged in front of a base, with the mute direction's channels kept free) or "
                   "circuit (the layers alone)")
      ->check(CLI::IsMember({"circuit", "model"}));
  auto* circuit_json = circuit->add_flag("--json", circuit_options.json, "print one JSON object");
  circuit->add_flag("--markdown", circuit_options.markdown, "print the Markdown tables of docs/MACHINE_CIRCUIT.md")
      ->excludes(circuit_json);

  BuildOptions build_options;
  CLI::App* build = app.add_subcommand(
      "build", "write the merged model (circuit layers in front of the base) as a checkpoint transformers loads");
  build->add_option("--out", build_options.out, "the checkpoint directory to write (new or empty)")->required();
  build->add_option("--dtype", build_options.dtype, "the circuit layers and record rows: bf16 (default) or f32")
      ->check(CLI::IsMember({"f32", "bf16"}));
  build->add_option("--max-shard-mb", build_options.max_shard_mb,
                    "safetensors shards of at most this many MB (default 5000; 0: one file)");
  build->add_flag("--json", build_options.json, "print one JSON object: files, sizes and the manifest");

  EvalOptions eval_options;
  CLI::App* eval = app.add_subcommand(
      "eval", "evaluate an integer expression on the machine, one launch of a kernels/ kernel per operation");
  eval->add_option("expression", eval_options.expression,
                   "e.g. '[1, 2, 3] @ [4, 5, 6]', 'sum(cumsum([1, 2, 3]))', 'pow_mod(2, 10, 1000)' (docs/GPU_TOOL.md)")
      ->required();
  eval->add_option("--engine", eval_options.engine,
                   "interp (the reference interpreter, default), circuit (the machine's compiled layers) or model "
                   "(the circuit merged in front of the base model)")
      ->check(CLI::IsMember({"interp", "circuit", "model"}));
  eval->add_option("--dtype", eval_options.dtype, "circuit/model: the layer math's dtype, f32 (default) or bf16")
      ->check(CLI::IsMember({"f32", "bf16"}));
  eval->add_flag("--check", eval_options.check,
                 "circuit/model: compare every generated token of every launch with the interpreter's stream");
  eval->add_option("--kernels", eval_options.kernel_dir,
                   "the kernel library directory (default: $QGPU_KERNEL_DIR, else <prefix>/share/qgpu/kernels)");
  eval->add_flag("--json", eval_options.json, "print one JSON object: expression, value, launches");

  GenerateOptions gen_options;
  auto add_sampling = [&](CLI::App* cmd) {
    cmd->add_option("--max-tokens", gen_options.max_tokens, "tokens to generate at most (default 64)")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
    // Unset flags keep the checkpoint's defaults (generation_config.json; greedy without one).
    cmd->add_option_function<double>(
        "--temperature", [&](const double& v) { gen_options.sampling.temperature = v; },
        "0 picks the most likely token (default: the checkpoint's generation_config.json, else 0)");
    cmd->add_option_function<std::int64_t>(
        "--top-k", [&](const std::int64_t& v) { gen_options.sampling.top_k = v; },
        "sample among the k most likely tokens (0: all; default: the checkpoint's)");
    cmd->add_option_function<double>(
        "--top-p", [&](const double& v) { gen_options.sampling.top_p = v; },
        "sample within this probability mass (1: all; default: the checkpoint's)");
    cmd->add_option("--seed", gen_options.sampling.seed, "random seed for sampling");
    cmd->add_flag("--stats", gen_options.stats, "print token counts and tokens/s on stderr");
  };
  CLI::App* gen = app.add_subcommand("generate", "continue a text prompt with the base model");
  auto* gen_prompt = gen->add_option("--prompt", gen_options.prompt, "the text to continue");
  gen->add_option("--prompt-ids", gen_options.prompt_ids,
                  "token ids to continue instead of text: '1,2,3', or @FILE holding them (a JSON array or "
                  "separated by commas or whitespace)")
      ->excludes(gen_prompt);
  gen->add_flag("--echo", gen_options.echo, "print the prompt before its continuation");
  gen->add_flag("--json", gen_options.json,
                "print one JSON object: prompt_ids, ids, text, stopped, stop_ids, sampling, model");
  gen->add_flag("--no-stop", gen_options.no_stop,
                "do not stop on the checkpoint's eos ids: generate --max-tokens tokens (parity runs)");
  gen->add_flag("--no-suppress", gen_options.no_suppress,
                "let the checkpoint's suppress_tokens be generated too (a built checkpoint's record tokens: "
                "continuing a launch's prompt ids)");
  gen->add_flag("--logits", gen_options.logits, "with --json: include every step's logits (for comparisons)")
      ->needs("--json");
  add_sampling(gen);
  ChatOptions chat_options;
  CLI::App* chat = app.add_subcommand(
      "chat", "talk to the model in its chat format (reads stdin); it calls the machine as a tool (docs/CHAT.md)");
  chat->add_option("--system", gen_options.system, "a system message that opens the conversation");
  chat->add_option("--gpu", chat_options.gpu,
                   "the GPU tool: normal (expressions on the kernels/ library; the default with a machine), advanced "
                   "(also CUDA the model writes) or off")
      ->check(CLI::IsMember({"normal", "advanced", "off"}));
  chat->add_option("--engine", chat_options.engine,
                   "where launches run: model (default: the circuit merged in front of the base, in a sequence of "
                   "its own), circuit or interp")
      ->check(CLI::IsMember({"interp", "circuit", "model"}));
  auto* chat_dtype =
      chat->add_option("--dtype", chat_options.dtype, "the layer math, f32 or bf16 (default: the config's)")
          ->check(CLI::IsMember({"f32", "bf16"}));
  chat->add_flag("--check,!--no-check", chat_options.check,
                 "replay every launch against the interpreter token by token (default on)");
  chat->add_option("--attempts", chat_options.attempts, "failed gpu_kernel calls allowed per question (default 3)")
      ->check(CLI::Range(1, 100));
  chat->add_option("--max-steps", chat_options.max_steps, "the interpreter's block executions per launch at most");
  chat->add_option("--max-launch-tokens", chat_options.max_launch_tokens,
                   "model engines: generated tokens per launch at most");
  chat->add_option("--script", chat_options.script,
                   "force the assistant's turns from FILE token by token instead of sampling (tests, demos)");
  chat->add_option("--kernels", chat_options.kernel_dir,
                   "the kernel library directory (default: $QGPU_KERNEL_DIR, else <prefix>/share/qgpu/kernels)");
  chat->add_flag("--silence", chat_options.silence,
                 "at the end, KL(base || merged) at every position of the conversation (engine model, after a launch)");
  chat->add_flag("--json", chat_options.json, "print the transcript and every tool call as one JSON object at the end");
  add_sampling(chat);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "qgpu-host: error: %s (see 'qgpu-host --help')\n", core::one_line(e.what()).c_str());
    return kExitUsage;
  }

  if (!log_level.empty()) {
    if (auto s = core::set_log_level(log_level); !s) return report(s);
  }
  if (!config_file.empty()) host_options.config_file = config_file;
  for (const auto& dir : plugin_dirs) host_options.plugin_dirs.emplace_back(dir);
  boost::dll::fs::error_code ec;
  host_options.executable = boost::dll::program_location(ec);
  if (ec) host_options.executable = argv[0];

  auto host = core::Host::open(host_options);
  if (!host) return report(host.error());
  if (log_level.empty() && (*host)->config() && (*host)->config()->log_level) {
    if (auto s = core::set_log_level(*(*host)->config()->log_level); !s) return report(s);
  }

  if (*info) return run_info(**host, info_options);
  if (*circuit) return run_circuit(**host, circuit_options);
  if (*build) return run_build(**host, build_options);
  if (*batch) return run_batch(**host, batch_options);
  if (*run) {
    if (run_options.check && engine->count() == 0) run_options.engine = "model";  // --check needs a model engine
    return run_kernel(**host, run_options);
  }
  if (*eval) {
    eval_options.executable = host_options.executable.string();
    return run_eval(**host, eval_options);
  }
  if (*gen) return run_generate(**host, gen_options);
  if (*chat) {
    chat_options.text = gen_options;
    chat_options.executable = host_options.executable.string();
    if (chat_dtype->count() == 0) {
      auto backend = (*host)->select(QGPU_PLUGIN_TENSOR_BACKEND);
      if (backend) {
        auto values = backend->options.values();
        if (auto it = values.find("dtype"); it != values.end()) chat_options.dtype = it->second;
      }
    }
    return run_chat(**host, chat_options);
  }
  return report(sdk::internal_error("no subcommand ran"));
}

}  // namespace
}  // namespace qgpu::host

int main(int argc, char** argv) {
  // Last line of defence: nothing escapes as an uncaught exception or a stack trace.
  try {
    return qgpu::host::main_impl(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qgpu-host: internal error: %s\n", qgpu::core::one_line(e.what()).c_str());
  } catch (...) {
    std::fprintf(stderr, "qgpu-host: internal error: unknown exception\n");
  }
  return qgpu::host::kExitFailure;
}
