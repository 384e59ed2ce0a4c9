// Tests of the assembled machine's EXEC pass (machine.h): real launches replayed token by
// token through the whole compiled circuit (ReferenceModel, fp32 and bf16). The prompt and
// the generated stream of record_launch() are fed as token ids; at every EXEC token the
// circuit's write-back inputs — the slots' emitted registers and values, the memory words
// written, the SCHED groups and the next control record — must be exactly what the stream
// holds between that EXEC and the next control record (the protocol is the oracle; nothing
// of the circuit's own output is expected).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <set>

#include "choice.h"
#include "circuit_harness.h"
#include "kernels.h"
#include "lower.h"
#include "machine.h"

namespace qgpu::simt::test {
namespace {

using circuit::Machine;
using weights::DType;
using weights::Word;

struct Rig {
  weights::Circuit c{"machine"};
  Machine m;
  weights::CompiledCircuit cc;
  weights::SparseMatrix unembed;  // the machine's rows (choice.h)
  int run_layers = 0;             // a model run's compile (machine_target(), only the next token read back)
  std::string error;
};

constexpr double kAlpha = 4;
constexpr std::int64_t kReadBackHidden = 4096;

// Live bits after each sub-layer (index 0: the embedding) under `schedule`, per token
// mode (weights::field_modes: [0] the EXEC tokens' channels, [1] the others'; a field of
// one mode shares channels with the other's).
std::array<std::vector<int>, 2> live_bits(const weights::Circuit& c, const weights::CompiledCircuit& cc,
                                          const weights::Schedule& schedule) {
  const auto lr = weights::live_ranges(c, cc.target, schedule);
  const std::vector<int> modes = weights::field_modes(c);
  const int subs = 2 * schedule.num_layers;
  std::array<std::vector<int>, 2> live;
  for (auto& v : live) v.assign(static_cast<std::size_t>(subs + 1), 0);
  std::vector<char> seen(c.fields().size(), 0);
  for (std::size_t f = 0; f < c.fields().size(); ++f) {
    const int root = lr[f].root < 0 ? static_cast<int>(f) : lr[f].root;
    if (seen[static_cast<std::size_t>(root)]++) continue;
    for (int sl = -1; sl < subs; ++sl)
      if (lr[f].live_after(sl))
        for (int t = 0; t < 2; ++t)
          if (modes[f] == 0 || (modes[f] > 0) == (t == 0))
            live[t][static_cast<std::size_t>(sl + 1)] += c.fields()[f].width;
  }
  return live;
}

std::vector<int> either_mode(const std::array<std::vector<int>, 2>& live) {
  std::vector<int> w(live[0].size());
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::max(live[0][i], live[1][i]);
  return w;
}

// The same ops, each moved as late as its readers allow (an estimate for the scheduler:
// per-layer budgets and overwrite order are not re-checked here).
weights::Schedule as_late_as_possible(const weights::Circuit& c, const weights::Schedule& asap) {
  weights::Schedule s = asap;
  const auto& ops = c.ops();
  std::map<std::pair<int, int>, std::vector<std::size_t>> writers;  // (field, bit) -> ops
  for (std::size_t i = 0; i < ops.size(); ++i)
    for (const weights::Bit& b : ops[i].writes) writers[{b.field, b.bit}].push_back(i);
  std::vector<int> latest(ops.size(), std::numeric_limits<int>::max());
  for (std::size_t j = ops.size(); j-- > 0;) {
    // Op j's sub-layer is now final: bound its producers.
    if (latest[j] == std::numeric_limits<int>::max()) latest[j] = 2 * asap.op_layer[j] + (ops[j].is_mlp ? 1 : 0);
    const int sj = latest[j];
    s.op_layer[j] = sj / 2;
    for (const weights::Bit& b : ops[j].reads) {
      auto it = writers.find({b.field, b.bit});
      if (it == writers.end()) continue;
      for (std::size_t i : it->second) {
        if (i >= j) continue;
        // A producer's sub-layer must precede the reader's (an MLP feeds the next layer's GDN).
        int bound = sj - 1;
        if (ops[i].is_mlp && !ops[j].is_mlp) bound = sj - 1;  // MLP L -> GDN L+1
        latest[i] = std::min(
            latest[i], ops[i].is_mlp ? (bound % 2 == 1 ? bound : bound - 1) : (bound % 2 == 0 ? bound : bound - 1));
      }
    }
  }
  return s;
}

// Where the residual goes: live bits per sub-layer (the more of the two token modes),
// and at the widest point the owners holding them (QGPU_PEAK_FIELDS=1: every field there).
void print_live(const weights::Circuit& c, const weights::CompiledCircuit& cc, const char* what) {
  const auto both = live_bits(c, cc, cc.schedule);
  const std::vector<int> live = either_mode(both);
  const auto lr = weights::live_ranges(c, cc.target, cc.schedule);
  const std::vector<int> modes = weights::field_modes(c);
  const int subs = 2 * cc.schedule.num_layers;
  int peak = 0;
  for (int sl = 0; sl <= subs; ++sl)
    if (live[static_cast<std::size_t>(sl)] > live[static_cast<std::size_t>(peak)]) peak = sl;
  const int track = both[0][static_cast<std::size_t>(peak)] >= both[1][static_cast<std::size_t>(peak)] ? 0 : 1;
  std::printf("machine (%s): live bits per layer (after its MLP):", what);
  for (int l = 0; l < cc.schedule.num_layers; ++l) std::printf(" %d", live[static_cast<std::size_t>(2 * l + 2)]);
  std::printf("\nmachine (%s): peak %d bits after sub-layer %d (%s tokens); by owner:", what,
              live[static_cast<std::size_t>(peak)], peak - 1, track == 0 ? "EXEC" : "record");
  std::map<std::string, int> by_owner;
  int other = 0;  // bits of the other mode on the same channels
  std::vector<char> seen(c.fields().size(), 0);
  for (std::size_t f = 0; f < c.fields().size(); ++f) {
    const int root = lr[f].root < 0 ? static_cast<int>(f) : lr[f].root;
    if (seen[static_cast<std::size_t>(root)]++ || !lr[f].live_after(peak - 1)) continue;
    if (modes[f] != 0 && (modes[f] > 0) != (track == 0))
      other += c.fields()[f].width;
    else
      by_owner[c.fields()[f].owner] += c.fields()[f].width;
  }
  for (const auto& [owner, bits] : by_owner)
    if (bits >= 32) std::printf(" %s %d,", owner.c_str(), bits);
  if (std::getenv("QGPU_PEAK_FIELDS")) {
    std::fill(seen.begin(), seen.end(), 0);
    for (std::size_t f = 0; f < c.fields().size(); ++f) {
      const int root = lr[f].root < 0 ? static_cast<int>(f) : lr[f].root;
      if (seen[static_cast<std::size_t>(root)]++ || !lr[f].live_after(peak - 1)) continue;
      if (modes[f] != 0 && (modes[f] > 0) != (track == 0)) continue;
      std::printf("\n  %s.%s %d", c.fields()[f].owner.c_str(), c.fields()[f].name.c_str(), c.fields()[f].width);
    }
  }
  std::printf(" and %d bits of the other token mode on the same channels", other);
  const std::vector<int> late = either_mode(live_bits(c, cc, as_late_as_possible(c, cc.schedule)));
  std::printf("\nmachine (%s): every op as late as its readers allow (estimate): peak %d bits\n", what,
              *std::max_element(late.begin(), late.end()));
}

const Rig& rig() {
  static std::unique_ptr<Rig> r = [] {
    auto x = std::make_unique<Rig>();
    auto m = circuit::build_machine(x->c);
    if (!m) {
      x->error = m.status().to_string();
      return x;
    }
    x->m = std::move(*m);
    std::vector<Word> outs;
    for (const circuit::SlotWrite& w : x->m.writes) {
      outs.push_back(w.dest);
      outs.push_back(w.emit);
      for (const Word& v : w.value) outs.push_back(v);
    }
    const circuit::MemWriteIn& mw = x->m.mem_writes;
    outs.push_back({mw.shared});
    for (int l = 0; l < 4; ++l) {
      outs.push_back({mw.writes[l]});
      outs.push_back(mw.word[l]);
      outs.push_back(mw.value[l]);
    }
    for (int gi = 0; gi < circuit::kExecGroups; ++gi) {  // the CTA groups are read by the generation tests
      const circuit::SchedGroup& g = x->m.groups[static_cast<std::size_t>(gi)];
      outs.push_back({g.valid});
      outs.push_back(g.lanes);
      outs.push_back(g.status);
      outs.push_back(g.block);
    }
    const circuit::ControlNext& n = x->m.next;
    outs.push_back({n.exec, n.sync, n.cta, n.halt});
    outs.push_back(n.block);
    outs.push_back(n.warp);
    outs.push_back(n.lanes);
    outs.push_back(n.cta_index);
    for (const Word& w : outs) {
      Word pos;
      for (const weights::Bit& b : w)
        if (b.field != 0) pos.push_back(weights::Bit{b.field, b.bit, false});
      if (pos.empty()) continue;
      auto st = x->c.mark_output(pos);
      if (!st.ok()) {
        x->error = st.to_string();
        return x;
      }
    }
    if (auto st = circuit::mark_choice_outputs(x->c, x->m.sequencer.next); !st.ok()) {
      x->error = st.to_string();
      return x;
    }
    // Reading every EXEC's results back keeps ~400 more fields live than a model run
    // needs: this compile takes a wider residual; the model run's is checked below.
    weights::Target t = circuit::machine_target();
    t.shapes.hidden_size = kReadBackHidden;
    const auto t0 = std::chrono::steady_clock::now();
    auto cc = weights::compile(x->c, t);
    if (!cc) {
      x->error = cc.status().to_string();
      return x;
    }
    x->cc = std::move(*cc);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::int64_t heads = 0, widest = 0;
    for (const weights::LayerUse& u : x->cc.schedule.use) {
      heads += u.key_heads;
      widest = std::max(widest, u.mlp_neurons);
    }
    std::printf(
        "machine: %d layers, %lld neurons (widest layer %lld), %lld key heads, %lld channels of %lld "
        "(compiled in %.1f s)\n",
        x->cc.schedule.num_layers, static_cast<long long>(x->cc.total_neurons()), static_cast<long long>(widest),
        static_cast<long long>(heads), static_cast<long long>(x->cc.allocation.channels_used),
        static_cast<long long>(t.shapes.hidden_size), secs);
    print_live(x->c, x->cc, "the test's read-back");
    {
      // A model run's compile (model_run.cpp): only the next token is read back.
      weights::Circuit rc{"machine"};
      auto rm = circuit::build_machine(rc);
      sdk::Status st = rm ? circuit::mark_choice_outputs(rc, rm->sequencer.next) : rm.status();
      auto rcc =
          st.ok() ? weights::compile(rc, circuit::machine_target()) : sdk::Expected<weights::CompiledCircuit>(st);
      if (!rcc) {
        x->error = "a model run's compile: " + rcc.status().to_string();
        return x;
      }
      x->run_layers = rcc->schedule.num_layers;
      std::printf("machine (a model run): %d layers, %lld neurons, %lld channels of %lld\n", rcc->schedule.num_layers,
                  static_cast<long long>(rcc->total_neurons()), static_cast<long long>(rcc->allocation.channels_used),
                  static_cast<long long>(rcc->target.shapes.hidden_size));
      print_live(rc, *rcc, "a model run: only the next token read back");
    }
    auto u = circuit::record_unembedding(x->m.sequencer.next, x->cc.allocation, kAlpha);
    if (!u) {
      x->error = u.status().to_string();
      return x;
    }
    x->unembed = std::move(*u);
    return x;
  }();
  return *r;
}

// What the stream holds between an EXEC and the next control record.
struct Expected {
  std::map<std::uint32_t, std::pair<std::uint32_t, std::array<std::uint32_t, 4>>> regs;  // reg → lanes, values
  std::map<std::uint32_t, std::uint32_t> words;                                          // word → value
  bool shared = false;
  std::vector<Record> scheds;
  Record next;
};

Expected expected_after(const std::vector<Record>& s, std::size_t i) {
  Expected e;
  for (std::size_t j = i + 1; j < s.size(); ++j) {
    const Record& r = s[j];
    if (r.kind == RecordKind::kWreg) {
      auto& [lanes, values] = e.regs[r.reg];
      lanes |= r.lanes;
      for (int l = 0; l < 4; ++l)
        if ((r.lanes >> l) & 1) values[l] = r.values[l];
    } else if (r.kind == RecordKind::kWmem) {
      e.shared = r.shared;
      for (std::uint32_t k = 0; k < r.count; ++k) e.words[r.word + k] = r.values[k];
    } else if (r.kind == RecordKind::kSched) {
      e.scheds.push_back(r);
    } else {
      e.next = r;
      break;
    }
  }
  return e;
}

struct Stats {
  std::int64_t tokens = 0, execs = 0, items = 0, chosen = 0;
  double choice_margin = 1e30;
  double mlp_margin = 1e30, gdn_margin = 1e30;
};

void check_exec(const Rig& r, const std::vector<float>& y, const Expected& e, std::uint32_t warp,
                const std::string& where, Stats& st) {
  const Machine& m = r.m;
  auto rd = [&](const Word& w, const std::string& what) {
    return read_exact(r.cc, y, w, (where + " " + what).c_str());
  };
  // Registers.
  std::map<std::uint32_t, std::pair<std::uint32_t, std::array<std::uint32_t, 4>>> got;
  for (int s = 0; s < circuit::kWbSlots; ++s) {
    const std::string sn = "slot " + std::to_string(s);
    const auto emit = static_cast<std::uint32_t>(rd(m.writes[s].emit, sn + " emit"));
    if (emit == 0) continue;
    const auto d = static_cast<std::uint32_t>(rd(m.writes[s].dest, sn + " dest"));
    EXPECT_FALSE(got.count(d)) << where << ": register r" << d << " emitted by two slots";
    auto& [lanes, values] = got[d];
    lanes = emit;
    for (int l = 0; l < 4; ++l)
      if ((emit >> l) & 1) values[l] = static_cast<std::uint32_t>(rd(m.writes[s].value[l], sn + " value"));
  }
  EXPECT_EQ(got, e.regs) << where << ": register write-backs differ";
  // Memory.
  std::map<std::uint32_t, std::uint32_t> words;
  bool any = false;
  for (int l = 0; l < 4; ++l) {
    if (!rd({m.mem_writes.writes[l]}, "mem writes")) continue;
    any = true;
    words[static_cast<std::uint32_t>(rd(m.mem_writes.word[l], "mem word"))] =
        static_cast<std::uint32_t>(rd(m.mem_writes.value[l], "mem value"));
  }
  EXPECT_EQ(words, e.words) << where << ": memory write-backs differ";
  if (any) {
    EXPECT_EQ(rd({m.mem_writes.shared}, "mem shared") != 0, e.shared) << where << ": memory space";
  }
  // SCHED groups.
  std::vector<Record> scheds;
  for (int g = 0; g < circuit::kExecGroups; ++g) {
    if (!rd({m.groups[g].valid}, "group valid")) continue;
    scheds.push_back(sched_record(warp, static_cast<std::uint32_t>(rd(m.groups[g].lanes, "group lanes")),
                                  static_cast<LaneStatus>(rd(m.groups[g].status, "group status")),
                                  static_cast<std::uint32_t>(rd(m.groups[g].block, "group block"))));
  }
  ASSERT_EQ(scheds.size(), e.scheds.size()) << where << ": SCHED groups";
  for (std::size_t g = 0; g < scheds.size(); ++g)
    EXPECT_EQ(to_text(scheds[g]), to_text(e.scheds[g])) << where << ": SCHED group " << g;
  // The next control record.
  const circuit::ControlNext& n = m.next;
  const auto kind = rd({n.exec, n.sync, n.cta, n.halt}, "next kind");
  Record next;
  if (kind == 1)
    next = exec_record(static_cast<std::uint32_t>(rd(n.block, "next block")),
                       static_cast<std::uint32_t>(rd(n.warp, "next warp")),
                       static_cast<std::uint32_t>(rd(n.lanes, "next lanes")));
  else if (kind == 2)
    next = sync_record();
  else if (kind == 4)
    next = cta_record(static_cast<std::uint32_t>(rd(n.cta_index, "next cta")));
  else if (kind == 8)
    next = halt_record();
  else
    ADD_FAILURE() << where << ": next kind " << kind << " is not one-hot";
  EXPECT_EQ(to_text(next), to_text(e.next)) << where << ": next control record";
  st.items += static_cast<std::int64_t>(e.regs.size() + e.words.size() + e.scheds.size() + 1);
}

// The circuit's choice on residual `y`: the best of the machine's rows (choice.h).
sdk::Expected<circuit::Choice> choice(const Rig& r, const std::vector<float>& y) {
  std::vector<float> logits(static_cast<std::size_t>(r.unembed.rows), 0.f);
  for (std::int64_t row = 0; row < r.unembed.rows; ++row) {
    double acc = 0;
    for (std::int64_t p = r.unembed.row_ptr[row]; p < r.unembed.row_ptr[row + 1]; ++p)
      acc += r.unembed.val[p] * y[static_cast<std::size_t>(r.unembed.col[p])];
    logits[static_cast<std::size_t>(row)] = static_cast<float>(acc / weights::kResidualUnit);
  }
  return circuit::choose(logits);
}

// Feeds the prompt and the generated stream; checks every EXEC's write-back inputs and that
// after every token from RUN on the machine chooses the stream's next token (teacher
// forcing: the stream's token is fed whatever was chosen).
void replay(const std::string& name, const sdk::KernelIR& kernel, sdk::LaunchShape shape,
            const std::vector<sdk::LaunchArg>& args, DType dtype, Stats& st) {
  const Rig& r = rig();
  ASSERT_TRUE(r.error.empty()) << r.error;
  auto p = lower_kernel(kernel, shape, circuit_sizes());
  ASSERT_TRUE(p) << name << ": " << p.status().to_string();
  auto lr = record_launch(**p, args, {});
  ASSERT_TRUE(lr) << name << ": " << lr.status().to_string();
  std::vector<Record> s = lr->prompt;
  const std::size_t gen_start = s.size();
  s.insert(s.end(), lr->generated.begin(), lr->generated.end());
  // Every token of the stream with the record it belongs to.
  std::vector<std::int64_t> ids;
  std::vector<std::size_t> rec_of;
  for (std::size_t i = 0; i < s.size(); ++i) {
    auto t = circuit::record_token_ids(r.m.fd.records, s[i]);
    ASSERT_TRUE(t) << name << " record " << i << ": " << t.status().to_string();
    for (std::int64_t id : *t) {
      ids.push_back(id);
      rec_of.push_back(i);
    }
  }
  weights::ReferenceModel model(r.cc.layers, r.cc.target.shapes, dtype);
  for (std::size_t k = 0; k < ids.size(); ++k) {
    const std::size_t i = rec_of[k];
    const Record& rec = s[i];
    const std::string where =
        name + " token " + std::to_string(k) + " of record " + std::to_string(i) + " (" + to_text(rec) + ")";
    auto in = circuit::token_inputs(r.m.fd.records, ids[k]);
    ASSERT_TRUE(in) << where << ": " << in.status().to_string();
    const std::vector<float> y = run_token(model, r.c, r.cc, *in);
    ++st.tokens;
    if (i >= gen_start && rec.kind == RecordKind::kExec) {
      check_exec(r, y, expected_after(s, i), rec.warp, where, st);
      ++st.execs;
    }
    // From the RUN token (the prompt's last) on, the next token is the machine's choice.
    if (i + 1 >= gen_start && k + 1 < ids.size()) {
      auto ch = choice(r, y);
      const std::int64_t want = ids[k + 1] - r.m.fd.records.base;
      if (!ch || ch->offset != want) {
        auto w = token_record(want);
        auto g = ch ? token_record(ch->offset) : sdk::Expected<Record>(ch.status());
        ADD_FAILURE() << where << ": the machine chose " << (g ? to_text(*g) : g.status().to_string())
                      << ", the stream has " << (w ? to_text(*w) : "?");
      } else {
        st.choice_margin = std::min(st.choice_margin, ch->margin);
        ++st.chosen;
      }
    }
    if (::testing::Test::HasFailure()) return;
  }
  fold_margins(model, st.mlp_margin, st.gdn_margin);
}

// The launches of kernels.h (several thread blocks included: the CTA token erases the
// registers and shared memory, its SCHED groups start the other warps), plus
// single-thread-block versions of some: every generated token is checked.
std::vector<LaunchCase> cases() {
  std::vector<LaunchCase> v = real_launches();
  {
    std::vector<std::int32_t> in(8);
    for (int i = 0; i < 8; ++i) in[i] = 7 * i - 40;
    v.push_back({"reduce 1x8 (barriers, shared memory)", reduce_kernel(), {1, 8}, {arr("in", in), arr("out", {0})}});
  }
  {
    std::vector<std::int32_t> a(10), b(10), c(10, -7);
    for (int i = 0; i < 10; ++i) a[i] = i * i, b[i] = 50000 * i;
    v.push_back(
        {"vadd 1x7 (partial warp)", vadd_kernel(), {1, 7}, {arr("a", a), arr("b", b), arr("c", c), scalar("n", 6)}});
  }
  {
    // Shared memory and registers start at 0 in every thread block: each thread's atomic
    // on its shared word returns 0 in both blocks only if the CTA token erased the first
    // block's values (and `seen` is written back in block 1 only if its row was erased).
    IrBuilder b("shared_zero");
    const sdk::ValueId pout = b.ptr_param("out");
    b.k.shared.push_back({"s", 4 * 4, 4});
    const sdk::ValueId t = b.tid();
    const sdk::ValueId old =
        b.atomic(sdk::AtomicOp::kAdd, b.element(b.shared_addr(0), t), {b.c32(5)}, sdk::AddressSpace::kShared);
    const sdk::ValueId seen = b.load(b.element(b.shared_addr(0), t), sdk::AddressSpace::kShared);
    b.store(b.element(pout, b.global_index()),
            b.bin(sdk::Opcode::kAdd, old, b.bin(sdk::Opcode::kMul, seen, b.c32(10))));
    b.ret();
    v.push_back(
        {"shared memory starts at 0 in each block 3x4", b.k, {3, 4}, {arr("out", std::vector<std::int32_t>(12, -1))}});
  }
  v.push_back({"atomics 1x4",
               atomics_kernel(),
               {1, 4},
               {arr("a", {5, -9, 300, 42}), arr("m", std::vector<std::int32_t>(11, 0))}});
  return v;
}

void run_launches(DType dtype) {
  Stats st;
  for (const LaunchCase& c : cases()) {
    replay(c.name, c.kernel, c.shape, c.args, dtype, st);
    if (::testing::Test::HasFailure()) return;
  }
  if (::testing::Test::HasFailure()) return;
  std::printf(
      "machine (%s): %lld EXEC tokens checked (%lld write-back items), %lld generated tokens chosen exactly "
      "(min choice margin %g), %lld tokens fed; min margins mlp %g gdn %g\n",
      dtype == DType::kF32 ? "fp32" : "bf16", static_cast<long long>(st.execs), static_cast<long long>(st.items),
      static_cast<long long>(st.chosen), st.choice_margin, static_cast<long long>(st.tokens), st.mlp_margin,
      st.gdn_margin);
  EXPECT_GE(st.mlp_margin, 128);
  EXPECT_GE(st.gdn_margin, 128);
  EXPECT_LE(rig().run_layers, 45);  // the limit (the prior art's count)
}

TEST(CircuitMachine, ExecPassReplaysLaunchesFp32) {
  run_launches(DType::kF32);
}
TEST(CircuitMachine, ExecPassReplaysLaunchesBf16) {
  run_launches(DType::kBF16);
}

}  // namespace
}  // namespace qgpu::simt::test
