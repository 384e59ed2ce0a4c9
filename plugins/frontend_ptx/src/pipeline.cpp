// compile_ptx: the frontend's PTX -> KernelIR pipeline, one stage per file:
//
//   1. PTX text -> ptx::Module                      ptx_lexer.cpp, ptx_parser.cpp (no MLIR)
//   2. ptx::Module -> MLIR (llvm + nvvm + cf)       ptx_to_mlir.cpp, ptx_instructions.cpp
//   3. MLIR -> MLIR: the qgpu-ptx-cleanup pipeline  pass_pipeline.cpp, drop_trivial_block_args.cpp
//   4. MLIR -> KernelIR, verified                   mlir_to_kernel_ir.cpp
//
// LLVM/MLIR are built without exceptions: nothing here throws; errors travel as sdk::Status.
#include "pipeline.h"

#include <filesystem>
#include <string>
#include <system_error>

#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir_to_kernel_ir.h"
#include "passes.h"
#include "ptx_ast.h"
#include "ptx_to_mlir.h"

namespace qgpu::ptx {
namespace {

namespace LLVM = mlir::LLVM;
namespace NVVM = mlir::NVVM;

std::string print_module(mlir::ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os);
  return os.str();
}

// A textual pipeline in mlir-opt's syntax, anchored on builtin.module, into `pm` (anchored there too);
// MLIR's first error line, without its position, becomes the message.
sdk::Status parse_pass_pipeline(const std::string& text, mlir::PassManager& pm) {
  register_passes();
  std::string error;
  llvm::raw_string_ostream os(error);
  auto fail = [&]() {
    os.flush();
    std::string message = error.substr(0, error.find('\n'));
    if (auto at = message.find(": error: "); at != std::string::npos) message = message.substr(at + 9);
    return sdk::invalid_argument("invalid pass pipeline '" + text + "'" + (message.empty() ? "" : ": " + message));
  };
  // The anchored form checks the anchor and every name; the passes then go into `pm` without it, as
  // MLIR 16's own anchored parser does.
  const llvm::StringRef trimmed = llvm::StringRef(text).trim();
  auto anchored = mlir::parsePassPipeline(trimmed, os);
  if (mlir::failed(anchored)) return fail();
  if (anchored->getOpAnchorName() != mlir::ModuleOp::getOperationName()) {
    os << "the pipeline runs on '" << anchored->getOpAnchorName() << "', expected 'builtin.module(...)'";
    return fail();
  }
  const llvm::StringRef inner = trimmed.drop_front(trimmed.find('(') + 1).drop_back();
  if (mlir::failed(mlir::parsePassPipeline(inner, pm, os))) return fail();
  return sdk::Status::ok();
}

}  // namespace

sdk::Expected<PipelineResult> compile_ptx(const std::string& text, const std::string& path,
                                          const PipelineOptions& options) {
  auto parsed = parse_ptx(text, DiagnosticFiles{path, options.ptx_on_disk, options.generated_from});
  if (!parsed) return parsed.error();
  const Module& m = *parsed;
  if (m.entries.empty()) {
    return ptx_diagnostic(m.diag, {1, 1}, {}, sdk::ErrorCode::kInvalidArgument, "no kernel (.entry) in this file");
  }

  mlir::DialectRegistry registry;
  registry.insert<LLVM::LLVMDialect, NVVM::NVVMDialect, mlir::cf::ControlFlowDialect, mlir::arith::ArithDialect>();
  mlir::MLIRContext ctx(registry, mlir::MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic& d) {
    if (d.getSeverity() == mlir::DiagnosticSeverity::Error && diagnostics.empty()) diagnostics = d.str();
    return mlir::success();
  });

  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(mlir::FileLineColLoc::get(&ctx, path, 1, 1));
  DebugSource debug;
  if (!options.debug_source.empty()) {
    for (const auto& [id, file] : m.files) {
      std::error_code ec;
      if (std::filesystem::equivalent(file, options.debug_source, ec)) debug.file = id;
    }
    if (debug.file >= 0) debug.path = options.debug_source;
  }
  const int main_file = debug.file;
  QGPU_RETURN_IF_ERROR(build_mlir(m, debug, *module));
  PipelineResult result;
  if (options.keep_parsed_mlir) result.parsed_mlir = print_module(*module);
  if (mlir::failed(mlir::verify(*module))) {
    return sdk::internal_error(path + ": the MLIR built from PTX does not verify: " + diagnostics);
  }
  if (options.run_passes) {
    mlir::PassManager pm(&ctx);
    if (options.pass_pipeline.empty()) {
      build_cleanup_pipeline(pm, CleanupPipelineOptions());
    } else {
      QGPU_RETURN_IF_ERROR(parse_pass_pipeline(options.pass_pipeline, pm));
    }
    if (options.keep_pass_pipeline) {
      llvm::raw_string_ostream os(result.pass_pipeline);
      pm.printAsTextualPipeline(os);
    }
    if (mlir::failed(pm.run(*module))) return sdk::internal_error(path + ": MLIR passes failed: " + diagnostics);
  }
  if (options.keep_final_mlir) result.final_mlir = print_module(*module);

  result.module.source_path = path;
  for (const Entry& e : m.entries) {
    auto fn = module->lookupSymbol<LLVM::LLVMFuncOp>(e.name);
    if (!fn) return sdk::internal_error(path + ": kernel '" + e.name + "' vanished during the passes");
    auto k =
        convert_to_kernel_ir(*module, fn, e, main_file >= 0 ? options.debug_source : path, main_file >= 0, main_file);
    if (!k) return k.error();
    QGPU_RETURN_IF_ERROR(sdk::verify_kernel_ir(*k));
    result.module.kernels.push_back(std::move(*k));
  }
  return result;
}

}  // namespace qgpu::ptx
