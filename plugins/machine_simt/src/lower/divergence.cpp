#include "lower/divergence.h"

#include <algorithm>
#include <cstddef>

namespace qgpu::simt::lower {

using sdk::Opcode;
using sdk::SpecialReg;

std::vector<bool> divergent_blocks(const sdk::KernelIR& kernel, const BlockOrder& order) {
  const std::size_t n = kernel.blocks.size();
  auto successors = [&](std::size_t b) -> const std::vector<sdk::BranchTarget>& {
    return kernel.blocks[b].instrs.back().targets;
  };
  // Post-dominators: pdom[b][s] when every path from b to an exit passes through s.
  std::vector<std::vector<char>> pdom(n, std::vector<char>(n, 1));
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = order.order.rbegin(); it != order.order.rend(); ++it) {
      const std::size_t b = *it;
      std::vector<char> next(n, successors(b).empty() ? 0 : 1);
      for (const sdk::BranchTarget& t : successors(b))
        for (std::size_t s = 0; s < n; ++s) next[s] &= pdom[t.block][s];
      next[b] = 1;
      if (next != pdom[b]) pdom[b] = std::move(next), changed = true;
    }
  }
  std::vector<char> uniform(kernel.value_types.size(), 1);  // optimistic for block arguments
  std::vector<bool> divergent(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t b : order.order)
      for (const sdk::Instr& in : kernel.blocks[b].instrs) {
        if (in.result == 0) continue;
        bool u = true;
        switch (in.op) {
          case Opcode::kConst:
          case Opcode::kParam:
          case Opcode::kSharedAddr:
          case Opcode::kVote: break;
          case Opcode::kSpecial:
            u = in.special != SpecialReg::kTidX && in.special != SpecialReg::kTidY && in.special != SpecialReg::kTidZ &&
                in.special != SpecialReg::kLaneId;
            break;
          case Opcode::kLoad:
          case Opcode::kAtomic:
          case Opcode::kShfl:
          case Opcode::kShflPred: u = false; break;
          default:
            for (sdk::ValueId v : in.operands) u = u && uniform[v];
        }
        uniform[in.result] = u;
      }
    std::fill(divergent.begin(), divergent.end(), false);
    for (std::size_t b : order.order) {
      const sdk::Instr& term = kernel.blocks[b].instrs.back();
      if (term.op != Opcode::kCondBr || uniform[term.operands[0]]) continue;
      // The blocks reachable from the branch before the blocks that post-dominate it (its join).
      std::vector<std::size_t> work;
      for (const sdk::BranchTarget& t : term.targets) work.push_back(t.block);
      while (!work.empty()) {
        const std::size_t s = work.back();
        work.pop_back();
        if (pdom[b][s] || divergent[s]) continue;
        divergent[s] = true;
        for (const sdk::BranchTarget& t : successors(s)) work.push_back(t.block);
      }
    }
    for (std::size_t b : order.order)
      for (const sdk::BranchTarget& t : successors(b))
        for (std::size_t i = 0; i < t.args.size() && i < kernel.blocks[t.block].args.size(); ++i) {
          const sdk::ValueId arg = kernel.blocks[t.block].args[i];
          if (uniform[arg] && (!uniform[t.args[i]] || divergent[b])) uniform[arg] = 0, changed = true;
        }
  }
  return divergent;
}

}  // namespace qgpu::simt::lower
