// Token protocol tests (docs/PROTOCOL.md): the codec's round trips and
// errors, the dot-product prompt and record stream, and record streams of
// other kernels replayed on an independent model of the recurrent state (a
// small "circuit model" that executes each EXEC from the stored rows only and
// checks every write-back against what it computed).
#include "protocol.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <random>

#include "interp.h"
#include "ir_builder.h"
#include "isa.h"
#include "kernels.h"
#include "lower.h"

namespace qgpu::simt::test {
namespace {

using sdk::AddressSpace;
using sdk::CmpPred;
using sdk::LaunchArg;

constexpr std::int64_t kBase = kQwen35VocabRows;

using test::arr;
using test::scalar;

// ---------------------------------------------------------------------------- codec

TEST(Protocol, VocabularySize) {
  // Counted from the layout in docs/PROTOCOL.md, term by term.
  const std::int64_t want = 1 + 1 + 1 + 1           // HALT RUN SYNC LAUNCH
                            + 128                   // CTA
                            + 128 * 8 * 15          // EXEC block x warp x lane mask
                            + 385 * 8 * 15          // SCHED state (3 x 128 blocks, exited) x warp x lane mask
                            + 8 * 15 * 15 * 4       // WREG warp x reg x lane mask x format
                            + (1024 + 512) * 4 * 4  // WMEM (global, shared words) x count x format
                            + 128 * 8 * 2           // ROM (32-bit halves)
                            + 128 + 1               // LIVE: one row per block, then `LIVE exited`
                            + 2                     // BOUND global, shared
                            + 7 * 4 * 2             // FAULT slot x lane x kind
                            + 65536;                // DATA
  EXPECT_EQ(vocabulary_rows(), want);
  EXPECT_EQ(want, 161239);
  std::cout << "[ protocol ] vocabulary: " << kBase << " base rows + " << vocabulary_rows()
            << " machine rows = " << kBase + vocabulary_rows() << "\n";
}

std::vector<Record> edge_records() {
  std::vector<Record> v = {halt_record(),           run_record(),           sync_record(), launch_record(0, 0),
                           launch_record(255, 255), launch_record(32, 128), cta_record(0), cta_record(127)};
  for (std::uint32_t b : {0u, 31u})
    for (std::uint32_t w : {0u, 7u})
      for (std::uint32_t m : {1u, 6u, 15u}) v.push_back(exec_record(b, w, m));
  for (LaneStatus s : {LaneStatus::kRunning, LaneStatus::kExited, LaneStatus::kBarrierEven, LaneStatus::kBarrierOdd})
    for (std::uint32_t b : {0u, 31u}) v.push_back(sched_record(7, 9, s, b));
  const std::vector<std::uint32_t> vals = {0u,          1u,          127u,        0xffffff80u, 128u,
                                           0xffffff7fu, 32767u,      0xffff8000u, 32768u,      0xffff7fffu,
                                           0x7fffffffu, 0x80000000u, 0xffffffffu, 0x12345678u};
  std::mt19937 rng(5);
  for (std::uint32_t m = 1; m < 16; ++m)
    for (int k = 0; k < 6; ++k) {
      std::array<std::uint32_t, 4> x{};
      for (auto& e : x) e = vals[rng() % vals.size()];
      if (k == 0) x = {};
      for (const Record& r : wreg_records(rng() % 8, 1 + rng() % 15, m, x)) v.push_back(r);
    }
  v.push_back(wreg_record(0, 1, 15, {0, 0, 0, 0}));
  for (const Record& r : wreg_records(7, 15, 15, {0xffffffffu, 0x80000000u, 0x7fffffffu, 1})) v.push_back(r);
  for (std::uint32_t n = 1; n <= 4; ++n)
    for (int k = 0; k < 6; ++k) {
      std::vector<std::uint32_t> x(n);
      for (auto& e : x) e = vals[rng() % vals.size()];
      for (const Record& r : wmem_records(k % 2, k == 5 ? 512 - n : k == 4 ? 1024 - n : rng() % 500 + (k % 2 ? 0 : 500), x))
        v.push_back(r);
    }
  for (std::uint64_t row : {0ull, 0xffffffffffffffffull, 0x00000010010004C2ull})
    for (const Record& r : rom_records(row == 0 ? 0 : 31, row == 0 ? 0 : 7, row)) v.push_back(r);
  v.push_back(live_record(0, 0));
  v.push_back(live_record(31, 0xfffe));
  v.push_back(live_exited_record(0xfffe));
  v.push_back(live_exited_record(1u << 5));
  for (bool shared : {false, true})
    for (std::uint32_t words : {0u, 1u, shared ? 512u : 1024u}) v.push_back(bound_record(shared, words));
  for (std::uint32_t slot : {0u, 3u, 6u})
    for (std::uint32_t lane : {0u, 3u})
      for (FaultKind f : {FaultKind::kMisaligned, FaultKind::kOutOfBounds}) v.push_back(fault_record(slot, lane, f));
  return v;
}

TEST(Protocol, RoundTripsEveryRecordKind) {
  const std::vector<Record> recs = edge_records();
  std::vector<bool> seen(kRecordKinds, false);
  for (const Record& r : recs) seen[static_cast<int>(r.kind)] = true;
  for (int k = 0; k < kRecordKinds; ++k) {
    if (static_cast<RecordKind>(k) == RecordKind::kData) continue;
    EXPECT_TRUE(seen[k]) << "no edge record of kind " << k;
  }
  auto ids = encode_tokens(recs, kBase);
  ASSERT_TRUE(ids) << ids.status().to_string();
  EXPECT_EQ(static_cast<std::int64_t>(ids->size()), token_count(recs));
  for (std::int64_t id : *ids) {
    EXPECT_GE(id, kBase);
    EXPECT_LT(id, kBase + vocabulary_rows());
  }
  auto back = decode_tokens(*ids, kBase);
  ASSERT_TRUE(back) << back.status().to_string();
  ASSERT_EQ(back->size(), recs.size());
  for (std::size_t i = 0; i < recs.size(); ++i) EXPECT_EQ((*back)[i], recs[i]) << i << ": " << to_text(recs[i]);
}

TEST(Protocol, HeadersAreDistinctAndDataFormatsAreMinimal) {
  // Every header id decodes to the record it came from: distinct records, distinct ids.
  std::map<std::int64_t, std::string> ids;
  for (std::uint32_t b = 0; b < 32; ++b)
    for (std::uint32_t w = 0; w < 8; ++w)
      for (std::uint32_t m = 1; m < 16; ++m) {
        std::vector<std::int64_t> t;
        ASSERT_TRUE(append_tokens(exec_record(b, w, m), kBase, t));
        EXPECT_TRUE(ids.emplace(t[0], to_text(exec_record(b, w, m))).second);
      }
  EXPECT_EQ(ids.size(), 32u * 8 * 15);
  // Formats by value range: 4 lanes of small values travel in 2 DATA tokens.
  // Records carry at most 3 DATA tokens: lanes are split in order (byte 1,2,3 | half 128; | word 0x8000).
  auto tokens = [](const std::array<std::uint32_t, 4>& v) { return token_count(wreg_records(0, 1, 15, v)); };
  EXPECT_EQ(tokens({1, 2, 3, 0xffffff80u}), 3);
  EXPECT_EQ(tokens({1, 2, 3, 128}), 3 + 2);
  EXPECT_EQ(tokens({1, 2, 3, 0x8000}), 3 + 3);
  EXPECT_EQ(tokens({1000, 2000, 3000, 4000}), 4 + 2);
  EXPECT_EQ(tokens({0x10000, 1, 2, 3}), 3 + 3);
  EXPECT_EQ(tokens({}), 1);
  EXPECT_EQ(wreg_records(0, 1, 15, {1, 2, 3, 0x8000}).size(), 2u);
  EXPECT_EQ(token_count(wmem_records(false, 0, std::vector<std::uint32_t>{100000, 5, 6, 7})), 3 + 3);
  EXPECT_EQ(token_count(wmem_record(false, 2, std::vector<std::uint32_t>{32})), 2);
  EXPECT_EQ(to_text(wreg_record(0, 2, 7, {4, 10, 18, 0})), "WREG w0 r2 0b0111 byte [4, 10, 18]");
  EXPECT_EQ(to_text(sched_record(0, 8, LaneStatus::kRunning, 3)), "SCHED w0 0b1000 running B3");
  // LIVE: rows 0-127 are the blocks' live-in sets, row 128 the exited lanes' (after B127, before BOUND).
  std::vector<std::int64_t> t;
  ASSERT_TRUE(append_tokens(live_record(127, 2), kBase, t));
  ASSERT_TRUE(append_tokens(live_exited_record((1u << 3) | (1u << 15)), kBase, t));
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[2], t[0] + 1);
  EXPECT_EQ(t[2], kBase + first_id(RecordKind::kBound) - 1);
  EXPECT_EQ(t[3], kBase + first_id(RecordKind::kData) + 0x8008);
  EXPECT_EQ(to_text(live_exited_record((1u << 3) | (1u << 15))), "LIVE exited {r3, r15}");
  EXPECT_EQ(to_text(live_record(2, 0)), "LIVE B2 {}");
}

TEST(Protocol, InvalidTokensAreNamed) {
  const std::int64_t data = kBase + first_id(RecordKind::kData);
  auto err = [](std::vector<std::int64_t> ids) {
    auto r = decode_tokens(ids, kBase);
    EXPECT_FALSE(r);
    return r ? std::string() : r.status().message();
  };
  EXPECT_EQ(err({kBase + first_id(RecordKind::kHalt), 1234}),
            "token 1 (id 1234) is a base-vocabulary (text) token, not a machine record (records start at 248320)");
  EXPECT_EQ(err({kBase + vocabulary_rows() + 4}),
            "token 0 (id 409563) is past the machine's rows (248320 + 161239, over by 5)");
  EXPECT_EQ(err({data + 7}),
            "token 0 (id " + std::to_string(data + 7) + ") is a DATA token where a record header is expected");
  std::vector<std::int64_t> wreg;
  ASSERT_TRUE(append_tokens(wreg_record(1, 2, 15, {1, 2, 3, 4}), kBase, wreg));
  ASSERT_EQ(wreg.size(), 3u);
  EXPECT_NE(err({wreg[0], wreg[1]}).find("which needs 2 DATA tokens, but the stream ends after 1"), std::string::npos);
  EXPECT_NE(err({wreg[0], wreg[1], kBase}).find("should be DATA 2 of 2 for the WREG record at token 0"),
            std::string::npos);
  // Values that a smaller format holds must use it (one token sequence per record).
  std::vector<std::int64_t> half;
  ASSERT_TRUE(append_tokens(wreg_record(1, 2, 1, {1000, 0, 0, 0}), kBase, half));
  ASSERT_EQ(half.size(), 2u);
  half[1] = data + 5;
  EXPECT_NE(err(half).find("not in their smallest format (half where byte holds them)"), std::string::npos);
  std::vector<std::int64_t> byte;
  ASSERT_TRUE(append_tokens(wreg_record(1, 2, 1, {5, 0, 0, 0}), kBase, byte));
  byte[1] = data + 0x0105;
  EXPECT_NE(err(byte).find("high byte of the last byte-format DATA is not 0"), std::string::npos);
  // WMEM rows that run past the last word of their space (global 1023, shared 511) are reserved.
  const std::int64_t wmem = kBase + first_id(RecordKind::kWmem);
  EXPECT_NE(err({wmem + ((1023 * 4) + 3) * 4}).find("global word 1023 runs past the last word 1023"),
            std::string::npos);  // word 1023, 4 words
  EXPECT_NE(err({wmem + (((1024 + 511) * 4) + 1) * 4}).find("shared word 511 runs past the last word 511"),
            std::string::npos);  // shared word 511, 2 words
  // Encoding checks fields against the layout.
  std::vector<std::int64_t> t;
  auto s = append_tokens(exec_record(140, 0, 1), kBase, t);
  EXPECT_EQ(s.message(), "EXEC record: block 140 is outside the token layout (at most 127, over by 13)");
  s = append_tokens(exec_record(1, 0, 0), kBase, t);
  EXPECT_EQ(s.message(), "EXEC record: lane mask 0 is not a non-empty mask of 4 lanes");
  s = append_tokens(live_record(129, 2), kBase, t);
  EXPECT_EQ(s.message(), "LIVE record: block 129 is outside the token layout (at most 128, over by 1)");
  s = append_tokens(live_exited_record(1), kBase, t);
  EXPECT_EQ(s.message(), "LIVE record: mask 1 is not a set of r1-r15");
  std::vector<std::int64_t> live;
  ASSERT_TRUE(append_tokens(live_exited_record(2), kBase, live));
  live[1] = data + 3;
  EXPECT_EQ(err(live), "token 1 (id " + std::to_string(data + 3) + "): LIVE mask names r0, which is never stored");
  s = append_tokens(wreg_record(0, 0, 1, {}), kBase, t);
  EXPECT_EQ(s.message(), "WREG record: register r0 cannot be written back (r1-r15)");
  s = append_tokens(wreg_record(0, 1, 15, {1, 2, 3, 0x8000}), kBase, t);
  EXPECT_EQ(s.message(),
            "WREG record needs 8 DATA tokens, a record carries at most 3 (the conv1d window; over by 5): split it");
  // A header whose row would need more DATA than the window allows is a reserved row.
  const std::int64_t wreg_word4 = kBase + first_id(RecordKind::kWreg) + (14 * 4 + 3);  // w0 r1 0b1111 word
  EXPECT_NE(err({wreg_word4}).find("which would need 8 DATA tokens (at most 3; a reserved row)"), std::string::npos);
}

// ---------------------------------------------------------------------------- kernels






sdk::KernelIR shuffle_kernel() {
  IrBuilder b("shfl");
  const ValueId pin = b.ptr_param("in"), psum = b.ptr_param("sum");
  const ValueId gid = b.global_index();
  const ValueId v = b.load(b.element(pin, gid));
  ValueId d = b.bin(Opcode::kAdd, v, b.shfl(sdk::ShflMode::kDown, v, b.c32(2), 4));
  d = b.bin(Opcode::kAdd, d, b.shfl(sdk::ShflMode::kDown, d, b.c32(1), 4));
  const ValueId lane0 =
      b.icmp(CmpPred::kEq, b.bin(Opcode::kAnd, b.special(sdk::SpecialReg::kLaneId), b.c32(3)), b.c32(0));
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


// ---------------------------------------------------------------------------- replay model

// The recurrent state as the protocol defines it (ROM, register rows, memory
// rows, scheduler rows, latches), driven only by records. On EXEC it executes
// the block from the stored rows, as the circuit will, and then checks each
// write-back against its own results; it also keeps its own copy of every
// lane's architectural scheduler state to check EXEC/SYNC/CTA/HALT choices and
// the stored scheduler rows.
class Replay {
 public:
  explicit Replay(int rows_per_block) : rows_(rows_per_block) {}

  // Returns "" or the first inconsistency.
  std::string feed(const std::vector<Record>& recs, bool generated) {
    for (std::size_t i = 0; i < recs.size(); ++i) {
      const std::string e = apply(recs[i], generated);
      if (!e.empty()) return "record " + std::to_string(i) + " `" + to_text(recs[i]) + "`: " + e;
    }
    return "";
  }
  std::vector<std::uint32_t> global = std::vector<std::uint32_t>(kProtoGlobalWords, 0u);
  bool halted = false;
  std::int64_t exec_count = 0, warp_instructions = 0;

 private:
  enum Run { kRunning, kBarrier, kExited, kAbsent };
  struct Arch {
    Run run = kAbsent;
    std::uint32_t pc = 0;
  };

  int warps() const { return static_cast<int>((threads_ + 3) / 4); }
  Instr rom(std::uint32_t b, int slot) const {
    Instr in;
    auto it = rom_.find(b * rows_ + slot);
    if (it != rom_.end()) decode(it->second, in);
    return in;
  }

  // Scheduler row as a lane state, with the barrier parity applied.
  Arch stored(int w, int l) const {
    const auto& [st, blk] = sched_[w][l];
    if (st == LaneStatus::kExited) return {kExited, 0};
    if (st == LaneStatus::kRunning) return {kRunning, blk};
    const int p = st == LaneStatus::kBarrierEven ? 0 : 1;
    return {p == parity_ ? kBarrier : kRunning, blk};
  }

  Record expected_next() const {
    for (int w = cur_warp_; w < warps(); ++w) {
      std::uint32_t pc = UINT32_MAX, m = 0;
      for (int l = 0; l < 4; ++l)
        if (arch_[w][l].run == kRunning) pc = std::min(pc, arch_[w][l].pc);
      if (pc == UINT32_MAX) continue;
      for (int l = 0; l < 4; ++l)
        if (arch_[w][l].run == kRunning && arch_[w][l].pc == pc) m |= 1u << l;
      return exec_record(pc, w, m);
    }
    for (int w = 0; w < warps(); ++w)
      for (int l = 0; l < 4; ++l)
        if (arch_[w][l].run == kBarrier) return sync_record();
    return cta_ + 1 < grid_ ? cta_record(cta_ + 1) : halt_record();
  }

  void start_cta() {
    for (int w = 0; w < 8; ++w)
      for (int l = 0; l < 4; ++l)
        arch_[w][l] = {static_cast<std::uint32_t>(w * 4 + l) < threads_ ? kRunning : kAbsent, 0};
    cur_warp_ = 0;
    parity_ = 0;
  }

  std::string apply(const Record& r, bool generated) {
    if (halted) return "record after HALT";
    if (fault_ && r.kind != RecordKind::kFault) return "expected " + to_text(*fault_);
    switch (r.kind) {
      case RecordKind::kBound: bound_[r.shared] = r.values[0]; return "";
      case RecordKind::kFault:
        if (!fault_ || !(*fault_ == r)) return fault_ ? "expected " + to_text(*fault_) : "no access faulted";
        halted = true;
        return "";
      case RecordKind::kLaunch: threads_ = r.threads, grid_ = r.grid; return "";
      case RecordKind::kRom: {
        std::uint64_t& row = rom_[r.block * rows_ + r.slot];
        const int shift = 32 * static_cast<int>(r.half);
        row = (row & ~(0xffffffffull << shift)) | (std::uint64_t{r.values[0]} << shift);
        return "";
      }
      case RecordKind::kLive: live_.at(r.block) = r.values[0]; return "";
      case RecordKind::kRun: return "";
      case RecordKind::kCta:
        if (generated && !(expected_next() == r)) return "expected " + to_text(expected_next());
        cta_ = r.cta;
        start_cta();
        // The CTA token erases the register file and shared memory (PROTOCOL.md §3.3).
        for (auto& warp : regs_)
          for (auto& reg : warp) reg.fill(0u);
        std::fill(shared_.begin(), shared_.end(), 0u);
        in_exec_ = false;
        return "";
      case RecordKind::kSync:
        if (!(expected_next() == r)) return "expected " + to_text(expected_next());
        for (auto& warp : arch_)
          for (Arch& a : warp)
            if (a.run == kBarrier) a.run = kRunning;
        parity_ ^= 1;
        cur_warp_ = 0;
        in_exec_ = false;
        return "";
      case RecordKind::kHalt:
        if (!(expected_next() == r)) return "expected " + to_text(expected_next());
        halted = true;
        return "";
      case RecordKind::kSched:
        for (int l = 0; l < 4; ++l)
          if ((r.lanes >> l) & 1) sched_[r.warp][l] = {r.status, r.block};
        return "";
      case RecordKind::kWreg:
        if (generated && in_exec_) {
          if (static_cast<int>(r.warp) != exec_warp_) return "register write-back for another warp";
          if (!((defs_ >> r.reg) & 1)) return "the block does not write r" + std::to_string(r.reg);
          for (int l = 0; l < 4; ++l)
            if ((r.lanes >> l) & 1) {
              if (!((exec_mask_ >> l) & 1)) return "lane " + std::to_string(l) + " did not run";
              // Only registers live for the lane: at its next block, or (exited) the shuffle sources.
              const Arch& a = arch_[r.warp][l];
              const std::uint32_t row = a.run == kExited ? kLiveExited : a.pc;
              if (!((live_.at(row) >> r.reg) & 1))
                return "lane " + std::to_string(l) + ": r" + std::to_string(r.reg) + " is not in " +
                       to_text(live_record(row, live_.at(row)));
              if (computed_[l][r.reg] != r.values[l])
                return "lane " + std::to_string(l) + " computed " + std::to_string(s32(computed_[l][r.reg])) +
                       " from the stored rows";
            }
        } else if (generated) {
          return "a register write-back outside an EXEC";
        }
        for (int l = 0; l < 4; ++l)
          if ((r.lanes >> l) & 1) regs_[r.warp][r.reg][l] = r.values[l];
        return "";
      case RecordKind::kWmem: {
        std::vector<std::uint32_t>& mem = r.shared ? shared_ : global;
        for (std::uint32_t k = 0; k < r.count; ++k) {
          const std::uint32_t w = r.word + k;
          if (generated && in_exec_) {
            const auto it = written_.find({r.shared, w});
            if (it == written_.end()) return "word " + std::to_string(w) + " was not written by the block";
            if (it->second != r.values[k])
              return "word " + std::to_string(w) + " computed " + std::to_string(s32(it->second));
          } else if (generated) {
            return "a memory write-back outside an EXEC";
          }
          mem[w] = r.values[k];
        }
        return "";
      }
      case RecordKind::kExec: return exec(r);
      default: return "unexpected record";
    }
  }

  std::string exec(const Record& r) {
    if (!(expected_next() == r)) return "expected " + to_text(expected_next());
    const int w = static_cast<int>(r.warp);
    // Lanes outside the mask must be described by the stored scheduler rows.
    for (int l = 0; l < 4; ++l) {
      if ((r.lanes >> l) & 1 || arch_[w][l].run == kAbsent) continue;
      const Arch s = stored(w, l), a = arch_[w][l];
      if (s.run != a.run || (a.run != kExited && s.pc != a.pc))
        return "scheduler row of lane " + std::to_string(l) + " is stale";
    }
    ++exec_count;
    cur_warp_ = w;
    exec_warp_ = w;
    exec_mask_ = r.lanes;
    in_exec_ = true;
    written_.clear();
    defs_ = 0;
    // Register files as stored; the block updates a private copy.
    for (int l = 0; l < 4; ++l)
      for (int k = 0; k < 16; ++k) computed_[l][k] = k == 0 ? 0 : regs_[w][k][l];
    std::vector<std::uint32_t> g = global, s = shared_;
    auto value = [&](Kind kind, std::uint8_t f, std::uint32_t imm, int l) -> std::uint32_t {
      if (kind == Kind::kImm) return imm;
      if (kind == Kind::kReg) return computed_[l][f];
      const std::uint32_t tid = static_cast<std::uint32_t>(w * 4 + l);
      switch (f) {
        case 0: return tid;
        case 1: return threads_;
        case 2: return cta_;
        case 3: return grid_;
        default: return tid % 32;
      }
    };
    for (int slot = 0; slot < rows_ - 1; ++slot) {
      const Instr in = rom(r.block, slot);
      if (in.op == Op::kNop) continue;
      ++warp_instructions;
      const Format f = op_info(in.op).format;
      std::array<std::uint32_t, 4> res{};
      std::vector<std::uint32_t>& mem = (in.flags & kFlagShared) ? s : g;
      for (int l = 0; l < 4; ++l) {
        if (!((r.lanes >> l) & 1)) continue;
        const std::uint32_t a = value(in.ak, in.a, in.imm, l), b = value(in.bk, in.b, in.imm, l);
        const std::uint32_t addr = computed_[l][in.a] + in.imm, word = addr / 4;
        if (f == kFmtLoad || f == kFmtStore || f == kFmtAtom || f == kFmtCas) {
          // A fault (ISA.md §2) ends the block there: FAULT must follow this EXEC.
          const bool shared = in.flags & kFlagShared;
          if (addr % 4 != 0 || word >= bound_[shared]) {
            fault_ = fault_record(static_cast<std::uint32_t>(slot), static_cast<std::uint32_t>(l),
                                  addr % 4 != 0 ? FaultKind::kMisaligned : FaultKind::kOutOfBounds);
            return "";
          }
        }
        switch (f) {
          case kFmtDA:
          case kFmtDAB:
          case kFmtDABC: res[l] = eval(in.op, a, b, computed_[l][in.c]); break;
          case kFmtLoad: res[l] = mem.at(word); break;
          case kFmtStore:
            mem.at(word) = computed_[l][in.b];
            written_[{(in.flags & kFlagShared) != 0, word}] = 0;
            break;
          case kFmtAtom:
          case kFmtCas:
            res[l] = mem.at(word);
            mem[word] = eval(in.op, res[l], computed_[l][in.b], computed_[l][in.c]);
            written_[{(in.flags & kFlagShared) != 0, word}] = 0;
            break;
          case kFmtShfl: {
            const int width = 1 << ((in.flags & kFlagWidthMask) >> kFlagWidthShift);
            const int first = l & ~(width - 1), last = l | (width - 1);
            int j = l;
            bool ok = true;
            if (in.op == Op::kShflIdx) j = first | static_cast<int>(b & (width - 1));
            if (in.op == Op::kShflUp) j = l - static_cast<int>(b), ok = j >= first;
            if (in.op == Op::kShflDown) j = l + static_cast<int>(b), ok = j <= last;
            if (in.op == Op::kShflBfly) j = l ^ static_cast<int>(b), ok = j <= last;
            if (!ok || j > 3) j = l;
            res[l] = (in.flags & kFlagPred) ? (ok ? 1u : 0u) : value(in.ak, in.a, in.imm, j);
            break;
          }
          default: break;
        }
      }
      if (in.op == Op::kBallot) {
        std::uint32_t m = 0;
        for (int l = 0; l < 4; ++l)
          if ((r.lanes >> l) & 1 && value(in.ak, in.a, in.imm, l) != 0) m |= 1u << l;
        res.fill(m);
      }
      const bool writes = f != kFmtStore && f != kFmtNone;
      if (writes && in.d != 0) {
        defs_ |= 1u << in.d;
        for (int l = 0; l < 4; ++l)
          if ((r.lanes >> l) & 1) computed_[l][in.d] = res[l];
      }
    }
    for (auto& [key, v] : written_) v = (key.first ? s : g)[key.second];
    const Instr t = rom(r.block, rows_ - 1);
    ++warp_instructions;
    for (int l = 0; l < 4; ++l) {
      if (!((r.lanes >> l) & 1)) continue;
      Arch& a = arch_[w][l];
      if (t.op == Op::kBr) a.pc = t.imm & 0xffff;
      if (t.op == Op::kBrc) a.pc = computed_[l][t.a] != 0 ? (t.imm & 0xffff) : (t.imm >> 16);
      if (t.op == Op::kBar) a.pc = t.imm & 0xffff, a.run = kBarrier;
      if (t.op == Op::kExit) a.run = kExited;
    }
    return "";
  }

  int rows_;
  std::uint32_t threads_ = 0, grid_ = 0, cta_ = 0;
  std::map<std::uint32_t, std::uint64_t> rom_;
  std::array<std::uint32_t, kProtoBlocks + 1> live_{};  // LIVE rows (row kLiveExited: exited lanes)
  std::vector<std::uint32_t> shared_ = std::vector<std::uint32_t>(kProtoSharedWords, 0u);
  std::array<std::array<std::array<std::uint32_t, 4>, 16>, 8> regs_{};
  std::array<std::array<std::pair<LaneStatus, std::uint32_t>, 4>, 8> sched_{};
  std::array<std::array<Arch, 4>, 8> arch_{};
  int parity_ = 0, cur_warp_ = 0, exec_warp_ = 0;
  std::uint32_t exec_mask_ = 0, defs_ = 0;
  bool in_exec_ = false;
  std::array<std::uint32_t, 2> bound_{};  // BOUND: global, shared
  std::optional<Record> fault_;           // the FAULT the last EXEC must be followed by
  std::array<std::array<std::uint32_t, 16>, 4> computed_{};
  std::map<std::pair<bool, std::uint32_t>, std::uint32_t> written_;

 public:
  void begin() { start_cta(); }
};

struct Case {
  std::string name;
  sdk::KernelIR kernel;
  sdk::LaunchShape shape;
  std::vector<LaunchArg> args;
  std::vector<std::vector<std::int32_t>> want;  // expected final arrays, computed here in plain C++
};

// Lowers, records, round-trips the tokens and replays the stream; returns the records.
LaunchRecords check_case(const Case& c) {
  auto p = lower_kernel(c.kernel, c.shape, circuit_sizes());
  EXPECT_TRUE(p) << c.name << ": " << p.status().to_string();
  if (!p) return {};
  auto lr = record_launch(**p, c.args, {});
  EXPECT_TRUE(lr) << c.name << ": " << lr.status().to_string();
  if (!lr) return {};
  // The interpreter's own results are unchanged by recording.
  auto plain = interpret_program(**p, c.args, {});
  EXPECT_TRUE(plain);
  if (plain) {
    EXPECT_EQ(plain->stats, lr->result.stats);
    for (std::size_t i = 0; i < plain->arrays.size(); ++i)
      EXPECT_EQ(plain->arrays[i].array, lr->result.arrays[i].array);
  }
  // Token round trip of both streams.
  for (const auto* recs : {&lr->prompt, &lr->generated}) {
    auto ids = encode_tokens(*recs, kBase);
    EXPECT_TRUE(ids) << ids.status().to_string();
    if (!ids) continue;
    auto back = decode_tokens(*ids, kBase);
    EXPECT_TRUE(back) << back.status().to_string();
    if (back) {
      EXPECT_TRUE(*back == *recs) << c.name;
    }
  }
  // Replay on the state model; the final memory must be the independent expectation.
  Replay replay((*p)->rows_per_block());
  replay.begin();
  std::string e = replay.feed(lr->prompt, false);
  EXPECT_EQ(e, "") << c.name << " prompt";
  e = replay.feed(lr->generated, true);
  EXPECT_EQ(e, "") << c.name << " generated";
  EXPECT_TRUE(replay.halted) << c.name;
  int word = 0, k = 0;
  for (const LaunchArg& a : c.args) {
    if (!a.is_array) continue;
    std::vector<std::int32_t> got;
    for (std::size_t j = 0; j < a.array.size(); ++j) got.push_back(s32(replay.global[word + j]));
    EXPECT_EQ(got, c.want[k]) << c.name << " array " << a.param << " read from the replayed memory rows";
    word += static_cast<int>(a.array.size());
    ++k;
  }
  if (std::getenv("QGPU_PROTOCOL_PRINT") != nullptr)
    for (const Record& r : lr->generated) std::cout << "  " << to_text(r) << "\n";
  std::int64_t execs = 0, wi = 0;
  for (const auto& [n, v] : lr->result.stats) {
    if (n == "block_executions") execs = v;
    if (n == "warp_instructions") wi = v;
  }
  EXPECT_EQ(replay.exec_count, execs) << c.name;
  EXPECT_EQ(replay.warp_instructions, wi) << c.name;
  std::cout << "[ protocol ] " << c.name << " grid " << c.shape.grid << " block " << c.shape.block << ": prompt "
            << lr->prompt_tokens << " tokens, generated " << lr->generated_tokens << " tokens (" << lr->generated.size()
            << " records, " << execs << " EXEC), " << static_cast<double>(wi) / lr->generated_tokens
            << " warp-instructions per generated token\n";
  return *lr;
}

TEST(Protocol, DotProductPromptAndStream) {
  Case c{"dot",
         dot_kernel(),
         {1, 4},
         {arr("a", {1, 2, 3}), arr("b", {4, 5, 6}), arr("out", {0}), scalar("n", 3)},
         {{1, 2, 3}, {4, 5, 6}, {32}}};
  const LaunchRecords lr = check_case(c);
  auto p = lower_kernel(c.kernel, c.shape, circuit_sizes());
  ASSERT_TRUE(p);
  std::cout << (*p)->dump();
  std::cout << "[ protocol ] dot prompt:\n";
  for (const Record& r : lr.prompt) std::cout << "  " << to_text(r) << "\n";
  std::cout << "[ protocol ] dot generated:\n";
  for (const Record& r : lr.generated) std::cout << "  " << to_text(r) << "\n";
  // Derived by hand from docs/PROTOCOL.md's rules and the listing (B0: i = ctaid·ntid + tid, the mad
  // last in its block (the one multiplier slot, docs/ISA.md §6); B1: the guard; B2: the loads and the
  // product; B3: the atomic; B4: exit; the same blocks as qgpu-host --dump-program on examples/dot.cu):
  // i (r1) is live into B1 for every lane and already 0 in lane 0; lane 3 leaves for B4, which the next
  // EXEC does not imply; the products 4, 10, 18 (r1) are live into B3; the atomic writes out = word 6
  // (after a[3], b[3]); the block-end SCHED of B4's exited lanes is dead (HALT).
  const std::vector<std::string> want = {"EXEC B0 w0 0b1111",
                                         "WREG w0 r1 0b1110 byte [1, 2, 3]",
                                         "EXEC B1 w0 0b1111",
                                         "SCHED w0 0b1000 running B4",
                                         "EXEC B2 w0 0b0111",
                                         "WREG w0 r1 0b0111 byte [4, 10, 18]",
                                         "EXEC B3 w0 0b0111",
                                         "WMEM global[6] byte [32]",
                                         "EXEC B4 w0 0b1111",
                                         "HALT"};
  std::vector<std::string> got;
  for (const Record& r : lr.generated) got.push_back(to_text(r));
  auto ids = encode_tokens(lr.generated, kBase);
  ASSERT_TRUE(ids);
  std::cout << "[ protocol ] dot generated token ids:";
  for (std::int64_t id : *ids) std::cout << " " << id;
  std::cout << "\n";
  EXPECT_EQ(got, want);
  EXPECT_EQ(lr.generated_tokens, 15);
  EXPECT_LE(lr.generated_tokens, 24);  // issue 5's aim
  // Prompt: LAUNCH+1, BOUND global+1, BOUND shared+1, CTA, 25 ROM rows x 5, 5 LIVE x 2, memory 7
  // words (2 runs), SCHED, RUN (no register records: the CTA token clears the register file).
  EXPECT_EQ(lr.prompt.front(), launch_record(4, 1));
  EXPECT_EQ(lr.prompt[1], bound_record(false, 7));  // a, b, out: 7 words
  EXPECT_EQ(lr.prompt[2], bound_record(true, 0));   // no shared variable
  EXPECT_EQ(lr.prompt[3], cta_record(0));
  EXPECT_EQ(lr.prompt.back(), run_record());
  int rom = 0, live = 0;
  for (const Record& r : lr.prompt) rom += r.kind == RecordKind::kRom, live += r.kind == RecordKind::kLive;
  EXPECT_EQ(rom, 5 * 5 * 2);
  EXPECT_EQ(live, 5);
  // Live-in sets by hand from the listing: i (r1) into B1 and B2, the product (r1) into B3; nothing at B0, B4.
  std::vector<std::uint32_t> live_masks;
  for (const Record& r : lr.prompt)
    if (r.kind == RecordKind::kLive) live_masks.push_back(r.values[0]);
  EXPECT_EQ(live_masks, (std::vector<std::uint32_t>{0u, 1u << 1, 1u << 1, 1u << 1, 0u}));
  // Memory: a, b, out in order from word 0, in two byte-format runs.
  std::vector<std::string> mem;
  for (const Record& r : lr.prompt)
    if (r.kind == RecordKind::kWmem) mem.push_back(to_text(r));
  EXPECT_EQ(mem, (std::vector<std::string>{"WMEM global[0..3] byte [1, 2, 3, 4]", "WMEM global[4..6] byte [5, 6, 0]"}));
  EXPECT_EQ(lr.prompt_tokens, 175);
}

TEST(Protocol, StreamsOfOtherKernelsReplayExactly) {
  std::vector<Case> cases;
  {
    std::vector<std::int32_t> a = {3, -8, 7, 10, 0, 5, -3, 12};
    std::vector<std::int32_t> out(8);
    for (int t = 0; t < 8; ++t) out[t] = ((a[t] & 1) ? a[t] - 100 : a[t] * 3) + t;
    cases.push_back({"ifelse (divergent branch)",
                     ifelse_kernel(),
                     {1, 8},
                     {arr("a", a), arr("out", std::vector<std::int32_t>(8, 0))},
                     {a, out}});
  }
  {
    std::vector<std::int32_t> a = {3, 0, 5, 1, -2, 7, 2, 4};
    std::vector<std::int32_t> out(8);
    for (int t = 0; t < 8; ++t) {
      int s = 0;
      for (int j = 0; j < a[t]; ++j) s += j ^ t;
      out[t] = s;
    }
    cases.push_back({"loop (divergent trip counts)",
                     loop_kernel(),
                     {1, 8},
                     {arr("a", a), arr("out", std::vector<std::int32_t>(8, 99))},
                     {a, out}});
  }
  {
    std::vector<std::int32_t> in(16);
    for (int k = 0; k < 16; ++k) in[k] = k * 7 - 40;
    std::vector<std::int32_t> out(2, 0);
    for (int k = 0; k < 16; ++k) out[k / 8] += in[k];
    cases.push_back({"reduce (shared memory, barriers, 2 thread blocks)",
                     reduce_kernel(),
                     {2, 8},
                     {arr("in", in), arr("out", {0, 0})},
                     {in, out}});
  }
  {
    std::vector<std::int32_t> a = {5, -9, 300, 42, 7, 100000, -1, 8};
    std::vector<std::int32_t> m(11, 0);
    m[0] = INT32_MIN;
    m[9] = -5;
    std::vector<std::int32_t> want = m;
    want[0] = *std::max_element(a.begin(), a.end());
    want[1] = -5;
    for (int t = 1; t < 8; ++t) want[1 + t] = t - 1;
    want[9] = 7;
    want[10] = 1;
    cases.push_back(
        {"atomics (max, exch, cas; 2 thread blocks)", atomics_kernel(), {2, 4}, {arr("a", a), arr("m", m)}, {a, want}});
  }
  {
    std::vector<std::int32_t> in(12);
    for (int k = 0; k < 12; ++k) in[k] = 1000 * k - 3;
    std::vector<std::int32_t> sum(3);
    for (int g = 0; g < 3; ++g) sum[g] = in[4 * g] + in[4 * g + 1] + in[4 * g + 2] + in[4 * g + 3];
    cases.push_back({"shfl (width-4 shuffles)",
                     shuffle_kernel(),
                     {1, 12},
                     {arr("in", in), arr("sum", std::vector<std::int32_t>(3, 0))},
                     {in, sum}});
  }
  {
    std::vector<std::int32_t> x(8), out(8);
    for (int k = 0; k < 8; ++k) x[k] = 300 * k - 1000;
    for (int k = 0; k < 8; ++k) out[k] = x[k] + x[(k & ~3) | 2];
    cases.push_back({"shfl_add (exiting lanes write back a shuffle source)",
                     shfl_add_kernel(),
                     {1, 8},
                     {arr("x", x), arr("out", std::vector<std::int32_t>(8, 0))},
                     {x, out}});
  }
  {
    std::vector<std::int32_t> a(10), b(10), c(10, -7);
    for (int k = 0; k < 10; ++k) a[k] = k * k, b[k] = 50000 * k;
    std::vector<std::int32_t> want = c;
    for (int k = 0; k < 9; ++k) want[k] = a[k] + b[k];
    cases.push_back({"vadd (guard, 2 thread blocks)",
                     vadd_kernel(),
                     {2, 5},
                     {arr("a", a), arr("b", b), arr("c", c), scalar("n", 9)},
                     {a, b, want}});
  }
  {
    std::vector<std::int32_t> a(24), b(24);
    std::int32_t dot = 0;
    for (int k = 0; k < 24; ++k) a[k] = k - 11, b[k] = 3 * k + 1, dot += a[k] * b[k];
    cases.push_back({"dot (3 thread blocks of 8)",
                     dot_kernel(),
                     {3, 8},
                     {arr("a", a), arr("b", b), arr("out", {0}), scalar("n", 24)},
                     {a, b, {dot}}});
  }
  for (const Case& c : cases) {
    const LaunchRecords lr = check_case(c);
    ASSERT_FALSE(lr.generated.empty()) << c.name;
    EXPECT_EQ(lr.generated.back(), halt_record());
  }
}

// The shuffle sources travel as `LIVE exited` right after the blocks' LIVE rows: the mask
// here is derived from the ROM rows the prompt itself carries (decoded with isa.h), and by
// hand from the listing; without shuffles there is no such row.
TEST(Protocol, ShuffleSourcesTravelAsLiveExited) {
  auto p = lower_kernel(shuffle_kernel(), {1, 12}, {});
  ASSERT_TRUE(p) << p.status().to_string();
  std::cout << (*p)->dump();
  std::vector<std::int32_t> in(12);
  auto pr = encode_prompt(**p, {arr("in", in), arr("sum", {0, 0, 0})});
  ASSERT_TRUE(pr) << pr.status().to_string();
  std::map<std::uint32_t, std::uint64_t> rows;  // block * 8 + slot
  std::uint32_t from_rom = 0;
  std::vector<Record> live;
  for (const Record& r : *pr) {
    if (r.kind == RecordKind::kRom) rows[r.block * 8 + r.slot] |= std::uint64_t{r.values[0]} << (32 * r.half);
    if (r.kind == RecordKind::kLive) live.push_back(r);
  }
  for (const auto& [key, row] : rows) {
    Instr in_;
    ASSERT_TRUE(decode(row, in_));
    const std::string_view name = op_info(in_.op).mnemonic;
    if (name.rfind("shfl", 0) == 0 && in_.ak == Kind::kReg) from_rom |= 1u << in_.a;
  }
  ASSERT_EQ(live.size(), (*p)->blocks.size() + 1);
  for (std::size_t b = 0; b + 1 < live.size(); ++b) EXPECT_EQ(live[b].block, b);
  const Record& ex = live.back();
  EXPECT_EQ(ex.block, kLiveExited);
  EXPECT_EQ(ex.values[0], from_rom & 0xfffe);
  EXPECT_EQ(to_text(ex), "LIVE exited {r2}");  // by hand: both shfl.down read r2 (B1)
  // Every block's live-in set holds the shuffle sources too (another lane may read them).
  for (std::size_t b = 0; b + 1 < live.size(); ++b) EXPECT_EQ(live[b].values[0] & ex.values[0], ex.values[0]) << b;
  // Its two tokens sit between the last LIVE B row and the memory records.
  const auto at = std::find(pr->begin(), pr->end(), ex) - pr->begin();
  EXPECT_EQ((*pr)[at + 1].kind, RecordKind::kWmem);
  // No shuffle, no row (an unwritten row reads as the empty set).
  auto dot = lower_kernel(dot_kernel(), {1, 4}, {});
  ASSERT_TRUE(dot);
  auto dp = encode_prompt(**dot, {arr("a", {1}), arr("b", {1}), arr("out", {0}), scalar("n", 1)});
  ASSERT_TRUE(dp);
  for (const Record& r : *dp) EXPECT_FALSE(r.kind == RecordKind::kLive && r.block == kLiveExited);
  // The replay checks write-backs of exiting lanes against the row: without it they fail.
  auto sp = lower_kernel(shfl_add_kernel(), {1, 4}, {});
  ASSERT_TRUE(sp);
  auto lr = record_launch(**sp, {arr("x", {1, 2, 3, 4}), arr("out", {0, 0, 0, 0})}, {});
  ASSERT_TRUE(lr);
  const auto it = std::find_if(lr->prompt.begin(), lr->prompt.end(),
                               [](const Record& r) { return r.kind == RecordKind::kLive && r.block == kLiveExited; });
  ASSERT_NE(it, lr->prompt.end());
  for (bool drop : {false, true}) {
    std::vector<Record> prompt = lr->prompt;
    if (drop) prompt.erase(prompt.begin() + (it - lr->prompt.begin()));
    Replay replay((*sp)->rows_per_block());
    replay.begin();
    ASSERT_EQ(replay.feed(prompt, false), "");
    const std::string e = replay.feed(lr->generated, true);
    if (drop)
      EXPECT_NE(e.find("is not in LIVE exited {}"), std::string::npos) << e;
    else
      EXPECT_EQ(e, "");
  }
}

TEST(Protocol, AFaultEndsTheStreamWithFault) {
  // dot over n = 8 threads with 3-element arrays: a = words 0-2, b = 3-5, out = 6 (7 words). Warp 0's
  // loads stay inside the arrays (a[3] is b's word 3, b[3] out's word 6); warp 1's first load, b[4..7]
  // in B2 slot 1 (this kernel loads b first), reaches word 7 in lane 0 (thread 4): the first fault
  // (ISA.md §2).
  auto p = lower_kernel(dot_kernel(), {1, 8}, circuit_sizes());
  ASSERT_TRUE(p);
  const std::vector<sdk::LaunchArg> args = {arr("a", {1, 2, 3}), arr("b", {4, 5, 6}), arr("out", {0}), scalar("n", 8)};
  auto lr = record_launch(**p, args, {});
  ASSERT_TRUE(lr) << lr.status().to_string();
  auto run = interpret_program(**p, args, {});
  ASSERT_FALSE(run);
  EXPECT_EQ(lr->fault.message(), run.status().message());  // the interpreter's error, as is
  EXPECT_NE(
      lr->fault.message().find("out-of-bounds global load by thread 4 of thread block 0 (warp 1, lane 0) at B2 slot 1 "
                               "`ld r2, [r1+12]` (test.cu:17:3): byte address 28 (word 7) is outside the 7 words"),
      std::string::npos)
      << lr->fault.message();
  ASSERT_GE(lr->generated.size(), 2u);
  EXPECT_EQ(lr->generated.back(), fault_record(1, 0, FaultKind::kOutOfBounds));
  EXPECT_EQ(lr->generated[lr->generated.size() - 2], exec_record(2, 1, 0b1111));
  EXPECT_EQ(to_text(lr->generated.back()), "FAULT slot 1 lane 0 out-of-bounds");
  // The prompt's bounds: the arrays' 7 words, no shared memory.
  EXPECT_EQ(lr->prompt.at(1), bound_record(false, 7));
  EXPECT_EQ(lr->prompt.at(2), bound_record(true, 0));
  // The replay derives the same FAULT from the prompt alone, and refuses another lane's.
  for (bool tamper : {false, true}) {
    std::vector<Record> gen = lr->generated;
    if (tamper) gen.back().lane = 2;
    Replay replay((*p)->rows_per_block());
    replay.begin();
    ASSERT_EQ(replay.feed(lr->prompt, false), "");
    const std::string e = replay.feed(gen, true);
    if (tamper)
      EXPECT_NE(e.find("expected FAULT slot 1 lane 0 out-of-bounds"), std::string::npos) << e;
    else
      EXPECT_EQ(e, "");
  }
}

TEST(Protocol, BoundAndFaultFieldsOutsideTheLayout) {
  std::vector<std::int64_t> ids;
  EXPECT_EQ(append_tokens(bound_record(false, 1025), kBase, ids).message(),
            "BOUND record: words 1025 is outside the token layout (at most 1024, over by 1)");
  EXPECT_EQ(append_tokens(bound_record(true, 513), kBase, ids).message(),
            "BOUND record: words 513 is outside the token layout (at most 512, over by 1)");
  EXPECT_EQ(append_tokens(fault_record(7, 0, FaultKind::kMisaligned), kBase, ids).message(),
            "FAULT record: slot 7 is outside the token layout (at most 6, over by 1)");
  EXPECT_EQ(append_tokens(fault_record(0, 4, FaultKind::kMisaligned), kBase, ids).message(),
            "FAULT record: lane 4 is outside the token layout (at most 3, over by 1)");
  // A BOUND whose DATA names more words than the space has does not decode.
  const std::int64_t data = kBase + first_id(RecordKind::kData);
  auto r = decode_tokens(std::vector<std::int64_t>{kBase + first_id(RecordKind::kBound) + 1, data + 600}, kBase);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("BOUND shared of 600 words is past the space's 512"), std::string::npos)
      << r.status().message();
}

TEST(Protocol, ReplayCatchesAMissingWriteBack) {
  // The replay model must be able to fail: drop one register write-back from the dot stream.
  Case c{"dot", dot_kernel(), {1, 4}, {arr("a", {1, 2, 3}), arr("b", {4, 5, 6}), arr("out", {0}), scalar("n", 3)}, {}};
  auto p = lower_kernel(c.kernel, c.shape, circuit_sizes());
  ASSERT_TRUE(p);
  auto lr = record_launch(**p, c.args, {});
  ASSERT_TRUE(lr);
  auto it = std::find_if(lr->generated.begin(), lr->generated.end(),
                         [](const Record& r) { return r.kind == RecordKind::kWreg; });
  ASSERT_NE(it, lr->generated.end());
  lr->generated.erase(it);
  Replay replay((*p)->rows_per_block());
  replay.begin();
  ASSERT_EQ(replay.feed(lr->prompt, false), "");
  EXPECT_NE(replay.feed(lr->generated, true), "");
}

TEST(Protocol, LimitsOfTheTokenLayout) {
  MachineConfig cfg;
  cfg.global_words = 2048;
  auto p = lower_kernel(dot_kernel(), {1, 4}, cfg);
  ASSERT_TRUE(p);
  std::vector<std::int32_t> big(1100, 1);
  auto r = encode_prompt(**p, {arr("a", big), arr("b", {1}), arr("out", {0}), scalar("n", 1)});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(),
            "kernel 'dot': token protocol: the launch's arrays need 1102 words, the token layout addresses 1024 (over "
            "by 78)");
}

}  // namespace
}  // namespace qgpu::simt::test

namespace qgpu::simt {
namespace {

// --check's comparison: equal streams pass; the first differing token is named
// with its record, what was expected (header fields or DATA position) and what came.
TEST(Protocol, FirstMismatchNamesTokenRecordAndBothSides) {
  const std::int64_t base = kQwen35VocabRows;
  const std::vector<Record> recs = {exec_record(0, 0, 0b1111), wreg_record(0, 1, 0b0111, {4, 10, 18, 0}),
                                    exec_record(2, 0, 0b0111), halt_record()};
  auto ids = encode_tokens(recs, base);
  ASSERT_TRUE(ids);
  ASSERT_EQ(ids->size(), 6u);  // EXEC, WREG + 2 DATA (byte format: 3 values), EXEC, HALT
  EXPECT_FALSE(first_mismatch(*ids, *ids, base).has_value());

  std::vector<std::int64_t> got = *ids;
  got[3] += 1;  // the second DATA of the WREG record
  auto m = first_mismatch(*ids, got, base);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->token, 3u);
  EXPECT_EQ(m->record, 1u);
  EXPECT_EQ(m->to_string(), "token 3 (record 1): expected DATA 2 of 2 of WREG w0 r1 0b0111 byte: DATA 0x0012 (id " +
                                std::to_string((*ids)[3]) + "), got DATA 0x0013 (id " + std::to_string(got[3]) + ")");

  got = *ids;
  got[4] = base + first_id(RecordKind::kExec) + 1;  // EXEC B0 w0 0b0010 instead of EXEC B2 w0 0b0111
  m = first_mismatch(*ids, got, base);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->record, 2u);
  EXPECT_NE(m->to_string().find("expected EXEC B2 w0 0b0111 (id"), std::string::npos) << m->to_string();
  EXPECT_NE(m->to_string().find("got EXEC B0 w0 0b0010 (id"), std::string::npos) << m->to_string();

  // A stream cut short, one that runs on, and a text token inside a launch.
  got.assign(ids->begin(), ids->begin() + 5);
  m = first_mismatch(*ids, got, base);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->token, 5u);
  EXPECT_NE(m->got.find("nothing (the stream ended)"), std::string::npos);
  got = *ids;
  got.push_back(base);
  m = first_mismatch(*ids, got, base);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->expected, "the end of the stream");
  got = *ids;
  got[0] = 17;
  m = first_mismatch(*ids, got, base);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->got, "a text token (id 17)");
}

}  // namespace
}  // namespace qgpu::simt
