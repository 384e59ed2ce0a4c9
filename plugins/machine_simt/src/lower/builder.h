// Appends instructions over virtual registers to the current block of a Function: the one way
// instruction selection and the expansions emit code. compute() and multiply_add() fold plain
// immediates and drop identities, so expansions can be written without caring which operands
// are constant.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lower/ir.h"

namespace qgpu::simt::lower {

class Builder {
 public:
  explicit Builder(Function& function) : function_(function) {}

  int new_vreg() { return function_.vregs++; }
  int new_block(std::string label);

  // The KernelIR block being lowered: its label names the machine blocks split from it, and
  // split_block() appends them to `chain` (the machine blocks it becomes, in order).
  void enter(std::vector<int>* chain, std::string label) {
    chain_ = chain;
    chain_label_ = std::move(label);
  }
  // A new machine block in the current KernelIR block's chain, labelled "<label>.<suffix>".
  int split_block(const std::string& suffix);

  int current() const { return current_; }
  void set_current(int block) { current_ = block; }
  // The source location given to every instruction appended from now on.
  void set_loc(sdk::IrLoc loc) { loc_ = loc; }
  sdk::IrLoc loc() const { return loc_; }

  void append(Instruction instruction);
  void terminate(int block, Terminator term) { function_.blocks[block].term = term; }
  void terminate(Terminator term) { terminate(current_, term); }

  // dest <- op(a, b, c) into an existing or (dest < 0) a new virtual register; returns dest.
  int emit_into(int dest, Op op, Operand a, Operand b = {}, Operand c = {});
  int emit(Op op, Operand a, Operand b = {}, Operand c = {}) { return emit_into(-1, op, a, b, c); }

  // Like emit() but folds when both operands are plain immediates, and drops identities (x + 0,
  // x & -1, x * 1, x << 0, ...) that the expansions produce with constant operands.
  Operand compute(Op op, Operand a, Operand b = {});
  // a * b + c, folded where the operands allow.
  Operand multiply_add(Operand a, Operand b, Operand c);
  // a * b; a shift for a power-of-two constant.
  int multiply(Operand a, Operand b);
  // A register operand (r0 for a plain 0).
  Operand in_register(Operand m);

 private:
  Function& function_;
  std::vector<int>* chain_ = nullptr;
  std::string chain_label_;
  int current_ = 0;
  sdk::IrLoc loc_;
};

}  // namespace qgpu::simt::lower
