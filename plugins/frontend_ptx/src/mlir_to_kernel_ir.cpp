// Stage 4 of the frontend: MLIR (llvm + nvvm + cf, after the cleanup pipeline) -> KernelIR, one kernel
// at a time. Each MLIR op becomes one KernelIR instruction (the table in docs/FRONTEND.md; a 64-bit
// shift by a register also zero-extends its amount); pointer casts and `extractvalue [0]` are
// transparent; the `__qgpu_ptx_*` helper calls (mlir_conventions.h) become the opcodes they stand for.
#include "mlir_to_kernel_ir.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir_conventions.h"

namespace qgpu::ptx {
namespace {

namespace LLVM = mlir::LLVM;
namespace NVVM = mlir::NVVM;
using mlir::Value;

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
    // cf.cond_br's canonicalization turns a branch to one block with different arguments into
    // arith.select (two sides of an if that end in the same block once their atomics are merged).
    if (auto sel = llvm::dyn_cast<mlir::arith::SelectOp>(op)) {
      if (!sel.getCondition().getType().isInteger(1))
        return fail(op, "KernelIR conversion: arith.select on a vector condition");
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
    if (name == "syncwarp") {
      sdk::Instr in;
      in.imm = 1;  // a CUDA-warp barrier; operands[0] = the member mask
      return add(op, out, Opcode::kBarrier, args, in);
    }
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

}  // namespace

sdk::Expected<sdk::KernelIR> convert_to_kernel_ir(mlir::ModuleOp module, LLVM::LLVMFuncOp fn, const Entry& entry,
                                                  const std::string& loc_path, bool debug, int main_file) {
  KernelConverter converter(module, entry, loc_path, debug, main_file);
  return converter.convert(fn);
}

}  // namespace qgpu::ptx
