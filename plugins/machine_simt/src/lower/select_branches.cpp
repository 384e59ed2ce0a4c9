// Instruction selection for terminators, and out-of-SSA: a branch's block arguments become one
// parallel copy into the target's argument registers, in the branching block or, for one arm of
// a conditional branch, in an edge block of its own placed just before the target.
#include <string>

#include "lower/select.h"

namespace qgpu::simt::lower {

using sdk::Status;
using sdk::ValueId;

Status Selector::select_barrier(const sdk::Instr& in) {
  // __syncwarp: a CUDA warp is the whole thread block (blocks of at most 32 threads), so the block
  // barrier synchronises exactly its threads.
  if (in.imm == 1) {
    QGPU_RETURN_IF_ERROR(need(in, 1));
    QGPU_RETURN_IF_ERROR(check_cuda_warp(in, "bar.warp.sync (__syncwarp)", in.operands[0]));
  }
  const int next = builder_.split_block("sync");
  builder_.terminate(Terminator{Op::kBar, -1, next, -1, in.loc});
  builder_.set_current(next);
  return {};
}

Status Selector::select_branch(const sdk::Instr& in) {
  QGPU_RETURN_IF_ERROR(copies_into(in, in.targets[0], builder_.current()));
  builder_.terminate(Terminator{Op::kBr, -1, chains_[in.targets[0].block][0], -1, in.loc});
  return {};
}

Status Selector::select_cond_branch(const sdk::Instr& in) {
  QGPU_RETURN_IF_ERROR(need(in, 1));
  QGPU_ASSIGN_OR_RETURN(const Operand condition, resolved(in, in.operands[0]));
  if (condition.is_plain_imm()) {
    const sdk::BranchTarget& target = in.targets[condition.imm ? 0 : 1];
    QGPU_RETURN_IF_ERROR(copies_into(in, target, builder_.current()));
    builder_.terminate(Terminator{Op::kBr, -1, chains_[target.block][0], -1, in.loc});
    return {};
  }
  const Operand cond = builder_.in_register(condition);
  int dest[2];
  for (int i = 0; i < 2; ++i) {
    const sdk::BranchTarget& target = in.targets[i];
    dest[i] = chains_[target.block][0];
    if (has_live_args(target)) {
      // Copies on this edge only: a block of its own, placed just before its target.
      const int edge = builder_.new_block("edge." + diag_.label(current_ir_) + "." + diag_.label(target.block));
      edges_before_[target.block].push_back(edge);
      const int saved = builder_.current();
      builder_.set_current(edge);
      QGPU_RETURN_IF_ERROR(copies_into(in, target, edge));
      builder_.terminate(edge, Terminator{Op::kBr, -1, dest[i], -1, in.loc});
      builder_.set_current(saved);
      dest[i] = edge;
    }
  }
  builder_.terminate(
      Terminator{Op::kBrc, cond.form == Operand::Form::kZero ? -2 : cond.vreg, dest[0], dest[1], in.loc});
  return {};
}

bool Selector::has_live_args(const sdk::BranchTarget& t) const {
  for (ValueId a : kernel_.blocks[t.block].args)
    if (!dead_args_.count(a)) return true;
  return false;
}

Status Selector::copies_into(const sdk::Instr& in, const sdk::BranchTarget& t, int block) {
  Instruction copy;
  copy.parallel_copy = true;
  for (std::size_t i = 0; i < t.args.size(); ++i) {
    const ValueId dst = kernel_.blocks[t.block].args[i];
    if (dead_args_.count(dst)) continue;
    QGPU_ASSIGN_OR_RETURN(const Operand src, resolved(in, t.args[i]));
    if (src.is_vreg() && src.vreg == values_[dst].vreg && !analysis_.wide[dst]) continue;
    copy.copies.emplace_back(values_[dst].vreg, src);
    if (analysis_.wide[dst]) {
      QGPU_ASSIGN_OR_RETURN(const Operand high, high_word(in, t.args[i]));
      copy.copies.emplace_back(high_[dst].vreg, high);
    }
  }
  if (!copy.copies.empty()) {
    const int saved = builder_.current();
    builder_.set_current(block);
    builder_.append(std::move(copy));
    builder_.set_current(saved);
  }
  return {};
}

}  // namespace qgpu::simt::lower
