// A compiled circuit's use of the model's layers, per layer and per unit
// (sdk::CircuitReport; `qgpu-host circuit` prints it).
#pragma once

#include <string>

#include "qgpu/sdk/circuit_report.h"
#include "qgpu/weights/circuit.h"
#include "qgpu/weights/compile.h"

namespace qgpu::weights {

// The unit of an operation: the first part of the owner of the field it writes
// ("alu.s0" -> "alu"); for an op that writes nothing, the first part of its name.
std::string unit_of(const Circuit& circuit, const Op& op);

// Layer by layer: each unit's MLP neurons and key heads, the clears, the live bits; and
// the totals. `engine` is copied into the report.
sdk::CircuitReport report(const Circuit& circuit, const CompiledCircuit& compiled, const std::string& engine);

}  // namespace qgpu::weights
