// Prints the instruction table of docs/ISA.md (between its "BEGIN/END
// GENERATED" markers) from src/isa.def; the machine tests check they agree.
#include <cstdio>

#include "isa.h"

int main() {
  std::fputs(qgpu::simt::isa_markdown_table().c_str(), stdout);
  return 0;
}
