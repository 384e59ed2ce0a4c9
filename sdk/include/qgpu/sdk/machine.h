// Machine: KernelIR -> a program for the machine, its limits, and the
// reference interpreter that defines its semantics.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
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
  // Racecheck: two accesses to one word by different threads with no barrier between them, at least
  // one a plain store (a load and a store, two stores of different values, or a plain access and an
  // atomic), stop the launch with both accesses named, as compute-sanitizer's racecheck reports a
  // hazard. Shared memory within a thread block; global memory also across thread blocks (which no
  // barrier orders). Warp-synchronous code that relies on a 32-thread warp's lockstep without
  // __syncwarp() is such a race. The accesses are the same with and without it.
  bool racecheck = false;
};

}  // namespace qgpu::sdk

namespace qgpu::weights {
struct CompiledCircuit;
struct SparseMatrix;
struct StateView;
}  // namespace qgpu::weights

namespace qgpu::sdk {

// Where a launch runs: the reference interpreter, the machine's compiled layers alone (on the
// reference layer math), or those layers merged in front of the base model.
enum class Engine : std::uint8_t { kInterp, kCircuit, kModel };

inline const char* engine_name(Engine engine) {
  switch (engine) {
    case Engine::kInterp: return "interp";
    case Engine::kCircuit: return "circuit";
    case Engine::kModel: return "model";
  }
  return "?";
}

// The machine's circuit, compiled for one engine and one set of layer shapes
// (Machine::circuit): the layers, and the record rows that feed and read them. The host runs it;
// the machine never drives a model. The weight compiler's types (qgpu/weights, part of the SDK)
// cross here and are versioned with QGPU_ABI_VERSION.
class QGPU_SDK_API MachineCircuit {
 public:
  virtual ~MachineCircuit();
  virtual const weights::CompiledCircuit& compiled() const = 0;
  // Record rows: in the merged model record r is token id (the base's vocabulary) + r; on the
  // circuit alone it is first_id() + r, the machine's own numbering.
  virtual std::int64_t records() const = 0;
  virtual std::int64_t first_id() const = 0;
  // Record r's embedding: the compiled layers' shapes().hidden_size values, exact in fp32 and 0 on
  // the mute channels. An error for a row the circuit cannot take (one the protocol never feeds).
  virtual Expected<std::vector<float>> embedding(std::int64_t record) const = 0;
  // The record rows' unembedding, sparse rows over the hidden channels, values exact in fp32: the
  // circuit alone scores record r as row r times its last residual over weights::kResidualUnit;
  // merged, the host places these rows after the base's head.
  virtual const weights::SparseMatrix& unembedding() const = 0;
  // One line on the circuit (layers, neurons, key heads, channels; build and compile time).
  virtual std::string summary() const = 0;
  virtual std::vector<std::pair<std::string, double>> timings() const = 0;         // seconds: build_s, compile_s
  virtual std::vector<std::pair<std::string, std::int64_t>> stats() const = 0;     // circuit_layers, ...
};

// Which compiled circuit Machine::circuit and describe_circuit give.
struct CircuitRequest {
  Engine engine = Engine::kModel;  // kCircuit: the layers alone; kModel: as merged in front of a base
  LayerShapes shapes;              // hidden_size 0: the machine's own default shapes
  int mute_width = 0;              // kModel: channels reserved for the mute direction
};

// One prompt record of a launch (LaunchCodec::prompt): its text and its record rows.
struct PromptRecord {
  std::string text;
  std::vector<std::int64_t> rows;
};

// What one generated record row did (LaunchCodec::accept).
struct GeneratedToken {
  bool complete = false;  // it completed a record
  bool halt = false;      // ... the launch's last (nothing is fed after it)
  std::string record;     // the completed record's text
  int kind = -1;          // the completed record's kind, as the machine numbers its kinds
  std::string kind_name;  // e.g. "EXEC"
  std::int64_t warp_instructions = 0;  // instructions the completed record runs (per warp)
};

// The interpreter's run of a launch, as the model must generate it (LaunchCodec::expected).
struct ExpectedLaunch {
  std::vector<std::int64_t> rows;  // record rows, ending with HALT
  std::vector<LaunchArg> arrays;   // final arrays, parameter order
};

// Where one word of an array lives in the circuit's recurrent state after HALT, so that another
// runtime holding the same layers (a checkpoint written by `qgpu-host build`, run by
// transformers) can read the result from its own state: bit b of the word is 1 when
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

// One launch in the machine's token protocol, for one compiled circuit (Machine::encode_launch):
// the host feeds prompt(), chooses every next record row itself from the model's logits, hands
// each to accept() until HALT, then reads the arrays out of the circuit layers' state.
class QGPU_SDK_API LaunchCodec {
 public:
  virtual ~LaunchCodec();
  virtual const std::vector<PromptRecord>& prompt() const = 0;
  // The next generated record row: an error when the machine never generates it or it does not fit
  // the record being assembled (the error says why, naming the record).
  virtual Expected<GeneratedToken> accept(std::int64_t record) = 0;
  // The stream and arrays the interpreter gives for this launch (--check).
  virtual Expected<ExpectedLaunch> expected() = 0;
  // Where `generated` first differs from `expected` (both record rows), as one line naming the
  // token and the record; `got`, when not empty, describes the generated token instead.
  virtual std::string mismatch(std::span<const std::int64_t> expected, std::span<const std::int64_t> generated,
                               std::string_view got) const = 0;
  // The array arguments as the circuit layers' state holds them, in parameter order.
  virtual Expected<std::vector<LaunchArg>> read_arrays(const weights::StateView& state) const = 0;
  // For each array argument (parameter order), where each element lives in the state.
  virtual Expected<std::vector<std::vector<WordLocation>>> readout() const = 0;
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
  // The machine's circuit compiled for request (layers and record rows; compiled once per machine
  // instance and request, ~30 s). Default: not available.
  virtual Expected<std::shared_ptr<const MachineCircuit>> circuit(const CircuitRequest& request);
  // A launch of `program` in the token protocol of `circuit` (one this machine gave): the errors
  // name what the circuit cannot take (an option, a slot, a memory size). Default: not available.
  virtual Expected<std::unique_ptr<LaunchCodec>> encode_launch(const MachineProgram& program,
                                                               const std::vector<LaunchArg>& args,
                                                               const MachineCircuit& circuit);
  // A readable name for each record token (token id ModelHost::text_rows() + i), one per
  // record row: what a tokenizer shows for it. Default: not available.
  virtual Expected<std::vector<std::string>> record_token_names();
  // The machine's circuit as compiled for request.engine: layer by layer, what each of its
  // units uses (`qgpu-host circuit`). Default: not available.
  virtual Expected<CircuitReport> describe_circuit(const CircuitRequest& request);
};

}  // namespace qgpu::sdk
