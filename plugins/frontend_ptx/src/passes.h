// Stage 3 of the frontend: the MLIR passes between the builder (ptx_to_mlir.h) and the KernelIR
// conversion (mlir_to_kernel_ir.h), as one named pass pipeline with an options struct (MLIR's
// PassPipelineRegistration), so that one textual pipeline reproduces the whole cleanup:
//
//   builtin.module(qgpu-ptx-cleanup)                                   what the frontend runs
//   builtin.module(qgpu-ptx-cleanup{drop-trivial-block-args=false})    without our pass
//   builtin.module(llvm.func(qgpu-drop-trivial-block-args))            our pass alone
//
// The frontend builds the pipeline directly (build_cleanup_pipeline); the registry is only needed to
// parse textual pipelines (qgpu-ptx --pass-pipeline=...).
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

// Registers MLIR's generic transforms (canonicalize, cse, symbol-dce, ...), qgpu-drop-trivial-block-args
// and qgpu-ptx-cleanup with MLIR's process-wide pass registry, once per process; a name that another
// copy of this code registered first keeps that registration.
void register_passes();

}  // namespace qgpu::ptx
