// The parsed form of a PTX file: what the hand-written parser produces and
// the MLIR builder consumes. Plain C++ (no MLIR), so the parser stays cheap to
// compile and test.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "qgpu/sdk/status.h"

namespace qgpu::ptx {

struct SrcLoc {
  std::uint32_t line = 0;
  std::uint32_t column = 0;
};

struct Operand {
  enum class Kind : std::uint8_t {
    kReg,     // %r1, %tid.x (also special registers), a symbol such as a shared variable or label
    kImm,     // 42, -1, 0x1f
    kAddr,    // [base+offset]; base may be empty ([imm] absolute)
    kPair,    // %r1|%p1 (shfl's optional predicate output, setp's two outputs)
    kSink,    // _
    kVector,  // {%r1, %r2, _, %r4}: ld/st .v2/.v4 (elements are kReg, kSink or kImm)
  };
  Kind kind = Kind::kImm;
  std::string name;       // kReg: register or symbol; kAddr: base; kPair: first
  std::string name2;      // kPair: second
  std::int64_t imm = 0;   // kImm: value; kAddr: offset
  bool negated = false;   // !%p
  bool is_float = false;  // kImm: a floating-point literal (text in `name`), rejected by the builder
  SrcLoc loc;
  std::vector<Operand> elements;  // kVector
};

struct Statement {
  enum class Kind : std::uint8_t { kLabel, kInstr };
  Kind kind = Kind::kInstr;
  std::string label;  // kLabel
  std::string guard;  // "" when unpredicated
  bool guard_negated = false;
  std::vector<std::string> opcode;  // "ld.global.u32" -> {"ld", "global", "u32"}
  std::vector<Operand> operands;
  SrcLoc loc;
  SrcLoc opcode_loc;
  // The latest `.loc file line col` before this statement (file -1: none): a CUDA source position.
  int dbg_file = -1;
  SrcLoc dbg_loc;
};

struct ParamDecl {
  std::string name;
  std::string type;  // "u32", "u64", "s32", ...
  SrcLoc loc;
};

struct SharedDecl {
  std::string name;
  std::uint64_t bytes = 0;
  std::uint32_t align = 4;
  SrcLoc loc;
};

struct RegDecl {
  std::string type;  // "b32", "pred", "u64", ...
  SrcLoc loc;
};

struct Entry {
  std::string name;
  SrcLoc loc;
  std::vector<ParamDecl> params;
  std::map<std::string, RegDecl> regs;  // every declared register, ranges expanded
  std::vector<SharedDecl> shared;       // declared inside the entry (clang/nvcc "demoted" variables)
  std::vector<Statement> body;
  int dbg_file = -1;  // the entry's first .loc
  SrcLoc dbg_loc;
};

// Which files diagnostics name. PTX input: `ptx` is the file. CUDA input: `cuda` is the .cu file whose
// positions the PTX's .loc lines give, and `ptx` the generated PTX, which the user can open only when
// the frontend wrote it out (option keep_ptx); a message never names a file that is not on disk.
struct DiagnosticFiles {
  std::string ptx;
  bool ptx_on_disk = true;
  std::string cuda;
};

struct Module {
  std::string path;
  DiagnosticFiles diag;
  int cuda_file = -1;              // the .file id of DiagnosticFiles::cuda, -1: none (PTX input, or no .loc lines)
  std::vector<SharedDecl> shared;  // module scope
  std::vector<Entry> entries;
  std::map<int, std::string> files;  // .file N "path"
};

// "file:line:col" for diagnostics.
std::string format_loc(const std::string& path, SrcLoc loc);

// One diagnostic at `ptx_at` in the PTX, whose CUDA position is `cuda_at` (line 0: unknown):
//   k.cu:3:20: error: msg [(generated PTX: DIR/k.cu.ptx:55:2)]   CUDA position known (PTX kept on disk)
//   DIR/k.cu.ptx:55:2: error: msg                                no CUDA position, PTX kept (or PTX input)
//   k.cu: error: msg (line 55:2 of the PTX clang generated; ...)  no CUDA position, PTX not kept
sdk::Status ptx_diagnostic(const DiagnosticFiles& files, SrcLoc ptx_at, SrcLoc cuda_at, sdk::ErrorCode code,
                           const std::string& message);

// Parses PTX text; errors are "file:line:col: error: ..." (sdk::error_at). A device-function call
// (a `call`, from __noinline__ functions or printf) is refused first, at its CUDA line where known.
sdk::Expected<Module> parse_ptx(const std::string& text, const DiagnosticFiles& files);
inline sdk::Expected<Module> parse_ptx(const std::string& text, const std::string& path) {
  return parse_ptx(text, DiagnosticFiles{path, true, {}});
}

}  // namespace qgpu::ptx
