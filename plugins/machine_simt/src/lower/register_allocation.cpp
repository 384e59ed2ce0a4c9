#include "lower/register_allocation.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <functional>
#include <string>

#include "lower/spill.h"

namespace qgpu::simt::lower {
namespace {

// A fixed-size set of virtual registers.
class BitSet {
 public:
  explicit BitSet(std::size_t n = 0) : words_((n + 63) / 64, 0) {}
  void set(std::size_t i) { words_[i / 64] |= 1ull << (i % 64); }
  void reset(std::size_t i) { words_[i / 64] &= ~(1ull << (i % 64)); }
  bool test(std::size_t i) const { return (words_[i / 64] >> (i % 64)) & 1; }
  // Adds o's members; returns whether any was new.
  bool merge(const BitSet& o) {
    bool changed = false;
    for (std::size_t i = 0; i < words_.size(); ++i) {
      const std::uint64_t v = words_[i] | o.words_[i];
      changed |= v != words_[i];
      words_[i] = v;
    }
    return changed;
  }
  int count() const {
    int n = 0;
    for (auto x : words_) n += std::popcount(x);
    return n;
  }
  template <typename F>
  void each(F f) const {
    for (std::size_t i = 0; i < words_.size(); ++i)
      for (std::uint64_t x = words_[i]; x; x &= x - 1) f(i * 64 + std::countr_zero(x));
  }

 private:
  std::vector<std::uint64_t> words_;
};

// The virtual registers an instruction writes and reads.
struct DefsUses {
  std::vector<int> defs, uses;
};
DefsUses defs_uses(const Instruction& mi) {
  DefsUses p;
  if (mi.parallel_copy) {
    for (const auto& [d, s] : mi.copies) {
      p.defs.push_back(d);
      if (s.is_vreg()) p.uses.push_back(s.vreg);
    }
    return p;
  }
  if (mi.dest >= 0) p.defs.push_back(mi.dest);
  for (const Operand* m : {&mi.a, &mi.b, &mi.c})
    if (m->is_vreg()) p.uses.push_back(m->vreg);
  return p;
}

using Visit = std::function<void(const Instruction*, const DefsUses&, const BitSet& live_after)>;

// Walks a block backwards from its live-out set, calling `at` (if set) at each instruction with
// the registers live after it; returns the block's live-in set.
BitSet transfer(const Block& block, BitSet live, const Visit& at) {
  const Terminator& t = block.term;
  if (t.op == Op::kBrc && t.condition >= 0) live.set(t.condition);
  for (auto it = block.code.rbegin(); it != block.code.rend(); ++it) {
    const DefsUses p = defs_uses(*it);
    if (at) at(&*it, p, live);
    for (int d : p.defs) live.reset(d);
    for (int u : p.uses) live.set(u);
  }
  return live;
}

// Live-out set of every block (a backward fixed point over the layout).
std::vector<BitSet> live_out_sets(const Function& function) {
  const int blocks = static_cast<int>(function.blocks.size());
  const int n = function.vregs;
  std::vector<std::vector<int>> succ(blocks);
  for (int m : function.layout) {
    const Terminator& t = function.blocks[m].term;
    if (t.target >= 0) succ[m].push_back(t.target);
    if (t.else_target >= 0) succ[m].push_back(t.else_target);
  }
  std::vector<BitSet> live_in(blocks, BitSet(n)), live_out(blocks, BitSet(n));
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = function.layout.rbegin(); it != function.layout.rend(); ++it) {
      BitSet out(n);
      for (int s : succ[*it]) out.merge(live_in[s]);
      live_out[*it] = out;
      changed |= live_in[*it].merge(transfer(function.blocks[*it], out, nullptr));
    }
  }
  return live_out;
}

struct Interference {
  std::vector<BitSet> adjacent;         // by virtual register
  std::vector<std::vector<int>> hints;  // registers it is copied from or to
  int max_pressure = 0;                 // most registers live across one instruction
  std::string pressure_at;              // the block where it first peaks
  sdk::IrLoc pressure_loc;
};

// Two registers interfere where one is written while the other is live after the instruction
// (a mov's source does not interfere with its destination: they may share a register).
Interference interference(const Function& function, const std::vector<BitSet>& live_out) {
  const int n = function.vregs;
  Interference g{std::vector<BitSet>(n, BitSet(n)), std::vector<std::vector<int>>(n), 0, {}, {}};
  auto edge = [&](int a, int b) {
    if (a == b) return;
    g.adjacent[a].set(b);
    g.adjacent[b].set(a);
  };
  for (int m : function.layout) {
    transfer(function.blocks[m], live_out[m], [&](const Instruction* mi, const DefsUses& p, const BitSet& live_after) {
      BitSet across = live_after;
      for (int d : p.defs) across.set(d);
      if (across.count() > g.max_pressure) {
        g.max_pressure = across.count();
        g.pressure_at = function.blocks[m].label;
        g.pressure_loc = mi->loc;
      }
      for (int d : p.defs) {
        const int copy_src = (!mi->parallel_copy && mi->op == Op::kMov && mi->a.is_vreg()) ? mi->a.vreg : -1;
        live_after.each([&](std::size_t l) {
          if (static_cast<int>(l) != copy_src) edge(d, static_cast<int>(l));
        });
        for (int d2 : p.defs) edge(d, d2);
        if (copy_src >= 0) g.hints[d].push_back(copy_src), g.hints[copy_src].push_back(d);
      }
      if (mi->parallel_copy)
        for (const auto& [d, s] : mi->copies)
          if (s.is_vreg()) g.hints[d].push_back(s.vreg), g.hints[s.vreg].push_back(d);
    });
  }
  return g;
}

// Per virtual register: at how many instructions it is live, and how often it is read or written
// (the spill choice weighs the one against the other).
struct Spans {
  std::vector<int> live, accesses;
};
Spans spans(const Function& function, const std::vector<BitSet>& live_out) {
  const int n = function.vregs;
  Spans s{std::vector<int>(n, 0), std::vector<int>(n, 0)};
  for (int m : function.layout)
    transfer(function.blocks[m], live_out[m], [&](const Instruction*, const DefsUses& p, const BitSet& live_after) {
      live_after.each([&](std::size_t v) { ++s.live[v]; });
      for (int d : p.defs) ++s.accesses[d];
      for (int u : p.uses) ++s.accesses[u];
    });
  return s;
}

// Greedy colouring in order of first definition; returns the first virtual register that finds
// every usable register taken by a neighbour (-1: all coloured).
int colour(const Function& function, const Interference& g, int usable, Registers& result) {
  const int n = function.vregs;
  std::vector<int> first(n, -1);
  int pos = 0;
  for (int m : function.layout)
    for (const Instruction& mi : function.blocks[m].code) {
      for (int d : defs_uses(mi).defs)
        if (first[d] < 0) first[d] = pos;
      ++pos;
    }
  std::vector<int> by_first(n);
  for (int i = 0; i < n; ++i) by_first[i] = i;
  std::stable_sort(by_first.begin(), by_first.end(), [&](int a, int b) { return first[a] < first[b]; });
  result.color.assign(n, 0);
  result.highest = 0;
  std::vector<int>& color = result.color;
  for (int v : by_first) {
    if (first[v] < 0) continue;  // never written (cannot happen for reachable code)
    std::vector<bool> taken(usable + 1, false);
    g.adjacent[v].each([&](std::size_t u) {
      if (color[u] > 0) taken[color[u]] = true;
    });
    int pick = 0;
    for (int h : g.hints[v])
      if (color[h] > 0 && !taken[color[h]]) {
        pick = color[h];
        break;
      }
    for (int r = 1; pick == 0 && r <= usable; ++r)
      if (!taken[r]) pick = r;
    if (pick == 0) return v;
    color[v] = pick;
    result.highest = std::max(result.highest, pick);
  }
  return -1;
}

}  // namespace

sdk::Expected<Registers> allocate_registers(Function& function, const MachineConfig& config,
                                            const sdk::KernelIR& kernel, const sdk::LaunchShape& shape,
                                            int shared_words, const Diagnostics& diag) {
  const int usable = config.registers - 1;
  const int threads = static_cast<int>(shape.block);  // one slot word per thread of a block
  std::vector<bool> temporary(static_cast<std::size_t>(function.vregs), false);
  std::vector<bool> spilled(static_cast<std::size_t>(function.vregs), false);
  int first_pressure = 0;
  std::string first_where;
  Registers result;
  for (;;) {
    const std::vector<BitSet> live_out = live_out_sets(function);
    const Interference g = interference(function, live_out);
    if (result.spilled == 0) {
      first_pressure = g.max_pressure;
      first_where = g.pressure_at + (g.pressure_loc.line ? " (" + kernel.source_path + ":" +
                                                               std::to_string(g.pressure_loc.line) + ")"
                                                         : "");
    }
    const int stuck = colour(function, g, usable, result);
    if (stuck < 0) return result;
    // Spill the value among the stuck one and its neighbours that is live longest per access
    // (never a spill's own temporaries: they live for an instruction or two).
    const Spans s = spans(function, live_out);
    int victim = -1;
    double best = 0;
    auto consider = [&](int v) {
      if (temporary[static_cast<std::size_t>(v)] || spilled[static_cast<std::size_t>(v)]) return;
      const double score = static_cast<double>(s.live[v]) / std::max(1, s.accesses[v]);
      if (victim < 0 || score > best) victim = v, best = score;
    };
    consider(stuck);
    g.adjacent[stuck].each([&](std::size_t u) { consider(static_cast<int>(u)); });
    const int words = shared_words + (result.spilled + 1) * threads;
    if (victim < 0 || words > config.shared_words) {
      const std::string need = "register pressure: needs " + std::to_string(std::max(first_pressure, usable + 1)) +
                               " registers at " + first_where + ", the machine has " + std::to_string(usable) +
                               " (r1-r" + std::to_string(usable) + ")";
      if (victim < 0)
        return diag.error(sdk::ErrorCode::kLimitExceeded, kernel.loc,
                          need + ", and spilling " + std::to_string(result.spilled) + " values left too many live");
      return diag.error(sdk::ErrorCode::kLimitExceeded, kernel.loc,
                        need + "; spilling " + std::to_string(result.spilled + 1) + " values to shared memory needs " +
                            std::to_string(words) + " words per thread block (" + std::to_string(shared_words) +
                            " for the kernel, " + std::to_string(threads) + " per value), the machine has " +
                            std::to_string(config.shared_words) + " (over by " +
                            std::to_string(words - config.shared_words) + "): raise the machine option shared_words " +
                            "(the circuit holds 512)");
    }
    const auto offset = static_cast<std::uint32_t>(4 * (shared_words + result.spilled * threads));
    spilled[static_cast<std::size_t>(victim)] = true;
    spill_everywhere(function, victim, offset, temporary);
    spilled.resize(static_cast<std::size_t>(function.vregs), false);
    ++result.spilled;
  }
}

}  // namespace qgpu::simt::lower
