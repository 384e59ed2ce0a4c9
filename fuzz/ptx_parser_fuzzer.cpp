// libFuzzer harness: arbitrary text through the PTX lexer and parser (plugins/frontend_ptx/src/ptx_lexer.cpp, ptx_parser.cpp).
// Expected: a parsed module or a one-line "fuzz.ptx:LINE:COL: error: ..." — never a crash, UB, leak or hang.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "ptx_ast.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace qgpu;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto module = ptx::parse_ptx(text, "fuzz.ptx");
  if (!module) {
    fuzz::check_error(module.error(), text);
    fuzz::check(module.error().message().size() < 4 * size + 4096, "an error message stays short");
    return 0;
  }
  // Walk what the builder would read.
  for (const ptx::Entry& e : module->entries) {
    fuzz::check(!e.name.empty(), "an entry has a name");
    for (const ptx::Statement& s : e.body) {
      if (s.kind == ptx::Statement::Kind::kInstr) fuzz::check(!s.opcode.empty(), "an instruction has an opcode");
    }
  }
  return 0;
}
