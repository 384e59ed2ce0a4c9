// The reference interpreter: the semantic oracle of the SIMT machine
// (docs/ISA.md "Execution"). It runs the encoded, linked ROM image, so the
// encoding is exercised on every run.
#pragma once

#include <cstdint>
#include <vector>

#include "program.h"
#include "qgpu/sdk/machine.h"

namespace qgpu::simt {

// Where a launch's arrays live: consecutively from word 0 in parameter order.
struct MemoryLayout {
  std::vector<std::uint32_t> param_values;  // per parameter: the scalar, or the array's base byte address
  std::vector<int> base_word;               // per parameter: first word of the array, -1 for scalars
  int total_words = 0;
};
sdk::Expected<MemoryLayout> layout_arguments(const Program& program, const std::vector<sdk::LaunchArg>& args);

sdk::Expected<sdk::LaunchResult> interpret_program(const Program& program, const std::vector<sdk::LaunchArg>& args,
                                                   const sdk::InterpretOptions& options);

}  // namespace qgpu::simt
