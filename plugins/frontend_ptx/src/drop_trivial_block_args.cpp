// qgpu-drop-trivial-block-args: replaces a block argument that receives the same value on every
// incoming edge (or itself, around a loop) by that value, and drops it from every branch: the
// trivial-phi removal of Braun et al. (CC 2013). The builder (ptx_to_mlir.cpp) gives every block one
// argument per PTX register; after this pass and the canonicalizer only real merges remain.
#include <memory>

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Pass/Pass.h"
#include "passes.h"

namespace qgpu::ptx {
namespace {

namespace LLVM = mlir::LLVM;
using mlir::Value;

struct DropTrivialBlockArgsPass
    : public mlir::PassWrapper<DropTrivialBlockArgsPass, mlir::OperationPass<LLVM::LLVMFuncOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(DropTrivialBlockArgsPass)
  llvm::StringRef getArgument() const final { return "qgpu-drop-trivial-block-args"; }
  llvm::StringRef getDescription() const final { return "Remove block arguments with one incoming value"; }

  void runOnOperation() override {
    mlir::Region& region = getOperation().getBody();
    bool changed = true;
    while (changed) {
      changed = false;
      for (mlir::Block& block : region) {
        if (block.isEntryBlock()) continue;
        for (int i = static_cast<int>(block.getNumArguments()) - 1; i >= 0; --i) {
          mlir::BlockArgument arg = block.getArgument(i);
          Value same;
          bool trivial = true;
          for (mlir::BlockOperand& use : block.getUses()) {
            auto br = llvm::dyn_cast<mlir::BranchOpInterface>(use.getOwner());
            if (!br) {
              trivial = false;
              break;
            }
            Value in = br.getSuccessorOperands(use.getOperandNumber())[i];
            if (!in) {
              trivial = false;
              break;
            }
            if (in == arg || in == same) continue;
            if (same) {
              trivial = false;
              break;
            }
            same = in;
          }
          if (!trivial || !same) continue;
          arg.replaceAllUsesWith(same);
          for (mlir::BlockOperand& use : block.getUses()) {
            auto br = llvm::cast<mlir::BranchOpInterface>(use.getOwner());
            br.getSuccessorOperands(use.getOperandNumber()).erase(i);
          }
          block.eraseArgument(i);
          changed = true;
        }
      }
    }
  }
};

}  // namespace

std::unique_ptr<mlir::Pass> make_drop_trivial_block_args_pass() {
  return std::make_unique<DropTrivialBlockArgsPass>();
}

}  // namespace qgpu::ptx
