// Records: the constructors, the protocol's split of WREG/WMEM runs, the smallest value format
// (docs/PROTOCOL.md "Records").
#include <algorithm>

#include "protocol.h"
#include "protocol/internal.h"

namespace qgpu::simt {

namespace detail {

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

}  // namespace detail

using detail::payload_values;

Record bound_record(bool shared, std::uint32_t words) {
  Record r;
  r.kind = RecordKind::kBound;
  r.shared = shared;
  r.values[0] = words;
  return r;
}
Record fault_record(std::uint32_t slot, std::uint32_t lane, FaultKind kind) {
  Record r;
  r.kind = RecordKind::kFault;
  r.slot = slot;
  r.lane = lane;
  r.fault = kind;
  return r;
}

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

}  // namespace qgpu::simt
