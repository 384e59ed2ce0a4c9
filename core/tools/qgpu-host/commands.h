// The qgpu-host subcommands. Each returns the process exit code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qgpu/core/host.h"
#include "qgpu/core/report.h"
#include "qgpu/core/sampling.h"

namespace qgpu::host {

// Exit codes: 0 success, 1 a failure while working, 2 bad usage or input, 130 interrupted.
inline constexpr int kExitOk = 0;
using core::kExitFailure;
using core::kExitInterrupted;
using core::kExitUsage;

// Prints an error as one line on stderr ("qgpu-host: error: ...") and returns the matching exit code.
inline int report(const sdk::Status& status) {
  return core::report_error("qgpu-host", status);
}

struct InfoOptions {
  bool json = false;
  bool silence = false;  // load the base and certify the mute direction over its embedding
  int mute_width = 0;    // channels the direction may use (0: core::kMuteWidth, what a merge uses)
};
int run_info(const core::Host& host, const InfoOptions& options);

struct RunOptions {
  std::string kernel_file;
  std::string kernel_name;  // --kernel; empty: the file's only kernel
  std::string grid;         // "X", "X,Y" or "X,Y,Z"
  std::string block;
  std::vector<std::string> args;  // --arg [NAME=]VALUE, in order
  std::string engine = "interp";  // interp, circuit, model, or both (interp and circuit, arrays compared);
                                  // with --check and no --engine: model
  std::string dtype = "f32";      // the model engines' layer math: f32 or bf16
  bool check = false;             // model engines: compare the generated stream with the interpreter's
  std::uint64_t max_tokens = 0;   // model engines: generated tokens at most (0: the machine's default)
  int speculate = 16;               // model: tokens drafted per verification (0: one forward per token)
  int circuit_threads = 0;         // circuit: threads of the layer math, 1 or 2 (0: 2 on two cores or more)
  std::string silence;            // engine model: text for KL(base || merged) alone and around the launch
  bool dense = false;             // engine model: circuit layers dense on the backend (default: exact sparse path)
  bool json = false;
  bool trace = false;
  bool records = false;
  bool stats = false;
  bool dump_program = false;
  bool memcheck = false;
  bool racecheck = false;
  std::uint64_t max_steps = 0;  // 0: the machine's default
};
int run_kernel(const core::Host& host, const RunOptions& options);

struct BatchOptions {
  std::string file;               // JSON lines, one launch each; "-": stdin
  std::string engine = "interp";  // interp, circuit or model
  std::string dtype = "f32";
  bool check = false;             // model engines: every generated token against the interpreter's
  std::uint64_t max_tokens = 0;   // per launch (0: the machine's default)
  int speculate = 16;               // model: tokens drafted per verification (0: one forward per token)
  int circuit_threads = 0;         // circuit: threads of the layer math, 1 or 2 (0: 2 on two cores or more)
  std::uint64_t max_steps = 0;    // per launch (0: the machine's default)
  bool memcheck = false;          // interp: red zones around every array (as run --memcheck)
  bool racecheck = false;         // interp: unordered accesses of two threads (as run --racecheck)
  bool verbose = false;           // the engines' progress lines on stderr
};
int run_batch(const core::Host& host, const BatchOptions& options);

struct CircuitOptions {
  std::string engine = "model";  // the circuit of: circuit (the layers alone) or model (as merged)
  bool json = false;
  bool markdown = false;  // the tables docs/MACHINE_CIRCUIT.md embeds
};
int run_circuit(const core::Host& host, const CircuitOptions& options);

struct BuildOptions {
  std::string out;
  std::string dtype = "bf16";
  std::uint64_t max_shard_mb = 5000;  // 0: one model.safetensors
  bool json = false;
};
int run_build(const core::Host& host, const BuildOptions& options);

struct EvalOptions {
  std::string expression;
  std::string engine = "interp";  // interp, circuit or model
  std::string dtype = "f32";      // the model engines' layer math
  bool check = false;             // model engines: compare every generated token with the interpreter's
  std::string kernel_dir;         // --kernels; empty: find_kernel_library's search
  std::string executable;         // the running binary, where the installed library is looked for
  bool json = false;
};
int run_eval(const core::Host& host, const EvalOptions& options);

struct GenerateOptions {
  std::string prompt;      // generate
  std::string prompt_ids;  // generate: ids instead of text ("1,2,3" or @FILE)
  std::string system;  // chat: an optional system message
  std::int64_t max_tokens = 64;
  core::SamplingFlags sampling;  // over the checkpoint's defaults (generation_config.json)
  bool no_stop = false;          // generate: ignore the eos ids (until --max-tokens), for parity runs
  bool no_suppress = false;      // generate: the checkpoint's suppress_tokens may be generated too
  bool echo = false;             // print the prompt before the continuation
  bool stats = false;            // tokens and tokens/s on stderr
  bool json = false;    // generate: one JSON object (prompt_ids, ids, text, stopped, ...) instead of streamed text
  bool logits = false;  // with --json: every step's logits too
};
int run_generate(const core::Host& host, const GenerateOptions& options);

struct ChatOptions {
  GenerateOptions text;                 // system, max_tokens, sampling, stats
  std::string gpu;                      // normal, advanced or off; empty: normal when the config has a machine
  std::string engine = "model";         // where the tool's launches run: model, circuit or interp
  std::string dtype = "f32";            // the model's layer math (text and launches)
  bool check = true;                    // model engines: every launch replayed against the interpreter
  int attempts = 3;                     // failed gpu_kernel calls per question
  std::uint64_t max_steps = 0;          // the interpreter's block executions per launch (0: the machine's default)
  std::uint64_t max_launch_tokens = 0;  // model engines: generated tokens per launch (0: the machine's default)
  std::string script;                   // assistant turns forced from this file (chat_script.h)
  bool json = false;                    // the transcript and the calls as one JSON object at the end
  bool silence = false;                 // at the end: the merged model against the base on the conversation
  std::string kernel_dir;               // --kernels
  std::string executable;               // the running binary (the installed kernels/ library)
};
int run_chat(const core::Host& host, const ChatOptions& options);

}  // namespace qgpu::host
