// libFuzzer harness: arbitrary text through the whole PTX front end (plugins/frontend_ptx/src/pipeline.cpp,
// compile_ptx): parser, PTX -> MLIR (ptx_to_mlir.cpp, ptx_instructions.cpp), the cleanup passes, MLIR ->
// KernelIR (mlir_to_kernel_ir.cpp) and the KernelIR verifier. Expected: kernels or a one-line error.
// MLIR and LLVM are Debian's release builds (no assertions, no sanitizers): what this finds is in our code
// or in IR our builder hands MLIR that it should have rejected.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "pipeline.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace qgpu;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto result = ptx::compile_ptx(text, "fuzz.ptx", ptx::PipelineOptions{});
  if (!result) {
    fuzz::check_error(result.error(), text);
    return 0;
  }
  for (const auto& kernel : result->module.kernels) fuzz::check(!kernel.name.empty(), "a kernel has a name");
  return 0;
}
