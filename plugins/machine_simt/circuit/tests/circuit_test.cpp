// The circuit's first stages (plugins/machine_simt/circuit) fed with the exact
// token ids of the machine's protocol (protocol.h encodes the records;
// records.h's token_inputs(id) is the embedding): ROM records write lowered
// programs and random rows into the Gated DeltaNet ROM, WREG records of every
// format and lane mask write the register file, and real launch streams
// (encode_prompt + record_launch) run through the reference layer math in
// fp32 and bf16. Checks: at every token the write ports equal the writes the
// record describes (§3.1, derived here in plain C++); on EXEC tokens every slot
// decodes as isa.h's decode() and every operand equals a plain register model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <random>

#include "circuit_harness.h"
#include "fetch_decode.h"
#include "interp.h"
#include "ir_builder.h"
#include "isa.h"
#include "kernels.h"
#include "lower.h"
#include "protocol.h"
#include "qgpu/weights/compile.h"
#include "qgpu/weights/reference.h"
#include "records.h"
#include "register_file.h"

namespace qgpu::simt {
namespace {

using circuit::FetchDecode;
using circuit::Operand;
using circuit::RegisterFile;
using sdk::CmpPred;
using sdk::Opcode;
using test::dot_guarded_kernel;
using test::IrBuilder;
using test::qwen2b_shapes;
using test::vadd_kernel;
using weights::DType;
using ValueId = sdk::ValueId;
using Reads = std::vector<std::pair<int, Operand>>;

constexpr int kSlots = 5;  // the default block_instructions (4) + the terminator
constexpr std::int64_t kBase = kQwen35VocabRows;

// The stages under test, compiled to Qwen3.5-2B layer shapes: records + fetch/decode, and the
// register file with the operand reads `reads` when given.
struct Machine {
  weights::Circuit c{"simt.machine"};
  FetchDecode fd;
  std::optional<RegisterFile> rf;
  weights::CompiledCircuit cc;
  bool ok = false;
  explicit Machine(const std::optional<Reads>& reads = std::nullopt) {
    auto f = circuit::build_fetch_decode(c, kSlots);
    EXPECT_TRUE(f.has_value()) << f.status().to_string();
    if (!f) return;
    fd = std::move(*f);
    if (reads) {
      auto r = circuit::build_register_file(c, fd, *reads);
      EXPECT_TRUE(r.has_value()) << r.status().to_string();
      if (!r) return;
      rf = std::move(*r);
    }
    ok = test::compile_to(c, cc);
  }
};

const Machine& fetch_decode_machine() {
  static const Machine* m = new Machine();
  return *m;
}

// Layers, heads and neurons per layer, residual channels (all and without the embedding inputs).
void report(const weights::Circuit& c, const weights::CompiledCircuit& cc, const std::string& what) {
  std::int64_t heads = 0;
  std::string per_layer;
  for (int l = 0; l < cc.schedule.num_layers; ++l) {
    heads += cc.schedule.use[l].key_heads;
    per_layer +=
        " " + std::to_string(cc.schedule.use[l].key_heads) + "/" + std::to_string(cc.schedule.use[l].mlp_neurons);
  }
  int input_bits = 0;
  for (const weights::Field& f : c.fields())
    if (f.kind == weights::FieldKind::kInput) input_bits += f.width;
  std::printf(
      "%s: %d layers, %lld heads, %lld MLP neurons, %d residual channels (%d of them embedding inputs); "
      "heads/neurons per layer:%s\n",
      what.c_str(), cc.schedule.num_layers, static_cast<long long>(heads), static_cast<long long>(cc.total_neurons()),
      cc.allocation.channels_used, input_bits, per_layer.c_str());
}

// --- What a record's tokens write (docs/PROTOCOL.md §3, §3.1), derived from the record in plain C++.

struct TokenWrite {
  std::uint64_t rom_select = 0;  // one-hot at slot·2 + half
  std::uint32_t rom_row = 0, rom_value = 0;
  unsigned lanes = 0;  // register write enables
  std::uint32_t reg_row = 0;
  std::array<std::uint32_t, kProtoLanes> value{};
};

std::vector<TokenWrite> expected_writes(const Record& r) {
  std::vector<TokenWrite> w(static_cast<std::size_t>(token_count(r)));
  if (r.kind == RecordKind::kRom) {  // header, low 16 bits, high 16 bits: written at the last
    w[2].rom_select = std::uint64_t{1} << (2 * r.slot + r.half);
    w[2].rom_row = r.block;
    w[2].rom_value = r.values[0];
  } else if (r.kind == RecordKind::kWreg) {
    int rank = 0;
    for (int l = 0; l < kProtoLanes; ++l) {
      if (!((r.lanes >> l) & 1)) continue;
      std::size_t t = 0;  // the token that completes lane l's value
      switch (r.format) {
        case ValueFormat::kZero: t = 0; break;             // the header itself
        case ValueFormat::kByte: t = 1 + rank / 2; break;  // two per DATA
        case ValueFormat::kHalf: t = 1 + rank; break;      // one per DATA
        case ValueFormat::kWord: t = 2; break;             // low, high: at the high
      }
      w[t].lanes |= 1u << l;
      w[t].value[l] = r.values[l];
      w[t].reg_row = r.reg | (r.warp << 4);
      ++rank;
    }
  }
  return w;
}

// The plain model: registers[warp][reg][lane], written only where a WREG mask says.
struct RegModel {
  std::uint32_t r[kProtoWarps][16][kProtoLanes] = {};
  void write(const Record& w) {
    for (int l = 0; l < kProtoLanes; ++l)
      if ((w.lanes >> l) & 1) r[w.warp][w.reg][l] = w.values[l];
  }
  // isa.h's meaning of an operand for lane l of warp w (specials other than tid/laneid: 0 in this stage).
  std::uint64_t operand(const Instr& in, Operand o, int w, int l) const {
    const int num = o == Operand::kA ? in.a : o == Operand::kB ? in.b : in.c;
    const Kind kind = o == Operand::kA ? in.ak : o == Operand::kB ? in.bk : Kind::kReg;
    if (kind == Kind::kImm) return in.imm;
    if (kind == Kind::kSpecial) {
      const auto sp = static_cast<Special>(num);
      return sp == Special::kTid || sp == Special::kLaneId ? static_cast<std::uint64_t>(w * kProtoLanes + l) : 0;
    }
    return num == 0 ? 0 : r[w][num][l];
  }
};

struct Stats {
  int tokens = 0, writes = 0, execs = 0, checked = 0, wrong = 0, inexact = 0, leaked = 0;
  double mlp_min = std::numeric_limits<double>::infinity(), gdn_min = std::numeric_limits<double>::infinity();
};

// Runs token ids through the compiled stages, keeping the plain ROM and register models
// (written from the records) and checking every token.
class Runner {
 public:
  Runner(const Machine& k, DType dt) : k_(k), m_(k.cc.layers, k.cc.target.shapes, dt), dn_(weights::dtype_name(dt)) {}

  // Feeds the record's token ids (protocol.h's encoding, one token_inputs(id) each): checks the
  // write ports at every token and, for EXEC, the decoded slots and the operands.
  void feed(const Record& r) {
    auto ids = circuit::record_token_ids(k_.fd.records, r);
    EXPECT_TRUE(ids.has_value()) << ids.status().to_string();
    if (!ids) return;
    const std::vector<TokenWrite> want = expected_writes(r);
    for (std::size_t t = 0; t < ids->size(); ++t) {
      auto in = circuit::token_inputs(k_.fd.records, (*ids)[t]);
      EXPECT_TRUE(in.has_value()) << in.status().to_string();
      if (!in) return;
      const std::vector<float> y = m_.step(weights::embed(k_.c, k_.cc.allocation, *in));
      ++stats.tokens;
      where_ = dn_ + " " + to_text(r) + " token " + std::to_string(t);
      check_writes(y, want[t]);
      if (r.kind == RecordKind::kExec) {
        check_exec(y, r);
      } else {
        for (const auto& f : k_.fd.slot)  // decode is gated by exec.is
          if (read(y, f.opcode) != 0 || read(y, weights::Word{f.valid}) != 0) ++stats.leaked;
      }
    }
    if (r.kind == RecordKind::kRom) {
      std::uint64_t& row = rom_[r.block * kSlots + r.slot];
      row = r.half ? (row & 0xffffffffu) | (std::uint64_t{r.values[0]} << 32) : (row & ~0xffffffffull) | r.values[0];
    }
    if (r.kind == RecordKind::kWreg) regs.write(r);
  }
  void feed(const std::vector<Record>& rs) {
    for (const Record& r : rs) feed(r);
  }
  // ROM records for every (block, slot) of a 32 × kSlots image.
  void write_rom(const std::vector<std::uint64_t>& rows) {
    for (int b = 0; b < kProtoBlocks; ++b)
      for (int s = 0; s < kSlots; ++s)
        for (const Record& r : rom_records(b, s, rows[static_cast<std::size_t>(b * kSlots + s)])) feed(r);
  }
  // A register write in the protocol's split (one record or several).
  void write_register(std::uint32_t w, std::uint32_t r, std::uint32_t lanes, const std::array<std::uint32_t, 4>& v) {
    feed(wreg_records(w, r, lanes, v));
  }

  Stats finish() {
    test::fold_margins(m_, stats.mlp_min, stats.gdn_min);
    std::printf(
        "[ %s ] %d tokens, %d writes, %d EXEC: %d fields checked, %d wrong, %d inexact, %d leaked; "
        "smallest switch margin: MLP %g, GDN %g\n",
        dn_.c_str(), stats.tokens, stats.writes, stats.execs, stats.checked, stats.wrong, stats.inexact, stats.leaked,
        stats.mlp_min, stats.gdn_min);
    return stats;
  }

  Stats stats;
  RegModel regs;

 private:
  std::uint64_t read(const std::vector<float>& y, const weights::Word& w) {
    bool exact = true;
    const std::uint64_t v = weights::read_word(k_.cc.allocation, y, w, &exact);
    if (!exact) ++stats.inexact;
    return v;
  }
  void expect(const std::vector<float>& y, const char* name, const weights::Word& w, std::uint64_t want) {
    const std::uint64_t got = read(y, w);
    ++stats.checked;
    if (got != want && ++stats.wrong <= 10)
      ADD_FAILURE() << where_ << ": " << name << " = 0x" << std::hex << got << ", expected 0x" << want;
  }
  void check_writes(const std::vector<float>& y, const TokenWrite& w) {
    const circuit::Records& rec = k_.fd.records;
    expect(y, "rom.select", rec.rom.select, w.rom_select);
    if (w.rom_select) {
      expect(y, "rom.row", rec.rom.row, w.rom_row);
      expect(y, "rom.data", rec.rom.data, w.rom_value);
    }
    expect(y, "wreg.write_enable", rec.wreg.enable, w.lanes);
    if (w.lanes) expect(y, "wreg.write_row", rec.wreg.row, w.reg_row);
    for (int l = 0; l < kProtoLanes; ++l)
      expect(y, ("wreg.lane" + std::to_string(l)).c_str(), rec.wreg.value[l], (w.lanes >> l) & 1 ? w.value[l] : 0);
    stats.writes += (w.rom_select != 0) + std::popcount(w.lanes);
  }
  void check_exec(const std::vector<float>& y, const Record& e) {
    ++stats.execs;
    expect(y, "exec.warp", k_.fd.exec_warp, e.warp);
    expect(y, "exec.lanes", k_.fd.exec_lanes, e.lanes);
    for (int s = 0; s < kSlots; ++s) check_slot(y, s, rom_[e.block * kSlots + s]);
    if (!k_.rf) return;
    for (const circuit::OperandRead& rd : k_.rf->reads) {
      Instr in;
      if (!decode(rom_[e.block * kSlots + rd.slot], in)) continue;  // operands of undecodable rows: no meaning
      for (int l = 0; l < kProtoLanes; ++l)
        expect(y,
               ("slot " + std::to_string(rd.slot) + " lane " + std::to_string(l) + " operand " +
                circuit::operand_name(rd.operand))
                   .c_str(),
               rd.value[l], regs.operand(in, rd.operand, static_cast<int>(e.warp), l));
    }
  }
  // The ISA's own decoding of the row, field by field.
  void check_slot(const std::vector<float>& y, int s, std::uint64_t row) {
    const circuit::SlotFields& f = k_.fd.slot[static_cast<std::size_t>(s)];
    Instr in;
    const bool valid = decode(row, in);
    const unsigned opcode = row & 0x3f, ak = (row >> kPosAk) & 3, bk = (row >> kPosBk) & 3;
    expect(y, "lo", f.lo, row & 0xFFFFFFFFu);
    expect(y, "hi", f.hi, row >> 32);
    expect(y, "opcode", f.opcode, opcode < static_cast<unsigned>(kOpCount) ? std::uint64_t{1} << opcode : 0);
    expect(y, "d", f.d, (row >> kPosD) & 0xf);
    expect(y, "a", f.a, (row >> kPosA) & 0xf);
    expect(y, "b", f.b, (row >> kPosB) & 0xf);
    expect(y, "c", f.c, (row >> kPosC) & 0xf);
    expect(y, "ak", f.ak, ak < 3 ? 1u << ak : 0);
    expect(y, "bk", f.bk, bk < 3 ? 1u << bk : 0);
    expect(y, "flags", f.flags, (row >> kPosFlags) & 0x3f);
    expect(y, "imm", f.imm, row >> 32);
    expect(y, "valid", weights::Word{f.valid}, valid ? 1 : 0);
    if (valid) {  // the same fields through decode()'s own Instr
      expect(y, "Instr.op", f.opcode, std::uint64_t{1} << static_cast<int>(in.op));
      expect(y, "Instr.d", f.d, in.d);
      expect(y, "Instr.a", f.a, in.a);
      expect(y, "Instr.b", f.b, in.b);
      expect(y, "Instr.c", f.c, in.c);
      expect(y, "Instr.ak", f.ak, 1u << static_cast<int>(in.ak));
      expect(y, "Instr.bk", f.bk, 1u << static_cast<int>(in.bk));
      expect(y, "Instr.flags", f.flags, in.flags);
      expect(y, "Instr.imm", f.imm, in.imm);
    }
  }

  const Machine& k_;
  weights::ReferenceModel m_;
  std::string dn_, where_;
  std::map<std::uint32_t, std::uint64_t> rom_;  // block·kSlots + slot -> row (unwritten rows read 0)
};

void expect_clean(const Stats& s, DType dt) {
  EXPECT_EQ(s.wrong, 0) << weights::dtype_name(dt);
  EXPECT_EQ(s.inexact, 0) << weights::dtype_name(dt);
  EXPECT_EQ(s.leaked, 0) << weights::dtype_name(dt);
  EXPECT_GT(s.checked, 0);
  EXPECT_GE(s.mlp_min, 88.73) << "an MLP switch is not saturated";
  EXPECT_GE(s.gdn_min, 88.73) << "a Gated DeltaNet switch is not saturated";
}

// --- ROM images: lowered kernels (the machine's own lowering) and random rows.

// out[i] = op(a[i], b[i]): division expands into a loop of many blocks.
sdk::KernelIR binary(Opcode op) {
  IrBuilder b("binop");
  const ValueId pa = b.ptr_param("a"), pb = b.ptr_param("b"), po = b.ptr_param("out");
  const ValueId i = b.global_index();
  b.store(b.element(po, i), b.bin(op, b.load(b.element(pa, i)), b.load(b.element(pb, i))));
  b.ret();
  return b.k;
}

// 32 blocks × kSlots rows: the program's image first, random 64-bit rows after it.
std::vector<std::uint64_t> rom_of(const sdk::KernelIR& k, std::uint64_t seed) {
  auto p = lower_kernel(k, {1, 32}, MachineConfig{});
  EXPECT_TRUE(p.has_value()) << p.status().to_string();
  std::vector<std::uint64_t> rows;
  if (p) {
    EXPECT_EQ((*p)->rows_per_block(), kSlots);
    std::vector<std::uint32_t> params;
    for (std::size_t i = 0; i < (*p)->params.size(); ++i) params.push_back(0x40u * static_cast<std::uint32_t>(i + 1));
    rows = (*p)->image(params);
    std::printf("%s: %zu lowered blocks, the rest random rows\n", k.name.c_str(), (*p)->blocks.size());
  }
  EXPECT_LE(rows.size(), std::size_t{kProtoBlocks} * kSlots);
  std::mt19937_64 rng(seed);
  while (rows.size() < std::size_t{kProtoBlocks} * kSlots) rows.push_back(rng());
  rows.resize(std::size_t{kProtoBlocks} * kSlots);
  return rows;
}

// Rows of random valid instructions (every opcode, kinds and special numbers in range).
std::vector<std::uint64_t> random_valid_rows(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint64_t> rows;
  for (int i = 0; i < kProtoBlocks * kSlots; ++i) {
    Instr in;
    in.op = static_cast<Op>(rng() % kOpCount);
    in.ak = static_cast<Kind>(rng() % 3);
    in.bk = static_cast<Kind>(rng() % 3);
    in.d = rng() % 16;
    in.a = in.ak == Kind::kSpecial ? rng() % static_cast<int>(Special::kCount) : rng() % 16;
    in.b = in.bk == Kind::kSpecial ? rng() % static_cast<int>(Special::kCount) : rng() % 16;
    in.c = rng() % 16;
    in.flags = rng() % 64;
    in.imm = static_cast<std::uint32_t>(rng());
    rows.push_back(encode(in));
  }
  return rows;
}

// Rows whose fields sit on decode()'s edges: kind 3, specials 4/5, opcodes around kOpCount.
std::vector<std::uint64_t> edge_rows(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint64_t> rows;
  for (int i = 0; i < kProtoBlocks * kSlots; ++i) {
    std::uint64_t w = rng();
    w &= ~std::uint64_t{0x3f};
    w |= static_cast<std::uint64_t>((kOpCount - 3 + static_cast<int>(rng() % 6)) & 0x3f);
    w &= ~(std::uint64_t{0xf} << kPosA);
    w |= std::uint64_t{3 + rng() % 4} << kPosA;
    rows.push_back(w);
  }
  return rows;
}

// --- The embedding: a function of the token id alone.

// Every header row of the layout, by enumerating the fields and encoding each record with protocol.h.
std::map<std::int64_t, Record> all_headers() {
  std::map<std::int64_t, Record> out;
  auto add = [&](const Record& r) {
    std::vector<std::int64_t> ids;
    if (append_tokens(r, kBase, ids).is_ok()) out.emplace(ids.front(), r);  // reserved rows are refused
  };
  for (const Record& r :
       {halt_record(), run_record(), sync_record(), launch_record(0, 0), live_record(0, 0), live_exited_record(0)})
    add(r);
  for (std::uint32_t c = 0; c < kProtoCtas; ++c) add(cta_record(c));
  for (std::uint32_t b = 0; b < kProtoBlocks; ++b) {
    add(live_record(b, 0));
    for (std::uint32_t k = 0; k < kProtoRowsPerBlock; ++k)
      for (const Record& r : rom_records(b, k, 0)) add(r);
  }
  for (std::uint32_t w = 0; w < kProtoWarps; ++w)
    for (std::uint32_t m = 1; m <= 15; ++m) {
      for (std::uint32_t b = 0; b < kProtoBlocks; ++b) {
        add(exec_record(b, w, m));
        for (LaneStatus s : {LaneStatus::kRunning, LaneStatus::kBarrierEven, LaneStatus::kBarrierOdd})
          add(sched_record(w, m, s, b));
      }
      add(sched_record(w, m, LaneStatus::kExited, 0));
      for (std::uint32_t reg = 1; reg < 16; ++reg)
        for (int f = 0; f < 4; ++f) {
          Record r = wreg_record(w, reg, m, {0, 0, 0, 0});
          r.format = static_cast<ValueFormat>(f);
          add(r);
        }
    }
  for (int s = 0; s < 2; ++s)
    for (std::uint32_t a = 0; a < static_cast<std::uint32_t>(s ? kProtoSharedWords : kProtoGlobalWords); ++a)
      for (std::uint32_t n = 1; n <= 4; ++n)
        for (int f = 0; f < 4; ++f) {
          const std::vector<std::uint32_t> zeros(n, 0u);
          Record r = wmem_record(s != 0, a, zeros);
          r.format = static_cast<ValueFormat>(f);
          add(r);
        }
  add(bound_record(false, 0));
  add(bound_record(true, 0));
  for (std::uint32_t k = 0; k < kProtoFaultSlots; ++k)
    for (std::uint32_t l = 0; l < kProtoLanes; ++l)
      for (FaultKind f : {FaultKind::kMisaligned, FaultKind::kOutOfBounds}) add(fault_record(k, l, f));
  return out;
}

TEST(Circuit, TokenIdsDecodeToTheProtocolsRecords) {
  const std::map<std::int64_t, Record> headers = all_headers();
  int decoded = 0, data = 0;
  for (std::int64_t id = kBase; id < kBase + vocabulary_rows(); ++id) {
    auto r = circuit::record_of_token(id, kBase);
    const auto it = headers.find(id);
    const bool is_data = id >= kBase + first_id(RecordKind::kData);
    if (is_data) {
      ASSERT_TRUE(r.has_value()) << r.status().to_string();
      ASSERT_EQ(r->kind, RecordKind::kData);
      ASSERT_EQ(r->data, static_cast<std::uint32_t>(id - kBase - first_id(RecordKind::kData)));
      ++data;
    } else if (it == headers.end()) {
      ASSERT_FALSE(r.has_value()) << "id " << id << " decodes to " << to_text(*r) << ", which no record encodes to";
      EXPECT_NE(r.status().message().find("reserved row"), std::string::npos) << r.status().message();
    } else {
      ASSERT_TRUE(r.has_value()) << "id " << id << " (" << to_text(it->second) << "): " << r.status().to_string();
      ASSERT_EQ(*r, it->second) << "id " << id << ": " << to_text(*r) << ", protocol.h encodes " << to_text(it->second);
      ++decoded;
    }
  }
  std::printf("%d header rows and %d DATA rows decode as protocol.h encodes them; %lld reserved rows refused\n",
              decoded, data, static_cast<long long>(vocabulary_rows() - decoded - data));
  EXPECT_EQ(decoded, static_cast<int>(headers.size()));
}

TEST(Circuit, TokenInputsRefuseWhatIsNotAProtocolToken) {
  const Machine& k = fetch_decode_machine();
  ASSERT_TRUE(k.ok);
  const circuit::Records& rec = k.fd.records;
  auto expect_error = [&](std::int64_t id, const std::string& what) {
    auto v = circuit::token_inputs(rec, id);
    ASSERT_FALSE(v.has_value()) << "id " << id;
    EXPECT_NE(v.status().message().find(what), std::string::npos) << v.status().message();
  };
  // Text, past the rows, reserved rows (half with 4 lanes, word with 2, a run past global word
  // 1023 or shared word 511).
  expect_error(0, "base-vocabulary (text) token");
  expect_error(kBase - 1, "base-vocabulary (text) token");
  expect_error(kBase + vocabulary_rows(), "past the machine's rows (248320 + 161239, over by 1)");
  const std::int64_t wreg0 = kBase + first_id(RecordKind::kWreg);
  expect_error(wreg0 + ((0 * 15 + 0) * 15 + 14) * 4 + 2, "WREG w0 r1 0b1111 half, which would need 4 DATA tokens");
  expect_error(wreg0 + ((0 * 15 + 0) * 15 + 2) * 4 + 3, "WREG w0 r1 0b0011 word, which would need 4 DATA tokens");
  const std::int64_t wmem0 = kBase + first_id(RecordKind::kWmem);
  expect_error(wmem0 + (1022 * 4 + 3) * 4, "global word 1022 runs past the last word 1023 (a reserved row)");
  expect_error(wmem0 + ((1024 + 510) * 4 + 3) * 4, "shared word 510 runs past the last word 511 (a reserved row)");
  // A ROM row the circuit has no RAM for.
  const std::int64_t rom0 = kBase + first_id(RecordKind::kRom);
  expect_error(rom0 + (3 * kProtoRowsPerBlock + kSlots) * 2, "ROM B3.5 lo: slot 5 outside the circuit's 5 slots");
  // Every other id has inputs: a DATA token its payload, EXEC its fields.
  auto d = circuit::token_inputs(rec, kBase + first_id(RecordKind::kData) + 0xbeef);
  ASSERT_TRUE(d.has_value());
  ASSERT_EQ(d->size(), 2u);
  EXPECT_EQ((*d)[1].second, 0xbeefu);
  auto e = circuit::token_inputs(k.fd, exec_record(127, 7, 15));
  ASSERT_TRUE(e.has_value()) << e.status().to_string();
  // A record of several tokens is fed id by id.
  auto rr = circuit::token_inputs(k.fd, rom_records(3, 1, 0)[0]);
  ASSERT_FALSE(rr.has_value());
  EXPECT_NE(rr.status().message().find("is 3 tokens"), std::string::npos) << rr.status().message();
  auto bad = circuit::token_inputs(k.fd, exec_record(kProtoBlocks, 0, 1));
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("block 128 is outside the token layout (at most 127, over by 1)"),
            std::string::npos)
      << bad.status().message();
  weights::Circuit c;
  auto f = circuit::build_fetch_decode(c, kProtoRowsPerBlock + 1);
  ASSERT_FALSE(f.has_value());
  EXPECT_NE(f.status().message().find("9 ROM slots per block"), std::string::npos) << f.status().message();
}

// --- WMEM, LAUNCH and LIVE write ports (records.h), from exact prompt and generated streams.

// What the WMEM / LAUNCH / LIVE write ports must hold at one token (docs/PROTOCOL.md §3.1,
// §3: written here from the document, not from records.cpp).
struct PortWrite {
  std::map<std::uint32_t, std::uint32_t> words;  // word → value completed at this token
  bool shared = false;
  bool launch = false;
  std::uint32_t threads = 0, grid = 0;
  bool live = false;
  std::uint32_t block = 0, mask = 0;
};

std::vector<PortWrite> port_writes(const Record& r) {
  std::vector<PortWrite> t(static_cast<std::size_t>(token_count(r)));
  for (PortWrite& p : t) p.shared = r.shared;
  if (r.kind == RecordKind::kLaunch) t[1].launch = true, t[1].threads = r.threads, t[1].grid = r.grid;
  if (r.kind == RecordKind::kLive) t[1].live = true, t[1].block = r.block, t[1].mask = r.values[0];
  if (r.kind != RecordKind::kWmem) return t;
  for (std::uint32_t i = 0; i < r.count; ++i) {
    const std::uint32_t w = r.word + i;
    switch (r.format) {
      case ValueFormat::kZero: t[0].words[w] = 0; break;
      case ValueFormat::kByte: t[1 + i / 2].words[w] = r.values[i]; break;
      case ValueFormat::kHalf: t[1 + i].words[w] = r.values[i]; break;
      case ValueFormat::kWord: t[2].words[w] = r.values[i]; break;
    }
  }
  return t;
}

TEST(Circuit, WmemLaunchLiveWritePortsFromTokenIds) {
  weights::Circuit c("simt.records.ports");
  auto rec = circuit::build_records(c, kSlots);
  ASSERT_TRUE(rec.has_value()) << rec.status().to_string();
  weights::Target t;
  t.shapes = qwen2b_shapes();
  auto base = weights::compile(c, t);
  ASSERT_TRUE(base.has_value()) << base.status().to_string();
  report(c, *base, "records (ROM, WREG)");
  auto wm = circuit::build_wmem_write(c, *rec);
  ASSERT_TRUE(wm.has_value()) << wm.status().to_string();
  auto la = circuit::build_launch_write(c, *rec);
  ASSERT_TRUE(la.has_value()) << la.status().to_string();
  auto lv = circuit::build_live_write(c, *rec);
  ASSERT_TRUE(lv.has_value()) << lv.status().to_string();
  auto cc = weights::compile(c, t);
  ASSERT_TRUE(cc.has_value()) << cc.status().to_string();
  report(c, *cc, "records + WMEM, LAUNCH, LIVE");
  EXPECT_EQ(cc->schedule.num_layers, 1);
  EXPECT_EQ(cc->schedule.use[0].key_heads, 3 + 3 + 1 + 1);
  // Real launches: the prompt (LAUNCH, LIVE, WMEM of every array, zero resets) and the generated
  // write-backs; and WMEM records of every format, word count and first bank.
  struct Launch {
    sdk::KernelIR kernel;
    sdk::LaunchShape shape;
    std::vector<sdk::LaunchArg> args;
  };
  auto arr = [](const std::string& name, std::vector<std::int32_t> v) {
    sdk::LaunchArg a;
    a.param = name;
    a.is_array = true;
    a.array = std::move(v);
    return a;
  };
  std::vector<std::int32_t> big(10), c10(10, -7), in32(32);
  for (int i = 0; i < 10; ++i) big[i] = 50000 * i - 70000;
  for (int i = 0; i < 32; ++i) in32[i] = i * i - 100;
  sdk::LaunchArg n9;
  n9.param = "n";
  n9.scalar = 9;
  const std::vector<Launch> launches = {
      {vadd_kernel(), {2, 5}, {arr("a", big), arr("b", big), arr("c", c10), n9}},
      {test::reduce_kernel(32), {1, 32}, {arr("in", in32), arr("out", {0})}},
      {test::atomics_kernel(),
       {2, 4},
       {arr("a", {5, -9, 300, 42, 7, 100000, -1, 8}), arr("m", std::vector<std::int32_t>(11, 0))}},
  };
  std::vector<Record> stream;
  for (const Launch& l : launches) {
    auto p = lower_kernel(l.kernel, l.shape, test::circuit_sizes());
    ASSERT_TRUE(p.has_value()) << p.status().to_string();
    auto lr = record_launch(**p, l.args, {});
    ASSERT_TRUE(lr.has_value()) << lr.status().to_string();
    stream.insert(stream.end(), lr->prompt.begin(), lr->prompt.end());
    stream.insert(stream.end(), lr->generated.begin(), lr->generated.end());
  }
  std::mt19937_64 rng(77);
  const std::uint32_t edges[] = {0, 1, 0x7f, 0xffffff80u, 0xffffffffu, 0x7fff, 0xffff8000u, 0x80, 0x8000, 0x80000000u};
  for (std::uint32_t n = 1; n <= 4; ++n)
    for (std::uint32_t first = 0; first < 4; ++first)
      for (int rep = 0; rep < 6; ++rep) {
        std::vector<std::uint32_t> v(n);
        for (auto& x : v) x = edges[rng() % std::size(edges)];
        const std::uint32_t word = 4 * static_cast<std::uint32_t>(rng() % 127) + first;
        for (const Record& r : wmem_records(rep % 2 == 1, word, v)) stream.push_back(r);
      }
  for (DType dt : {DType::kF32, DType::kBF16}) {
    weights::ReferenceModel m(cc->layers, cc->target.shapes, dt);
    int tokens = 0, words = 0, wrong = 0, inexact = 0;
    std::map<RecordKind, int> kinds;
    auto expect = [&](const std::vector<float>& y, const weights::Word& w, std::uint64_t want,
                      const std::string& what) {
      bool exact = true;
      const std::uint64_t got = weights::read_word(cc->allocation, y, w, &exact);
      if (!exact) ++inexact;
      if (got != want && ++wrong <= 10) ADD_FAILURE() << what << " = 0x" << std::hex << got << ", expected 0x" << want;
    };
    for (const Record& r : stream) {
      auto ids = circuit::record_token_ids(*rec, r);
      ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
      const std::vector<PortWrite> want = port_writes(r);
      ++kinds[r.kind];
      for (std::size_t i = 0; i < ids->size(); ++i) {
        auto in = circuit::token_inputs(*rec, (*ids)[i]);
        ASSERT_TRUE(in.has_value()) << in.status().to_string();
        const std::vector<float> y = m.step(weights::embed(c, cc->allocation, *in));
        ++tokens;
        const PortWrite& p = want[i];
        const std::string at = std::string(weights::dtype_name(dt)) + " " + to_text(r) + " token " + std::to_string(i);
        std::uint64_t en = 0, ben = 0;
        std::array<std::uint64_t, 4> val{};
        for (const auto& [w, x] : p.words) {
          en |= std::uint64_t{1} << ((p.shared ? 4 : 0) + (w & 3));
          ben |= std::uint64_t{1} << (w & 3);
          val[w & 3] = x;
          expect(y, wm->row[w & 3], (w >> 2) | (p.shared ? 256u : 0u), at + " wmem row");
          ++words;
        }
        expect(y, wm->enable, en, at + " wmem enable");
        expect(y, wm->bank_enable, ben, at + " wmem bank enable");
        for (int b = 0; b < 4; ++b) expect(y, wm->value[b], val[b], at + " wmem value");
        expect(y, weights::Word{la->enable}, p.launch, at + " launch enable");
        if (p.launch) {
          expect(y, la->threads, p.threads, at + " threads");
          expect(y, la->grid, p.grid, at + " grid");
        }
        expect(y, weights::Word{lv->enable}, p.live, at + " live enable");
        if (p.live) {
          expect(y, lv->row, p.block, at + " live row");
          expect(y, lv->mask, p.mask, at + " live mask");
        }
      }
    }
    double mlp = std::numeric_limits<double>::infinity(), gdn = mlp;
    test::fold_margins(m, mlp, gdn);
    std::printf(
        "[ %s ] %d tokens (%d WMEM, %d LAUNCH, %d LIVE records), %d words written: %d wrong, %d inexact; "
        "margins MLP %g GDN %g\n",
        std::string(weights::dtype_name(dt)).c_str(), tokens, kinds[RecordKind::kWmem], kinds[RecordKind::kLaunch],
        kinds[RecordKind::kLive], words, wrong, inexact, mlp, gdn);
    EXPECT_EQ(wrong, 0);
    EXPECT_EQ(inexact, 0);
    EXPECT_GE(mlp, 88.73);
    EXPECT_GE(gdn, 88.73);
    EXPECT_GT(kinds[RecordKind::kLive], 3);
    EXPECT_EQ(kinds[RecordKind::kLaunch], 3);
  }
}

// --- Stage 1: fetch and decode.

TEST(Circuit, FetchDecodeCompilesToQwenLayers) {
  // The records stage alone, then with fetch/decode.
  weights::Circuit rc("simt.records");
  auto rec = circuit::build_records(rc, kSlots);
  ASSERT_TRUE(rec.has_value()) << rec.status().to_string();
  weights::Target t;
  t.shapes = qwen2b_shapes();
  auto rcc = weights::compile(rc, t);
  ASSERT_TRUE(rcc.has_value()) << rcc.status().to_string();
  report(rc, *rcc, "records");
  // With the protocol's 8 ROM rows per block the lag-2 read is 30 bits: still one head per lag.
  weights::Circuit rc8("simt.records8");
  ASSERT_TRUE(circuit::build_records(rc8, kProtoRowsPerBlock).has_value());
  auto rcc8 = weights::compile(rc8, t);
  ASSERT_TRUE(rcc8.has_value()) << rcc8.status().to_string();
  EXPECT_EQ(rcc8->schedule.use[0].key_heads, 3);
  const Machine& k = fetch_decode_machine();
  ASSERT_TRUE(k.ok);
  report(k.c, k.cc, "records + fetch/decode");
  // The conv1d window (one head per lag) in layer 0, the ROM reads in layer 1 (their write comes
  // from the window), decode in its MLP, validity in the next.
  EXPECT_EQ(rcc->schedule.num_layers, 1);
  EXPECT_EQ(rcc->schedule.use[0].key_heads, 3);
  EXPECT_EQ(k.cc.schedule.num_layers, 3);
  EXPECT_EQ(k.cc.schedule.use[1].key_heads, 2 * kSlots);
}

TEST(Circuit, FetchDecodeMatchesIsaOnLoweredAndRandomRoms) {
  const Machine& k = fetch_decode_machine();
  ASSERT_TRUE(k.ok);
  const std::vector<std::vector<std::uint64_t>> images = {rom_of(vadd_kernel(), 1),
                                                          rom_of(dot_guarded_kernel(), 2),
                                                          rom_of(binary(Opcode::kSDiv), 3),
                                                          random_valid_rows(4),
                                                          edge_rows(5),
                                                          rom_of(binary(Opcode::kMulHiS), 6)};
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Runner run(k, dt);
    std::mt19937_64 rng(7);
    for (const auto& rows : images) {
      run.write_rom(rows);
      // Every block, in a random order, with random warps and lane masks.
      std::vector<std::uint32_t> order(kProtoBlocks);
      for (int b = 0; b < kProtoBlocks; ++b) order[b] = b;
      std::shuffle(order.begin(), order.end(), rng);
      for (std::uint32_t b : order) run.feed(exec_record(b, rng() % kProtoWarps, 1 + rng() % 15));
    }
    const Stats s = run.finish();
    expect_clean(s, dt);
    EXPECT_EQ(s.execs, kProtoBlocks * static_cast<int>(images.size()));
  }
}

// --- Stage 2: the register file (WREG records) and the operand reads of EXEC tokens.

// Every row names registers 1..15 in turn in a, b and c, all as registers.
std::vector<std::uint64_t> register_sweep_rows() {
  std::vector<std::uint64_t> rows;
  for (int i = 0; i < kProtoBlocks * kSlots; ++i) {
    Instr in;
    in.op = Op::kAdd;
    in.ak = Kind::kReg;
    in.bk = Kind::kReg;
    in.d = 1;
    in.a = static_cast<std::uint8_t>(i % 16);  // r0 included
    in.b = static_cast<std::uint8_t>(1 + (i + 5) % 15);
    in.c = static_cast<std::uint8_t>(1 + (i + 11) % 15);
    in.imm = 0xdeadbeefu;
    rows.push_back(encode(in));
  }
  return rows;
}

// Values that need every format, with their edges.
std::uint32_t random_value(std::mt19937_64& rng) {
  static const std::uint32_t kEdges[] = {0,           1,           0x7f,       0x80,       0xffffff80u,
                                         0xffffff7fu, 0xffffffffu, 0x7fff,     0x8000,     0xffff8000u,
                                         0xffff7fffu, 0x10000,     0x7fffffff, 0x80000000u};
  switch (rng() % 6) {
    case 0: return 0;
    case 1: return static_cast<std::uint32_t>(static_cast<std::int32_t>(static_cast<std::int8_t>(rng())));
    case 2: return static_cast<std::uint32_t>(static_cast<std::int32_t>(static_cast<std::int16_t>(rng())));
    case 3: return kEdges[rng() % std::size(kEdges)];
    default: return static_cast<std::uint32_t>(rng());
  }
}

// Writes every register row, then per ROM image: the image, partial-mask overwrites, and EXEC
// tokens (every block; on the sweep image every block for every warp), checking every operand
// of every requested slot and every lane against the register model.
Stats run_registers(const Machine& k, DType dt, std::uint64_t seed) {
  Runner run(k, dt);
  std::mt19937_64 rng(seed);
  auto values = [&]() -> std::array<std::uint32_t, 4> {
    return {random_value(rng), random_value(rng), random_value(rng), random_value(rng)};
  };
  for (std::uint32_t w = 0; w < kProtoWarps; ++w)  // the prompt: r1..r15 of every warp, all lanes
    for (std::uint32_t r = 1; r < 16; ++r) run.write_register(w, r, 0xf, values());
  // Lowered programs: LaunchStreamsDecodeAndReadOperands.
  const std::vector<std::vector<std::uint64_t>> images = {random_valid_rows(21), register_sweep_rows()};
  for (std::size_t p = 0; p < images.size(); ++p) {
    run.write_rom(images[p]);
    // Overwrites with partial masks (1..14): the other lanes' rows must keep their values.
    for (int i = 0; i < 40; ++i)
      run.write_register(rng() % kProtoWarps, 1 + rng() % 15, 1 + static_cast<std::uint32_t>(rng() % 14), values());
    std::vector<std::pair<int, int>> execs;  // (block, warp)
    for (int b = 0; b < kProtoBlocks; ++b)
      if (p == 1)
        for (int w = 0; w < kProtoWarps; ++w) execs.emplace_back(b, w);
      else
        execs.emplace_back(b, static_cast<int>(rng() % kProtoWarps));
    std::shuffle(execs.begin(), execs.end(), rng);
    for (const auto& [b, w] : execs) run.feed(exec_record(b, w, 1 + rng() % 15));
  }
  return run.finish();
}

void check_registers(const Reads& reads, const std::string& what, std::uint64_t seed) {
  const Machine k(reads);
  ASSERT_TRUE(k.ok);
  report(k.c, k.cc, what);
  for (DType dt : {DType::kF32, DType::kBF16}) expect_clean(run_registers(k, dt, seed), dt);
}

// One operand of one slot (4 read ports, 128 bits) beside records and fetch/decode, each its own
// circuit at Qwen3.5-2B shapes.
TEST(Circuit, RegisterFileOperandAMatchesModel) {
  for (int s = 0; s < kSlots; ++s) check_registers({{s, Operand::kA}}, "slot " + std::to_string(s) + " a", 31 + s);
}

TEST(Circuit, RegisterFileOperandBMatchesModel) {
  for (int s = 0; s < kSlots; ++s) check_registers({{s, Operand::kB}}, "slot " + std::to_string(s) + " b", 36 + s);
}

TEST(Circuit, RegisterFileOperandCMatchesModel) {
  for (int s = 0; s < kSlots; ++s) check_registers({{s, Operand::kC}}, "slot " + std::to_string(s) + " c", 41 + s);
}

// One slot's a and b (256 bits of operands) beside the records and fetch/decode stages,
// inside the Qwen3.5-2B residual (one channel per bit).
TEST(Circuit, RegisterFileOperandsABOfOneSlotMatchModel) {
  check_registers({{0, Operand::kA}, {0, Operand::kB}}, "slot 0 a, b", 46);
}

// Every format × lane mask (1..15) as one record, with the sign-extension edges; each write is
// read back by an EXEC whose slot 0 reads the register in a (block r reads r).
TEST(Circuit, WregFormatsAndLaneMasksWriteExactly) {
  const Machine k(Reads{{0, Operand::kA}});
  ASSERT_TRUE(k.ok);
  std::vector<std::uint64_t> rows(kProtoBlocks * kSlots, 0);
  for (int b = 0; b < kProtoBlocks; ++b) {
    Instr in;
    in.op = Op::kAdd;
    in.ak = in.bk = Kind::kReg;
    in.a = static_cast<std::uint8_t>(b % 16);
    in.b = static_cast<std::uint8_t>(1 + (b + 7) % 15);
    rows[b * kSlots] = encode(in);
  }
  // Per format: value pools (each value needs at most that format; the edges of the next smaller).
  const std::vector<std::vector<std::uint32_t>> pools = {
      {0},
      {1, 0xffffffffu, 0x7f, 0xffffff80u /* -128 */, 0, 2, 0xfffffffeu},
      {0x7fff, 0xffff8000u /* -32768 */, 0x80, 0xffffff7fu, 0xff, 0x100, 0xfffffe00u, 0},
      {0x80000000u, 0x7fffffff, 0x8000, 0xffff7fffu, 0x10000, 0xffffffffu}};
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Runner run(k, dt);
    std::mt19937_64 rng(51);
    run.write_rom(rows);
    for (std::uint32_t w = 0; w < kProtoWarps; ++w)
      for (std::uint32_t r = 1; r < 16; ++r) run.write_register(w, r, 0xf, {r, w, ~r, 0x12345678u});
    int records = 0;
    for (int f = 0; f < 4; ++f)
      for (std::uint32_t m = 1; m <= 15; ++m) {
        if ((f == 2 && std::popcount(m) > 3) || (f == 3 && std::popcount(m) > 1)) continue;  // reserved rows
        for (int rep = 0; rep < 3; ++rep) {
          const auto& pool = pools[static_cast<std::size_t>(f)];
          std::array<std::uint32_t, 4> v{};
          for (int l = 0; l < kProtoLanes; ++l) v[l] = pool[(rng() + static_cast<unsigned>(rep)) % pool.size()];
          int first = std::countr_zero(m);
          v[first] = pool[static_cast<std::size_t>(rep) % std::min<std::size_t>(pool.size(), 2)];  // needs format f
          const std::uint32_t warp = rng() % kProtoWarps, reg = 1 + rng() % 15;
          const Record r = wreg_record(warp, reg, m, v);
          ASSERT_EQ(static_cast<int>(r.format), f) << to_text(r);
          run.feed(r);
          ++records;
          run.feed(exec_record(reg, warp, m));  // slot 0 of block reg reads reg in a
        }
      }
    const Stats s = run.finish();
    expect_clean(s, dt);
    EXPECT_EQ(records, 3 * (15 + 15 + 14 + 4));
  }
}

// Real launches: the exact token streams of encode_prompt() and record_launch() (prompt, then
// what the model must generate); every EXEC decodes the program and reads its operands.
TEST(Circuit, LaunchStreamsDecodeAndReadOperands) {
  struct Launch {
    sdk::KernelIR kernel;
    sdk::LaunchShape shape;
    std::vector<sdk::LaunchArg> args;
  };
  auto arr = [](const std::string& name, std::vector<std::int32_t> v) {
    sdk::LaunchArg a;
    a.param = name;
    a.is_array = true;
    a.array = std::move(v);
    return a;
  };
  auto scalar = [](const std::string& name, std::int32_t v) {
    sdk::LaunchArg a;
    a.param = name;
    a.scalar = v;
    return a;
  };
  std::vector<std::int32_t> a24(24), b24(24), big(10), c10(10, -7);
  for (int i = 0; i < 24; ++i) a24[i] = i - 11, b24[i] = 3 * i + 1;
  for (int i = 0; i < 10; ++i) big[i] = 50000 * i - 70000;
  const std::vector<Launch> launches = {
      {test::dot_kernel(), {3, 8}, {arr("a", a24), arr("b", b24), arr("out", {0}), scalar("n", 24)}},
      {test::ifelse_kernel(),
       {1, 8},
       {arr("a", {3, -8, 7, 10, 0, 5, -3, 12}), arr("out", std::vector<std::int32_t>(8))}},
      {test::loop_kernel(), {1, 8}, {arr("a", {3, 0, 5, 1, -2, 7, 2, 4}), arr("out", std::vector<std::int32_t>(8))}},
      {vadd_kernel(), {2, 5}, {arr("a", big), arr("b", big), arr("c", c10), scalar("n", 9)}},
  };
  const std::vector<Reads> configs = {Reads{{0, Operand::kA}}, Reads{{0, Operand::kB}}, Reads{{1, Operand::kA}},
                                      Reads{{1, Operand::kB}}, Reads{{0, Operand::kC}}};
  for (const Reads& reads : configs) {
    const Machine k(reads);
    ASSERT_TRUE(k.ok);
    for (DType dt : {DType::kF32, DType::kBF16}) {
      Runner run(k, dt);
      for (const Launch& l : launches) {
        auto p = lower_kernel(l.kernel, l.shape, test::circuit_sizes());
        ASSERT_TRUE(p.has_value()) << p.status().to_string();
        auto lr = record_launch(**p, l.args, {});
        ASSERT_TRUE(lr.has_value()) << lr.status().to_string();
        run.feed(lr->prompt);
        run.feed(lr->generated);
      }
      const Stats s = run.finish();
      expect_clean(s, dt);
      EXPECT_GT(s.execs, 40);
    }
  }
}

// All four instruction slots' a and b at once: 32 read ports and 1,024 bits of operands,
// inside the Qwen3.5-2B residual.
TEST(Circuit, RegisterFileOfFourSlotsMatchesModel) {
  Reads all;
  for (int s = 0; s < 4; ++s) all.insert(all.end(), {{s, Operand::kA}, {s, Operand::kB}});
  check_registers(all, "slots 0-3 a, b", 47);
}

TEST(Circuit, RegisterFileNamesWhatDoesNotFit) {
  weights::Circuit c;
  auto fd = circuit::build_fetch_decode(c, kSlots);
  ASSERT_TRUE(fd.has_value());
  auto bad = circuit::build_register_file(c, *fd, {{kSlots, Operand::kA}});
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("slot 5, the fetch stage has slots 0..4"), std::string::npos)
      << bad.status().message();
  // No token writes r0 or a warp outside the layout.
  auto r0 = circuit::record_inputs(fd->records, wreg_record(0, 0, 1, {1, 2, 3, 4}));
  ASSERT_FALSE(r0.has_value());
  EXPECT_NE(r0.status().message().find("register r0 cannot be written back"), std::string::npos)
      << r0.status().message();
  auto w8 = circuit::record_inputs(fd->records, wreg_record(8, 1, 1, {1, 2, 3, 4}));
  ASSERT_FALSE(w8.has_value());
  EXPECT_NE(w8.status().message().find("warp 8 is outside the token layout"), std::string::npos)
      << w8.status().message();
  // A byte record of lanes 0, 2, 3 is a header and two DATA tokens.
  auto t = circuit::record_inputs(fd->records, wreg_record(3, 7, 0xd, {5, 9, 0xffffff80u, 6}));
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  EXPECT_EQ(t->size(), 3u);
}

}  // namespace
}  // namespace qgpu::simt
