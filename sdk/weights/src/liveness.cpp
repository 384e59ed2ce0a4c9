// Channel reuse: live ranges of the residual's slots over the schedule, the
// interval-colouring allocator with clear neurons, and the check of an allocation.
#include <algorithm>
#include <array>
#include <climits>
#include <map>
#include <set>
#include <string>

#include "compile_internal.h"

namespace qgpu::weights {

using detail::last_alias;
using detail::root_of;

std::vector<int> field_modes(const Circuit& circuit) {
  const auto& fields = circuit.fields();
  const auto& ops = circuit.ops();
  const std::size_t nf = fields.size();
  std::vector<int> zero(nf, 0);  // +1 / -1: exactly 0 wherever the mode bit is 0 / 1
  const std::optional<Bit> e = circuit.mode_bit();
  if (!e) return zero;
  // The mode a gate implies: 0 on the tokens of the other mode.
  auto implies = [&](const std::optional<Bit>& g) -> int {
    if (!g || g->field <= 0) return 0;
    if (g->field == e->field && g->bit == e->bit) return g->neg ? -1 : 1;
    return g->neg ? 0 : zero[static_cast<std::size_t>(g->field)];
  };
  auto gate_of = [](const Op& op) { return op.is_mlp ? op.guard : op.gdn.enable; };
  std::vector<std::vector<int>> writers(nf);
  for (std::size_t i = 0; i < ops.size(); ++i)
    for (const Bit& b : ops[i].writes) {
      auto& w = writers[static_cast<std::size_t>(b.field)];
      if (w.empty() || w.back() != static_cast<int>(i)) w.push_back(static_cast<int>(i));
    }
  // Zero outside a mode: every writer gated by a bit implying it (a gate's field comes
  // first, so the passes settle quickly; each pass only adds modes).
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t f = 0; f < nf; ++f) {
      const Field& fd = fields[f];
      if (zero[f] != 0 || fd.kind != FieldKind::kComputed || fd.alias_of >= 0 || fd.superseded_by >= 0 ||
          writers[f].empty())
        continue;
      const int m = implies(gate_of(ops[static_cast<std::size_t>(writers[f].front())]));
      if (m == 0) continue;
      bool all = true;
      for (int w : writers[f]) all = all && implies(gate_of(ops[static_cast<std::size_t>(w)])) == m;
      if (all) {
        zero[f] = m;
        changed = true;
      }
    }
  }
  // Shared only when every reader is gated by the field's mode and its value is never
  // seen elsewhere: gates, write enables, RAM clears, lagged reads, read-back.
  std::vector<int> mode = zero;
  auto unshare = [&](const Bit& b) {
    if (b.field >= 0) mode[static_cast<std::size_t>(b.field)] = 0;
  };
  auto need = [&](const Bit& b, int m) {
    if (b.field >= 0 && zero[static_cast<std::size_t>(b.field)] != m) unshare(b);
  };
  mode[static_cast<std::size_t>(e->field)] = 0;
  for (std::size_t f = 0; f < nf; ++f)
    if (circuit.is_output(static_cast<int>(f))) mode[f] = 0;
  for (const Ram& r : circuit.rams()) {
    const int m = implies(r.wr_enable);
    for (const Bit& b : r.wr_addr) need(b, m);
    for (const Bit& b : r.wr_data) need(b, m);
    if (r.wr_enable) unshare(*r.wr_enable);
    if (r.clear) unshare(*r.clear);
  }
  for (const Op& op : ops) {
    if (op.is_mlp) {
      const int m = implies(op.guard);
      for (const Bit& b : op.reads) need(b, m);
      if (op.guard) unshare(*op.guard);
      continue;
    }
    if (op.gdn.enable) unshare(*op.gdn.enable);
    if (op.gdn.kind == GdnOp::Kind::kPrevious) {
      for (const Bit& b : op.gdn.src) unshare(b);
      continue;
    }
    const int m = implies(op.gdn.enable);
    for (const Bit& b : op.gdn.addr) need(b, m);
  }
  return mode;
}

std::vector<LiveRange> live_ranges(const Circuit& circuit, const Target& target, const Schedule& sched) {
  const auto& fields = circuit.fields();
  const auto& ops = circuit.ops();
  const std::size_t nf = fields.size();
  std::vector<LiveRange> slot(nf);
  std::vector<int> first_write(nf, INT_MAX);  // per root: earliest write of the root's own bits
  std::vector<std::vector<char>> written(nf);
  std::vector<char> read(nf, 0);  // per field (not root)
  for (std::size_t f = 0; f < nf; ++f) written[f].assign(static_cast<std::size_t>(fields[f].width), 0);
  for (std::size_t i = 0; i < ops.size() && i < sched.op_layer.size(); ++i) {
    const int at = detail::op_sublayer(circuit, sched, i);
    for (const Bit& b : ops[i].reads) {
      LiveRange& r = slot[root_of(circuit, b.field)];
      r.last_read = std::max(r.last_read, at);
      read[b.field] = 1;
    }
    for (const Bit& b : ops[i].writes) {
      const int root = root_of(circuit, b.field);
      slot[root].last_write = std::max(slot[root].last_write, at);
      if (b.field == root) first_write[root] = std::min(first_write[root], at);
      written[b.field][b.bit] = 1;
    }
  }
  for (std::size_t f = 0; f < nf; ++f) {
    if (fields[f].alias_of >= 0) continue;
    LiveRange& r = slot[f];
    r.root = static_cast<int>(f);
    const bool all_written = std::all_of(written[f].begin(), written[f].end(), [](char w) { return w != 0; });
    // A placeholder bit never written reads as 0 from the embedding on: held from the start.
    r.start = fields[f].kind == FieldKind::kComputed && all_written ? first_write[f] : -1;
    r.forever = fields[f].kind == FieldKind::kConstant;
  }
  for (std::size_t f = 0; f < nf; ++f) {
    LiveRange& r = slot[root_of(circuit, static_cast<int>(f))];
    if (circuit.is_output(static_cast<int>(f))) r.forever = true;
    // The end of an alias chain that no op reads is read back after the last layer.
    if (target.keep_unread_fields && fields[f].superseded_by < 0 && !read[f]) r.forever = true;
  }
  // The mode bit gates the clears of moded fields (field_modes), placed after the schedule.
  if (const auto e = circuit.mode_bit()) slot[root_of(circuit, e->field)].forever = true;
  for (std::size_t f = 0; f < nf; ++f)
    if (fields[f].alias_of >= 0) slot[f] = slot[fields[f].alias_of];
  return slot;
}

namespace detail {

std::vector<int> live_bits(const Circuit& c, const std::vector<LiveRange>& live, int last) {
  const std::vector<int> mode = field_modes(c);
  for (const LiveRange& r : live) last = std::max({last, r.start, r.last_read, r.last_write});
  std::vector<int> bits;
  for (int b = -1; b <= last; ++b) {
    int n[2] = {0, 0};  // per token mode: channels that its fields and the unmoded ones need
    for (std::size_t f = 0; f < live.size(); ++f)
      if (c.fields()[f].alias_of < 0 && live[f].live_after(b))
        for (int t : tracks_of(mode[f])) n[t] += c.fields()[f].width;
    bits.push_back(std::max(n[0], n[1]));
  }
  return bits;
}

int live_peak(const Circuit& c, const std::vector<LiveRange>& live) {
  const std::vector<int> bits = live_bits(c, live);
  return bits.empty() ? 0 : *std::max_element(bits.begin(), bits.end());
}

namespace {

std::string layer_of(int sublayer) {
  if (sublayer < 0) return "the embedding";
  return "layer " + std::to_string(sublayer / 2) + (sublayer % 2 ? " (MLP)" : " (Gated DeltaNet)");
}

}  // namespace

// Slots in order of their start; each takes the best run of contiguous channels:
// channels that are fresh, already cleared, or dead with room for a clear in an MLP
// between the dead slot's last reader and this slot's first writer.
sdk::Expected<Allocation> allocate_reusing(const Circuit& circuit, const Target& target, const Schedule& sched) {
  const auto& fields = circuit.fields();
  const auto live = live_ranges(circuit, target, sched);
  const std::int64_t H = target.shapes.hidden_size, I = target.shapes.intermediate_size;
  Allocation a;
  a.hidden_size = H;
  int next = 0;
  a.const_hi = next++;
  if (target.mute_channel) a.mute = next++;
  const int first = next;
  a.field_base.assign(fields.size(), -1);
  // Channels the fresh region may take and still leave room for up to 4 pads and the squares.
  const std::int64_t budget =
      std::min<std::int64_t>(channel_limit(target) - first - 4, H - static_cast<std::int64_t>(kConstHi * kConstHi));
  std::vector<std::int64_t> room = mlp_neurons_by_layer(circuit, sched);
  for (std::int64_t& n : room) n = I - n;

  std::vector<int> roots;
  for (std::size_t f = 0; f < fields.size(); ++f)
    if (fields[f].alias_of < 0) roots.push_back(static_cast<int>(f));
  // By start; wider slots first among equals (fewer holes).
  std::stable_sort(roots.begin(), roots.end(), [&](int x, int y) {
    return live[x].start != live[y].start ? live[x].start < live[y].start : fields[x].width > fields[y].width;
  });

  const std::vector<int> mode = field_modes(circuit);
  // Per channel of the region, per token mode (tracks_of): its latest slot. A moded slot
  // takes one mode's track of a channel, an unmoded one both.
  std::vector<std::array<int, 2>> owner;
  std::vector<int> clear_at(fields.size(), INT_MAX);  // per root: sub-layer of its clear
  std::string clear_problem;                          // why a dead slot could not be reused (first seen)
  struct Need {
    int root;
    int sublayer;
  };
  a.bit_channel.assign(fields.size(), {});
  for (int g : roots) {
    const int w = fields[g].width, start = live[g].start;
    const std::vector<int> tracks = tracks_of(mode[g]);
    const int high = static_cast<int>(owner.size());
    std::string problem;  // why a dead slot could not be cleared for g (first seen)
    // Per dead slot on the region: the earliest MLP in its window with room for its clear (-1: none).
    std::map<int, int> clear_sub;
    auto clearable = [&](int o) -> int {
      auto it = clear_sub.find(o);
      if (it != clear_sub.end()) return it->second;
      const int lo = live[o].clear_from();
      int at = -1;
      for (int c = lo; c <= start && at < 0; c += 2)
        if (c / 2 < static_cast<int>(room.size()) && room[c / 2] >= fields[o].width) at = c;
      if (at < 0 && problem.empty()) {
        problem = "clearing " + fields[last_alias(circuit, o)].full_name() + " (" + std::to_string(fields[o].width) +
                  " neurons) for " + fields[g].full_name();
        if (lo > start) {
          problem += ": no MLP lies between its last use (" + layer_of(live[o].free_from()) + ") and " +
                     fields[g].full_name() + "'s writer (" + layer_of(start) + ")";
        } else {
          const int L = lo / 2;
          problem += " needs an MLP in layers " + std::to_string(L) + ".." + std::to_string((start - 1) / 2) +
                     ": layer " + std::to_string(L) + ": MLP neurons: " + std::to_string(I - room[L]) + " of " +
                     std::to_string(I) + " used (over by " + std::to_string(I - room[L] + fields[o].width - I) + ")";
        }
      }
      return clear_sub[o] = at;
    };
    // Channel state for g on its tracks: taken (a slot still live there), or free once
    // the dead slots on it (at most one per track) are cleared; fresh or cleared in time: free.
    std::vector<char> taken(static_cast<std::size_t>(high), 0);
    std::vector<std::vector<int>> dead(static_cast<std::size_t>(high));
    for (int q = 0; q < high; ++q)
      for (int t : tracks) {
        const int o = owner[q][t];
        if (o < 0) continue;
        if (clear_at[o] != INT_MAX) {
          if (clear_at[o] > start) taken[q] = 1;
        } else if (live[o].forever || live[o].clear_from() > start) {
          taken[q] = 1;
        } else if (std::find(dead[q].begin(), dead[q].end(), o) == dead[q].end()) {
          dead[q].push_back(o);
        }
      }
    auto is_free = [&](int q) { return !taken[q] && dead[q].empty(); };
    auto add_dead = [&](int q, std::vector<int>& dirty) {
      for (int o : dead[q])
        if (std::find(dirty.begin(), dirty.end(), o) == dirty.end()) dirty.push_back(o);
    };
    // Clears for a set of dead slots, each in the earliest MLP with room left (-1 if one cannot be placed).
    auto place = [&](const std::vector<int>& dirty, std::vector<Need>& needs) -> std::int64_t {
      std::map<int, std::int64_t> taken;
      std::int64_t cost = 0;
      for (int o : dirty) {
        if (clearable(o) < 0) return -1;
        int at = -1;
        for (int c = clearable(o); c <= start && at < 0; c += 2)
          if (room[c / 2] - taken[c / 2] >= fields[o].width) at = c;
        if (at < 0) return -1;
        taken[at / 2] += fields[o].width;
        needs.push_back(Need{o, at});
        cost += fields[o].width;
      }
      return cost;
    };
    using Key = std::tuple<int, int, std::int64_t, int, int>;
    auto key_of = [&](int end, std::int64_t cost, int p) -> Key {
      const int over = end > budget ? 1 : 0, growth = end - high;
      // Eagerly, or past the budget: the least growth first (the smallest peak); within the
      // budget and not eagerly: no clears first (fresh channels cost nothing).
      const bool grow_last = target.reuse_eagerly || over;
      return std::make_tuple(over, grow_last ? growth : 0, cost, growth, p);
    };
    bool found = false;
    Key best_key{};
    std::vector<int> best_chans;
    std::vector<Need> best_needs;
    for (int p = 0; p <= high; ++p) {  // contiguous runs; p = high (all fresh) always works
      bool ok = true;
      std::vector<int> dirty;
      for (int q = p; q < std::min(p + w, high) && ok; ++q) {
        if (taken[q])
          ok = false;
        else
          add_dead(q, dirty);
      }
      if (!ok) continue;
      std::vector<Need> needs;
      const std::int64_t cost = place(dirty, needs);
      if (cost < 0) continue;
      const Key key = key_of(std::max(high, p + w), cost, p);
      if (!found || key < best_key) {
        found = true;
        best_key = key;
        best_chans.clear();
        for (int q = p; q < p + w; ++q) best_chans.push_back(q);
        best_needs = std::move(needs);
      }
    }
    if (std::get<3>(best_key) > 0 && (target.reuse_eagerly || std::get<0>(best_key) == 1)) {
      // Scattered: the bits on free channels anywhere, then on dead slots' channels, growing only for the rest.
      std::vector<int> chans, dirty;
      for (int q = 0; q < high && static_cast<int>(chans.size()) < w; ++q)
        if (is_free(q)) chans.push_back(q);
      for (int q = 0; q < high && static_cast<int>(chans.size()) < w; ++q) {
        if (taken[q] || is_free(q)) continue;
        std::vector<int> trial = dirty;
        add_dead(q, trial);
        if (trial.size() != dirty.size()) {
          std::vector<Need> scratch;
          if (place(trial, scratch) < 0) continue;
          dirty = std::move(trial);
        }
        chans.push_back(q);
      }
      std::vector<Need> needs;
      const std::int64_t cost = place(dirty, needs);
      int end = high;
      while (static_cast<int>(chans.size()) < w) chans.push_back(end++);
      std::sort(chans.begin(), chans.end());
      const Key key = key_of(end, cost, chans.front());
      if (cost >= 0 && key < best_key) {
        best_key = key;
        best_chans = std::move(chans);
        best_needs = std::move(needs);
      }
    }
    if (std::get<0>(best_key) == 1 && clear_problem.empty()) clear_problem = problem;
    for (const Need& n : best_needs) {
      clear_at[n.root] = n.sublayer;
      room[n.sublayer / 2] -= fields[n.root].width;
      a.clears.push_back(ChannelClear{last_alias(circuit, n.root), n.sublayer / 2});
    }
    if (best_chans.back() >= high) owner.resize(static_cast<std::size_t>(best_chans.back() + 1), {-1, -1});
    for (int q : best_chans)
      for (int t : tracks) owner[q][t] = g;
    a.field_base[g] = first + best_chans.front();
    if (best_chans.back() - best_chans.front() + 1 != w)  // not contiguous: every bit's channel
      for (int q : best_chans) a.bit_channel[g].push_back(first + q);
  }
  for (std::size_t f = 0; f < fields.size(); ++f)
    if (fields[f].alias_of >= 0) {
      a.field_base[f] = a.field_base[fields[f].alias_of];
      a.bit_channel[f] = a.bit_channel[fields[f].alias_of];
    }
  bool scattered = false;
  for (const auto& v : a.bit_channel) scattered = scattered || !v.empty();
  if (!scattered) a.bit_channel.clear();
  std::sort(a.clears.begin(), a.clears.end(), [](const ChannelClear& x, const ChannelClear& y) {
    return std::tie(x.layer, x.field) < std::tie(y.layer, y.field);
  });
  a.live_peak = live_peak(circuit, live);
  const std::int64_t chans = static_cast<std::int64_t>(owner.size());
  std::string detail = "; with channel reuse: at most " + std::to_string(a.live_peak) + " bits live at once";
  if (!clear_problem.empty()) detail += "; a dead field's channels stayed unused: " + clear_problem;
  QGPU_RETURN_IF_ERROR(add_pads(a, target, first + static_cast<int>(chans), chans, detail));
  return a;
}

}  // namespace detail

sdk::Status check_allocation(const Circuit& circuit, const Target& target, const Schedule& sched,
                             const Allocation& alloc) {
  const auto& fields = circuit.fields();
  const std::int64_t H = target.shapes.hidden_size;
  if (alloc.hidden_size != H)
    return sdk::invalid_argument("allocation: hidden size " + std::to_string(alloc.hidden_size) + ", the target has " +
                                 std::to_string(H));
  if (alloc.field_base.size() != fields.size())
    return sdk::invalid_argument("allocation has " + std::to_string(alloc.field_base.size()) + " fields, the circuit " +
                                 std::to_string(fields.size()));
  if (alloc.pad_channel.size() != alloc.pad_value.size())
    return sdk::invalid_argument("allocation: pad channels and values differ in number");
  // Channel owners: -2 reserved (constants, mute, pads), else the slots on it.
  std::vector<std::vector<int>> on(static_cast<std::size_t>(H));
  std::vector<char> reserved(static_cast<std::size_t>(H), 0);
  auto reserve = [&](int ch, const std::string& what) -> sdk::Status {
    if (ch < 0 || ch >= H)
      return sdk::invalid_argument("allocation: " + what + " channel " + std::to_string(ch) + " outside the residual");
    if (reserved[ch]) return sdk::invalid_argument("allocation: channel " + std::to_string(ch) + " is reserved twice");
    reserved[ch] = 1;
    return sdk::Status::ok();
  };
  QGPU_RETURN_IF_ERROR(reserve(alloc.const_hi, "const_hi"));
  if (alloc.mute >= 0) QGPU_RETURN_IF_ERROR(reserve(alloc.mute, "mute"));
  double squares = kConstHi * kConstHi;
  for (std::size_t i = 0; i < alloc.pad_channel.size(); ++i) {
    QGPU_RETURN_IF_ERROR(reserve(alloc.pad_channel[i], "pad"));
    squares += alloc.pad_value[i] * alloc.pad_value[i];
  }
  if (!alloc.bit_channel.empty() && alloc.bit_channel.size() != fields.size())
    return sdk::invalid_argument("allocation: bit channels for " + std::to_string(alloc.bit_channel.size()) +
                                 " fields, the circuit has " + std::to_string(fields.size()));
  for (std::size_t f = 0; f < fields.size(); ++f) {
    const int root = root_of(circuit, static_cast<int>(f));
    const bool scattered = !alloc.bit_channel.empty() && !alloc.bit_channel[f].empty();
    if (scattered && static_cast<int>(alloc.bit_channel[f].size()) != fields[f].width)
      return sdk::invalid_argument("allocation: field " + fields[f].full_name() + " has " +
                                   std::to_string(alloc.bit_channel[f].size()) + " bit channels for " +
                                   std::to_string(fields[f].width) + " bits");
    const auto own = [&](int b) { return scattered ? alloc.bit_channel[f][b] : alloc.field_base[f] + b; };
    const auto rootc = [&](int b) {
      return !alloc.bit_channel.empty() && !alloc.bit_channel[root].empty() ? alloc.bit_channel[root][b]
                                                                            : alloc.field_base[root] + b;
    };
    for (int b = 0; b < fields[f].width; ++b) {
      const int ch = own(b);
      if (ch != rootc(b))
        return sdk::invalid_argument("allocation: field " + fields[f].full_name() + " aliases " +
                                     fields[root].full_name() + " but has other channels");
      if (ch < 0 || ch >= H)
        return sdk::invalid_argument("allocation: field " + fields[f].full_name() + " lies outside the residual");
      if (fields[f].alias_of >= 0) continue;
      if (reserved[ch])
        return sdk::invalid_argument("allocation: field " + fields[f].full_name() + " is on reserved channel " +
                                     std::to_string(ch));
      if (std::find(on[ch].begin(), on[ch].end(), static_cast<int>(f)) != on[ch].end())
        return sdk::invalid_argument("allocation: field " + fields[f].full_name() + " uses channel " +
                                     std::to_string(ch) + " twice");
      on[ch].push_back(static_cast<int>(f));
    }
  }
  const auto live = live_ranges(circuit, target, sched);
  std::vector<int> clear_at(fields.size(), INT_MAX);
  for (const ChannelClear& cl : alloc.clears) {
    if (cl.field < 0 || cl.field >= static_cast<int>(fields.size()))
      return sdk::invalid_argument("allocation: a clear names no field of the circuit");
    const int root = root_of(circuit, cl.field);
    const std::string name = fields[cl.field].full_name();
    if (cl.layer < 0 || cl.layer >= sched.num_layers)
      return sdk::invalid_argument("allocation: clear of " + name + " in layer " + std::to_string(cl.layer) + " of " +
                                   std::to_string(sched.num_layers));
    if (clear_at[root] != INT_MAX) return sdk::invalid_argument("allocation: " + name + " is cleared twice");
    const int at = 2 * cl.layer + 1;
    if (live[root].forever)
      return sdk::invalid_argument("allocation: clear of " + name + " in layer " + std::to_string(cl.layer) +
                                   ": it is read back after the last layer");
    if (at < live[root].clear_from())
      return sdk::invalid_argument("allocation: clear of " + name + " in layer " + std::to_string(cl.layer) +
                                   " while it is still live (until " + detail::layer_of(live[root].free_from()) + ")");
    clear_at[root] = at;
  }
  std::int64_t bits = 0;
  std::set<std::pair<int, int>> checked;
  const std::vector<int> mode = field_modes(circuit);
  for (std::int64_t ch = 0; ch < H; ++ch) {
    if (on[ch].empty()) continue;
    ++bits;
    // Per token mode, the slots on the channel follow each other (a moded slot is on one
    // mode's track, an unmoded slot on both: field_modes).
    for (int t : {0, 1}) {
      std::vector<int> v;
      for (int f : on[ch])
        if (mode[f] == 0 || (mode[f] > 0) == (t == 0)) v.push_back(f);
      std::stable_sort(v.begin(), v.end(), [&](int x, int y) { return live[x].start < live[y].start; });
      for (std::size_t k = 0; k + 1 < v.size(); ++k) {
        const int g = v[k], h = v[k + 1];
        if (!checked.insert({g, h}).second) continue;
        const LiveRange &lg = live[g], &lh = live[h];
        const std::string both = "allocation: fields " + fields[last_alias(circuit, g)].full_name() + " and " +
                                 fields[h].full_name() + " share channel " + std::to_string(ch);
        const std::string in = lh.start < 0 ? "at the embedding" : "in layer " + std::to_string(lh.start / 2);
        if (lg.forever || lg.clear_from() > lh.start || lg.start == lh.start)
          return sdk::invalid_argument(both + " but are both live " + in);
        if (clear_at[g] == INT_MAX)
          return sdk::invalid_argument(both + ": " + fields[last_alias(circuit, g)].full_name() +
                                       " is not cleared before " + fields[h].full_name() + " is written " + in);
        if (clear_at[g] > lh.start)
          return sdk::invalid_argument(both + ": " + fields[last_alias(circuit, g)].full_name() +
                                       " is cleared in layer " + std::to_string(clear_at[g] / 2) + ", after " +
                                       fields[h].full_name() + " is written " + in);
      }
    }
  }
  if (target.mute_channel) {  // room for the mute direction: mute_width - 1 channels nothing uses
    std::int64_t unused = 0;
    for (std::int64_t ch = 0; ch < H; ++ch) unused += on[ch].empty() && !reserved[ch] ? 1 : 0;
    if (unused < target.mute_width - 1)
      return sdk::invalid_argument("allocation: " + std::to_string(unused) +
                                   " channels left free, the mute direction needs " +
                                   std::to_string(target.mute_width - 1) + " besides the mute channel");
  }
  squares += static_cast<double>(bits);
  if (squares != static_cast<double>(H))
    return sdk::invalid_argument("allocation: constants, " + std::to_string(bits) +
                                 " bit channels and pads give a sum of squares of " + std::to_string(squares) +
                                 " units, the norm needs exactly the hidden size " + std::to_string(H));
  // Clears within the neuron budget of their layer.
  std::vector<std::int64_t> used = detail::mlp_neurons_by_layer(circuit, sched);
  for (int L = 0; L < sched.num_layers; ++L) {
    const std::int64_t c = clear_neurons(circuit, alloc, L);
    if (c > 0 && used[L] + c > target.shapes.intermediate_size)
      return sdk::limit_exceeded("allocation: layer " + std::to_string(L) +
                                 ": MLP neurons: " + std::to_string(used[L]) + " for ops + " + std::to_string(c) +
                                 " for clears of " + std::to_string(target.shapes.intermediate_size) + " (over by " +
                                 std::to_string(used[L] + c - target.shapes.intermediate_size) + ")");
  }
  return sdk::Status::ok();
}

}  // namespace qgpu::weights
