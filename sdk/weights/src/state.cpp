#include "qgpu/weights/state.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace qgpu::weights {

namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// The query a read port builds for address `row` (emit(): pre-SiLU A·(matching rails − (n − 1))
// on the RAM's key rows, nothing elsewhere), through the layer's conv (tap 1), SiLU and l2norm,
// scaled by 1/√dk — rounded where the reference model rounds.
std::vector<float> read_query(int row, int rows, int addr_bits, std::int64_t dk, DType dt) {
  std::vector<float> q(static_cast<std::size_t>(dk), 0.0f);
  float qs = 0;
  for (int i = 0; i < rows && i < dk; ++i) {
    int differ = 0;
    for (int j = 0; j < addr_bits; ++j) differ += ((i ^ row) >> j) & 1;
    const float conv = round_to(dt, static_cast<float>(kGain * (1 - differ)));
    q[static_cast<std::size_t>(i)] = conv == 0 ? 0.0f : round_to(dt, silu_in(dt, conv));
  }
  for (float v : q) qs += v * v;
  const float qr = rsqrt(qs + kEps), sqrt_dk = std::sqrt(static_cast<float>(dk));
  for (float& v : q) v = (v * qr) / sqrt_dk;
  return q;
}

// What value channel j of a head holds in a clean written row: a bit's rails, a
// constant-one pad, or nothing.
enum class Role { kBitOne, kBitZero, kPadOne, kPadZero, kUnused };

struct HeadRead {
  std::vector<float> raw;  // S[h][row][j]
  std::vector<float> out;  // the gated norm's output (1 for a stored 1)
  bool zero = true;        // every retrieved value is exactly 0
};

}  // namespace

sdk::Expected<int> find_ram(const CompiledCircuit& cc, const std::string& name) {
  for (std::size_t i = 0; i < cc.rams.size(); ++i)
    if (cc.rams[i].name == name) return static_cast<int>(i);
  std::string names;
  for (const RamPlacement& p : cc.rams) names += (names.empty() ? "" : ", ") + p.name;
  return sdk::not_found("no ram named " + name +
                        " in the compiled circuit (rams: " + (names.empty() ? std::string("none") : names) + ")");
}

sdk::Expected<std::vector<std::uint64_t>> read_ram(const CompiledCircuit& cc, int ram, const StateView& state,
                                                   const RamReadOptions& options) {
  if (ram < 0 || ram >= static_cast<int>(cc.rams.size()))
    return sdk::invalid_argument("read_ram: ram index " + std::to_string(ram) + " outside the circuit's " +
                                 std::to_string(cc.rams.size()) + " rams");
  const RamPlacement& p = cc.rams[static_cast<std::size_t>(ram)];
  const std::string rn = "read_ram " + p.name;
  const int first_bit = std::max(options.first_bit, 0);
  if (options.first_bit >= p.width || options.first_bit < -1)
    return sdk::invalid_argument(rn + ": first bit " + std::to_string(options.first_bit) + " outside its " +
                                 std::to_string(p.width) + " bits");
  if (options.first_bit < 0 && p.width > 64)
    return sdk::unsupported(rn + ": " + std::to_string(p.width) + " bits wide, a word holds 64 (over by " +
                            std::to_string(p.width - 64) + "; read it 64 bits at a time with first_bit)");
  if (p.replicas.empty()) return sdk::invalid_argument(rn + ": no port reads it, so no layer's state holds it");
  if (options.row < -1 || options.row >= p.rows)
    return sdk::invalid_argument(rn + ": row " + std::to_string(options.row) + " outside its " +
                                 std::to_string(p.rows) + " rows");
  if (options.replica < -1 || options.replica >= static_cast<int>(p.replicas.size()))
    return sdk::invalid_argument(rn + ": replica " + std::to_string(options.replica) + " of " +
                                 std::to_string(p.replicas.size()));
  const sdk::LayerShapes& s = cc.target.shapes;
  const std::int64_t nv = s.linear_num_value_heads, dk = s.linear_key_head_dim, dv = s.linear_value_head_dim;
  const DType dt = state.dtype;
  const float eps = s.rms_norm_eps > 0 ? static_cast<float>(s.rms_norm_eps) : kEps;
  const int bph = p.bits_per_head;

  std::vector<int> replicas;
  for (int i = 0; i < static_cast<int>(p.replicas.size()); ++i)
    if (options.replica < 0 || options.replica == i) replicas.push_back(i);
  for (int i : replicas) {
    const RamReplica& rep = p.replicas[static_cast<std::size_t>(i)];
    const std::string where = rn + ": replica " + std::to_string(i) + " in layer " + std::to_string(rep.layer);
    if (rep.layer < 0 || rep.layer >= static_cast<int>(cc.layers.size()))
      return sdk::invalid_argument(where + ": the circuit has " + std::to_string(cc.layers.size()) + " layers");
    if (rep.layer >= static_cast<int>(state.layers.size()) || state.layers[rep.layer].data == nullptr)
      return sdk::invalid_argument(where + ": the state view has no state for that layer (" +
                                   std::to_string(state.layers.size()) + " layers given)");
    const LayerStateView& v = state.layers[rep.layer];
    if (v.value_heads != nv || v.key_dim != dk || v.value_dim != dv)
      return sdk::invalid_argument(where + ": state is [" + std::to_string(v.value_heads) + "][" +
                                   std::to_string(v.key_dim) + "][" + std::to_string(v.value_dim) +
                                   "], the target's shapes give [" + std::to_string(nv) + "][" + std::to_string(dk) +
                                   "][" + std::to_string(dv) + "]");
    if (rep.first_value_head < 0 || rep.first_value_head + rep.value_heads > nv)
      return sdk::internal_error(where + ": value heads " + std::to_string(rep.first_value_head) + ".." +
                                 std::to_string(rep.first_value_head + rep.value_heads - 1) + " outside " +
                                 std::to_string(nv));
  }

  auto role = [&](int head, std::int64_t j) {
    if (j >= 2 * bph) return Role::kUnused;
    const int b = head * bph + static_cast<int>(j / 2);
    if (b < p.width) return j % 2 == 0 ? Role::kBitOne : Role::kBitZero;
    return j % 2 == 0 ? Role::kPadOne : Role::kPadZero;
  };

  // Reads one row of one replica; an unclean row is an error naming its first odd channel.
  auto read_row = [&](int replica, int row) -> sdk::Expected<std::uint64_t> {
    const RamReplica& rep = p.replicas[static_cast<std::size_t>(replica)];
    const LayerStateView& v = state.layers[rep.layer];
    const GdnLayer& g = cc.layers[static_cast<std::size_t>(rep.layer)].gdn;
    const float w = round_to(dt, static_cast<float>(dt == DType::kBF16 ? g.norm_weight_bf16 : g.norm_weight_f32));
    const std::vector<float> q = read_query(row, p.rows, rep.addr_bits, dk, dt);
    std::vector<HeadRead> heads(static_cast<std::size_t>(rep.value_heads));
    bool written = false;
    for (int t = 0; t < rep.value_heads; ++t) {
      HeadRead& hr = heads[static_cast<std::size_t>(t)];
      const std::int64_t h = rep.first_value_head + t;
      hr.raw.assign(static_cast<std::size_t>(dv), 0.0f);
      hr.out.assign(static_cast<std::size_t>(dv), 0.0f);
      std::vector<float> o(static_cast<std::size_t>(dv), 0.0f);
      for (std::int64_t j = 0; j < dv; ++j) hr.raw[static_cast<std::size_t>(j)] = v.at(h, row, j);
      // o = Sᵀq as the layer sums it (zero query entries add nothing), then its gated RMSNorm.
      for (std::int64_t i = 0; i < dk; ++i) {
        if (q[static_cast<std::size_t>(i)] == 0) continue;
        for (std::int64_t j = 0; j < dv; ++j)
          o[static_cast<std::size_t>(j)] += v.at(h, i, j) * q[static_cast<std::size_t>(i)];
      }
      float ss = 0;
      for (float& x : o) {
        x = round_to(dt, x);
        ss += x * x;
      }
      const float rr = rsqrt(ss / static_cast<float>(dv) + eps);
      for (std::int64_t j = 0; j < dv; ++j) {
        const float x = o[static_cast<std::size_t>(j)];
        if (x == 0) continue;
        hr.zero = false;
        hr.out[static_cast<std::size_t>(j)] = round_to(dt, w * round_to(dt, x * rr));
      }
      written = written || !hr.zero;
    }
    if (!written) return std::uint64_t{0};  // never written: the read port adds nothing

    std::uint64_t word = 0;
    for (int t = 0; t < rep.value_heads; ++t) {
      const HeadRead& hr = heads[static_cast<std::size_t>(t)];
      bool clean = true;
      for (std::int64_t j = 0; j < dv && clean; j += 2) {
        const float a = hr.out[static_cast<std::size_t>(j)], b = hr.out[static_cast<std::size_t>(j + 1)];
        switch (role(t, j)) {
          case Role::kBitOne:
            clean = (a == 1 && b == 0) || (a == 0 && b == 1);
            if (const int bit = t * bph + static_cast<int>(j / 2) - first_bit; a == 1 && bit >= 0 && bit < 64)
              word |= std::uint64_t{1} << bit;
            break;
          case Role::kPadOne: clean = a == 1 && b == 0; break;
          default: clean = a == 0 && b == 0; break;
        }
      }
      if (clean) continue;
      // Name the channel that breaks the row's pattern: a value other than 0 and the row's
      // common nonzero value, else a pair or pad with the wrong rails, else the first odd output.
      std::map<float, int> count;
      for (float x : hr.raw)
        if (x != 0) ++count[x];
      float common = 0;
      int best = 0;
      for (auto [x, n] : count) {
        if (n <= best) continue;
        best = n;
        common = x;
      }
      std::int64_t bad = -1;
      for (std::int64_t j = 0; j < dv && bad < 0; ++j) {
        const float x = hr.raw[static_cast<std::size_t>(j)];
        if (x != 0 && x != common) bad = j;
      }
      for (std::int64_t j = 0; j < dv && bad < 0; j += 2) {
        const bool a = hr.raw[static_cast<std::size_t>(j)] != 0, b = hr.raw[static_cast<std::size_t>(j + 1)] != 0;
        const Role r = role(t, j);
        if (r == Role::kBitOne ? a == b : r == Role::kPadOne ? (!a || b) : (a || b)) bad = j;
      }
      for (std::int64_t j = 0; j < dv && bad < 0; j += 2) {
        const float a = hr.out[static_cast<std::size_t>(j)], b = hr.out[static_cast<std::size_t>(j + 1)];
        const Role r = role(t, j);
        if (r == Role::kBitOne   ? !((a == 1 && b == 0) || (a == 0 && b == 1))
            : r == Role::kPadOne ? !(a == 1 && b == 0)
                                 : !(a == 0 && b == 0))
          bad = j;
      }
      if (bad < 0) bad = 0;
      const std::int64_t j0 = bad & ~std::int64_t{1};
      const Role r = role(t, j0);
      const std::int64_t h = rep.first_value_head + t;
      std::string what = r == Role::kBitOne   ? "bit " + std::to_string(t * bph + j0 / 2)
                         : r == Role::kPadOne ? "pad " + std::to_string(t * bph + j0 / 2 - p.width) + " (constant 1)"
                                              : "unused channels";
      std::string expect = r == Role::kBitOne   ? "a stored bit reads (1, 0) or (0, 1)"
                           : r == Role::kPadOne ? "a pad reads (1, 0)"
                                                : "unused channels read (0, 0)";
      const auto at = [&](std::int64_t j) { return static_cast<std::size_t>(j); };
      return sdk::Status(sdk::ErrorCode::kInvalidArgument,
                         rn + " row " + std::to_string(row) + " " + what + ": rails read (" + num(hr.out[at(j0)]) +
                             ", " + num(hr.out[at(j0 + 1)]) + ") from state (" + num(hr.raw[at(j0)]) + ", " +
                             num(hr.raw[at(j0 + 1)]) + ") (replica " + std::to_string(replica) + ": layer " +
                             std::to_string(rep.layer) + ", value head " + std::to_string(h) + ", channels " +
                             std::to_string(j0) + "/" + std::to_string(j0 + 1) + "); " + expect +
                             ", a row never written reads 0 in every head");
    }
    return word;
  };

  const int first = options.row < 0 ? 0 : options.row, last = options.row < 0 ? p.rows : options.row + 1;
  std::vector<std::uint64_t> out;
  out.reserve(static_cast<std::size_t>(last - first));
  for (int row = first; row < last; ++row) {
    std::uint64_t agreed = 0;
    for (std::size_t k = 0; k < replicas.size(); ++k) {
      auto word = read_row(replicas[k], row);
      if (!word) return word.status();
      if (k > 0 && *word != agreed)
        return sdk::invalid_argument(rn + " row " + std::to_string(row) + ": replica " + std::to_string(replicas[k]) +
                                     " (layer " + std::to_string(p.replicas[replicas[k]].layer) + ") reads " +
                                     hex(*word) + " but replica " + std::to_string(replicas[0]) + " (layer " +
                                     std::to_string(p.replicas[replicas[0]].layer) + ") reads " + hex(agreed) +
                                     " (bits " + hex(*word ^ agreed) + " differ)");
      agreed = *word;
    }
    out.push_back(agreed);
  }
  return out;
}

}  // namespace qgpu::weights
