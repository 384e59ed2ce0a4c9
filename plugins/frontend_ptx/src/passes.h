// Stage 3 of the frontend: the MLIR passes between the builder (ptx_to_mlir.h) and the KernelIR
// conversion (mlir_to_kernel_ir.h), as one pass pipeline, qgpu-ptx-cleanup, with an options struct.
#pragma once

#include <memory>

#include "mlir/Pass/PassOptions.h"

namespace mlir {
class OpPassManager;
class Pass;
}  // namespace mlir

namespace qgpu::ptx {

constexpr const char* kCleanupPipelineName = "qgpu-ptx-cleanup";

// The options of qgpu-ptx-cleanup; the defaults are the frontend's pipeline.
struct CleanupPipelineOptions : public mlir::PassPipelineOptions<CleanupPipelineOptions> {
  Option<bool> drop_trivial_block_args{
      *this, "drop-trivial-block-args",
      llvm::cl::desc("Run qgpu-drop-trivial-block-args on each llvm.func (false: only the canonicalizer's "
                     "region DCE prunes the per-register block arguments)"),
      llvm::cl::init(true)};
};

// qgpu-drop-trivial-block-args (drop_trivial_block_args.cpp), an llvm.func pass.
std::unique_ptr<mlir::Pass> make_drop_trivial_block_args_pass();

// qgpu-ptx-cleanup (pass_pipeline.cpp) on a pass manager anchored on builtin.module: canonicalize,
// qgpu-drop-trivial-block-args on each llvm.func, canonicalize, cse, symbol-dce.
void build_cleanup_pipeline(mlir::OpPassManager& pm, const CleanupPipelineOptions& options);

}  // namespace qgpu::ptx
