// The write-back sequencer (sequencer.h) across tokens: the EXEC token stores its
// plans in pending RAMs, and every later token — fed by its token id alone, as the
// host feeds it — must name exactly the next token of the protocol's stream, up to
// and including the next control record. The circuit holds the real records stage
// (token embeddings from ids, the conv1d window) and the unit; everything runs token
// by token through the reference layer math at Qwen3.5-2B layer shapes in fp32 and
// bf16, and the next token is chosen by the record unembedding (choice.h).
// * Real launches (record_launch): prompt + generated stream; at each EXEC the slot
//   results, memory words, scheduler groups and control record are taken from the
//   records that follow it in the stream (the protocol is the oracle), and the
//   derivation is checked against protocol.h's own split rules.
// * Random EXEC results (writeback_cases.h), with prompt-kind records fed between
//   the EXEC's records: the pending state must survive them.
// * Tokens outside a write-back sequence (ROM, LIVE, LAUNCH, CTA, RUN, their DATA)
//   leave every NextToken bit exactly 0.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <random>
#include <string>

#include "choice.h"
#include "circuit_harness.h"
#include "kernels.h"
#include "lower.h"
#include "protocol.h"
#include "qgpu/weights/compile.h"
#include "qgpu/weights/reference.h"
#include "records.h"
#include "sequencer.h"
#include "writeback_cases.h"

namespace qgpu::simt::test {
namespace {

using circuit::kWbSlots;
using weights::Bit;
using weights::DType;
using weights::Word;

// The test's own EXEC inputs (4 slots x 4 lanes of results, memory words and values, groups,
// control record: 784 bits) all sit in the embedding and live until the value window is read
// in layer 1, beside the records stage's register-write fields and the plans: 1,410 bits at
// once there, over the ~1,000 of hidden 2048. The unit's own fields peak at about 715 bits.
constexpr std::int64_t kHidden = 3072;
constexpr double kAlpha = 4;

// The circuit: records stage + sequencer; the EXEC's results are test inputs.
struct Rig {
  weights::Circuit c{"simt.sequencer"};
  circuit::Records rec;
  std::array<Word, kWbSlots> dest, emit;
  std::array<std::array<Word, 4>, kWbSlots> value;
  Word shared, writes;
  std::array<Word, 4> mword, mvalue;
  std::array<Word, 4> g_valid, g_lanes, g_status, g_block;
  Word c_kind, c_block, c_warp, c_lanes, c_cta;
  circuit::SequencerOut seq;
  weights::CompiledCircuit cc;
  weights::SparseMatrix unembed;
  Word next_bits;  // every NextToken bit
  int test_input_bits = 0;
  bool ok = false;

  Word in(const std::string& o, const std::string& n, int w) {
    auto r = c.input(o, n, w);
    EXPECT_TRUE(r.has_value()) << r.status().to_string();
    test_input_bits += w;
    return r ? *r : Word{};
  }

  Rig() {
    auto r = circuit::build_records(c, kProtoRowsPerBlock);
    EXPECT_TRUE(r.has_value()) << r.status().to_string();
    if (!r) return;
    rec = std::move(*r);
    circuit::SequencerIn sin;
    for (int s = 0; s < kWbSlots; ++s) {
      const std::string o = "t.s" + std::to_string(s);
      sin.slot[s].dest = dest[s] = in(o, "dest", 4);
      sin.slot[s].emit = emit[s] = in(o, "emit", 4);
      for (int l = 0; l < 4; ++l) sin.slot[s].value[l] = value[s][l] = in(o, "v" + std::to_string(l), 32);
    }
    shared = in("t.m", "shared", 1);
    writes = in("t.m", "writes", 4);
    sin.mem.shared = shared[0];
    for (int l = 0; l < 4; ++l) {
      sin.mem.writes[l] = writes[l];
      sin.mem.word[l] = mword[l] = in("t.m", "word" + std::to_string(l), kProtoWordBits);
      sin.mem.value[l] = mvalue[l] = in("t.m", "value" + std::to_string(l), 32);
    }
    sin.sched.resize(4);
    for (int g = 0; g < 4; ++g) {
      const std::string o = "t.g" + std::to_string(g);
      g_valid[g] = in(o, "valid", 1);
      sin.sched[g].valid = g_valid[g][0];
      sin.sched[g].lanes = g_lanes[g] = in(o, "lanes", 4);
      sin.sched[g].status = g_status[g] = in(o, "status", 2);
      sin.sched[g].block = g_block[g] = in(o, "block", kProtoBlockBits);
    }
    c_kind = in("t.c", "kind", 4);
    sin.control.exec = c_kind[0], sin.control.sync = c_kind[1], sin.control.cta = c_kind[2];
    sin.control.halt = c_kind[3];
    sin.control.block = c_block = in("t.c", "block", kProtoBlockBits);
    sin.control.warp = c_warp = in("t.c", "warp", 3);
    sin.control.lanes = c_lanes = in("t.c", "lanes", 4);
    sin.control.cta_index = c_cta = in("t.c", "cta", 7);
    auto q = circuit::build_sequencer(c, sin, rec);
    EXPECT_TRUE(q.has_value()) << q.status().to_string();
    if (!q) return;
    seq = *q;
    const circuit::NextToken& n = seq.next;
    next_bits = {n.wreg, n.wmem, n.sched, n.data, n.exec, n.sync, n.cta, n.halt, n.wmem_shared};
    for (const Word* w :
         {&n.warp, &n.wreg_reg, &n.wreg_lanes, &n.wreg_format, &n.wmem_word, &n.wmem_count, &n.wmem_format,
          &n.sched_lanes, &n.sched_status, &n.sched_block, &n.exec_block, &n.exec_lanes, &n.cta_index, &n.data_value})
      next_bits.insert(next_bits.end(), w->begin(), w->end());
    for (const Bit& b : next_bits) {
      auto s = c.mark_output({b});
      EXPECT_TRUE(s.is_ok()) << s.to_string();
    }
    weights::Target t;
    t.shapes = qwen2b_shapes();
    t.shapes.hidden_size = kHidden;
    t.keep_unread_fields = false;  // the records stage's register-write fields are not read here
    auto x = weights::compile(c, t);
    EXPECT_TRUE(x.has_value()) << x.status().to_string();
    if (!x) return;
    cc = std::move(*x);
    auto u = circuit::record_unembedding(seq.next, cc.allocation, kAlpha);
    EXPECT_TRUE(u.has_value()) << u.status().to_string();
    if (!u) return;
    unembed = std::move(*u);
    ok = true;
  }
};

const Rig& rig() {
  static const Rig* r = new Rig();
  return *r;
}

// The test inputs of an EXEC token carrying `p`.
Inputs exec_inputs(const Rig& k, const Pending& p) {
  Inputs in;
  for (int s = 0; s < kWbSlots; ++s) {
    in.push_back({k.dest[s], p.dest[s]});
    in.push_back({k.emit[s], p.emit[s]});
    for (int l = 0; l < 4; ++l) in.push_back({k.value[s][l], p.value[s][l]});
  }
  in.push_back({k.shared, p.shared});
  in.push_back({k.writes, p.writes});
  for (int l = 0; l < 4; ++l) {
    in.push_back({k.mword[l], p.word[l]});
    in.push_back({k.mvalue[l], p.mvalue[l]});
  }
  for (std::size_t g = 0; g < p.groups.size(); ++g) {
    in.push_back({k.g_valid[g], 1});
    in.push_back({k.g_lanes[g], p.groups[g].lanes});
    in.push_back({k.g_status[g], static_cast<std::uint64_t>(p.groups[g].status)});
    in.push_back({k.g_block[g], p.groups[g].block});
  }
  const Record& c = p.control;
  in.push_back({k.c_kind, c.kind == RecordKind::kExec   ? 1u
                          : c.kind == RecordKind::kSync ? 2u
                          : c.kind == RecordKind::kCta  ? 4u
                                                        : 8u});
  if (c.kind == RecordKind::kExec) {
    in.push_back({k.c_block, c.block});
    in.push_back({k.c_warp, c.warp});
    in.push_back({k.c_lanes, c.lanes});
  }
  if (c.kind == RecordKind::kCta) in.push_back({k.c_cta, c.cta});
  return in;
}

// Counters of one dtype's run.
struct Stats {
  int tokens = 0, checked = 0, quiet = 0, wrong = 0, execs = 0;
  std::map<RecordKind, int> next_kinds;  // kinds of the checked next tokens (DATA as kData)
  double mlp = std::numeric_limits<double>::infinity(), gdn = std::numeric_limits<double>::infinity();
  double min_choice = std::numeric_limits<double>::infinity();
};

// Feeds tokens one by one and checks the NextToken fields after each.
class Runner {
 public:
  Runner(const Rig& k, DType dt) : k_(k), m_(k.cc.layers, k.cc.target.shapes, dt) {}

  // Runs token `id` (with `extra` inputs) and returns the residual after the circuit.
  std::vector<float> feed(std::int64_t id, const Inputs& extra, Stats& st) {
    auto ti = circuit::token_inputs(k_.rec, id);
    EXPECT_TRUE(ti.has_value()) << ti.status().to_string();
    Inputs in = ti ? *ti : Inputs{};
    in.insert(in.end(), extra.begin(), extra.end());
    ++st.tokens;
    return run_token(m_, k_.c, k_.cc, in);
  }

  // The next token must be `want` (an offset from the machine's first row), chosen by the
  // unembedding with logit alpha·W, every NextToken rail exact.
  void expect_next(const std::vector<float>& y, std::int64_t want, const std::string& where, Stats& st) {
    ++st.checked;
    bool exact = true;
    int kinds = 0;
    for (int j = 0; j < 8; ++j) kinds += static_cast<int>(weights::read_word(k_.cc.allocation, y, {k_.next_bits[j]}));
    for (const Bit& b : k_.next_bits) weights::read_word(k_.cc.allocation, y, {b}, &exact);
    std::vector<float> logits(static_cast<std::size_t>(k_.unembed.rows), 0.f);
    for (std::int64_t r = 0; r < k_.unembed.rows; ++r) {
      double acc = 0;
      for (std::int64_t p = k_.unembed.row_ptr[r]; p < k_.unembed.row_ptr[r + 1]; ++p)
        acc += k_.unembed.val[p] * y[static_cast<std::size_t>(k_.unembed.col[p])];
      logits[static_cast<std::size_t>(r)] = static_cast<float>(acc / weights::kResidualUnit);
    }
    auto ch = circuit::choose(logits);
    const bool good =
        exact && kinds == 1 && ch && ch->offset == want && ch->logit == kAlpha * circuit::kChoiceKindWeight;
    if (ch) st.min_choice = std::min(st.min_choice, ch->margin);
    auto rec = token_record(want);
    ++st.next_kinds[rec ? rec->kind : RecordKind::kCount];
    if (!good && ++st.wrong <= 8) {
      auto got = ch ? token_record(ch->offset) : sdk::Expected<Record>(ch.status());
      ADD_FAILURE() << where << ": expected " << (rec ? to_text(*rec) : "?") << " (offset " << want << "), got "
                    << (got ? to_text(*got) : got.status().to_string()) << (exact ? "" : " (inexact rails)")
                    << " kinds=" << kinds;
      if (st.wrong == 1) std::printf("%s", m_.margin_report().c_str());
    }
  }

  // Every NextToken bit must be exactly 0.
  void expect_quiet(const std::vector<float>& y, const std::string& where, Stats& st) {
    ++st.quiet;
    bool exact = true;
    int ones = 0;  // NextToken has more than 64 bits: read them one by one
    for (const Bit& b : k_.next_bits) ones += static_cast<int>(weights::read_word(k_.cc.allocation, y, {b}, &exact));
    if ((ones != 0 || !exact) && ++st.wrong <= 8)
      ADD_FAILURE() << where << ": " << ones << " NextToken bits set off a sequence" << (exact ? "" : " (inexact)");
  }

  void finish(Stats& st) { fold_margins(m_, st.mlp, st.gdn); }

 private:
  const Rig& k_;
  weights::ReferenceModel m_;
};

// One token of a stream: its id, the record it belongs to, its position in the record.
struct Tok {
  std::int64_t id;
  std::size_t rec;
  int index;
};

std::vector<Tok> tokens_of(const std::vector<Record>& recs) {
  std::vector<Tok> out;
  for (std::size_t r = 0; r < recs.size(); ++r) {
    std::vector<std::int64_t> ids;
    EXPECT_TRUE(append_tokens(recs[r], kQwen35VocabRows, ids).is_ok()) << to_text(recs[r]);
    for (std::size_t i = 0; i < ids.size(); ++i) out.push_back(Tok{ids[i], r, static_cast<int>(i)});
  }
  return out;
}

bool is_control(RecordKind k) {
  return k == RecordKind::kExec || k == RecordKind::kSync || k == RecordKind::kCta || k == RecordKind::kHalt;
}
bool is_writeback(RecordKind k) {
  return k == RecordKind::kWreg || k == RecordKind::kWmem || k == RecordKind::kSched;
}

// The EXEC results behind the write-backs g[e+1 .. j-1] and control record g[j]: registers
// into randomly chosen slots (other slots random and not emitting), memory words into random
// lanes (other lanes random and not writing), scheduler groups in order.
Pending derive(const std::vector<Record>& g, std::size_t e, std::size_t j, std::mt19937_64& rng) {
  Pending p;
  p.warp = g[e].warp;
  std::array<int, kWbSlots> slots{0, 1, 2, 3};
  std::shuffle(slots.begin(), slots.end(), rng);
  for (int s = 0; s < kWbSlots; ++s) {
    p.dest[s] = static_cast<std::uint32_t>(rng() % 16);
    for (int l = 0; l < 4; ++l) p.value[s][l] = random_value(rng);
  }
  int used = 0, lanes_used = 0;
  std::array<int, 4> lanes{0, 1, 2, 3};
  std::shuffle(lanes.begin(), lanes.end(), rng);
  for (int l = 0; l < 4; ++l)
    p.word[l] = static_cast<std::uint32_t>(rng() % kProtoGlobalWords), p.mvalue[l] = random_value(rng);
  for (std::size_t i = e + 1; i < j; ++i) {
    const Record& r = g[i];
    if (r.kind == RecordKind::kWreg) {
      if (used == 0 || p.dest[slots[used - 1]] != r.reg || !p.emit[slots[used - 1]]) {
        EXPECT_LT(used, kWbSlots) << "more than 4 registers after one EXEC";
        if (used >= kWbSlots) return p;
        p.dest[slots[used++]] = r.reg;
      }
      const int s = slots[used - 1];
      p.emit[s] |= r.lanes;
      for (int l = 0; l < 4; ++l)
        if ((r.lanes >> l) & 1) p.value[s][l] = r.values[l];
    } else if (r.kind == RecordKind::kWmem) {
      p.shared = r.shared;
      for (std::uint32_t w = 0; w < r.count; ++w) {
        EXPECT_LT(lanes_used, 4) << "more than 4 memory words after one EXEC";
        if (lanes_used >= 4) return p;
        const int l = lanes[lanes_used++];
        p.writes |= 1u << l;
        p.word[l] = r.word + w;
        p.mvalue[l] = r.values[w];
      }
    } else if (r.kind == RecordKind::kSched) {
      p.groups.push_back(r);
    }
  }
  p.control = g[j];
  return p;
}

struct Launch {
  std::string name;
  sdk::KernelIR kernel;
  sdk::LaunchShape shape;
  std::vector<sdk::LaunchArg> args;
};

TEST(CircuitSequencer, RealLaunchesGenerateTheRecordedStream) {
  const Rig& k = rig();
  ASSERT_TRUE(k.ok);
  const auto& cc = k.cc;
  std::int64_t peak = 0;
  for (int L = 0; L < cc.schedule.num_layers; ++L) peak = std::max(peak, cc.schedule.use[L].mlp_neurons);
  std::int64_t heads = 0;
  for (const auto& u : cc.schedule.use) heads += u.key_heads;
  // Live bits per sub-layer, with and without the test's own EXEC inputs (owner "t.*").
  const auto live = weights::live_ranges(k.c, cc.target, cc.schedule);
  int peak_all = 0, peak_unit = 0, at_all = 0, at_unit = 0;
  for (int sl = -1; sl < 2 * cc.schedule.num_layers; ++sl) {
    int all = 0, unit = 0;
    for (std::size_t f = 0; f < k.c.fields().size(); ++f) {
      const weights::Field& fd = k.c.fields()[f];
      if (fd.alias_of >= 0 || !live[f].live_after(sl)) continue;
      all += fd.width;
      if (fd.owner.rfind("t.", 0) != 0) unit += fd.width;
    }
    if (all > peak_all) peak_all = all, at_all = sl;
    if (unit > peak_unit) peak_unit = unit, at_unit = sl;
  }
  std::printf(
      "[ sequencer ] %d layers, %lld neurons (widest layer %lld), %lld key heads, %d pending RAMs (%d bits), "
      "%d channels at hidden %lld (live peak %d bits at sub-layer %d; the test's own EXEC inputs: %d bits; "
      "without them the peak is %d bits at sub-layer %d)\n",
      cc.schedule.num_layers, static_cast<long long>(cc.total_neurons()), static_cast<long long>(peak),
      static_cast<long long>(heads), static_cast<int>(k.seq.pending.size()), k.seq.pending_bits,
      cc.allocation.channels_used, static_cast<long long>(kHidden), peak_all, at_all, k.test_input_bits, peak_unit,
      at_unit);
  // Neurons by part (before merging across ops): the identity, the plans, the successor.
  std::map<std::string, std::int64_t> part;
  for (const weights::Op& op : k.c.ops())
    if (op.is_mlp) {
      const std::string n = op.name;
      const std::string key = n.rfind("seq.", 0) == 0 ? "identity"
                              : n.rfind("wb.cur", 0) == 0 || n.rfind("wb.next", 0) == 0 ||
                                      n.rfind("wb.wreg.data", 0) == 0 || n.rfind("wb.wmem.data", 0) == 0
                                  ? "successor"
                              : n.rfind("wb.", 0) == 0 ? "plans"
                                                       : "records stage";
      part[key] += weights::unique_neuron_count(op.mlp);
    }
  std::printf("  neurons by part:");
  for (const auto& [name, n] : part) std::printf(" %s %lld,", name.c_str(), static_cast<long long>(n));
  std::printf(" clears %lld\n", static_cast<long long>(weights::clear_neurons(k.c, cc.allocation)));
  for (int L = 0; L < cc.schedule.num_layers; ++L) {
    std::printf("  layer %d: %lld neurons, %lld key heads:", L, static_cast<long long>(cc.schedule.use[L].mlp_neurons),
                static_cast<long long>(cc.schedule.use[L].key_heads));
    for (std::size_t o = 0; o < k.c.ops().size(); ++o)
      if (cc.schedule.op_layer[o] == L)
        std::printf(" %s%s", k.c.ops()[o].is_mlp ? "" : "gdn:", k.c.ops()[o].name.c_str());
    std::printf("\n");
  }
  std::vector<std::int32_t> a24(24), b24(24), big(10), c10(10, -7), in16(16);
  for (int i = 0; i < 24; ++i) a24[i] = i - 11, b24[i] = 3 * i + 1;
  for (int i = 0; i < 10; ++i) big[i] = 50000 * i - 70000;
  for (int i = 0; i < 16; ++i) in16[i] = 3 * i - 20;
  const std::vector<Launch> launches = {
      {"dot 3x8", dot_kernel(), {3, 8}, {arr("a", a24), arr("b", b24), arr("out", {0}), scalar("n", 24)}},
      {"reduce 2x8", reduce_kernel(), {2, 8}, {arr("in", in16), arr("out", {0, 0})}},
      {"atomics 2x4",
       atomics_kernel(),
       {2, 4},
       {arr("a", {5, -3, 9, 1, 7, 2, -8, 4}), arr("m", std::vector<std::int32_t>(12))}},
      {"vadd 2x5", vadd_kernel(), {2, 5}, {arr("a", big), arr("b", big), arr("c", c10), scalar("n", 9)}},
      {"ifelse 1x8",
       ifelse_kernel(),
       {1, 8},
       {arr("a", {3, -8, 7, 10, 0, 5, -3, 12}), arr("out", std::vector<std::int32_t>(8))}},
  };
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Stats st;
    Runner run(k, dt);
    std::mt19937_64 rng(dt == DType::kF32 ? 21 : 22);
    int derived = 0;
    for (const Launch& L : launches) {
      auto p = lower_kernel(L.kernel, L.shape, circuit_sizes());
      ASSERT_TRUE(p.has_value()) << L.name << ": " << p.status().to_string();
      auto lr = record_launch(**p, L.args, {});
      ASSERT_TRUE(lr.has_value()) << L.name << ": " << lr.status().to_string();
      // The prompt: nothing of the sequencer's may show outside WREG / WMEM / SCHED records.
      const std::vector<Tok> pt = tokens_of(lr->prompt);
      for (const Tok& t : pt) {
        const std::vector<float> y = run.feed(t.id, {}, st);
        if (!is_writeback(lr->prompt[t.rec].kind))
          run.expect_quiet(y, L.name + " prompt " + to_text(lr->prompt[t.rec]), st);
      }
      const std::vector<Record>& g = lr->generated;
      const std::vector<Tok> gt = tokens_of(g);
      std::size_t until = 0;  // inside an EXEC's sequence: the index of its control record
      bool active = false;
      for (std::size_t i = 0; i < gt.size(); ++i) {
        const Record& r = g[gt[i].rec];
        Inputs extra;
        if (r.kind == RecordKind::kExec) {
          std::size_t j = gt[i].rec + 1;
          while (j < g.size() && !is_control(g[j].kind)) ++j;
          ASSERT_LT(j, g.size()) << L.name << ": no control record after " << to_text(r);
          const Pending pd = derive(g, gt[i].rec, j, rng);
          // The derivation must give back exactly the stream's records (protocol.h's split rules).
          const std::vector<Record> want = expected_records(pd);
          ASSERT_EQ(want.size(), j - gt[i].rec) << L.name << " after " << to_text(r);
          for (std::size_t q = 0; q < want.size(); ++q)
            ASSERT_EQ(to_text(want[q]), to_text(g[gt[i].rec + 1 + q])) << L.name;
          extra = exec_inputs(k, pd);
          until = j;
          active = true;
          ++st.execs;
          ++derived;
        }
        const std::vector<float> y = run.feed(gt[i].id, extra, st);
        if (active && i + 1 < gt.size()) {
          run.expect_next(y, gt[i + 1].id - kQwen35VocabRows,
                          L.name + " token " + std::to_string(i) + " (" + to_text(r) + " index " +
                              std::to_string(gt[i].index) + ")",
                          st);
          if (gt[i + 1].rec == until) active = false;
        } else if (!is_writeback(r.kind) && r.kind != RecordKind::kExec) {
          run.expect_quiet(y, L.name + " " + to_text(r), st);
        }
        if (st.wrong > 8) break;
      }
      if (st.wrong > 8) break;
    }
    run.finish(st);
    std::printf(
        "[ sequencer ] %s: %d launches, %d tokens, %d EXEC, %d next tokens checked (WREG %d, WMEM %d, SCHED %d, "
        "DATA %d, EXEC %d, SYNC %d, CTA %d, HALT %d), %d quiet tokens, %d wrong; min margins: MLP %g, GDN %g, "
        "choice %g\n",
        std::string(dtype_name(dt)).c_str(), static_cast<int>(launches.size()), st.tokens, st.execs, st.checked,
        st.next_kinds[RecordKind::kWreg], st.next_kinds[RecordKind::kWmem], st.next_kinds[RecordKind::kSched],
        st.next_kinds[RecordKind::kData], st.next_kinds[RecordKind::kExec], st.next_kinds[RecordKind::kSync],
        st.next_kinds[RecordKind::kCta], st.next_kinds[RecordKind::kHalt], st.quiet, st.wrong, st.mlp, st.gdn,
        st.min_choice);
    EXPECT_EQ(st.wrong, 0);
    EXPECT_GT(st.execs, 20);
    EXPECT_GT(st.next_kinds[RecordKind::kWreg], 20);
    EXPECT_GT(st.next_kinds[RecordKind::kWmem], 5);
    EXPECT_GT(st.next_kinds[RecordKind::kSched], 3);
    EXPECT_GE(st.mlp, 128);
    EXPECT_GE(st.gdn, 128);
  }
}

// Random EXEC results; between the EXEC's records, prompt-kind records (ROM, LIVE, LAUNCH,
// WREG zero, WMEM, SCHED: anything but EXEC) are fed, carrying other random EXEC results
// in the unit's inputs, and the next record's header must still be followed by the right
// token (the pending RAMs are written only on EXEC tokens).
TEST(CircuitSequencer, RandomResultsSurviveInterleavedPromptRecords) {
  const Rig& k = rig();
  ASSERT_TRUE(k.ok);
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Stats st;
    Runner run(k, dt);
    std::mt19937_64 rng(dt == DType::kF32 ? 31 : 32);
    int cases = 0, interleaved = 0;
    auto junk = [&]() {
      std::vector<Record> j;
      switch (rng() % 6) {
        case 0: {
          const auto rr = rom_records(static_cast<std::uint32_t>(rng() % 32), 0, rng());
          j.assign(rr.begin(), rr.end());
          break;
        }
        case 1:
          j.push_back(
              live_record(static_cast<std::uint32_t>(rng() % 32), static_cast<std::uint32_t>(rng() % 65536) & 0xfffeu));
          break;
        case 2:
          j.push_back(wreg_record(static_cast<std::uint32_t>(rng() % 8), 1 + static_cast<std::uint32_t>(rng() % 15), 15,
                                  {0, 0, 0, 0}));
          break;
        case 3: {
          const std::uint32_t v[] = {random_value(rng), random_value(rng)};
          for (const Record& r : wmem_records(rng() % 2, static_cast<std::uint32_t>(rng() % 500), v)) j.push_back(r);
          break;
        }
        case 4:
          j.push_back(sched_record(static_cast<std::uint32_t>(rng() % 8), 1 + static_cast<std::uint32_t>(rng() % 15),
                                   LaneStatus::kRunning, static_cast<std::uint32_t>(rng() % 32)));
          break;
        default:
          j.push_back(
              launch_record(1 + static_cast<std::uint32_t>(rng() % 32), 1 + static_cast<std::uint32_t>(rng() % 100)));
      }
      return j;
    };
    for (; cases < 120 && st.wrong == 0; ++cases) {
      const Pending p = random_pending(rng);
      std::vector<Record> recs{
          exec_record(static_cast<std::uint32_t>(rng() % kProtoBlocks), p.warp, static_cast<std::uint32_t>(1 + rng() % 15))};
      for (const Record& r : expected_records(p)) recs.push_back(r);
      const std::vector<Tok> ts = tokens_of(recs);
      for (std::size_t i = 0; i + 1 < ts.size() && st.wrong == 0; ++i) {
        // Before a header (not the EXEC's first), sometimes feed prompt records first.
        if (i > 0 && ts[i].index == 0 && rng() % 3 == 0) {
          ++interleaved;
          for (const Record& r : junk())
            for (const Tok& t : tokens_of({r})) run.feed(t.id, exec_inputs(k, random_pending(rng)), st);
        }
        const std::vector<float> y = run.feed(ts[i].id, i == 0 ? exec_inputs(k, p) : Inputs{}, st);
        run.expect_next(y, ts[i + 1].id - kQwen35VocabRows,
                        "case " + std::to_string(cases) + " token " + std::to_string(i) + " (" +
                            to_text(recs[ts[i].rec]) + " index " + std::to_string(ts[i].index) + ")",
                        st);
      }
    }
    run.finish(st);
    std::printf(
        "[ sequencer ] random %s: %d cases, %d tokens fed, %d next tokens checked (WREG %d, WMEM %d, SCHED %d, "
        "DATA %d, control %d), %d interleavings, %d wrong; min margins: MLP %g, GDN %g\n",
        std::string(dtype_name(dt)).c_str(), cases, st.tokens, st.checked, st.next_kinds[RecordKind::kWreg],
        st.next_kinds[RecordKind::kWmem], st.next_kinds[RecordKind::kSched], st.next_kinds[RecordKind::kData],
        st.next_kinds[RecordKind::kExec] + st.next_kinds[RecordKind::kSync] + st.next_kinds[RecordKind::kCta] +
            st.next_kinds[RecordKind::kHalt],
        interleaved, st.wrong, st.mlp, st.gdn);
    EXPECT_EQ(st.wrong, 0);
    EXPECT_GE(st.mlp, 128);
    EXPECT_GE(st.gdn, 128);
  }
}

// Wrong input widths and a missing records stage are refused by name.
TEST(CircuitSequencer, BadInputsAreNamed) {
  weights::Circuit c;
  auto rec = circuit::build_records(c, 1);
  ASSERT_TRUE(rec.has_value());
  circuit::SequencerIn in;
  auto w = [&](const std::string& n, int width) { return *c.input("t", n, width); };
  for (int s = 0; s < kWbSlots; ++s) {
    in.slot[s].dest = w("d" + std::to_string(s), s == 2 ? 3 : 4);
    in.slot[s].emit = w("e" + std::to_string(s), 4);
    for (int l = 0; l < 4; ++l) in.slot[s].value[l] = w("v" + std::to_string(s) + std::to_string(l), 32);
  }
  in.sched.resize(4);
  for (auto& g : in.sched) g.lanes = w("gl" + std::to_string(&g - &in.sched[0]), 4);
  auto r = circuit::build_sequencer(c, in, *rec);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("dest and emit are 4 bits"), std::string::npos) << r.status().message();
  in.slot[2].dest = w("d2b", 4);
  r = circuit::build_sequencer(c, in, *rec);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("a scheduler group is lanes 4, status 2, block 7 bits"), std::string::npos)
      << r.status().message();
  for (auto& g : in.sched) {
    g.status = w("gs" + std::to_string(&g - &in.sched[0]), 2);
    g.block = w("gb" + std::to_string(&g - &in.sched[0]), kProtoBlockBits);
  }
  in.control.block = w("cb", kProtoBlockBits), in.control.warp = w("cw", 3), in.control.lanes = w("cl", 4);
  in.control.cta_index = w("cc", 7);
  circuit::Records empty;
  r = circuit::build_sequencer(c, in, empty);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("build_records first"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace qgpu::simt::test
