// The PTX -> MLIR builder, shared by its two translation units: ptx_to_mlir.cpp (module, entries,
// registers, SSA construction, predication) and ptx_instructions.cpp (one emitter per instruction
// group). Include it from those two files only; build_mlir (ptx_to_mlir.h) is the stage's entry point.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir_conventions.h"
#include "ptx_ast.h"
#include "qgpu/sdk/status.h"

namespace qgpu::ptx {

namespace LLVM = mlir::LLVM;
using mlir::Value;

// A PTX type suffix: .u32 -> {32, 'u'}; .pred -> {1, 'p'}; floats are 'f'.
struct PtxType {
  int bits = 0;
  char kind = 0;  // 'u', 's', 'b', 'p', 'f'
  bool is_signed() const { return kind == 's'; }
};

std::optional<PtxType> parse_type(const std::string& s);

// "ld.global.u32" from {"ld", "global", "u32"}.
std::string join_opcode(const Statement& s);

// Builds one PTX module into an MLIR module; the first error stops it (see build()).
class ModuleBuilder {
 public:
  ModuleBuilder(mlir::MLIRContext& ctx, const Module& m) : ctx_(ctx), m_(m), b_(&ctx) {}

  // Use .loc positions in file #`id` (`path`, the CUDA source) as the locations of what follows them.
  void set_debug_source(int id, std::string path) {
    main_file_ = id;
    main_path_ = std::move(path);
  }

  sdk::Status build(mlir::ModuleOp module);

 private:
  // --- diagnostics and small helpers
  bool fail(SrcLoc at, const std::string& message, sdk::ErrorCode code = sdk::ErrorCode::kParseError);
  bool unsupported(const Statement& s) {
    return fail(s.opcode_loc, "unsupported instruction '" + join_opcode(s) + "'", sdk::ErrorCode::kUnsupported);
  }
  mlir::Location loc(SrcLoc at) { return mlir::FileLineColLoc::get(&ctx_, m_.path, at.line, at.column); }
  // The CUDA position of a statement: its .loc in the main file, else the latest such one in the kernel
  // (lines from headers, e.g. threadIdx's, belong to the call site before them); else its PTX position.
  mlir::Location statement_loc(const Statement& s);
  mlir::IntegerType int_type(int bits) { return mlir::IntegerType::get(&ctx_, bits); }
  int width(Value v) { return v.getType().cast<mlir::IntegerType>().getWidth(); }
  Value constant(int bits, std::int64_t v);
  Value fit(Value v, int bits, bool is_signed);
  mlir::Type ptr_type(unsigned as) { return LLVM::LLVMPointerType::get(&ctx_, as); }

  // Declares (once) an external `__qgpu_ptx_<name>` function and calls it.
  Value call(const std::string& name, mlir::Type result, llvm::ArrayRef<Value> args);

  // --- registers
  std::optional<int> reg_index(const std::string& name) {
    auto it = reg_ids_.find(name);
    if (it == reg_ids_.end()) return std::nullopt;
    return it->second;
  }

  Value special(int which);  // a special register, numbered as special_register() in ptx_to_mlir.cpp
  Value shared_address(const std::string& name);

  // Reads a source operand as a `bits`-wide integer.
  Value read(const Operand& o, int bits, bool is_signed);

  // Writes a destination register; under a pure-instruction guard the old value survives where the guard is false.
  bool write(const Operand& o, Value v, bool is_signed);
  bool write_reg(const std::string& name, SrcLoc at, Value v, bool is_signed);

  // The byte address of a memory operand, as i64.
  Value address(const Operand& o);

  // --- entry, blocks and predication (ptx_to_mlir.cpp)
  bool build_entry(const Entry& e);

  // A fresh block placed after the current one.
  mlir::Block* new_block_after_current();
  static bool is_pure(const std::string& op);
  // One statement: predication around emit_instr.
  bool emit(const Statement& s);
  bool emit_branch(const Statement& s, Value guard);
  bool expect_operands(const Statement& s, std::size_t n);

  // The instruction's type: its last suffix, an integer type or predicate.
  std::optional<PtxType> int_type_suffix(const Statement& s, bool allow_pred);

  // --- instructions (ptx_instructions.cpp)
  // One unpredicated instruction: control flow, barriers and arithmetic here, the rest by group below.
  bool emit_instr(const Statement& s);

  // bfe.{u,s}{32,64} d, a, pos, len and bfi.b{32,64} d, f, b, pos, len with immediate pos/len (what
  // clang emits for shifts-and-masks), as shifts and masks with PTX's clamping folded at compile time.
  bool emit_bitfield(const Statement& s);
  bool emit_setp(const Statement& s);

  // Parses the state space among an instruction's modifiers; "" when absent (generic).
  std::string take_space(const Statement& s, std::vector<std::string>& rest);
  unsigned space_as(const std::string& space);
  bool emit_memory(const Statement& s);
  // ld/st .v2/.v4 of 8- or 16-bit elements: one access per 32 bits of elements (ptx_instructions.cpp).
  bool emit_packed_vector(const PtxType& t, const Operand& data, Value base, bool load, const std::string& space);
  bool emit_atomic(const Statement& s);
  bool emit_shfl(const Statement& s);
  bool emit_vote(const Statement& s);

  mlir::MLIRContext& ctx_;
  const Module& m_;
  mlir::OpBuilder b_;
  mlir::ModuleOp module_;
  LLVM::LLVMFuncOp func_;
  const Entry* entry_ = nullptr;
  std::set<std::string> shared_;
  std::map<std::string, int> params_;
  std::map<std::string, int> reg_ids_;
  std::map<std::string, std::string> float_regs_;
  std::vector<int> reg_bits_;
  std::vector<Value> cur_;
  std::map<std::string, mlir::Block*> label_blocks_;
  Value guard_;
  bool terminated_ = false;
  int main_file_ = -1;
  std::string main_path_;
  SrcLoc last_main_;
  bool in_statement_ = false;
  mlir::Location cur_loc_ = mlir::UnknownLoc::get(&ctx_);
  sdk::Status status_;
};

}  // namespace qgpu::ptx
