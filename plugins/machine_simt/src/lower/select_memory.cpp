// Instruction selection for memory (loads, stores, atomics) and for the warp operations
// (shuffles, votes), which the machine has only for its own warp width.
#include <algorithm>
#include <bit>
#include <string>

#include "lower/select.h"

namespace qgpu::simt::lower {

using sdk::ErrorCode;
using sdk::IrType;
using sdk::Opcode;
using sdk::Status;
using Form = LoweredValue::Form;

Status Selector::select_memory(const sdk::Instr& in) {
  const bool load = in.op == Opcode::kLoad, store = in.op == Opcode::kStore;
  const bool cas = in.op == Opcode::kAtomic && in.atomic == sdk::AtomicOp::kCas;
  QGPU_RETURN_IF_ERROR(need(in, load ? 1 : store ? 2 : cas ? 3 : 2));
  const IrType access = store ? analysis_.type(in.operands[1]) : in.type;
  const bool subword = (bits_of(access) == 8 || bits_of(access) == 16) && (load || store);
  const bool doubleword = bits_of(access) == 64 && (load || store);
  if (bits_of(access) != 32 && !subword && !doubleword)
    return diag_.unsupported(in, type_str(access) + " " + op_str(in.op) +
                                     " is not supported: memory holds 32-bit words; the machine accesses whole words, "
                                     "and 8- and 16-bit loads and stores (not atomics) through the containing word");
  bool shared = in.space == sdk::AddressSpace::kShared;
  if (in.space == sdk::AddressSpace::kGeneric) {
    const Origin o = analysis_.origin[in.operands[0]];
    if (o == Origin::kMixed)  // clang's SimplifyCFG sank the accesses of two branches into one
      return diag_.unsupported(in, "generic " + op_str(in.op) +
                                       ": the address points to global memory on one path and to shared memory on "
                                       "another (clang merged the accesses of two branches into one); the frontend "
                                       "option 'clang_flags: -mllvm -simplifycfg-sink-common=false' keeps them apart");
    if (o != Origin::kGlobal && o != Origin::kShared)
      return diag_.unsupported(
          in, "generic " + op_str(in.op) + ": cannot tell whether the address points to global or shared memory");
    shared = o == Origin::kShared;
  }
  if (subword) return select_subword(in, shared);
  if (doubleword) return select_doubleword(in, shared);
  if (load && result_unused(in)) return {};
  QGPU_ASSIGN_OR_RETURN(auto* address, lookup(in, in.operands[0]));
  Instruction mi;
  if (address->form == Form::kConst) {
    mi.a = Operand::zero();
    mi.offset = address->imm;
    mi.reloc = address->reloc;
  } else if (address->form == Form::kRegOffset) {
    mi.a = Operand::reg(address->vreg);
    mi.offset = address->imm;
    mi.reloc = address->reloc;
  } else {
    mi.a = builder_.in_register(resolve(*address));
  }
  mi.flags = shared ? kFlagShared : 0;
  if (load) {
    mi.op = Op::kLd;
  } else if (store) {
    mi.op = Op::kSt;
    QGPU_ASSIGN_OR_RETURN(const Operand value, resolved(in, in.operands[1]));
    mi.b = builder_.in_register(value);
  } else {
    using A = sdk::AtomicOp;
    static const std::pair<A, Op> kMap[] = {
        {A::kAdd, Op::kAtomAdd},   {A::kSMin, Op::kAtomMin},  {A::kSMax, Op::kAtomMax}, {A::kUMin, Op::kAtomMinU},
        {A::kUMax, Op::kAtomMaxU}, {A::kExch, Op::kAtomExch}, {A::kAnd, Op::kAtomAnd},  {A::kOr, Op::kAtomOr},
        {A::kXor, Op::kAtomXor},   {A::kInc, Op::kAtomInc},   {A::kDec, Op::kAtomDec},  {A::kCas, Op::kAtomCas}};
    for (auto [a, o] : kMap)
      if (a == in.atomic) mi.op = o;
    QGPU_ASSIGN_OR_RETURN(const Operand value, resolved(in, in.operands[1]));
    mi.b = builder_.in_register(value);
    if (cas) {
      QGPU_ASSIGN_OR_RETURN(const Operand new_value, resolved(in, in.operands[2]));
      mi.c = builder_.in_register(new_value);
    }
  }
  if (in.result != 0 && !store) {
    mi.dest = builder_.new_vreg();
    values_[in.result] = LoweredValue::in_register(mi.dest);
  }
  builder_.append(std::move(mi));
  return {};
}

Status Selector::select_shuffle(const sdk::Instr& in) {
  const sdk::Instr* sh = &in;
  if (in.op == Opcode::kShflPred) {
    QGPU_RETURN_IF_ERROR(need(in, 1));
    sh = analysis_.definition[in.operands[0]];
    if (sh == nullptr || sh->op != Opcode::kShfl)
      return diag_.error(in, ErrorCode::kInvalidArgument, "shfl.pred operand is not the result of a shfl");
  }
  if (sh->operands.size() < 3)
    return diag_.error(
        in, ErrorCode::kInvalidArgument,
        "shfl has " + std::to_string(sh->operands.size()) + " operands, expected value, lane, c[, membermask]");
  QGPU_RETURN_IF_ERROR(need_word(*sh, sh->type, false));
  static const char* kModes[] = {"idx", "up", "down", "bfly"};
  const std::string name = std::string("shfl.") + kModes[static_cast<int>(sh->shfl)];
  QGPU_ASSIGN_OR_RETURN(const LoweredValue* packed, lookup(in, sh->operands[2]));
  if (packed->form != Form::kConst || packed->reloc >= 0)
    return diag_.unsupported(in, name + ": the packed clamp/width operand c must be a constant");
  const std::uint32_t c = packed->imm;
  const std::uint32_t segmask = (c >> 8) & 0x1f, clamp = c & 0x1f;
  const std::uint32_t width = 32 - segmask;
  if (!std::has_single_bit(width) || ((32 - width) != segmask) || (c & ~0x1f1fu) != 0)
    return diag_.unsupported(in, name + ": c operand " + hex(c) + " is not a CUDA width (((32 - width) << 8) | clamp)");
  if (clamp != (sh->shfl == sdk::ShflMode::kUp ? 0u : 0x1fu))
    return diag_.unsupported(
        in, name + ": clamp " + std::to_string(clamp) + " in c is not what CUDA's __shfl_*_sync emits");
  QGPU_ASSIGN_OR_RETURN(const Operand lane, resolved(in, sh->operands[1]));
  // Inside the machine warp (a segment of at most `lanes` threads, or a butterfly whose partner is
  // in the same aligned group of `lanes` threads): one machine shuffle. Otherwise the data crosses
  // machine warps (select_warp.cpp).
  const std::uint32_t lanes = static_cast<std::uint32_t>(config_.lanes);
  const bool in_warp = sh->shfl == sdk::ShflMode::kBfly ? lane.is_plain_imm() && lane.imm < lanes : width <= lanes;
  if (!in_warp) return select_shuffle_across(in, *sh, name, width);
  if (in.op == Opcode::kShfl && result_unused(in)) return {};
  QGPU_ASSIGN_OR_RETURN(auto* value, lookup(in, sh->operands[0]));
  static const Op kOps[] = {Op::kShflIdx, Op::kShflUp, Op::kShflDown, Op::kShflBfly};
  Instruction mi;
  mi.op = kOps[static_cast<int>(sh->shfl)];
  mi.a = builder_.in_register(resolve(*value));
  mi.b = lane;
  mi.flags = static_cast<std::uint8_t>(std::countr_zero(std::min(width, lanes)) << kFlagWidthShift);
  if (in.op == Opcode::kShflPred) mi.flags |= kFlagPred;
  mi.dest = builder_.new_vreg();
  if (in.result != 0) values_[in.result] = LoweredValue::in_register(mi.dest);
  builder_.append(std::move(mi));
  return {};
}

Status Selector::select_vote(const sdk::Instr& in) {
  static const char* kModes[] = {"all", "any", "uni", "ballot"};
  const std::string name = std::string("vote.") + kModes[static_cast<int>(in.vote)];
  if (in.operands.empty()) return diag_.error(in, ErrorCode::kInvalidArgument, name + " has no operand");
  // With blocks of at most `lanes` threads every CUDA warp is one machine warp: one machine ballot.
  // Larger blocks vote across machine warps (select_warp.cpp).
  if (shape_.block > static_cast<std::uint32_t>(config_.lanes)) return select_vote_across(in, name);
  QGPU_ASSIGN_OR_RETURN(const Operand predicate, resolved(in, in.operands[0]));
  const int ballot = builder_.emit(Op::kBallot, predicate);
  Operand r = Operand::reg(ballot);
  if (in.vote == sdk::VoteMode::kAny) {
    r = Operand::reg(builder_.emit(Op::kSetNe, r, imm(0)));
  } else if (in.vote == sdk::VoteMode::kAll || in.vote == sdk::VoteMode::kUni) {
    const int active = builder_.emit(Op::kBallot, imm(1));
    const int all = builder_.emit(Op::kSetEq, r, Operand::reg(active));
    r = Operand::reg(all);
    if (in.vote == sdk::VoteMode::kUni)
      r = Operand::reg(
          builder_.emit(Op::kOr, r, Operand::reg(builder_.emit(Op::kSetEq, Operand::reg(ballot), imm(0)))));
  }
  if (in.result != 0) values_[in.result] = LoweredValue::in_register(r.vreg);
  return {};
}

}  // namespace qgpu::simt::lower
