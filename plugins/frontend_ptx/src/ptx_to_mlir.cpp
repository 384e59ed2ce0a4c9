// Stage 2 of the frontend: parsed PTX -> MLIR (llvm + nvvm + cf dialects). This file holds the module,
// the entries, registers, SSA construction and predication; ptx_instructions.cpp emits the instructions.
//
// SSA construction: every PTX basic block (a label or the point after an unconditional branch starts
// one) becomes an MLIR block taking one argument per PTX register; branches pass the current value of
// every register. The cleanup pipeline (pass_pipeline.cpp) then removes what is not a real merge: the
// canonicalizer's region DCE deletes dead arguments, and qgpu-drop-trivial-block-args replaces an
// argument that receives the same value on every edge (Braun et al.'s trivial phi removal).
// Predicated pure instructions become selects; predicated memory, warp and barrier instructions become
// a conditional branch around them.
//
// LLVM/MLIR are built without exceptions: nothing here throws; errors travel as sdk::Status.
#include "ptx_to_mlir.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "ptx_builder.h"

namespace qgpu::ptx {

namespace NVVM = mlir::NVVM;

std::optional<PtxType> parse_type(const std::string& s) {
  if (s == "pred") return PtxType{1, 'p'};
  if (s.size() < 2) return std::nullopt;
  const char k = s[0];
  if (k != 'u' && k != 's' && k != 'b' && k != 'f') {
    if (s == "bf16" || s == "bf16x2" || s == "tf32" || s == "e4m3" || s == "e5m2") return PtxType{16, 'f'};
    return std::nullopt;
  }
  const std::string digits = s.substr(1);
  if (digits == "8" || digits == "16" || digits == "32" || digits == "64") return PtxType{std::stoi(digits), k};
  if (k == 'f' && digits == "16x2") return PtxType{32, 'f'};
  return std::nullopt;
}

std::string join_opcode(const Statement& s) {
  std::string r;
  for (std::size_t i = 0; i < s.opcode.size(); ++i) r += (i ? "." : "") + s.opcode[i];
  return r;
}

namespace {

// The special registers the builder reads, numbered as ModuleBuilder::special() builds them.
std::optional<std::pair<int, bool>> special_register(const std::string& name) {
  static const std::map<std::string, int> kRegs = {
      {"%tid.x", 0},     {"%tid.y", 1},     {"%tid.z", 2},   {"%ntid.x", 3},  {"%ntid.y", 4},
      {"%ntid.z", 5},    {"%ctaid.x", 6},   {"%ctaid.y", 7}, {"%ctaid.z", 8}, {"%nctaid.x", 9},
      {"%nctaid.y", 10}, {"%nctaid.z", 11}, {"%laneid", 12}, {"WARP_SZ", 13},
  };
  auto it = kRegs.find(name);
  if (it == kRegs.end()) return std::nullopt;
  return std::make_pair(it->second, true);
}

}  // namespace

sdk::Status ModuleBuilder::build(mlir::ModuleOp module) {
  module_ = module;
  b_.setInsertionPointToEnd(module.getBody());
  auto declare_shared = [&](const SharedDecl& s) {
    if (shared_.count(s.name)) return fail(s.loc, "redefinition of shared variable '" + s.name + "'");
    auto type = LLVM::LLVMArrayType::get(mlir::IntegerType::get(&ctx_, 8), s.bytes);
    b_.create<LLVM::GlobalOp>(loc(s.loc), type, /*isConstant=*/false, LLVM::Linkage::Internal, s.name,
                              mlir::Attribute(), s.align, kSharedAs);
    shared_.insert(s.name);
    return true;
  };
  for (const SharedDecl& s : m_.shared) {
    if (!declare_shared(s)) return status_;
  }
  for (const Entry& e : m_.entries) {
    for (const SharedDecl& s : e.shared) {
      if (!declare_shared(s)) return status_;
    }
  }
  for (const Entry& e : m_.entries) {
    if (!build_entry(e)) return status_;
  }
  return sdk::Status::ok();
}

bool ModuleBuilder::fail(SrcLoc at, const std::string& message, sdk::ErrorCode code) {
  if (!status_.is_ok()) return false;
  // CUDA input: point at the source line (ptx_diagnostic adds the generated PTX's place when kept).
  const bool at_cuda_line = in_statement_ && main_file_ >= 0 && last_main_.line > 0;
  status_ = ptx_diagnostic(m_.diag, at, at_cuda_line ? last_main_ : SrcLoc{}, code, message);
  return false;
}

mlir::Location ModuleBuilder::statement_loc(const Statement& s) {
  if (main_file_ >= 0 && s.dbg_file == main_file_) last_main_ = s.dbg_loc;
  if (main_file_ >= 0 && last_main_.line > 0) {
    return mlir::FileLineColLoc::get(&ctx_, main_path_, last_main_.line, last_main_.column);
  }
  return loc(s.loc);
}

Value ModuleBuilder::constant(int bits, std::int64_t v) {
  const std::uint64_t mask = bits == 64 ? ~0ull : ((1ull << bits) - 1);
  auto type = int_type(bits);
  return b_.create<LLVM::ConstantOp>(
      cur_loc_, type, mlir::IntegerAttr::get(type, llvm::APInt(bits, static_cast<std::uint64_t>(v) & mask)));
}

Value ModuleBuilder::fit(Value v, int bits, bool is_signed) {
  const int w = width(v);
  if (w == bits) return v;
  if (auto c = v.getDefiningOp<LLVM::ConstantOp>()) {
    // Resize immediates here: MLIR 16 does not fold llvm.sext/zext/trunc of constants.
    if (auto attr = c.getValue().dyn_cast<mlir::IntegerAttr>()) {
      const llvm::APInt& x = attr.getValue();
      const llvm::APInt y = w > bits ? x.trunc(bits) : (is_signed ? x.sext(bits) : x.zext(bits));
      return constant(bits, static_cast<std::int64_t>(y.getZExtValue()));
    }
  }
  if (w > bits) return b_.create<LLVM::TruncOp>(cur_loc_, int_type(bits), v);
  if (is_signed) return b_.create<LLVM::SExtOp>(cur_loc_, int_type(bits), v);
  return b_.create<LLVM::ZExtOp>(cur_loc_, int_type(bits), v);
}

Value ModuleBuilder::call(const std::string& name, mlir::Type result, llvm::ArrayRef<Value> args) {
  const std::string full = std::string(kCallPrefix) + name;
  auto fn = module_.lookupSymbol<LLVM::LLVMFuncOp>(full);
  if (!fn) {
    mlir::OpBuilder mb(&ctx_);
    mb.setInsertionPointToEnd(module_.getBody());
    llvm::SmallVector<mlir::Type> types;
    for (Value a : args) types.push_back(a.getType());
    fn = mb.create<LLVM::LLVMFuncOp>(mb.getUnknownLoc(), full, LLVM::LLVMFunctionType::get(result, types));
  }
  auto op = b_.create<LLVM::CallOp>(cur_loc_, fn, mlir::ValueRange(args));
  return op.getNumResults() ? op.getResult() : Value();
}

Value ModuleBuilder::special(int which) {
  auto i32 = int_type(32);
  switch (which) {
    case 0: return b_.create<NVVM::ThreadIdXOp>(cur_loc_, i32);
    case 1: return b_.create<NVVM::ThreadIdYOp>(cur_loc_, i32);
    case 2: return b_.create<NVVM::ThreadIdZOp>(cur_loc_, i32);
    case 3: return b_.create<NVVM::BlockDimXOp>(cur_loc_, i32);
    case 4: return b_.create<NVVM::BlockDimYOp>(cur_loc_, i32);
    case 5: return b_.create<NVVM::BlockDimZOp>(cur_loc_, i32);
    case 6: return b_.create<NVVM::BlockIdXOp>(cur_loc_, i32);
    case 7: return b_.create<NVVM::BlockIdYOp>(cur_loc_, i32);
    case 8: return b_.create<NVVM::BlockIdZOp>(cur_loc_, i32);
    case 9: return b_.create<NVVM::GridDimXOp>(cur_loc_, i32);
    case 10: return b_.create<NVVM::GridDimYOp>(cur_loc_, i32);
    case 11: return b_.create<NVVM::GridDimZOp>(cur_loc_, i32);
    case 12: return b_.create<NVVM::LaneIdOp>(cur_loc_, i32);
    default: return b_.create<NVVM::WarpSizeOp>(cur_loc_, i32);
  }
}

Value ModuleBuilder::shared_address(const std::string& name) {
  Value p = b_.create<LLVM::AddressOfOp>(cur_loc_, ptr_type(kSharedAs), name);
  return b_.create<LLVM::PtrToIntOp>(cur_loc_, int_type(64), p);
}

Value ModuleBuilder::read(const Operand& o, int bits, bool is_signed) {
  Value v;
  if (o.kind == Operand::Kind::kImm && o.is_float) {
    fail(o.loc, "unsupported floating-point literal '" + o.name + "'", sdk::ErrorCode::kUnsupported);
    return {};
  } else if (o.kind == Operand::Kind::kImm) {
    v = constant(bits, o.imm);
  } else if (o.kind == Operand::Kind::kReg) {
    if (auto idx = reg_index(o.name)) {
      v = cur_[*idx];
    } else if (auto sp = special_register(o.name)) {
      v = special(sp->first);
    } else if (shared_.count(o.name)) {
      v = shared_address(o.name);
    } else if (float_regs_.count(o.name)) {
      fail(o.loc, "unsupported register type '." + float_regs_[o.name] + "' of '" + o.name + "'",
           sdk::ErrorCode::kUnsupported);
      return {};
    } else if (o.name.starts_with("%")) {
      if (o.name.starts_with("%tid") || o.name.starts_with("%ntid") || o.name.starts_with("%ctaid") ||
          o.name.starts_with("%nctaid") || o.name == "%warpid" || o.name == "%nwarpid" ||
          o.name.starts_with("%clock") || o.name == "%smid" || o.name == "%gridid" || o.name.starts_with("%lanemask") ||
          o.name.starts_with("%pm")) {
        fail(o.loc, "unsupported special register '" + o.name + "'", sdk::ErrorCode::kUnsupported);
      } else {
        fail(o.loc, "undeclared register '" + o.name + "'");
      }
      return {};
    } else {
      fail(o.loc, "unknown symbol '" + o.name + "'");
      return {};
    }
    if (o.negated) {
      if (width(v) != 1) {
        fail(o.loc, "'!' applies to predicates only");
        return {};
      }
      v = b_.create<LLVM::XOrOp>(cur_loc_, v, constant(1, 1));
    }
    v = fit(v, bits, is_signed);
  } else if (o.kind == Operand::Kind::kVector) {
    fail(o.loc, "unsupported vector operand", sdk::ErrorCode::kUnsupported);
    return {};
  } else {
    fail(o.loc, "expected a register or an immediate operand");
    return {};
  }
  return v;
}

bool ModuleBuilder::write(const Operand& o, Value v, bool is_signed) {
  if (o.kind == Operand::Kind::kSink) return true;
  if (o.kind == Operand::Kind::kVector) return fail(o.loc, "unsupported vector operand", sdk::ErrorCode::kUnsupported);
  if (o.kind != Operand::Kind::kReg || o.negated) return fail(o.loc, "expected a destination register");
  auto idx = reg_index(o.name);
  if (!idx) {
    if (special_register(o.name)) return fail(o.loc, "cannot write special register '" + o.name + "'");
    if (float_regs_.count(o.name)) {
      return fail(o.loc, "unsupported register type '." + float_regs_[o.name] + "' of '" + o.name + "'",
                  sdk::ErrorCode::kUnsupported);
    }
    return fail(o.loc, "undeclared register '" + o.name + "'");
  }
  v = fit(v, reg_bits_[*idx], is_signed);
  if (guard_) v = b_.create<LLVM::SelectOp>(cur_loc_, guard_, v, cur_[*idx]);
  cur_[*idx] = v;
  return true;
}

bool ModuleBuilder::write_reg(const std::string& name, SrcLoc at, Value v, bool is_signed) {
  Operand o;
  o.kind = Operand::Kind::kReg;
  o.name = name;
  o.loc = at;
  return write(o, v, is_signed);
}

Value ModuleBuilder::address(const Operand& o) {
  if (o.kind != Operand::Kind::kAddr) {
    fail(o.loc, "expected a memory operand [address]");
    return {};
  }
  Value base;
  if (o.name.empty()) {
    return constant(64, o.imm);
  } else if (auto idx = reg_index(o.name)) {
    base = fit(cur_[*idx], 64, false);  // 32-bit registers hold shared-window addresses
  } else if (shared_.count(o.name)) {
    base = shared_address(o.name);
  } else {
    fail(o.loc, "unknown address base '" + o.name + "'");
    return {};
  }
  if (o.imm != 0) base = b_.create<LLVM::AddOp>(cur_loc_, base, constant(64, o.imm));
  return base;
}

bool ModuleBuilder::build_entry(const Entry& e) {
  entry_ = &e;
  last_main_ = {};
  cur_loc_ = loc(e.loc);
  // Parameters.
  llvm::SmallVector<mlir::Type> arg_types;
  params_.clear();
  for (std::size_t i = 0; i < e.params.size(); ++i) {
    const ParamDecl& p = e.params[i];
    auto t = parse_type(p.type);
    if (!t || t->kind == 'f' || t->kind == 'p' || (t->bits != 32 && t->bits != 64)) {
      return fail(p.loc, "unsupported parameter type '." + p.type + "' (only 32- and 64-bit integers)",
                  sdk::ErrorCode::kUnsupported);
    }
    arg_types.push_back(int_type(t->bits));
    params_[p.name] = static_cast<int>(i);
  }
  b_.setInsertionPointToEnd(module_.getBody());
  auto fn_type = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(&ctx_), arg_types);
  if (module_.lookupSymbol(e.name)) return fail(e.loc, "redefinition of '" + e.name + "'");
  func_ = b_.create<LLVM::LLVMFuncOp>(loc(e.loc), e.name, fn_type);
  func_->setAttr(NVVM::NVVMDialect::getKernelFuncAttrName(), mlir::UnitAttr::get(&ctx_));
  mlir::Block* entry_block = func_.addEntryBlock();

  // Registers referenced by the body, in a stable order.
  reg_ids_.clear();
  float_regs_.clear();
  reg_bits_.clear();
  std::set<std::string> used;
  for (const Statement& s : e.body) {
    if (!s.guard.empty()) used.insert(s.guard);
    for (const Operand& o : s.operands) {
      if ((o.kind == Operand::Kind::kReg || o.kind == Operand::Kind::kAddr || o.kind == Operand::Kind::kPair) &&
          e.regs.count(o.name)) {
        used.insert(o.name);
      }
      if (o.kind == Operand::Kind::kPair && e.regs.count(o.name2)) used.insert(o.name2);
      for (const Operand& x : o.elements)
        if (x.kind == Operand::Kind::kReg && e.regs.count(x.name)) used.insert(x.name);
    }
  }
  for (const std::string& name : used) {
    auto it = e.regs.find(name);
    if (it == e.regs.end()) continue;  // reported where it is used
    auto t = parse_type(it->second.type);
    if (!t) {
      return fail(it->second.loc, "unsupported register type '." + it->second.type + "' for '" + name + "'",
                  sdk::ErrorCode::kUnsupported);
    }
    if (t->kind == 'f') {
      // Reported where an integer instruction touches it; float instructions are rejected by name first.
      float_regs_[name] = it->second.type;
      continue;
    }
    reg_ids_[name] = static_cast<int>(reg_bits_.size());
    reg_bits_.push_back(t->bits);
  }
  const std::size_t nregs = reg_bits_.size();

  // Segments: PTX basic blocks. A label or the point after an unconditional transfer starts one.
  struct Segment {
    std::size_t begin = 0, end = 0;
    mlir::Block* block = nullptr;
  };
  std::vector<Segment> segs(1);
  std::map<std::string, std::size_t> labels;
  for (std::size_t i = 0; i < e.body.size(); ++i) {
    const Statement& s = e.body[i];
    if (s.kind == Statement::Kind::kLabel) {
      segs.back().end = i;
      if (labels.count(s.label)) return fail(s.loc, "duplicate label '" + s.label + "'");
      labels[s.label] = segs.size();
      segs.push_back({i + 1, i + 1, nullptr});
      continue;
    }
    const std::string& op = s.opcode[0];
    if (s.guard.empty() && (op == "bra" || op == "ret" || op == "exit")) {
      segs.back().end = i + 1;
      segs.push_back({i + 1, i + 1, nullptr});
    }
  }
  segs.back().end = e.body.size();
  segs[0].block = entry_block;
  for (std::size_t k = 1; k < segs.size(); ++k) {
    segs[k].block = new mlir::Block();
    func_.getBody().push_back(segs[k].block);
    for (std::size_t r = 0; r < nregs; ++r) segs[k].block->addArgument(int_type(reg_bits_[r]), loc(e.loc));
  }

  // The entry starts with every register at zero (PTX leaves them undefined; zero is one valid choice).
  b_.setInsertionPointToStart(entry_block);
  cur_.assign(nregs, Value());
  for (std::size_t r = 0; r < nregs; ++r) cur_[r] = constant(reg_bits_[r], 0);

  auto branch_args = [&]() { return llvm::SmallVector<Value>(cur_.begin(), cur_.end()); };
  label_blocks_.clear();
  for (auto& [name, k] : labels) label_blocks_[name] = segs[k].block;

  for (std::size_t k = 0; k < segs.size(); ++k) {
    mlir::Block* blk = segs[k].block;
    b_.setInsertionPointToEnd(blk);
    if (k > 0) {
      for (std::size_t r = 0; r < nregs; ++r) cur_[r] = blk->getArgument(r);
    }
    terminated_ = false;
    for (std::size_t i = segs[k].begin; i < segs[k].end; ++i) {
      const Statement& s = e.body[i];
      if (s.kind != Statement::Kind::kInstr) continue;
      cur_loc_ = statement_loc(s);
      in_statement_ = true;
      const bool ok = emit(s);
      in_statement_ = false;
      if (!ok) return false;
    }
    if (!terminated_) {
      cur_loc_ = loc(e.loc);
      if (k + 1 < segs.size()) {
        b_.create<mlir::cf::BranchOp>(cur_loc_, segs[k + 1].block, branch_args());
      } else {
        b_.create<LLVM::ReturnOp>(cur_loc_, mlir::ValueRange{});
      }
    }
  }
  return true;
}

mlir::Block* ModuleBuilder::new_block_after_current() {
  auto* blk = new mlir::Block();
  mlir::Block* current = b_.getInsertionBlock();
  func_.getBody().getBlocks().insert(std::next(mlir::Region::iterator(current)), blk);
  return blk;
}

bool ModuleBuilder::is_pure(const std::string& op) {
  static const std::set<std::string> kPure = {
      "mov", "add", "sub", "mul",  "mad", "div",  "rem",  "and",  "or",   "xor", "not",  "shl", "shr", "min",
      "max", "abs", "neg", "popc", "clz", "brev", "setp", "selp", "slct", "cvt", "cvta", "bfe", "bfi", "bfind"};
  return kPure.count(op) > 0;
}

bool ModuleBuilder::emit(const Statement& s) {
  const std::string& op = s.opcode[0];
  if (s.guard.empty()) return emit_instr(s);
  Operand g;
  g.kind = Operand::Kind::kReg;
  g.name = s.guard;
  g.negated = s.guard_negated;
  g.loc = s.loc;
  auto gidx = reg_index(s.guard);
  if (!gidx || reg_bits_[*gidx] != 1) return fail(s.loc, "guard '" + s.guard + "' is not a predicate register");
  Value guard = read(g, 1, false);
  if (!guard) return false;
  if (op == "bra") return emit_branch(s, guard);
  if (op == "ret" || op == "exit") {
    mlir::Block* ret = new_block_after_current();
    mlir::Block* cont = new_block_after_current();
    b_.create<mlir::cf::CondBranchOp>(cur_loc_, guard, ret, mlir::ValueRange{}, cont, mlir::ValueRange{});
    b_.setInsertionPointToEnd(ret);
    b_.create<LLVM::ReturnOp>(cur_loc_, mlir::ValueRange{});
    b_.setInsertionPointToEnd(cont);
    return true;
  }
  if (is_pure(op)) {
    guard_ = guard;
    const bool ok = emit_instr(s);
    guard_ = Value();
    return ok;
  }
  // Memory, warp and barrier instructions: branch around them; written registers merge in `cont`.
  std::vector<int> written;
  if (op != "st" && op != "red" && op != "bar" && op != "barrier" && !s.operands.empty()) {
    const Operand& d = s.operands[0];
    if (d.kind == Operand::Kind::kReg || d.kind == Operand::Kind::kPair) {
      if (auto i = reg_index(d.name)) written.push_back(*i);
    }
    if (d.kind == Operand::Kind::kPair) {
      if (auto i = reg_index(d.name2)) written.push_back(*i);
    }
    for (const Operand& x : d.elements)  // ld.v2/.v4
      if (x.kind == Operand::Kind::kReg)
        if (auto i = reg_index(x.name)) written.push_back(*i);
  }
  mlir::Block* then = new_block_after_current();
  mlir::Block* cont = new_block_after_current();
  llvm::SmallVector<Value> old;
  for (int r : written) {
    old.push_back(cur_[r]);
    cont->addArgument(int_type(reg_bits_[r]), cur_loc_);
  }
  b_.create<mlir::cf::CondBranchOp>(cur_loc_, guard, then, mlir::ValueRange{}, cont, old);
  b_.setInsertionPointToEnd(then);
  if (!emit_instr(s)) return false;
  llvm::SmallVector<Value> now;
  for (int r : written) now.push_back(cur_[r]);
  b_.create<mlir::cf::BranchOp>(cur_loc_, cont, now);
  b_.setInsertionPointToEnd(cont);
  for (std::size_t i = 0; i < written.size(); ++i) cur_[written[i]] = cont->getArgument(i);
  return true;
}

bool ModuleBuilder::emit_branch(const Statement& s, Value guard) {
  for (std::size_t i = 1; i < s.opcode.size(); ++i) {
    if (s.opcode[i] != "uni") return unsupported(s);
  }
  if (s.operands.size() != 1 || s.operands[0].kind != Operand::Kind::kReg) {
    return fail(s.loc, "'bra' expects one label operand");
  }
  auto it = label_blocks_.find(s.operands[0].name);
  if (it == label_blocks_.end()) return fail(s.operands[0].loc, "unknown label '" + s.operands[0].name + "'");
  llvm::SmallVector<Value> args(cur_.begin(), cur_.end());
  if (!guard) {
    b_.create<mlir::cf::BranchOp>(cur_loc_, it->second, args);
    terminated_ = true;
    return true;
  }
  mlir::Block* cont = new_block_after_current();
  b_.create<mlir::cf::CondBranchOp>(cur_loc_, guard, it->second, args, cont, mlir::ValueRange{});
  b_.setInsertionPointToEnd(cont);
  return true;
}

bool ModuleBuilder::expect_operands(const Statement& s, std::size_t n) {
  if (s.operands.size() == n) return true;
  return fail(s.opcode_loc, "'" + join_opcode(s) + "' expects " + std::to_string(n) + " operands, found " +
                                std::to_string(s.operands.size()));
}

std::optional<PtxType> ModuleBuilder::int_type_suffix(const Statement& s, bool allow_pred) {
  if (s.opcode.size() < 2) return std::nullopt;
  auto t = parse_type(s.opcode.back());
  if (!t || t->kind == 'f' || (t->kind == 'p' && !allow_pred)) return std::nullopt;
  return t;
}

sdk::Status build_mlir(const Module& ptx, const DebugSource& debug, mlir::ModuleOp module) {
  ModuleBuilder builder(*module.getContext(), ptx);
  if (debug.file >= 0) builder.set_debug_source(debug.file, debug.path);
  return builder.build(module);
}

}  // namespace qgpu::ptx
