// How the MLIR built from PTX encodes what LLVM has no word for; the builder (ptx_to_mlir.cpp) writes
// these and the KernelIR conversion (mlir_to_kernel_ir.cpp) reads them back. No MLIR types here.
#pragma once

namespace qgpu::ptx {

// LLVM/NVVM address spaces of the pointers the builder makes from integer addresses.
constexpr unsigned kGlobalAs = 1;
constexpr unsigned kSharedAs = 3;
constexpr unsigned kGenericAs = 0;

// PTX semantics that LLVM lacks (clamping shifts, mul.hi, vote.all/any/uni, atom.inc/dec, 64-bit
// popc/clz) are calls to external `__qgpu_ptx_<name>` declarations; nothing links them, the KernelIR
// conversion maps each back to its opcode.
constexpr const char* kCallPrefix = "__qgpu_ptx_";

}  // namespace qgpu::ptx
