// The lowering's own IR: machine instructions over virtual registers, grouped in blocks with one
// terminator each. Instruction selection (select.h) builds it from KernelIR; register allocation
// (register_allocation.h) colours its virtual registers; emission (emit.h) turns it into the
// Program's physical blocks. Private to machine_simt's lowering.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "isa.h"
#include "qgpu/sdk/kernel_ir.h"

namespace qgpu::simt::lower {

// An operand before register allocation.
struct Operand {
  enum class Form : std::uint8_t { kNone, kZero, kVReg, kImm, kSpecial };
  Form form = Form::kNone;
  int vreg = -1;
  std::uint32_t imm = 0;
  int reloc = -1;  // >= 0: the immediate is a launch constant (Slot::reloc)
  Special special = Special::kTid;

  static Operand reg(int vreg) { return {Form::kVReg, vreg, 0, -1, Special::kTid}; }
  static Operand zero() { return {Form::kZero, -1, 0, -1, Special::kTid}; }  // r0
  static Operand immediate(std::uint32_t value, int reloc = -1) {
    return {Form::kImm, -1, value, reloc, Special::kTid};
  }
  static Operand special_reg(Special s) { return {Form::kSpecial, -1, 0, -1, s}; }

  bool is_none() const { return form == Form::kNone; }
  bool is_vreg() const { return form == Form::kVReg; }
  bool is_plain_imm() const { return form == Form::kImm && reloc < 0; }
  bool is_reg() const { return form == Form::kVReg || form == Form::kZero; }
};

// A plain immediate.
inline Operand imm(std::uint32_t value) {
  return Operand::immediate(value);
}

// dest <- op(a, b, c), or (parallel_copy) every dest <- src of `copies` at once.
struct Instruction {
  Op op = Op::kNop;
  int dest = -1;  // virtual register, or -1
  Operand a, b, c;
  std::uint8_t flags = 0;
  std::uint32_t offset = 0;  // memory offset
  int reloc = -1;            // >= 0: the offset is a launch constant
  bool parallel_copy = false;
  std::vector<std::pair<int, Operand>> copies;  // dst vreg <- src
  sdk::IrLoc loc;
};

// br/bar to `target`, brc on `condition` (a vreg; -2 for r0) to `target` or `else_target`, or exit.
struct Terminator {
  Op op = Op::kExit;
  int condition = -1;
  int target = -1, else_target = -1;  // block ids
  sdk::IrLoc loc;
};

struct Block {
  std::string label;
  std::vector<Instruction> code;
  Terminator term;
};

struct Function {
  std::vector<Block> blocks;  // by block id
  std::vector<int> layout;    // every block id, in program order (the entry first)
  int vregs = 0;              // virtual registers 0..vregs-1
  int scratch_words = 0;      // shared words after the __shared__ variables (CUDA-warp collectives)
};

}  // namespace qgpu::simt::lower
