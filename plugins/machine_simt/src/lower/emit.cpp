#include "lower/emit.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "lower.h"

namespace qgpu::simt::lower {
namespace {

// An operand's encoded kind and field (an immediate goes to the slot's imm and reloc).
void physical_operand(const Operand& m, const std::vector<int>& color, Kind& kind, std::uint8_t& field, Slot& s) {
  switch (m.form) {
    case Operand::Form::kVReg:
      kind = Kind::kReg;
      field = static_cast<std::uint8_t>(color[m.vreg]);
      break;
    case Operand::Form::kImm:
      kind = Kind::kImm;
      s.in.imm = m.imm;
      s.reloc = m.reloc;
      break;
    case Operand::Form::kSpecial:
      kind = Kind::kSpecial;
      field = static_cast<std::uint8_t>(m.special);
      break;
    default:
      kind = Kind::kReg;
      field = 0;
      break;
  }
}

Slot to_slot(const Instruction& mi, const std::vector<int>& color) {
  Slot s;
  s.loc = mi.loc;
  s.in.op = mi.op;
  s.in.d = mi.dest >= 0 ? static_cast<std::uint8_t>(color[mi.dest]) : 0;
  s.in.flags = mi.flags;
  Kind ck = Kind::kReg;
  physical_operand(mi.a, color, s.in.ak, s.in.a, s);
  physical_operand(mi.b, color, s.in.bk, s.in.b, s);
  physical_operand(mi.c, color, ck, s.in.c, s);
  const Format f = op_info(mi.op).format;
  if (f == kFmtLoad || f == kFmtStore || f == kFmtAtom || f == kFmtCas) {
    s.in.ak = s.in.bk = Kind::kReg;
    s.in.imm = mi.offset;
    s.reloc = mi.reloc;
  }
  return s;
}

// A parallel copy as moves; cycles are broken with three xors (no spare register needed).
void sequentialize(const Instruction& mi, const std::vector<int>& color, std::vector<Slot>& out) {
  struct Copy {
    int dst;
    Operand src;
    int src_reg;  // physical, or -1 for a non-register source
  };
  std::vector<Copy> todo;
  for (const auto& [d, s] : mi.copies) {
    const int sr = s.is_vreg() ? color[s.vreg] : s.form == Operand::Form::kZero ? 0 : -1;
    if (sr == color[d]) continue;
    todo.push_back({color[d], s, sr});
  }
  auto mov = [&](int d, const Copy& c) {
    Slot s;
    s.loc = mi.loc;
    s.in.op = Op::kMov;
    s.in.d = static_cast<std::uint8_t>(d);
    if (c.src_reg >= 0)
      s.in.a = static_cast<std::uint8_t>(c.src_reg);
    else if (c.src.form == Operand::Form::kImm)
      s.in.ak = Kind::kImm, s.in.imm = c.src.imm, s.reloc = c.src.reloc;
    else
      s.in.ak = Kind::kSpecial, s.in.a = static_cast<std::uint8_t>(c.src.special);
    out.push_back(s);
  };
  auto xor3 = [&](int x, int y) {
    for (auto [d, a, b] : {std::tuple{x, x, y}, std::tuple{y, y, x}, std::tuple{x, x, y}}) {
      Slot s;
      s.loc = mi.loc;
      s.in.op = Op::kXor;
      s.in.d = static_cast<std::uint8_t>(d);
      s.in.a = static_cast<std::uint8_t>(a);
      s.in.b = static_cast<std::uint8_t>(b);
      out.push_back(s);
    }
  };
  while (!todo.empty()) {
    bool progress = false;
    for (std::size_t i = 0; i < todo.size(); ++i) {
      const int d = todo[i].dst;
      const bool read_later = std::any_of(todo.begin(), todo.end(), [&](const Copy& c) { return c.src_reg == d; });
      if (!read_later) {
        mov(d, todo[i]);
        todo.erase(todo.begin() + static_cast<long>(i));
        progress = true;
        break;
      }
    }
    if (progress) continue;
    // Only register cycles remain: swap one pair into place.
    Copy c = todo.front();
    todo.erase(todo.begin());
    xor3(c.dst, c.src_reg);
    for (Copy& o : todo)
      if (o.src_reg == c.dst) o.src_reg = c.src_reg;
    // The swap may complete another copy (a two-value cycle leaves "x <- x"): drop it, or it
    // would count as a cycle and the xor swap of a register with itself zeroes it.
    std::erase_if(todo, [](const Copy& o) { return o.src_reg == o.dst; });
  }
}

// A physical block before its targets are resolved.
struct Chunk {
  std::string label;
  std::vector<Slot> slots;
  Slot term;
  int target_block = -1, else_block = -1;  // targets as lowering block ids; -1 with br: the next chunk
};

// Every block's slots, split into chunks that keep the block rules (lower.h) and the machine's
// instructions per block; first_chunk[block] is where each block starts.
std::vector<Chunk> split_blocks(const Function& function, const std::vector<int>& color, const MachineConfig& config,
                                std::vector<int>& first_chunk) {
  std::vector<Chunk> chunks;
  first_chunk.assign(function.blocks.size(), -1);
  for (int m : function.layout) {
    const Block& block = function.blocks[m];
    std::vector<Slot> seq;
    for (const Instruction& mi : block.code) {
      if (mi.parallel_copy)
        sequentialize(mi, color, seq);
      else {
        Slot s = to_slot(mi, color);
        if (s.in.op == Op::kMov && s.in.ak == Kind::kReg && s.in.a == s.in.d) continue;  // coalesced
        seq.push_back(s);
      }
    }
    first_chunk[m] = static_cast<int>(chunks.size());
    int part = 0;
    auto open = [&]() {
      chunks.push_back(Chunk{block.label + (part ? "." + std::to_string(part) : ""), {}, {}, -1, -1});
      ++part;
    };
    open();
    int loads = 0, writes = 0;
    std::uint32_t tainted = 0;  // registers holding a value loaded in this chunk
    for (const Slot& s : seq) {
      const Unit u = op_info(s.in.op).unit;
      const bool reads = u == kUnitLoad || u == kUnitAtomic, writes_mem = u == kUnitStore || u == kUnitAtomic;
      const bool addr_tainted = (tainted >> s.in.a) & 1;
      const int at = static_cast<int>(chunks.back().slots.size());
      const bool fits = at < config.block_instructions &&
                        !(reads && (writes > 0 || loads >= kMaxLoadsPerBlock || addr_tainted)) &&
                        !(writes_mem && writes >= kMaxWritesPerBlock);
      if (!fits) {
        Slot br;
        br.in.op = Op::kBr;
        chunks.back().term = br;  // target: the next chunk
        open();
        loads = writes = 0;
        tainted = 0;
      }
      if (u == kUnitMul || writes_mem)  // the multiplier and the memory write are in the last slot only
        while (static_cast<int>(chunks.back().slots.size()) < config.block_instructions - 1)
          chunks.back().slots.push_back(Slot{});
      chunks.back().slots.push_back(s);
      loads += reads;
      writes += writes_mem;
      const Format f = op_info(s.in.op).format;
      const bool has_d = f == kFmtDA || f == kFmtDAB || f == kFmtDABC || f == kFmtLoad || f == kFmtAtom ||
                         f == kFmtCas || f == kFmtShfl;
      if (has_d && s.in.d != 0) {
        bool t = reads;
        if (s.in.ak == Kind::kReg) t |= (tainted >> s.in.a) & 1;
        if (s.in.bk == Kind::kReg) t |= (tainted >> s.in.b) & 1;
        if (f == kFmtDABC) t |= (tainted >> s.in.c) & 1;
        tainted = t ? (tainted | (1u << s.in.d)) : (tainted & ~(1u << s.in.d));
      }
    }
    const Terminator& t = block.term;
    Slot ts;
    ts.loc = t.loc;
    ts.in.op = t.op;
    if (t.op == Op::kBrc) ts.in.a = t.condition >= 0 ? static_cast<std::uint8_t>(color[t.condition]) : 0;
    chunks.back().term = ts;
    chunks.back().target_block = t.target;
    chunks.back().else_block = t.else_target;
  }
  return chunks;
}

}  // namespace

sdk::Expected<std::unique_ptr<Program>> emit_program(const Function& function, const Registers& registers,
                                                     const sdk::KernelIR& kernel, const sdk::LaunchShape& shape,
                                                     const MachineConfig& config, int shared_words,
                                                     const Diagnostics& diag) {
  std::vector<int> first_chunk;
  const std::vector<Chunk> chunks = split_blocks(function, registers.color, config, first_chunk);
  // Resolve targets to chunk indices.
  const int nc = static_cast<int>(chunks.size());
  std::vector<int> target(nc), else_target(nc, -1);
  for (int i = 0; i < nc; ++i) {
    const Op op = chunks[i].term.in.op;
    if (op == Op::kExit)
      target[i] = -1;
    else if (chunks[i].target_block < 0)
      target[i] = i + 1;
    else
      target[i] = first_chunk[chunks[i].target_block];
    if (op == Op::kBrc) else_target[i] = first_chunk[chunks[i].else_block];
  }
  // Forward empty blocks that only branch on (never the entry).
  auto final_of = [&](int i) {
    for (int hops = 0;
         hops <= nc && i > 0 && chunks[i].slots.empty() && chunks[i].term.in.op == Op::kBr && target[i] != i; ++hops)
      i = target[i];
    return i;
  };
  std::vector<int> index(nc, -1);
  int kept = 0;
  for (int i = 0; i < nc; ++i)
    if (final_of(i) == i) index[i] = kept++;
  auto prog = std::make_unique<Program>();
  for (int i = 0; i < nc; ++i) {
    if (index[i] < 0) continue;
    MachineBlock b;
    b.label = chunks[i].label;
    b.slots = chunks[i].slots;
    b.term = chunks[i].term;
    const Op op = b.term.in.op;
    if (op == Op::kBr || op == Op::kBar) b.term.in.imm = static_cast<std::uint32_t>(index[final_of(target[i])]);
    if (op == Op::kBrc)
      b.term.in.imm = static_cast<std::uint32_t>(index[final_of(target[i])]) |
                      (static_cast<std::uint32_t>(index[final_of(else_target[i])]) << 16);
    prog->blocks.push_back(std::move(b));
  }
  if (static_cast<int>(prog->blocks.size()) > config.rom_blocks)
    return diag.limit("the program", static_cast<long>(prog->blocks.size()), config.rom_blocks,
                      "ROM blocks (of " + std::to_string(config.block_instructions) + " instructions + a terminator)",
                      kRomLimitHint);
  prog->kernel_name = kernel.name;
  prog->source_path = kernel.source_path;
  for (const sdk::KernelParam& p : kernel.params)
    prog->params.push_back({p.name, p.kind == sdk::KernelParam::Kind::kPointer});
  prog->shape = shape;
  prog->config = config;
  prog->shared_words_used = shared_words;
  prog->registers_used = registers.highest;
  return prog;
}

}  // namespace qgpu::simt::lower
