// One launch in the machine's token protocol for a compiled circuit (sdk::LaunchCodec,
// docs/PROTOCOL.md): the prompt's records as record rows, generated rows assembled into records,
// the interpreter's expected stream for --check, and the arrays read out of the memory banks'
// recurrent state after HALT.
#pragma once

#include <memory>
#include <vector>

#include "machine_circuit.h"
#include "program.h"
#include "qgpu/sdk/machine.h"

namespace qgpu::simt {

// Checks that `program` runs on `circuit` (block size, the multiplier's and the memory writer's
// slot, the arrays' words) and encodes its prompt. `program` and `circuit` must outlive the codec.
sdk::Expected<std::unique_ptr<sdk::LaunchCodec>> encode_launch(const Program& program,
                                                               const std::vector<sdk::LaunchArg>& args,
                                                               const SimtCircuit& circuit);

}  // namespace qgpu::simt
