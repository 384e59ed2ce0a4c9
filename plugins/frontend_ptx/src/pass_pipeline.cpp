// The named pass pipeline qgpu-ptx-cleanup (see passes.h): what turns the MLIR built from PTX, with one
// block argument per register everywhere, into the MLIR the KernelIR conversion reads.
#include <mutex>
#include <string>

#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
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
  // Unreferenced private symbols: none today (the builder's helpers and shared variables are public
  // symbols), so on the suite's kernels this changes nothing.
  pm.addPass(mlir::createSymbolDCEPass());
}

namespace {

// Whether `pipeline` (anchored, naming one pass or pipeline) parses, i.e. its name is registered; MLIR 16's
// registry has no lookup.
bool parses(const std::string& pipeline) {
  std::string ignored;
  llvm::raw_string_ostream os(ignored);
  return mlir::succeeded(mlir::parsePassPipeline(pipeline, os));
}

}  // namespace

void register_passes() {
  static std::once_flag once;
  std::call_once(once, [] {
    mlir::registerTransformsPasses();
    // Another copy of this code in the process (this static library linked into two binaries, both
    // loaded) registers its own pass type under the same name, and MLIR aborts on that: the first
    // copy's registration stands.
    if (!parses("builtin.module(llvm.func(qgpu-drop-trivial-block-args))")) {
      mlir::registerPass([] { return make_drop_trivial_block_args_pass(); });
    }
    if (!parses(std::string("builtin.module(") + kCleanupPipelineName + ")")) {
      mlir::PassPipelineRegistration<CleanupPipelineOptions>(
          kCleanupPipelineName, "The frontend's MLIR cleanup between PTX -> MLIR and MLIR -> KernelIR",
          build_cleanup_pipeline);
    }
  });
}

}  // namespace qgpu::ptx
