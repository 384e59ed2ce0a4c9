// Write-back sequencing (writeback.h): from random slot results, memory writes,
// scheduler groups and control records, the plans on the EXEC and the
// successor on every following token must reproduce exactly the token stream
// protocol.h defines (wreg_records, wmem_records over maximal runs, SCHED,
// then the control record; append_tokens for the DATA payloads), token after
// token, in fp32 and bf16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "choice.h"
#include "circuit_harness.h"
#include "protocol.h"
#include "qgpu/weights/compile.h"
#include "qgpu/weights/reference.h"
#include "writeback.h"
#include "writeback_cases.h"

namespace qgpu::simt {
namespace {

using circuit::kWbSlots;
using test::expected_records;
using test::Pending;
using test::random_pending;
using weights::DType;
using weights::Word;

// Every input of the unit under test, as embedding fields.
struct Rig {
  weights::Circuit c{"simt.writeback"};
  Word exec_enable, enable, is_exec, is_wreg, is_wmem, is_sched, index, warp;
  Word wreg_reg, wreg_lanes, wreg_format, wmem_word, wmem_count, wmem_format, sched_lanes;
  std::array<Word, kWbSlots> dest, emit;
  std::array<std::array<Word, 4>, kWbSlots> value;
  Word shared, writes;
  std::array<Word, 4> mword, mvalue;
  std::array<Word, 4> g_valid, g_lanes, g_status, g_block;
  Word c_kind, c_block, c_warp, c_lanes, c_cta;
  circuit::NextToken next;
  weights::CompiledCircuit cc;
  bool ok = false;

  Word in(const std::string& o, const std::string& n, int w) {
    auto r = c.input(o, n, w);
    EXPECT_TRUE(r.has_value()) << r.status().to_string();
    return r ? *r : Word{};
  }

  explicit Rig(int gain = 1) {
    exec_enable = in("t", "exec", 1);
    circuit::WregPlanIn pin;
    pin.enable = exec_enable[0];
    for (int s = 0; s < kWbSlots; ++s) {
      const std::string o = "t.s" + std::to_string(s);
      dest[s] = in(o, "dest", 4);
      emit[s] = in(o, "emit", 4);
      pin.slot[s].dest = dest[s];
      pin.slot[s].emit = emit[s];
      for (int l = 0; l < 4; ++l) pin.slot[s].value[l] = value[s][l] = in(o, "v" + std::to_string(l), 32);
    }
    circuit::MemWriteIn min;
    min.enable = exec_enable[0];
    shared = in("t.m", "shared", 1);
    writes = in("t.m", "writes", 4);
    min.shared = shared[0];
    for (int l = 0; l < 4; ++l) {
      min.writes[l] = writes[l];
      min.word[l] = mword[l] = in("t.m", "word" + std::to_string(l), kProtoWordBits);
      min.value[l] = mvalue[l] = in("t.m", "value" + std::to_string(l), 32);
    }
    std::array<circuit::SchedGroup, 4> groups;
    for (int g = 0; g < 4; ++g) {
      const std::string o = "t.g" + std::to_string(g);
      g_valid[g] = in(o, "valid", 1);
      groups[g].valid = g_valid[g][0];
      groups[g].lanes = g_lanes[g] = in(o, "lanes", 4);
      groups[g].status = g_status[g] = in(o, "status", 2);
      groups[g].block = g_block[g] = in(o, "block", kProtoBlockBits);
    }
    circuit::ControlNext ctl;
    c_kind = in("t.c", "kind", 4);
    ctl.exec = c_kind[0], ctl.sync = c_kind[1], ctl.cta = c_kind[2], ctl.halt = c_kind[3];
    ctl.block = c_block = in("t.c", "block", kProtoBlockBits);
    ctl.warp = c_warp = in("t.c", "warp", 3);
    ctl.lanes = c_lanes = in("t.c", "lanes", 4);
    ctl.cta_index = c_cta = in("t.c", "cta", 7);
    circuit::SuccessorIn sin;
    enable = in("t", "enable", 1);
    sin.enable = enable[0];
    sin.is_exec = (is_exec = in("t", "is_exec", 1))[0];
    sin.is_wreg = (is_wreg = in("t", "is_wreg", 1))[0];
    sin.is_wmem = (is_wmem = in("t", "is_wmem", 1))[0];
    sin.is_sched = (is_sched = in("t", "is_sched", 1))[0];
    sin.index = index = in("t", "index", 2);
    sin.warp = warp = in("t", "warp", 3);
    sin.wreg_reg = wreg_reg = in("t", "wreg.reg", 4);
    sin.wreg_lanes = wreg_lanes = in("t", "wreg.lanes", 4);
    sin.wreg_format = wreg_format = in("t", "wreg.format", 2);
    sin.wmem_word = wmem_word = in("t", "wmem.word", kProtoWordBits);
    sin.wmem_count = wmem_count = in("t", "wmem.count", 3);
    sin.wmem_format = wmem_format = in("t", "wmem.format", 2);
    sin.sched_lanes = sched_lanes = in("t", "sched.lanes", 4);
    auto wp = circuit::build_wreg_plan(c, pin);
    EXPECT_TRUE(wp.has_value()) << wp.status().to_string();
    auto mp = circuit::build_wmem_plan(c, min);
    EXPECT_TRUE(mp.has_value()) << mp.status().to_string();
    if (!wp || !mp) return;
    auto n = circuit::build_successor(c, *wp, *mp, groups, ctl, sin, nullptr, gain);
    EXPECT_TRUE(n.has_value()) << n.status().to_string();
    if (!n) return;
    next = *n;
    // The inputs alone (4 slots x 4 lanes of results, memory words, groups)
    // take ~800 bits: the unit is checked on a wider residual here;
    // in the machine its inputs come from pending RAMs one at a time and dead
    // fields give their channels back (docs/MACHINE_CIRCUIT.md §4.2).
    ok = test::compile_to(c, cc, 4096);
  }
};

const Rig& rig() {
  static const Rig* r = new Rig();
  return *r;
}

constexpr int kGain = circuit::kMergedChoiceGain;  // the merged machine's choice gain
const Rig& gained_rig() {
  static const Rig* r = new Rig(kGain);
  return *r;
}

// A decoded NextToken, comparable with the token the protocol expects.
struct Tok {
  std::uint32_t kind = 0;  // bit per NextToken kind
  std::uint32_t warp = 0, reg = 0, lanes = 0, format = 0, shared = 0, word = 0, count = 0, mformat = 0;
  std::uint32_t slanes = 0, status = 0, sblock = 0, eblock = 0, elanes = 0, cta = 0, value = 0;
  bool operator==(const Tok&) const = default;
};

std::string text(const Tok& t) {
  char b[256];
  std::snprintf(b, sizeof b,
                "kind=0x%02x warp=%u wreg(r%u m%u f%u) wmem(s%u w%u n%u f%u) sched(m%u st%u B%u) exec(B%u m%u) "
                "cta=%u data=0x%04x",
                t.kind, t.warp, t.reg, t.lanes, t.format, t.shared, t.word, t.count, t.mformat, t.slanes, t.status,
                t.sblock, t.eblock, t.elanes, t.cta, t.value);
  return b;
}

Tok header_tok(const Record& r) {
  Tok t;
  switch (r.kind) {
    case RecordKind::kWreg:
      t.kind = 1, t.warp = r.warp, t.reg = r.reg, t.lanes = r.lanes, t.format = static_cast<std::uint32_t>(r.format);
      break;
    case RecordKind::kWmem:
      t.kind = 2, t.shared = r.shared, t.word = r.word, t.count = r.count;
      t.mformat = static_cast<std::uint32_t>(r.format);
      break;
    case RecordKind::kSched:
      t.kind = 4, t.warp = r.warp, t.slanes = r.lanes, t.status = static_cast<std::uint32_t>(r.status);
      t.sblock = r.block;
      break;
    case RecordKind::kExec: t.kind = 16, t.warp = r.warp, t.eblock = r.block, t.elanes = r.lanes; break;
    case RecordKind::kSync: t.kind = 32; break;
    case RecordKind::kCta: t.kind = 64, t.cta = r.cta; break;
    case RecordKind::kHalt: t.kind = 128; break;
    default: ADD_FAILURE() << "unexpected record " << to_text(r);
  }
  return t;
}

Tok read_tok(const Rig& k, const std::vector<float>& y, bool& exact) {
  auto rd = [&](const Word& w) {
    bool e = true;
    auto v = static_cast<std::uint32_t>(weights::read_word(k.cc.allocation, y, w, &e));
    exact = exact && e;
    return v;
  };
  const auto& n = k.next;
  Tok t;
  t.kind = rd({n.wreg, n.wmem, n.sched, n.data, n.exec, n.sync, n.cta, n.halt});
  t.warp = rd(n.warp), t.reg = rd(n.wreg_reg), t.lanes = rd(n.wreg_lanes), t.format = rd(n.wreg_format);
  t.shared = rd({n.wmem_shared}), t.word = rd(n.wmem_word), t.count = rd(n.wmem_count);
  t.mformat = rd(n.wmem_format), t.slanes = rd(n.sched_lanes), t.status = rd(n.sched_status);
  t.sblock = rd(n.sched_block), t.eblock = rd(n.exec_block), t.elanes = rd(n.exec_lanes), t.cta = rd(n.cta_index);
  t.value = rd(n.data_value);
  return t;
}

// The embedding of one token: the pending results (in the machine they come from
// the pending RAMs) and the current token's identity.
test::Inputs inputs(const Rig& k, const Pending& p, bool enable) {
  test::Inputs in{{k.exec_enable, 1}, {k.enable, enable ? 1u : 0u}, {k.warp, p.warp}};
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

void set_current(const Rig& k, const Record& r, int index, test::Inputs& in) {
  in.push_back({k.index, static_cast<std::uint64_t>(index)});
  switch (r.kind) {
    case RecordKind::kWreg:
      in.push_back({k.is_wreg, 1});
      in.push_back({k.wreg_reg, r.reg});
      in.push_back({k.wreg_lanes, r.lanes});
      in.push_back({k.wreg_format, static_cast<std::uint64_t>(r.format)});
      break;
    case RecordKind::kWmem:
      in.push_back({k.is_wmem, 1});
      in.push_back({k.wmem_word, r.word});
      in.push_back({k.wmem_count, r.count});
      in.push_back({k.wmem_format, static_cast<std::uint64_t>(r.format)});
      break;
    case RecordKind::kSched:
      in.push_back({k.is_sched, 1});
      in.push_back({k.sched_lanes, r.lanes});
      break;
    default: ADD_FAILURE() << "no successor for " << to_text(r);
  }
}

TEST(CircuitWriteback, SequenceMatchesProtocolStream) {
  const Rig& k = rig();
  ASSERT_TRUE(k.ok);
  std::printf("writeback + successor: %d layers, %lld neurons, %d channels (inputs included)\n",
              k.cc.schedule.num_layers, static_cast<long long>(k.cc.total_neurons()), k.cc.allocation.channels_used);
  for (int L = 0; L < k.cc.schedule.num_layers; ++L)
    std::printf("  layer %d: %lld neurons\n", L, static_cast<long long>(k.cc.schedule.use[L].mlp_neurons));
  for (DType dt : {DType::kF32, DType::kBF16}) {
    weights::ReferenceModel m(k.cc.layers, k.cc.target.shapes, dt);
    std::mt19937_64 rng(dt == DType::kF32 ? 11 : 12);
    int cases = 0, tokens = 0, wrong = 0, wmem_records = 0, sched_records = 0;
    for (; cases < 200 && wrong == 0; ++cases) {
      const Pending p = random_pending(rng);
      const std::vector<Record> recs = expected_records(p);
      // The stream: every token with the record it belongs to and its DATA index.
      struct Slot {
        std::size_t rec;
        int index;
        Tok tok;
      };
      std::vector<Slot> stream;
      for (std::size_t r = 0; r < recs.size(); ++r) {
        wmem_records += recs[r].kind == RecordKind::kWmem;
        sched_records += recs[r].kind == RecordKind::kSched;
        stream.push_back({r, 0, header_tok(recs[r])});
        std::vector<std::int64_t> ids;
        ASSERT_TRUE(append_tokens(recs[r], 0, ids).is_ok()) << to_text(recs[r]);
        for (std::size_t i = 1; i < ids.size(); ++i) {
          Tok d;
          d.kind = 8;
          d.value = static_cast<std::uint32_t>(ids[i] - first_id(RecordKind::kData));
          stream.push_back({r, static_cast<int>(i), d});
        }
      }
      // The EXEC, then every token but the last (the control record's successor is control's).
      for (std::size_t i = 0; i < stream.size() && wrong == 0; ++i) {
        test::Inputs in = inputs(k, p, true);
        if (i == 0)
          in.push_back({k.is_exec, 1});
        else
          set_current(k, recs[stream[i - 1].rec], stream[i - 1].index, in);
        bool exact = true;
        const Tok got = read_tok(k, test::run_token(m, k.c, k.cc, in), exact);
        ++tokens;
        if (!exact || !(got == stream[i].tok)) {
          ADD_FAILURE() << dtype_name(dt) << " case " << cases << " token " << i << " after "
                        << (i == 0 ? std::string("EXEC") : to_text(recs[stream[i - 1].rec])) << " index "
                        << (i == 0 ? 0 : stream[i - 1].index) << ":\n  want " << text(stream[i].tok) << "\n  got  "
                        << text(got) << (exact ? "" : " (inexact rails)");
          ++wrong;
        }
      }
    }
    std::printf("writeback %s: %d cases, %d tokens (%d WMEM, %d SCHED records), %d wrong\n",
                std::string(dtype_name(dt)).c_str(), cases, tokens, wmem_records, sched_records, wrong);
    EXPECT_EQ(wrong, 0);
  }
}

TEST(CircuitWriteback, DisabledTokensLeaveEverythingZero) {
  const Rig& k = rig();
  ASSERT_TRUE(k.ok);
  std::mt19937_64 rng(5);
  weights::ReferenceModel m(k.cc.layers, k.cc.target.shapes, DType::kBF16);
  const Pending p = random_pending(rng);
  test::Inputs in = inputs(k, p, false);
  in.push_back({k.is_exec, 1});
  bool exact = true;
  const Tok got = read_tok(k, test::run_token(m, k.c, k.cc, in), exact);
  EXPECT_TRUE(exact);
  EXPECT_EQ(got, Tok{}) << text(got);
}

// With a choice gain the successor writes every NextToken bit (and `one`) at exactly
// gain × the plain circuit's value, in both dtypes; the unembedding then picks the same
// token with the margin scaled by the gain. Tokens outside the write-back sequence keep
// the placeholder 0 (-u): nothing is amplified there.
TEST(CircuitWriteback, ChoiceGainScalesTheFieldsExactly) {
  const Rig& k = rig();
  const Rig& g = gained_rig();
  ASSERT_TRUE(k.ok);
  ASSERT_TRUE(g.ok);
  const Word plain_bits = circuit::choice_bits(k.next), gained_bits = circuit::choice_bits(g.next);
  ASSERT_EQ(plain_bits.size(), gained_bits.size());
  ASSERT_EQ(plain_bits.size(), 85u);  // 84 field bits (the WMEM word 10) and `one`
  constexpr double kAlpha = 4;
  auto ku = circuit::record_unembedding(k.next, k.cc.allocation, kAlpha);
  auto gu = circuit::record_unembedding(g.next, g.cc.allocation, kAlpha);
  ASSERT_TRUE(ku.has_value() && gu.has_value());
  const double unit = weights::kResidualUnit;
  auto choice = [&](const weights::SparseMatrix& u, const std::vector<float>& y) {
    std::vector<float> logits(static_cast<std::size_t>(u.rows), 0.f);
    for (std::int64_t r = 0; r < u.rows; ++r) {
      double acc = 0;
      for (std::int64_t p = u.row_ptr[r]; p < u.row_ptr[r + 1]; ++p) acc += u.val[p] * y[u.col[p]];
      logits[static_cast<std::size_t>(r)] = static_cast<float>(acc / unit);
    }
    return circuit::choose(logits);
  };
  for (DType dt : {DType::kF32, DType::kBF16}) {
    weights::ReferenceModel km(k.cc.layers, k.cc.target.shapes, dt), gm(g.cc.layers, g.cc.target.shapes, dt);
    std::mt19937_64 rng(dt == DType::kF32 ? 21 : 22);
    int tokens = 0, wrong = 0;
    for (int cases = 0; cases < 30 && wrong == 0; ++cases) {
      const Pending p = random_pending(rng);
      const std::vector<Record> recs = expected_records(p);
      for (std::size_t i = 0; i <= recs.size() && wrong == 0; ++i) {
        const bool enabled = i < recs.size();
        test::Inputs in = inputs(k, p, enabled);
        if (i == 0 || !enabled)
          in.push_back({k.is_exec, 1});
        else
          set_current(k, recs[i - 1], 0, in);
        test::Inputs gin = in;  // the rigs declare the same inputs in the same order: the same fields
        const std::vector<float> y = test::run_token(km, k.c, k.cc, in);
        const std::vector<float> gy = test::run_token(gm, g.c, g.cc, gin);
        ++tokens;
        for (std::size_t b = 0; b < plain_bits.size(); ++b) {
          const float v = y[static_cast<std::size_t>(k.cc.allocation.channel(plain_bits[b]))];
          const float gv = gy[static_cast<std::size_t>(g.cc.allocation.channel(gained_bits[b]))];
          const double want = enabled ? kGain * static_cast<double>(v) : v;
          if ((v != unit && v != -unit) || gv != want) {
            ADD_FAILURE() << dtype_name(dt) << " case " << cases << " token " << i << " bit "
                          << k.c.bit_name(plain_bits[b]) << ": plain " << v << ", gained " << gv << " (want " << want
                          << ")";
            ++wrong;
            break;
          }
        }
        if (!enabled || wrong) continue;
        auto kc = choice(*ku, y), gc = choice(*gu, gy);
        ASSERT_TRUE(kc.has_value() && gc.has_value());
        EXPECT_EQ(gc->offset, kc->offset);
        EXPECT_EQ(gc->margin, kGain * kc->margin);
      }
    }
    std::printf("choice gain %d (%s): %d tokens, every NextToken bit exactly %d x the plain circuit's\n", kGain,
                std::string(dtype_name(dt)).c_str(), tokens, kGain);
    EXPECT_EQ(wrong, 0);
  }
}

// The unembedding picks exactly the token whose fields the residual holds, by
// a margin of one bit (alpha), and never a row the model does not generate.
TEST(CircuitChoice, UnembeddingPicksTheTokenInTheFields) {
  weights::Circuit c("simt.choice");
  circuit::NextToken n;
  auto in = [&](const std::string& name, int w) {
    auto r = c.input("next", name, w);
    EXPECT_TRUE(r.has_value());
    return r ? *r : Word{};
  };
  Word kind = in("kind", 8);
  n.wreg = kind[0], n.wmem = kind[1], n.sched = kind[2], n.data = kind[3];
  n.exec = kind[4], n.sync = kind[5], n.cta = kind[6], n.halt = kind[7];
  n.warp = in("warp", 3), n.wreg_reg = in("wreg.reg", 4), n.wreg_lanes = in("wreg.lanes", 4);
  n.wreg_format = in("wreg.format", 2), n.wmem_shared = in("wmem.shared", 1)[0], n.wmem_word = in("wmem.word", kProtoWordBits);
  n.wmem_count = in("wmem.count", 3), n.wmem_format = in("wmem.format", 2), n.sched_lanes = in("sched.lanes", 4);
  n.sched_status = in("sched.status", 2), n.sched_block = in("sched.block", kProtoBlockBits), n.exec_block = in("exec.block", kProtoBlockBits);
  n.exec_lanes = in("exec.lanes", 4), n.cta_index = in("cta", 7), n.data_value = in("data", 16);
  n.fault = in("fault", 1)[0], n.fault_slot = in("fault.slot", 3), n.fault_lane = in("fault.lane", 2);
  n.fault_kind = in("fault.kind", 1)[0];
  n.one = in("one", 1)[0];
  weights::Target t;
  t.shapes = test::qwen2b_shapes();
  auto a = weights::allocate(c, t);
  ASSERT_TRUE(a.has_value()) << a.status().to_string();
  constexpr double kAlpha = 4;
  auto u = circuit::record_unembedding(n, *a, kAlpha);
  ASSERT_TRUE(u.has_value()) << u.status().to_string();
  // Tokens: every kind, edge fields, and random rows.
  std::mt19937_64 rng(9);
  std::vector<std::int64_t> tokens;
  const RecordKind kinds[] = {RecordKind::kHalt, RecordKind::kSync, RecordKind::kCta,  RecordKind::kExec, RecordKind::kSched,
                              RecordKind::kWreg, RecordKind::kWmem, RecordKind::kData, RecordKind::kFault};
  for (RecordKind k : kinds) {
    tokens.push_back(first_id(k));
    tokens.push_back(first_id(k) + rows_of(k) - 1);
    for (int i = 0; i < 40; ++i) tokens.push_back(first_id(k) + static_cast<std::int64_t>(rng() % rows_of(k)));
  }
  int checked = 0, wrong = 0;
  // The record logits of a residual holding `values` (the unembedding's rows times the normalized residual).
  auto logits_of = [&](const std::vector<std::pair<Word, std::uint64_t>>& values) {
    const std::vector<float> x = weights::embed(c, *a, values);
    std::vector<float> logits(static_cast<std::size_t>(u->rows), 0.f);
    for (std::int64_t r = 0; r < u->rows; ++r) {
      double acc = 0;
      for (std::int64_t p = u->row_ptr[r]; p < u->row_ptr[r + 1]; ++p) acc += u->val[p] * x[u->col[p]];
      logits[r] = static_cast<float>(acc / weights::kResidualUnit);
    }
    return logits;
  };
  for (std::int64_t tok : tokens) {
    circuit::TokenBits tb;
    if (!circuit::generated_token_bits(n, tok, tb)) continue;  // a reserved row
    std::vector<std::pair<Word, std::uint64_t>> values{{Word{n.one}, 1}};
    for (const auto& [bit, v] : tb.bits)
      if (v) values.push_back({Word{bit}, 1});
    auto ch = circuit::choose(logits_of(values));
    ++checked;
    const double top = kAlpha * circuit::kChoiceKindWeight * tb.kind_weight;  // FAULT's kind bit weighs 2W
    if (!ch || ch->offset != tok || ch->logit != top || ch->margin != (tb.bits.size() > 1 ? kAlpha : top)) {
      ++wrong;
      ADD_FAILURE() << "token " << tok << ": " << (ch ? std::to_string(ch->offset) : ch.status().to_string())
                    << " margin " << (ch ? ch->margin : 0.0);
      if (wrong > 5) break;
    }
  }
  std::printf("choice: %d tokens, %d wrong, margin %g (alpha) for tokens with fields\n", checked, wrong, kAlpha);
  EXPECT_GT(checked, 300);
  EXPECT_EQ(wrong, 0);
  // An EXEC that faults: the write-back's first token (here a WREG) has its fields and kind bit in
  // the residual too, and FAULT wins by α·W.
  {
    const std::vector<float> logits =
        logits_of({{Word{n.one}, 1}, {Word{n.wreg}, 1}, {n.wreg_reg, 5}, {n.wreg_lanes, 15}, {Word{n.fault}, 1},
                   {n.fault_slot, 3}, {n.fault_lane, 2}, {Word{n.fault_kind}, 1}});
    auto ch = circuit::choose(logits);
    ASSERT_TRUE(ch.has_value()) << ch.status().to_string();
    auto rec = token_record(ch->offset);
    ASSERT_TRUE(rec.has_value());
    EXPECT_EQ(*rec, fault_record(3, 2, FaultKind::kOutOfBounds)) << to_text(*rec);
    EXPECT_EQ(ch->logit, 2 * kAlpha * circuit::kChoiceKindWeight);
    EXPECT_EQ(ch->margin, kAlpha);  // the runner-up: a FAULT row one field bit off
    std::vector<std::int64_t> wreg;
    ASSERT_TRUE(append_tokens(wreg_record(0, 5, 15, {0, 0, 0, 0}), 0, wreg));
    EXPECT_EQ(logits[static_cast<std::size_t>(wreg.front())], kAlpha * circuit::kChoiceKindWeight);  // W below
  }
  // Without fault fields (a successor with no fault input) FAULT is never generated.
  circuit::NextToken plain = n;
  plain.fault = c.zero();
  circuit::TokenBits none;
  EXPECT_FALSE(circuit::generated_token_bits(plain, first_id(RecordKind::kFault), none));
  // Rows the model never generates lose to everything.
  EXPECT_FALSE(circuit::generated_token_bits(n, first_id(RecordKind::kRom), none));
  EXPECT_FALSE(circuit::generated_token_bits(n, first_id(RecordKind::kRun), none));
}

}  // namespace
}  // namespace qgpu::simt
