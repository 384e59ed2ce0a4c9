// frontend_ptx: CUDA C (through clang-16) and PTX -> KernelIR.
//
// This build provides the plugin's descriptor, options and description. The
// PTX parser and the MLIR passes arrive with the frontend issue; until then
// compile() answers "not available in this build".
#include <array>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "qgpu/sdk/sdk.h"

namespace qgpu::ptx {
namespace {

constexpr std::array kOptions = {
    sdk::option_string("clang", "clang++-16", "clang driver used to compile CUDA C to PTX"),
    sdk::option_string("gpu_arch", "sm_75", "--cuda-gpu-arch passed to clang"),
    sdk::option_string("ptx_features", "+ptx70", "--cuda-feature passed to clang (PTX ISA version)"),
    sdk::option_int("opt_level", "2", 0, 3, "clang optimisation level"),
};

// Finds an executable on PATH (or checks an explicit path); "" when absent.
std::string find_program(const std::string& name) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (name.find('/') != std::string::npos) return fs::exists(name, ec) ? name : std::string();
  const char* path = std::getenv("PATH");
  std::string_view rest = path ? path : "";
  while (!rest.empty()) {
    auto colon = rest.find(':');
    fs::path candidate = fs::path(std::string(rest.substr(0, colon))) / name;
    if (fs::exists(candidate, ec)) return candidate.string();
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return {};
}

class PtxFrontend final : public sdk::Frontend {
 public:
  explicit PtxFrontend(const sdk::PluginContext& context) : options_(context.options) {}

  sdk::Expected<sdk::Description> describe() const override {
    sdk::Description d;
    auto clang = options_.get_string("clang");
    if (!clang) return clang.error();
    const std::string clang_path = find_program(*clang);
    d.properties = {
        {"languages", "CUDA C (.cu), PTX (.ptx)"},
        {"clang", clang_path.empty() ? *clang + " (not found on PATH)" : clang_path},
        {"target", *options_.get_string("gpu_arch") + " " + *options_.get_string("ptx_features")},
    };
    d.capabilities = {
        {"compile.cuda", false, "not available in this build (CUDA -> PTX via clang arrives with the frontend)"},
        {"compile.ptx", false, "not available in this build (PTX parser -> MLIR LLVM/NVVM arrives with the frontend)"},
    };
    return d;
  }

  sdk::Expected<sdk::KernelModule> compile(const sdk::SourceInput& input) override {
    return sdk::not_available("compiling '" + input.path + "' (frontend_ptx: CUDA/PTX compilation)");
  }

 private:
  sdk::Options options_;
};

}  // namespace
}  // namespace qgpu::ptx

QGPU_DEFINE_PLUGIN(qgpu::ptx::PtxFrontend, "frontend_ptx", "0.1.0",
                   "CUDA C and PTX to KernelIR (clang-16, MLIR LLVM/NVVM dialects)", qgpu::ptx::kOptions)
