// Token ids: each record kind's rows above the base vocabulary, encoding records as tokens and
// decoding token streams (docs/PROTOCOL.md "Vocabulary").
#include <algorithm>
#include <bit>

#include "protocol.h"
#include "protocol/internal.h"

namespace qgpu::simt {

namespace {

using detail::kFormatNames;
using detail::kNames;
using detail::payload_values;

constexpr int kMasks = 15;        // non-empty lane masks
constexpr int kSchedExited = 3 * kProtoBlocks;     // after running, barrier even, barrier odd at each block
constexpr int kSchedStates = kSchedExited + 1;
constexpr int kFormats = 4;

std::uint32_t space_words(bool shared) {
  return shared ? kProtoSharedWords : kProtoGlobalWords;
}

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
    (kProtoGlobalWords + kProtoSharedWords) * kProtoRunWords * kFormats,  // WMEM
    kProtoBlocks * kProtoRowsPerBlock * 2,                    // ROM (two halves per row)
    kProtoBlocks + 1,                                         // LIVE (blocks, then exited)
    2,                                                        // BOUND (global, shared)
    kProtoFaultSlots * kProtoLanes * 2,                       // FAULT (slot, lane, kind)
    std::int64_t{1} << kDataBits,                             // DATA
};
// clang-format on

std::int32_t sext(std::uint32_t v, int bits) {
  const std::uint32_t sign = 1u << (bits - 1);
  v &= (bits == 32 ? 0xffffffffu : (1u << bits) - 1);
  return static_cast<std::int32_t>((v ^ sign) - sign);
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

std::int64_t rows_of(RecordKind kind) {
  return kRows[static_cast<int>(kind)];
}

std::int64_t first_id(RecordKind kind) {
  std::int64_t off = 0;
  for (int k = 0; k < static_cast<int>(kind); ++k) off += kRows[k];
  return off;
}

std::int64_t vocabulary_rows() {
  return first_id(RecordKind::kCount);
}

int data_tokens(const Record& r) {
  switch (r.kind) {
    case RecordKind::kLaunch:
    case RecordKind::kLive:
    case RecordKind::kBound: return 1;
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
      std::int64_t state = kSchedExited;
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
      if (r.word + r.count > space_words(r.shared))
        return field_error(r, "last word", r.word + r.count - 1, space_words(r.shared) - 1);
      index = ((std::int64_t{r.shared ? kProtoGlobalWords : 0} + r.word) * kProtoRunWords + (r.count - 1)) * kFormats +
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
    case RecordKind::kBound:
      if (r.values[0] > space_words(r.shared)) return field_error(r, "words", r.values[0], space_words(r.shared));
      index = r.shared ? 1 : 0;
      break;
    case RecordKind::kFault:
      if (r.slot >= kProtoFaultSlots) return field_error(r, "slot", r.slot, kProtoFaultSlots - 1);
      if (r.lane >= kProtoLanes) return field_error(r, "lane", r.lane, kProtoLanes - 1);
      index = (std::int64_t{r.slot} * kProtoLanes + r.lane) * 2 + static_cast<int>(r.fault);
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
    case RecordKind::kLive:
    case RecordKind::kBound: put(r.values[0]); break;
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
      if (x == kSchedExited) {
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
      r.shared = x >= kProtoGlobalWords;
      r.word = static_cast<std::uint32_t>(r.shared ? x - kProtoGlobalWords : x);
      if (r.word + r.count > space_words(r.shared))
        return sdk::invalid_argument("WMEM of " + std::to_string(r.count) + " words from " +
                                     (r.shared ? "shared" : "global") + " word " + std::to_string(r.word) +
                                     " runs past the last word " + std::to_string(space_words(r.shared) - 1) +
                                     " (a reserved row)");
      break;
    case RecordKind::kRom:
      r.half = static_cast<std::uint32_t>(x % 2), x /= 2;
      r.slot = static_cast<std::uint32_t>(x % kProtoRowsPerBlock);
      r.block = static_cast<std::uint32_t>(x / kProtoRowsPerBlock);
      break;
    case RecordKind::kLive: r.block = static_cast<std::uint32_t>(x); break;
    case RecordKind::kBound: r.shared = x == 1; break;
    case RecordKind::kFault:
      r.fault = static_cast<FaultKind>(x % 2), x /= 2;
      r.lane = static_cast<std::uint32_t>(x % kProtoLanes);
      r.slot = static_cast<std::uint32_t>(x / kProtoLanes);
      break;
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
      case RecordKind::kBound:
        if (d[0] > space_words(r.shared))
          return sdk::invalid_argument(where(i + 1) + ": BOUND " + (r.shared ? "shared" : "global") + " of " +
                                       std::to_string(d[0]) + " words is past the space's " +
                                       std::to_string(space_words(r.shared)));
        r.values[0] = d[0];
        break;
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

}  // namespace qgpu::simt
