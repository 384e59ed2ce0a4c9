#include "lower/block_order.h"

#include <algorithm>
#include <functional>
#include <set>
#include <utility>

namespace qgpu::simt::lower {

BlockOrder order_blocks(const sdk::KernelIR& kernel) {
  const std::size_t n = kernel.blocks.size();
  std::vector<std::vector<std::size_t>> succ(n), pred(n);
  for (std::size_t b = 0; b < n; ++b)
    for (const auto& t : kernel.blocks[b].instrs.back().targets) {
      succ[b].push_back(t.block);
      pred[t.block].push_back(b);
    }
  // Back edges (to a block on the DFS stack) and their natural loops.
  std::vector<int> state(n, 0);
  std::vector<std::pair<std::size_t, std::size_t>> back;
  std::function<void(std::size_t)> dfs = [&](std::size_t b) {
    state[b] = 1;
    for (std::size_t s : succ[b]) {
      if (state[s] == 1)
        back.emplace_back(b, s);
      else if (state[s] == 0)
        dfs(s);
    }
    state[b] = 2;
  };
  dfs(0);
  std::vector<std::set<std::size_t>> loops_of(n);  // headers of the loops containing b
  for (auto [tail, head] : back) {
    std::vector<bool> in(n, false);
    in[head] = true;
    std::vector<std::size_t> work{tail};
    while (!work.empty()) {
      std::size_t x = work.back();
      work.pop_back();
      if (in[x]) continue;
      in[x] = true;
      for (std::size_t p : pred[x]) work.push_back(p);
    }
    for (std::size_t x = 0; x < n; ++x)
      if (in[x]) loops_of[x].insert(head);
  }
  std::vector<bool> seen(n, false);
  std::vector<std::size_t> post;
  std::function<void(std::size_t)> visit = [&](std::size_t b) {
    seen[b] = true;
    std::vector<std::size_t> s(succ[b].rbegin(), succ[b].rend());
    // Successors outside one of b's loops first (they end up later in RPO).
    std::stable_sort(s.begin(), s.end(), [&](std::size_t x, std::size_t y) {
      auto leaves = [&](std::size_t t) {
        return !std::includes(loops_of[t].begin(), loops_of[t].end(), loops_of[b].begin(), loops_of[b].end());
      };
      return leaves(x) && !leaves(y);
    });
    for (std::size_t t : s)
      if (!seen[t]) visit(t);
    post.push_back(b);
  };
  visit(0);
  BlockOrder result;
  result.order.assign(post.rbegin(), post.rend());
  result.reachable = seen;
  return result;
}

}  // namespace qgpu::simt::lower
