// Compiling a circuit into Qwen3.5-shaped layers:
//   validate -> schedule (ops to layers, per-layer budgets) -> allocate
//   (fields to residual channels, norm padding) -> emit (sparse weights).
// The schedule and the allocation can be dumped to an explicit directory as
// schedule.yaml / allocation.yaml and loaded back to reproduce a compile.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "qgpu/sdk/base_model.h"
#include "qgpu/weights/circuit.h"
#include "qgpu/weights/model.h"

namespace qgpu::weights {

struct Target {
  sdk::LayerShapes shapes;  // hidden size, heads, dk/dv, MLP width, conv kernel of the base
  int max_layers = 0;       // 0: no limit
  // A channel that is exactly 0 on circuit tokens (and negative on text tokens,
  // arranged by the embedding builder) with this gain on every MLP gate, beta
  // and z: silences the circuit on text (ARCHITECTURE.md §4). Off by default.
  bool mute_channel = false;
  double mute_gain = 0x1p100;
};

struct LayerUse {
  std::int64_t mlp_neurons = 0;  // after deduplication
  std::int64_t key_heads = 0;    // Gated DeltaNet q/k heads (each with nv/nk value heads)
};

struct Schedule {
  int num_layers = 0;
  std::vector<int> op_layer;       // per op of the circuit
  std::vector<int> op_first_head;  // per GDN op: first q/k head; -1 for MLP ops
  std::vector<LayerUse> use;
};

// Residual channels of every field: bit b of field f has its positive rail at
// field_base[f] + 2b and its negative rail at + 1 (aliases share their root's).
struct Allocation {
  std::int64_t hidden_size = 0;
  int const_hi = 0;  // channel holding normalized 16 (biases)
  int mute = -1;     // mute channel or -1
  std::vector<int> field_base;
  std::vector<int> pad_channel;
  std::vector<double> pad_value;  // normalized
  int channels_used = 0;
  int rail(Bit b) const { return field_base[b.field] + 2 * b.bit + (b.neg ? 1 : 0); }
};

inline constexpr double kConstHi = 16;  // normalized value of the bias channel

sdk::Expected<Schedule> schedule(const Circuit& circuit, const Target& target);
// Checks a (possibly loaded or hand-edited) schedule: every op after its inputs,
// no head used twice, per-layer budgets. emit() calls it first.
sdk::Status check_schedule(const Circuit& circuit, const Target& target, const Schedule& schedule);
// Neurons of an MLP op after merging identical ones.
std::int64_t unique_neuron_count(const MlpOp& op);
sdk::Expected<Allocation> allocate(const Circuit& circuit, const Target& target);
sdk::Expected<std::vector<Layer>> emit(const Circuit& circuit, const Target& target, const Schedule& schedule,
                                       const Allocation& allocation);

struct CompiledCircuit {
  Target target;
  Schedule schedule;
  Allocation allocation;
  std::vector<Layer> layers;
  std::int64_t total_neurons() const;
};

// The whole pipeline; errors name the layer and the resource that overflowed.
sdk::Expected<CompiledCircuit> compile(const Circuit& circuit, const Target& target);

// Writes dir/schedule.yaml and dir/allocation.yaml (the directory must exist).
sdk::Status dump(const Circuit& circuit, const CompiledCircuit& compiled, const std::filesystem::path& dir);
sdk::Expected<Schedule> load_schedule(const Circuit& circuit, const std::filesystem::path& file);
sdk::Expected<Allocation> load_allocation(const Circuit& circuit, const std::filesystem::path& file);

// The raw residual (an embedding row) of a circuit token: constants, every
// computed field at its placeholder 0, inputs set from `values` (word, value).
std::vector<float> embed(const Circuit& circuit, const Allocation& allocation,
                         const std::vector<std::pair<Word, std::uint64_t>>& values);
// Reads a word back from a residual; `exact` (if given) becomes false when any
// rail pair is not exactly (u, 0) or (0, u).
std::uint64_t read_word(const Allocation& allocation, const std::vector<float>& x, const Word& word,
                        bool* exact = nullptr);

}  // namespace qgpu::weights
