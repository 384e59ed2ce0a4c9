// Stage 2 of the frontend: parsed PTX (ptx_ast.h) -> MLIR of the llvm, nvvm and cf dialects.
#pragma once

#include <string>

#include "mlir/IR/BuiltinOps.h"
#include "ptx_ast.h"
#include "qgpu/sdk/status.h"

namespace qgpu::ptx {

// Where KernelIR locations of CUDA input come from: the `.file` number of the CUDA source in the PTX
// and its path. `file` -1: locations are PTX positions.
struct DebugSource {
  int file = -1;
  std::string path;
};

// Builds one `llvm.func` (marked nvvm.kernel) per `.entry` of `ptx` and one address-space-3
// `llvm.mlir.global` per `.shared` variable into `module`. The first unsupported or malformed construct
// is the error ("file:line:col: error: ..."); the module is then incomplete.
sdk::Status build_mlir(const Module& ptx, const DebugSource& debug, mlir::ModuleOp module);

}  // namespace qgpu::ptx
