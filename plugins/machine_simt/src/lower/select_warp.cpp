// CUDA-warp collectives (shfl.sync, vote.sync, bar.warp.sync) whose data crosses the machine's
// 4-lane warps. A CUDA warp is 32 threads formed from the thread index; the machine's thread blocks
// have at most 32 threads, so a CUDA warp is the whole thread block (a partial warp when the block
// has fewer). Such a collective is lowered to the machine's block barrier and a scratch region of
// shared memory after the kernel's own __shared__ variables (docs/ISA.md §8):
//
//   shuffle: st.s [slot(tid)], v; bar; j = the PTX source lane; ld.s d, [slot(in range ? j : tid)]; bar
//   vote:    atom.or.s [word], p << tid; bar; ld.s ballot, [word]; bar; atom.xor.s [word], p << tid
//
// The first barrier publishes every thread's value, the second keeps the scratch from being
// overwritten (by a thread that runs ahead to the next collective) before every thread has read it;
// the vote word is zero outside a vote because each thread clears its own bit again. Everything is
// ordinary machine instructions, so the interpreter, the circuit and the model agree by
// construction. Costs: a shuffle is 2 ROM blocks (the store ends one, the load the next), a vote 3.
#include <bit>
#include <string>

#include "lower/divergence.h"
#include "lower/select.h"

namespace qgpu::simt::lower {

using sdk::ErrorCode;
using sdk::Opcode;
using sdk::Status;
using Form = LoweredValue::Form;

namespace {

constexpr std::uint32_t kCudaWarp = 32;

}  // namespace

std::uint32_t Selector::cuda_warp_mask() const {
  return shape_.block >= kCudaWarp ? 0xffffffffu : (1u << shape_.block) - 1;
}

Status Selector::check_cuda_warp(const sdk::Instr& in, const std::string& name, sdk::ValueId member_mask) {
  if (shape_.block > kCudaWarp)
    return diag_.unsupported(
        in, name +
                " across a 32-thread CUDA warp is lowered with block barriers, which is exact only when the "
                "thread block is one CUDA warp (at most 32 threads; this launch has " +
                std::to_string(shape_.block) + ")");
  if (divergent_.empty()) divergent_ = divergent_blocks(kernel_, order_);
  if (divergent_[current_ir_])
    return diag_.unsupported(
        in, name +
                " may be reached by only some threads of the CUDA warp (it is under a branch on a thread-dependent "
                "condition); the machine exchanges through a block barrier that needs every thread there: move it "
                "out of the branch (compute its operand with a select)");
  QGPU_ASSIGN_OR_RETURN(const LoweredValue* mask, lookup(in, member_mask));
  const std::uint32_t full = cuda_warp_mask();
  if (mask->form != Form::kConst || mask->reloc >= 0 || (mask->imm != 0xffffffffu && mask->imm != full))
    return diag_.unsupported(
        in, name + " needs the full member mask (0xffffffff" +
                (full != 0xffffffffu ? " or " + hex(full) + ", the block's " + std::to_string(shape_.block) + " threads"
                                     : std::string()) +
                "); this one is " +
                (mask->form == Form::kConst && mask->reloc < 0 ? hex(mask->imm) : std::string("not a constant")) +
                ": a collective of part of a CUDA warp is not supported (the machine synchronises the whole thread "
                "block)");
  return {};
}

void Selector::block_barrier(const char* suffix) {
  const int next = builder_.split_block(suffix);
  builder_.terminate(Terminator{Op::kBar, -1, next, -1, builder_.loc()});
  builder_.set_current(next);
}

int Selector::warp_slots_base() {
  uses_warp_slots_ = true;
  return shared_.words * 4;
}

void Selector::append_vote_word_access(Instruction mi) {
  uses_warp_word_ = true;
  builder_.append(std::move(mi));
  const int block = builder_.current();
  vote_word_refs_.emplace_back(block, function_.blocks[block].code.size() - 1);
}

Status Selector::finish_warp_scratch() {
  if (!uses_warp_slots_ && !uses_warp_word_) return {};
  // Slots first (one word per thread), then the vote word; a shuffle whose source thread does not
  // exist (a partial warp) reads the vote word, which is zero outside a vote.
  const int slots = uses_warp_slots_ ? static_cast<int>(shape_.block) : 0;
  const bool word = uses_warp_word_ || (uses_warp_slots_ && shape_.block < kCudaWarp);
  function_.scratch_words = slots + (word ? 1 : 0);
  const std::uint32_t word_address = static_cast<std::uint32_t>(4 * (shared_.words + slots));
  for (auto [block, index] : vote_word_refs_) function_.blocks[block].code[index].offset = word_address;
  const int total = shared_.words + function_.scratch_words;
  if (total > config_.shared_words)
    return diag_.limit("shared memory", total, config_.shared_words,
                       "words per thread block (" + std::to_string(shared_.words) + " for __shared__ variables, " +
                           std::to_string(function_.scratch_words) +
                           " of scratch for warp collectives across machine warps)",
                       "raise the machine option shared_words (the circuit holds 512)");
  return {};
}

// The PTX source lane and its in-range predicate (PTX ISA, shfl.sync), for lane = tid < 32:
//   idx: j = (lane & ~(w-1)) | (b & (w-1))  always in range
//   up: j = lane - b, in range when b <= lane & (w-1); down/bfly: j = lane + b / lane ^ b, in range
//   when j <= lane | (w-1); b is taken mod 32 (PTX reads b[4:0]).
Operand Selector::shuffle_in_range(sdk::ShflMode mode, Operand b, std::uint32_t width, Operand* source) {
  const Operand lane = Operand::special_reg(Special::kTid);
  const std::uint32_t low = width - 1;
  b = builder_.compute(Op::kAnd, b, imm(kCudaWarp - 1));
  const Operand lane_low = width == kCudaWarp ? lane : builder_.compute(Op::kAnd, lane, imm(low));
  Operand j, p;
  switch (mode) {
    case sdk::ShflMode::kIdx:
      j = width == kCudaWarp ? b
                             : builder_.compute(Op::kOr, builder_.compute(Op::kAnd, lane, imm(~low & 31)),
                                                builder_.compute(Op::kAnd, b, imm(low)));
      p = imm(1);
      break;
    case sdk::ShflMode::kUp:
      if (source) j = builder_.compute(Op::kSub, lane, b);
      p = b.is_plain_imm() && b.imm == 0 ? imm(1) : Operand::reg(builder_.emit(Op::kSetLeU, b, lane_low));
      break;
    case sdk::ShflMode::kDown:
      if (source) j = builder_.compute(Op::kAdd, lane, b);
      if (b.is_plain_imm())  // lane + b <= lane | (w-1)  <=>  lane & (w-1) < w - b
        p = b.imm == 0       ? imm(1)
            : b.imm >= width ? imm(0)
                             : Operand::reg(builder_.emit(Op::kSetLtU, lane_low, imm(width - b.imm)));
      else
        p = Operand::reg(builder_.emit(Op::kSetLeU, builder_.compute(Op::kAdd, lane, b),
                                       width == kCudaWarp ? imm(31) : builder_.compute(Op::kOr, lane, imm(low))));
      break;
    case sdk::ShflMode::kBfly:
      if (width == kCudaWarp || (b.is_plain_imm() && b.imm <= low)) {
        p = imm(1);
        if (source) j = builder_.compute(Op::kXor, lane, b);
      } else {
        j = builder_.compute(Op::kXor, lane, b);
        p = Operand::reg(builder_.emit(Op::kSetLeU, j, builder_.compute(Op::kOr, lane, imm(low))));
      }
      break;
  }
  if (source) *source = j;
  return p;
}

Status Selector::select_shuffle_across(const sdk::Instr& in, const sdk::Instr& sh, const std::string& name,
                                       std::uint32_t width) {
  if (sh.operands.size() < 4) return diag_.error(in, ErrorCode::kInvalidArgument, name + " has no member mask");
  QGPU_RETURN_IF_ERROR(check_cuda_warp(in, name, sh.operands[3]));
  QGPU_ASSIGN_OR_RETURN(const Operand b, resolved(in, sh.operands[1]));
  if (in.op == Opcode::kShflPred) {  // the predicate needs no exchange
    Operand p = shuffle_in_range(sh.shfl, b, width, nullptr);
    if (in.result != 0) values_[in.result] = LoweredValue::of(p);
    return {};
  }
  if (result_unused(in)) return {};
  QGPU_ASSIGN_OR_RETURN(auto* value, lookup(in, sh.operands[0]));
  const Operand v = builder_.in_register(resolve(*value));
  const int base = warp_slots_base();
  const Operand self = builder_.compute(Op::kShl, Operand::special_reg(Special::kTid), imm(2));
  Instruction st;
  st.op = Op::kSt;
  st.a = builder_.in_register(self);
  st.b = v;
  st.offset = static_cast<std::uint32_t>(base);
  st.flags = kFlagShared;
  builder_.append(std::move(st));
  block_barrier("shfl");
  // A constant distance up or down: the slot is this thread's own, moved by 4 * b when in range.
  const bool constant_distance = shape_.block == kCudaWarp && b.is_plain_imm() &&
                                 (sh.shfl == sdk::ShflMode::kUp || sh.shfl == sdk::ShflMode::kDown);
  Operand j;
  const Operand p = shuffle_in_range(sh.shfl, b, width, constant_distance ? nullptr : &j);
  Operand address;  // byte offset of the source slot from the scratch base
  if (constant_distance) {
    const std::uint32_t delta = sh.shfl == sdk::ShflMode::kUp ? 0u - (b.imm & 31) : b.imm & 31;
    const Operand move = p.is_plain_imm() ? imm(p.imm ? 4 * delta : 0)
                                          : Operand::reg(builder_.emit(Op::kSel, imm(4 * delta), Operand::zero(), p));
    address = builder_.compute(Op::kAdd, self, move);
  } else {
    Operand source =
        p.is_plain_imm() && p.imm ? j
        : p.is_plain_imm()
            ? Operand::special_reg(Special::kTid)
            : Operand::reg(builder_.emit(Op::kSel, builder_.in_register(j), Operand::special_reg(Special::kTid), p));
    // A thread that does not exist (partial warp) holds zeros: its slot is the (zero) vote word.
    if (shape_.block < kCudaWarp) source = builder_.compute(Op::kMinU, source, imm(shape_.block));
    address = builder_.compute(Op::kShl, source, imm(2));
  }
  Instruction ld;
  ld.op = Op::kLd;
  ld.flags = kFlagShared;
  if (address.is_plain_imm()) {
    ld.a = Operand::zero();
    ld.offset = static_cast<std::uint32_t>(base) + address.imm;
  } else {
    ld.a = builder_.in_register(address);
    ld.offset = static_cast<std::uint32_t>(base);
  }
  ld.dest = builder_.new_vreg();
  values_[in.result] = LoweredValue::in_register(ld.dest);
  builder_.append(std::move(ld));
  block_barrier("shfl");
  return {};
}

Status Selector::select_vote_across(const sdk::Instr& in, const std::string& name) {
  if (in.operands.size() < 2) return diag_.error(in, ErrorCode::kInvalidArgument, name + " has no member mask");
  QGPU_RETURN_IF_ERROR(check_cuda_warp(in, name, in.operands[1]));
  if (result_unused(in)) return {};
  QGPU_ASSIGN_OR_RETURN(const Operand predicate, resolved(in, in.operands[0]));
  if (predicate.is_plain_imm()) {
    // Every thread of the block is here (check_cuda_warp), so a constant predicate needs no exchange:
    // __ballot_sync(~0u, 1) and __activemask() are the block's threads.
    const std::uint32_t ballot = predicate.imm ? cuda_warp_mask() : 0;
    const bool all = ballot == cuda_warp_mask(), any = ballot != 0;
    const std::uint32_t r = in.vote == sdk::VoteMode::kBallot ? ballot
                            : in.vote == sdk::VoteMode::kAny  ? any
                            : in.vote == sdk::VoteMode::kAll  ? all
                                                              : 1;
    if (in.result != 0) values_[in.result] = LoweredValue::constant(r);
    return {};
  }
  const Operand bit = builder_.in_register(builder_.compute(Op::kShl, predicate, Operand::special_reg(Special::kTid)));
  Instruction set;
  set.op = Op::kAtomOr;
  set.a = Operand::zero();
  set.b = bit;
  set.flags = kFlagShared;
  append_vote_word_access(std::move(set));
  block_barrier("vote");
  Instruction ld;
  ld.op = Op::kLd;
  ld.a = Operand::zero();
  ld.flags = kFlagShared;
  ld.dest = builder_.new_vreg();
  const Operand ballot = Operand::reg(ld.dest);
  append_vote_word_access(std::move(ld));
  block_barrier("vote");
  Instruction clear;  // this thread's bit again: the word is zero for the next vote
  clear.op = Op::kAtomXor;
  clear.a = Operand::zero();
  clear.b = bit;
  clear.flags = kFlagShared;
  append_vote_word_access(std::move(clear));
  Operand r = ballot;
  const Operand full = imm(cuda_warp_mask());
  switch (in.vote) {
    case sdk::VoteMode::kBallot: break;
    case sdk::VoteMode::kAny: r = Operand::reg(builder_.emit(Op::kSetNe, ballot, imm(0))); break;
    case sdk::VoteMode::kAll: r = Operand::reg(builder_.emit(Op::kSetEq, ballot, full)); break;
    case sdk::VoteMode::kUni:
      r = Operand::reg(builder_.emit(Op::kOr, Operand::reg(builder_.emit(Op::kSetEq, ballot, full)),
                                     Operand::reg(builder_.emit(Op::kSetEq, ballot, imm(0)))));
      break;
  }
  if (in.result != 0) values_[in.result] = LoweredValue::of(r);
  return {};
}

}  // namespace qgpu::simt::lower
