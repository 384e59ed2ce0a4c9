// The frontend's pipeline, without MLIR or clang types in its interface:
//
//   CUDA C --clang-16--> PTX text --parse_ptx--> ptx::Module --build--> MLIR (llvm + nvvm + cf)
//        --qgpu-ptx-cleanup (canonicalize, drop-trivial-block-args, cse, symbol-dce)--> MLIR --convert--> KernelIR
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "qgpu/sdk/frontend.h"
#include "qgpu/sdk/status.h"

namespace qgpu::ptx {

struct PipelineOptions {
  bool keep_parsed_mlir = false;  // fill PipelineResult::parsed_mlir (as built from PTX)
  bool keep_final_mlir = false;   // fill PipelineResult::final_mlir (after the passes)
  bool run_passes = true;         // false: convert the MLIR as built (for tests of the passes)
  // The passes as an MLIR textual pipeline anchored on builtin.module, e.g.
  // "builtin.module(qgpu-ptx-cleanup{drop-trivial-block-args=false})"; it may name MLIR's generic
  // transforms, qgpu-drop-trivial-block-args and qgpu-ptx-cleanup. Empty: qgpu-ptx-cleanup with its
  // defaults, the same passes as "builtin.module(qgpu-ptx-cleanup)".
  std::string pass_pipeline;
  bool keep_pass_pipeline = false;  // fill PipelineResult::pass_pipeline (the passes that ran, as text)
  // When set (CUDA input), KernelIR locations are this file's positions taken from the PTX's .loc
  // lines; instructions without one get line 0.
  std::string debug_source;
  // When set, the PTX was generated from this CUDA file: diagnostics point at its lines.
  std::string generated_from;
  // Whether `path` (the PTX) is a file the user can open; false for generated PTX not written out.
  bool ptx_on_disk = true;
};

struct PipelineResult {
  sdk::KernelModule module;
  std::string parsed_mlir;
  std::string final_mlir;
  std::string pass_pipeline;
};

// PTX text -> KernelIR, one kernel per .entry. `path` names the PTX in diagnostics.
sdk::Expected<PipelineResult> compile_ptx(const std::string& text, const std::string& path,
                                          const PipelineOptions& options);

// The parameter names of the __global__ function behind a PTX entry (plain or
// Itanium-mangled name), read from its CUDA source; nullopt when the source has
// no such kernel. An empty string stands for an unnamed parameter.
std::optional<std::vector<std::string>> cuda_param_names(const std::string& source, const std::string& entry);

struct ClangOptions {
  std::string clang = "clang++-16";
  std::string gpu_arch = "sm_75";
  std::string ptx_features = "+ptx70";
  int opt_level = 2;
  bool line_tables = true;               // -gline-tables-only: .loc lines map KernelIR back to the CUDA source
  std::string prelude;                   // path of qgpu_cuda_prelude.h
  std::vector<std::string> extra_flags;  // frontend option clang_flags, checked by parse_clang_flags
  std::string keep_ptx_dir;              // frontend option keep_ptx: write <dir>/<file>.cu.ptx ("" : don't)
};

// The frontend option clang_flags ("-DN=4 -fno-unroll-loops") as arguments for clang. Flags are split at
// white space and must be of the kinds that change what the kernel means or how it is optimised
// (-D -U -I -f -W -w -std= -mllvm); anything that would change what clang produces or where (-o, -S,
// -x, -g..., positional files, plugins) is refused with one line naming the flag.
sdk::Expected<std::vector<std::string>> parse_clang_flags(const std::string& text);

// CUDA C file -> PTX text through clang (a subprocess in a private temp dir).
// Errors carry clang's first error line ("file:line:col: error: ...").
sdk::Expected<std::string> cuda_to_ptx(const std::string& cuda_path, const ClangOptions& options);

// Where the prelude lives for the library (or executable) containing this code:
// beside it, or in <prefix>/share/qgpu/ relative to <prefix>/lib/qgpu/plugins or <prefix>/bin.
sdk::Expected<std::string> find_prelude();

// An executable on PATH (or an explicit path that exists); "" when absent.
std::string find_program(const std::string& name);

// Reads a whole file; the error names it.
sdk::Expected<std::string> read_text_file(const std::string& path);

// The full frontend: picks the language from the extension (or `input.language`), runs clang for CUDA.
sdk::Expected<PipelineResult> compile_source(const sdk::SourceInput& input, const ClangOptions& clang,
                                             const PipelineOptions& options);

}  // namespace qgpu::ptx
