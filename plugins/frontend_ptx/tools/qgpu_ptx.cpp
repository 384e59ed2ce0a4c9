// qgpu-ptx: the frontend's developer driver (for lit tests and debugging).
//
//   qgpu-ptx [--emit=ptx|mlir-parsed|mlir|kernel-ir] [--no-passes | --pass-pipeline=PIPELINE]
//            [--dump-pass-pipeline] [--clang=PATH] [--gpu-arch=sm_75] [--ptx-features=+ptx70] [-O<n>]
//            [--clang-flags=FLAGS] [--keep-ptx=DIR] FILE.{cu,ptx}
//
// --clang-flags and --keep-ptx are the frontend options clang_flags and keep_ptx.
//
// --pass-pipeline replaces the MLIR passes with a textual pipeline in mlir-opt's syntax; the frontend's
// own is `builtin.module(qgpu-ptx-cleanup)` (options: `qgpu-ptx-cleanup{drop-trivial-block-args=false}`).
// --dump-pass-pipeline prints the passes that run, in that syntax, on stderr.
//
// Prints what was asked on stdout; an error is one line on stderr, exit code 2 for bad input, 1 otherwise.
#include <cstdio>
#include <iostream>
#include <string>
#include <string_view>

#include "pipeline.h"
#include "qgpu/sdk/kernel_ir.h"

namespace {

int usage(const char* argv0, int rc) {
  (rc == 0 ? std::cout : std::cerr)
      << "usage: " << argv0
      << " [--emit=ptx|mlir-parsed|mlir|kernel-ir] [--no-passes | --pass-pipeline=PIPELINE]"
         " [--dump-pass-pipeline] [--clang=PATH] [--gpu-arch=ARCH] [--ptx-features=F] [-O<n>]"
         " [--clang-flags=FLAGS] [--keep-ptx=DIR] FILE.{cu,ptx}\n"
         "  --pass-pipeline=PIPELINE  the MLIR passes, in mlir-opt's syntax (default: the frontend's,\n"
         "                            'builtin.module(qgpu-ptx-cleanup)'; option: drop-trivial-block-args)\n"
         "  --dump-pass-pipeline      print the passes that run on stderr\n"
         "  --clang-flags=FLAGS       extra clang flags (the frontend option clang_flags)\n"
         "  --keep-ptx=DIR            write the generated PTX to DIR/<file>.cu.ptx; diagnostics name it\n";
  return rc;
}

int report(const qgpu::sdk::Status& s) {
  std::cerr << s.to_string() << "\n";
  const auto code = s.code();
  const bool input = code == qgpu::sdk::ErrorCode::kParseError || code == qgpu::sdk::ErrorCode::kUnsupported ||
                     code == qgpu::sdk::ErrorCode::kInvalidArgument || code == qgpu::sdk::ErrorCode::kNotFound ||
                     code == qgpu::sdk::ErrorCode::kLimitExceeded;
  return input ? 2 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace qgpu;
  std::string emit = "kernel-ir";
  std::string file;
  ptx::ClangOptions clang;
  ptx::PipelineOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "-h" || a == "--help") return usage(argv[0], 0);
    if (a.starts_with("--emit="))
      emit = a.substr(7);
    else if (a == "--no-passes")
      options.run_passes = false;
    else if (a.starts_with("--pass-pipeline="))
      options.pass_pipeline = a.substr(16);
    else if (a == "--dump-pass-pipeline")
      options.keep_pass_pipeline = true;
    else if (a.starts_with("--clang="))
      clang.clang = a.substr(8);
    else if (a.starts_with("--gpu-arch="))
      clang.gpu_arch = a.substr(11);
    else if (a.starts_with("--ptx-features="))
      clang.ptx_features = a.substr(15);
    else if (a.starts_with("--clang-flags=")) {
      auto flags = ptx::parse_clang_flags(std::string(a.substr(14)));
      if (!flags) return report(flags.error());
      clang.extra_flags = *flags;
    } else if (a.starts_with("--keep-ptx="))
      clang.keep_ptx_dir = a.substr(11);
    else if (a.size() == 3 && a.starts_with("-O") && a[2] >= '0' && a[2] <= '3')
      clang.opt_level = a[2] - '0';
    else if (!a.empty() && a[0] == '-') {
      std::cerr << "qgpu-ptx: error: unknown option '" << a << "'\n";
      return usage(argv[0], 2);
    } else if (file.empty())
      file = a;
    else {
      std::cerr << "qgpu-ptx: error: more than one input file\n";
      return 2;
    }
  }
  if (file.empty()) return usage(argv[0], 2);
  if (emit != "ptx" && emit != "mlir-parsed" && emit != "mlir" && emit != "kernel-ir") {
    std::cerr << "qgpu-ptx: error: unknown --emit value '" << emit << "'\n";
    return 2;
  }
  if (!options.run_passes && !options.pass_pipeline.empty()) {
    std::cerr << "qgpu-ptx: error: --no-passes and --pass-pipeline exclude each other\n";
    return 2;
  }
  if (emit == "ptx") {
    auto ptx = ptx::cuda_to_ptx(file, clang);
    if (!ptx) return report(ptx.error());
    std::cout << *ptx;
    return 0;
  }
  options.keep_parsed_mlir = emit == "mlir-parsed";
  options.keep_final_mlir = emit == "mlir";
  auto r = ptx::compile_source(sdk::SourceInput{file, sdk::SourceLanguage::kAuto}, clang, options);
  if (!r) return report(r.error());
  if (options.keep_pass_pipeline && options.run_passes) std::cerr << r->pass_pipeline << "\n";
  if (emit == "mlir-parsed")
    std::cout << r->parsed_mlir;
  else if (emit == "mlir")
    std::cout << r->final_mlir;
  else {
    for (std::size_t i = 0; i < r->module.kernels.size(); ++i) {
      std::cout << (i ? "\n" : "") << sdk::dump_kernel_ir(r->module.kernels[i]);
    }
  }
  return 0;
}
