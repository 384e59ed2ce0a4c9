// The named pass pipeline qgpu-ptx-cleanup (see passes.h): what turns the MLIR built from PTX, with one
// block argument per register everywhere, into the MLIR the KernelIR conversion reads.
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "passes.h"

namespace qgpu::ptx {

void build_cleanup_pipeline(mlir::OpPassManager& pm, const CleanupPipelineOptions& options) {
  // Region DCE deletes the block arguments nothing reads (most of the per-register ones).
  pm.addPass(mlir::createCanonicalizerPass());
  // Trivial phis: arguments that receive one value on every edge; then fold what that exposes.
  if (options.drop_trivial_block_args) pm.addNestedPass<mlir::LLVM::LLVMFuncOp>(make_drop_trivial_block_args_pass());
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
  // The `__qgpu_ptx_*` declarations no call uses any more.
  pm.addPass(mlir::createSymbolDCEPass());
}

}  // namespace qgpu::ptx
