#include "program.h"

#include <sstream>

namespace qgpu::simt {
namespace {

std::string slot_text(const Program& p, const Slot& s) {
  if (s.reloc < 0 || s.reloc >= static_cast<int>(p.params.size())) return disassemble(s.in);
  // Launch constants print as "@param+addend", so the listing does not depend on the launch's arrays.
  const std::int32_t addend = s32(s.in.imm);
  std::string sym = "@" + p.params[s.reloc].name;
  if (addend != 0) sym += (addend > 0 ? "+" : "") + std::to_string(addend);
  return disassemble(s.in, sym);
}

}  // namespace

std::string Program::slot_location(const Slot& slot) const {
  if (slot.loc.line == 0) return "";
  return (source_path.empty() ? std::string("<kernel>") : source_path) + ":" + std::to_string(slot.loc.line) + ":" +
         std::to_string(slot.loc.column);
}

std::string Program::dump() const {
  std::ostringstream o;
  o << "kernel " << kernel_name << ": grid " << shape.grid << " x block " << shape.block << "; " << blocks.size()
    << " of " << config.rom_blocks << " blocks, registers r1-r" << registers_used << " of r1-r"
    << (config.registers - 1) << ", shared " << shared_words_used << " of " << config.shared_words << " words\n";
  o << "params:";
  for (std::size_t i = 0; i < params.size(); ++i)
    o << (i ? ", " : " ") << "@" << params[i].name << (params[i].pointer ? " (array base, bytes)" : " (scalar)");
  if (params.empty()) o << " none";
  o << "\n";
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    o << "B" << b << ":  ; " << blocks[b].label << "\n";
    for (const Slot& s : blocks[b].slots) o << "    " << slot_text(*this, s) << "\n";
    o << "    " << slot_text(*this, blocks[b].term) << "\n";
  }
  return o.str();
}

std::vector<std::uint64_t> Program::image(const std::vector<std::uint32_t>& param_values) const {
  std::vector<std::uint64_t> rows;
  rows.reserve(blocks.size() * rows_per_block());
  auto put = [&](const Slot& s) {
    Instr in = s.in;
    if (s.reloc >= 0 && s.reloc < static_cast<int>(param_values.size())) in.imm += param_values[s.reloc];
    rows.push_back(encode(in));
  };
  for (const MachineBlock& b : blocks) {
    for (const Slot& s : b.slots) put(s);
    for (std::size_t i = b.slots.size(); i < static_cast<std::size_t>(config.block_instructions); ++i)
      rows.push_back(encode(Instr{}));
    put(b.term);
  }
  return rows;
}

}  // namespace qgpu::simt
