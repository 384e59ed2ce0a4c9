// KernelIR names, structural verifier and text dump (see kernel_ir.h).
#include "qgpu/sdk/kernel_ir.h"

#include <string>
#include <vector>

namespace qgpu::sdk {

int ir_type_bits(IrType type) {
  switch (type) {
    case IrType::kVoid: return 0;
    case IrType::kI1: return 1;
    case IrType::kI8: return 8;
    case IrType::kI16: return 16;
    case IrType::kI32: return 32;
    case IrType::kI64: return 64;
  }
  return 0;
}

std::string_view ir_type_name(IrType type) {
  switch (type) {
    case IrType::kVoid: return "void";
    case IrType::kI1: return "i1";
    case IrType::kI8: return "i8";
    case IrType::kI16: return "i16";
    case IrType::kI32: return "i32";
    case IrType::kI64: return "i64";
  }
  return "?";
}

std::string_view special_reg_name(SpecialReg reg) {
  switch (reg) {
    case SpecialReg::kTidX: return "tid.x";
    case SpecialReg::kTidY: return "tid.y";
    case SpecialReg::kTidZ: return "tid.z";
    case SpecialReg::kNtidX: return "ntid.x";
    case SpecialReg::kNtidY: return "ntid.y";
    case SpecialReg::kNtidZ: return "ntid.z";
    case SpecialReg::kCtaidX: return "ctaid.x";
    case SpecialReg::kCtaidY: return "ctaid.y";
    case SpecialReg::kCtaidZ: return "ctaid.z";
    case SpecialReg::kNctaidX: return "nctaid.x";
    case SpecialReg::kNctaidY: return "nctaid.y";
    case SpecialReg::kNctaidZ: return "nctaid.z";
    case SpecialReg::kLaneId: return "laneid";
    case SpecialReg::kWarpSize: return "warpsize";
  }
  return "?";
}

std::string_view cmp_pred_name(CmpPred pred) {
  switch (pred) {
    case CmpPred::kEq: return "eq";
    case CmpPred::kNe: return "ne";
    case CmpPred::kSlt: return "slt";
    case CmpPred::kSle: return "sle";
    case CmpPred::kSgt: return "sgt";
    case CmpPred::kSge: return "sge";
    case CmpPred::kUlt: return "ult";
    case CmpPred::kUle: return "ule";
    case CmpPred::kUgt: return "ugt";
    case CmpPred::kUge: return "uge";
  }
  return "?";
}

std::string_view atomic_op_name(AtomicOp op) {
  switch (op) {
    case AtomicOp::kAdd: return "add";
    case AtomicOp::kSMin: return "smin";
    case AtomicOp::kSMax: return "smax";
    case AtomicOp::kUMin: return "umin";
    case AtomicOp::kUMax: return "umax";
    case AtomicOp::kExch: return "exch";
    case AtomicOp::kAnd: return "and";
    case AtomicOp::kOr: return "or";
    case AtomicOp::kXor: return "xor";
    case AtomicOp::kInc: return "inc";
    case AtomicOp::kDec: return "dec";
    case AtomicOp::kCas: return "cas";
  }
  return "?";
}

namespace {

std::string_view shfl_mode_name(ShflMode mode) {
  switch (mode) {
    case ShflMode::kIdx: return "idx";
    case ShflMode::kUp: return "up";
    case ShflMode::kDown: return "down";
    case ShflMode::kBfly: return "bfly";
  }
  return "?";
}

std::string_view vote_mode_name(VoteMode mode) {
  switch (mode) {
    case VoteMode::kAll: return "all";
    case VoteMode::kAny: return "any";
    case VoteMode::kUni: return "uni";
    case VoteMode::kBallot: return "ballot";
  }
  return "?";
}

std::string_view space_name(AddressSpace space) {
  switch (space) {
    case AddressSpace::kGlobal: return "global";
    case AddressSpace::kShared: return "shared";
    case AddressSpace::kGeneric: return "generic";
  }
  return "?";
}

}  // namespace

std::string_view opcode_name(Opcode op) {
  switch (op) {
    case Opcode::kConst: return "const";
    case Opcode::kParam: return "param";
    case Opcode::kSpecial: return "special";
    case Opcode::kSharedAddr: return "shared_addr";
    case Opcode::kAdd: return "add";
    case Opcode::kSub: return "sub";
    case Opcode::kMul: return "mul";
    case Opcode::kMulHiS: return "mulhi_s";
    case Opcode::kMulHiU: return "mulhi_u";
    case Opcode::kSDiv: return "sdiv";
    case Opcode::kUDiv: return "udiv";
    case Opcode::kSRem: return "srem";
    case Opcode::kURem: return "urem";
    case Opcode::kAnd: return "and";
    case Opcode::kOr: return "or";
    case Opcode::kXor: return "xor";
    case Opcode::kNot: return "not";
    case Opcode::kNeg: return "neg";
    case Opcode::kShl: return "shl";
    case Opcode::kLShr: return "lshr";
    case Opcode::kAShr: return "ashr";
    case Opcode::kSMin: return "smin";
    case Opcode::kSMax: return "smax";
    case Opcode::kUMin: return "umin";
    case Opcode::kUMax: return "umax";
    case Opcode::kAbs: return "abs";
    case Opcode::kPopc: return "popc";
    case Opcode::kClz: return "clz";
    case Opcode::kBrev: return "brev";
    case Opcode::kICmp: return "icmp";
    case Opcode::kSelect: return "select";
    case Opcode::kZExt: return "zext";
    case Opcode::kSExt: return "sext";
    case Opcode::kTrunc: return "trunc";
    case Opcode::kLoad: return "load";
    case Opcode::kStore: return "store";
    case Opcode::kAtomic: return "atomic";
    case Opcode::kShfl: return "shfl";
    case Opcode::kShflPred: return "shfl_pred";
    case Opcode::kVote: return "vote";
    case Opcode::kBarrier: return "barrier";
    case Opcode::kBr: return "br";
    case Opcode::kCondBr: return "cond_br";
    case Opcode::kRet: return "ret";
  }
  return "?";
}

bool is_terminator(Opcode op) {
  return op == Opcode::kBr || op == Opcode::kCondBr || op == Opcode::kRet;
}

namespace {

bool is_int(IrType t) {
  return t != IrType::kVoid;
}
bool is_data_int(IrType t) {
  return t != IrType::kVoid && t != IrType::kI1;
}

// Checks one instruction's operand count and types; "" when it is well formed.
std::string check_instr(const KernelIR& k, const Instr& in, const std::vector<const Instr*>& def_of) {
  auto ty = [&](std::size_t i) { return k.value_types[in.operands[i]]; };
  auto count = [&](std::size_t n) -> std::string {
    if (in.operands.size() == n) return {};
    return "expects " + std::to_string(n) + " operands, has " + std::to_string(in.operands.size());
  };
  auto same_as_result = [&](std::size_t first, std::size_t last) -> std::string {
    for (std::size_t i = first; i <= last; ++i) {
      if (ty(i) != in.type) {
        return "operand " + std::to_string(i) + " is " + std::string(ir_type_name(ty(i))) + ", expected " +
               std::string(ir_type_name(in.type));
      }
    }
    return {};
  };
  const bool has_result = in.result != 0;
  const bool wants_result = !(in.op == Opcode::kStore || in.op == Opcode::kBarrier || is_terminator(in.op));
  if (has_result != wants_result) return wants_result ? "has no result" : "must not have a result";
  if (wants_result && !is_int(in.type)) return "result type must be an integer type";
  if (!in.targets.empty() && in.op != Opcode::kBr && in.op != Opcode::kCondBr) return "has branch targets";
  std::string e;
  switch (in.op) {
    case Opcode::kConst:
    case Opcode::kSpecial:
      if (!(e = count(0)).empty()) return e;
      if (in.op == Opcode::kSpecial && in.type != IrType::kI32) return "special registers are i32";
      return {};
    case Opcode::kParam:
      if (!(e = count(0)).empty()) return e;
      if (in.imm < 0 || static_cast<std::size_t>(in.imm) >= k.params.size()) return "parameter index out of range";
      if (k.params[in.imm].type != in.type) return "type differs from the parameter's";
      return {};
    case Opcode::kSharedAddr:
      if (!(e = count(0)).empty()) return e;
      if (in.imm < 0 || static_cast<std::size_t>(in.imm) >= k.shared.size()) return "shared variable out of range";
      if (in.type != IrType::kI64) return "shared addresses are i64";
      return {};
    case Opcode::kAdd:
    case Opcode::kSub:
    case Opcode::kMul:
    case Opcode::kMulHiS:
    case Opcode::kMulHiU:
    case Opcode::kSDiv:
    case Opcode::kUDiv:
    case Opcode::kSRem:
    case Opcode::kURem:
    case Opcode::kShl:
    case Opcode::kLShr:
    case Opcode::kAShr:
    case Opcode::kSMin:
    case Opcode::kSMax:
    case Opcode::kUMin:
    case Opcode::kUMax:
      if (!(e = count(2)).empty()) return e;
      if (!is_data_int(in.type)) return "needs an i8..i64 type";
      return same_as_result(0, 1);
    case Opcode::kAnd:
    case Opcode::kOr:
    case Opcode::kXor:
      if (!(e = count(2)).empty()) return e;
      return same_as_result(0, 1);
    case Opcode::kNot:
      if (!(e = count(1)).empty()) return e;
      return same_as_result(0, 0);
    case Opcode::kNeg:
    case Opcode::kAbs:
    case Opcode::kBrev:
      if (!(e = count(1)).empty()) return e;
      if (!is_data_int(in.type)) return "needs an i8..i64 type";
      return same_as_result(0, 0);
    case Opcode::kPopc:
    case Opcode::kClz:
      if (!(e = count(1)).empty()) return e;
      if (in.type != IrType::kI32) return "result must be i32";
      if (!is_data_int(ty(0))) return "operand must be i8..i64";
      return {};
    case Opcode::kICmp:
      if (!(e = count(2)).empty()) return e;
      if (in.type != IrType::kI1) return "result must be i1";
      if (ty(0) != ty(1)) return "operands differ in type";
      return {};
    case Opcode::kSelect:
      if (!(e = count(3)).empty()) return e;
      if (ty(0) != IrType::kI1) return "condition must be i1";
      return same_as_result(1, 2);
    case Opcode::kZExt:
    case Opcode::kSExt:
      if (!(e = count(1)).empty()) return e;
      if (ir_type_bits(ty(0)) >= ir_type_bits(in.type)) return "must widen its operand";
      return {};
    case Opcode::kTrunc:
      if (!(e = count(1)).empty()) return e;
      if (ir_type_bits(ty(0)) <= ir_type_bits(in.type)) return "must narrow its operand";
      return {};
    case Opcode::kLoad:
      if (!(e = count(1)).empty()) return e;
      if (ty(0) != IrType::kI64) return "address must be i64";
      if (!is_data_int(in.type)) return "access type must be i8..i64";
      return {};
    case Opcode::kStore:
      if (!(e = count(2)).empty()) return e;
      if (ty(0) != IrType::kI64) return "address must be i64";
      if (!is_data_int(in.type)) return "access type must be i8..i64";
      return ty(1) == in.type ? std::string() : "stored value differs from the access type";
    case Opcode::kAtomic:
      if (!(e = count(in.atomic == AtomicOp::kCas ? 3 : 2)).empty()) return e;
      if (ty(0) != IrType::kI64) return "address must be i64";
      if (!is_data_int(in.type)) return "access type must be i8..i64";
      return same_as_result(1, in.operands.size() - 1);
    case Opcode::kShfl:
      if (!(e = count(4)).empty()) return e;
      if (in.type != IrType::kI32) return "shuffles move i32 values";
      for (std::size_t i = 0; i < 4; ++i) {
        if (ty(i) != IrType::kI32) return "operand " + std::to_string(i) + " must be i32";
      }
      return {};
    case Opcode::kShflPred: {
      if (!(e = count(1)).empty()) return e;
      if (in.type != IrType::kI1) return "result must be i1";
      const Instr* src = def_of[in.operands[0]];
      if (src == nullptr || src->op != Opcode::kShfl) return "operand must be the result of a shfl";
      return {};
    }
    case Opcode::kVote:
      if (!(e = count(2)).empty()) return e;
      if (ty(0) != IrType::kI1 || ty(1) != IrType::kI32) return "operands must be (i1, i32)";
      if (in.type != (in.vote == VoteMode::kBallot ? IrType::kI32 : IrType::kI1)) return "wrong result type";
      return {};
    case Opcode::kBarrier:
      if (in.imm == 0) return count(0);
      if (in.imm != 1) return "imm must be 0 (block barrier) or 1 (CUDA-warp barrier)";
      if (!(e = count(1)).empty()) return e;
      return ty(0) == IrType::kI32 ? std::string() : "the member mask must be i32";
    case Opcode::kRet: return count(0);
    case Opcode::kBr:
      if (!(e = count(0)).empty()) return e;
      return in.targets.size() == 1 ? std::string() : "needs one target";
    case Opcode::kCondBr:
      if (!(e = count(1)).empty()) return e;
      if (ty(0) != IrType::kI1) return "condition must be i1";
      return in.targets.size() == 2 ? std::string() : "needs two targets";
  }
  return "unknown opcode";
}

}  // namespace

Status verify_kernel_ir(const KernelIR& k) {
  const std::string where = k.source_path.empty() ? k.name : k.source_path + ": kernel " + k.name;
  auto fail = [&](const std::string& message) {
    return internal_error("invalid KernelIR (" + where + "): " + message);
  };
  if (k.blocks.empty()) return fail("no blocks");
  if (!k.blocks[0].args.empty()) return fail("the entry block has arguments");
  if (k.value_types.empty() || k.value_types[0] != IrType::kVoid) return fail("value_types[0] must be void");
  const std::size_t n = k.value_types.size();
  // Pass 1: definitions.
  std::vector<const Instr*> def_of(n, nullptr);
  std::vector<char> defined(n, 0);
  auto define = [&](ValueId v, IrType t, const std::string& at) -> std::string {
    if (v == 0 || v >= n) return at + ": value %" + std::to_string(v) + " has no type entry";
    if (defined[v]) return at + ": value %" + std::to_string(v) + " defined twice";
    if (k.value_types[v] != t) return at + ": type of %" + std::to_string(v) + " differs from value_types";
    defined[v] = 1;
    return {};
  };
  for (std::size_t b = 0; b < k.blocks.size(); ++b) {
    const Block& block = k.blocks[b];
    const std::string bname = "^bb" + std::to_string(b);
    for (ValueId a : block.args) {
      if (a == 0 || a >= n) return fail(bname + ": block argument %" + std::to_string(a) + " has no type entry");
      std::string e = define(a, k.value_types[a], bname);
      if (!e.empty()) return fail(e);
      if (k.value_types[a] == IrType::kVoid) return fail(bname + ": void block argument");
    }
    for (const Instr& in : block.instrs) {
      if (in.result == 0) continue;
      std::string e = define(in.result, in.type, bname);
      if (!e.empty()) return fail(e);
      def_of[in.result] = &in;
    }
  }
  // Pass 2: uses, shapes, terminators.
  for (std::size_t b = 0; b < k.blocks.size(); ++b) {
    const Block& block = k.blocks[b];
    const std::string bname = "^bb" + std::to_string(b);
    if (block.instrs.empty() || !is_terminator(block.instrs.back().op))
      return fail(bname + " does not end in a terminator");
    for (std::size_t i = 0; i < block.instrs.size(); ++i) {
      const Instr& in = block.instrs[i];
      const std::string at = bname + " instruction " + std::to_string(i) + " (" + std::string(opcode_name(in.op)) + ")";
      if (is_terminator(in.op) && i + 1 != block.instrs.size())
        return fail(at + ": terminator before the end of the block");
      for (ValueId v : in.operands) {
        if (v == 0 || v >= n || !defined[v]) return fail(at + ": uses undefined value %" + std::to_string(v));
      }
      for (const BranchTarget& t : in.targets) {
        if (t.block >= k.blocks.size()) return fail(at + ": branch to missing block ^bb" + std::to_string(t.block));
        if (t.block == 0) return fail(at + ": branch to the entry block");
        const Block& target = k.blocks[t.block];
        if (t.args.size() != target.args.size()) {
          return fail(at + ": passes " + std::to_string(t.args.size()) + " arguments to ^bb" + std::to_string(t.block) +
                      ", which takes " + std::to_string(target.args.size()));
        }
        for (std::size_t a = 0; a < t.args.size(); ++a) {
          ValueId v = t.args[a];
          if (v == 0 || v >= n || !defined[v]) return fail(at + ": passes undefined value %" + std::to_string(v));
          if (k.value_types[v] != k.value_types[target.args[a]]) {
            return fail(at + ": argument " + std::to_string(a) + " to ^bb" + std::to_string(t.block) +
                        " has the wrong type");
          }
        }
      }
      std::string e = check_instr(k, in, def_of);
      if (!e.empty()) return fail(at + ": " + e);
    }
  }
  return Status::ok();
}

namespace {

std::string value_name(ValueId v) {
  return "%" + std::to_string(v);
}

std::string target_text(const BranchTarget& t) {
  std::string s = "^bb" + std::to_string(t.block);
  if (t.args.empty()) return s;
  s += "(";
  for (std::size_t i = 0; i < t.args.size(); ++i) s += (i ? ", " : "") + value_name(t.args[i]);
  return s + ")";
}

}  // namespace

std::string dump_kernel_ir(const KernelIR& k) {
  std::string out = "kernel " + k.name + "\n";
  for (std::size_t i = 0; i < k.params.size(); ++i) {
    const KernelParam& p = k.params[i];
    out += "  param " + std::to_string(i) + " " + p.name + ": " +
           (p.kind == KernelParam::Kind::kPointer ? "pointer " : "scalar ") + std::string(ir_type_name(p.type)) + "\n";
  }
  for (std::size_t i = 0; i < k.shared.size(); ++i) {
    const SharedVar& s = k.shared[i];
    out += "  shared " + std::to_string(i) + " " + s.name + ": " + std::to_string(s.bytes) + " bytes, align " +
           std::to_string(s.align) + "\n";
  }
  auto type_of = [&](ValueId v) { return v < k.value_types.size() ? ir_type_name(k.value_types[v]) : "?"; };
  for (std::size_t b = 0; b < k.blocks.size(); ++b) {
    const Block& block = k.blocks[b];
    out += "^bb" + std::to_string(b);
    if (!block.args.empty()) {
      out += "(";
      for (std::size_t i = 0; i < block.args.size(); ++i) {
        out += (i ? ", " : "") + value_name(block.args[i]) + ": " + std::string(type_of(block.args[i]));
      }
      out += ")";
    }
    out += ":";
    if (!block.label.empty()) out += "  // " + block.label;
    out += "\n";
    for (const Instr& in : block.instrs) {
      std::string line = "  ";
      if (in.result != 0) line += value_name(in.result) + " = ";
      line += opcode_name(in.op);
      switch (in.op) {
        case Opcode::kICmp: line += "." + std::string(cmp_pred_name(in.pred)); break;
        case Opcode::kLoad:
        case Opcode::kStore: line += "." + std::string(space_name(in.space)); break;
        case Opcode::kAtomic:
          line += "." + std::string(space_name(in.space)) + "." + std::string(atomic_op_name(in.atomic));
          break;
        case Opcode::kShfl: line += "." + std::string(shfl_mode_name(in.shfl)); break;
        case Opcode::kVote: line += "." + std::string(vote_mode_name(in.vote)); break;
        case Opcode::kBarrier:
          if (in.imm == 1) line += ".warp";
          break;
        default: break;
      }
      if (in.type != IrType::kVoid) line += " " + std::string(ir_type_name(in.type));
      std::string args;
      auto add = [&](const std::string& s) { args += (args.empty() ? " " : ", ") + s; };
      switch (in.op) {
        case Opcode::kConst:
        case Opcode::kParam:
        case Opcode::kSharedAddr: add(std::to_string(in.imm)); break;
        case Opcode::kSpecial: add(std::string(special_reg_name(in.special))); break;
        default: break;
      }
      for (ValueId v : in.operands) add(value_name(v));
      for (const BranchTarget& t : in.targets) add(target_text(t));
      line += args;
      if (in.op == Opcode::kZExt || in.op == Opcode::kSExt || in.op == Opcode::kTrunc) {
        if (!in.operands.empty()) line += " from " + std::string(type_of(in.operands[0]));
      }
      out += line + "\n";
    }
  }
  return out;
}

}  // namespace qgpu::sdk
