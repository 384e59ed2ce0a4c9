// Stage 4 of the frontend: one kernel's MLIR (after the cleanup pipeline, passes.h) -> KernelIR.
#pragma once

#include <string>

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "ptx_ast.h"
#include "qgpu/sdk/kernel_ir.h"
#include "qgpu/sdk/status.h"

namespace qgpu::ptx {

// Converts `fn`, the llvm.func built for `entry`, in `module`. Blocks come out in reverse post-order
// from the entry (unreachable ones dropped), dead pure values are removed and values are numbered 1, 2,
// ... in definition order. `loc_path`: the file KernelIR locations refer to (the PTX; the CUDA source
// when `debug`, then `main_file` is its `.file` number). The result is not yet verified.
sdk::Expected<sdk::KernelIR> convert_to_kernel_ir(mlir::ModuleOp module, mlir::LLVM::LLVMFuncOp fn, const Entry& entry,
                                                  const std::string& loc_path, bool debug, int main_file);

}  // namespace qgpu::ptx
