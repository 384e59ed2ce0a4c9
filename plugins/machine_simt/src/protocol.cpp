#include "protocol.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <sstream>

namespace qgpu::simt {
namespace {

constexpr int kMasks = 15;        // non-empty lane masks
constexpr int kSchedStates = 97;  // running x32, barrier even x32, barrier odd x32, exited
constexpr int kFormats = 4;

// clang-format off
constexpr std::array<std::int64_t, kRecordKinds> kRows = {
    1,                                                        // HALT
    1,                                                        // RUN
    1,                                                        // SYNC
    1,                                                        // LAUNCH
    kProtoCtas,                                               // CTA
    kProtoBlocks * kProtoWarps * kMasks,                      // EXEC
    kSchedStates * kProtoWarps * kMasks,                      // SCHED
    kProtoWarps * (kProtoRegisters - 1) * kMasks * kFormats,  // WREG
    2 * kProtoWords * kProtoRunWords * kFormats,              // WMEM
    kProtoBlocks * kProtoRowsPerBlock * 2,                    // ROM (two halves per row)
    kProtoBlocks + 1,                                         // LIVE (blocks, then exited)
    std::int64_t{1} << kDataBits,                             // DATA
};
// clang-format on

constexpr std::array<const char*, kRecordKinds> kNames = {"HALT",  "RUN",  "SYNC", "LAUNCH", "CTA",  "EXEC",
                                                          "SCHED", "WREG", "WMEM", "ROM",    "LIVE", "DATA"};

constexpr std::array<const char*, 4> kFormatNames = {"zero", "byte", "half", "word"};
constexpr std::array<const char*, 4> kStatusNames = {"running", "exited", "barrier.even", "barrier.odd"};


// Registers an instruction reads (bit r; r0 excluded).
std::uint32_t uses_of(const Instr& in) {
  std::uint32_t m = 0;
  auto reg = [&](std::uint8_t r) { m |= 1u << r; };
  switch (op_info(in.op).format) {
    case kFmtDA:
    case kFmtShfl:
    case kFmtDAB:
    case kFmtDABC:
      if (in.ak == Kind::kReg) reg(in.a);
      if (op_info(in.op).format != kFmtDA && in.bk == Kind::kReg) reg(in.b);
      if (op_info(in.op).format == kFmtDABC) reg(in.c);
      break;
    case kFmtLoad: reg(in.a); break;
    case kFmtStore:
    case kFmtAtom: reg(in.a), reg(in.b); break;
    case kFmtCas: reg(in.a), reg(in.b), reg(in.c); break;
    case kFmtBrc: reg(in.a); break;
    default: break;
  }
  return m & ~1u;
}

std::int32_t sext(std::uint32_t v, int bits) {
  const std::uint32_t sign = 1u << (bits - 1);
  v &= (bits == 32 ? 0xffffffffu : (1u << bits) - 1);
  return static_cast<std::int32_t>((v ^ sign) - sign);
}

std::vector<std::uint32_t> payload_values(const Record& r) {
  std::vector<std::uint32_t> v;
  if (r.kind == RecordKind::kWreg) {
    for (int l = 0; l < kProtoLanes; ++l)
      if ((r.lanes >> l) & 1) v.push_back(r.values[l]);
  } else if (r.kind == RecordKind::kWmem) {
    for (std::uint32_t i = 0; i < r.count && i < 4; ++i) v.push_back(r.values[i]);
  }
  return v;
}

int data_for(ValueFormat f, int n) {
  switch (f) {
    case ValueFormat::kZero: return 0;
    case ValueFormat::kByte: return (n + 1) / 2;
    case ValueFormat::kHalf: return n;
    case ValueFormat::kWord: return 2 * n;
  }
  return 0;
}

sdk::Status field_error(const Record& r, const std::string& field, std::int64_t value, std::int64_t limit) {
  return sdk::invalid_argument(std::string(kNames[static_cast<int>(r.kind)]) + " record: " + field + " " +
                               std::to_string(value) + " is outside the token layout (at most " +
                               std::to_string(limit) + ", over by " + std::to_string(value - limit) + ")");
}

}  // namespace

// ---------------------------------------------------------------------------- records

Record halt_record() {
  return Record{};
}
Record run_record() {
  Record r;
  r.kind = RecordKind::kRun;
  return r;
}
Record sync_record() {
  Record r;
  r.kind = RecordKind::kSync;
  return r;
}
Record launch_record(std::uint32_t threads, std::uint32_t grid) {
  Record r;
  r.kind = RecordKind::kLaunch;
  r.threads = threads;
  r.grid = grid;
  return r;
}
Record cta_record(std::uint32_t cta) {
  Record r;
  r.kind = RecordKind::kCta;
  r.cta = cta;
  return r;
}
Record exec_record(std::uint32_t block, std::uint32_t warp, std::uint32_t lanes) {
  Record r;
  r.kind = RecordKind::kExec;
  r.block = block;
  r.warp = warp;
  r.lanes = lanes;
  return r;
}
Record sched_record(std::uint32_t warp, std::uint32_t lanes, LaneStatus status, std::uint32_t block) {
  Record r;
  r.kind = RecordKind::kSched;
  r.warp = warp;
  r.lanes = lanes;
  r.status = status;
  r.block = status == LaneStatus::kExited ? 0 : block;
  return r;
}
Record wreg_record(std::uint32_t warp, std::uint32_t reg, std::uint32_t lanes,
                   const std::array<std::uint32_t, 4>& values) {
  Record r;
  r.kind = RecordKind::kWreg;
  r.warp = warp;
  r.reg = reg;
  r.lanes = lanes;
  for (int l = 0; l < kProtoLanes; ++l)
    if ((lanes >> l) & 1) r.values[l] = values[l];
  const auto v = payload_values(r);
  r.format = smallest_format(v);
  return r;
}
Record wmem_record(bool shared, std::uint32_t word, std::span<const std::uint32_t> values) {
  Record r;
  r.kind = RecordKind::kWmem;
  r.shared = shared;
  r.word = word;
  r.count = static_cast<std::uint32_t>(values.size());
  for (std::size_t i = 0; i < values.size() && i < 4; ++i) r.values[i] = values[i];
  r.format = smallest_format(values);
  return r;
}
std::array<Record, 2> rom_records(std::uint32_t block, std::uint32_t slot, std::uint64_t row) {
  std::array<Record, 2> out;
  for (std::uint32_t h = 0; h < 2; ++h) {
    Record& r = out[h];
    r.kind = RecordKind::kRom;
    r.block = block;
    r.slot = slot;
    r.half = h;
    r.values[0] = static_cast<std::uint32_t>(row >> (32 * h));
  }
  return out;
}

std::vector<Record> wreg_records(std::uint32_t warp, std::uint32_t reg, std::uint32_t lanes,
                                 const std::array<std::uint32_t, 4>& values) {
  std::vector<Record> out;
  std::uint32_t group = 0;
  for (int l = 0; l < kProtoLanes; ++l) {
    if (!((lanes >> l) & 1)) continue;
    if (group != 0 && data_tokens(wreg_record(warp, reg, group | (1u << l), values)) > kMaxDataTokens) {
      out.push_back(wreg_record(warp, reg, group, values));
      group = 0;
    }
    group |= 1u << l;
  }
  if (group != 0) out.push_back(wreg_record(warp, reg, group, values));
  return out;
}

std::vector<Record> wmem_records(bool shared, std::uint32_t word, std::span<const std::uint32_t> values) {
  std::vector<Record> out;
  std::size_t first = 0;
  for (std::size_t i = 1; i <= values.size(); ++i) {
    const bool end = i == values.size() || i - first == kProtoRunWords ||
                     data_tokens(wmem_record(shared, 0, values.subspan(first, i - first + 1))) > kMaxDataTokens;
    if (!end) continue;
    out.push_back(wmem_record(shared, word + static_cast<std::uint32_t>(first), values.subspan(first, i - first)));
    first = i;
  }
  return out;
}
Record live_record(std::uint32_t block, std::uint32_t live_mask) {
  Record r;
  r.kind = RecordKind::kLive;
  r.block = block;
  r.values[0] = live_mask;
  return r;
}
Record live_exited_record(std::uint32_t mask) {
  return live_record(kLiveExited, mask);
}

ValueFormat smallest_format(std::span<const std::uint32_t> values) {
  ValueFormat f = ValueFormat::kZero;
  for (std::uint32_t v : values) {
    const std::int32_t s = s32(v);
    const ValueFormat need = v == 0                        ? ValueFormat::kZero
                             : (s >= -128 && s <= 127)     ? ValueFormat::kByte
                             : (s >= -32768 && s <= 32767) ? ValueFormat::kHalf
                                                           : ValueFormat::kWord;
    f = std::max(f, need);
  }
  return f;
}

// ---------------------------------------------------------------------------- vocabulary

std::int64_t rows_of(RecordKind kind) {
  return kRows[static_cast<int>(kind)];
}

std::int64_t first_id(RecordKind kind) {
  std::int64_t off = 0;
  for (int k = 0; k < static_cast<int>(kind); ++k) off += kRows[k];
  return off;
}

std::int64_t vocabulary_rows() {
  return first_id(RecordKind::kData) + rows_of(RecordKind::kData);
}

int data_tokens(const Record& r) {
  switch (r.kind) {
    case RecordKind::kLaunch:
    case RecordKind::kLive: return 1;
    case RecordKind::kRom: return 2;
    case RecordKind::kWreg: return data_for(r.format, std::popcount(r.lanes & 15u));
    case RecordKind::kWmem: return data_for(r.format, static_cast<int>(std::min<std::uint32_t>(r.count, 4)));
    default: return 0;
  }
}

int token_count(const Record& r) {
  return r.kind == RecordKind::kData ? 1 : 1 + data_tokens(r);
}

std::int64_t token_count(std::span<const Record> records) {
  std::int64_t n = 0;
  for (const Record& r : records) n += token_count(r);
  return n;
}

sdk::Status append_tokens(const Record& r, std::int64_t base, std::vector<std::int64_t>& out) {
  const std::int64_t first = base + first_id(r.kind);
  auto lanes_ok = [&]() -> sdk::Status {
    if (r.lanes == 0 || r.lanes > 15)
      return sdk::invalid_argument(std::string(kNames[static_cast<int>(r.kind)]) + " record: lane mask " +
                                   std::to_string(r.lanes) + " is not a non-empty mask of 4 lanes");
    return {};
  };
  auto warp_ok = [&]() -> sdk::Status {
    if (r.warp >= kProtoWarps) return field_error(r, "warp", r.warp, kProtoWarps - 1);
    return {};
  };
  auto block_ok = [&]() -> sdk::Status {
    if (r.block >= kProtoBlocks) return field_error(r, "block", r.block, kProtoBlocks - 1);
    return {};
  };
  std::int64_t index = 0;
  switch (r.kind) {
    case RecordKind::kHalt:
    case RecordKind::kRun:
    case RecordKind::kSync: break;
    case RecordKind::kLaunch:
      if (r.threads > 255) return field_error(r, "threads", r.threads, 255);
      if (r.grid > 255) return field_error(r, "grid", r.grid, 255);
      break;
    case RecordKind::kCta:
      if (r.cta >= kProtoCtas) return field_error(r, "thread block", r.cta, kProtoCtas - 1);
      index = r.cta;
      break;
    case RecordKind::kExec:
      QGPU_RETURN_IF_ERROR(block_ok());
      QGPU_RETURN_IF_ERROR(warp_ok());
      QGPU_RETURN_IF_ERROR(lanes_ok());
      index = (std::int64_t{r.block} * kProtoWarps + r.warp) * kMasks + (r.lanes - 1);
      break;
    case RecordKind::kSched: {
      QGPU_RETURN_IF_ERROR(warp_ok());
      QGPU_RETURN_IF_ERROR(lanes_ok());
      std::int64_t state = 96;
      if (r.status != LaneStatus::kExited) {
        QGPU_RETURN_IF_ERROR(block_ok());
        const int group = r.status == LaneStatus::kRunning ? 0 : r.status == LaneStatus::kBarrierEven ? 1 : 2;
        state = group * kProtoBlocks + r.block;
      } else if (r.block != 0) {
        return sdk::invalid_argument("SCHED record: an exited lane has no pending block (got B" +
                                     std::to_string(r.block) + ")");
      }
      index = (state * kProtoWarps + r.warp) * kMasks + (r.lanes - 1);
      break;
    }
    case RecordKind::kWreg:
      QGPU_RETURN_IF_ERROR(warp_ok());
      QGPU_RETURN_IF_ERROR(lanes_ok());
      if (r.reg == 0 || r.reg >= kProtoRegisters)
        return sdk::invalid_argument("WREG record: register r" + std::to_string(r.reg) +
                                     " cannot be written back (r1-r15)");
      index = ((std::int64_t{r.warp} * (kProtoRegisters - 1) + (r.reg - 1)) * kMasks + (r.lanes - 1)) * kFormats +
              static_cast<int>(r.format);
      break;
    case RecordKind::kWmem:
      if (r.count == 0 || r.count > kProtoRunWords)
        return sdk::invalid_argument("WMEM record: " + std::to_string(r.count) + " words (1 to 4)");
      if (r.word + r.count > kProtoWords) return field_error(r, "last word", r.word + r.count - 1, kProtoWords - 1);
      index = ((std::int64_t{r.shared} * kProtoWords + r.word) * kProtoRunWords + (r.count - 1)) * kFormats +
              static_cast<int>(r.format);
      break;
    case RecordKind::kRom:
      QGPU_RETURN_IF_ERROR(block_ok());
      if (r.slot >= kProtoRowsPerBlock) return field_error(r, "slot", r.slot, kProtoRowsPerBlock - 1);
      if (r.half > 1) return field_error(r, "half", r.half, 1);
      index = (std::int64_t{r.block} * kProtoRowsPerBlock + r.slot) * 2 + r.half;
      break;
    case RecordKind::kLive:
      // Rows 0-31: block B's live-in set; row 32 (kLiveExited): an exited lane's.
      if (r.block > kLiveExited) return field_error(r, "block", r.block, kLiveExited);
      if (r.values[0] > 0xffff || (r.values[0] & 1))
        return sdk::invalid_argument("LIVE record: mask " + std::to_string(r.values[0]) + " is not a set of r1-r15");
      index = r.block;
      break;
    case RecordKind::kData:
      if (r.data > 0xffff) return field_error(r, "payload", r.data, 0xffff);
      index = r.data;
      break;
    case RecordKind::kCount: return sdk::invalid_argument("record of no kind");
  }
  if (data_tokens(r) > kMaxDataTokens)
    return sdk::invalid_argument(std::string(kNames[static_cast<int>(r.kind)]) + " record needs " +
                                 std::to_string(data_tokens(r)) + " DATA tokens, a record carries at most " +
                                 std::to_string(kMaxDataTokens) + " (the conv1d window; over by " +
                                 std::to_string(data_tokens(r) - kMaxDataTokens) + "): split it");
  out.push_back(first + index);
  const std::int64_t data = base + first_id(RecordKind::kData);
  auto put = [&](std::uint32_t v) { out.push_back(data + (v & 0xffff)); };
  switch (r.kind) {
    case RecordKind::kLaunch: put(r.threads | (r.grid << 8)); break;
    case RecordKind::kLive: put(r.values[0]); break;
    case RecordKind::kRom: put(r.values[0]), put(r.values[0] >> 16); break;
    case RecordKind::kWreg:
    case RecordKind::kWmem: {
      const auto v = payload_values(r);
      if (smallest_format(v) > r.format)
        return sdk::invalid_argument(std::string(kNames[static_cast<int>(r.kind)]) + " record: format " +
                                     kFormatNames[static_cast<int>(r.format)] + " cannot hold its values");
      switch (r.format) {
        case ValueFormat::kZero: break;
        case ValueFormat::kByte:
          for (std::size_t i = 0; i < v.size(); i += 2)
            put((v[i] & 0xff) | (i + 1 < v.size() ? (v[i + 1] & 0xff) << 8 : 0u));
          break;
        case ValueFormat::kHalf:
          for (std::uint32_t x : v) put(x);
          break;
        case ValueFormat::kWord:
          for (std::uint32_t x : v) put(x), put(x >> 16);
          break;
      }
      break;
    }
    default: break;
  }
  return {};
}

sdk::Expected<std::vector<std::int64_t>> encode_tokens(std::span<const Record> records, std::int64_t base) {
  std::vector<std::int64_t> ids;
  for (std::size_t i = 0; i < records.size(); ++i) {
    sdk::Status s = append_tokens(records[i], base, ids);
    if (!s) return s.with_context("record " + std::to_string(i));
  }
  return ids;
}

sdk::Expected<Record> token_record(std::int64_t offset) {
  if (offset < 0 || offset >= vocabulary_rows())
    return sdk::invalid_argument("row " + std::to_string(offset) + " is outside the machine's " +
                                 std::to_string(vocabulary_rows()) + " rows");
  int k = 0;
  std::int64_t x = offset;
  while (x >= kRows[k]) x -= kRows[k], ++k;
  const auto kind = static_cast<RecordKind>(k);
  Record r;
  r.kind = kind;
  switch (kind) {
    case RecordKind::kCta: r.cta = static_cast<std::uint32_t>(x); break;
    case RecordKind::kExec:
      r.lanes = static_cast<std::uint32_t>(x % kMasks + 1), x /= kMasks;
      r.warp = static_cast<std::uint32_t>(x % kProtoWarps), x /= kProtoWarps;
      r.block = static_cast<std::uint32_t>(x);
      break;
    case RecordKind::kSched: {
      r.lanes = static_cast<std::uint32_t>(x % kMasks + 1), x /= kMasks;
      r.warp = static_cast<std::uint32_t>(x % kProtoWarps), x /= kProtoWarps;
      if (x == 96) {
        r.status = LaneStatus::kExited;
      } else {
        const std::int64_t group = x / kProtoBlocks;
        r.status = group == 0   ? LaneStatus::kRunning
                   : group == 1 ? LaneStatus::kBarrierEven
                                : LaneStatus::kBarrierOdd;
        r.block = static_cast<std::uint32_t>(x % kProtoBlocks);
      }
      break;
    }
    case RecordKind::kWreg:
      r.format = static_cast<ValueFormat>(x % kFormats), x /= kFormats;
      r.lanes = static_cast<std::uint32_t>(x % kMasks + 1), x /= kMasks;
      r.reg = static_cast<std::uint32_t>(x % (kProtoRegisters - 1) + 1), x /= kProtoRegisters - 1;
      r.warp = static_cast<std::uint32_t>(x);
      break;
    case RecordKind::kWmem:
      r.format = static_cast<ValueFormat>(x % kFormats), x /= kFormats;
      r.count = static_cast<std::uint32_t>(x % kProtoRunWords + 1), x /= kProtoRunWords;
      r.word = static_cast<std::uint32_t>(x % kProtoWords), x /= kProtoWords;
      r.shared = x != 0;
      if (r.word + r.count > kProtoWords)
        return sdk::invalid_argument("WMEM of " + std::to_string(r.count) + " words from word " +
                                     std::to_string(r.word) + " runs past the last word " +
                                     std::to_string(kProtoWords - 1) + " (a reserved row)");
      break;
    case RecordKind::kRom:
      r.half = static_cast<std::uint32_t>(x % 2), x /= 2;
      r.slot = static_cast<std::uint32_t>(x % kProtoRowsPerBlock);
      r.block = static_cast<std::uint32_t>(x / kProtoRowsPerBlock);
      break;
    case RecordKind::kLive: r.block = static_cast<std::uint32_t>(x); break;
    case RecordKind::kData: r.data = static_cast<std::uint32_t>(x); break;
    default: break;
  }
  return r;
}

sdk::Expected<std::vector<Record>> decode_tokens(std::span<const std::int64_t> ids, std::int64_t base) {
  std::vector<Record> out;
  const std::int64_t end = base + vocabulary_rows();
  auto where = [&](std::size_t i) { return "token " + std::to_string(i) + " (id " + std::to_string(ids[i]) + ")"; };
  for (std::size_t i = 0; i < ids.size();) {
    const std::int64_t id = ids[i];
    if (id < base)
      return sdk::invalid_argument(where(i) +
                                   " is a base-vocabulary (text) token, not a machine record (records start at " +
                                   std::to_string(base) + ")");
    if (id >= end)
      return sdk::invalid_argument(where(i) + " is past the machine's rows (" + std::to_string(base) + " + " +
                                   std::to_string(vocabulary_rows()) + ", over by " + std::to_string(id - end + 1) +
                                   ")");
    auto rec = token_record(id - base);
    if (!rec) return sdk::invalid_argument(where(i) + ": " + rec.status().message());
    Record r = *rec;
    const RecordKind kind = r.kind;
    if (kind == RecordKind::kData)
      return sdk::invalid_argument(where(i) + " is a DATA token where a record header is expected");
    const int nd = data_tokens(r);
    if (nd > kMaxDataTokens)
      return sdk::invalid_argument(where(i) + " is " + to_text(r) + ", which would need " + std::to_string(nd) +
                                   " DATA tokens (at most " + std::to_string(kMaxDataTokens) + "; a reserved row)");
    if (i + 1 + nd > ids.size())
      return sdk::invalid_argument(where(i) + " starts " + to_text(r) + " which needs " + std::to_string(nd) +
                                   " DATA tokens, but the stream ends after " + std::to_string(ids.size() - i - 1));
    std::vector<std::uint32_t> d;
    for (int j = 1; j <= nd; ++j) {
      const std::int64_t did = ids[i + j] - base - first_id(RecordKind::kData);
      if (did < 0 || did > 0xffff)
        return sdk::invalid_argument(where(i + j) + " should be DATA " + std::to_string(j) + " of " +
                                     std::to_string(nd) + " for the " + kNames[static_cast<int>(kind)] +
                                     " record at token " + std::to_string(i) + ", but is not a DATA token");
      d.push_back(static_cast<std::uint32_t>(did));
    }
    switch (kind) {
      case RecordKind::kLaunch: r.threads = d[0] & 0xff, r.grid = d[0] >> 8; break;
      case RecordKind::kLive:
        if (d[0] & 1) return sdk::invalid_argument(where(i + 1) + ": LIVE mask names r0, which is never stored");
        r.values[0] = d[0];
        break;
      case RecordKind::kRom: r.values[0] = d[0] | (d[1] << 16); break;
      case RecordKind::kWreg:
      case RecordKind::kWmem: {
        const int n = kind == RecordKind::kWreg ? std::popcount(r.lanes) : static_cast<int>(r.count);
        std::vector<std::uint32_t> v(static_cast<std::size_t>(n), 0u);
        for (int k = 0; k < n; ++k) {
          switch (r.format) {
            case ValueFormat::kZero: break;
            case ValueFormat::kByte: v[k] = u32(sext(d[k / 2] >> (8 * (k % 2)), 8)); break;
            case ValueFormat::kHalf: v[k] = u32(sext(d[k], 16)); break;
            case ValueFormat::kWord: v[k] = d[2 * k] | (d[2 * k + 1] << 16); break;
          }
        }
        if (r.format == ValueFormat::kByte && n % 2 == 1 && (d.back() >> 8) != 0)
          return sdk::invalid_argument(where(i + nd) + ": the unused high byte of the last byte-format DATA is not 0");
        if (smallest_format(v) != r.format)
          return sdk::invalid_argument(where(i) + ": " + kNames[static_cast<int>(kind)] + " values " +
                                       "are not in their smallest format (" + kFormatNames[static_cast<int>(r.format)] +
                                       " where " + kFormatNames[static_cast<int>(smallest_format(v))] +
                                       " holds them): the protocol has one token sequence per record");
        int k = 0;
        for (int l = 0; l < 4; ++l) {
          if (kind == RecordKind::kWreg && !((r.lanes >> l) & 1)) continue;
          if (k < n) r.values[l] = v[k++];
        }
        break;
      }
      default: break;
    }
    out.push_back(r);
    i += 1 + nd;
  }
  return out;
}

// ---------------------------------------------------------------------------- replay

namespace {

// A header's fields without its payload, e.g. "WREG w0 r1 0b0111 byte".
std::string header_text(const Record& r) {
  Record h = r;
  h.values = {};
  std::string text = to_text(h);
  if (const auto cut = text.find(" ["); cut != std::string::npos) text.resize(cut);
  return text;
}

// One token of a stream by itself, e.g. "EXEC B1 w0 0b0111 (id 248578)", "DATA 0x0402 (id 288078)".
std::string token_text(std::int64_t id, std::int64_t base) {
  const std::string tail = " (id " + std::to_string(id) + ")";
  if (id < base) return "a text token" + tail;
  auto r = token_record(id - base);
  if (!r) return "an invalid machine row" + tail;
  if (r->kind != RecordKind::kData) return header_text(*r) + tail;
  char hex[16];
  std::snprintf(hex, sizeof hex, "0x%04x", r->data);
  return std::string("DATA ") + hex + tail;
}

}  // namespace

std::string StreamMismatch::to_string() const {
  return "token " + std::to_string(token) + " (record " + std::to_string(record) + "): expected " + expected +
         ", got " + got;
}

std::optional<StreamMismatch> first_mismatch(std::span<const std::int64_t> expected,
                                             std::span<const std::int64_t> got, std::int64_t base) {
  std::size_t record = 0, record_start = 0;
  for (std::size_t i = 0; i < expected.size() || i < got.size(); ++i) {
    // Track which expected record token i belongs to (header + its DATA tokens).
    std::string where;  // for an expected DATA token: "DATA 2 of 3 of WREG w0 r1 0b0111 byte: "
    if (i < expected.size()) {
      auto r = token_record(expected[i] - base);
      if (r && r->kind != RecordKind::kData) {
        if (i > 0) ++record;
        record_start = i;
      } else if (r) {
        auto head = token_record(expected[record_start] - base);
        if (head && head->kind != RecordKind::kData)
          where = "DATA " + std::to_string(i - record_start) + " of " + std::to_string(data_tokens(*head)) + " of " +
                  header_text(*head) + ": ";
      }
    }
    const bool have_e = i < expected.size(), have_g = i < got.size();
    if (have_e && have_g && expected[i] == got[i]) continue;
    StreamMismatch m;
    m.token = i;
    m.record = have_e ? record : record + 1;
    m.expected = have_e ? where + token_text(expected[i], base) : "the end of the stream";
    m.got = have_g ? token_text(got[i], base) : "nothing (the stream ended)";
    return m;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------- text

std::string lane_mask_text(std::uint32_t lanes) {
  std::string s = "0b";
  for (int l = kProtoLanes - 1; l >= 0; --l) s += ((lanes >> l) & 1) ? '1' : '0';
  return s;
}

const char* kind_name(RecordKind kind) {
  const auto k = static_cast<std::size_t>(kind);
  return k < kNames.size() ? kNames[k] : "?";
}

std::string to_text(const Record& r) {
  std::ostringstream o;
  o << kNames[static_cast<int>(r.kind)];
  auto values = [&] {
    o << " " << kFormatNames[static_cast<int>(r.format)] << " [";
    const auto v = payload_values(r);
    for (std::size_t i = 0; i < v.size(); ++i) o << (i ? ", " : "") << s32(v[i]);
    o << "]";
  };
  switch (r.kind) {
    case RecordKind::kLaunch: o << " threads " << r.threads << " grid " << r.grid; break;
    case RecordKind::kCta: o << " " << r.cta; break;
    case RecordKind::kExec: o << " B" << r.block << " w" << r.warp << " " << lane_mask_text(r.lanes); break;
    case RecordKind::kSched:
      o << " w" << r.warp << " " << lane_mask_text(r.lanes) << " " << kStatusNames[static_cast<int>(r.status)];
      if (r.status != LaneStatus::kExited) o << " B" << r.block;
      break;
    case RecordKind::kWreg:
      o << " w" << r.warp << " r" << r.reg << " " << lane_mask_text(r.lanes);
      values();
      break;
    case RecordKind::kWmem:
      o << " " << (r.shared ? "shared" : "global") << "[" << r.word;
      if (r.count > 1) o << ".." << r.word + r.count - 1;
      o << "]";
      values();
      break;
    case RecordKind::kRom: {
      o << " B" << r.block << "." << r.slot << (r.half ? " hi" : " lo") << " 0x" << std::hex << r.values[0] << std::dec;
      break;
    }
    case RecordKind::kLive: {
      if (r.block == kLiveExited)
        o << " exited {";
      else
        o << " B" << r.block << " {";
      bool first = true;
      for (int k = 1; k < 16; ++k)
        if ((r.values[0] >> k) & 1) o << (first ? "" : ", ") << "r" << k, first = false;
      o << "}";
      break;
    }
    case RecordKind::kData: o << " 0x" << std::hex << r.data << std::dec; break;
    default: break;
  }
  return o.str();
}

// ---------------------------------------------------------------------------- program side

sdk::Status check_protocol_limits(const Program& p) {
  const std::string k = "kernel '" + p.kernel_name + "': token protocol: ";
  auto over = [&](const std::string& what, std::int64_t n, std::int64_t limit) {
    return sdk::limit_exceeded(k + what + " " + std::to_string(n) + " exceeds " + std::to_string(limit) + " (over by " +
                               std::to_string(n - limit) + ")");
  };
  if (p.config.lanes != kProtoLanes) return over("lanes per warp", p.config.lanes, kProtoLanes);
  if (p.config.registers > kProtoRegisters) return over("registers", p.config.registers, kProtoRegisters);
  if (static_cast<int>(p.blocks.size()) > kProtoBlocks) return over("ROM blocks", p.blocks.size(), kProtoBlocks);
  if (p.rows_per_block() > kProtoRowsPerBlock) return over("rows per block", p.rows_per_block(), kProtoRowsPerBlock);
  const std::int64_t warps = (p.shape.block + kProtoLanes - 1) / kProtoLanes;
  if (warps > kProtoWarps) return over("warps per thread block", warps, kProtoWarps);
  if (p.shape.grid > kProtoCtas) return over("thread blocks", p.shape.grid, kProtoCtas);
  if (p.shared_words_used > kProtoWords) return over("shared words", p.shared_words_used, kProtoWords);
  return {};
}

namespace {

// Registers some shuffle reads: another lane may read them at any time.
std::uint32_t shuffle_sources(const Program& p) {
  std::uint32_t m = 0;
  for (const MachineBlock& mb : p.blocks)
    for (const Slot& s : mb.slots)
      if (op_info(s.in.op).format == kFmtShfl && s.in.ak == Kind::kReg) m |= 1u << s.in.a;
  return m & 0xfffe;
}

}  // namespace

std::vector<std::uint16_t> live_in_masks(const Program& p) {
  const std::size_t n = p.blocks.size();
  std::vector<std::uint32_t> use(n, 0), def(n, 0), live(n, 0);
  std::vector<std::vector<std::uint32_t>> succ(n);
  const std::uint32_t shuffled = shuffle_sources(p);
  for (std::size_t b = 0; b < n; ++b) {
    const MachineBlock& mb = p.blocks[b];
    const Instr& t = mb.term.in;
    std::uint32_t lv = uses_of(t);
    if (t.op == Op::kBr || t.op == Op::kBar || t.op == Op::kBrc) succ[b].push_back(t.imm & 0xffff);
    if (t.op == Op::kBrc) succ[b].push_back(t.imm >> 16);
    std::uint32_t d = 0;
    for (auto it = mb.slots.rbegin(); it != mb.slots.rend(); ++it) {
      const Instr& in = it->in;
      if (writes_d(in.op) && in.d != 0) lv &= ~(1u << in.d), d |= 1u << in.d;
      lv |= uses_of(in);
    }
    use[b] = lv;
    def[b] = d;
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t b = n; b-- > 0;) {
      std::uint32_t out = 0;
      for (std::uint32_t s : succ[b])
        if (s < n) out |= live[s];
      const std::uint32_t in = use[b] | (out & ~def[b]);
      if (in != live[b]) live[b] = in, changed = true;
    }
  }
  std::vector<std::uint16_t> masks(n);
  for (std::size_t b = 0; b < n; ++b) masks[b] = static_cast<std::uint16_t>((live[b] | shuffled) & 0xfffe);
  return masks;
}

namespace {

int warps_of(const Program& p) {
  return static_cast<int>((p.shape.block + kProtoLanes - 1) / kProtoLanes);
}

// Lanes of warp w that hold a thread.
std::uint32_t existing_lanes(const Program& p, int w) {
  std::uint32_t m = 0;
  for (int l = 0; l < kProtoLanes; ++l)
    if (static_cast<std::uint32_t>(w * kProtoLanes + l) < p.shape.block) m |= 1u << l;
  return m;
}

// Memory words as WMEM records: maximal runs of consecutive words, at most 4 per record.
void memory_runs(bool shared, const std::vector<std::uint32_t>& words, const std::vector<std::uint32_t>& memory,
                 std::vector<Record>& out) {
  for (std::size_t i = 0; i < words.size();) {
    std::size_t j = i + 1;
    while (j < words.size() && j - i < kProtoRunWords && words[j] == words[j - 1] + 1) ++j;
    std::vector<std::uint32_t> v;
    for (std::size_t k = i; k < j; ++k) v.push_back(memory[words[k]]);
    for (const Record& r : wmem_records(shared, words[i], v)) out.push_back(r);
    i = j;
  }
}

struct LaneEntry {
  LaneStatus status = LaneStatus::kRunning;
  std::uint32_t block = 0;
  bool operator==(const LaneEntry&) const = default;
};

// Builds the generated stream from the interpreter's events, keeping a model
// of what the recurrent state holds (register file, memory, scheduler rows)
// so that only live and changed values are written back (docs/PROTOCOL.md).
class Recorder final : public LaunchObserver {
 public:
  Recorder(const Program& p, const std::vector<std::uint32_t>& global, std::vector<Record>& out)
      : p_(p), live_(live_in_masks(p)), shuffled_(shuffle_sources(p)), out_(out), global_ram_(global) {
    const int nw = warps_of(p);
    regs_.assign(static_cast<std::size_t>(nw), {});
    sched_.assign(static_cast<std::size_t>(nw), {});
    for (int w = 0; w < nw; ++w)
      for (int l = 0; l < kProtoLanes; ++l)
        if (!((existing_lanes(p, w) >> l) & 1)) sched_[w][l].status = LaneStatus::kExited;
    shared_ram_.assign(static_cast<std::size_t>(p.shared_words_used), 0u);
    defs_.assign(p.blocks.size(), 0u);
    for (std::size_t b = 0; b < p.blocks.size(); ++b)
      for (const Slot& s : p.blocks[b].slots)
        if (writes_d(s.in.op) && s.in.d != 0) defs_[b] |= 1u << s.in.d;
  }

  sdk::Status on_cta_start(std::uint32_t cta) override {
    if (cta == 0) return {};  // the prompt set up thread block 0
    pending_.clear();         // the finished thread block's scheduler state is dead
    out_.push_back(cta_record(cta));
    parity_ = 0;
    // The CTA token erases the register file and shared memory (the circuit clears
    // their RAMs): every row reads 0 again, so nothing is written back for them.
    std::fill(shared_ram_.begin(), shared_ram_.end(), 0u);
    for (auto& warp : regs_)
      for (auto& reg : warp) reg.fill(0u);
    for (int w = 0; w < static_cast<int>(regs_.size()); ++w)
      pending_.push_back({w, existing_lanes(p_, w), {LaneStatus::kRunning, 0}});
    return {};
  }

  sdk::Status on_block(const BlockEvent& e) override {
    const Record exec = exec_record(e.block, static_cast<std::uint32_t>(e.warp), e.mask);
    flush(&exec);
    out_.push_back(exec);
    auto& regs = regs_[e.warp];
    // Registers: written by the block, live at the lane's next block, different from the stored row.
    for (int r = 1; r < kProtoRegisters; ++r) {
      if (!((defs_[e.block] >> r) & 1)) continue;
      std::uint32_t lanes = 0;
      std::array<std::uint32_t, 4> v{};
      for (int l = 0; l < kProtoLanes; ++l) {
        if (!((e.mask >> l) & 1)) continue;
        const std::uint32_t live = e.run[l] == LaneRun::kExited ? shuffled_ : live_[e.pending[l]];
        const std::uint32_t value = (*e.regs[l])[r];
        if (((live >> r) & 1) && value != regs[r][l]) lanes |= 1u << l, v[l] = value, regs[r][l] = value;
      }
      for (const Record& rec : wreg_records(static_cast<std::uint32_t>(e.warp), r, lanes, v)) out_.push_back(rec);
    }
    // Memory: every word the block wrote, global then shared, ascending.
    for (bool shared : {false, true}) {
      std::vector<std::uint32_t> words;
      for (const auto& [s, w] : e.written)
        if (s == shared) words.push_back(w);
      std::sort(words.begin(), words.end());
      words.erase(std::unique(words.begin(), words.end()), words.end());
      const std::vector<std::uint32_t>& mem = shared ? *e.shared : *e.global;
      memory_runs(shared, words, mem, out_);
      for (std::uint32_t w : words) (shared ? shared_ram_ : global_ram_)[w] = mem[w];
    }
    // Scheduler: the masked lanes' new states, grouped; written when the next record is known.
    for (int l = 0; l < kProtoLanes; ++l) {
      if (!((e.mask >> l) & 1)) continue;
      LaneEntry s;
      if (e.run[l] == LaneRun::kExited) {
        s.status = LaneStatus::kExited;
      } else {
        s.block = e.pending[l];
        s.status = e.run[l] == LaneRun::kRunning ? LaneStatus::kRunning
                   : parity_ == 0                ? LaneStatus::kBarrierEven
                                                 : LaneStatus::kBarrierOdd;
      }
      auto it = std::find_if(pending_.begin(), pending_.end(),
                             [&](const Pending& g) { return g.warp == e.warp && g.entry == s; });
      if (it != pending_.end())
        it->lanes |= 1u << l;
      else
        pending_.push_back({e.warp, 1u << l, s});
    }
    return {};
  }

  sdk::Status on_barrier_release(std::uint32_t) override {
    flush(nullptr);
    out_.push_back(sync_record());
    parity_ ^= 1;
    return {};
  }

  sdk::Status on_finish() override {
    pending_.clear();
    out_.push_back(halt_record());
    return {};
  }

 private:
  struct Pending {
    int warp;
    std::uint32_t lanes;
    LaneEntry entry;
  };

  // Writes the pending scheduler groups that the next EXEC does not imply and
  // that differ from the stored rows.
  void flush(const Record* next) {
    for (const Pending& g : pending_) {
      if (next && static_cast<std::uint32_t>(g.warp) == next->warp && g.entry.status == LaneStatus::kRunning &&
          g.entry.block == next->block)
        continue;
      std::uint32_t lanes = 0;
      for (int l = 0; l < kProtoLanes; ++l)
        if (((g.lanes >> l) & 1) && !(sched_[g.warp][l] == g.entry)) lanes |= 1u << l, sched_[g.warp][l] = g.entry;
      if (lanes) out_.push_back(sched_record(static_cast<std::uint32_t>(g.warp), lanes, g.entry.status, g.entry.block));
    }
    pending_.clear();
  }

  const Program& p_;
  std::vector<std::uint16_t> live_;
  std::uint32_t shuffled_;
  std::vector<Record>& out_;
  std::vector<std::uint32_t> global_ram_, shared_ram_;
  std::vector<std::array<std::array<std::uint32_t, 4>, 16>> regs_;
  std::vector<std::array<LaneEntry, 4>> sched_;
  std::vector<std::uint32_t> defs_;
  std::vector<Pending> pending_;
  int parity_ = 0;
};

std::vector<std::uint32_t> initial_global(const Program& p, const MemoryLayout& layout,
                                          const std::vector<sdk::LaunchArg>& args) {
  std::vector<std::uint32_t> g(static_cast<std::size_t>(layout.total_words), 0u);
  for (std::size_t i = 0; i < args.size() && i < p.params.size(); ++i)
    if (args[i].is_array)
      for (std::size_t j = 0; j < args[i].array.size(); ++j)
        g[layout.base_word[i] + j] = static_cast<std::uint32_t>(args[i].array[j]);
  return g;
}

}  // namespace

sdk::Expected<std::vector<Record>> encode_prompt(const Program& p, const std::vector<sdk::LaunchArg>& args) {
  QGPU_RETURN_IF_ERROR(check_protocol_limits(p));
  auto layout = layout_arguments(p, args);
  if (!layout) return layout.error();
  if (layout->total_words > kProtoWords)
    return sdk::limit_exceeded("kernel '" + p.kernel_name + "': token protocol: the launch's arrays need " +
                               std::to_string(layout->total_words) + " words, the token layout addresses " +
                               std::to_string(kProtoWords) + " (over by " +
                               std::to_string(layout->total_words - kProtoWords) + ")");
  std::vector<Record> out;
  out.push_back(launch_record(p.shape.block, p.shape.grid));
  out.push_back(cta_record(0));
  const std::vector<std::uint64_t> image = p.image(layout->param_values);
  const int rows = p.rows_per_block();
  for (std::size_t i = 0; i < image.size(); ++i)
    for (const Record& r :
         rom_records(static_cast<std::uint32_t>(i / rows), static_cast<std::uint32_t>(i % rows), image[i]))
      out.push_back(r);
  const auto live = live_in_masks(p);
  for (std::size_t b = 0; b < live.size(); ++b) out.push_back(live_record(static_cast<std::uint32_t>(b), live[b]));
  // An exited lane keeps only the shuffle sources live; an unwritten row reads 0 (none).
  if (const std::uint32_t shuffled = shuffle_sources(p); shuffled != 0) out.push_back(live_exited_record(shuffled));
  const std::vector<std::uint32_t> global = initial_global(p, *layout, args);
  std::vector<std::uint32_t> words(global.size());
  for (std::size_t i = 0; i < words.size(); ++i) words[i] = static_cast<std::uint32_t>(i);
  memory_runs(false, words, global, out);
  // Registers and shared memory need no records: CTA 0 cleared them (every row reads 0).
  const int nw = warps_of(p);
  for (int w = 0; w < nw; ++w) {
    const std::uint32_t lanes = existing_lanes(p, w);
    out.push_back(sched_record(static_cast<std::uint32_t>(w), lanes, LaneStatus::kRunning, 0));
    if (lanes != 0b1111u)
      out.push_back(sched_record(static_cast<std::uint32_t>(w), 0b1111u & ~lanes, LaneStatus::kExited, 0));
  }
  out.push_back(run_record());
  return out;
}

sdk::Expected<LaunchRecords> record_launch(const Program& p, const std::vector<sdk::LaunchArg>& args,
                                           const sdk::InterpretOptions& options) {
  LaunchRecords lr;
  auto prompt = encode_prompt(p, args);
  if (!prompt) return prompt.error();
  lr.prompt = std::move(*prompt);
  auto layout = layout_arguments(p, args);
  if (!layout) return layout.error();
  Recorder rec(p, initial_global(p, *layout, args), lr.generated);
  auto result = interpret_program(p, args, options, &rec);
  if (!result) return result.error();
  lr.result = std::move(*result);
  lr.prompt_tokens = token_count(lr.prompt);
  lr.generated_tokens = token_count(lr.generated);
  return lr;
}

}  // namespace qgpu::simt
