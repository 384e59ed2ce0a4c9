#include "records.h"

#include <bit>
#include <optional>

#include "names.h"
#include "qgpu/weights/numerics.h"

namespace qgpu::simt::circuit {
namespace {

using weights::Neuron;

constexpr int kBlockBits = kProtoBlockBits;
constexpr int kWarpBits = 3;   // log2(kProtoWarps)
constexpr int kRowBits = 7;    // ROM / LIVE block or WREG register | warp << 4
constexpr int kWmemRowBits = kProtoWordBits - 2;  // a WMEM record's first row: word >> 2
static_assert(kWmemRowBits == kRowBits + 1, "a WMEM row is rec.row and one more bit (wmem.row7)");
static_assert(kBlockBits <= kRowBits);
constexpr double kK = weights::kGain;
static_assert(kProtoBlocks == 1 << kBlockBits && kProtoWarps == 1 << kWarpBits);
static_assert(kProtoRegisters == 16 && kProtoLanes == 4);

void append(Word& w, const Word& x) {
  w.insert(w.end(), x.begin(), x.end());
}

// Lane roles of a WREG record's DATA tokens (docs/PROTOCOL.md §3.1/§3.2): lane
// masks per DATA position p = 1..3 (index p - 1).
struct WregPlan {
  std::array<unsigned, 3> lo{}, hi{};
  unsigned byte = 0;  // bit p-1: byte format with a DATA p
  unsigned word = 0;  // word format (one lane, completed at DATA 2)
  unsigned zero = 0;  // zero format: the lanes the header itself clears
};

WregPlan wreg_plan(const Record& r) {
  WregPlan p;
  int rank = 0;
  for (int l = 0; l < kProtoLanes; ++l) {
    if (!((r.lanes >> l) & 1)) continue;
    switch (r.format) {
      case ValueFormat::kZero: p.zero |= 1u << l; break;
      case ValueFormat::kByte:  // ranks 2i and 2i+1 in DATA i+1 (low, high byte)
        if (rank < 6) (rank % 2 ? p.hi : p.lo)[rank / 2] |= 1u << l, p.byte |= 1u << (rank / 2);
        break;
      case ValueFormat::kHalf:  // rank i in DATA i+1
        if (rank < 3) p.lo[rank] |= 1u << l;
        break;
      case ValueFormat::kWord:  // DATA 1 low, DATA 2 high (more lanes: a reserved row)
        if (rank == 0) p.lo[1] |= 1u << l, p.word = 1;
        break;
    }
    ++rank;
  }
  return p;
}

// Bank roles of a WMEM record's DATA tokens (docs/PROTOCOL.md §3.1): word i lives in bank
// (a + i) & 3 at row (a + i) >> 2, i.e. the record's first row + 1 where (a & 3) + i >= 4.
struct WmemPlan {
  std::array<unsigned, 3> lo{}, hi{};  // per DATA position: the bank whose low byte / half / word, high byte completes
  unsigned byte = 0;                   // bit p-1: byte format with a DATA p
  unsigned word = 0;                   // word format (one word, completed at DATA 2)
  unsigned zero = 0;                   // zero format: the banks the header itself clears
  unsigned wrap = 0;                   // banks written at the record's first row + 1
};

WmemPlan wmem_plan(const Record& r) {
  WmemPlan p;
  for (std::uint32_t i = 0; i < r.count && i < static_cast<std::uint32_t>(kProtoRunWords); ++i) {
    const unsigned bank = 1u << ((r.word + i) & 3);
    if ((r.word & 3) + i >= 4) p.wrap |= bank;
    switch (r.format) {
      case ValueFormat::kZero: p.zero |= bank; break;
      case ValueFormat::kByte:  // words 2i and 2i+1 in DATA i+1 (low, high byte)
        if (i < 6) (i % 2 ? p.hi : p.lo)[i / 2] |= bank, p.byte |= 1u << (i / 2);
        break;
      case ValueFormat::kHalf:
        if (i < 3) p.lo[i] |= bank;
        break;
      case ValueFormat::kWord:  // DATA 1 low, DATA 2 high (more words: a reserved row)
        if (i == 0) p.lo[1] |= bank, p.word = 1;
        break;
    }
  }
  return p;
}

// The bits of lane mask `m` that lie in `lanes`, packed (lane order); an error if
// some lane of m has no bit there (a row the layout cannot hold; never for a
// non-reserved row).
sdk::Expected<std::uint64_t> pack_lanes(unsigned m, unsigned lanes, const char* what) {
  if (m & ~lanes)
    return sdk::internal_error(std::string("WREG plan: lane mask ") + std::to_string(m) + " has no " + what + " bit");
  std::uint64_t v = 0;
  int k = 0;
  for (int l = 0; l < kProtoLanes; ++l)
    if ((lanes >> l) & 1) v |= std::uint64_t{(m >> l) & 1u} << k++;
  return v;
}

// The bit of lane l in a field over `lanes` (packed), if it has one.
std::optional<Bit> lane_bit(const Word& field, unsigned lanes, int l) {
  if (!((lanes >> l) & 1)) return std::nullopt;
  return field[static_cast<std::size_t>(std::popcount(lanes & ((1u << l) - 1)))];
}

std::string kind_text(const Record& r) {
  std::string s = to_text(r);
  // Header ids carry no payload: drop to_text's values (WREG / WMEM list, ROM half).
  if (r.kind == RecordKind::kWreg || r.kind == RecordKind::kWmem) s = s.substr(0, s.find(" ["));
  if (r.kind == RecordKind::kRom) s = s.substr(0, s.find(" 0x"));
  return s;
}

// A neuron K·[2·Σ terms + c ≥ 1]·up: the gate is 2K·Σ terms + c·K, so with an integer
// Σ it is exactly K (silu → K) where 2Σ + c = 1 and at most -K (silu → -0) below.
Neuron gated(const std::vector<Term>& terms, double c, Affine up, Bit out) {
  Affine g;
  for (const Term& t : terms) g.terms.push_back(Term{t.bit, 2 * kK * t.weight});
  g.bias = c * kK + 0.0;
  return Neuron{std::move(g), std::move(up), {Term{out, 1 / kK}}};
}

Affine up_bit(Bit b) {
  return Affine{{Term{b, 1}}, 0};
}
const Affine kUpOne{{}, 1};

}  // namespace

sdk::Expected<Word> Records::add_header_field(Circuit& c, RecordKind kind, const std::string& owner,
                                              const std::string& name, int width,
                                              std::function<sdk::Expected<std::uint64_t>(const Record&)> value) {
  auto w = c.input(owner, name, width);
  if (!w) return w.status();
  bind(kind, *w, std::move(value));
  return w;
}

void Records::bind(RecordKind kind, const Word& word,
                   std::function<sdk::Expected<std::uint64_t>(const Record&)> value) {
  header_fields.push_back(HeaderField{kind, word, std::move(value)});
}

void Records::check(RecordKind kind, std::function<sdk::Status(const Record&)> fn) {
  header_fields.push_back(
      HeaderField{kind, Word{}, [fn = std::move(fn)](const Record& r) -> sdk::Expected<std::uint64_t> {
                    QGPU_RETURN_IF_ERROR(fn(r));
                    return 0;
                  }});
}

sdk::Expected<Records> build_records(Circuit& c, int rom_slots, std::int64_t base) {
  if (rom_slots < 1 || rom_slots > kProtoRowsPerBlock)
    return sdk::invalid_argument("records: " + std::to_string(rom_slots) +
                                 " ROM slots per block, the protocol holds 1.." + std::to_string(kProtoRowsPerBlock));
  Records rec;
  rec.base = base;
  rec.rom_slots = rom_slots;
  using Value = std::function<sdk::Expected<std::uint64_t>(const Record&)>;
  auto in = [&](const std::string& owner, const std::string& name, int width, Word& out) -> sdk::Status {
    auto w = c.input(owner, name, width);
    if (!w) return w.status();
    out = std::move(*w);
    return sdk::Status::ok();
  };
  auto field = [&](RecordKind kind, const std::string& owner, const std::string& name, int width, Word& out,
                   Value v) -> sdk::Status {
    auto w = rec.add_header_field(c, kind, owner, name, width, std::move(v));
    if (!w) return w.status();
    out = std::move(*w);
    return sdk::Status::ok();
  };
  // --- The embedding: DATA payload, the shared row, ROM, EXEC and WREG header fields.
  QGPU_RETURN_IF_ERROR(in("data", "is", 1, rec.data_is));
  QGPU_RETURN_IF_ERROR(in("data", "value", kDataBits, rec.data_value));
  QGPU_RETURN_IF_ERROR(field(RecordKind::kRom, "rec", "row", kRowBits, rec.row,
                             [](const Record& r) -> sdk::Expected<std::uint64_t> { return r.block; }));
  rec.bind(RecordKind::kWreg, rec.row,
           [](const Record& r) -> sdk::Expected<std::uint64_t> { return r.reg | (r.warp << 4); });
  QGPU_RETURN_IF_ERROR(field(RecordKind::kRom, "rom", "select", 2 * rom_slots, rec.rom_select,
                             [rom_slots](const Record& r) -> sdk::Expected<std::uint64_t> {
                               if (r.slot >= static_cast<std::uint32_t>(rom_slots))
                                 return sdk::invalid_argument(kind_text(r) + ": slot " + std::to_string(r.slot) +
                                                              " outside the circuit's " + std::to_string(rom_slots) +
                                                              " slots per block");
                               return std::uint64_t{1} << (2 * r.slot + r.half);
                             }));
  auto one = [](const Record&) -> sdk::Expected<std::uint64_t> { return 1; };
  QGPU_RETURN_IF_ERROR(field(RecordKind::kExec, "exec", "is", 1, rec.exec_is, one));
  QGPU_RETURN_IF_ERROR(field(RecordKind::kExec, "exec", "block", kBlockBits, rec.exec_block,
                             [](const Record& r) -> sdk::Expected<std::uint64_t> { return r.block; }));
  QGPU_RETURN_IF_ERROR(field(RecordKind::kExec, "exec", "warp", kWarpBits, rec.exec_warp,
                             [](const Record& r) -> sdk::Expected<std::uint64_t> { return r.warp; }));
  QGPU_RETURN_IF_ERROR(field(RecordKind::kExec, "exec", "lanes", kProtoLanes, rec.exec_lanes,
                             [](const Record& r) -> sdk::Expected<std::uint64_t> { return r.lanes; }));
  QGPU_RETURN_IF_ERROR(field(RecordKind::kWreg, "wreg", "zero", kProtoLanes, rec.wreg_zero,
                             [](const Record& r) -> sdk::Expected<std::uint64_t> { return wreg_plan(r).zero; }));
  for (int p = 0; p < 3; ++p) {
    const std::string n = std::to_string(p + 1);
    const unsigned lo_lanes = kWregLoLanes[static_cast<std::size_t>(p)];
    const unsigned hi_lanes = kWregHiLanes[static_cast<std::size_t>(p)];
    QGPU_RETURN_IF_ERROR(
        field(RecordKind::kWreg, "wreg", "lo" + n, std::popcount(lo_lanes), rec.wreg_lo[p],
              [p, lo_lanes](const Record& r) { return pack_lanes(wreg_plan(r).lo[p], lo_lanes, "lo"); }));
    if (hi_lanes != 0)
      QGPU_RETURN_IF_ERROR(
          field(RecordKind::kWreg, "wreg", "hi" + n, std::popcount(hi_lanes), rec.wreg_hi[p],
                [p, hi_lanes](const Record& r) { return pack_lanes(wreg_plan(r).hi[p], hi_lanes, "hi"); }));
  }
  QGPU_RETURN_IF_ERROR(field(RecordKind::kWreg, "wreg", "byte", 2, rec.wreg_byte,
                             [](const Record& r) -> sdk::Expected<std::uint64_t> { return wreg_plan(r).byte; }));
  QGPU_RETURN_IF_ERROR(field(RecordKind::kWreg, "wreg", "word", 1, rec.wreg_word,
                             [](const Record& r) -> sdk::Expected<std::uint64_t> { return wreg_plan(r).word; }));

  // --- Layer 0's Gated DeltaNet: one previous() read per lag, each at most 32 bits (one head).
  // lag 1: row | DATA payload | lo1 | hi1 | byte(1);  lag 2: row | rom.select | lo2 | hi2 | byte(2) | word;
  // lag 3: row | lo3.
  std::array<Word, 3> src;
  for (Word& s : src) s = rec.row;
  append(src[0], rec.data_value);
  append(src[1], rec.rom_select);
  for (int p = 0; p < 3; ++p) {
    append(src[p], rec.wreg_lo[p]);
    append(src[p], rec.wreg_hi[p]);
  }
  src[0].push_back(rec.wreg_byte[0]);
  src[1].push_back(rec.wreg_byte[1]);
  src[1].push_back(rec.wreg_word[0]);
  for (int p = 0; p < 3; ++p) {
    auto w = c.previous("lag" + std::to_string(p + 1), src[p], p + 1, std::nullopt);
    if (!w) return w.status();
    rec.window[p] = std::move(*w);
  }
  // Views of the window, at the offsets above.
  const Word& w1 = rec.window[0];
  const Word& w2 = rec.window[1];
  const Word d1 = slice(w1, kRowBits, kDataBits);  // the DATA payload at lag 1
  std::array<Word, 3> lo, hi;
  std::array<int, 3> off = {kRowBits + kDataBits, kRowBits + 2 * rom_slots, kRowBits};
  for (int p = 0; p < 3; ++p) {
    const Word& w = rec.window[p];
    const int nlo = static_cast<int>(rec.wreg_lo[p].size()), nhi = static_cast<int>(rec.wreg_hi[p].size());
    lo[p] = slice(w, off[p], nlo);
    hi[p] = slice(w, off[p] + nlo, nhi);
    off[p] += nlo + nhi;
  }
  const Bit byte1 = w1[static_cast<std::size_t>(off[0])];
  const Bit byte2 = w2[static_cast<std::size_t>(off[1])];
  const Bit word2 = w2[static_cast<std::size_t>(off[1] + 1)];

  // --- ROM: written at DATA 2 (the header at lag 2); no neurons.
  rec.rom.row = slice(w2, 0, kBlockBits);
  rec.rom.select = slice(w2, kRowBits, 2 * rom_slots);
  rec.rom.data = d1;
  append(rec.rom.data, rec.data_value);

  // --- WREG: layer 0's MLP. Only the live header of the window (the one whose DATA the current
  // token is) has nonzero role bits, and the current token's own zero-format mask excludes them,
  // so sums of role bits over lags are 0 or 1: each neuron's gate 2K·Σ + c·K is exactly K or ≤ -K.
  auto row = c.computed("wreg", "write_row", kRowBits);
  if (!row) return row.status();
  auto enable = c.computed("wreg", "write_enable", kProtoLanes);
  if (!enable) return enable.status();
  rec.wreg.row = *row;
  rec.wreg.enable = *enable;
  weights::MlpOp op;
  const Word& cur = rec.data_value;
  for (int j = 0; j < kRowBits; ++j) {
    // The row: the current header's (zero format; 0 on DATA tokens) or the live lag's.
    op.neurons.push_back(gated({Term{rec.row[j], 1}}, -1, kUpOne, (*row)[j]));
    for (int p = 0; p < 3; ++p) {
      std::vector<Term> any;  // lo is one-hot at the position where some lane completes
      for (const Bit& b : lo[p]) any.push_back(Term{b, 1});
      op.neurons.push_back(gated(any, -1, up_bit(rec.window[p][j]), (*row)[j]));
    }
  }
  for (int l = 0; l < kProtoLanes; ++l) {
    auto v = c.computed("wreg", "lane" + std::to_string(l), 32);
    if (!v) return v.status();
    rec.wreg.value[l] = *v;
    std::vector<Term> L, H;  // lane l's lo / hi role at the live position
    for (int p = 0; p < 3; ++p) {
      if (auto b = lane_bit(lo[p], kWregLoLanes[p], l)) L.push_back(Term{*b, 1});
      if (auto b = lane_bit(hi[p], kWregHiLanes[p], l)) H.push_back(Term{*b, 1});
    }
    auto with = [](std::vector<Term> t, std::initializer_list<Term> more) {
      t.insert(t.end(), more);
      return t;
    };
    // Write enable: lo, hi, or a zero-format header's lane.
    std::vector<Term> we = L;
    we.insert(we.end(), H.begin(), H.end());
    we.push_back(Term{rec.wreg_zero[l], 1});
    op.neurons.push_back(gated(we, -1, kUpOne, (*enable)[l]));
    const std::vector<Term> lo_not_word = with(L, {Term{word2, -1}});             // byte or half
    const std::vector<Term> lo_word = with(L, {Term{word2, 1}});                  // Σ = 2
    const std::vector<Term> lo_byte = with(L, {Term{byte1, 1}, Term{byte2, 1}});  // Σ = 2
    const std::vector<Term> lo_half = with(L, {Term{byte1, -1}, Term{byte2, -1}, Term{word2, -1}});
    for (int j = 0; j < 32; ++j) {
      const Bit out = (*v)[j];
      if (j < 8) op.neurons.push_back(gated(lo_not_word, -1, up_bit(cur[j]), out));              // low byte / half
      if (!H.empty()) op.neurons.push_back(gated(H, -1, up_bit(cur[j < 8 ? 8 + j : 15]), out));  // high byte
      op.neurons.push_back(gated(lo_word, -3, up_bit(j < 16 ? d1[j] : cur[j - 16]), out));       // word
      if (j >= 8) {
        op.neurons.push_back(gated(lo_byte, -3, up_bit(cur[7]), out));                // byte sign
        op.neurons.push_back(gated(lo_half, -1, up_bit(cur[j < 16 ? j : 15]), out));  // half
      }
    }
  }
  // Off on EXEC tokens (where every role is 0 anyway): the write fields are then exactly
  // 0 there and may share channels with EXEC-only fields (Circuit::declare_mode_bit).
  c.push_enable(!rec.exec_is[0]);
  sdk::Status st = c.add_mlp("wreg.write", std::move(op));
  c.pop_enable();
  QGPU_RETURN_IF_ERROR(st);
  return rec;
}

sdk::Expected<WmemWrite> build_wmem_write(Circuit& c, Records& rec) {
  using Value = std::function<sdk::Expected<std::uint64_t>(const Record&)>;
  auto field = [&](const std::string& name, int width, Value v) -> sdk::Expected<Word> {
    return rec.add_header_field(c, RecordKind::kWmem, "wmem", name, width, std::move(v));
  };
  auto plan = [](unsigned WmemPlan::*m) {
    return [m](const Record& r) -> sdk::Expected<std::uint64_t> { return wmem_plan(r).*m; };
  };
  // The record's first row shares rec.row (a token is one kind).
  // Its bits 0-6, that is: a global word from 512 on has the row's bit 7 in a field of its own.
  rec.bind(RecordKind::kWmem, rec.row,
           [](const Record& r) -> sdk::Expected<std::uint64_t> { return (r.word >> 2) & ((1u << kRowBits) - 1); });
  auto row7 = field("row7", 1, [](const Record& r) -> sdk::Expected<std::uint64_t> { return r.word >> (kRowBits + 2); });
  auto shared = field("shared", 1, [](const Record& r) -> sdk::Expected<std::uint64_t> { return r.shared ? 1 : 0; });
  auto wrap = field("wrap", kProtoLanes, plan(&WmemPlan::wrap));
  auto zero = field("zero", kProtoLanes, plan(&WmemPlan::zero));
  auto byte = field("byte", 2, plan(&WmemPlan::byte));
  auto word = field("word", 1, plan(&WmemPlan::word));
  for (const auto* f : {&row7, &shared, &wrap, &zero, &byte, &word})
    if (!*f) return f->status();
  std::array<Word, 3> lo_in, hi_in;
  for (int p = 0; p < 3; ++p) {
    const std::string n = std::to_string(p + 1);
    auto lo = field("lo" + n, kProtoLanes, [p](const Record& r) -> sdk::Expected<std::uint64_t> {
      return wmem_plan(r).lo[static_cast<std::size_t>(p)];
    });
    if (!lo) return lo.status();
    lo_in[p] = *lo;
    if (p < 2) {
      auto hi = field("hi" + n, kProtoLanes, [p](const Record& r) -> sdk::Expected<std::uint64_t> {
        return wmem_plan(r).hi[static_cast<std::size_t>(p)];
      });
      if (!hi) return hi.status();
      hi_in[p] = *hi;
    }
  }
  // --- Layer 0's Gated DeltaNet: per lag p, lo_p | hi_p | wrap | shared | byte(p) | word(2) | row7:
  // 15, 16 and 10 bits (one head each). The first row is rec.row in the records' window and row7.
  struct Lag {
    Word lo, hi, wrap, row;
    Bit shared;
  };
  std::array<Lag, 4> at;  // at[0]: the current token (a zero-format header); at[p]: lag p
  at[0] = Lag{*zero, {}, *wrap, concat(rec.row, *row7), (*shared)[0]};
  Bit byte1{}, byte2{}, word2{};
  for (int p = 0; p < 3; ++p) {
    Word src = lo_in[p];
    append(src, hi_in[p]);
    append(src, *wrap);
    src.push_back((*shared)[0]);
    if (p < 2) src.push_back((*byte)[p]);
    if (p == 1) src.push_back((*word)[0]);
    src.push_back((*row7)[0]);
    auto w = c.previous("wmem.lag" + std::to_string(p + 1), src, p + 1, std::nullopt);
    if (!w) return w.status();
    const int nhi = static_cast<int>(hi_in[p].size());
    Lag& l = at[p + 1];
    l.lo = slice(*w, 0, kProtoLanes);
    l.hi = slice(*w, kProtoLanes, nhi);
    l.wrap = slice(*w, kProtoLanes + nhi, kProtoLanes);
    l.shared = (*w)[static_cast<std::size_t>(2 * kProtoLanes + nhi)];
    l.row = slice(rec.window[p], 0, kRowBits);
    l.row.push_back(w->back());
    const std::size_t flags = static_cast<std::size_t>(2 * kProtoLanes + nhi + 1);
    if (p == 0) byte1 = (*w)[flags];
    if (p == 1) byte2 = (*w)[flags], word2 = (*w)[flags + 1];
  }

  // --- Layer 0's MLP. Only the live header (the current zero-format one, or the one whose
  // DATA the current token is) has nonzero roles, so role sums over positions are 0 or 1.
  WmemWrite out;
  auto en = c.computed("wmem", "write_enable", 2 * kProtoLanes);
  auto ben = c.computed("wmem", "bank_enable", kProtoLanes);
  if (!en || !ben) return sdk::invalid_argument("wmem: the write fields are declared twice (one per circuit)");
  out.enable = *en;
  out.bank_enable = *ben;
  weights::MlpOp op;
  const Word& cur = rec.data_value;
  const Word d1 = slice(rec.window[0], kRowBits, kDataBits);  // the DATA payload at lag 1
  for (int b = 0; b < kProtoLanes; ++b) {
    auto row = c.computed("wmem", "row" + std::to_string(b), kWmemRowBits + 1);
    auto val = c.computed("wmem", "value" + std::to_string(b), 32);
    if (!row || !val) return sdk::invalid_argument("wmem: the write fields are declared twice (one per circuit)");
    out.row[b] = *row;
    out.value[b] = *val;
    std::vector<Term> any;  // every role of bank b at every position (0 or 1 in a valid stream)
    std::vector<Term> L, H;
    for (int p = 0; p < 4; ++p) {
      const Lag& l = at[static_cast<std::size_t>(p)];
      std::vector<Term> role{Term{l.lo[b], 1}};
      if (!l.hi.empty()) role.push_back(Term{l.hi[b], 1});
      any.insert(any.end(), role.begin(), role.end());
      if (p > 0) {
        L.push_back(Term{l.lo[b], 1});
        if (!l.hi.empty()) H.push_back(Term{l.hi[b], 1});
      }
      auto with = [&](std::vector<Term> t) {
        t.insert(t.begin(), role.begin(), role.end());
        return t;
      };
      // Enables per space, and the row: the record's first row, + 1 where the bank wraps
      // (bit j flips when bits 0..j-1 are all 1).
      for (int s = 0; s < 2; ++s)
        op.neurons.push_back(gated(with({Term{s ? l.shared : !l.shared, 1}}), -3, kUpOne,
                                   out.enable[static_cast<std::size_t>(s * 4 + b)]));
      for (int j = 0; j < kWmemRowBits; ++j) {
        op.neurons.push_back(gated(role, -1, up_bit(l.row[j]), (*row)[j]));
        std::vector<Term> carry{Term{l.wrap[b], 1}};
        for (int k = 0; k < j; ++k) carry.push_back(Term{l.row[k], 1});
        op.neurons.push_back(gated(with(carry), 1 - 2 * (2 + j), Affine{{Term{l.row[j], -2}}, 1}, (*row)[j]));
      }
      op.neurons.push_back(gated(with({Term{l.shared, 1}}), -3, kUpOne, (*row)[kWmemRowBits]));
    }
    op.neurons.push_back(gated(any, -1, kUpOne, out.bank_enable[b]));
    // The value, as for a WREG lane (records' layer 0 MLP): low byte / half, high byte,
    // word, byte sign, half sign.
    auto with = [](std::vector<Term> t, std::initializer_list<Term> more) {
      t.insert(t.end(), more);
      return t;
    };
    const std::vector<Term> lo_not_word = with(L, {Term{word2, -1}});
    const std::vector<Term> lo_word = with(L, {Term{word2, 1}});
    const std::vector<Term> lo_byte = with(L, {Term{byte1, 1}, Term{byte2, 1}});
    const std::vector<Term> lo_half = with(L, {Term{byte1, -1}, Term{byte2, -1}, Term{word2, -1}});
    for (int j = 0; j < 32; ++j) {
      const Bit o = (*val)[j];
      if (j < 8) op.neurons.push_back(gated(lo_not_word, -1, up_bit(cur[j]), o));
      op.neurons.push_back(gated(H, -1, up_bit(cur[j < 8 ? 8 + j : 15]), o));
      op.neurons.push_back(gated(lo_word, -3, up_bit(j < 16 ? d1[j] : cur[j - 16]), o));
      if (j >= 8) {
        op.neurons.push_back(gated(lo_byte, -3, up_bit(cur[7]), o));
        op.neurons.push_back(gated(lo_half, -1, up_bit(cur[j < 16 ? j : 15]), o));
      }
    }
  }
  // Off on EXEC tokens, as the register write (build_records).
  c.push_enable(!rec.exec_is[0]);
  sdk::Status st = c.add_mlp("wmem.write", std::move(op));
  c.pop_enable();
  QGPU_RETURN_IF_ERROR(st);
  return out;
}

namespace {
// A 1-bit header field of `kind` read back at lag 1 (its own head).
sdk::Expected<Bit> lag1_flag(Circuit& c, Records& rec, RecordKind kind, const std::string& owner) {
  auto is =
      rec.add_header_field(c, kind, owner, "is", 1, [](const Record&) -> sdk::Expected<std::uint64_t> { return 1; });
  if (!is) return is.status();
  auto w = c.previous(owner + ".lag1", *is, 1, std::nullopt);
  if (!w) return w.status();
  return (*w)[0];
}
}  // namespace

sdk::Expected<LaunchWrite> build_launch_write(Circuit& c, Records& rec) {
  auto en = lag1_flag(c, rec, RecordKind::kLaunch, "launch");
  if (!en) return en.status();
  return LaunchWrite{*en, slice(rec.data_value, 0, 6), slice(rec.data_value, 8, 8)};
}

sdk::Expected<LiveWrite> build_live_write(Circuit& c, Records& rec) {
  // live.is: bit 0 on `LIVE B` headers, bit 1 on `LIVE exited`; both read back by one head.
  auto is = rec.add_header_field(
      c, RecordKind::kLive, "live", "is", 2,
      [](const Record& r) -> sdk::Expected<std::uint64_t> { return r.block == kLiveExited ? 2 : 1; });
  if (!is) return is.status();
  auto lag1 = c.previous("live.lag1", *is, 1, std::nullopt);
  if (!lag1) return lag1.status();
  rec.bind(RecordKind::kLive, rec.row,
           [](const Record& r) -> sdk::Expected<std::uint64_t> { return r.block == kLiveExited ? 0 : r.block; });
  return LiveWrite{(*lag1)[0], (*lag1)[1], slice(rec.window[0], 0, kBlockBits), rec.data_value};
}

sdk::Expected<BoundWrite> build_bound_write(Circuit& c, Records& rec) {
  auto is = rec.add_header_field(c, RecordKind::kBound, "bound", "is", 2,
                                 [](const Record& r) -> sdk::Expected<std::uint64_t> { return r.shared ? 3 : 1; });
  if (!is) return is.status();
  auto lag1 = c.previous("bound.lag1", *is, 1, std::nullopt);
  if (!lag1) return lag1.status();
  return BoundWrite{(*lag1)[0], (*lag1)[1], slice(rec.data_value, 0, kProtoWordBits + 1)};
}

sdk::Expected<Record> record_of_token(std::int64_t id, std::int64_t base) {
  const std::string where = "token id " + std::to_string(id);
  const std::int64_t end = base + vocabulary_rows();
  if (id < base)
    return sdk::invalid_argument(where + " is a base-vocabulary (text) token, not a machine record (records start at " +
                                 std::to_string(base) + ")");
  if (id >= end)
    return sdk::invalid_argument(where + " is past the machine's rows (" + std::to_string(base) + " + " +
                                 std::to_string(vocabulary_rows()) + ", over by " + std::to_string(id - end + 1) + ")");
  auto rec = token_record(id - base);  // protocol.h: the row's kind and header fields
  if (!rec) return sdk::invalid_argument(where + ": " + rec.status().message());
  const Record& r = *rec;
  if (data_tokens(r) > kMaxDataTokens)
    return sdk::invalid_argument(where + " is " + kind_text(r) + ", which would need " +
                                 std::to_string(data_tokens(r)) + " DATA tokens (at most " +
                                 std::to_string(kMaxDataTokens) + "; a reserved row)");
  return r;
}

sdk::Expected<TokenInputs> token_inputs(const Records& rec, std::int64_t id) {
  auto r = record_of_token(id, rec.base);
  if (!r) return r.status();
  TokenInputs v;
  if (r->kind == RecordKind::kData) {
    v.emplace_back(rec.data_is, 1);
    v.emplace_back(rec.data_value, r->data);
    return v;
  }
  for (const HeaderField& f : rec.header_fields) {
    if (f.kind != r->kind) continue;
    auto x = f.value(*r);
    if (!x) return x.status().with_context("token id " + std::to_string(id));
    if (!f.word.empty()) v.emplace_back(f.word, *x);
  }
  return v;
}

sdk::Expected<std::vector<std::int64_t>> record_token_ids(const Records& rec, const Record& record) {
  std::vector<std::int64_t> ids;
  QGPU_RETURN_IF_ERROR(append_tokens(record, rec.base, ids));
  return ids;
}

sdk::Expected<std::vector<TokenInputs>> record_inputs(const Records& rec, const Record& record) {
  auto ids = record_token_ids(rec, record);
  if (!ids) return ids.status();
  std::vector<TokenInputs> out;
  for (std::int64_t id : *ids) {
    auto v = token_inputs(rec, id);
    if (!v) return v.status();
    out.push_back(std::move(*v));
  }
  return out;
}

}  // namespace qgpu::simt::circuit
