// Machine: KernelIR -> a program for the machine, its limits, and the
// reference interpreter that defines its semantics.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qgpu/sdk/base_model.h"
#include "qgpu/sdk/circuit_report.h"
#include "qgpu/sdk/frontend.h"
#include "qgpu/sdk/plugin.h"

namespace qgpu::sdk {

// A launch: `grid` thread blocks of `block` threads each, counted over all dimensions. A 2-D or
// 3-D launch also names its y and z extents; x is then grid / (grid_y * grid_z) (likewise for the
// block), and threads and blocks are numbered linearly with x fastest, as CUDA does.
struct LaunchShape {
  std::uint32_t grid = 1;
  std::uint32_t block = 1;
  std::uint32_t grid_y = 1, grid_z = 1;
  std::uint32_t block_y = 1, block_z = 1;

  std::uint32_t grid_x() const { return grid / (grid_y * grid_z); }
  std::uint32_t block_x() const { return block / (block_y * block_z); }
  bool one_dimensional() const { return grid_y == 1 && grid_z == 1 && block_y == 1 && block_z == 1; }
};

// A lowered kernel. Its representation belongs to the machine plugin; the
// host only prints it (--dump-program) and hands it back to the same plugin.
class QGPU_SDK_API MachineProgram {
 public:
  virtual ~MachineProgram();
  virtual std::string dump() const = 0;
};

// One launch argument: an int32 scalar or an int32 array (global memory).
struct LaunchArg {
  std::string param;  // the kernel parameter it binds to
  bool is_array = false;
  std::int32_t scalar = 0;
  std::vector<std::int32_t> array;
};

struct LaunchResult {
  std::vector<LaunchArg> arrays;  // final contents of every array argument, in parameter order
  std::vector<std::pair<std::string, std::int64_t>> stats;  // e.g. {"warp_instructions", 12}
  std::vector<std::string> trace;  // one line per executed block (warp, block, active lanes) when asked for
  // With InterpretOptions::records, the machine's token protocol for this launch: the records the host
  // feeds and those the model must generate, one readable line each (with its token count).
  std::vector<std::string> prompt_records;
  std::vector<std::string> generated_records;
};

struct InterpretOptions {
  bool trace = false;
  bool records = false;  // also encode the launch in the machine's token protocol (prompt + expected stream)
  std::uint64_t max_steps = 10'000'000;  // block executions before the run is stopped with an error
  // Red zones of unused words around every array (its own addresses then differ from a plain
  // run's): an access that lands in one is a fault naming the array it overran, as
  // compute-sanitizer's memcheck reports it. Not with `records` (the protocol's layout has none).
  bool memcheck = false;
};

}  // namespace qgpu::sdk

namespace qgpu::weights {
struct CompiledCircuit;
struct SparseMatrix;
struct StateView;
}  // namespace qgpu::weights

namespace qgpu::sdk {

// The record rows a machine merges in front of the base (ModelHost::merge), in its
// circuit's channel order.
struct RecordRows {
  std::int64_t records = 0;  // record i is token id text_rows() + i
  // Record i's embedding row: `hidden` values exact in fp32, exactly 0 on the circuit's mute
  // channel (a row the protocol never feeds may be all 0). The host calls it for every row
  // when it merges dense, or for each record token as it arrives on the sparse path (a bad
  // row is then reported by that forward()): it must stay callable while the merge lasts.
  std::function<Expected<std::vector<float>>(std::int64_t record)> embedding;
  // The record rows' unembedding: sparse rows of `hidden` columns, values exact in fp32
  // (may have no rows: no record logits). Read during merge() only.
  const weights::SparseMatrix* unembedding = nullptr;
};

// Engine "model": the host's base model with a machine's circuit merged in front of it
// (docs/MACHINE_CIRCUIT.md §6-§7). The host implements it over the configured base and
// tensor backend; the machine compiles its circuit at shapes() with a mute channel
// (weights::Target::mute_channel, mute_width()), hands it over with its record rows, then drives the
// merged model token by token.
class QGPU_SDK_API ModelHost {
 public:
  virtual ~ModelHost();
  virtual LayerShapes shapes() const = 0;      // the base's layer shapes
  virtual std::int64_t text_rows() const = 0;  // the base's vocabulary: record i is token id text_rows() + i
  virtual std::string dtype() const = 0;       // the backend's compute dtype: "f32" or "bf16"
  // Merges `circuit` in front of the base with its record rows. `circuit` must outlive the
  // merge. Replaces any earlier merge and starts a new sequence.
  virtual Status merge(const weights::CompiledCircuit& circuit, const RecordRows& rows) = 0;
  // Whether the last merge was of `circuit` (the same object): a run may then start a new
  // sequence with reset() instead of merging again.
  virtual bool holds(const weights::CompiledCircuit& circuit) const = 0;
  virtual void reset() = 0;  // a new sequence: every layer's state empty
  // Runs `ids` (text or record ids) after the tokens already seen; the logits of the
  // last position over the base's rows, then the record rows.
  virtual Expected<std::vector<float>> forward(std::span<const std::int64_t> ids) = 0;
  // The merged circuit layers' recurrent states (weights::read_ram), valid until the next call.
  virtual Expected<weights::StateView> circuit_state() = 0;
  // Lines on the merge (layers, upload cost; the silence certificate; where the choice
  // fields went), separated by '\n', for progress output.
  virtual std::string describe() const = 0;
  // Channels the circuit leaves for the mute direction: compile with
  // weights::Target::mute_width set to this (the mute channel and this many - 1 free ones).
  virtual int mute_width() const { return 1; }
};

// How far a launch generated by the model has got (ModelRunOptions::on_step).
struct LaunchProgress {
  std::int64_t generated_tokens = 0;
  std::int64_t records = 0;                                           // complete generated records
  std::vector<std::pair<std::string, std::int64_t>> records_by_kind;  // e.g. {"EXEC", 12}, {"WREG", 30}
  std::int64_t warp_instructions = 0;  // instructions the generated EXECs ran (per warp, not per lane)
  double seconds = 0;                  // generating so far
  double min_margin = 0;               // the smallest margin so far
  bool done = false;                   // the last call: HALT was generated
};

// A launch generated by the model (`run --engine circuit|model`, docs/MACHINE_CIRCUIT.md §7).
struct ModelRunOptions {
  std::string engine = "circuit";  // "circuit": the machine's compiled layers alone on the reference layer math;
                                   // "model": merged into the base model
  std::string dtype = "f32";       // "f32" or "bf16": the layer math's dtype
  bool check = false;  // compare every generated token with the interpreter's expected stream, then the arrays
  bool trace = false;  // call on_record for every generated record as it completes
  std::uint64_t max_tokens = 100'000;  // generated tokens before the run is stopped with an error
  // Optional sinks (called on the caller's thread, during run_model): a generated record's
  // text (with trace), and progress lines (building, compiling, feeding the prompt).
  std::function<void(std::string_view)> on_record;
  std::function<void(std::string_view)> on_progress;
  // While generating: how far the launch has got, at most every `step_interval_s` seconds and
  // once at HALT.
  std::function<void(const LaunchProgress&)> on_step;
  double step_interval_s = 0.5;
  // Set (from another thread or a signal handler) to stop a launch: the run returns an error
  // saying how far it got, never arrays.
  const std::atomic<bool>* cancel = nullptr;
  // Engine "model": the merged model to run on (set by the host; not owned).
  ModelHost* model = nullptr;
};

// Where one word of an array lives in the circuit's recurrent state after HALT (ModelRunResult::
// readout), so that another runtime holding the same layers (a checkpoint written by `qgpu-host
// build`, run by transformers) can read the result from its own state: bit b of the word is 1 when
// state[layer][first_head + b / bits_per_head][row][2 * (b % bits_per_head)] is nonzero (the state of
// a linear-attention layer as [value heads, key dim, value dim]; layer counts the circuit's layers,
// which come first in the merged model).
struct WordLocation {
  std::int32_t layer = 0;
  std::int32_t first_head = 0;
  std::int32_t heads = 0;
  std::int32_t bits_per_head = 0;
  std::int32_t row = 0;
};

struct ModelRunResult {
  std::vector<LaunchArg> arrays;               // read from the model's state after HALT, in parameter order
  // For each array argument (parameter order, as `arrays`), where each element lives in the state.
  std::vector<std::vector<WordLocation>> readout;
  std::vector<std::string> generated_records;  // one line per generated record (its text)
  // The launch's token ids, fed and generated: in the merged model's numbering for engine
  // "model" (what ModelHost::forward took), else the machine's own.
  std::vector<std::int64_t> prompt_ids, generated_ids;
  std::int64_t prompt_tokens = 0;
  std::int64_t generated_tokens = 0;  // HALT included
  double min_margin = 0;              // smallest winner − runner-up logit over the generated tokens
  bool checked = false;               // options.check: every token and the arrays equal the interpreter's
  std::string check;                  // the check's summary line (records / tokens compared)
  std::vector<std::pair<std::string, double>> timings;  // seconds, e.g. {"generate_s", 0.3}
  std::vector<std::pair<std::string, std::int64_t>> stats;
};

// Which compiled circuit `qgpu-host circuit` describes (Machine::describe_circuit).
struct CircuitRequest {
  std::string engine = "model";  // "circuit": the layers alone; "model": as merged in front of a base
  LayerShapes shapes;            // hidden_size 0: the machine's own default shapes
  int mute_width = 0;            // "model": channels reserved for the mute direction (ModelHost::mute_width)
};

class QGPU_SDK_API Machine : public Plugin {
 public:
  using Interface = Machine;
  static constexpr QgpuPluginKind kKind = QGPU_PLUGIN_MACHINE;

  ~Machine() override;
  // Lowers a kernel for one launch shape; errors name the limit exceeded and by how much.
  virtual Expected<std::unique_ptr<MachineProgram>> lower(const KernelIR& kernel, const LaunchShape& shape) = 0;
  // Runs a lowered program on the reference interpreter (the semantic oracle).
  virtual Expected<LaunchResult> interpret(const MachineProgram& program, const std::vector<LaunchArg>& args,
                                           const InterpretOptions& options) = 0;
  // Runs a launch through the model: feeds the prompt, generates records until
  // HALT and reads the arrays back from the recurrent state. A run cut short
  // (step limit, a tie, a --check mismatch) is an error and returns no arrays.
  // Default: not available.
  virtual Expected<ModelRunResult> run_model(const MachineProgram& program, const std::vector<LaunchArg>& args,
                                             const ModelRunOptions& options);
  // Compiles the circuit for host.shapes() (options: dtype and progress sinks) and merges it
  // into `host` with its record rows (ModelHost::merge), without running a launch: `qgpu-host
  // build` then writes the merged model out. Default: not available.
  virtual Status merge_circuit(ModelHost& host, const ModelRunOptions& options);
  // A readable name for each record token (token id ModelHost::text_rows() + i), one per
  // record row: what a tokenizer shows for it. Default: not available.
  virtual Expected<std::vector<std::string>> record_token_names();
  // The machine's circuit as compiled for request.engine: layer by layer, what each of its
  // units uses (`qgpu-host circuit`). Default: not available.
  virtual Expected<CircuitReport> describe_circuit(const CircuitRequest& request);
};

}  // namespace qgpu::sdk
