// The machine's circuit as the host runs it (sdk::MachineCircuit, docs/MACHINE_CIRCUIT.md §7):
// circuit::build_machine compiled for the engine's layer shapes, with the record rows' embedding
// and unembedding. Building and compiling takes ~30 s; the plugin keeps each one it builds.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config.h"
#include "machine.h"
#include "qgpu/sdk/machine.h"
#include "qgpu/sdk/status.h"
#include "qgpu/weights/compile.h"

namespace qgpu::simt {

class SimtCircuit final : public sdk::MachineCircuit {
 public:
  // Builds and compiles the machine for `request` (the engine's target: the machine's own shapes,
  // or the base's with the mute direction's channels reserved and the choice amplified).
  // `memory`: the memory layout the config's sizes need (memory_layout_for).
  static sdk::Expected<std::shared_ptr<const SimtCircuit>> build(const sdk::CircuitRequest& request,
                                                                 circuit::MemoryLayout memory = circuit::MemoryLayout::kStandard);

  const weights::CompiledCircuit& compiled() const override { return cc_; }
  std::int64_t records() const override;
  std::int64_t first_id() const override { return machine_.fd.records.base; }
  sdk::Expected<std::vector<float>> embedding(std::int64_t record) const override;
  const weights::SparseMatrix& unembedding() const override { return unembed_; }
  std::string summary() const override;
  std::vector<std::pair<std::string, double>> timings() const override;
  std::vector<std::pair<std::string, std::int64_t>> stats() const override;

  const sdk::CircuitRequest& request() const { return request_; }
  circuit::MemoryLayout memory_layout() const { return machine_.memory.layout; }
  const circuit::Machine& machine() const { return machine_; }
  const weights::Circuit& circuit() const { return circuit_; }

 private:
  SimtCircuit() = default;

  sdk::CircuitRequest request_;
  weights::Circuit circuit_{"machine"};
  circuit::Machine machine_;
  weights::CompiledCircuit cc_;
  weights::SparseMatrix unembed_;  // the record rows
  double build_s_ = 0, compile_s_ = 0;
  std::int64_t key_heads_ = 0;
};

// Whether the machine's circuit (engines "circuit" and "model") can run programs lowered with
// `config`: the circuit and the token protocol have fixed sizes (4-instruction blocks, 32 ROM
// blocks, 512 words per memory space, 8 warps of 4 lanes per thread block, 128 thread blocks); the
// interpreter takes more. The error names the option, its value and the circuit's limit.
sdk::Status circuit_supports(const MachineConfig& config);

}  // namespace qgpu::simt
