// Stage 2 of the frontend, continued: one emitter per group of PTX instructions (the mapping table of
// docs/FRONTEND.md). ptx_to_mlir.cpp has already handled predication: these see one unpredicated
// instruction (or run under a select guard, see ModuleBuilder::write) and read and write registers
// through ModuleBuilder::read/write.
//
// PTX semantics that LLVM lacks (clamping shifts by a register, mul.hi, vote.all/any/uni,
// atom.inc/dec, 64-bit popc/clz) are calls to `__qgpu_ptx_*` helpers (mlir_conventions.h).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/Builders.h"
#include "ptx_builder.h"

namespace qgpu::ptx {

namespace NVVM = mlir::NVVM;

bool ModuleBuilder::emit_instr(const Statement& s) {
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
  if (op == "activemask") {
    // activemask.b32 d: the threads of the CUDA warp executing it, i.e. a ballot of true over the whole
    // warp (which also names the lanes that have exited as absent); the machine decides what that is.
    if (nmods != 1 || mod(0) != "b32") return unsupported(s);
    if (!expect_operands(s, 1)) return false;
    Value r = b_.create<NVVM::VoteBallotOp>(cur_loc_, int_type(32), constant(32, -1), constant(1, 1));
    return write(s.operands[0], r, false);
  }
  if (op == "bar" && nmods == 2 && mod(0) == "warp" && mod(1) == "sync") {
    // bar.warp.sync membermask (__syncwarp): a KernelIR barrier over one CUDA warp; the machine decides
    // how its threads synchronise.
    if (!expect_operands(s, 1)) return false;
    Value mask = read(s.operands[0], 32, false);
    if (!mask) return false;
    call("syncwarp", LLVM::LLVMVoidType::get(&ctx_), {mask});
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
        r = arith ? Value(b_.create<LLVM::AShrOp>(cur_loc_, a, constant(t->bits, t->bits - 1))) : constant(t->bits, 0);
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

bool ModuleBuilder::emit_bitfield(const Statement& s) {
  const bool extract = s.opcode[0] == "bfe";
  auto t = int_type_suffix(s, false);
  if (!t || s.opcode.size() != 2 || (t->bits != 32 && t->bits != 64)) return unsupported(s);
  if (extract ? t->kind == 'b' : t->kind != 'b') return unsupported(s);
  if (!expect_operands(s, extract ? 4 : 5)) return false;
  const Operand& pos_op = s.operands[extract ? 2 : 3];
  const Operand& len_op = s.operands[extract ? 3 : 4];
  if (pos_op.kind != Operand::Kind::kImm || len_op.kind != Operand::Kind::kImm || pos_op.is_float || len_op.is_float) {
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

bool ModuleBuilder::emit_setp(const Statement& s) {
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

std::string ModuleBuilder::take_space(const Statement& s, std::vector<std::string>& rest) {
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

unsigned ModuleBuilder::space_as(const std::string& space) {
  if (space == "global") return kGlobalAs;
  if (space == "shared") return kSharedAs;
  return kGenericAs;
}

bool ModuleBuilder::emit_memory(const Statement& s) {
  const bool load = s.opcode[0] == "ld";
  std::vector<std::string> rest;
  const std::string space = take_space(s, rest);
  // .v2/.v4: `lanes` elements at consecutive addresses, accessed one by one (the machine's memory
  // accesses are scalar; PTX requires the vector's alignment, each element access checks its own).
  std::size_t lanes = 0;
  if (rest.size() == 2 && (rest[0] == "v2" || rest[0] == "v4")) {
    lanes = rest[0] == "v2" ? 2 : 4;
    rest.erase(rest.begin());
  }
  if (rest.size() != 1) return unsupported(s);  // .v8 or unknown modifiers
  auto t = parse_type(rest[0]);
  if (!t || t->kind == 'f' || t->kind == 'p') return unsupported(s);
  if (space == "local" || space == "const" || (space == "param" && (!load || lanes))) return unsupported(s);
  if (!expect_operands(s, 2)) return false;
  const Operand& addr_op = s.operands[load ? 1 : 0];
  if (lanes) {
    const Operand& data = s.operands[load ? 0 : 1];
    if (data.kind != Operand::Kind::kVector || data.elements.size() != lanes) {
      return fail(data.loc,
                  "expected a vector operand of " + std::to_string(lanes) + " elements for '" + join_opcode(s) + "'");
    }
    Value base = address(addr_op);
    if (!base) return false;
    if (t->bits < 32) return emit_packed_vector(*t, data, base, load, space);
    for (std::size_t k = 0; k < lanes; ++k) {
      const Operand& e = data.elements[k];
      if (load && e.kind == Operand::Kind::kSink) continue;
      Value a = k == 0 ? base : b_.create<LLVM::AddOp>(cur_loc_, base, constant(64, k * (t->bits / 8))).getResult();
      Value ptr = b_.create<LLVM::IntToPtrOp>(cur_loc_, ptr_type(space_as(space)), a);
      if (load) {
        Value v = b_.create<LLVM::LoadOp>(cur_loc_, int_type(t->bits), ptr);
        if (!write(e, v, t->is_signed())) return false;
      } else {
        Value v = read(e, t->bits, t->is_signed());
        if (!v) return false;
        b_.create<LLVM::StoreOp>(cur_loc_, v, ptr);
      }
    }
    return true;
  }
  if (space == "param") {
    if (addr_op.kind != Operand::Kind::kAddr) return fail(addr_op.loc, "expected a memory operand [param]");
    auto it = params_.find(addr_op.name);
    if (it == params_.end()) return fail(addr_op.loc, "unknown parameter '" + addr_op.name + "'");
    Value v = func_.getArgument(it->second);
    if (addr_op.imm != 0) {
      // Part of a parameter: clang reads the sign of an int as `ld.param.s8 [p+3]`. Little-endian:
      // the bytes from the offset on, shifted down.
      const unsigned width = v.getType().getIntOrFloatBitWidth();
      if (addr_op.imm < 0 || !v.getType().isInteger(width) ||
          static_cast<unsigned>(addr_op.imm) * 8 + static_cast<unsigned>(t->bits) > width) {
        return fail(addr_op.loc,
                    "parameter access at offset " + std::to_string(addr_op.imm) + " of " + std::to_string(t->bits) +
                        " bits lies outside the " + std::to_string(width / 8) + "-byte parameter '" + addr_op.name +
                        "'",
                    sdk::ErrorCode::kUnsupported);
      }
      v = b_.create<LLVM::LShrOp>(cur_loc_, v, constant(width, static_cast<std::uint64_t>(addr_op.imm) * 8))
              .getResult();
    }
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

// A vector of 8- or 16-bit elements is aligned to its whole size (PTX), so each group of elements
// that fills 32 bits (16 for .v2.u8) is one aligned access: a v4.u8 or v2.u16 is one word, loaded
// once and split with shifts, or assembled with shifts and ors and stored once. Little-endian:
// element k of a group is at bits bits*k.
bool ModuleBuilder::emit_packed_vector(const PtxType& t, const Operand& data, Value base, bool load,
                                       const std::string& space) {
  const std::size_t lanes = data.elements.size();
  const int chunk = std::min<int>(32, static_cast<int>(lanes) * t.bits);
  const std::size_t per = static_cast<std::size_t>(chunk / t.bits);
  for (std::size_t g = 0; g < lanes; g += per) {
    const std::int64_t offset = static_cast<std::int64_t>(g) * (t.bits / 8);
    Value a = g == 0 ? base : b_.create<LLVM::AddOp>(cur_loc_, base, constant(64, offset)).getResult();
    Value ptr = b_.create<LLVM::IntToPtrOp>(cur_loc_, ptr_type(space_as(space)), a);
    if (load) {
      bool used = false;
      for (std::size_t k = g; k < g + per; ++k) used |= data.elements[k].kind != Operand::Kind::kSink;
      if (!used) continue;
      Value word = b_.create<LLVM::LoadOp>(cur_loc_, int_type(chunk), ptr);
      for (std::size_t k = g; k < g + per; ++k) {
        const Operand& e = data.elements[k];
        if (e.kind == Operand::Kind::kSink) continue;
        Value v = word;
        if (k > g)
          v = b_.create<LLVM::LShrOp>(cur_loc_, v, constant(chunk, static_cast<std::int64_t>((k - g) * t.bits)));
        v = b_.create<LLVM::TruncOp>(cur_loc_, int_type(t.bits), v);
        if (!write(e, v, t.is_signed())) return false;
      }
    } else {
      Value word;
      for (std::size_t k = g; k < g + per; ++k) {
        Value v = read(data.elements[k], t.bits, t.is_signed());
        if (!v) return false;
        v = fit(v, chunk, false);  // zero-extended
        if (k > g)
          v = b_.create<LLVM::ShlOp>(cur_loc_, v, constant(chunk, static_cast<std::int64_t>((k - g) * t.bits)));
        word = k == g ? v : b_.create<LLVM::OrOp>(cur_loc_, word, v).getResult();
      }
      b_.create<LLVM::StoreOp>(cur_loc_, word, ptr);
    }
  }
  return true;
}

bool ModuleBuilder::emit_atomic(const Statement& s) {
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

bool ModuleBuilder::emit_shfl(const Statement& s) {
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

bool ModuleBuilder::emit_vote(const Statement& s) {
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

}  // namespace qgpu::ptx
