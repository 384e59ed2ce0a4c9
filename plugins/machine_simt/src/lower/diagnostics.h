// How the lowering names things and reports errors: one line that starts with the kernel's name
// and points at the KernelIR instruction's source location where there is one.
#pragma once

#include <cstddef>
#include <string>

#include "qgpu/sdk/kernel_ir.h"
#include "qgpu/sdk/status.h"

namespace qgpu::simt::lower {

// The SDK's names, so diagnostics spell opcodes and types as `qgpu-ptx` dumps do.
inline int bits_of(sdk::IrType t) {
  return sdk::ir_type_bits(t);
}
inline std::string type_str(sdk::IrType t) {
  return std::string(sdk::ir_type_name(t));
}
inline std::string op_str(sdk::Opcode op) {
  return std::string(sdk::opcode_name(op));
}

// What to do about a program over the ROM: clang unrolls loops with constant trip counts (-O2), and the
// unrolled copies are what usually fills the ROM.
inline constexpr const char* kRomLimitHint =
    "unrolled loops are the usual cause: write '#pragma unroll 1' before the loop, or set the frontend option "
    "'clang_flags: -fno-unroll-loops'";

class Diagnostics {
 public:
  explicit Diagnostics(const sdk::KernelIR& kernel) : kernel_(kernel) {}

  // "file:line:col: error: kernel 'k': msg", or without the location when loc is unknown (line 0).
  sdk::Status error(sdk::ErrorCode code, sdk::IrLoc loc, const std::string& msg) const;
  sdk::Status error(const sdk::Instr& in, sdk::ErrorCode code, const std::string& msg) const {
    return error(code, in.loc, msg);
  }
  sdk::Status unsupported(const sdk::Instr& in, const std::string& msg) const {
    return error(in, sdk::ErrorCode::kUnsupported, msg);
  }
  // "<what> needs <need> <unit>, the machine has <have> (over by ...)[; hint]", at the kernel.
  sdk::Status limit(const std::string& what, long need, long have, const std::string& unit_and_context,
                    const std::string& hint = {}) const;

  // A KernelIR block's label, or "bb<index>" when it has none.
  std::string label(std::size_t block) const;

 private:
  const sdk::KernelIR& kernel_;
};

}  // namespace qgpu::simt::lower
