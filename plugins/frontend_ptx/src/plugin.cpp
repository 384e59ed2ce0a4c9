// frontend_ptx: CUDA C (through clang-16) and PTX -> KernelIR.
//
// The plugin object only reads its options and calls the pipeline
// (pipeline.h): clang for CUDA, then our PTX parser, MLIR passes and the
// KernelIR conversion.
#include <array>
#include <exception>
#include <string>

#include "pipeline.h"
#include "qgpu/sdk/sdk.h"

namespace qgpu::ptx {
namespace {

constexpr std::array kOptions = {
    sdk::option_string("clang", "clang++-16", "clang driver used to compile CUDA C to PTX"),
    sdk::option_string("gpu_arch", "sm_75", "--cuda-gpu-arch passed to clang"),
    sdk::option_string("ptx_features", "+ptx70", "--cuda-feature passed to clang (PTX ISA version)"),
    sdk::option_int("opt_level", "2", 0, 3, "clang optimisation level"),
    sdk::option_string("clang_flags", "",
                       "extra clang flags, split at white space (-D -U -I -f -W -w -std= -mllvm), e.g. "
                       "'-DN=4 -fno-unroll-loops'"),
    sdk::option_path("keep_ptx", "none", "none",
                     "directory to write the generated PTX to (<file>.cu.ptx); diagnostics then name that file"),
};

std::string join_flags(const std::vector<std::string>& flags) {
  std::string s;
  for (const std::string& f : flags) s += (s.empty() ? "" : " ") + f;
  return s.empty() ? "(none)" : s;
}

class PtxFrontend final : public sdk::Frontend {
 public:
  explicit PtxFrontend(const sdk::PluginContext& context) : options_(context.options) {}

  sdk::Expected<sdk::Description> describe() const override {
    auto clang = clang_options();
    if (!clang) return clang.error();
    sdk::Description d;
    const std::string clang_path = find_clang(clang->clang);
    auto prelude = find_prelude();
    d.properties = {
        {"languages", "CUDA C (.cu), PTX (.ptx)"},
        {"clang", clang_path.empty() ? clang->clang + " (not found on PATH)" : clang_path},
        {"target", clang->gpu_arch + " " + clang->ptx_features + " -O" + std::to_string(clang->opt_level)},
        {"clang_flags", join_flags(clang->extra_flags)},
        {"keep_ptx", clang->keep_ptx_dir.empty() ? "none" : clang->keep_ptx_dir},
        {"prelude", prelude ? *prelude : prelude.error().message()},
        {"ir", "PTX -> MLIR (llvm, nvvm, cf) -> canonicalize, drop-trivial-block-args, cse, symbol-dce -> KernelIR"},
    };
    std::string cuda_detail = "clang-16 subprocess with the qgpu CUDA prelude";
    bool cuda_ok = true;
    if (clang_path.empty()) {
      cuda_ok = false;
      cuda_detail = "clang driver '" + clang->clang + "' not found";
    } else if (!prelude) {
      cuda_ok = false;
      cuda_detail = prelude.error().message();
    }
    d.capabilities = {
        {"compile.cuda", cuda_ok, cuda_detail},
        {"compile.ptx", true, "PTX from clang, nvcc or by hand (integer subset, see docs/FRONTEND.md)"},
    };
    return d;
  }

  sdk::Expected<sdk::KernelModule> compile(const sdk::SourceInput& input) override {
    auto clang = clang_options();
    if (!clang) return clang.error();
    try {
      auto r = compile_source(input, *clang, PipelineOptions{});
      if (!r) return r.error();
      return std::move(r->module);
    } catch (const std::exception& e) {
      return sdk::internal_error(std::string("frontend_ptx: ") + e.what());
    }
  }

 private:
  sdk::Expected<ClangOptions> clang_options() const {
    ClangOptions c;
    auto clang = options_.get_string("clang");
    if (!clang) return clang.error();
    auto arch = options_.get_string("gpu_arch");
    if (!arch) return arch.error();
    auto features = options_.get_string("ptx_features");
    if (!features) return features.error();
    auto opt = options_.get_int("opt_level");
    if (!opt) return opt.error();
    c.clang = *clang;
    c.gpu_arch = *arch;
    c.ptx_features = *features;
    c.opt_level = static_cast<int>(*opt);
    auto flags = options_.get_string("clang_flags");
    if (!flags) return flags.error();
    auto extra = parse_clang_flags(*flags);
    if (!extra) return extra.error();
    c.extra_flags = std::move(*extra);
    auto keep = options_.get_string("keep_ptx");
    if (!keep) return keep.error();
    if (*keep != "none") c.keep_ptx_dir = *keep;
    return c;
  }

  static std::string find_clang(const std::string& name);

  sdk::Options options_;
};

std::string PtxFrontend::find_clang(const std::string& name) {
  return find_program(name);
}

}  // namespace
}  // namespace qgpu::ptx

QGPU_DEFINE_PLUGIN(qgpu::ptx::PtxFrontend, "frontend_ptx", "0.1.0",
                   "CUDA C and PTX to KernelIR (clang-16, MLIR LLVM/NVVM dialects)", qgpu::ptx::kOptions)
