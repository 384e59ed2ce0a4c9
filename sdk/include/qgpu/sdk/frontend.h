// Frontend: source code (CUDA C, PTX, ...) -> KernelIR.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qgpu/sdk/plugin.h"

namespace qgpu::sdk {

enum class SourceLanguage : std::uint8_t { kAuto, kCuda, kPtx };

struct SourceInput {
  std::string path;  // the file the user named; diagnostics refer to it
  SourceLanguage language = SourceLanguage::kAuto;  // kAuto: decided by the extension
};

// One kernel parameter as CUDA declares it.
struct KernelParam {
  enum class Kind : std::uint8_t { kScalar, kPointer };
  std::string name;  // the CUDA name where the source has one, else "param<N>"
  Kind kind = Kind::kScalar;
  std::uint32_t bits = 32;  // scalar width; pointers are 64-bit addresses
};

// A kernel in the frontend's intermediate form. The instruction body is added
// by the frontend issue together with the machine lowering that consumes it.
struct KernelIR {
  std::string name;
  std::vector<KernelParam> params;
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
