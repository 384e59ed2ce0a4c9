// Runs a suite kernel compiled as host C++ (see emu_cuda.h): the suite's cross-check of its
// own references, independent of qgpu's frontend and interpreter.
#pragma once

#include <string>

#include "../suite.h"

namespace qgpu::kernels::emu {

// Runs `kernel` on the launch, updating its arrays in place. Returns an empty string, or what
// went wrong (unknown kernel, argument mismatch, out-of-bounds write, illegal shuffle).
std::string run(const std::string& kernel, Launch& launch);

}  // namespace qgpu::kernels::emu
