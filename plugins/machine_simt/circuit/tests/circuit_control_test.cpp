// Tests of the circuit unit "control" (control.h): real launches replayed token by token
// through the compiled circuit (Qwen3.5-2B shapes, ReferenceModel in fp32 and bf16). At
// every RUN, EXEC, SYNC and generated CTA token the circuit's next record and SCHED
// write-backs must equal record_launch()'s stream; branch conditions come from a test-side
// interpreter run (LaunchObserver), never from the circuit. Random launches on a test-side
// model of the scheduling rules cover what the kernels do not (ties, equal brc targets,
// every warp count, 128 thread blocks); off tokens must leave outputs and state untouched.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <random>

#include "circuit_harness.h"
#include "control.h"
#include "interp.h"
#include "isa.h"
#include "kernels.h"
#include "lower.h"

namespace qgpu::simt::test {
namespace {

using circuit::Control;
using circuit::ControlIn;
using circuit::NextKind;
using sdk::LaunchArg;
using weights::DType;
using weights::Word;

constexpr int kTestInputBits = kOpCount + 32 + 4;  // the ControlIn fields this test creates (term, cond)

struct Rig {
  weights::Circuit c{"control"};
  circuit::Records rec;
  ControlIn in;
  Control k;
  weights::CompiledCircuit cc;
};

std::vector<Word> all_outputs(const Control& k);

// Built and compiled once for the whole binary: the records stage (token ids → inputs) and the
// unit; the EXEC fields come from the records, the terminator and conditions from this test.
const Rig& rig() {
  static std::unique_ptr<Rig> r = [] {
    auto x = std::make_unique<Rig>();
    weights::Circuit& c = x->c;
    auto rec = circuit::build_records(c, kProtoRowsPerBlock);  // the prompt's ROM records too
    if (!rec) {
      ADD_FAILURE() << rec.status().to_string();
      return std::make_unique<Rig>();
    }
    x->rec = std::move(*rec);
    x->in.enable = x->rec.exec_is[0];
    x->in.warp = x->rec.exec_warp;
    x->in.lanes = x->rec.exec_lanes;
    x->in.term_opcode = *c.input("term", "opcode", kOpCount);
    x->in.term_imm = *c.input("term", "imm", 32);
    x->in.cond = *c.input("alu", "cond", 4);
    auto k = circuit::build_control(c, x->in, x->rec);
    if (!k) {
      ADD_FAILURE() << k.status().to_string();
      return std::make_unique<Rig>();  // no layers: every test fails its first check
    }
    x->k = *k;
    for (const Word& w : all_outputs(x->k)) {
      auto st = c.mark_output(w);
      if (!st.ok()) ADD_FAILURE() << st.to_string();
    }
    // Qwen3.5-2B shapes; dead fields' channels reused (the records' register/ROM write fields
    // have no reader here).
    weights::Target t;
    t.shapes = qwen2b_shapes();
    t.reuse_channels = true;
    t.keep_unread_fields = false;
    auto cc = weights::compile(c, t);
    if (!cc) {
      ADD_FAILURE() << cc.status().to_string();
      return std::make_unique<Rig>();
    }
    x->cc = std::move(*cc);
    return x;
  }();
  return *r;
}

using test::arr;
using test::scalar;

// Each executed block's lanes' registers after it ran: the terminator's condition register.
class BlockRegs final : public LaunchObserver {
 public:
  std::vector<std::array<std::array<std::uint32_t, 16>, 4>> regs;
  sdk::Status on_cta_start(std::uint32_t) override { return {}; }
  sdk::Status on_block(const BlockEvent& e) override {
    std::array<std::array<std::uint32_t, 16>, 4> r{};
    for (int l = 0; l < 4; ++l)
      if (e.regs[l]) r[l] = *e.regs[l];
    regs.push_back(r);
    return {};
  }
  sdk::Status on_barrier_release(std::uint32_t) override { return {}; }
  sdk::Status on_finish() override { return {}; }
};

// What the stream says follows a record: the next control record and the SCHEDs before it.
struct StreamNext {
  Record next;
  std::vector<Record> scheds;
};
StreamNext expected_after(const std::vector<Record>& s, std::size_t i) {
  StreamNext e;
  for (std::size_t j = i + 1; j < s.size(); ++j) {
    const RecordKind k = s[j].kind;
    if (k == RecordKind::kSched) e.scheds.push_back(s[j]);
    if (k == RecordKind::kExec || k == RecordKind::kSync || k == RecordKind::kCta || k == RecordKind::kHalt) {
      e.next = s[j];
      return e;
    }
  }
  ADD_FAILURE() << "no control record after record " << i;
  return e;
}

struct ReplayStats {
  int checked = 0, exec = 0, sync = 0, cta = 0, sched_groups = 0, tokens = 0;
  double min_margin = std::numeric_limits<double>::infinity();
};

std::vector<Word> all_outputs(const Control& k) {
  std::vector<Word> w = {k.next.kind, k.next.block, k.next.warp, k.next.lanes, k.next.cta,
                         k.cta_sched, k.ntid,       k.ctaid,     k.nctaid};
  for (const auto& g : k.groups) w.insert(w.end(), {Word{g.valid}, g.lanes, g.status, g.block});
  return w;
}

// The ControlIn of one EXEC token: the terminator and the lanes' branch conditions.
struct ExecIn {
  unsigned opcode = 0;
  std::uint32_t imm = 0;
  unsigned cond = 0;  // bit l: lane l's condition (lanes outside the mask: anything)
};

// Feeds a launch's prompt and generated records (one token per record; DATA tokens carry
// nothing for this unit) and checks the outputs after every control token. With `noise`,
// a token with random ControlIn fields but enable 0 is fed before every generated record:
// its outputs must be 0 and it must not change any state.
void replay_stream(const std::string& name, const std::vector<Record>& s, std::size_t gen_start,
                   const std::vector<ExecIn>& execs, std::uint32_t threads, std::uint32_t grid, DType dtype, bool noise,
                   ReplayStats& st) {
  const Rig& r = rig();
  ASSERT_GT(r.cc.schedule.num_layers, 0) << "the circuit did not compile";
  const Control& k = r.k;
  weights::ReferenceModel model(r.cc.layers, r.cc.target.shapes, dtype);
  std::mt19937 rng(static_cast<unsigned>(s.size()));
  std::size_t exec_index = 0;
  std::uint32_t cta = 0;
  const std::vector<Word> outs = all_outputs(k);
  auto zero_outputs = [&](const std::vector<float>& y, const std::string& where) {
    for (const Word& w : outs) {
      const std::uint64_t v = read_exact(r.cc, y, w, where.c_str());
      if (v != 0) {
        ADD_FAILURE() << where << ": an output is " << v << " on a token where the unit is off";
        return;
      }
    }
  };
  for (std::size_t i = 0; i < s.size(); ++i) {
    const Record& rec = s[i];
    const std::string where = name + " record " + std::to_string(i) + " (" + to_text(rec) + ")";
    if (noise && i >= gen_start) {
      Inputs in = {{r.in.warp, rng() & 7},  // EXEC fields without exec.is: not a protocol token
                   {r.in.lanes, rng() & 15},
                   {r.in.term_opcode, 1ull << (rng() % kOpCount)},
                   {r.in.term_imm, rng()},
                   {r.in.cond, rng() & 15}};
      zero_outputs(run_token(model, r.c, r.cc, in), where + " noise token");
      ++st.tokens;
    }
    // The record's token ids (protocol.h's encoding); every token's inputs from its id alone.
    auto ids = circuit::record_token_ids(r.rec, rec);
    ASSERT_TRUE(ids) << where << ": " << ids.status().to_string();
    std::vector<float> y;
    for (std::size_t t = 0; t < ids->size(); ++t) {
      auto ti = circuit::token_inputs(r.rec, (*ids)[t]);
      ASSERT_TRUE(ti) << where << ": " << ti.status().to_string();
      Inputs in = *ti;
      if (rec.kind == RecordKind::kExec) {
        ASSERT_LT(exec_index, execs.size()) << where;
        const ExecIn& x = execs[exec_index++];
        in.insert(in.end(), {{r.in.term_opcode, 1ull << x.opcode}, {r.in.term_imm, x.imm}, {r.in.cond, x.cond}});
      }
      y = run_token(model, r.c, r.cc, in);
      ++st.tokens;
      if (t + 1 < ids->size()) zero_outputs(y, where + " token " + std::to_string(t));
    }
    if (rec.kind == RecordKind::kCta) cta = rec.cta;
    if (rec.kind == RecordKind::kCta && i < gen_start) continue;  // CTA 0: the prompt's rows follow
    const bool control = rec.kind == RecordKind::kExec || rec.kind == RecordKind::kSync ||
                         rec.kind == RecordKind::kRun || rec.kind == RecordKind::kCta;
    if (!control) {
      zero_outputs(y, where);
      continue;
    }
    const StreamNext e = expected_after(s, i);
    auto rd = [&](const Word& w, const char* what) { return read_exact(r.cc, y, w, (where + " " + what).c_str()); };
    // The next control record as the circuit says it, compared as text.
    const std::uint64_t kind = rd(k.next.kind, "next.kind");
    std::string next = "next.kind = " + std::to_string(kind) + " (not one-hot)";
    if (kind == 1u << static_cast<int>(NextKind::kExec))
      next = to_text(exec_record(static_cast<std::uint32_t>(rd(k.next.block, "next.block")),
                                 static_cast<std::uint32_t>(rd(k.next.warp, "next.warp")),
                                 static_cast<std::uint32_t>(rd(k.next.lanes, "next.lanes"))));
    if (kind == 1u << static_cast<int>(NextKind::kSync)) next = to_text(sync_record());
    if (kind == 1u << static_cast<int>(NextKind::kCta))
      next = to_text(cta_record(static_cast<std::uint32_t>(rd(k.next.cta, "next.cta"))));
    if (kind == 1u << static_cast<int>(NextKind::kHalt)) next = to_text(halt_record());
    // SCHED write-backs: the EXEC's groups, or a CTA's "running B0" per warp.
    std::vector<Record> got;
    if (rec.kind == RecordKind::kExec) {
      for (const auto& g : k.groups) {
        if (rd(Word{g.valid}, "valid")) {
          const auto code = static_cast<unsigned>(rd(g.status, "status"));
          const LaneStatus ls = code == 1   ? LaneStatus::kRunning
                                : code == 2 ? LaneStatus::kBarrierEven
                                : code == 3 ? LaneStatus::kBarrierOdd
                                            : LaneStatus::kExited;
          got.push_back(sched_record(rec.warp, static_cast<std::uint32_t>(rd(g.lanes, "lanes")), ls,
                                     static_cast<std::uint32_t>(rd(g.block, "block"))));
        } else {
          EXPECT_EQ(rd(g.lanes, "lanes"), 0u) << where << ": an invalid group has lanes";
        }
      }
      EXPECT_EQ(rd(k.cta_sched, "cta_sched"), 0u) << where;
      EXPECT_EQ(rd(k.ntid, "ntid"), threads) << where;
      EXPECT_EQ(rd(k.nctaid, "nctaid"), grid) << where;
      EXPECT_EQ(rd(k.ctaid, "ctaid"), cta) << where;
      ++st.exec;
    } else {
      for (const auto& g : k.groups) {
        EXPECT_EQ(rd(Word{g.valid}, "valid"), 0u) << where;
      }
      const std::uint64_t cs = rd(k.cta_sched, "cta_sched");
      for (int v = 0; v < 8; ++v)
        if (const auto lanes = static_cast<std::uint32_t>((cs >> (4 * v)) & 15))
          got.push_back(sched_record(static_cast<std::uint32_t>(v), lanes, LaneStatus::kRunning, 0));
      if (rec.kind == RecordKind::kCta) ++st.cta;
      if (rec.kind == RecordKind::kSync) ++st.sync;
    }
    st.sched_groups += static_cast<int>(e.scheds.size());
    // One comparison per token: the SCHED records in order, then the next record.
    auto text = [](const std::vector<Record>& scheds, const std::string& last) {
      std::string t;
      for (const Record& x : scheds) t += to_text(x) + "; ";
      return t + last;
    };
    EXPECT_EQ(text(got, next), text(e.scheds, to_text(e.next))) << where;
    ++st.checked;
    if (::testing::Test::HasFailure()) return;  // one wrong token is enough to see
  }
  EXPECT_EQ(exec_index, execs.size()) << name;
  for (const auto& lm : model.margins()) st.min_margin = std::min({st.min_margin, lm.mlp_min, lm.gdn_min});
}

// A real launch: record_launch()'s stream; branch conditions from an interpreter run.
// `drop_prompt_sched`: leave out the prompt's SCHED record of that warp (the test of the test).
void replay(const std::string& name, const sdk::KernelIR& kernel, sdk::LaunchShape shape,
            const std::vector<LaunchArg>& args, DType dtype, bool noise, ReplayStats& st, int drop_prompt_sched = -1) {
  auto p = lower_kernel(kernel, shape, circuit_sizes());
  ASSERT_TRUE(p) << name << ": " << p.status().to_string();
  const Program& prog = **p;
  auto lr = record_launch(prog, args, {});
  ASSERT_TRUE(lr) << name << ": " << lr.status().to_string();
  BlockRegs obs;
  ASSERT_TRUE(interpret_program(prog, args, {}, &obs));
  auto layout = layout_arguments(prog, args);
  ASSERT_TRUE(layout);
  const std::vector<std::uint64_t> image = prog.image(layout->param_values);
  const int rows = prog.rows_per_block();
  std::vector<Record> s;
  for (const Record& rec : lr->prompt)
    if (rec.kind != RecordKind::kSched || static_cast<int>(rec.warp) != drop_prompt_sched) s.push_back(rec);
  const std::size_t gen_start = s.size();
  s.insert(s.end(), lr->generated.begin(), lr->generated.end());
  std::mt19937 rng(7);
  std::vector<ExecIn> execs;
  for (const Record& rec : lr->generated) {
    if (rec.kind != RecordKind::kExec) continue;
    ASSERT_LT(execs.size(), obs.regs.size());
    const std::uint64_t term = image[rec.block * rows + rows - 1];
    const unsigned a = (term >> kPosA) & 15;
    ExecIn x{static_cast<unsigned>(term & 63), static_cast<std::uint32_t>(term >> 32), 0};
    for (int l = 0; l < 4; ++l) {
      const bool c = (rec.lanes >> l) & 1 ? obs.regs[execs.size()][l][a] != 0 : (rng() & 1) != 0;
      x.cond |= (c ? 1u : 0u) << l;  // outside the mask: random, must be ignored
    }
    execs.push_back(x);
  }
  ASSERT_EQ(execs.size(), obs.regs.size());
  replay_stream(name, s, gen_start, execs, shape.block, shape.grid, dtype, noise, st);
}

// A random launch on a test-side model of docs/ISA.md §5 and docs/PROTOCOL.md §3.3 (written
// here from the documents, independent of protocol.cpp): random terminators (br, brc with
// taken / not-taken / equal targets, bar, exit; targets from a small range so that ties and
// reconvergence are frequent; garbage in the unused immediate bits), random conditions, every
// warp count and partial warp, several thread blocks.
struct Synth {
  std::vector<Record> stream;
  std::size_t gen_start = 0;
  std::vector<ExecIn> execs;
};

Synth synth_launch(std::mt19937& rng, std::uint32_t threads, std::uint32_t grid, int budget) {
  struct Lane {
    int st = 0;  // 0 absent, 1 running, 2 barrier, 3 exited
    std::uint32_t pc = 0;
  };
  struct Entry {
    LaneStatus status;
    std::uint32_t block;
    bool operator==(const Entry&) const = default;
  };
  struct Group {
    std::uint32_t warp, lanes;
    Entry e;
  };
  Synth out;
  auto& s = out.stream;
  const int nw = static_cast<int>((threads + 3) / 4);
  auto existing = [&](int w) {
    std::uint32_t m = 0;
    for (int l = 0; l < 4; ++l)
      if (static_cast<std::uint32_t>(4 * w + l) < threads) m |= 1u << l;
    return m;
  };
  std::vector<std::array<Entry, 4>> rows(static_cast<std::size_t>(nw));
  s.push_back(launch_record(threads, grid));
  s.push_back(cta_record(0));
  for (int w = 0; w < nw; ++w) {
    s.push_back(sched_record(static_cast<std::uint32_t>(w), existing(w), LaneStatus::kRunning, 0));
    if (existing(w) != 15u)
      s.push_back(sched_record(static_cast<std::uint32_t>(w), 15u & ~existing(w), LaneStatus::kExited, 0));
    for (int l = 0; l < 4; ++l)
      rows[w][l] = (existing(w) >> l) & 1 ? Entry{LaneStatus::kRunning, 0} : Entry{LaneStatus::kExited, 0};
  }
  s.push_back(run_record());
  out.gen_start = s.size();
  std::vector<Group> pending;
  auto flush = [&](const Record* next) {
    for (const Group& g : pending) {
      if (next && next->warp == g.warp && g.e.status == LaneStatus::kRunning && g.e.block == next->block) continue;
      std::uint32_t lanes = 0;
      for (int l = 0; l < 4; ++l)
        if (((g.lanes >> l) & 1) && !(rows[g.warp][l] == g.e)) lanes |= 1u << l, rows[g.warp][l] = g.e;
      if (lanes) s.push_back(sched_record(g.warp, lanes, g.e.status, g.e.block));
    }
    pending.clear();
  };
  for (std::uint32_t c = 0; c < grid; ++c) {
    std::vector<std::array<Lane, 4>> lanes(static_cast<std::size_t>(nw));
    for (int w = 0; w < nw; ++w)
      for (int l = 0; l < 4; ++l)
        if ((existing(w) >> l) & 1) lanes[w][l].st = 1;
    int parity = 0, steps = 0;
    if (c > 0) {
      pending.clear();
      s.push_back(cta_record(c));
      for (int w = 0; w < nw; ++w)
        pending.push_back({static_cast<std::uint32_t>(w), existing(w), {LaneStatus::kRunning, 0}});
    }
    for (;;) {
      for (int w = 0; w < nw; ++w)
        for (;;) {
          std::uint32_t b = kProtoBlocks, mask = 0;  // kProtoBlocks: no running lane
          for (const Lane& x : lanes[w])
            if (x.st == 1) b = std::min(b, x.pc);
          if (b == kProtoBlocks) break;
          for (int l = 0; l < 4; ++l)
            if (lanes[w][l].st == 1 && lanes[w][l].pc == b) mask |= 1u << l;
          const Record exec = exec_record(b, static_cast<std::uint32_t>(w), mask);
          flush(&exec);
          s.push_back(exec);
          const unsigned pick = steps++ >= budget ? 99u : static_cast<unsigned>(rng() % 100);
          const Op op = pick < 35 ? Op::kBr : pick < 75 ? Op::kBrc : pick < 88 ? Op::kBar : Op::kExit;
          const std::uint32_t range = rng() % 4 ? 8 : kProtoBlocks;
          const std::uint32_t t0 = rng() % range, t1 = rng() % 4 ? rng() % range : t0;
          std::uint32_t imm = t0 | (t1 << 16);
          if (op != Op::kBrc)
            imm = static_cast<std::uint32_t>(rng()) & ~(op == Op::kExit ? 0u : 0xffffu),
            imm |= op == Op::kExit ? 0u : t0;
          else
            imm |= static_cast<std::uint32_t>(rng()) & ~((kProtoBlocks - 1u) * 0x10001u);  // bits above the block numbers
          ExecIn x{static_cast<unsigned>(op), imm, static_cast<unsigned>(rng() & 15)};
          out.execs.push_back(x);
          for (int l = 0; l < 4; ++l) {
            if (!((mask >> l) & 1)) continue;
            Lane& ln = lanes[w][l];
            Entry e{LaneStatus::kRunning, 0};
            if (op == Op::kBr) ln.pc = t0;
            if (op == Op::kBrc) ln.pc = (x.cond >> l) & 1 ? t0 : t1;
            if (op == Op::kBar) ln.pc = t0, ln.st = 2;
            if (op == Op::kExit) ln.st = 3, ln.pc = 0;
            e.block = ln.pc;
            if (ln.st == 2) e.status = parity ? LaneStatus::kBarrierOdd : LaneStatus::kBarrierEven;
            if (ln.st == 3) e.status = LaneStatus::kExited;
            auto it = std::find_if(pending.begin(), pending.end(),
                                   [&](const Group& g) { return g.warp == static_cast<std::uint32_t>(w) && g.e == e; });
            if (it != pending.end())
              it->lanes |= 1u << l;
            else
              pending.push_back({static_cast<std::uint32_t>(w), 1u << l, e});
          }
        }
      bool waiting = false;
      for (auto& warp : lanes)
        for (Lane& x : warp)
          if (x.st == 2) x.st = 1, waiting = true;
      if (!waiting) break;
      flush(nullptr);
      s.push_back(sync_record());
      parity ^= 1;
    }
  }
  pending.clear();
  s.push_back(halt_record());
  return out;
}

using Case = LaunchCase;
std::vector<Case> cases() {
  return real_launches();
}

void print_cost() {
  static bool done = false;
  if (done) return;
  done = true;
  const Rig& r = rig();
  const auto& sch = r.cc.schedule;
  std::printf("[ control ] %d layers; per layer (MLP neurons / GDN key heads):", sch.num_layers);
  std::int64_t heads = 0;
  for (int l = 0; l < sch.num_layers; ++l) {
    std::printf(" %d: %lld/%lld", l, static_cast<long long>(sch.use[l].mlp_neurons),
                static_cast<long long>(sch.use[l].key_heads));
    heads += sch.use[l].key_heads;
  }
  std::printf(
      "\n[ control ] total %lld neurons, %lld heads (records stage included); residual %d channels with channel "
      "reuse (%d without this test's %d ControlIn input bits)\n",
      static_cast<long long>(r.cc.total_neurons()), static_cast<long long>(heads), r.cc.allocation.channels_used,
      r.cc.allocation.channels_used - kTestInputBits, kTestInputBits);
  // With the allocator's channel reuse (dead fields' channels go to later fields).
  weights::Target t = r.cc.target;
  t.reuse_channels = true;
  t.reuse_eagerly = true;
  auto reused = weights::compile(r.c, t);
  if (reused)
    std::printf(
        "[ control ] with channel reuse: %d channels, live peak %d bits (%d without the test's inputs)\n",
        reused->allocation.channels_used, reused->allocation.live_peak, reused->allocation.live_peak - kTestInputBits);
  else
    std::printf("[ control ] with channel reuse: %s\n", reused.status().to_string().c_str());
  // Where the stages landed.
  for (std::size_t i = 0; i < r.c.ops().size(); ++i) {
    const auto& op = r.c.ops()[i];
    if (op.is_mlp)
      std::printf("[ control ]   layer %d MLP: %s (%lld neurons)\n", sch.op_layer[i], op.name.c_str(),
                  static_cast<long long>(weights::unique_neuron_count(op.mlp)));
  }
}

void run_cases(DType dtype, bool noise) {
  ASSERT_TRUE(rig().cc.schedule.num_layers > 0);
  print_cost();
  for (const Case& c : cases()) {
    ReplayStats st;
    replay(c.name, c.kernel, c.shape, c.args, dtype, noise, st);
    if (::testing::Test::HasFailure()) return;
    std::printf(
        "[ control ] %s %s: %d tokens, %d checked (%d EXEC, %d SYNC, %d CTA), %d SCHED records, min margin %g\n",
        dtype == DType::kF32 ? "fp32" : "bf16", c.name.c_str(), st.tokens, st.checked, st.exec, st.sync, st.cta,
        st.sched_groups, st.min_margin);
  }
}

TEST(CircuitControl, ReplaysLaunchesFp32) {
  run_cases(DType::kF32, false);
}

TEST(CircuitControl, ReplaysLaunchesBf16) {
  run_cases(DType::kBF16, false);
}

// Tokens with the unit off (random ControlIn fields, enable 0) between every generated
// record: every output 0, and the replay after them still exact (no state changed).
TEST(CircuitControl, OffTokensChangeNothingBf16) {
  run_cases(DType::kBF16, true);
}

void run_random(DType dtype, int launches, unsigned seed) {
  ASSERT_TRUE(rig().cc.schedule.num_layers > 0);
  std::mt19937 rng(seed);
  ReplayStats st;
  for (int n = 0; n < launches; ++n) {
    const std::uint32_t threads = n % 8 == 0 ? 32 : 1 + rng() % 32;
    const std::uint32_t grid = 1 + rng() % 3;
    Synth x = synth_launch(rng, threads, grid, 12 + static_cast<int>(rng() % 24));
    replay_stream(
        "random launch " + std::to_string(n) + " (" + std::to_string(grid) + " x " + std::to_string(threads) + ")",
        x.stream, x.gen_start, x.execs, threads, grid, dtype, false, st);
    if (::testing::Test::HasFailure()) return;
  }
  // The ctaid and grid latches at their limits: 128 thread blocks of one thread.
  Synth x = synth_launch(rng, 1, 128, 0);
  replay_stream("128 thread blocks", x.stream, x.gen_start, x.execs, 1, 128, dtype, false, st);
  std::printf(
      "[ control ] %s random launches: %d, %d tokens, %d checked (%d EXEC, %d SYNC, %d CTA), %d SCHED records, "
      "min margin %g\n",
      dtype == DType::kF32 ? "fp32" : "bf16", launches + 1, st.tokens, st.checked, st.exec, st.sync, st.cta,
      st.sched_groups, st.min_margin);
}

TEST(CircuitControl, RandomSchedulesFp32) {
  run_random(DType::kF32, 100, 11);
}

TEST(CircuitControl, RandomSchedulesBf16) {
  run_random(DType::kBF16, 100, 12);
}

// The replay must be able to fail: without the prompt's SCHED row of warp 1 the circuit
// reads that warp as exited and chooses HALT where the stream runs warp 1.
void replay_without_warp1_rows() {
  ReplayStats st;
  replay("ifelse without warp 1's rows", ifelse_kernel(), {1, 8},
         {arr("a", {3, -8, 7, 10, 0, 5, -3, 12}), arr("out", std::vector<std::int32_t>(8, 0))}, DType::kBF16, false, st,
         1);
}

TEST(CircuitControl, ReplayCatchesMissingSchedulerRows) {
  ASSERT_TRUE(rig().cc.schedule.num_layers > 0);
  EXPECT_NONFATAL_FAILURE(replay_without_warp1_rows(), "EXEC B0 w1 0b1111");
}

// The unit's header fields from token ids alone (values written out from docs/PROTOCOL.md §3
// and control.h's row encoding), and ids that are not the unit's refused or left alone.
TEST(CircuitControl, TokenIdsSetTheHeaderFields) {
  const Rig& r = rig();
  const Control& k = r.k;
  auto fields = [&](const Record& rec) {
    std::map<std::string, std::uint64_t> m;
    auto ids = circuit::record_token_ids(r.rec, rec);
    EXPECT_TRUE(ids) << ids.status().to_string();
    if (!ids) return m;
    auto in = circuit::token_inputs(r.rec, ids->front());
    EXPECT_TRUE(in) << in.status().to_string();
    if (!in) return m;
    for (const auto& [w, v] : *in) m[r.c.fields()[static_cast<std::size_t>(w.front().field)].full_name()] = v;
    return m;
  };
  // SCHED w3 0b0101 barrier.odd B7: id 248320 + 15492 + ((256 + 7)·8 + 3)·15 + 4; row = 0b11 | 7 << 2.
  auto ids = circuit::record_token_ids(r.rec, sched_record(3, 5, LaneStatus::kBarrierOdd, 7));
  ASSERT_TRUE(ids);
  EXPECT_EQ(ids->front(), 248320 + 15492 + (263 * 8 + 3) * 15 + 4);
  auto m = fields(sched_record(3, 5, LaneStatus::kBarrierOdd, 7));
  EXPECT_EQ(m, (std::map<std::string, std::uint64_t>{
                   {"ctl.sched_warp", 3}, {"ctl.sched_lanes", 5}, {"ctl.sched_state", 31}}));
  m = fields(cta_record(127));
  EXPECT_EQ(m,
            (std::map<std::string, std::uint64_t>{
                {"ctl.on", 1}, {"ctl.cta_is", 1}, {"ctl.parity_we", 1}, {"ctl.cta_id", 127}, {"ctl.cta_next", 128}}));
  m = fields(sync_record());
  EXPECT_EQ(m, (std::map<std::string, std::uint64_t>{
                   {"ctl.on", 1}, {"ctl.gen", 1}, {"ctl.sync_is", 1}, {"ctl.parity_we", 1}}));
  // LAUNCH: the header carries only its kind; the payload is its DATA token's (threads | grid << 8).
  m = fields(launch_record(32, 128));
  EXPECT_EQ(m, (std::map<std::string, std::uint64_t>{{"launch.is", 1}}));
  auto lid = circuit::record_token_ids(r.rec, launch_record(32, 128));
  ASSERT_TRUE(lid);
  ASSERT_EQ(lid->size(), 2u);
  auto d = circuit::token_inputs(r.rec, (*lid)[1]);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->size(), 2u);  // data.is, data.value
  EXPECT_EQ(d->back().second, 32u | (128u << 8));
  EXPECT_EQ(k.launch.threads.size(), 6u);
  EXPECT_EQ(k.launch.grid.size(), 8u);
  // Fields the protocol cannot encode are refused by its encoder.
  auto e = circuit::record_token_ids(r.rec, sched_record(8, 1, LaneStatus::kRunning, 0));
  ASSERT_FALSE(e);
  std::printf("[ control ] SCHED w8: %s\n", e.status().message().c_str());
  e = circuit::record_token_ids(r.rec, cta_record(128));
  ASSERT_FALSE(e);
  std::printf("[ control ] CTA 128: %s\n", e.status().message().c_str());
  EXPECT_EQ(circuit::sched_row_value(LaneStatus::kExited, 0), 0u);  // a never-written row reads as exited
}

}  // namespace
}  // namespace qgpu::simt::test
