// PTX (parsed) -> MLIR (llvm + nvvm + cf dialects) -> passes -> KernelIR.
//
// The only translation unit with MLIR headers. LLVM/MLIR are built without
// exceptions: nothing here throws; errors travel as sdk::Status.
//
// SSA construction: every PTX basic block (a label or the point after an
// unconditional branch starts one) becomes an MLIR block taking one argument
// per PTX register; branches pass the current value of every register. The
// canonicalizer's region DCE then deletes dead arguments, and the
// drop-trivial-block-args pass below replaces an argument that receives the
// same value on every edge (Braun et al.'s trivial phi removal). Predicated
// pure instructions become selects; predicated memory, warp and barrier
// instructions become a conditional branch around them.
//
// PTX semantics that LLVM lacks (clamping shifts, mul.hi, vote.all/any/uni,
// atom.inc/dec, 64-bit popc/clz) are calls to external `__qgpu_ptx_*`
// declarations, which the KernelIR conversion maps back to opcodes.
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "pipeline.h"
#include "ptx_ast.h"

namespace qgpu::ptx {
namespace {

namespace LLVM = mlir::LLVM;
namespace NVVM = mlir::NVVM;
using mlir::Value;

constexpr unsigned kGlobalAs = 1;
constexpr unsigned kSharedAs = 3;
constexpr unsigned kGenericAs = 0;
constexpr const char* kCallPrefix = "__qgpu_ptx_";

// A PTX type suffix: .u32 -> {32, 'u'}; .pred -> {1, 'p'}; floats are 'f'.
struct PtxType {
  int bits = 0;
  char kind = 0;  // 'u', 's', 'b', 'p', 'f'
  bool is_signed() const { return kind == 's'; }
};

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

// ---------------------------------------------------------------- PTX -> MLIR

class ModuleBuilder {
 public:
  ModuleBuilder(mlir::MLIRContext& ctx, const Module& m) : ctx_(ctx), m_(m), b_(&ctx) {}

  // Use .loc positions in file #`id` (`path`, the CUDA source) as the locations of what follows them.
  void set_debug_source(int id, std::string path) {
    main_file_ = id;
    main_path_ = std::move(path);
  }

  sdk::Status build(mlir::ModuleOp module) {
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

 private:
  // --- diagnostics and small helpers
  bool fail(SrcLoc at, const std::string& message, sdk::ErrorCode code = sdk::ErrorCode::kParseError) {
    if (!status_.is_ok()) return false;
    if (in_statement_ && main_file_ >= 0 && last_main_.line > 0) {
      // CUDA input: point at the source line, and say where in the generated PTX.
      status_ = sdk::error_at(format_loc(main_path_, last_main_), code,
                              message + " (generated PTX: " + format_loc(m_.path, at) + ")");
    } else {
      status_ = sdk::error_at(format_loc(m_.path, at), code, message);
    }
    return false;
  }
  bool unsupported(const Statement& s) {
    return fail(s.opcode_loc, "unsupported instruction '" + join_opcode(s) + "'", sdk::ErrorCode::kUnsupported);
  }
  mlir::Location loc(SrcLoc at) { return mlir::FileLineColLoc::get(&ctx_, m_.path, at.line, at.column); }
  // The CUDA position of a statement: its .loc in the main file, else the latest such one in the kernel
  // (lines from headers, e.g. threadIdx's, belong to the call site before them); else its PTX position.
  mlir::Location statement_loc(const Statement& s) {
    if (main_file_ >= 0 && s.dbg_file == main_file_) last_main_ = s.dbg_loc;
    if (main_file_ >= 0 && last_main_.line > 0) {
      return mlir::FileLineColLoc::get(&ctx_, main_path_, last_main_.line, last_main_.column);
    }
    return loc(s.loc);
  }
  mlir::IntegerType int_type(int bits) { return mlir::IntegerType::get(&ctx_, bits); }
  int width(Value v) { return v.getType().cast<mlir::IntegerType>().getWidth(); }
  Value constant(int bits, std::int64_t v) {
    const std::uint64_t mask = bits == 64 ? ~0ull : ((1ull << bits) - 1);
    auto type = int_type(bits);
    return b_.create<LLVM::ConstantOp>(
        cur_loc_, type, mlir::IntegerAttr::get(type, llvm::APInt(bits, static_cast<std::uint64_t>(v) & mask)));
  }
  Value fit(Value v, int bits, bool is_signed) {
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
  mlir::Type ptr_type(unsigned as) { return LLVM::LLVMPointerType::get(&ctx_, as); }

  // Declares (once) an external `__qgpu_ptx_<name>` function and calls it.
  Value call(const std::string& name, mlir::Type result, llvm::ArrayRef<Value> args) {
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

  // --- registers
  std::optional<int> reg_index(const std::string& name) {
    auto it = reg_ids_.find(name);
    if (it == reg_ids_.end()) return std::nullopt;
    return it->second;
  }

  Value special(int which) {
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

  Value shared_address(const std::string& name) {
    Value p = b_.create<LLVM::AddressOfOp>(cur_loc_, ptr_type(kSharedAs), name);
    return b_.create<LLVM::PtrToIntOp>(cur_loc_, int_type(64), p);
  }

  // Reads a source operand as a `bits`-wide integer.
  Value read(const Operand& o, int bits, bool is_signed) {
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
            o.name.starts_with("%clock") || o.name == "%smid" || o.name == "%gridid" ||
            o.name.starts_with("%lanemask") || o.name.starts_with("%pm")) {
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
    } else {
      fail(o.loc, "expected a register or an immediate operand");
      return {};
    }
    return v;
  }

  // Writes a destination register; under a pure-instruction guard the old value survives where the guard is false.
  bool write(const Operand& o, Value v, bool is_signed) {
    if (o.kind == Operand::Kind::kSink) return true;
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
  bool write_reg(const std::string& name, SrcLoc at, Value v, bool is_signed) {
    Operand o;
    o.kind = Operand::Kind::kReg;
    o.name = name;
    o.loc = at;
    return write(o, v, is_signed);
  }

  // The byte address of a memory operand, as i64.
  Value address(const Operand& o) {
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

  // --- entry
  bool build_entry(const Entry& e) {
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

  // A fresh block placed after the current one.
  mlir::Block* new_block_after_current() {
    auto* blk = new mlir::Block();
    mlir::Block* current = b_.getInsertionBlock();
    func_.getBody().getBlocks().insert(std::next(mlir::Region::iterator(current)), blk);
    return blk;
  }

  static bool is_pure(const std::string& op) {
    static const std::set<std::string> kPure = {"mov", "add",  "sub",  "mul",  "mad",  "div", "rem",  "and", "or",
                                                "xor", "not",  "shl",  "shr",  "min",  "max", "abs",  "neg", "popc",
                                                "clz", "brev", "setp", "selp", "slct", "cvt", "cvta", "bfe", "bfi", "bfind"};
    return kPure.count(op) > 0;
  }

  bool emit(const Statement& s) {
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

  bool emit_branch(const Statement& s, Value guard) {
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

  bool expect_operands(const Statement& s, std::size_t n) {
    if (s.operands.size() == n) return true;
    return fail(s.opcode_loc, "'" + join_opcode(s) + "' expects " + std::to_string(n) + " operands, found " +
                                  std::to_string(s.operands.size()));
  }

  // The instruction's type: its last suffix, an integer type or predicate.
  std::optional<PtxType> int_type_suffix(const Statement& s, bool allow_pred) {
    if (s.opcode.size() < 2) return std::nullopt;
    auto t = parse_type(s.opcode.back());
    if (!t || t->kind == 'f' || (t->kind == 'p' && !allow_pred)) return std::nullopt;
    return t;
  }

  bool emit_instr(const Statement& s) {
    const std::string& op = s.opcode[0];
    const std::size_t nmods = s.opcode.size() - 1;
    auto mod = [&](std::size_t i) -> const std::string& { return s.opcode[i + 1]; };

    if (op == "bra") return emit_branch(s, Value());
    if (op == "ret" || op == "exit") {
      if (nmods != 0 || !s.operands.empty()) return unsupported(s);
      b_.create<LLVM::ReturnOp>(cur_loc_, mlir::ValueRange{});
      terminated_ = true;
      return true;
    }
    if (op == "bar" || op == "barrier") {
      // bar.sync 0 / bar.sync 0; barrier.sync.aligned 0 -- one block-wide barrier, no thread count.
      if (nmods < 1 || mod(0) != "sync" || (nmods == 2 && mod(1) != "aligned") || nmods > 2) return unsupported(s);
      if (s.operands.size() != 1 || s.operands[0].kind != Operand::Kind::kImm || s.operands[0].imm != 0) {
        return fail(s.opcode_loc, "unsupported barrier: only '" + join_opcode(s) + " 0' (barrier 0, all threads)",
                    sdk::ErrorCode::kUnsupported);
      }
      b_.create<NVVM::Barrier0Op>(cur_loc_);
      return true;
    }

    if (op == "mov" || op == "cvta") {
      auto t = int_type_suffix(s, op == "mov");
      if (!t) return unsupported(s);
      if (op == "mov" && nmods != 1) return unsupported(s);
      if (op == "cvta") {
        // cvta.to.global / cvta.global / cvta.shared ...: addresses stay byte addresses (identity).
        std::size_t i = 0;
        if (mod(0) == "to") ++i;
        if (nmods != i + 2 || (mod(i) != "global" && mod(i) != "shared") || (t->bits != 64 && t->bits != 32)) {
          return unsupported(s);
        }
      }
      if (!expect_operands(s, 2)) return false;
      Value v = read(s.operands[1], t->bits, t->is_signed());
      return v && write(s.operands[0], v, t->is_signed());
    }

    if (op == "add" || op == "sub" || op == "div" || op == "rem" || op == "min" || op == "max" || op == "and" ||
        op == "or" || op == "xor") {
      const bool logic = op == "and" || op == "or" || op == "xor";
      auto t = int_type_suffix(s, logic);
      if (!t || nmods != 1) return unsupported(s);
      if (logic && t->kind != 'b' && t->kind != 'p') return unsupported(s);
      if ((op == "div" || op == "rem" || op == "min" || op == "max") && t->kind == 'b') return unsupported(s);
      if (!expect_operands(s, 3)) return false;
      Value a = read(s.operands[1], t->bits, t->is_signed());
      if (!a) return false;
      Value c = read(s.operands[2], t->bits, t->is_signed());
      if (!c) return false;
      Value r;
      const bool sg = t->is_signed();
      if (op == "add")
        r = b_.create<LLVM::AddOp>(cur_loc_, a, c);
      else if (op == "sub")
        r = b_.create<LLVM::SubOp>(cur_loc_, a, c);
      else if (op == "div")
        r = sg ? Value(b_.create<LLVM::SDivOp>(cur_loc_, a, c)) : Value(b_.create<LLVM::UDivOp>(cur_loc_, a, c));
      else if (op == "rem")
        r = sg ? Value(b_.create<LLVM::SRemOp>(cur_loc_, a, c)) : Value(b_.create<LLVM::URemOp>(cur_loc_, a, c));
      else if (op == "min")
        r = sg ? Value(b_.create<LLVM::SMinOp>(cur_loc_, a.getType(), a, c))
               : Value(b_.create<LLVM::UMinOp>(cur_loc_, a.getType(), a, c));
      else if (op == "max")
        r = sg ? Value(b_.create<LLVM::SMaxOp>(cur_loc_, a.getType(), a, c))
               : Value(b_.create<LLVM::UMaxOp>(cur_loc_, a.getType(), a, c));
      else if (op == "and")
        r = b_.create<LLVM::AndOp>(cur_loc_, a, c);
      else if (op == "or")
        r = b_.create<LLVM::OrOp>(cur_loc_, a, c);
      else
        r = b_.create<LLVM::XOrOp>(cur_loc_, a, c);
      return write(s.operands[0], r, sg);
    }

    if (op == "not" || op == "neg" || op == "abs" || op == "popc" || op == "clz" || op == "brev") {
      auto t = int_type_suffix(s, op == "not");
      if (!t || nmods != 1) return unsupported(s);
      if ((op == "not" || op == "popc" || op == "clz" || op == "brev") && t->kind != 'b' && t->kind != 'p')
        return unsupported(s);
      if ((op == "neg" || op == "abs") && t->kind != 's') return unsupported(s);
      if (!expect_operands(s, 2)) return false;
      Value a = read(s.operands[1], t->bits, t->is_signed());
      if (!a) return false;
      Value r;
      if (op == "not")
        r = b_.create<LLVM::XOrOp>(cur_loc_, a, constant(t->bits, -1));
      else if (op == "neg")
        r = b_.create<LLVM::SubOp>(cur_loc_, constant(t->bits, 0), a);
      else if (op == "abs")
        r = b_.create<LLVM::AbsOp>(cur_loc_, a.getType(), a, constant(1, 0));
      else if (op == "brev")
        r = b_.create<LLVM::BitReverseOp>(cur_loc_, a.getType(), a);
      else if (t->bits == 32 && op == "popc")
        r = b_.create<LLVM::CtPopOp>(cur_loc_, a.getType(), a);
      else if (t->bits == 32)
        r = b_.create<LLVM::CountLeadingZerosOp>(cur_loc_, a.getType(), a, constant(1, 0));
      else
        r = call(op + "_i" + std::to_string(t->bits), int_type(32), {a});  // PTX: result is .u32
      return write(s.operands[0], r, false);
    }

    if (op == "bfind") {
      // bfind[.shiftamt].{u,s}{32,64} d, a (nvcc's __ffs/__clz idioms): the position of the highest
      // bit that differs from the sign (.u: the highest set bit), or with .shiftamt the distance
      // from it to the top bit; 0xffffffff when there is none. Result .u32.
      auto t = int_type_suffix(s, false);
      const bool shiftamt = nmods == 2 && mod(0) == "shiftamt";
      if (!t || t->kind == 'b' || (nmods != 1 && !shiftamt)) return unsupported(s);
      if (!expect_operands(s, 2)) return false;
      Value a = read(s.operands[1], t->bits, t->is_signed());
      if (!a) return false;
      if (t->kind == 's')  // x ^ (x >> (w-1)) turns the highest non-sign bit into the leading one
        a = b_.create<LLVM::XOrOp>(cur_loc_, a, b_.create<LLVM::AShrOp>(cur_loc_, a, constant(t->bits, t->bits - 1)));
      Value lz = t->bits == 32 ? Value(b_.create<LLVM::CountLeadingZerosOp>(cur_loc_, a.getType(), a, constant(1, 0)))
                               : call("clz_i64", int_type(32), {a});
      Value r;
      if (shiftamt) {
        Value none = b_.create<LLVM::ICmpOp>(cur_loc_, LLVM::ICmpPredicate::eq, a, constant(t->bits, 0));
        r = b_.create<LLVM::SelectOp>(cur_loc_, none, constant(32, -1), lz);
      } else {
        r = b_.create<LLVM::SubOp>(cur_loc_, constant(32, t->bits - 1), lz);  // clz(0) = w gives -1
      }
      return write(s.operands[0], r, false);
    }

    if (op == "shl" || op == "shr") {
      auto t = int_type_suffix(s, false);
      if (!t || nmods != 1) return unsupported(s);
      if (op == "shl" && t->kind != 'b') return unsupported(s);
      if (!expect_operands(s, 3)) return false;
      Value a = read(s.operands[1], t->bits, t->is_signed());
      if (!a) return false;
      const bool arith = op == "shr" && t->kind == 's';
      const std::string kind = op == "shl" ? "shl" : (arith ? "ashr" : "lshr");
      Value r;
      const Operand& amt = s.operands[2];
      if (amt.kind == Operand::Kind::kImm) {
        // PTX clamps the amount: fold out-of-range constants to what PTX gives.
        const std::uint64_t n = static_cast<std::uint64_t>(amt.imm) & 0xffffffffull;
        if (n >= static_cast<std::uint64_t>(t->bits)) {
          r = arith ? Value(b_.create<LLVM::AShrOp>(cur_loc_, a, constant(t->bits, t->bits - 1)))
                    : constant(t->bits, 0);
        } else {
          Value c = constant(t->bits, static_cast<std::int64_t>(n));
          if (kind == "shl")
            r = b_.create<LLVM::ShlOp>(cur_loc_, a, c);
          else if (kind == "lshr")
            r = b_.create<LLVM::LShrOp>(cur_loc_, a, c);
          else
            r = b_.create<LLVM::AShrOp>(cur_loc_, a, c);
        }
      } else {
        Value c = read(amt, 32, false);
        if (!c) return false;
        r = call(kind + "_i" + std::to_string(t->bits), a.getType(), {a, c});
      }
      return write(s.operands[0], r, t->is_signed());
    }

    if (op == "mul" || op == "mad") {
      if (nmods != 2) return unsupported(s);
      const std::string& mode = mod(0);
      auto t = int_type_suffix(s, false);
      if (!t || t->kind == 'b' || (mode != "lo" && mode != "hi" && mode != "wide")) return unsupported(s);
      if (mode == "wide" && t->bits > 32) return unsupported(s);
      if (!expect_operands(s, op == "mul" ? 3 : 4)) return false;
      const bool sg = t->is_signed();
      const int rbits = mode == "wide" ? 2 * t->bits : t->bits;
      Value a = read(s.operands[1], t->bits, sg);
      if (!a) return false;
      Value c = read(s.operands[2], t->bits, sg);
      if (!c) return false;
      Value r;
      if (mode == "wide") {
        r = b_.create<LLVM::MulOp>(cur_loc_, fit(a, rbits, sg), fit(c, rbits, sg));
      } else if (mode == "lo") {
        r = b_.create<LLVM::MulOp>(cur_loc_, a, c);
      } else {
        r = call(std::string("mulhi_") + (sg ? "s" : "u") + "_i" + std::to_string(t->bits), a.getType(), {a, c});
      }
      if (op == "mad") {
        Value d = read(s.operands[3], rbits, sg);
        if (!d) return false;
        r = b_.create<LLVM::AddOp>(cur_loc_, r, d);
      }
      return write(s.operands[0], r, sg);
    }

    if (op == "setp") return emit_setp(s);
    if (op == "bfe" || op == "bfi") return emit_bitfield(s);

    if (op == "selp" || op == "slct") {
      if (op == "selp" && nmods != 1) return unsupported(s);
      if (op == "slct" && (nmods != 2 || mod(1) != "s32")) return unsupported(s);
      auto t = parse_type(mod(0));
      if (!t || t->kind == 'f' || t->kind == 'p') return unsupported(s);
      if (!expect_operands(s, 4)) return false;
      Value a = read(s.operands[1], t->bits, t->is_signed());
      if (!a) return false;
      Value c = read(s.operands[2], t->bits, t->is_signed());
      if (!c) return false;
      Value cond;
      if (op == "selp") {
        cond = read(s.operands[3], 1, false);
      } else {
        Value x = read(s.operands[3], 32, true);
        if (x) cond = b_.create<LLVM::ICmpOp>(cur_loc_, LLVM::ICmpPredicate::sge, x, constant(32, 0));
      }
      if (!cond) return false;
      return write(s.operands[0], b_.create<LLVM::SelectOp>(cur_loc_, cond, a, c), t->is_signed());
    }

    if (op == "cvt") {
      if (nmods != 2) return unsupported(s);  // rounding/saturation modifiers are float or .sat forms
      auto dt = parse_type(mod(0));
      auto st = parse_type(mod(1));
      if (!dt || !st || dt->kind == 'f' || st->kind == 'f' || dt->kind == 'p' || st->kind == 'p') return unsupported(s);
      if (!expect_operands(s, 2)) return false;
      Value a = read(s.operands[1], st->bits, st->is_signed());
      if (!a) return false;
      return write(s.operands[0], fit(a, dt->bits, st->is_signed()), dt->is_signed());
    }

    if (op == "ld" || op == "st") return emit_memory(s);
    if (op == "atom" || op == "red") return emit_atomic(s);
    if (op == "shfl") return emit_shfl(s);
    if (op == "vote") return emit_vote(s);
    return unsupported(s);
  }

  // bfe.{u,s}{32,64} d, a, pos, len and bfi.b{32,64} d, f, b, pos, len with immediate pos/len (what
  // clang emits for shifts-and-masks), as shifts and masks with PTX's clamping folded at compile time.
  bool emit_bitfield(const Statement& s) {
    const bool extract = s.opcode[0] == "bfe";
    auto t = int_type_suffix(s, false);
    if (!t || s.opcode.size() != 2 || (t->bits != 32 && t->bits != 64)) return unsupported(s);
    if (extract ? t->kind == 'b' : t->kind != 'b') return unsupported(s);
    if (!expect_operands(s, extract ? 4 : 5)) return false;
    const Operand& pos_op = s.operands[extract ? 2 : 3];
    const Operand& len_op = s.operands[extract ? 3 : 4];
    if (pos_op.kind != Operand::Kind::kImm || len_op.kind != Operand::Kind::kImm || pos_op.is_float ||
        len_op.is_float) {
      return fail(s.opcode_loc, "unsupported instruction '" + join_opcode(s) + "' with a register position or length",
                  sdk::ErrorCode::kUnsupported);
    }
    const int w = t->bits;
    const std::int64_t pos = pos_op.imm & 0xff, len = len_op.imm & 0xff;
    const std::int64_t n = pos >= w ? 0 : std::min<std::int64_t>(len, w - pos);  // bits actually taken
    auto low_mask = [&](std::int64_t bits) -> std::int64_t {
      return bits >= 64 ? -1 : static_cast<std::int64_t>((1ull << bits) - 1);
    };
    Value a = read(s.operands[1], w, t->is_signed());
    if (!a) return false;
    Value r;
    if (extract && !t->is_signed()) {
      // d = a[pos, pos+n) zero-extended.
      if (n == 0)
        r = constant(w, 0);
      else {
        Value shifted = pos == 0 ? a : Value(b_.create<LLVM::LShrOp>(cur_loc_, a, constant(w, pos)));
        r = n == w ? shifted : Value(b_.create<LLVM::AndOp>(cur_loc_, shifted, constant(w, low_mask(n))));
      }
    } else if (extract) {
      // Sign bit a[min(pos+len-1, msb)]: the field's top bit, or the word's when the field runs off the end.
      if (len == 0)
        return fail(s.opcode_loc, "unsupported instruction '" + join_opcode(s) + "' with length 0",
                    sdk::ErrorCode::kUnsupported);
      if (n == 0) {
        r = b_.create<LLVM::AShrOp>(cur_loc_, a, constant(w, w - 1));
      } else {
        Value up = w - pos - n == 0 ? a : Value(b_.create<LLVM::ShlOp>(cur_loc_, a, constant(w, w - pos - n)));
        r = w - n == 0 ? up : Value(b_.create<LLVM::AShrOp>(cur_loc_, up, constant(w, w - n)));
      }
    } else {
      // d = b with bits [pos, pos+n) replaced by the low n bits of f.
      Value base = read(s.operands[2], w, false);
      if (!base) return false;
      if (n == 0)
        r = base;
      else {
        const std::uint64_t field = static_cast<std::uint64_t>(low_mask(n)) << pos;
        Value f = pos == 0 ? a : Value(b_.create<LLVM::ShlOp>(cur_loc_, a, constant(w, pos)));
        Value fm = b_.create<LLVM::AndOp>(cur_loc_, f, constant(w, static_cast<std::int64_t>(field)));
        Value bm = b_.create<LLVM::AndOp>(cur_loc_, base, constant(w, static_cast<std::int64_t>(~field)));
        r = b_.create<LLVM::OrOp>(cur_loc_, bm, fm);
      }
    }
    return write(s.operands[0], r, t->is_signed());
  }

  bool emit_setp(const Statement& s) {
    // setp.cmp[.boolop].type p[|q], a, b[, c]
    if (s.opcode.size() != 3 && s.opcode.size() != 4) return unsupported(s);
    const std::string& cmp = s.opcode[1];
    const std::string boolop = s.opcode.size() == 4 ? s.opcode[2] : "";
    auto t = parse_type(s.opcode.back());
    if (!t || t->kind == 'f' || t->kind == 'p') return unsupported(s);
    if (!boolop.empty() && boolop != "and" && boolop != "or" && boolop != "xor") return unsupported(s);
    const bool sg = t->is_signed();
    LLVM::ICmpPredicate pred;
    if (cmp == "eq")
      pred = LLVM::ICmpPredicate::eq;
    else if (cmp == "ne")
      pred = LLVM::ICmpPredicate::ne;
    else if (cmp == "lt")
      pred = sg ? LLVM::ICmpPredicate::slt : LLVM::ICmpPredicate::ult;
    else if (cmp == "le")
      pred = sg ? LLVM::ICmpPredicate::sle : LLVM::ICmpPredicate::ule;
    else if (cmp == "gt")
      pred = sg ? LLVM::ICmpPredicate::sgt : LLVM::ICmpPredicate::ugt;
    else if (cmp == "ge")
      pred = sg ? LLVM::ICmpPredicate::sge : LLVM::ICmpPredicate::uge;
    else if (cmp == "lo")
      pred = LLVM::ICmpPredicate::ult;
    else if (cmp == "ls")
      pred = LLVM::ICmpPredicate::ule;
    else if (cmp == "hi")
      pred = LLVM::ICmpPredicate::ugt;
    else if (cmp == "hs")
      pred = LLVM::ICmpPredicate::uge;
    else
      return unsupported(s);
    if (!expect_operands(s, boolop.empty() ? 3 : 4)) return false;
    Value a = read(s.operands[1], t->bits, sg);
    if (!a) return false;
    Value c = read(s.operands[2], t->bits, sg);
    if (!c) return false;
    Value r = b_.create<LLVM::ICmpOp>(cur_loc_, pred, a, c);
    Value nr;
    const Operand& d = s.operands[0];
    if (d.kind == Operand::Kind::kPair) nr = b_.create<LLVM::XOrOp>(cur_loc_, r, constant(1, 1));
    if (!boolop.empty()) {
      Value q = read(s.operands[3], 1, false);
      if (!q) return false;
      auto combine = [&](Value x) -> Value {
        if (boolop == "and") return b_.create<LLVM::AndOp>(cur_loc_, x, q);
        if (boolop == "or") return b_.create<LLVM::OrOp>(cur_loc_, x, q);
        return b_.create<LLVM::XOrOp>(cur_loc_, x, q);
      };
      r = combine(r);
      if (nr) nr = combine(nr);
    }
    if (d.kind == Operand::Kind::kPair) {
      return write_reg(d.name, d.loc, r, false) && write_reg(d.name2, d.loc, nr, false);
    }
    return write(d, r, false);
  }

  // Parses the state space among an instruction's modifiers; "" when absent (generic).
  std::string take_space(const Statement& s, std::vector<std::string>& rest) {
    static const std::set<std::string> kSpaces = {"global", "shared", "param", "local", "const", "generic"};
    static const std::set<std::string> kIgnored = {"weak", "volatile", "relaxed", "acquire", "release", "acq_rel",
                                                   "cta",  "gpu",      "sys",     "ca",      "cg",      "cs",
                                                   "lu",   "cv",       "wb",      "wt",      "nc"};
    std::string space;
    for (std::size_t i = 1; i < s.opcode.size(); ++i) {
      const std::string& m = s.opcode[i];
      if (kSpaces.count(m))
        space = m;
      else if (!kIgnored.count(m))
        rest.push_back(m);
    }
    return space;
  }

  unsigned space_as(const std::string& space) {
    if (space == "global") return kGlobalAs;
    if (space == "shared") return kSharedAs;
    return kGenericAs;
  }

  bool emit_memory(const Statement& s) {
    const bool load = s.opcode[0] == "ld";
    std::vector<std::string> rest;
    const std::string space = take_space(s, rest);
    if (rest.size() != 1) return unsupported(s);  // vectors (.v2/.v4) or unknown modifiers
    auto t = parse_type(rest[0]);
    if (!t || t->kind == 'f' || t->kind == 'p') return unsupported(s);
    if (space == "local" || space == "const" || (space == "param" && !load)) return unsupported(s);
    if (!expect_operands(s, 2)) return false;
    const Operand& addr_op = s.operands[load ? 1 : 0];
    if (space == "param") {
      if (addr_op.kind != Operand::Kind::kAddr) return fail(addr_op.loc, "expected a memory operand [param]");
      auto it = params_.find(addr_op.name);
      if (it == params_.end()) return fail(addr_op.loc, "unknown parameter '" + addr_op.name + "'");
      if (addr_op.imm != 0) {
        return fail(addr_op.loc, "unsupported parameter access at offset " + std::to_string(addr_op.imm),
                    sdk::ErrorCode::kUnsupported);
      }
      Value v = func_.getArgument(it->second);
      return write(s.operands[0], fit(v, t->bits, t->is_signed()), t->is_signed());
    }
    Value addr = address(addr_op);
    if (!addr) return false;
    Value ptr = b_.create<LLVM::IntToPtrOp>(cur_loc_, ptr_type(space_as(space)), addr);
    if (load) {
      Value v = b_.create<LLVM::LoadOp>(cur_loc_, int_type(t->bits), ptr);
      return write(s.operands[0], v, t->is_signed());
    }
    Value v = read(s.operands[1], t->bits, t->is_signed());
    if (!v) return false;
    b_.create<LLVM::StoreOp>(cur_loc_, v, ptr);
    return true;
  }

  bool emit_atomic(const Statement& s) {
    const bool red = s.opcode[0] == "red";
    std::vector<std::string> rest;
    const std::string space = take_space(s, rest);
    if (rest.size() != 2 || (!space.empty() && space != "global" && space != "shared")) return unsupported(s);
    const std::string& aop = rest[0];
    auto t = parse_type(rest[1]);
    if (!t || t->kind == 'f' || t->kind == 'p' || t->bits < 32) return unsupported(s);
    const bool cas = aop == "cas";
    if (red && cas) return unsupported(s);
    const std::size_t base = red ? 0 : 1;
    if (!expect_operands(s, base + (cas ? 3 : 2))) return false;
    Value addr = address(s.operands[base]);
    if (!addr) return false;
    Value ptr = b_.create<LLVM::IntToPtrOp>(cur_loc_, ptr_type(space_as(space)), addr);
    const bool sg = t->is_signed();
    Value v = read(s.operands[base + 1], t->bits, sg);
    if (!v) return false;
    Value r;
    const auto order = LLVM::AtomicOrdering::monotonic;  // PTX atom defaults to .relaxed
    std::optional<LLVM::AtomicBinOp> bin;
    if (aop == "add" && t->kind != 'b')
      bin = LLVM::AtomicBinOp::add;
    else if (aop == "min" && t->kind != 'b')
      bin = sg ? LLVM::AtomicBinOp::min : LLVM::AtomicBinOp::umin;
    else if (aop == "max" && t->kind != 'b')
      bin = sg ? LLVM::AtomicBinOp::max : LLVM::AtomicBinOp::umax;
    else if (aop == "exch" && t->kind == 'b')
      bin = LLVM::AtomicBinOp::xchg;
    else if (aop == "and" && t->kind == 'b')
      bin = LLVM::AtomicBinOp::_and;
    else if (aop == "or" && t->kind == 'b')
      bin = LLVM::AtomicBinOp::_or;
    else if (aop == "xor" && t->kind == 'b')
      bin = LLVM::AtomicBinOp::_xor;
    if (bin) {
      r = b_.create<LLVM::AtomicRMWOp>(cur_loc_, v.getType(), *bin, ptr, v, order);
    } else if (cas && t->kind == 'b') {
      Value n = read(s.operands[base + 2], t->bits, sg);
      if (!n) return false;
      auto st = LLVM::LLVMStructType::getLiteral(&ctx_, {v.getType(), int_type(1)});
      Value pair = b_.create<LLVM::AtomicCmpXchgOp>(cur_loc_, st, ptr, v, n, order, order);
      r = b_.create<LLVM::ExtractValueOp>(cur_loc_, pair, llvm::ArrayRef<std::int64_t>{0});
    } else if ((aop == "inc" || aop == "dec") && t->kind == 'u' && t->bits == 32) {
      r = call("atom_" + aop + "_i32", v.getType(), {ptr, v});
    } else {
      return unsupported(s);
    }
    if (red) return true;
    return write(s.operands[0], r, sg);
  }

  bool emit_shfl(const Statement& s) {
    // shfl.sync.mode.b32 d[|p], a, b, c, membermask
    if (s.opcode.size() != 4 || s.opcode[1] != "sync" || s.opcode[3] != "b32") return unsupported(s);
    const std::string& mode = s.opcode[2];
    NVVM::ShflKind kind;
    if (mode == "idx")
      kind = NVVM::ShflKind::idx;
    else if (mode == "up")
      kind = NVVM::ShflKind::up;
    else if (mode == "down")
      kind = NVVM::ShflKind::down;
    else if (mode == "bfly")
      kind = NVVM::ShflKind::bfly;
    else
      return unsupported(s);
    if (!expect_operands(s, 5)) return false;
    Value vals[4];
    for (int i = 0; i < 4; ++i) {
      vals[i] = read(s.operands[i + 1], 32, false);
      if (!vals[i]) return false;
    }
    const Operand& d = s.operands[0];
    const bool with_pred = d.kind == Operand::Kind::kPair;
    mlir::Type i32 = int_type(32);
    mlir::Type res = with_pred ? mlir::Type(LLVM::LLVMStructType::getLiteral(&ctx_, {i32, int_type(1)})) : i32;
    Value r = b_.create<NVVM::ShflOp>(cur_loc_, res, vals[3], vals[0], vals[1], vals[2], kind,
                                      with_pred ? mlir::UnitAttr::get(&ctx_) : mlir::UnitAttr());
    if (!with_pred) return write(d, r, false);
    Value v = b_.create<LLVM::ExtractValueOp>(cur_loc_, r, llvm::ArrayRef<std::int64_t>{0});
    Value p = b_.create<LLVM::ExtractValueOp>(cur_loc_, r, llvm::ArrayRef<std::int64_t>{1});
    return write_reg(d.name, d.loc, v, false) && write_reg(d.name2, d.loc, p, false);
  }

  bool emit_vote(const Statement& s) {
    // vote.sync.{all,any,uni}.pred d, [!]p, membermask; vote.sync.ballot.b32 d, [!]p, membermask
    if (s.opcode.size() != 4 || s.opcode[1] != "sync") return unsupported(s);
    const std::string& mode = s.opcode[2];
    const bool ballot = mode == "ballot";
    if (ballot ? s.opcode[3] != "b32" : (s.opcode[3] != "pred" || (mode != "all" && mode != "any" && mode != "uni"))) {
      return unsupported(s);
    }
    if (!expect_operands(s, 3)) return false;
    Value p = read(s.operands[1], 1, false);
    if (!p) return false;
    Value mask = read(s.operands[2], 32, false);
    if (!mask) return false;
    Value r = ballot ? Value(b_.create<NVVM::VoteBallotOp>(cur_loc_, int_type(32), mask, p))
                     : call("vote_" + mode, int_type(1), {p, mask});
    return write(s.operands[0], r, false);
  }

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

// ---------------------------------------------------------------- passes

// Replaces a block argument that receives the same value on every incoming edge (or itself, around a loop)
// by that value, and drops it from every branch: the trivial-phi removal of Braun et al. (CC 2013).
struct DropTrivialBlockArgsPass
    : public mlir::PassWrapper<DropTrivialBlockArgsPass, mlir::OperationPass<LLVM::LLVMFuncOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(DropTrivialBlockArgsPass)
  llvm::StringRef getArgument() const final { return "qgpu-drop-trivial-block-args"; }
  llvm::StringRef getDescription() const final { return "Remove block arguments with one incoming value"; }

  void runOnOperation() override {
    mlir::Region& region = getOperation().getBody();
    bool changed = true;
    while (changed) {
      changed = false;
      for (mlir::Block& block : region) {
        if (block.isEntryBlock()) continue;
        for (int i = static_cast<int>(block.getNumArguments()) - 1; i >= 0; --i) {
          mlir::BlockArgument arg = block.getArgument(i);
          Value same;
          bool trivial = true;
          for (mlir::BlockOperand& use : block.getUses()) {
            auto br = llvm::dyn_cast<mlir::BranchOpInterface>(use.getOwner());
            if (!br) {
              trivial = false;
              break;
            }
            Value in = br.getSuccessorOperands(use.getOperandNumber())[i];
            if (!in) {
              trivial = false;
              break;
            }
            if (in == arg || in == same) continue;
            if (same) {
              trivial = false;
              break;
            }
            same = in;
          }
          if (!trivial || !same) continue;
          arg.replaceAllUsesWith(same);
          for (mlir::BlockOperand& use : block.getUses()) {
            auto br = llvm::cast<mlir::BranchOpInterface>(use.getOwner());
            br.getSuccessorOperands(use.getOperandNumber()).erase(i);
          }
          block.eraseArgument(i);
          changed = true;
        }
      }
    }
  }
};

// ---------------------------------------------------------------- MLIR -> KernelIR

class KernelConverter {
 public:
  // `loc_path`: the file KernelIR locations refer to (the PTX, or the CUDA source when `debug`).
  KernelConverter(mlir::ModuleOp module, const Entry& entry, const std::string& loc_path, bool debug, int main_file)
      : module_(module), entry_(entry), path_(loc_path), debug_(debug), main_file_(main_file) {}

  sdk::Expected<sdk::KernelIR> convert(LLVM::LLVMFuncOp fn) {
    k_.name = entry_.name;
    k_.source_path = path_;
    k_.loc = {entry_.loc.line, entry_.loc.column};
    if (debug_) {
      k_.loc = entry_.dbg_file == main_file_ ? sdk::IrLoc{entry_.dbg_loc.line, entry_.dbg_loc.column} : sdk::IrLoc{};
    }
    for (std::size_t i = 0; i < entry_.params.size(); ++i) {
      const ParamDecl& p = entry_.params[i];
      sdk::KernelParam kp;
      const std::string generated = entry_.name + "_param_" + std::to_string(i);
      kp.name = p.name == generated ? "param" + std::to_string(i) : p.name;
      const bool wide = p.type.size() > 1 && p.type.substr(1) == "64";
      kp.kind = wide && p.type[0] != 's' ? sdk::KernelParam::Kind::kPointer : sdk::KernelParam::Kind::kScalar;
      kp.type = wide ? sdk::IrType::kI64 : sdk::IrType::kI32;
      k_.params.push_back(kp);
    }
    k_.value_types.push_back(sdk::IrType::kVoid);
    // Blocks in reverse post-order from the entry (defs before uses along forward edges); unreachable
    // blocks are dropped.
    std::vector<mlir::Block*> order = reverse_post_order(fn.getBody());
    std::uint32_t index = 0;
    for (mlir::Block* b : order) block_ids_[b] = index++;
    for (mlir::Block* bp : order) {
      mlir::Block& block = *bp;
      sdk::Block out;
      if (!block.isEntryBlock()) {
        for (mlir::BlockArgument a : block.getArguments()) {
          auto id = id_of(a);
          if (!id) return status_;
          out.args.push_back(*id);
        }
      } else {
        // The entry block's arguments are the kernel parameters: values defined by kParam.
        for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
          auto id = id_of(fn.getArgument(i));
          if (!id) return status_;
          sdk::Instr in;
          in.op = sdk::Opcode::kParam;
          in.type = k_.value_types[*id];
          in.result = *id;
          in.imm = i;
          in.loc = k_.loc;
          out.instrs.push_back(in);
        }
      }
      for (mlir::Operation& op : block) {
        if (!convert_op(op, out)) return status_;
      }
      k_.blocks.push_back(std::move(out));
    }
    eliminate_dead_code();
    renumber();
    return std::move(k_);
  }

 private:
  bool fail(mlir::Operation& op, const std::string& message) {
    if (status_.is_ok()) {
      status_ = sdk::error_at(format_loc(path_, loc_of(op.getLoc())), sdk::ErrorCode::kInternal, message);
    }
    return false;
  }
  SrcLoc loc_of(mlir::Location loc) {
    if (auto f = loc.dyn_cast<mlir::FileLineColLoc>()) {
      if (f.getFilename() != path_) return {};  // PTX positions when locations are CUDA ones
      return {f.getLine(), f.getColumn()};
    }
    if (auto fused = loc.dyn_cast<mlir::FusedLoc>()) {
      for (mlir::Location l : fused.getLocations()) {
        SrcLoc s = loc_of(l);
        if (s.line) return s;
      }
    }
    return {};
  }

  std::optional<sdk::IrType> ir_type(mlir::Type t) {
    if (auto i = t.dyn_cast<mlir::IntegerType>()) {
      switch (i.getWidth()) {
        case 1: return sdk::IrType::kI1;
        case 8: return sdk::IrType::kI8;
        case 16: return sdk::IrType::kI16;
        case 32: return sdk::IrType::kI32;
        case 64: return sdk::IrType::kI64;
        default: return std::nullopt;
      }
    }
    if (t.isa<LLVM::LLVMPointerType>()) return sdk::IrType::kI64;
    if (auto st = t.dyn_cast<LLVM::LLVMStructType>()) {
      if (!st.getBody().empty()) return ir_type(st.getBody()[0]);  // {value, flag} pairs name their value
    }
    return std::nullopt;
  }

  // The KernelIR value of an MLIR value; pointer casts and `extractvalue [0]` are transparent.
  std::optional<sdk::ValueId> id_of(Value v) {
    if (mlir::Operation* def = v.getDefiningOp()) {
      if (llvm::isa<LLVM::IntToPtrOp, LLVM::PtrToIntOp>(def)) return id_of(def->getOperand(0));
      if (auto ex = llvm::dyn_cast<LLVM::ExtractValueOp>(def)) {
        if (ex.getPosition().size() == 1 && ex.getPosition()[0] == 0) return id_of(ex.getContainer());
      }
    }
    auto it = ids_.find(v);
    if (it != ids_.end()) return it->second;
    auto t = ir_type(v.getType());
    if (!t) {
      std::string text;
      llvm::raw_string_ostream os(text);
      v.getType().print(os);
      status_ = sdk::internal_error("KernelIR conversion: unsupported MLIR type " + os.str());
      return std::nullopt;
    }
    const auto id = static_cast<sdk::ValueId>(k_.value_types.size());
    k_.value_types.push_back(*t);
    ids_[v] = id;
    return id;
  }

  bool add(mlir::Operation& op, sdk::Block& out, sdk::Opcode opcode, llvm::ArrayRef<Value> operands,
           sdk::Instr in = {}) {
    in.op = opcode;
    SrcLoc l = loc_of(op.getLoc());
    in.loc = {l.line, l.column};
    for (Value v : operands) {
      auto id = id_of(v);
      if (!id) return false;
      in.operands.push_back(*id);
    }
    if (op.getNumResults() == 1 && opcode != sdk::Opcode::kStore) {
      auto id = id_of(op.getResult(0));
      if (!id) return false;
      in.result = *id;
      in.type = k_.value_types[*id];
    }
    out.instrs.push_back(std::move(in));
    return true;
  }

  std::optional<sdk::BranchTarget> target(mlir::Block* blk, mlir::OperandRange args) {
    sdk::BranchTarget t;
    t.block = block_ids_[blk];
    for (Value v : args) {
      auto id = id_of(v);
      if (!id) return std::nullopt;
      t.args.push_back(*id);
    }
    return t;
  }

  sdk::AddressSpace space_of(Value ptr) {
    auto pt = ptr.getType().dyn_cast<LLVM::LLVMPointerType>();
    const unsigned as = pt ? pt.getAddressSpace() : 0;
    if (as == kGlobalAs) return sdk::AddressSpace::kGlobal;
    if (as == kSharedAs) return sdk::AddressSpace::kShared;
    return sdk::AddressSpace::kGeneric;
  }

  std::int64_t shared_index(mlir::Operation& op, llvm::StringRef name) {
    auto it = shared_ids_.find(name.str());
    if (it != shared_ids_.end()) return it->second;
    auto g = module_.lookupSymbol<LLVM::GlobalOp>(name);
    sdk::SharedVar sv;
    sv.name = name.str();
    if (g) {
      if (auto arr = g.getGlobalType().dyn_cast<LLVM::LLVMArrayType>()) sv.bytes = arr.getNumElements();
      if (auto a = g.getAlignment()) sv.align = static_cast<std::uint32_t>(*a);
    }
    const auto idx = static_cast<std::int64_t>(k_.shared.size());
    k_.shared.push_back(sv);
    shared_ids_[sv.name] = idx;
    return idx;
  }

  bool convert_op(mlir::Operation& op, sdk::Block& out) {
    using sdk::Opcode;
    if (llvm::isa<LLVM::IntToPtrOp, LLVM::PtrToIntOp>(op)) return true;
    if (auto ex = llvm::dyn_cast<LLVM::ExtractValueOp>(op)) {
      auto pos = ex.getPosition();
      if (pos.size() == 1 && pos[0] == 0) return true;
      if (pos.size() == 1 && pos[0] == 1 && ex.getContainer().getDefiningOp<NVVM::ShflOp>()) {
        return add(op, out, Opcode::kShflPred, {ex.getContainer()});
      }
      return fail(op, "KernelIR conversion: unexpected extractvalue");
    }
    // cf.cond_br's canonicalization materialises known conditions as arith.constant.
    if (llvm::isa<LLVM::ConstantOp, mlir::arith::ConstantOp>(op)) {
      auto attr = op.getAttrOfType<mlir::IntegerAttr>("value");
      if (!attr) return fail(op, "KernelIR conversion: non-integer constant");
      sdk::Instr in;
      const llvm::APInt& v = attr.getValue();
      in.imm = v.getBitWidth() == 1 ? static_cast<std::int64_t>(v.getZExtValue()) : v.getSExtValue();
      return add(op, out, Opcode::kConst, {}, in);
    }
    if (auto a = llvm::dyn_cast<LLVM::AddressOfOp>(op)) {
      sdk::Instr in;
      in.imm = shared_index(op, a.getGlobalName());
      return add(op, out, Opcode::kSharedAddr, {}, in);
    }
    // Special registers.
    {
      std::optional<sdk::SpecialReg> sr;
      if (llvm::isa<NVVM::ThreadIdXOp>(op))
        sr = sdk::SpecialReg::kTidX;
      else if (llvm::isa<NVVM::ThreadIdYOp>(op))
        sr = sdk::SpecialReg::kTidY;
      else if (llvm::isa<NVVM::ThreadIdZOp>(op))
        sr = sdk::SpecialReg::kTidZ;
      else if (llvm::isa<NVVM::BlockDimXOp>(op))
        sr = sdk::SpecialReg::kNtidX;
      else if (llvm::isa<NVVM::BlockDimYOp>(op))
        sr = sdk::SpecialReg::kNtidY;
      else if (llvm::isa<NVVM::BlockDimZOp>(op))
        sr = sdk::SpecialReg::kNtidZ;
      else if (llvm::isa<NVVM::BlockIdXOp>(op))
        sr = sdk::SpecialReg::kCtaidX;
      else if (llvm::isa<NVVM::BlockIdYOp>(op))
        sr = sdk::SpecialReg::kCtaidY;
      else if (llvm::isa<NVVM::BlockIdZOp>(op))
        sr = sdk::SpecialReg::kCtaidZ;
      else if (llvm::isa<NVVM::GridDimXOp>(op))
        sr = sdk::SpecialReg::kNctaidX;
      else if (llvm::isa<NVVM::GridDimYOp>(op))
        sr = sdk::SpecialReg::kNctaidY;
      else if (llvm::isa<NVVM::GridDimZOp>(op))
        sr = sdk::SpecialReg::kNctaidZ;
      else if (llvm::isa<NVVM::LaneIdOp>(op))
        sr = sdk::SpecialReg::kLaneId;
      else if (llvm::isa<NVVM::WarpSizeOp>(op))
        sr = sdk::SpecialReg::kWarpSize;
      if (sr) {
        sdk::Instr in;
        in.special = *sr;
        return add(op, out, Opcode::kSpecial, {}, in);
      }
    }
    // Same-type arithmetic.
    {
      std::optional<Opcode> bin;
      if (llvm::isa<LLVM::AddOp>(op))
        bin = Opcode::kAdd;
      else if (llvm::isa<LLVM::SubOp>(op))
        bin = Opcode::kSub;
      else if (llvm::isa<LLVM::MulOp>(op))
        bin = Opcode::kMul;
      else if (llvm::isa<LLVM::SDivOp>(op))
        bin = Opcode::kSDiv;
      else if (llvm::isa<LLVM::UDivOp>(op))
        bin = Opcode::kUDiv;
      else if (llvm::isa<LLVM::SRemOp>(op))
        bin = Opcode::kSRem;
      else if (llvm::isa<LLVM::URemOp>(op))
        bin = Opcode::kURem;
      else if (llvm::isa<LLVM::AndOp>(op))
        bin = Opcode::kAnd;
      else if (llvm::isa<LLVM::OrOp>(op))
        bin = Opcode::kOr;
      else if (llvm::isa<LLVM::XOrOp>(op))
        bin = Opcode::kXor;
      else if (llvm::isa<LLVM::ShlOp>(op))
        bin = Opcode::kShl;  // built only with in-range constant amounts
      else if (llvm::isa<LLVM::LShrOp>(op))
        bin = Opcode::kLShr;
      else if (llvm::isa<LLVM::AShrOp>(op))
        bin = Opcode::kAShr;
      else if (llvm::isa<LLVM::SMinOp>(op))
        bin = Opcode::kSMin;
      else if (llvm::isa<LLVM::SMaxOp>(op))
        bin = Opcode::kSMax;
      else if (llvm::isa<LLVM::UMinOp>(op))
        bin = Opcode::kUMin;
      else if (llvm::isa<LLVM::UMaxOp>(op))
        bin = Opcode::kUMax;
      if (bin) return add(op, out, *bin, {op.getOperand(0), op.getOperand(1)});
    }
    if (llvm::isa<LLVM::AbsOp>(op)) return add(op, out, Opcode::kAbs, {op.getOperand(0)});
    if (llvm::isa<LLVM::CtPopOp>(op)) return add(op, out, Opcode::kPopc, {op.getOperand(0)});
    if (llvm::isa<LLVM::CountLeadingZerosOp>(op)) return add(op, out, Opcode::kClz, {op.getOperand(0)});
    if (llvm::isa<LLVM::BitReverseOp>(op)) return add(op, out, Opcode::kBrev, {op.getOperand(0)});
    if (llvm::isa<LLVM::ZExtOp>(op)) return add(op, out, Opcode::kZExt, {op.getOperand(0)});
    if (llvm::isa<LLVM::SExtOp>(op)) return add(op, out, Opcode::kSExt, {op.getOperand(0)});
    if (llvm::isa<LLVM::TruncOp>(op)) return add(op, out, Opcode::kTrunc, {op.getOperand(0)});
    if (auto sel = llvm::dyn_cast<LLVM::SelectOp>(op)) {
      return add(op, out, Opcode::kSelect, {sel.getCondition(), sel.getTrueValue(), sel.getFalseValue()});
    }
    if (auto cmp = llvm::dyn_cast<LLVM::ICmpOp>(op)) {
      sdk::Instr in;
      switch (cmp.getPredicate()) {
        case LLVM::ICmpPredicate::eq: in.pred = sdk::CmpPred::kEq; break;
        case LLVM::ICmpPredicate::ne: in.pred = sdk::CmpPred::kNe; break;
        case LLVM::ICmpPredicate::slt: in.pred = sdk::CmpPred::kSlt; break;
        case LLVM::ICmpPredicate::sle: in.pred = sdk::CmpPred::kSle; break;
        case LLVM::ICmpPredicate::sgt: in.pred = sdk::CmpPred::kSgt; break;
        case LLVM::ICmpPredicate::sge: in.pred = sdk::CmpPred::kSge; break;
        case LLVM::ICmpPredicate::ult: in.pred = sdk::CmpPred::kUlt; break;
        case LLVM::ICmpPredicate::ule: in.pred = sdk::CmpPred::kUle; break;
        case LLVM::ICmpPredicate::ugt: in.pred = sdk::CmpPred::kUgt; break;
        case LLVM::ICmpPredicate::uge: in.pred = sdk::CmpPred::kUge; break;
      }
      return add(op, out, Opcode::kICmp, {cmp.getLhs(), cmp.getRhs()}, in);
    }
    if (auto ld = llvm::dyn_cast<LLVM::LoadOp>(op)) {
      sdk::Instr in;
      in.space = space_of(ld.getAddr());
      return add(op, out, Opcode::kLoad, {ld.getAddr()}, in);
    }
    if (auto st = llvm::dyn_cast<LLVM::StoreOp>(op)) {
      sdk::Instr in;
      in.space = space_of(st.getAddr());
      auto t = ir_type(st.getValue().getType());
      if (!t) return fail(op, "KernelIR conversion: unsupported store type");
      in.type = *t;
      return add(op, out, Opcode::kStore, {st.getAddr(), st.getValue()}, in);
    }
    if (auto rmw = llvm::dyn_cast<LLVM::AtomicRMWOp>(op)) {
      sdk::Instr in;
      in.space = space_of(rmw.getPtr());
      switch (rmw.getBinOp()) {
        case LLVM::AtomicBinOp::add: in.atomic = sdk::AtomicOp::kAdd; break;
        case LLVM::AtomicBinOp::min: in.atomic = sdk::AtomicOp::kSMin; break;
        case LLVM::AtomicBinOp::max: in.atomic = sdk::AtomicOp::kSMax; break;
        case LLVM::AtomicBinOp::umin: in.atomic = sdk::AtomicOp::kUMin; break;
        case LLVM::AtomicBinOp::umax: in.atomic = sdk::AtomicOp::kUMax; break;
        case LLVM::AtomicBinOp::xchg: in.atomic = sdk::AtomicOp::kExch; break;
        case LLVM::AtomicBinOp::_and: in.atomic = sdk::AtomicOp::kAnd; break;
        case LLVM::AtomicBinOp::_or: in.atomic = sdk::AtomicOp::kOr; break;
        case LLVM::AtomicBinOp::_xor: in.atomic = sdk::AtomicOp::kXor; break;
        default: return fail(op, "KernelIR conversion: unsupported atomicrmw operation");
      }
      return add(op, out, Opcode::kAtomic, {rmw.getPtr(), rmw.getVal()}, in);
    }
    if (auto cas = llvm::dyn_cast<LLVM::AtomicCmpXchgOp>(op)) {
      sdk::Instr in;
      in.space = space_of(cas.getPtr());
      in.atomic = sdk::AtomicOp::kCas;
      return add(op, out, Opcode::kAtomic, {cas.getPtr(), cas.getCmp(), cas.getVal()}, in);
    }
    if (auto sh = llvm::dyn_cast<NVVM::ShflOp>(op)) {
      sdk::Instr in;
      switch (sh.getKind()) {
        case NVVM::ShflKind::idx: in.shfl = sdk::ShflMode::kIdx; break;
        case NVVM::ShflKind::up: in.shfl = sdk::ShflMode::kUp; break;
        case NVVM::ShflKind::down: in.shfl = sdk::ShflMode::kDown; break;
        case NVVM::ShflKind::bfly: in.shfl = sdk::ShflMode::kBfly; break;
      }
      return add(op, out, Opcode::kShfl, {sh.getVal(), sh.getOffset(), sh.getMaskAndClamp(), sh.getDst()}, in);
    }
    if (auto vb = llvm::dyn_cast<NVVM::VoteBallotOp>(op)) {
      sdk::Instr in;
      in.vote = sdk::VoteMode::kBallot;
      return add(op, out, Opcode::kVote, {vb.getPred(), vb.getMask()}, in);
    }
    if (llvm::isa<NVVM::Barrier0Op>(op)) return add(op, out, Opcode::kBarrier, {});
    if (auto call = llvm::dyn_cast<LLVM::CallOp>(op)) return convert_call(op, call, out);
    if (auto br = llvm::dyn_cast<mlir::cf::BranchOp>(op)) {
      sdk::Instr in;
      auto t = target(br.getDest(), br.getDestOperands());
      if (!t) return false;
      in.targets.push_back(*t);
      return add(op, out, Opcode::kBr, {}, in);
    }
    if (auto cb = llvm::dyn_cast<mlir::cf::CondBranchOp>(op)) {
      sdk::Instr in;
      auto t = target(cb.getTrueDest(), cb.getTrueDestOperands());
      if (!t) return false;
      auto f = target(cb.getFalseDest(), cb.getFalseDestOperands());
      if (!f) return false;
      in.targets = {*t, *f};
      return add(op, out, Opcode::kCondBr, {cb.getCondition()}, in);
    }
    if (llvm::isa<LLVM::ReturnOp>(op)) return add(op, out, Opcode::kRet, {});
    return fail(op, "KernelIR conversion: unexpected operation '" + op.getName().getStringRef().str() + "'");
  }

  bool convert_call(mlir::Operation& op, LLVM::CallOp call, sdk::Block& out) {
    using sdk::Opcode;
    auto callee = call.getCallee();
    if (!callee || !callee->starts_with(kCallPrefix)) return fail(op, "KernelIR conversion: unexpected call");
    const std::string name = callee->substr(std::string(kCallPrefix).size()).str();
    llvm::SmallVector<Value> args(call.getOperands().begin(), call.getOperands().end());
    auto starts = [&](const char* p) { return name.rfind(p, 0) == 0; };
    if (starts("shl_") || starts("lshr_") || starts("ashr_")) {
      // KernelIR shifts take both operands in the result type; PTX's amount is a u32.
      Value amount = args[1];
      sdk::Instr in;
      const Opcode opc = starts("shl_") ? Opcode::kShl : (starts("lshr_") ? Opcode::kLShr : Opcode::kAShr);
      auto value_id = id_of(args[0]);
      auto amount_id = id_of(amount);
      auto result_id = id_of(op.getResult(0));
      if (!value_id || !amount_id || !result_id) return false;
      const sdk::IrType t = k_.value_types[*result_id];
      sdk::ValueId amt = *amount_id;
      if (t == sdk::IrType::kI64) {
        // Zero-extend the 32-bit amount: clamping behaviour is unchanged.
        sdk::Instr ext;
        ext.op = Opcode::kZExt;
        ext.type = sdk::IrType::kI64;
        ext.result = static_cast<sdk::ValueId>(k_.value_types.size());
        k_.value_types.push_back(sdk::IrType::kI64);
        ext.operands = {amt};
        SrcLoc l = loc_of(op.getLoc());
        ext.loc = {l.line, l.column};
        out.instrs.push_back(ext);
        amt = ext.result;
      }
      in.op = opc;
      in.type = t;
      in.result = *result_id;
      in.operands = {*value_id, amt};
      SrcLoc l = loc_of(op.getLoc());
      in.loc = {l.line, l.column};
      out.instrs.push_back(in);
      return true;
    }
    if (starts("mulhi_s_")) return add(op, out, Opcode::kMulHiS, args);
    if (starts("mulhi_u_")) return add(op, out, Opcode::kMulHiU, args);
    if (starts("popc_")) return add(op, out, Opcode::kPopc, args);
    if (starts("clz_")) return add(op, out, Opcode::kClz, args);
    if (starts("vote_")) {
      sdk::Instr in;
      in.vote =
          name == "vote_all" ? sdk::VoteMode::kAll : (name == "vote_any" ? sdk::VoteMode::kAny : sdk::VoteMode::kUni);
      return add(op, out, Opcode::kVote, args, in);
    }
    if (starts("atom_inc_") || starts("atom_dec_")) {
      sdk::Instr in;
      in.space = space_of(args[0]);
      in.atomic = starts("atom_inc_") ? sdk::AtomicOp::kInc : sdk::AtomicOp::kDec;
      return add(op, out, Opcode::kAtomic, args, in);
    }
    return fail(op, "KernelIR conversion: unknown helper '" + name + "'");
  }

  static std::vector<mlir::Block*> reverse_post_order(mlir::Region& region) {
    std::vector<mlir::Block*> post;
    if (region.empty()) return post;
    llvm::DenseSet<mlir::Block*> seen;
    // Iterative DFS: (block, next successor to visit, counting down so the first successor comes first).
    std::vector<std::pair<mlir::Block*, int>> stack;
    mlir::Block* entry = &region.front();
    seen.insert(entry);
    stack.push_back({entry, static_cast<int>(entry->getNumSuccessors()) - 1});
    while (!stack.empty()) {
      auto& [blk, next] = stack.back();
      if (next < 0) {
        post.push_back(blk);
        stack.pop_back();
        continue;
      }
      mlir::Block* succ = blk->getSuccessor(next--);
      if (seen.insert(succ).second) stack.push_back({succ, static_cast<int>(succ->getNumSuccessors()) - 1});
    }
    return {post.rbegin(), post.rend()};
  }

  static bool is_pure(sdk::Opcode op) {
    using sdk::Opcode;
    switch (op) {
      case Opcode::kLoad:
      case Opcode::kStore:
      case Opcode::kAtomic:
      case Opcode::kShfl:
      case Opcode::kVote:
      case Opcode::kBarrier:
      case Opcode::kBr:
      case Opcode::kCondBr:
      case Opcode::kRet: return false;
      default: return true;
    }
  }

  // Removes pure instructions whose results nobody uses (parameters not read, helpers' dead results).
  void eliminate_dead_code() {
    bool changed = true;
    while (changed) {
      changed = false;
      std::vector<int> uses(k_.value_types.size(), 0);
      for (const sdk::Block& b : k_.blocks) {
        for (const sdk::Instr& in : b.instrs) {
          for (sdk::ValueId v : in.operands) ++uses[v];
          for (const sdk::BranchTarget& t : in.targets) {
            for (sdk::ValueId v : t.args) ++uses[v];
          }
        }
      }
      for (sdk::Block& b : k_.blocks) {
        std::vector<sdk::Instr> kept;
        for (sdk::Instr& in : b.instrs) {
          if (in.result != 0 && is_pure(in.op) && uses[in.result] == 0) {
            changed = true;
            continue;
          }
          kept.push_back(std::move(in));
        }
        b.instrs = std::move(kept);
      }
    }
  }

  // Numbers values 1, 2, ... in definition order.
  void renumber() {
    std::vector<sdk::ValueId> map(k_.value_types.size(), 0);
    std::vector<sdk::IrType> types{sdk::IrType::kVoid};
    auto def = [&](sdk::ValueId& v) {
      map[v] = static_cast<sdk::ValueId>(types.size());
      types.push_back(k_.value_types[v]);
      v = map[v];
    };
    for (sdk::Block& b : k_.blocks) {
      for (sdk::ValueId& a : b.args) def(a);
      for (sdk::Instr& in : b.instrs) {
        if (in.result) def(in.result);
      }
    }
    for (sdk::Block& b : k_.blocks) {
      for (sdk::Instr& in : b.instrs) {
        for (sdk::ValueId& v : in.operands) v = map[v];
        for (sdk::BranchTarget& t : in.targets) {
          for (sdk::ValueId& v : t.args) v = map[v];
        }
      }
    }
    k_.value_types = std::move(types);
  }

  mlir::ModuleOp module_;
  const Entry& entry_;
  std::string path_;
  bool debug_ = false;
  int main_file_ = -1;
  sdk::KernelIR k_;
  llvm::DenseMap<Value, sdk::ValueId> ids_;
  llvm::DenseMap<mlir::Block*, std::uint32_t> block_ids_;
  std::map<std::string, std::int64_t> shared_ids_;
  sdk::Status status_;
};

std::string print_module(mlir::ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os);
  return os.str();
}

}  // namespace

sdk::Expected<PipelineResult> compile_ptx(const std::string& text, const std::string& path,
                                          const PipelineOptions& options) {
  auto parsed = parse_ptx(text, path);
  if (!parsed) return parsed.error();
  const Module& m = *parsed;
  if (m.entries.empty()) {
    return sdk::error_at(format_loc(path, {1, 1}), sdk::ErrorCode::kInvalidArgument, "no kernel (.entry) in this file");
  }

  mlir::DialectRegistry registry;
  registry.insert<LLVM::LLVMDialect, NVVM::NVVMDialect, mlir::cf::ControlFlowDialect, mlir::arith::ArithDialect>();
  mlir::MLIRContext ctx(registry, mlir::MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic& d) {
    if (d.getSeverity() == mlir::DiagnosticSeverity::Error && diagnostics.empty()) diagnostics = d.str();
    return mlir::success();
  });

  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(mlir::FileLineColLoc::get(&ctx, path, 1, 1));
  ModuleBuilder builder(ctx, m);
  int main_file = -1;
  if (!options.debug_source.empty()) {
    for (const auto& [id, file] : m.files) {
      std::error_code ec;
      if (std::filesystem::equivalent(file, options.debug_source, ec)) main_file = id;
    }
    if (main_file >= 0) builder.set_debug_source(main_file, options.debug_source);
  }
  QGPU_RETURN_IF_ERROR(builder.build(*module));
  PipelineResult result;
  if (options.keep_parsed_mlir) result.parsed_mlir = print_module(*module);
  if (mlir::failed(mlir::verify(*module))) {
    return sdk::internal_error(path + ": the MLIR built from PTX does not verify: " + diagnostics);
  }
  if (options.run_passes) {
    mlir::PassManager pm(&ctx);
    pm.addPass(mlir::createCanonicalizerPass());
    pm.addNestedPass<LLVM::LLVMFuncOp>(std::make_unique<DropTrivialBlockArgsPass>());
    pm.addPass(mlir::createCanonicalizerPass());
    pm.addPass(mlir::createCSEPass());
    pm.addPass(mlir::createSymbolDCEPass());
    if (mlir::failed(pm.run(*module))) return sdk::internal_error(path + ": MLIR passes failed: " + diagnostics);
  }
  if (options.keep_final_mlir) result.final_mlir = print_module(*module);

  result.module.source_path = path;
  for (const Entry& e : m.entries) {
    auto fn = module->lookupSymbol<LLVM::LLVMFuncOp>(e.name);
    if (!fn) return sdk::internal_error(path + ": kernel '" + e.name + "' vanished during the passes");
    KernelConverter conv(*module, e, main_file >= 0 ? options.debug_source : path, main_file >= 0, main_file);
    auto k = conv.convert(fn);
    if (!k) return k.error();
    QGPU_RETURN_IF_ERROR(sdk::verify_kernel_ir(*k));
    result.module.kernels.push_back(std::move(*k));
  }
  return result;
}

}  // namespace qgpu::ptx
