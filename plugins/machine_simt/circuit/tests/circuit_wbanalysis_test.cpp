// Tests of the write-back analysis unit (wbanalysis.h): which lanes of which slot an EXEC
// writes back. The circuit holds the real records stage and register file (WREG tokens
// write the register rows), the unit's LIVE and shuffle-source RAMs (written through
// build_live_write on the DATA tokens of `LIVE B` / `LIVE exited` records) and the unit;
// everything runs token by token through the reference layer math at Qwen3.5-2B layer
// shapes (a 4,096-wide residual for the test's own input fields) in fp32 and bf16.
// * Real launches: prompt + generated stream of record_launch(); at every EXEC the slot
//   results and next blocks come from an interpreter run (LaunchObserver), never from the
//   circuit, and the emit masks must equal the lanes of the WREG records that follow it.
// * Random blocks against a plain C++ model of PROTOCOL.md §3.3 written here.
// * On every other token (including tokens carrying random unit inputs without exec.is)
//   every emit bit must be 0, and the state must stay intact for the next EXEC.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <random>

#include "circuit_harness.h"
#include "interp.h"
#include "isa.h"
#include "kernels.h"
#include "lower.h"
#include "protocol.h"
#include "records.h"
#include "register_file.h"
#include "wbanalysis.h"

namespace qgpu::simt::test {
namespace {

using circuit::kWbSlots;
using weights::DType;
using weights::Word;

constexpr int kTestInputBits = kWbSlots * (kOpCount + 4 + 4 * 32) + 4 * 5 + 4 + 1;

// By operand format (the unit writes_d in isa.h goes by execution unit): an independent check.
bool writes_d_by_format(Op op) {
  const Format f = op_info(op).format;
  return f == kFmtDA || f == kFmtDAB || f == kFmtDABC || f == kFmtLoad || f == kFmtAtom || f == kFmtCas ||
         f == kFmtShfl;
}

struct Rig {
  weights::Circuit c{"simt.wbanalysis"};
  circuit::FetchDecode fd;  // only its records stage
  circuit::RegisterFile rf;
  circuit::WbAnalysisIn in;
  circuit::WbAnalysis wa;
  weights::CompiledCircuit cc;
  bool ok = false;

  Word input(const std::string& o, const std::string& n, int w) {
    auto r = c.input(o, n, w);
    EXPECT_TRUE(r.has_value()) << r.status().to_string();
    return r ? *r : Word{};
  }

  Rig() {
    auto rec = circuit::build_records(c, kProtoRowsPerBlock);
    if (!rec) {
      ADD_FAILURE() << rec.status().to_string();
      return;
    }
    fd.records = *rec;
    fd.slots = kProtoRowsPerBlock;
    auto rf_ = circuit::build_register_file(c, fd, {});
    if (!rf_) {
      ADD_FAILURE() << rf_.status().to_string();
      return;
    }
    rf = *rf_;
    // A CTA token erases the register file (PROTOCOL.md §3.3; the machine does the same
    // with control's CTA bit): the streams write back no zeroing records.
    auto cta = fd.records.add_header_field(c, RecordKind::kCta, "t", "cta", 1,
                                           [](const Record&) -> sdk::Expected<std::uint64_t> { return 1; });
    if (!cta) {
      ADD_FAILURE() << cta.status().to_string();
      return;
    }
    for (int ram : rf.rams) {
      auto st = c.ram_clear(ram, (*cta)[0]);
      if (!st.is_ok()) {
        ADD_FAILURE() << st.to_string();
        return;
      }
    }
    in.enable = fd.records.exec_is[0];
    in.warp = fd.records.exec_warp;
    in.lanes = fd.records.exec_lanes;
    for (int s = 0; s < kWbSlots; ++s) {
      const std::string o = "t.s" + std::to_string(s);
      in.slot[s].opcode = input(o, "opcode", kOpCount);
      in.slot[s].d = input(o, "d", 4);
      for (int l = 0; l < 4; ++l) in.slot[s].value[l] = input(o, "v" + std::to_string(l), 32);
    }
    for (int l = 0; l < 4; ++l) in.next_block[l] = input("t", "next" + std::to_string(l), kProtoBlockBits);
    in.exited = input("t", "exited", 4);
    in.reg_rams = rf.rams;
    auto lw = circuit::build_live_write(c, fd.records);
    if (!lw) {
      ADD_FAILURE() << lw.status().to_string();
      return;
    }
    in.live_write = *lw;
    auto wa_ = circuit::build_wb_analysis(c, in);
    if (!wa_) {
      ADD_FAILURE() << wa_.status().to_string();
      return;
    }
    wa = *wa_;
    ok = compile_to(c, cc, 4096);
  }
};

const Rig& rig() {
  static std::unique_ptr<Rig> r = std::make_unique<Rig>();
  return *r;
}

// The unit's inputs on one EXEC token, test-side.
struct ExecInputs {
  std::array<Op, kWbSlots> op{};
  std::array<unsigned, kWbSlots> d{};
  std::array<std::array<std::uint32_t, 4>, kWbSlots> value{};
  std::array<unsigned, 4> next{};
  unsigned exited = 0;
};

Inputs unit_inputs(const Rig& k, const ExecInputs& x) {
  Inputs v;
  for (int s = 0; s < kWbSlots; ++s) {
    v.emplace_back(k.in.slot[s].opcode, std::uint64_t{1} << static_cast<int>(x.op[s]));
    v.emplace_back(k.in.slot[s].d, x.d[s]);
    for (int l = 0; l < 4; ++l) v.emplace_back(k.in.slot[s].value[l], x.value[s][l]);
  }
  for (int l = 0; l < 4; ++l) v.emplace_back(k.in.next_block[l], x.next[l]);
  v.emplace_back(k.in.exited, x.exited);
  return v;
}

// The block's last write of each register: slot s is final when its opcode writes d != r0
// and no later slot writes the same register.
std::array<bool, kWbSlots> finals(const ExecInputs& x) {
  std::array<bool, kWbSlots> f{};
  for (int s = 0; s < kWbSlots; ++s) {
    f[s] = writes_d_by_format(x.op[s]) && x.d[s] != 0;
    for (int t = s + 1; t < kWbSlots; ++t)
      if (writes_d_by_format(x.op[t]) && x.d[t] == x.d[s]) f[s] = false;
  }
  return f;
}

struct Stats {
  int tokens = 0, execs = 0, wrong = 0, off_nonzero = 0, emitted_lanes = 0, noise = 0;
  int exited_lanes = 0;  // emitted lanes that exited in the block (live by the shuffle-source row)
  double min_margin = std::numeric_limits<double>::infinity();
};

// Runs a record stream token by token; `exec_inputs(i)` gives the unit inputs and the
// expected emit masks of the i-th EXEC. Every other token must leave every emit bit 0.
class Runner {
 public:
  Runner(const Rig& k, DType dt) : k_(k), m_(k.cc.layers, k.cc.target.shapes, dt) {}

  // Feeds one record; `extra` is added to its last token (an EXEC: the unit's inputs).
  void feed(const Record& rec, const Inputs& extra, const std::array<unsigned, kWbSlots>* expect,
            const std::string& where, Stats& st) {
    auto toks = circuit::record_inputs(k_.fd.records, rec);
    ASSERT_TRUE(toks.has_value()) << where << ": " << toks.status().to_string();
    for (std::size_t i = 0; i < toks->size(); ++i) {
      Inputs v = (*toks)[i];
      if (i + 1 == toks->size()) v.insert(v.end(), extra.begin(), extra.end());
      const auto y = run_token(m_, k_.c, k_.cc, v);
      ++st.tokens;
      std::array<unsigned, kWbSlots> got{};
      for (int s = 0; s < kWbSlots; ++s)
        got[s] = static_cast<unsigned>(read_exact(k_.cc, y, k_.wa.slot[s].emit, "emit"));
      const bool is_exec = expect && i + 1 == toks->size();
      if (!is_exec) {
        for (int s = 0; s < kWbSlots; ++s)
          if (got[s] != 0 && st.off_nonzero++ < 5)
            ADD_FAILURE() << where << ": " << to_text(rec) << ": slot " << s << " emits 0x" << std::hex << got[s]
                          << " on a token that is not an EXEC";
        continue;
      }
      ++st.execs;
      for (int s = 0; s < kWbSlots; ++s) {
        st.emitted_lanes += __builtin_popcount((*expect)[s]);
        if (got[s] != (*expect)[s] && st.wrong++ < 10)
          ADD_FAILURE() << where << ": " << to_text(rec) << " slot " << s << ": emit 0x" << std::hex << got[s]
                        << ", expected 0x" << (*expect)[s];
      }
    }
  }
  void finish(Stats& st) const {
    for (const auto& lm : m_.margins()) st.min_margin = std::min({st.min_margin, lm.mlp_min, lm.gdn_min});
  }

 private:
  const Rig& k_;
  weights::ReferenceModel m_;
};

// ---------------------------------------------------------------------------- real launches

struct BlockView {
  std::uint32_t block = 0, warp = 0, mask = 0;
  std::array<std::array<std::uint32_t, 16>, 4> regs{};
  std::array<std::uint32_t, 4> pending{};
  std::array<bool, 4> exited{};
};

class Blocks final : public LaunchObserver {
 public:
  std::vector<BlockView> v;
  sdk::Status on_cta_start(std::uint32_t) override { return {}; }
  sdk::Status on_block(const BlockEvent& e) override {
    BlockView b;
    b.block = e.block;
    b.warp = static_cast<std::uint32_t>(e.warp);
    b.mask = e.mask;
    for (int l = 0; l < 4; ++l) {
      b.regs[l] = *e.regs[l];
      b.pending[l] = e.pending[l];
      b.exited[l] = e.run[l] == LaneRun::kExited;
    }
    v.push_back(b);
    return {};
  }
  sdk::Status on_barrier_release(std::uint32_t) override { return {}; }
  sdk::Status on_finish() override { return {}; }
};

// Registers read by a shuffle, from the program (PROTOCOL.md §3.3: live everywhere).
unsigned shuffle_sources_of(const Program& p) {
  unsigned m = 0;
  for (const MachineBlock& mb : p.blocks)
    for (const Slot& s : mb.slots)
      if (op_info(s.in.op).format == kFmtShfl && s.in.ak == Kind::kReg) m |= 1u << s.in.a;
  return m & 0xfffe;
}

sdk::KernelIR shfl_kernel() {
  IrBuilder b("shfl");
  using sdk::Opcode;
  const sdk::ValueId pin = b.ptr_param("in"), psum = b.ptr_param("sum"), pall = b.ptr_param("all");
  const sdk::ValueId gid = b.global_index();
  const sdk::ValueId v = b.load(b.element(pin, gid));
  sdk::ValueId d = b.bin(Opcode::kAdd, v, b.shfl(sdk::ShflMode::kDown, v, b.c32(2), 4));
  d = b.bin(Opcode::kAdd, d, b.shfl(sdk::ShflMode::kDown, d, b.c32(1), 4));
  sdk::ValueId x = b.bin(Opcode::kAdd, v, b.shfl(sdk::ShflMode::kBfly, v, b.c32(1), 4));
  x = b.bin(Opcode::kAdd, x, b.shfl(sdk::ShflMode::kBfly, x, b.c32(2), 4));
  b.store(b.element(pall, gid), x);
  const sdk::ValueId lane0 =
      b.icmp(sdk::CmpPred::kEq, b.bin(Opcode::kAnd, b.special(sdk::SpecialReg::kLaneId), b.c32(3)), b.c32(0));
  const int wr = b.block("write"), exit = b.block("exit");
  b.at(0);
  b.cond_br(lane0, wr, {}, exit);
  b.at(wr);
  b.store(b.element(psum, b.bin(Opcode::kLShr, gid, b.c32(2))), d);
  b.br(exit);
  b.at(exit);
  b.ret();
  return b.k;
}

void replay(const Rig& k, Runner& run, const LaunchCase& L, std::mt19937& rng, Stats& st) {
  auto p = lower_kernel(L.kernel, L.shape, circuit_sizes());
  ASSERT_TRUE(p) << L.name << ": " << p.status().to_string();
  const Program& prog = **p;
  auto lr = record_launch(prog, L.args, {});
  ASSERT_TRUE(lr) << L.name << ": " << lr.status().to_string();
  Blocks obs;
  ASSERT_TRUE(interpret_program(prog, L.args, {}, &obs));
  auto layout = layout_arguments(prog, L.args);
  ASSERT_TRUE(layout);
  const std::vector<std::uint64_t> image = prog.image(layout->param_values);
  const int rows = prog.rows_per_block();
  ASSERT_GE(rows - 1, 1);
  // The prompt must carry the shuffle sources (computed here from the program) as `LIVE
  // exited` exactly when some shuffle reads a register; the unit reads them from its RAM.
  const unsigned shuffled = shuffle_sources_of(prog);
  int exited_rows = 0;
  for (const Record& rec : lr->prompt)
    if (rec.kind == RecordKind::kLive && rec.block == kLiveExited) {
      ++exited_rows;
      EXPECT_EQ(rec.values[0], shuffled) << L.name;
    }
  EXPECT_EQ(exited_rows, shuffled != 0 ? 1 : 0) << L.name;
  for (const Record& rec : lr->prompt) {
    run.feed(rec, {}, nullptr, L.name + " prompt", st);
    if (::testing::Test::HasFatalFailure()) return;
  }
  std::size_t e = 0;
  const auto& g = lr->generated;
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (g[i].kind != RecordKind::kExec) {
      run.feed(g[i], {}, nullptr, L.name, st);
      continue;
    }
    ASSERT_LT(e, obs.v.size()) << L.name;
    const BlockView& b = obs.v[e++];
    ASSERT_TRUE(b.block == g[i].block && b.warp == g[i].warp && b.mask == g[i].lanes) << L.name << " EXEC " << e;
    ExecInputs x;
    for (int s = 0; s < kWbSlots; ++s) {
      Instr in;
      in.op = Op::kNop;
      if (s < rows - 1) {
        ASSERT_TRUE(decode(image[b.block * rows + s], in)) << L.name;
      }
      x.op[s] = in.op;
      x.d[s] = in.d;
    }
    const auto fin = finals(x);
    // The WREG records the stream writes after this EXEC: lanes per register.
    std::map<unsigned, unsigned> wreg;
    for (std::size_t j = i + 1; j < g.size() && g[j].kind == RecordKind::kWreg; ++j) wreg[g[j].reg] |= g[j].lanes;
    std::array<unsigned, kWbSlots> expect{};
    for (int s = 0; s < kWbSlots; ++s)
      if (fin[s] && wreg.count(x.d[s])) expect[s] = wreg[x.d[s]];
    for (int s = 0; s < kWbSlots; ++s)
      for (int l = 0; l < 4; ++l) st.exited_lanes += ((expect[s] >> l) & 1) && b.exited[l];
    for (const auto& [r, lanes] : wreg) {
      bool covered = false;
      for (int s = 0; s < kWbSlots; ++s) covered |= fin[s] && x.d[s] == r;
      ASSERT_TRUE(covered) << L.name << ": WREG r" << r << " after " << to_text(g[i]) << " has no final slot";
    }
    for (int s = 0; s < kWbSlots; ++s)
      for (int l = 0; l < 4; ++l)  // non-final slots and lanes outside the mask: noise that must be ignored
        x.value[s][l] = fin[s] && ((b.mask >> l) & 1) ? b.regs[l][x.d[s]] : static_cast<std::uint32_t>(rng());
    for (int l = 0; l < 4; ++l) {
      const bool in_mask = (b.mask >> l) & 1;
      const bool exited = in_mask ? b.exited[l] : (rng() & 1);
      x.exited |= (exited ? 1u : 0u) << l;
      x.next[l] = in_mask && !exited ? b.pending[l] : rng() % kProtoBlocks;
    }
    run.feed(g[i], unit_inputs(k, x), &expect, L.name, st);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(e, obs.v.size()) << L.name;
}

TEST(CircuitWbAnalysis, RealLaunchesEmitTheStreamsWregLanes) {
  const Rig& k = rig();
  ASSERT_TRUE(k.ok);
  std::vector<std::int32_t> a24(24), b24(24), big(10), c10(10, -7), in24(24), in16(16);
  for (int i = 0; i < 24; ++i) a24[i] = i - 11, b24[i] = 3 * i + 1, in24[i] = (i * 7919) % 201 - 100;
  for (int i = 0; i < 10; ++i) big[i] = 50000 * i - 70000;
  for (int i = 0; i < 16; ++i) in16[i] = 3 * i - 20;
  const std::vector<LaunchCase> launches = {
      {"dot 1x4", dot_kernel(), {1, 4}, {arr("a", {1, 2, 3}), arr("b", {4, 5, 6}), arr("out", {0}), scalar("n", 3)}},
      {"dot 3x8", dot_kernel(), {3, 8}, {arr("a", a24), arr("b", b24), arr("out", {0}), scalar("n", 24)}},
      {"ifelse 1x8",
       ifelse_kernel(),
       {1, 8},
       {arr("a", {3, -8, 7, 10, 0, 5, -3, 12}), arr("out", std::vector<std::int32_t>(8))}},
      {"loop 1x8",
       loop_kernel(),
       {1, 8},
       {arr("a", {3, 0, 5, 1, -2, 7, 2, 4}), arr("out", std::vector<std::int32_t>(8))}},
      {"reduce 2x8", reduce_kernel(), {2, 8}, {arr("in", in16), arr("out", {0, 0})}},
      {"atomics 2x4",
       atomics_kernel(),
       {2, 4},
       {arr("a", {5, -3, 9, 1, 7, 2, -8, 4}), arr("m", std::vector<std::int32_t>(12))}},
      {"vadd 2x5", vadd_kernel(), {2, 5}, {arr("a", big), arr("b", big), arr("c", c10), scalar("n", 9)}},
      {"shfl 2x12",
       shfl_kernel(),
       {2, 12},
       {arr("in", in24), arr("sum", std::vector<std::int32_t>(6)), arr("all", std::vector<std::int32_t>(24))}},
      {"shfl_add 2x8 (exiting lanes write back a shuffle source)",
       shfl_add_kernel(),
       {2, 8},
       {arr("x", in16), arr("out", std::vector<std::int32_t>(16))}},
  };
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Stats st;
    Runner run(k, dt);
    std::mt19937 rng(11);
    for (const LaunchCase& L : launches) {
      replay(k, run, L, rng, st);
      if (::testing::Test::HasFatalFailure()) return;
    }
    run.finish(st);
    std::printf(
        "[ wbanalysis ] %s: 9 launches, %d tokens, %d EXEC, %d emitted lanes (%d of exited lanes), %d wrong, %d "
        "nonzero off EXEC, min margin %g\n",
        dt == DType::kF32 ? "fp32" : "bf16", st.tokens, st.execs, st.emitted_lanes, st.exited_lanes, st.wrong,
        st.off_nonzero, st.min_margin);
    EXPECT_EQ(st.wrong, 0);
    EXPECT_EQ(st.off_nonzero, 0);
    EXPECT_GT(st.emitted_lanes, 100);
    EXPECT_GT(st.exited_lanes, 0);  // the shfl launch writes back shuffle sources of exiting lanes
    EXPECT_GE(st.min_margin, 128);
  }
}

// ---------------------------------------------------------------------------- random blocks

std::uint32_t special_value(std::mt19937& rng) {
  static const std::uint32_t kEdge[] = {0, 1, 0x7fffffffu, 0x80000000u, 0xffffffffu, 0xff, 0x100, 0xffffff00u};
  switch (rng() % 4) {
    case 0: return kEdge[rng() % 8];
    case 1: return rng() % 256;
    default: return static_cast<std::uint32_t>(rng());
  }
}

TEST(CircuitWbAnalysis, RandomBlocksMatchAPlainModel) {
  const Rig& k = rig();
  ASSERT_TRUE(k.ok);
  for (DType dt : {DType::kF32, DType::kBF16}) {
    std::mt19937 rng(dt == DType::kF32 ? 5 : 6);
    Stats st;
    Runner run(k, dt);
    // The model's state: register rows (warp, reg, lane), LIVE rows and the shuffle sources
    // (`LIVE exited`; never written at first, so 0), written only by records.
    std::array<std::array<std::array<std::uint32_t, 4>, 16>, kProtoWarps> regs{};
    std::array<unsigned, kProtoBlocks> live{};
    unsigned shuffled = 0;
    for (int w = 0; w < kProtoWarps; ++w)
      for (int r = 1; r < 16; ++r) run.feed(wreg_record(w, r, 15, {}), {}, nullptr, "reset", st);
    for (int b = 0; b < kProtoBlocks; ++b) {
      live[b] = rng() & 0xfffe;
      run.feed(live_record(b, live[b]), {}, nullptr, "live", st);
    }
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    const int kCases = 400;
    for (int n = 0; n < kCases; ++n) {
      const std::string where = "case " + std::to_string(n);
      const unsigned w = rng() % kProtoWarps;
      const unsigned pool = rng() % 3 == 0 ? 3 : 16;  // small pools: repeated destinations
      ExecInputs x;
      for (int s = 0; s < kWbSlots; ++s) {
        x.op[s] = rng() % 4 ? static_cast<Op>(1 + rng() % (kOpCount - 1)) : Op::kNop;
        x.d[s] = rng() % pool;
      }
      // Register writes before the EXEC: destinations of this block, random lanes and values.
      for (int u = rng() % 4; u > 0; --u) {
        const unsigned dd = x.d[rng() % kWbSlots];
        const unsigned r = rng() % 2 && dd != 0 ? dd : 1 + rng() % 15;
        const unsigned lanes = 1 + rng() % 15;
        std::array<std::uint32_t, 4> v{};
        for (int l = 0; l < 4; ++l)
          if ((lanes >> l) & 1) v[l] = special_value(rng), regs[w][r][l] = v[l];
        for (const Record& rec : wreg_records(w, r, lanes, v)) run.feed(rec, {}, nullptr, where, st);
      }
      if (rng() % 4 == 0) {
        const unsigned b = rng() % kProtoBlocks;
        live[b] = rng() & 0xfffe;
        run.feed(live_record(b, live[b]), {}, nullptr, where, st);
      }
      if (n > 20 && rng() % 6 == 0) {  // new shuffle sources (the first 20 cases read the unwritten row)
        shuffled = rng() % 4 ? rng() & 0xfffe : 0;
        run.feed(live_exited_record(shuffled), {}, nullptr, where, st);
      }
      for (int s = 0; s < kWbSlots; ++s)
        for (int l = 0; l < 4; ++l)  // half the values equal the stored row: unchanged
          x.value[s][l] = rng() % 2 ? regs[w][x.d[s]][l] : special_value(rng);
      for (int l = 0; l < 4; ++l) x.next[l] = rng() % kProtoBlocks;
      x.exited = rng() % 3 ? 0 : rng() % 16;
      if (rng() % 4 == 0) {  // a token carrying every unit input but not an EXEC (nor a LIVE write)
        run.feed(halt_record(), unit_inputs(k, x), nullptr, where + " (noise)", st);
        ++st.noise;
      }
      const unsigned mask = 1 + rng() % 15;
      std::array<unsigned, kWbSlots> expect{};
      const auto fin = finals(x);
      for (int s = 0; s < kWbSlots; ++s)
        for (int l = 0; l < 4; ++l) {
          const bool exited = (x.exited >> l) & 1;
          const unsigned lv = exited ? shuffled : live[x.next[l]];
          if (fin[s] && ((mask >> l) & 1) && ((lv >> x.d[s]) & 1) && x.value[s][l] != regs[w][x.d[s]][l])
            expect[s] |= 1u << l, st.exited_lanes += exited;
        }
      run.feed(exec_record(rng() % kProtoBlocks, w, mask), unit_inputs(k, x), &expect, where, st);
      ASSERT_FALSE(::testing::Test::HasFatalFailure());
    }
    run.finish(st);
    std::printf(
        "[ wbanalysis ] random %s: %d cases, %d tokens (%d carrying unit inputs without exec.is), %d emitted lanes "
        "(%d of exited lanes), %d wrong, %d nonzero off EXEC, min margin %g\n",
        dt == DType::kF32 ? "fp32" : "bf16", st.execs, st.tokens, st.noise, st.emitted_lanes, st.exited_lanes, st.wrong,
        st.off_nonzero, st.min_margin);
    EXPECT_EQ(st.execs, kCases);
    EXPECT_GT(st.exited_lanes, 20);
    EXPECT_GT(st.noise, 50);
    EXPECT_EQ(st.wrong, 0);
    EXPECT_EQ(st.off_nonzero, 0);
    EXPECT_GE(st.min_margin, 128);
  }
}

// ---------------------------------------------------------------------------- cost and errors

TEST(CircuitWbAnalysis, Cost) {
  const Rig& k = rig();
  ASSERT_TRUE(k.ok);
  const auto& sch = k.cc.schedule;
  std::int64_t heads = 0, unit_neurons = 0;
  int unit_reads = 0, first = 1 << 30, last = -1;
  for (std::size_t i = 0; i < k.c.ops().size(); ++i) {
    const weights::Op& op = k.c.ops()[i];
    if (op.name.rfind("wba.", 0) != 0 && op.name.find(".read.wba.") == std::string::npos) continue;
    first = std::min(first, sch.op_layer[i]);
    last = std::max(last, sch.op_layer[i]);
    if (op.is_mlp) {
      unit_neurons += weights::unique_neuron_count(op.mlp);
      std::printf("[ wbanalysis ]   layer %d MLP %s: %lld neurons\n", sch.op_layer[i], op.name.c_str(),
                  static_cast<long long>(weights::unique_neuron_count(op.mlp)));
    } else {
      ++unit_reads;
    }
  }
  std::printf("[ wbanalysis ] circuit: %d layers; per layer (MLP neurons / GDN key heads):", sch.num_layers);
  for (int l = 0; l < sch.num_layers; ++l) {
    std::printf(" %d: %lld/%lld", l, static_cast<long long>(sch.use[l].mlp_neurons),
                static_cast<long long>(sch.use[l].key_heads));
    heads += sch.use[l].key_heads;
  }
  std::printf(
      "\n[ wbanalysis ] unit: layers %d..%d, %lld neurons (before cross-op merging), %d read ports; whole "
      "circuit %lld neurons, %lld heads, %d channels (%d without the test's %d input bits)\n",
      first, last, static_cast<long long>(unit_neurons), unit_reads, static_cast<long long>(k.cc.total_neurons()),
      static_cast<long long>(heads), k.cc.allocation.channels_used, k.cc.allocation.channels_used - kTestInputBits,
      kTestInputBits);
  EXPECT_EQ(unit_reads, 21);  // 16 register rows + 4 LIVE rows + the shuffle-source row
  EXPECT_LE(last - first, 2);
  weights::Target t = k.cc.target;
  t.reuse_channels = true;
  t.reuse_eagerly = true;
  auto reused = weights::compile(k.c, t);
  ASSERT_TRUE(reused.has_value()) << reused.status().to_string();
  std::printf("[ wbanalysis ] eager channel reuse: %d channels, live peak %d bits (%d without the test's inputs)\n",
              reused->allocation.channels_used, reused->allocation.live_peak,
              reused->allocation.live_peak - kTestInputBits);
}

TEST(CircuitWbAnalysis, NamesInputsOfTheWrongWidth) {
  weights::Circuit c;
  circuit::WbAnalysisIn in;
  auto e = c.input("t", "e", 1);
  ASSERT_TRUE(e);
  in.enable = (*e)[0];
  in.warp = *c.input("t", "warp", 3);
  in.lanes = *c.input("t", "lanes", 5);
  auto r = circuit::build_wb_analysis(c, in);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().message(), "write-back analysis: lanes has 5 bits, expected 4");
}

}  // namespace
}  // namespace qgpu::simt::test
