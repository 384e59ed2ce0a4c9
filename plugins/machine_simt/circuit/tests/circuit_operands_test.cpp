// The operand select of one slot (plugins/machine_simt/circuit/src/operands.h)
// behind the real fetch/decode stage and register file, compiled to Qwen3.5-2B
// layer shapes and fed the protocol's exact token ids (ROM records, WREG
// records, EXEC records) through the reference layer math in fp32 and bf16.
// The earlier slots' results and the special words are test inputs set at
// random on every token. Expected operands come from a plain C++ model that
// runs the block's earlier slots in order on a copy of the lane's registers
// (docs/ISA.md §5: each instruction writes d for the lanes of the mask; §6:
// values produced earlier in the same block), with "writes d" taken from the
// interpreter's own rule (every format but store, none and the terminators).
// On every other token each field of the unit must read exactly 0.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "alu.h"
#include "circuit_harness.h"
#include "fetch_decode.h"
#include "isa.h"
#include "operands.h"
#include "protocol.h"
#include "qgpu/weights/compile.h"
#include "qgpu/weights/reference.h"
#include "records.h"
#include "register_file.h"

namespace qgpu::simt {
namespace {

using circuit::Operand;
using weights::DType;
using weights::Word;
using Lanes = std::array<std::uint32_t, kProtoLanes>;

constexpr int kSlots = 5;  // 4 instruction slots + the terminator
constexpr int kEarlier = 3;

// The interpreter's rule (interp.cpp): every format writes d except store, none and the terminators.
bool writes_d(std::uint64_t row) {
  const unsigned op = row & 0x3f;
  if (op >= static_cast<unsigned>(kOpCount)) return false;
  const Format f = op_info(static_cast<Op>(op)).format;
  return f != kFmtStore && f != kFmtNone && f != kFmtBr && f != kFmtBrc;
}

struct Build {
  int slot = 3;        // the slot whose operands are built (ops alone)
  bool chain = false;  // all 4 slots, each followed by its ALU (the ALU results feed the bypass)
  // Chain: what slot s's reads wait for: nothing (as early as decode allows), slot s-1's operand
  // a (final at its select), or the flags of slot s-1's ALU (final at the ALU's first MLP).
  enum class After { kNone, kSelect, kAluFlags } after = After::kNone;
  bool reuse = false;          // Target::reuse_channels (eagerly)
  bool mark = false;           // mark what the test reads back as outputs (needed with reuse)
  std::int64_t hidden = 4096;  // residual width of the compile
  bool defer_last = false;     // not chain: slot s-1's value left to the caller (OperandsIn::defer_last)
};

// fetch/decode + register file + the operand select (and in a chain the ALUs).
struct Machine {
  weights::Circuit c{"simt.operands"};
  circuit::FetchDecode fd;
  circuit::RegisterFile rf;
  Word ntid, ctaid, nctaid;
  std::array<std::array<Word, kProtoLanes>, kEarlier> result;  // test inputs: earlier slots' results
  std::map<int, circuit::OperandsOut> ops;
  std::map<int, circuit::AluOut> alu;
  weights::CompiledCircuit cc;
  weights::Target target;
  std::string error;
  bool check_operands = true;  // false when reuse may have given the operands' channels away
  int test_bits = 0;           // the test's own input bits
  int base_channels = 0;
  bool defer_last = false;
  bool ok = false;

  explicit Machine(const Build& b) {
    ok = build(b);
    if (!ok) return;
    check_operands = !b.reuse || (b.mark && !b.chain);
    target.shapes = test::qwen2b_shapes();
    target.shapes.hidden_size = b.hidden;
    target.reuse_channels = b.reuse;
    target.reuse_eagerly = b.reuse;
    auto r = weights::compile(c, target);
    if (!r) {
      error = r.status().message();
      ok = false;
      return;
    }
    cc = std::move(*r);
  }

  Word input(const std::string& name, int width) {
    auto w = c.input("test", name, width);
    EXPECT_TRUE(w.has_value()) << w.status().to_string();
    test_bits += width;
    return w ? *w : Word{};
  }

  bool build(const Build& b) {
    auto f = circuit::build_fetch_decode(c, kSlots);
    if (!f) return fail(f.status());
    fd = std::move(*f);
    auto r = circuit::build_register_file(c, fd, {});
    if (!r) return fail(r.status());
    rf = std::move(*r);
    ntid = input("ntid", 32);
    ctaid = input("ctaid", 32);
    nctaid = input("nctaid", 32);
    defer_last = b.defer_last && !b.chain && b.slot > 0;
    if (!b.chain)
      for (int j = 0; j < b.slot - (defer_last ? 1 : 0); ++j)
        for (int l = 0; l < kProtoLanes; ++l)
          result[j][l] = input("r" + std::to_string(j) + ".lane" + std::to_string(l), 32);
    const int first = b.chain ? 0 : b.slot, last = b.chain ? 3 : b.slot;
    for (int s = first; s <= last; ++s) {
      circuit::OperandsIn in = circuit::operands_in(fd, rf, s);
      in.ntid = ntid;
      in.ctaid = ctaid;
      in.nctaid = nctaid;
      for (int j = 0; j < s; ++j)
        in.earlier.push_back(circuit::earlier_slot(fd.slot[j], b.chain ? alu[j].d : result[j]));
      if (defer_last) {
        in.defer_last = true;
        in.earlier.back().value = {};
      }
      if (b.after == Build::After::kSelect && s > 0) in.after = ops[s - 1].a[0][0];
      if (b.after == Build::After::kAluFlags && s > 0) {
        // alu.h exposes only d: the flags field is found by its name (owner alu.s<S>, lane0.flags).
        const int f = c.find_field("alu.s" + std::to_string(s - 1) + ".lane0.flags");
        if (f < 0) return fail(sdk::not_found("alu.s" + std::to_string(s - 1) + ".lane0.flags"));
        in.after = weights::Bit{f, 0, false};
      }
      auto o = circuit::build_operands(c, in);
      if (!o) return fail(o.status());
      ops[s] = std::move(*o);
      if (b.mark && !b.chain)
        for (const auto* w : {&ops[s].a, &ops[s].b, &ops[s].c})
          for (const Word& x : *w)
            if (!x.empty() && !c.mark_output(x).is_ok()) return false;
      if (!b.chain) continue;
      circuit::AluIn ai;
      ai.owner = "alu.s" + std::to_string(s);
      ai.enable = fd.exec_is[0];
      ai.opcode = fd.slot[s].opcode;
      for (int l = 0; l < kProtoLanes; ++l) ai.lane[l] = {ops[s].a[l], ops[s].b[l], ops[s].c[l]};
      auto a = circuit::build_alu(c, ai);
      if (!a) return fail(a.status());
      alu[s] = std::move(*a);
      if (b.mark)
        for (const Word& x : alu[s].d)
          if (!c.mark_output(x).is_ok()) return false;
    }
    return true;
  }
  bool fail(const sdk::Status& s) {
    error = s.to_string();
    ADD_FAILURE() << error;
    return false;
  }
};

// Fields of the unit (its control bits, register reads and operands) and of the chain's ALUs.
bool is_unit_field(const weights::Field& f) {
  return f.owner.rfind("ops.", 0) == 0 || f.owner.rfind("alu.", 0) == 0 ||
         (f.owner == "regs" && f.name.rfind("ops.", 0) == 0);
}

void report(const Machine& k, const std::string& what) {
  std::int64_t heads = 0;
  std::string per_layer;
  for (int l = 0; l < k.cc.schedule.num_layers; ++l) {
    heads += k.cc.schedule.use[l].key_heads;
    per_layer +=
        " " + std::to_string(k.cc.schedule.use[l].key_heads) + "/" + std::to_string(k.cc.schedule.use[l].mlp_neurons);
  }
  // Where the unit's ops landed: name -> layer (GDN reads and MLPs).
  std::map<std::string, std::pair<int, int>> where;  // kind -> (first, last) layer
  const auto& ops = k.c.ops();
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const std::string& n = ops[i].name;
    const auto p = n.find("ops.s");
    if (p == std::string::npos) continue;
    const std::string slot = n.substr(p, 6);
    std::string kind = n.find(".read.") != std::string::npos ? "reads"
                       : n.find(".hit") != std::string::npos ? "match"
                       : n.find(".sel") != std::string::npos ? "take/keep"
                                                             : "select";
    const int layer = k.cc.schedule.op_layer[i];
    auto it = where.find(slot + " " + kind);
    if (it == where.end())
      where[slot + " " + kind] = {layer, layer};
    else
      it->second = {std::min(it->second.first, layer), std::max(it->second.second, layer)};
  }
  // What is live at the peak, by the first part of the owner.
  const auto live = weights::live_ranges(k.c, k.target, k.cc.schedule);
  int peak = -1, peak_at = -2;
  for (int b = -1; b < 2 * k.cc.schedule.num_layers; ++b) {
    int n = 0;
    for (std::size_t f = 0; f < live.size(); ++f)
      if (k.c.fields()[f].alias_of < 0 && live[f].live_after(b)) n += k.c.fields()[f].width;
    if (n > peak) peak = n, peak_at = b;
  }
  std::map<std::string, int> by_owner;
  for (std::size_t f = 0; f < live.size(); ++f) {
    const weights::Field& fl = k.c.fields()[f];
    if (fl.alias_of >= 0 || !live[f].live_after(peak_at)) continue;
    std::string o =
        fl.owner == "regs" && fl.name.rfind("ops.", 0) == 0 ? "ops" : fl.owner.substr(0, fl.owner.find('.'));
    by_owner[o] += fl.width;
  }
  std::string peak_text;
  for (const auto& [o, n] : by_owner) peak_text += " " + o + " " + std::to_string(n);
  std::string places;
  for (const auto& [n, r] : where)
    places += " " + n + "@" + std::to_string(r.first) + (r.second != r.first ? "-" + std::to_string(r.second) : "");
  std::printf(
      "%s: %d layers, %lld heads, %lld MLP neurons, %d residual channels (%d without the test's %d input bits), "
      "live peak %d bits, %zu clears; heads/neurons per layer:%s\n  placed:%s\n  live after sub-layer %d (%d "
      "bits):%s\n",
      what.c_str(), k.cc.schedule.num_layers, static_cast<long long>(heads),
      static_cast<long long>(k.cc.total_neurons()), k.cc.allocation.channels_used,
      k.cc.allocation.channels_used - k.test_bits, k.test_bits, k.cc.allocation.live_peak,
      k.cc.allocation.clears.size(), per_layer.c_str(), places.c_str(), peak_at, peak, peak_text.c_str());
}

// --- ROM images.

Instr make(Op op, int d, int a, Kind ak, int b, Kind bk, int c = 0, std::uint32_t imm = 0) {
  Instr in;
  in.op = op;
  in.d = static_cast<std::uint8_t>(d);
  in.a = static_cast<std::uint8_t>(a);
  in.b = static_cast<std::uint8_t>(b);
  in.c = static_cast<std::uint8_t>(c);
  in.ak = ak;
  in.bk = bk;
  in.imm = imm;
  return in;
}
constexpr Kind R = Kind::kReg, I = Kind::kImm, S = Kind::kSpecial;

// Hand-built blocks (slots 0-3): bypass chains, a register written twice, r0, non-writers with a
// d field, every writing unit, operands whose field equals an earlier d but are not registers.
std::vector<std::array<Instr, 4>> hand_blocks() {
  return {
      {make(Op::kAdd, 3, 1, R, 2, R), make(Op::kAdd, 4, 3, R, 3, R), make(Op::kSub, 3, 3, R, 4, R),
       make(Op::kSel, 5, 3, R, 4, R, 3)},
      {make(Op::kMov, 2, 1, R, 0, R), make(Op::kMov, 2, 3, R, 0, R), make(Op::kNop, 0, 0, R, 0, R),
       make(Op::kAdd, 1, 2, R, 2, R, 2)},
      {make(Op::kAdd, 0, 1, R, 2, R), make(Op::kAdd, 1, 0, R, 0, R, 0), make(Op::kMov, 0, 1, R, 0, R),
       make(Op::kMad, 2, 0, R, 1, R, 0)},
      {make(Op::kSt, 3, 1, R, 2, R, 3, 8), make(Op::kNop, 3, 3, R, 3, R), make(Op::kBr, 3, 0, R, 0, R, 0, 1),
       make(Op::kMad, 4, 3, R, 3, R, 3)},
      {make(Op::kLd, 3, 1, R, 0, R, 0, 4), make(Op::kShflIdx, 4, 3, R, 1, I, 0, 1), make(Op::kBallot, 5, 4, R, 0, R),
       make(Op::kMad, 6, 3, R, 4, R, 5)},
      {make(Op::kAtomAdd, 2, 1, R, 3, R, 0, 0), make(Op::kMul, 3, 2, R, 2, R), make(Op::kAtomCas, 1, 2, R, 3, R, 2),
       make(Op::kSel, 2, 1, R, 3, R, 1)},
      {make(Op::kMov, 1, 0, S, 0, R), make(Op::kAdd, 2, 1, S, 2, S), make(Op::kMad, 3, 2, S, 1, S, 1),
       make(Op::kAdd, 4, 4, S, 3, S)},
      {make(Op::kMov, 3, 1, R, 0, R), make(Op::kAdd, 4, 3, I, 3, R, 0, 0xfffffff0u), make(Op::kMov, 2, 4, R, 0, R),
       make(Op::kAdd, 5, 2, S, 3, I, 3, 0x80000000u)},
      {make(Op::kXor, 15, 15, R, 15, R, 15), make(Op::kOr, 15, 15, R, 15, R), make(Op::kAnd, 15, 15, R, 15, I, 15, 7),
       make(Op::kSel, 14, 15, R, 15, R, 15)},
      {make(Op::kSetLt, 1, 1, R, 1, R), make(Op::kShl, 1, 1, R, 0, I, 0, 31), make(Op::kShr, 2, 1, R, 1, R),
       make(Op::kSra, 1, 2, R, 1, R, 1)},
  };
}

// Random valid rows with registers drawn from r0-r4 so that bypasses are frequent.
Instr random_instr(std::mt19937_64& rng) {
  Instr in;
  in.op = static_cast<Op>(rng() % static_cast<unsigned>(Op::kBr));  // no terminator in slots 0-3
  auto kind = [&] { return rng() % 5 < 3 ? R : rng() % 2 ? I : S; };
  in.ak = kind();
  in.bk = kind();
  auto num = [&](Kind k) {
    return static_cast<std::uint8_t>(k == S           ? rng() % static_cast<unsigned>(Special::kCount)
                                     : rng() % 8 == 0 ? rng() % 16
                                                      : rng() % 5);
  };
  in.d = static_cast<std::uint8_t>(rng() % 8 == 0 ? rng() % 16 : rng() % 5);
  in.a = num(in.ak);
  in.b = num(in.bk);
  in.c = num(R);
  in.flags = static_cast<std::uint8_t>(rng() % 64);
  in.imm = static_cast<std::uint32_t>(rng());
  return in;
}

std::vector<std::uint64_t> rom_image(std::uint64_t seed, bool alu_only) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint64_t> rows(kProtoBlocks * kSlots);
  const auto hand = hand_blocks();
  for (int b = 0; b < kProtoBlocks; ++b) {
    for (int s = 0; s < 4; ++s) {
      Instr in = !alu_only && b < static_cast<int>(hand.size()) ? hand[b][s] : random_instr(rng);
      if (alu_only)  // chain: ALU opcodes, nop and store (no result of another unit to feed)
        while (!(op_info(in.op).unit == kUnitAlu || in.op == Op::kNop || in.op == Op::kSt)) in = random_instr(rng);
      rows[b * kSlots + s] = encode(in);
    }
    rows[b * kSlots + 4] = encode(make(Op::kExit, 0, 0, R, 0, R));
  }
  return rows;
}

std::uint32_t random_value(std::mt19937_64& rng) {
  static const std::uint32_t kEdges[] = {0,      1,          0x7f,        0x80,    0xffffff80u, 0xffffffffu, 0x7fff,
                                         0x8000, 0x7fffffff, 0x80000000u, 0x10000, 31,          32,          255};
  switch (rng() % 5) {
    case 0: return 0;
    case 1: return kEdges[rng() % std::size(kEdges)];
    case 2: return static_cast<std::uint32_t>(static_cast<std::int32_t>(static_cast<std::int8_t>(rng())));
    default: return static_cast<std::uint32_t>(rng());
  }
}

// --- The run.

struct Stats {
  int tokens = 0, execs = 0, checked = 0, wrong = 0, inexact = 0, leaked = 0, bypassed = 0;
  int deferred = 0;  // defer_last: operands the last earlier slot bypasses (expected 0)
  double mlp_min = std::numeric_limits<double>::infinity(), gdn_min = std::numeric_limits<double>::infinity();
};

class Runner {
 public:
  Runner(const Machine& k, DType dt, std::uint64_t seed)
      : k_(k), m_(k.cc.layers, k.cc.target.shapes, dt), dn_(weights::dtype_name(dt)), rng_(seed) {
    for (const weights::Field& f : k.c.fields())
      if (is_unit_field(f)) unit_fields_.push_back(static_cast<int>(&f - k.c.fields().data()));
  }

  void feed(const Record& r) {
    auto ids = circuit::record_token_ids(k_.fd.records, r);
    ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
    for (std::size_t t = 0; t < ids->size(); ++t) {
      auto in = circuit::token_inputs(k_.fd.records, (*ids)[t]);
      ASSERT_TRUE(in.has_value()) << in.status().to_string();
      // The test's inputs are set on every token: only EXEC tokens may see them.
      for (auto& v : special_) v = random_value(rng_);
      for (auto& lanes : result_)
        for (auto& v : lanes) v = random_value(rng_);
      in->emplace_back(k_.ntid, special_[0]);
      in->emplace_back(k_.ctaid, special_[1]);
      in->emplace_back(k_.nctaid, special_[2]);
      for (int j = 0; j < kEarlier; ++j)
        for (int l = 0; l < kProtoLanes; ++l)
          if (!k_.result[j][l].empty()) in->emplace_back(k_.result[j][l], result_[j][l]);
      const std::vector<float> y = m_.step(weights::embed(k_.c, k_.cc.allocation, *in));
      ++stats.tokens;
      where_ = dn_ + " " + to_text(r) + " token " + std::to_string(t);
      if (r.kind == RecordKind::kExec)
        check_exec(y, r);
      else
        for (int f : unit_fields_) {
          const weights::Field& fl = k_.c.fields()[f];
          if (fl.superseded_by >= 0) continue;                              // an aliased slot: its last name is checked
          if (k_.cc.target.reuse_channels && !k_.c.is_output(f)) continue;  // its channels may be another's now
          Word w;
          for (int i = 0; i < fl.width; ++i) w.push_back(weights::Bit{f, i, false});
          if (read(y, w) != 0 && ++stats.leaked <= 5) ADD_FAILURE() << where_ << ": " << fl.full_name() << " is not 0";
        }
    }
    if (r.kind == RecordKind::kRom) {
      std::uint64_t& row = rom_[r.block * kSlots + r.slot];
      row = r.half ? (row & 0xffffffffu) | (std::uint64_t{r.values[0]} << 32) : (row & ~0xffffffffull) | r.values[0];
    }
    if (r.kind == RecordKind::kWreg)
      for (int l = 0; l < kProtoLanes; ++l)
        if ((r.lanes >> l) & 1) regs_[r.warp][r.reg][l] = r.values[l];
  }
  void feed(const std::vector<Record>& rs) {
    for (const Record& r : rs) feed(r);
  }
  void write_rom(const std::vector<std::uint64_t>& rows) {
    for (int b = 0; b < kProtoBlocks; ++b)
      for (int s = 0; s < kSlots; ++s)
        for (const Record& r : rom_records(b, s, rows[static_cast<std::size_t>(b * kSlots + s)])) feed(r);
  }
  void write_register(std::uint32_t w, std::uint32_t r, std::uint32_t lanes) {
    std::array<std::uint32_t, 4> v{};
    for (auto& x : v) x = random_value(rng_);
    feed(wreg_records(w, r, lanes, v));
  }

  Stats finish() {
    test::fold_margins(m_, stats.mlp_min, stats.gdn_min);
    std::printf(
        "[ %s ] %d tokens, %d EXEC: %d words checked (%d operands from an earlier slot), %d wrong, %d inexact, "
        "%d unit fields nonzero off EXEC; smallest switch margin: MLP %g, GDN %g\n",
        dn_.c_str(), stats.tokens, stats.execs, stats.checked, stats.bypassed, stats.wrong, stats.inexact, stats.leaked,
        stats.mlp_min, stats.gdn_min);
    return stats;
  }

  Stats stats;
  std::mt19937_64& rng() { return rng_; }

 private:
  std::uint64_t read(const std::vector<float>& y, const Word& w) {
    bool exact = true;
    const std::uint64_t v = weights::read_word(k_.cc.allocation, y, w, &exact);
    if (!exact) ++stats.inexact;
    return v;
  }
  void expect(const std::vector<float>& y, const std::string& name, const Word& w, std::uint64_t want) {
    const std::uint64_t got = read(y, w);
    ++stats.checked;
    if (got != want && ++stats.wrong <= 10)
      ADD_FAILURE() << where_ << ": " << name << " = 0x" << std::hex << got << ", expected 0x" << want;
  }

  // The plain model: lane l's registers after slots 0..s-1 of the block ran on the mask.
  void check_exec(const std::vector<float>& y, const Record& e) {
    ++stats.execs;
    const std::uint64_t* row = &rom_[e.block * kSlots];
    std::array<std::array<std::uint32_t, 16>, kProtoLanes> reg{};
    for (int l = 0; l < kProtoLanes; ++l)
      for (int r = 1; r < 16; ++r) reg[l][r] = regs_[e.warp][r][l];
    std::array<std::array<int, 16>, kProtoLanes> from{};  // slot + 1 that last wrote the register, 0: the file
    for (int s = 0; s < 4; ++s) {
      Instr in;
      const bool valid = decode(row[s], in);
      const bool built = k_.ops.count(s) != 0;
      if (built && valid)
        check_slot(y, e, s, in, reg, from);
      else if (valid)
        note_slot(s, in, e.warp, reg);
      // Slot s's results for the lanes of the mask (the chain's ALU results, or the test inputs).
      if (!writes_d(row[s])) continue;
      const int d = static_cast<int>((row[s] >> kPosD) & 0xf);
      for (int l = 0; l < kProtoLanes; ++l) {
        if (!((e.lanes >> l) & 1) || d == 0) continue;
        reg[l][d] = k_.alu.empty() ? result_[s < kEarlier ? s : 0][l] : alu_value(in, s, l);
        from[l][d] = s + 1;
      }
      if (!k_.alu.empty() && valid && op_info(in.op).unit == kUnitAlu) {
        for (int l = 0; l < kProtoLanes; ++l)
          if ((e.lanes >> l) & 1)
            expect(y, "slot " + std::to_string(s) + " lane " + std::to_string(l) + " alu d", k_.alu.at(s).d[l],
                   alu_value(in, s, l));
      }
    }
  }
  std::uint32_t operand(const Instr& in, Operand o, std::uint32_t warp, int l,
                        const std::array<std::uint32_t, 16>& reg) const {
    const int num = o == Operand::kA ? in.a : o == Operand::kB ? in.b : in.c;
    const Kind kind = o == Operand::kA ? in.ak : o == Operand::kB ? in.bk : Kind::kReg;
    if (kind == Kind::kImm) return in.imm;
    if (kind == Kind::kSpecial) {
      switch (static_cast<Special>(num)) {
        case Special::kTid:
        case Special::kLaneId: return warp * kProtoLanes + static_cast<std::uint32_t>(l);
        case Special::kNtid: return special_[0];
        case Special::kCtaid: return special_[1];
        case Special::kNctaid: return special_[2];
        default: return 0;
      }
    }
    return num == 0 ? 0 : reg[num];
  }
  // The chain's ALU value: eval on this slot's operands as the model sees them (saved by check_slot).
  std::uint32_t alu_value(const Instr& in, int s, int l) const {
    if (op_info(in.op).unit != kUnitAlu) return 0;  // the ALU gives 0 for every other opcode
    const auto& o = seen_[s][l];
    return eval(in.op, o[0], o[1], o[2]);
  }
  void note_slot(int s, const Instr& in, std::uint32_t warp,
                 const std::array<std::array<std::uint32_t, 16>, kProtoLanes>& reg) {
    for (int l = 0; l < kProtoLanes; ++l) {
      int oi = 0;
      for (Operand o : {Operand::kA, Operand::kB, Operand::kC}) seen_[s][l][oi++] = operand(in, o, warp, l, reg[l]);
    }
  }
  void check_slot(const std::vector<float>& y, const Record& e, int s, const Instr& in,
                  const std::array<std::array<std::uint32_t, 16>, kProtoLanes>& reg,
                  const std::array<std::array<int, 16>, kProtoLanes>& from) {
    const circuit::OperandsOut& out = k_.ops.at(s);
    const std::string at = "slot " + std::to_string(s) + " ";
    for (int l = 0; l < kProtoLanes; ++l) {
      int oi = 0;
      for (Operand o : {Operand::kA, Operand::kB, Operand::kC}) {
        std::uint32_t want = operand(in, o, e.warp, l, reg[l]);
        seen_[s][l][oi++] = want;
        const Word& w = o == Operand::kA ? out.a[l] : o == Operand::kB ? out.b[l] : out.c[l];
        if (w.empty()) continue;
        const int num = o == Operand::kA ? in.a : o == Operand::kB ? in.b : in.c;
        const Kind kind = o == Operand::kA ? in.ak : o == Operand::kB ? in.bk : Kind::kReg;
        const bool reg_kind = kind == Kind::kReg && num != 0;
        if (reg_kind && from[l][num] != 0) ++stats.bypassed;
        if (k_.defer_last) {
          // Slot s-1's value is the caller's: the operand is 0 in the lanes it bypasses, and
          // take_last says whether it bypasses the operand (its d, opcode and the field only).
          const std::uint64_t prev = rom_[e.block * kSlots + static_cast<std::uint32_t>(s - 1)];
          const bool take = reg_kind && writes_d(prev) && static_cast<int>((prev >> kPosD) & 0xf) == num;
          if (reg_kind && from[l][num] == s) {
            want = 0;
            ++stats.deferred;
          }
          if (l == 0)
            expect(y, at + "take_last " + circuit::operand_name(o), Word{out.take_last[static_cast<std::size_t>(o)]},
                   take ? 1 : 0);
        }
        if (!k_.check_operands) continue;
        expect(y, at + "lane " + std::to_string(l) + " " + circuit::operand_name(o), w, want);
      }
    }
  }

  const Machine& k_;
  weights::ReferenceModel m_;
  std::string dn_, where_;
  std::mt19937_64 rng_;
  std::vector<int> unit_fields_;
  std::uint64_t rom_[kProtoBlocks * kSlots] = {};
  std::uint32_t regs_[kProtoWarps][16][kProtoLanes] = {};
  std::array<std::uint32_t, 3> special_{};
  std::array<Lanes, kEarlier> result_{};
  std::array<std::array<std::array<std::uint32_t, 3>, kProtoLanes>, 4> seen_{};
};

void expect_clean(const Stats& s, DType dt) {
  EXPECT_EQ(s.wrong, 0) << weights::dtype_name(dt);
  EXPECT_EQ(s.inexact, 0) << weights::dtype_name(dt);
  EXPECT_EQ(s.leaked, 0) << weights::dtype_name(dt);
  EXPECT_GT(s.checked, 0);
  EXPECT_GE(s.mlp_min, 88.73) << "an MLP switch is not saturated";
  EXPECT_GE(s.gdn_min, 88.73) << "a Gated DeltaNet switch is not saturated";
}

// The register file written by WREG streams, a ROM image, then EXECs of every block with random
// warps and lane masks (a third with all lanes), interleaved with more register writes.
Stats run_machine(const Machine& k, DType dt, std::uint64_t seed, bool alu_only, int execs_per_block) {
  Runner run(k, dt, seed);
  std::mt19937_64& rng = run.rng();
  for (std::uint32_t w = 0; w < kProtoWarps; ++w)
    for (std::uint32_t r = 1; r < 16; ++r) run.write_register(w, r, 0xf);
  run.write_rom(rom_image(seed, alu_only));
  std::vector<std::uint32_t> order;
  for (int i = 0; i < execs_per_block; ++i)
    for (std::uint32_t b = 0; b < kProtoBlocks; ++b) order.push_back(b);
  std::shuffle(order.begin(), order.end(), rng);
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (i % 4 == 0) run.write_register(rng() % kProtoWarps, 1 + rng() % 15, 1 + static_cast<std::uint32_t>(rng() % 15));
    const std::uint32_t lanes = rng() % 3 == 0 ? 0xf : 1 + static_cast<std::uint32_t>(rng() % 15);
    run.feed(exec_record(order[i], rng() % kProtoWarps, lanes));
  }
  return run.finish();
}

TEST(CircuitOperands, EachSlotMatchesTheBlockModel) {
  for (int s = 0; s < 4; ++s) {
    Build b;
    b.slot = s;
    const Machine k(b);
    ASSERT_TRUE(k.ok) << k.error;
    report(k, "slot " + std::to_string(s) + " operands a, b, c (hidden 4096, no reuse)");
    for (DType dt : {DType::kF32, DType::kBF16}) {
      const Stats st = run_machine(k, dt, 100 + s, false, 3);
      expect_clean(st, dt);
      if (s > 0) {
        EXPECT_GT(st.bypassed, 50);
      }
    }
  }
}

// defer_last (the machine's terminator): slots 1-3 with the last earlier slot's value left to
// the caller. Every operand it bypasses must be exactly 0 and take_last must say so; every other
// operand (register file, earlier slots, immediates, specials) is as without defer_last.
TEST(CircuitOperands, DeferLastLeavesTheLastSlotToTheCaller) {
  for (int s = 1; s < 4; s += 2) {
    Build b;
    b.slot = s;
    b.defer_last = true;
    const Machine k(b);
    ASSERT_TRUE(k.ok) << k.error;
    report(k, "slot " + std::to_string(s) + " operands a, b, c with defer_last (hidden 4096, no reuse)");
    for (DType dt : {DType::kF32, DType::kBF16}) {
      const Stats st = run_machine(k, dt, 300 + s, false, 3);
      expect_clean(st, dt);
      EXPECT_GT(st.deferred, 20) << weights::dtype_name(dt);
      std::printf("[ %s ] %d operands left to the caller\n", std::string(weights::dtype_name(dt)).c_str(), st.deferred);
      if (s > 1) {
        EXPECT_GT(st.bypassed, st.deferred + 20);  // bypass from the slots before the last one too
      }
    }
  }
}

// The real chain: slot s's operands -> slot s's ALU -> slot s+1's operands (bypass from the ALU's d),
// 4 slots, with eager channel reuse; each slot's reads wait for the previous slot's operand a.
TEST(CircuitOperands, FourSlotsChainedThroughTheAlu) {
  Build b;
  b.chain = true;
  b.after = Build::After::kAluFlags;
  b.reuse = true;
  b.mark = true;  // the ALU results are read back by the test
  const Machine k(b);
  ASSERT_TRUE(k.ok) << k.error;
  report(k,
         "4 slots: operands + ALU each, reads after the previous ALU's first MLP, ALU results kept (hidden 4096, "
         "eager reuse)");
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const Stats st = run_machine(k, dt, 300, true, 2);
    expect_clean(st, dt);
    EXPECT_GT(st.bypassed, 50);
  }
}

// Cost with and without channel reuse: one slot (slot 3, three earlier slots) and the chain.
TEST(CircuitOperands, CostWithAndWithoutChannelReuse) {
  auto compile = [](Build b, const std::string& what) {
    const Machine k(b);
    if (!k.ok) {
      std::printf("%s: does not compile: %s\n", what.c_str(), k.error.c_str());
      return -1;
    }
    report(k, what);
    return k.cc.allocation.channels_used - k.test_bits;
  };
  Build one;
  one.slot = 3;
  const int plain = compile(one, "slot 3 alone (hidden 4096, no reuse)");
  one.reuse = true;
  const int reused = compile(one, "slot 3 alone (hidden 4096, eager reuse)");
  one.slot = 0;
  one.reuse = false;
  compile(one, "slot 0 alone (hidden 4096, no reuse)");
  EXPECT_GT(plain, 0);
  EXPECT_GT(reused, 0);
  EXPECT_LE(reused, plain);
  Build chain;
  chain.chain = true;
  chain.hidden = 8192;
  EXPECT_GT(compile(chain, "4-slot chain (hidden 8192, no reuse, reads as early as decode allows)"), 0);
  chain.reuse = true;
  chain.hidden = 4096;
  EXPECT_GT(compile(chain, "4-slot chain (hidden 4096, eager reuse, reads as early as decode allows)"), 0);
  chain.after = Build::After::kSelect;
  EXPECT_GT(compile(chain, "4-slot chain (hidden 4096, eager reuse, reads after the previous select)"), 0);
  chain.after = Build::After::kAluFlags;
  EXPECT_GT(compile(chain, "4-slot chain (hidden 4096, eager reuse, reads after the previous ALU's first MLP)"), 0);
  chain.mark = true;
  EXPECT_GT(compile(chain, "4-slot chain (same, every ALU result kept to the end)"), 0);
}

TEST(CircuitOperands, NamesTheInputOfTheWrongWidth) {
  weights::Circuit c;
  auto fd = circuit::build_fetch_decode(c, kSlots);
  ASSERT_TRUE(fd.has_value());
  auto rf = circuit::build_register_file(c, *fd, {});
  ASSERT_TRUE(rf.has_value());
  circuit::OperandsIn in = circuit::operands_in(*fd, *rf, 1);
  const Word w32 = *c.input("t", "w32", 32);
  in.ntid = in.ctaid = in.nctaid = w32;
  std::array<Word, kProtoLanes> v{w32, w32, w32, w32};
  v[3].pop_back();
  in.earlier.push_back(circuit::earlier_slot(fd->slot[0], v));
  auto r = circuit::build_operands(c, in);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("ops.s1: earlier slot 0 lane 3 value has 31 bits, needs 32"), std::string::npos)
      << r.status().message();
  in.earlier.clear();
  in.ctaid.pop_back();
  r = circuit::build_operands(c, in);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("ctaid has 31 bits, needs 32"), std::string::npos) << r.status().message();
  in.ctaid = w32;
  in.rams[2] = -1;
  r = circuit::build_operands(c, in);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("lane 2 has no register RAM"), std::string::npos) << r.status().message();
  in.rams = rf->rams;
  in.defer_last = true;  // with no earlier slot to defer
  r = circuit::build_operands(c, in);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("ops.s1: defer_last needs at least one earlier slot"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace qgpu::simt
