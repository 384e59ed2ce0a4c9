// A small builder for hand-written KernelIR in the machine tests: kernels are
// written the way clang-16 -O2 emits them (params, specials, mul.wide address
// arithmetic on i64, setp + branch, block arguments for loops).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "qgpu/sdk/kernel_ir.h"

namespace qgpu::simt::test {

using sdk::IrType;
using sdk::Opcode;
using sdk::ValueId;

class IrBuilder {
 public:
  explicit IrBuilder(std::string name) {
    k.name = std::move(name);
    k.source_path = "test.cu";
    k.loc = {1, 1};
    k.value_types.push_back(IrType::kVoid);
  }

  ValueId ptr_param(const std::string& name) { return add_param(name, sdk::KernelParam::Kind::kPointer, IrType::kI64); }
  ValueId int_param(const std::string& name) { return add_param(name, sdk::KernelParam::Kind::kScalar, IrType::kI32); }

  // Creates a block (the first one is the entry) and makes it current.
  int block(const std::string& label, const std::vector<IrType>& arg_types = {}) {
    sdk::Block b;
    b.label = label;
    for (IrType t : arg_types) b.args.push_back(new_value(t));
    k.blocks.push_back(std::move(b));
    cur_ = static_cast<int>(k.blocks.size()) - 1;
    return cur_;
  }
  void at(int b) { cur_ = b; }
  ValueId arg(int b, int i) const { return k.blocks[b].args[i]; }

  ValueId emit(Opcode op, IrType t, std::vector<ValueId> ops, std::int64_t imm = 0) {
    sdk::Instr in;
    in.op = op;
    in.type = t;
    in.operands = std::move(ops);
    in.imm = imm;
    if (t != IrType::kVoid && op != Opcode::kStore) in.result = new_value(t);
    return push(std::move(in));
  }
  ValueId c32(std::int64_t v) { return emit(Opcode::kConst, IrType::kI32, {}, v); }
  ValueId c64(std::int64_t v) { return emit(Opcode::kConst, IrType::kI64, {}, v); }
  ValueId special(sdk::SpecialReg r) {
    sdk::Instr in;
    in.op = Opcode::kSpecial;
    in.type = IrType::kI32;
    in.special = r;
    in.result = new_value(IrType::kI32);
    return push(std::move(in));
  }
  ValueId tid() { return special(sdk::SpecialReg::kTidX); }
  ValueId ntid() { return special(sdk::SpecialReg::kNtidX); }
  ValueId ctaid() { return special(sdk::SpecialReg::kCtaidX); }
  ValueId nctaid() { return special(sdk::SpecialReg::kNctaidX); }
  ValueId bin(Opcode op, ValueId a, ValueId b) { return emit(op, k.value_types[a], {a, b}); }
  ValueId un(Opcode op, ValueId a, IrType t = IrType::kVoid) {
    return emit(op, t == IrType::kVoid ? k.value_types[a] : t, {a});
  }
  ValueId icmp(sdk::CmpPred p, ValueId a, ValueId b) {
    const ValueId r = emit(Opcode::kICmp, IrType::kI1, {a, b});
    last().pred = p;
    return r;
  }
  ValueId select(ValueId c, ValueId a, ValueId b) { return emit(Opcode::kSelect, k.value_types[a], {c, a, b}); }
  ValueId sext64(ValueId a) { return emit(Opcode::kSExt, IrType::kI64, {a}); }
  // blockIdx.x * blockDim.x + threadIdx.x, as mad.lo.s32.
  ValueId global_index() { return bin(Opcode::kAdd, bin(Opcode::kMul, ctaid(), ntid()), tid()); }
  // &base[i] as clang emits it: mul.wide.s32 (sext + mul by 4), add.s64.
  ValueId element(ValueId base, ValueId i32) { return bin(Opcode::kAdd, base, bin(Opcode::kMul, sext64(i32), c64(4))); }
  ValueId shared_addr(int var) { return emit(Opcode::kSharedAddr, IrType::kI64, {}, var); }
  ValueId load(ValueId addr, sdk::AddressSpace s = sdk::AddressSpace::kGlobal, IrType t = IrType::kI32) {
    const ValueId r = emit(Opcode::kLoad, t, {addr});
    last().space = s;
    return r;
  }
  void store(ValueId addr, ValueId v, sdk::AddressSpace s = sdk::AddressSpace::kGlobal) {
    emit(Opcode::kStore, k.value_types[v], {addr, v});
    last().space = s;
  }
  ValueId atomic(sdk::AtomicOp op, ValueId addr, std::vector<ValueId> vals,
                 sdk::AddressSpace s = sdk::AddressSpace::kGlobal) {
    std::vector<ValueId> ops{addr};
    ops.insert(ops.end(), vals.begin(), vals.end());
    const ValueId r = emit(Opcode::kAtomic, IrType::kI32, ops);
    last().atomic = op;
    last().space = s;
    return r;
  }
  // __shfl_*_sync(mask, v, lane, width): PTX's c = ((32 - width) << 8) | clamp.
  ValueId shfl(sdk::ShflMode mode, ValueId v, ValueId lane, int width) {
    const std::int64_t c = ((32 - width) << 8) | (mode == sdk::ShflMode::kUp ? 0 : 0x1f);
    const ValueId cv = c32(c), mask = c32(-1);
    const ValueId r = emit(Opcode::kShfl, IrType::kI32, {v, lane, cv, mask});
    last().shfl = mode;
    return r;
  }
  ValueId vote(sdk::VoteMode mode, ValueId p) {
    const ValueId r = emit(Opcode::kVote, mode == sdk::VoteMode::kBallot ? IrType::kI32 : IrType::kI1, {p, c32(-1)});
    last().vote = mode;
    return r;
  }
  void barrier() { emit(Opcode::kBarrier, IrType::kVoid, {}); }
  void br(int target, std::vector<ValueId> args = {}) {
    sdk::Instr in;
    in.op = Opcode::kBr;
    in.targets.push_back({static_cast<std::uint32_t>(target), std::move(args)});
    push(std::move(in));
  }
  void cond_br(ValueId c, int t, std::vector<ValueId> targs, int f, std::vector<ValueId> fargs = {}) {
    sdk::Instr in;
    in.op = Opcode::kCondBr;
    in.operands = {c};
    in.targets.push_back({static_cast<std::uint32_t>(t), std::move(targs)});
    in.targets.push_back({static_cast<std::uint32_t>(f), std::move(fargs)});
    push(std::move(in));
  }
  void ret() {
    sdk::Instr in;
    in.op = Opcode::kRet;
    push(std::move(in));
  }
  sdk::Instr& last() { return k.blocks[cur_].instrs.back(); }

  sdk::KernelIR k;

 private:
  ValueId add_param(const std::string& name, sdk::KernelParam::Kind kind, IrType t) {
    const int index = static_cast<int>(k.params.size());
    k.params.push_back({name, kind, t});
    if (k.blocks.empty()) block("entry");
    return emit(Opcode::kParam, t, {}, index);
  }
  ValueId new_value(IrType t) {
    k.value_types.push_back(t);
    return static_cast<ValueId>(k.value_types.size() - 1);
  }
  ValueId push(sdk::Instr in) {
    in.loc = {++line_, 3};
    const ValueId r = in.result;
    k.blocks[cur_].instrs.push_back(std::move(in));
    return r;
  }
  int cur_ = 0;
  std::uint32_t line_ = 1;
};

}  // namespace qgpu::simt::test
