#include "lower/analysis.h"

#include <utility>

#include "lower/diagnostics.h"

namespace qgpu::simt::lower {
namespace {

using sdk::Opcode;
using sdk::ValueId;

Origin join(Origin a, Origin b) {
  if (a == Origin::kUnknown) return b;
  if (b == Origin::kUnknown || a == b) return a;
  return Origin::kMixed;
}

void find_definitions(const sdk::KernelIR& kernel, Analysis& a) {
  a.definition.assign(kernel.value_types.size(), nullptr);
  for (const sdk::Block& block : kernel.blocks)
    for (const sdk::Instr& in : block.instrs)
      if (in.result != 0) a.definition[in.result] = &in;
}

void find_uses(const sdk::KernelIR& kernel, const BlockOrder& order, Analysis& a) {
  a.uses.assign(kernel.value_types.size(), {});
  for (std::size_t b = 0; b < kernel.blocks.size(); ++b) {
    if (!order.reachable[b]) continue;
    for (const sdk::Instr& in : kernel.blocks[b].instrs) {
      for (std::size_t i = 0; i < in.operands.size(); ++i) a.uses[in.operands[i]].push_back({&in, static_cast<int>(i)});
      for (const auto& t : in.targets)
        for (ValueId v : t.args) a.uses[v].push_back({&in, -1});
    }
  }
  a.block_of.clear();
  for (std::size_t b = 0; b < kernel.blocks.size(); ++b)
    for (const sdk::Instr& in : kernel.blocks[b].instrs) a.block_of[&in] = b;
}

// A fixed point over the reachable blocks: pointer params are global, shared addresses shared;
// address arithmetic, selects and block arguments join the origins of what they are made of.
void find_origins(const sdk::KernelIR& kernel, const BlockOrder& order, Analysis& a) {
  a.origin.assign(kernel.value_types.size(), Origin::kUnknown);
  for (bool changed = true; changed;) {
    changed = false;
    auto set = [&](ValueId v, Origin o) {
      const Origin j = join(a.origin[v], o);
      if (j != a.origin[v]) {
        a.origin[v] = j;
        changed = true;
      }
    };
    for (std::size_t b = 0; b < kernel.blocks.size(); ++b) {
      if (!order.reachable[b]) continue;
      for (const sdk::Instr& in : kernel.blocks[b].instrs) {
        switch (in.op) {
          case Opcode::kParam:
            if (in.imm >= 0 && static_cast<std::size_t>(in.imm) < kernel.params.size() &&
                kernel.params[in.imm].kind == sdk::KernelParam::Kind::kPointer)
              set(in.result, Origin::kGlobal);
            break;
          case Opcode::kSharedAddr: set(in.result, Origin::kShared); break;
          case Opcode::kAdd:
          case Opcode::kSub:
          case Opcode::kZExt:
          case Opcode::kSExt:
          case Opcode::kTrunc:
          case Opcode::kAnd:
          case Opcode::kOr:
            for (ValueId v : in.operands) set(in.result, a.origin[v]);
            break;
          case Opcode::kSelect:
            if (in.operands.size() == 3) {
              set(in.result, a.origin[in.operands[1]]);
              set(in.result, a.origin[in.operands[2]]);
            }
            break;
          default: break;
        }
        for (const auto& t : in.targets)
          for (std::size_t i = 0; i < t.args.size(); ++i) set(kernel.blocks[t.block].args[i], a.origin[t.args[i]]);
      }
    }
  }
}

// Most i64 values are addresses and live as their low word. Where a high word is observed (a
// right shift of an i64, e.g. clang's closed forms of loop sums: (a * b) >> 1 in 64 bits; a
// 64-bit store, e.g. clang's copy of an int4 struct; a compare of i64 values that are not
// addresses, e.g. `__umulhi(a, b) & 3` as clang folds it: (zext a * zext b) & 0x300000000 == 0),
// the value and everything it is computed from carry a second register: the high word.
void find_wide(const sdk::KernelIR& kernel, const BlockOrder& order, Analysis& a) {
  const std::size_t n = kernel.value_types.size();
  a.wide.assign(n, false);
  std::map<ValueId, std::pair<std::size_t, std::size_t>> arg_of;
  for (std::size_t b = 0; b < kernel.blocks.size(); ++b)
    for (std::size_t i = 0; i < kernel.blocks[b].args.size(); ++i) arg_of[kernel.blocks[b].args[i]] = {b, i};
  std::vector<ValueId> work;
  auto mark = [&](ValueId v) {
    if (bits_of(a.type(v)) == 64 && !a.wide[v]) a.wide[v] = true, work.push_back(v);
  };
  for (std::size_t b = 0; b < kernel.blocks.size(); ++b) {
    if (!order.reachable[b]) continue;
    for (const sdk::Instr& in : kernel.blocks[b].instrs)
      if ((in.op == Opcode::kLShr || in.op == Opcode::kAShr) && bits_of(in.type) == 64 && !in.operands.empty())
        mark(in.operands[0]);
      else if (in.op == Opcode::kStore && in.operands.size() == 2)  // a 64-bit store writes both words
        mark(in.operands[1]);
      else if (in.op == Opcode::kICmp && in.operands.size() == 2 && bits_of(a.type(in.operands[0])) == 64 &&
               a.origin[in.operands[0]] == Origin::kUnknown && a.origin[in.operands[1]] == Origin::kUnknown)
        mark(in.operands[0]), mark(in.operands[1]);  // addresses compare as their low words
  }
  while (!work.empty()) {
    const ValueId v = work.back();
    work.pop_back();
    if (const sdk::Instr* d = a.definition[v]) {
      switch (d->op) {
        case Opcode::kAdd:
        case Opcode::kSub:
        case Opcode::kMul:
        case Opcode::kAnd:
        case Opcode::kOr:
        case Opcode::kXor:
        case Opcode::kNot:
        case Opcode::kNeg:
          for (ValueId o : d->operands) mark(o);
          break;
        case Opcode::kShl:
        case Opcode::kLShr:
        case Opcode::kAShr:
          if (!d->operands.empty()) mark(d->operands[0]);
          break;
        case Opcode::kSelect:
          for (std::size_t i = 1; i < d->operands.size(); ++i) mark(d->operands[i]);
          break;
        default: break;
      }
    } else if (auto it = arg_of.find(v); it != arg_of.end()) {
      const auto [block, index] = it->second;
      for (std::size_t b = 0; b < kernel.blocks.size(); ++b) {
        if (!order.reachable[b]) continue;
        for (const auto& t : kernel.blocks[b].instrs.back().targets)
          if (t.block == block && index < t.args.size()) mark(t.args[index]);
      }
    }
  }
}

}  // namespace

Analysis analyse(const sdk::KernelIR& kernel, const BlockOrder& order) {
  Analysis a;
  a.kernel = &kernel;
  find_definitions(kernel, a);
  find_uses(kernel, order, a);
  find_origins(kernel, order, a);
  find_wide(kernel, order, a);
  return a;
}

bool Analysis::is_alias(const sdk::Instr& in) const {
  if (in.op != Opcode::kZExt && in.op != Opcode::kSExt && in.op != Opcode::kTrunc) return false;
  if (in.operands.size() != 1) return false;
  const int from = bits_of(type(in.operands[0])), to = bits_of(in.type);
  if (in.op == Opcode::kZExt && from == 1 && to >= 32) return true;
  return (from == 32 || from == 64) && (to == 32 || to == 64);
}

bool Analysis::is_launch_constant(ValueId v) const {
  const sdk::Instr* d = definition[v];
  if (d == nullptr) return false;
  if (d->op == Opcode::kConst || d->op == Opcode::kParam || d->op == Opcode::kSharedAddr) return true;
  return is_alias(*d) && is_launch_constant(d->operands[0]);
}

bool Analysis::only_addresses(ValueId v, int depth) const {
  if (uses[v].empty() || depth > 16) return false;
  for (const Use& u : uses[v]) {
    const sdk::Instr& in = *u.user;
    if (u.index == 0 && (in.op == Opcode::kLoad || in.op == Opcode::kStore || in.op == Opcode::kAtomic)) continue;
    if (u.index == 0 && is_alias(in) && only_addresses(in.result, depth + 1)) continue;
    if ((in.op == Opcode::kAdd || (in.op == Opcode::kSub && u.index == 0)) && in.operands.size() == 2 &&
        is_launch_constant(in.operands[1 - u.index]) && only_addresses(in.result, depth + 1))
      continue;
    return false;
  }
  return true;
}

bool Analysis::mad_candidate(const sdk::Instr& in) const {
  if (in.result == 0 || uses[in.result].size() != 1) return false;
  const Use& u = uses[in.result][0];
  if (u.index < 0 || u.user->op != Opcode::kAdd || bits_of(u.user->type) == 1) return false;
  auto a = block_of.find(u.user), b = block_of.find(&in);
  if (a == block_of.end() || b == block_of.end() || a->second != b->second) return false;
  const ValueId other = u.user->operands[1 - u.index];
  return !is_launch_constant(other) && other != in.result;
}

}  // namespace qgpu::simt::lower
