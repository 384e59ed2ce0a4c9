// Frontend: source code (CUDA C, PTX, ...) -> KernelIR.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qgpu/sdk/kernel_ir.h"
#include "qgpu/sdk/plugin.h"

namespace qgpu::sdk {

enum class SourceLanguage : std::uint8_t { kAuto, kCuda, kPtx };

struct SourceInput {
  std::string path;  // the file the user named; diagnostics refer to it
  SourceLanguage language = SourceLanguage::kAuto;  // kAuto: decided by the extension
};

struct KernelModule {
  std::string source_path;
  std::vector<KernelIR> kernels;
};

class QGPU_SDK_API Frontend : public Plugin {
 public:
  using Interface = Frontend;
  static constexpr QgpuPluginKind kKind = QGPU_PLUGIN_FRONTEND;

  ~Frontend() override;
  // Compiles every kernel of a source file. Errors are "file:line:col: error: ...".
  virtual Expected<KernelModule> compile(const SourceInput& input) = 0;
};

}  // namespace qgpu::sdk
