// The weight compiler (compile.h): schedule, channel allocation and emission over one Circuit and
// Target. Slightly over 700 lines: the three passes share the allocation helpers and the schedule's
// checks, and compile() is the only caller of each.
#include "qgpu/weights/compile.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "compile_internal.h"
#include "qgpu/weights/reference.h"

namespace qgpu::weights {

namespace {

std::string num(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

std::string neuron_key(const Neuron& n) {
  auto terms = [](std::vector<Term> t) {
    std::sort(t.begin(), t.end(), [](const Term& x, const Term& y) {
      return std::tie(x.bit.field, x.bit.bit, x.bit.neg) < std::tie(y.bit.field, y.bit.bit, y.bit.neg);
    });
    std::string s;
    for (const Term& x : t)
      s += std::to_string(x.bit.field) + ":" + std::to_string(x.bit.bit) + (x.bit.neg ? "n" : "p") + "=" +
           num(x.weight) + ",";
    return s;
  };
  return terms(n.gate.terms) + "|" + num(n.gate.bias) + "|" + terms(n.up.terms) + "|" + num(n.up.bias);
}

}  // namespace

std::int64_t unique_neuron_count(const MlpOp& op) {
  std::set<std::string> keys;
  for (const Neuron& n : op.neurons) keys.insert(neuron_key(n));
  return static_cast<std::int64_t>(keys.size());
}

namespace {

sdk::Status check_shapes(const sdk::LayerShapes& s) {
  if (s.hidden_size <= 0 || s.intermediate_size <= 0 || s.linear_num_key_heads <= 0 || s.linear_num_value_heads <= 0 ||
      s.linear_key_head_dim <= 0 || s.linear_value_head_dim < 4 || s.linear_conv_kernel < 4)
    return sdk::invalid_argument("target shapes: every size must be positive and the conv kernel at least 4");
  if (s.linear_num_value_heads % s.linear_num_key_heads != 0)
    return sdk::invalid_argument("target shapes: value heads (" + std::to_string(s.linear_num_value_heads) +
                                 ") must be a multiple of key heads (" + std::to_string(s.linear_num_key_heads) + ")");
  return sdk::Status::ok();
}

int bits_per_head(const sdk::LayerShapes& s) {
  return static_cast<int>(s.linear_value_head_dim / 4);
}

int gdn_width(const Circuit& c, const Op& op) {
  if (op.gdn.kind == GdnOp::Kind::kRamRead) return c.rams()[op.gdn.ram].width;
  return static_cast<int>(op.gdn.src.size());
}

}  // namespace

std::int64_t detail::key_heads_of(const Circuit& c, const Op& op, const sdk::LayerShapes& s) {
  std::int64_t vheads = (gdn_width(c, op) + bits_per_head(s) - 1) / bits_per_head(s);
  std::int64_t r = s.linear_num_value_heads / s.linear_num_key_heads;
  return (vheads + r - 1) / r;
}

using detail::key_heads_of;
using detail::root_of;

std::int64_t CompiledCircuit::total_neurons() const {
  std::int64_t n = 0;
  for (const LayerUse& u : schedule.use) n += u.mlp_neurons;
  return n;
}

sdk::Expected<Schedule> schedule(const Circuit& circuit, const Target& target) {
  QGPU_RETURN_IF_ERROR(check_shapes(target.shapes));
  const auto& s = target.shapes;
  const auto& fields = circuit.fields();
  // Sub-layer index at which each bit becomes final: 2L = GDN of layer L, 2L+1 = its MLP; -1 = embedding.
  std::vector<std::vector<int>> ready(fields.size());
  for (std::size_t f = 0; f < fields.size(); ++f) ready[f].assign(static_cast<std::size_t>(fields[f].width), -1);
  std::vector<int> last_read(fields.size(), -1);  // per root slot: latest layer that reads it
  Schedule out;
  const auto& ops = circuit.ops();
  out.op_layer.assign(ops.size(), -1);
  out.op_first_head.assign(ops.size(), -1);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    int r = -1;
    for (const Bit& b : op.reads) r = std::max(r, ready[b.field][b.bit]);
    int layer = 0;
    if (op.is_mlp) {
      while (2 * layer + 1 <= r) ++layer;
    } else {
      while (2 * layer <= r) ++layer;
    }
    if (op.overwrites >= 0) layer = std::max(layer, last_read[root_of(circuit, op.overwrites)]);
    std::int64_t need = op.is_mlp ? unique_neuron_count(op.mlp) : key_heads_of(circuit, op, s);
    std::int64_t cap = op.is_mlp ? s.intermediate_size : s.linear_num_key_heads;
    const char* res = op.is_mlp ? "MLP neurons" : "Gated DeltaNet key heads";
    if (need > cap)
      return sdk::limit_exceeded("op " + op.name + ": needs " + std::to_string(need) + " " + res + ", a layer has " +
                                 std::to_string(cap) + " (over by " + std::to_string(need - cap) + ")");
    for (;; ++layer) {
      if (target.max_layers > 0 && layer >= target.max_layers) {
        std::int64_t used = layer - 1 < static_cast<int>(out.use.size()) && layer >= 1
                                ? (op.is_mlp ? out.use[layer - 1].mlp_neurons : out.use[layer - 1].key_heads)
                                : 0;
        return sdk::limit_exceeded("layer " + std::to_string(layer - 1) + ": " + res + ": op " + op.name + " needs " +
                                   std::to_string(need) + ", " + std::to_string(used) + " of " + std::to_string(cap) +
                                   " used (over by " + std::to_string(used + need - cap) + ") and the limit is " +
                                   std::to_string(target.max_layers) + " layers");
      }
      if (static_cast<int>(out.use.size()) <= layer) out.use.resize(static_cast<std::size_t>(layer) + 1);
      std::int64_t& used = op.is_mlp ? out.use[layer].mlp_neurons : out.use[layer].key_heads;
      if (used + need <= cap) {
        if (!op.is_mlp) out.op_first_head[i] = static_cast<int>(used);
        used += need;
        break;
      }
    }
    out.op_layer[i] = layer;
    const int done = op.is_mlp ? 2 * layer + 1 : 2 * layer;
    for (const Bit& b : op.writes)
      ready[b.field][b.bit] = std::max(ready[b.field][b.bit], done);  // shared reads: the last port
    for (const Bit& b : op.reads) {
      int root = root_of(circuit, b.field);
      last_read[root] = std::max(last_read[root], layer);
    }
  }
  out.num_layers = static_cast<int>(out.use.size());
  return out;
}

namespace detail {

std::vector<int> pad_squares(int r) {
  if (r <= 0) return {};
  for (int n = 1; n <= 4; ++n) {
    std::vector<int> pick;
    std::function<bool(int, int, int)> go = [&](int left, int k, int maxv) -> bool {
      if (k == 0) return left == 0;
      for (int v = std::min(maxv, static_cast<int>(std::sqrt(left))); v >= 1; --v) {
        pick.push_back(v);
        if (go(left - v * v, k - 1, v)) return true;
        pick.pop_back();
      }
      return false;
    };
    if (go(r, n, 256)) return pick;
  }
  return {};
}

int root_of(const Circuit& c, int f) {
  int a = c.fields()[f].alias_of;
  return a >= 0 ? a : f;
}

int last_alias(const Circuit& c, int f) {
  while (c.fields()[f].superseded_by >= 0) f = c.fields()[f].superseded_by;
  return f;
}

int op_sublayer(const Circuit& c, const Schedule& s, std::size_t i) {
  return c.ops()[i].is_mlp ? 2 * s.op_layer[i] + 1 : 2 * s.op_layer[i];
}

std::vector<std::int64_t> mlp_neurons_by_layer(const Circuit& c, const Schedule& s) {
  std::vector<std::int64_t> n(static_cast<std::size_t>(std::max(s.num_layers, 0)), 0);
  for (std::size_t i = 0; i < c.ops().size() && i < s.op_layer.size(); ++i)
    if (c.ops()[i].is_mlp && s.op_layer[i] >= 0 && s.op_layer[i] < s.num_layers)
      n[s.op_layer[i]] += unique_neuron_count(c.ops()[i].mlp);
  return n;
}

sdk::Status add_pads(Allocation& a, const Target& target, int next, std::int64_t pairs, const std::string& detail) {
  // Σ normalized² must equal hidden_size exactly: mean(x²) = u² = 64 at every norm.
  std::int64_t left = target.shapes.hidden_size - static_cast<std::int64_t>(kConstHi * kConstHi) - pairs;
  if (left < 0)
    return sdk::limit_exceeded("residual: sum of squares needs " + std::to_string(target.shapes.hidden_size - left) +
                               " units, hidden size " + std::to_string(target.shapes.hidden_size) + " gives " +
                               std::to_string(target.shapes.hidden_size) + " (over by " + std::to_string(-left) + ")" +
                               detail);
  std::vector<int> pads = pad_squares(static_cast<int>(left));
  for (int v : pads) {
    a.pad_channel.push_back(next++);
    a.pad_value.push_back(v);
  }
  const std::int64_t limit = channel_limit(target);
  if (next > limit) {
    const std::int64_t reserved = target.shapes.hidden_size - limit;
    return sdk::limit_exceeded(
        "residual: " + std::to_string(next) + " channels needed (" + std::to_string(pairs) + " bits" + detail +
        "), hidden size " + std::to_string(target.shapes.hidden_size) +
        (reserved > 0 ? " less " + std::to_string(reserved) + " reserved for the mute direction" : std::string()) +
        " (over by " + std::to_string(next - limit) + ")");
  }
  a.channels_used = next;
  return sdk::Status::ok();
}

}  // namespace detail

namespace {

// Every field on its own channels for the whole depth.
sdk::Expected<Allocation> allocate_plain(const Circuit& circuit, const Target& target) {
  const auto& fields = circuit.fields();
  Allocation a;
  a.hidden_size = target.shapes.hidden_size;
  int next = 0;
  a.const_hi = next++;
  if (target.mute_channel) a.mute = next++;
  a.field_base.assign(fields.size(), -1);
  std::int64_t pairs = 0;
  for (std::size_t f = 0; f < fields.size(); ++f) {
    if (fields[f].alias_of >= 0) continue;
    a.field_base[f] = next;
    next += fields[f].width;
    pairs += fields[f].width;
  }
  for (std::size_t f = 0; f < fields.size(); ++f)
    if (fields[f].alias_of >= 0) a.field_base[f] = a.field_base[fields[f].alias_of];
  QGPU_RETURN_IF_ERROR(detail::add_pads(a, target, next, pairs, ""));
  return a;
}

}  // namespace

namespace {

// Moves the mute channel from channel 1 to Target::mute_index; every other
// channel keeps its order (the allocators put the bias channel at 0 and the
// fields from 2). A field crossing m is scattered around the mute channel.
sdk::Status place_mute(const Circuit& circuit, const Target& target, Allocation& a) {
  const int m = target.mute_index;
  if (m < 0) return sdk::Status::ok();
  const std::int64_t H = target.shapes.hidden_size;
  if (!target.mute_channel) return sdk::invalid_argument("Target::mute_index is set but Target::mute_channel is off");
  if (m >= H)
    return sdk::invalid_argument("Target::mute_index " + std::to_string(m) + " outside the residual: hidden size " +
                                 std::to_string(H));
  if (a.const_hi != 0 || a.mute != 1) return sdk::internal_error("place_mute: allocation not in the standard layout");
  const auto phi = [m](int ch) {
    if (ch == 1) return m;
    const int rank = ch == 0 ? 0 : ch - 1;  // among the channels other than the mute channel
    return rank < m ? rank : rank + 1;
  };
  const auto& fields = circuit.fields();
  std::vector<int> base(fields.size(), -1);
  std::vector<std::vector<int>> bits(fields.size());
  bool scattered = false;
  for (std::size_t f = 0; f < fields.size(); ++f) {
    if (fields[f].alias_of >= 0) continue;
    bool contiguous = true;
    std::vector<int> pos;
    for (int b = 0; b < fields[f].width; ++b) {
      pos.push_back(phi(a.channel(Bit{static_cast<int>(f), b, false})));
      contiguous = contiguous && pos.back() == pos.front() + b;
    }
    base[f] = pos.front();
    if (!contiguous) {
      bits[f] = std::move(pos);
      scattered = true;
    }
  }
  for (std::size_t f = 0; f < fields.size(); ++f)
    if (fields[f].alias_of >= 0) {
      base[f] = base[fields[f].alias_of];
      bits[f] = bits[fields[f].alias_of];
    }
  int used = 0;
  for (int ch = 0; ch < a.channels_used; ++ch) used = std::max(used, phi(ch) + 1);
  a.field_base = std::move(base);
  a.bit_channel = scattered ? std::move(bits) : std::vector<std::vector<int>>{};
  for (int& ch : a.pad_channel) ch = phi(ch);
  a.const_hi = phi(0);
  a.mute = m;
  a.channels_used = used;
  return sdk::Status::ok();
}

sdk::Expected<Allocation> allocate_logical(const Circuit& circuit, const Target& target, const Schedule& sched) {
  QGPU_RETURN_IF_ERROR(check_shapes(target.shapes));
  if (target.reuse_channels && target.reuse_eagerly) return detail::allocate_reusing(circuit, target, sched);
  auto plain = allocate_plain(circuit, target);
  if (!plain && target.reuse_channels) {
    // Fresh pairs first (fewest clears); if that packs too loosely, the smallest peak.
    auto lazy = detail::allocate_reusing(circuit, target, sched);
    if (lazy) return lazy;
    Target eager = target;
    eager.reuse_eagerly = true;
    auto tight = detail::allocate_reusing(circuit, eager, sched);
    return tight ? tight : lazy;
  }
  if (plain) plain->live_peak = detail::live_peak(circuit, live_ranges(circuit, target, sched));
  return plain;
}

}  // namespace

std::int64_t channel_limit(const Target& target) {
  const std::int64_t reserved = target.mute_channel ? std::max(target.mute_width, 1) - 1 : 0;
  return target.shapes.hidden_size - reserved;
}

void mark_free_channels(const Circuit& circuit, Allocation& a) {
  std::vector<char> used(static_cast<std::size_t>(std::max<std::int64_t>(a.hidden_size, 0)), 0);
  auto use = [&](int ch) {
    if (ch >= 0 && ch < static_cast<int>(used.size())) used[static_cast<std::size_t>(ch)] = 1;
  };
  use(a.const_hi);
  use(a.mute);
  for (int ch : a.pad_channel) use(ch);
  const auto& fields = circuit.fields();
  for (std::size_t f = 0; f < fields.size() && f < a.field_base.size(); ++f)
    for (int b = 0; b < fields[f].width; ++b) use(a.channel(Bit{static_cast<int>(f), b, false}));
  a.free.clear();
  for (std::size_t ch = 0; ch < used.size(); ++ch)
    if (!used[ch]) a.free.push_back(static_cast<int>(ch));
}

sdk::Expected<Allocation> allocate(const Circuit& circuit, const Target& target) {
  QGPU_RETURN_IF_ERROR(check_shapes(target.shapes));
  if (target.mute_channel && target.mute_width < 1)
    return sdk::invalid_argument("Target::mute_width " + std::to_string(target.mute_width) + " (at least 1)");
  if (target.reuse_channels) {
    auto sched = schedule(circuit, target);  // live ranges need the layers
    if (!sched) return sched.status();
    return allocate(circuit, target, *sched);
  }
  auto a = allocate_plain(circuit, target);
  if (a) QGPU_RETURN_IF_ERROR(place_mute(circuit, target, *a));
  if (a) mark_free_channels(circuit, *a);
  return a;
}

sdk::Expected<Allocation> allocate(const Circuit& circuit, const Target& target, const Schedule& sched) {
  auto a = allocate_logical(circuit, target, sched);
  if (a) QGPU_RETURN_IF_ERROR(place_mute(circuit, target, *a));
  if (a) mark_free_channels(circuit, *a);
  return a;
}

std::int64_t clear_neurons(const Circuit& circuit, const Allocation& allocation, int layer) {
  std::int64_t n = 0;
  for (const ChannelClear& cl : allocation.clears)
    if ((layer < 0 || cl.layer == layer) && cl.field >= 0 && cl.field < static_cast<int>(circuit.fields().size()))
      n += circuit.fields()[cl.field].width;
  return n;
}

namespace {

class Emitter {
 public:
  Emitter(const Circuit& c, const Target& t, const Allocation& a) : c_(c), t_(t), a_(a) {}

  // Adds an affine form (normalized units) to row `row` of `m`: each term on its
  // bit's channel (read_bit), and the bias, with the terms' constants, on the
  // constant channels as two bf16-exact weights (16·h + 1·l = bias).
  sdk::Status affine(SparseBuilder& m, std::int64_t row, const Affine& f, const std::string& what) {
    double bias = f.bias;
    for (const Term& term : f.terms) {
      const BitRead r = read_bit(a_, term.bit, term.weight);
      m.add(row, r.channel, r.weight);
      bias += r.bias;
    }
    if (bias != 0) {
      double h = static_cast<double>(round_bf16(static_cast<float>(bias / kConstHi)));
      double l = bias - kConstHi * h;
      if (!exact_in(DType::kBF16, h) || !exact_in(DType::kBF16, l))
        return sdk::unsupported(what + ": bias " + num(bias) + " cannot be split into bf16-exact weights");
      if (h != 0) m.add(row, a_.const_hi, h);
      if (l != 0) m.add(row, a_.channel(c_.one()), l);
    }
    return sdk::Status::ok();
  }
  void mute(SparseBuilder& m, std::int64_t row) {
    if (a_.mute >= 0) m.add(row, a_.mute, t_.mute_gain);
  }

 private:
  const Circuit& c_;
  const Target& t_;
  const Allocation& a_;
};

sdk::Status check_exact(const SparseMatrix& m, const std::string& what) {
  for (double v : m.val)
    if (!exact_in(DType::kBF16, v)) return sdk::unsupported(what + ": weight " + num(v) + " is not exact in bf16");
  return sdk::Status::ok();
}

}  // namespace

sdk::Status check_schedule(const Circuit& circuit, const Target& target, const Schedule& sched) {
  QGPU_RETURN_IF_ERROR(check_shapes(target.shapes));
  const auto& ops = circuit.ops();
  if (sched.op_layer.size() != ops.size() || sched.op_first_head.size() != ops.size())
    return sdk::invalid_argument("schedule has " + std::to_string(sched.op_layer.size()) + " ops, the circuit " +
                                 std::to_string(ops.size()));
  const auto& fields = circuit.fields();
  std::vector<std::vector<int>> ready(fields.size());
  for (std::size_t f = 0; f < fields.size(); ++f) ready[f].assign(static_cast<std::size_t>(fields[f].width), -1);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    const int layer = sched.op_layer[i];
    if (layer < 0 || layer >= sched.num_layers)
      return sdk::invalid_argument("schedule: op " + op.name + " is in layer " + std::to_string(layer) + " of " +
                                   std::to_string(sched.num_layers));
    const int at = op.is_mlp ? 2 * layer + 1 : 2 * layer;
    for (const Bit& b : op.reads)
      if (ready[b.field][b.bit] >= at)
        return sdk::invalid_argument("schedule: op " + op.name + " in layer " + std::to_string(layer) + " reads " +
                                     circuit.bit_name(b) + " before it is computed");
    for (const Bit& b : op.writes) ready[b.field][b.bit] = std::max(ready[b.field][b.bit], at);
  }
  // Budgets and head ranges.
  const auto& s = target.shapes;
  std::vector<std::int64_t> neurons(static_cast<std::size_t>(sched.num_layers), 0);
  std::vector<std::vector<int>> head_owner(static_cast<std::size_t>(sched.num_layers),
                                           std::vector<int>(static_cast<std::size_t>(s.linear_num_key_heads), -1));
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    const int layer = sched.op_layer[i];
    if (op.is_mlp) {
      neurons[layer] += unique_neuron_count(op.mlp);
      continue;
    }
    const std::int64_t first = sched.op_first_head[i], n = key_heads_of(circuit, op, s);
    if (first < 0 || first + n > s.linear_num_key_heads)
      return sdk::limit_exceeded("schedule: layer " + std::to_string(layer) + ": Gated DeltaNet key heads: op " +
                                 op.name + " wants heads " + std::to_string(first) + ".." +
                                 std::to_string(first + n - 1) + " of " + std::to_string(s.linear_num_key_heads));
    for (std::int64_t h = first; h < first + n; ++h) {
      int& owner = head_owner[layer][static_cast<std::size_t>(h)];
      if (owner >= 0)
        return sdk::invalid_argument("schedule: layer " + std::to_string(layer) + ": key head " + std::to_string(h) +
                                     " is used by both " + ops[owner].name + " and " + op.name);
      owner = static_cast<int>(i);
    }
  }
  for (int l = 0; l < sched.num_layers; ++l)
    if (neurons[l] > s.intermediate_size)
      return sdk::limit_exceeded(
          "schedule: layer " + std::to_string(l) + ": MLP neurons: " + std::to_string(neurons[l]) + " of " +
          std::to_string(s.intermediate_size) + " (over by " + std::to_string(neurons[l] - s.intermediate_size) + ")");
  return sdk::Status::ok();
}

sdk::Expected<std::vector<Layer>> emit(const Circuit& circuit, const Target& target, const Schedule& sched,
                                       const Allocation& alloc) {
  QGPU_RETURN_IF_ERROR(check_schedule(circuit, target, sched));
  QGPU_RETURN_IF_ERROR(check_allocation(circuit, target, sched, alloc));
  const auto& s = target.shapes;
  const std::int64_t H = s.hidden_size, I = s.intermediate_size, nk = s.linear_num_key_heads,
                     nv = s.linear_num_value_heads, dk = s.linear_key_head_dim, dv = s.linear_value_head_dim,
                     kern = s.linear_conv_kernel, kq = nk * dk, C = 2 * kq + nv * dv, r = nv / nk;
  const int bph = bits_per_head(s);
  const double u = kResidualUnit, A = kGain, B = kGain, Z = kGain, U = kValueUnit;
  if (sched.op_layer.size() != circuit.ops().size())
    return sdk::invalid_argument("schedule does not match the circuit (" + std::to_string(sched.op_layer.size()) +
                                 " ops scheduled, circuit has " + std::to_string(circuit.ops().size()) + ")");
  float w32 = calibrated_norm_weight(dk, dv, DType::kF32), w16 = calibrated_norm_weight(dk, dv, DType::kBF16);
  if (std::isnan(w32) || std::isnan(w16))
    return sdk::internal_error("no Gated DeltaNet norm weight reads a stored 1 exactly for dk=" + std::to_string(dk) +
                               ", dv=" + std::to_string(dv));
  Emitter em(circuit, target, alloc);
  const std::vector<int> modes = field_modes(circuit);  // gates the clears of moded slots
  std::vector<Layer> layers(static_cast<std::size_t>(sched.num_layers));
  for (int L = 0; L < sched.num_layers; ++L) {
    const std::string where = "layer " + std::to_string(L);
    SparseBuilder qkv(C, H), zb(nv * dv, H), bb(nv, H), ab(nv, H), ob(H, nv * dv);
    SparseBuilder gate(I, H), up(I, H), down(H, I);
    GdnLayer& g = layers[L].gdn;
    g.conv1d.assign(static_cast<std::size_t>(C * kern), 0.0);
    g.a_log.assign(static_cast<std::size_t>(nv), 0.0);
    g.dt_bias.assign(static_cast<std::size_t>(nv), kDtBias);
    g.norm_weight_f32 = w32;
    g.norm_weight_bf16 = w16;
    g.head_op.assign(static_cast<std::size_t>(nv), "");
    std::map<std::string, std::int64_t> neuron_index;
    MlpLayer& mlp = layers[L].mlp;
    // Identical neurons of a layer are merged (their down columns add up).
    auto add_neuron = [&](const Neuron& n, const std::string& op_name) -> sdk::Status {
      std::string key = neuron_key(n);
      auto it = neuron_index.find(key);
      std::int64_t idx;
      if (it == neuron_index.end()) {
        idx = static_cast<std::int64_t>(mlp.neuron_op.size());
        if (idx >= I)
          return sdk::limit_exceeded(where + ": MLP neurons: more than " + std::to_string(I) + " at op " + op_name);
        neuron_index.emplace(key, idx);
        mlp.neuron_op.push_back(op_name);
        QGPU_RETURN_IF_ERROR(em.affine(gate, idx, n.gate, where + " mlp gate of " + op_name));
        QGPU_RETURN_IF_ERROR(em.affine(up, idx, n.up, where + " mlp up of " + op_name));
        em.mute(gate, idx);
      } else {
        idx = it->second;
      }
      for (const Term& d : n.down) down.add(alloc.channel(d.bit), idx, write_weight(d.bit, d.weight) * u);
      return sdk::Status::ok();
    };
    for (std::size_t oi = 0; oi < circuit.ops().size(); ++oi) {
      if (sched.op_layer[oi] != L) continue;
      const Op& op = circuit.ops()[oi];
      if (op.is_mlp) {
        for (const Neuron& n : op.mlp.neurons) QGPU_RETURN_IF_ERROR(add_neuron(n, op.name));
        continue;
      }
      // Gated DeltaNet port: key heads [first, first + n) with their value heads.
      const GdnOp& gop = op.gdn;
      const int width = gdn_width(circuit, op);
      const std::int64_t units = key_heads_of(circuit, op, s);
      const std::int64_t first = sched.op_first_head[oi];
      if (first < 0 || first + units > nk)
        return sdk::invalid_argument(where + ": op " + op.name + " has no valid head range in the schedule");
      const bool is_read = gop.kind == GdnOp::Kind::kRamRead;
      const Ram* ram = is_read ? &circuit.rams()[gop.ram] : nullptr;
      const std::int64_t v_tap = is_read ? kern - 1 : kern - 1 - gop.lag;
      const Word& data = is_read ? ram->wr_data : gop.src;
      for (std::int64_t unit = first; unit < first + units; ++unit) {
        // Keys and queries: row i's pre-SiLU is A·(matches(i) - (n-1)): +A on the addressed row, <= 0 elsewhere.
        auto onehot = [&](std::int64_t base, const Word& addr, int rows) -> sdk::Status {
          for (int i = 0; i < rows && i < dk; ++i) {
            Affine f;
            for (std::size_t j = 0; j < addr.size(); ++j)
              f.terms.push_back(Term{((i >> j) & 1) ? addr[j] : !addr[j], A});
            f.bias = -A * (static_cast<double>(addr.size()) - 1);
            QGPU_RETURN_IF_ERROR(em.affine(qkv, base + i, f, where + " key/query of " + op.name));
            g.conv1d[static_cast<std::size_t>((base + i) * kern + kern - 1)] = 1;
          }
          return sdk::Status::ok();
        };
        if (is_read) {
          if (ram->rows > dk)
            return sdk::limit_exceeded("ram " + ram->owner + "." + ram->name + ": " + std::to_string(ram->rows) +
                                       " rows, a head holds " + std::to_string(dk) + " (over by " +
                                       std::to_string(ram->rows - dk) + ")");
          QGPU_RETURN_IF_ERROR(onehot(unit * dk, gop.addr, ram->rows));
          QGPU_RETURN_IF_ERROR(onehot(kq + unit * dk, ram->wr_addr, ram->rows));
        } else {
          for (std::int64_t base : {unit * dk, kq + unit * dk}) {
            QGPU_RETURN_IF_ERROR(em.affine(qkv, base, Affine{{}, A}, where + " " + op.name));
            g.conv1d[static_cast<std::size_t>(base * kern + kern - 1)] = 1;
          }
        }
        for (std::int64_t t = 0; t < r; ++t) {
          const std::int64_t vh = unit * r + t;
          const std::int64_t head_in_op = (unit - first) * r + t;
          const int lo = static_cast<int>(head_in_op) * bph;
          if (lo >= width) break;
          g.head_op[vh] = op.name;
          const std::int64_t vbase = 2 * kq + vh * dv;
          for (int j = 0; j < bph; ++j) {
            const std::int64_t ch0 = vbase + 2 * j, ch1 = ch0 + 1;
            if (lo + j < width) {
              // The row holds the bit as the pair (U·d, U·(1-d)): never negative, as SiLU
              // follows the conv, and with a read magnitude that does not depend on the data.
              Bit d = data[lo + j];
              QGPU_RETURN_IF_ERROR(em.affine(qkv, ch0, Affine{{Term{d, U}}, 0}, where + " value of " + op.name));
              QGPU_RETURN_IF_ERROR(em.affine(qkv, ch1, Affine{{Term{!d, U}}, 0}, where + " value of " + op.name));
              if (!is_read) {  // an earlier text token in the conv window reads as 0 (silu of -huge)
                em.mute(qkv, ch0);
                em.mute(qkv, ch1);
              }
              Bit o{gop.out_field, gop.out_offset + lo + j, false};
              ob.add(alloc.channel(o), vh * dv + 2 * j, write_weight(o, 1 / Z) * u);
              Affine zf = gop.enable ? Affine{{Term{*gop.enable, Z}, Term{!*gop.enable, -Z}}, 0} : Affine{{}, Z};
              QGPU_RETURN_IF_ERROR(em.affine(zb, vh * dv + 2 * j, zf, where + " z of " + op.name));
              em.mute(zb, vh * dv + 2 * j);
            } else {  // a constant 1 keeps a quarter of the row at U: the read magnitude stays exact
              QGPU_RETURN_IF_ERROR(
                  em.affine(qkv, ch0, Affine{{Term{circuit.one(), U}}, 0}, where + " value of " + op.name));
              if (!is_read) em.mute(qkv, ch0);
            }
            g.conv1d[static_cast<std::size_t>(ch0 * kern + v_tap)] = 1;
            g.conv1d[static_cast<std::size_t>(ch1 * kern + v_tap)] = 1;
          }
          Affine bf = Affine{{}, B};
          if (is_read && ram->wr_enable) bf = Affine{{Term{*ram->wr_enable, B}, Term{!*ram->wr_enable, -B}}, 0};
          QGPU_RETURN_IF_ERROR(em.affine(bb, vh, bf, where + " beta of " + op.name));
          em.mute(bb, vh);
          if (is_read && ram->clear) {
            // a = ±kClearA: with dt_bias -32, softplus gives 0 (decay exp(0) = 1, exactly)
            // or 224 (decay exp(-224) = 0, exactly, in fp32 and bf16); text tokens: a = -huge.
            const Affine af{{Term{*ram->clear, 2 * kClearA}}, -kClearA};
            QGPU_RETURN_IF_ERROR(em.affine(ab, vh, af, where + " decay of " + op.name));
            em.mute(ab, vh);
          }
        }
      }
    }
    // Channel reuse: a dead slot back to 0 by writing -x, silu(K(2x-1))·1 with -2u/K; a
    // moded slot's clear is off on the other mode's tokens, whose field may hold the channel.
    for (const ChannelClear& cl : alloc.clears) {
      if (cl.layer != L) continue;
      const std::string name = "clear." + circuit.fields()[cl.field].full_name();
      const int m = modes[static_cast<std::size_t>(detail::root_of(circuit, cl.field))];
      for (int b = 0; b < circuit.fields()[cl.field].width; ++b) {
        const Bit x{cl.field, b, false};
        Neuron n{Affine{{Term{x, 2 * kGain}}, -kGain}, Affine{{}, 1}, {Term{x, -1 / kGain}}};
        if (m != 0) {
          const Bit on = m > 0 ? *circuit.mode_bit() : !*circuit.mode_bit();
          n.gate.terms.push_back(Term{!on, -kEnableGain});
        }
        QGPU_RETURN_IF_ERROR(add_neuron(std::move(n), name));
      }
    }
    g.in_proj_qkv = qkv.build();
    g.in_proj_z = zb.build();
    g.in_proj_b = bb.build();
    g.in_proj_a = ab.build();
    g.out_proj = ob.build();
    mlp.gate = gate.build();
    mlp.up = up.build();
    mlp.down = down.build();
    for (auto [m, name] : {std::pair{&g.in_proj_qkv, "in_proj_qkv"},
                           {&g.in_proj_z, "in_proj_z"},
                           {&g.in_proj_b, "in_proj_b"},
                           {&g.out_proj, "out_proj"},
                           {&mlp.gate, "gate_proj"},
                           {&mlp.up, "up_proj"},
                           {&mlp.down, "down_proj"}})
      QGPU_RETURN_IF_ERROR(check_exact(*m, where + " " + name));
  }
  return layers;
}

std::vector<RamPlacement> ram_placements(const Circuit& circuit, const Target& target, const Schedule& sched) {
  // Mirrors emit(): a port's key heads [first, first + n) carry value heads from first·r on,
  // ceil(width / bits_per_head) of them.
  const auto& s = target.shapes;
  const int bph = bits_per_head(s);
  const std::int64_t r = s.linear_num_key_heads > 0 ? s.linear_num_value_heads / s.linear_num_key_heads : 0;
  std::vector<RamPlacement> out;
  for (const Ram& ram : circuit.rams())
    out.push_back(RamPlacement{ram.owner + "." + ram.name, ram.rows, ram.width, bph, {}});
  for (std::size_t i = 0; i < circuit.ops().size() && i < sched.op_layer.size(); ++i) {
    const Op& op = circuit.ops()[i];
    if (op.is_mlp || op.gdn.kind != GdnOp::Kind::kRamRead) continue;
    RamPlacement& p = out[static_cast<std::size_t>(op.gdn.ram)];
    p.replicas.push_back(RamReplica{static_cast<int>(i), sched.op_layer[i],
                                    static_cast<int>(sched.op_first_head[i] * r), (p.width + bph - 1) / bph,
                                    static_cast<int>(op.gdn.addr.size())});
  }
  return out;
}

sdk::Expected<CompiledCircuit> compile(const Circuit& circuit, const Target& target) {
  CompiledCircuit out;
  out.target = target;
  auto sched = schedule(circuit, target);
  if (!sched) return sched.status();
  auto alloc = allocate(circuit, target, *sched);
  if (!alloc) return alloc.status();
  auto layers = emit(circuit, target, *sched, *alloc);
  if (!layers) return layers.status();
  out.rams = ram_placements(circuit, target, *sched);
  out.schedule = std::move(*sched);
  out.allocation = std::move(*alloc);
  out.layers = std::move(*layers);
  for (std::size_t l = 0; l < out.layers.size(); ++l)
    out.schedule.use[l].mlp_neurons = out.layers[l].mlp.used_neurons();
  return out;
}

std::vector<float> embed(const Circuit& circuit, const Allocation& alloc,
                         const std::vector<std::pair<Word, std::uint64_t>>& values) {
  std::vector<float> x(static_cast<std::size_t>(alloc.hidden_size), 0.0f);
  const float u = static_cast<float>(kResidualUnit);
  x[alloc.const_hi] = static_cast<float>(kConstHi) * u;
  const auto& fields = circuit.fields();
  for (std::size_t f = 0; f < fields.size(); ++f) {
    if (fields[f].alias_of >= 0) continue;
    for (int b = 0; b < fields[f].width; ++b) x[alloc.channel(Bit{static_cast<int>(f), b, false})] = -u;
  }
  x[alloc.channel(circuit.one())] = u;
  for (std::size_t i = 0; i < alloc.pad_channel.size(); ++i)
    x[alloc.pad_channel[i]] = static_cast<float>(alloc.pad_value[i]) * u;
  for (const auto& [word, value] : values) {
    for (std::size_t i = 0; i < word.size(); ++i) {
      const bool v = (((value >> i) & 1) != 0) != word[i].neg;  // a NOT bit holds the opposite value
      x[alloc.channel(word[i])] = v ? u : -u;
    }
  }
  return x;
}

std::uint64_t read_word(const Allocation& alloc, const std::vector<float>& x, const Word& word, bool* exact) {
  const float u = static_cast<float>(kResidualUnit);
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < word.size(); ++i) {
    const float c = x[alloc.channel(word[i])];
    if (exact && c != u && c != -u) *exact = false;
    if ((c > 0) != word[i].neg) v |= 1ULL << i;
  }
  return v;
}

}  // namespace qgpu::weights
