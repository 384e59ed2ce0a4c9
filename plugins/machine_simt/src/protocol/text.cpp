// Records as one line of text, e.g. "WREG w0 r2 0b0111 byte [4, 10, 18]".
#include <sstream>

#include "protocol.h"
#include "protocol/internal.h"

namespace qgpu::simt {

namespace {

using detail::kFormatNames;
using detail::kNames;
using detail::payload_values;

constexpr std::array<const char*, 4> kStatusNames = {"running", "exited", "barrier.even", "barrier.odd"};

}  // namespace

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
    case RecordKind::kBound: o << " " << (r.shared ? "shared" : "global") << " " << r.values[0] << " words"; break;
    case RecordKind::kFault:
      o << " slot " << r.slot << " lane " << r.lane
        << (r.fault == FaultKind::kMisaligned ? " misaligned" : " out-of-bounds");
      break;
    case RecordKind::kData: o << " 0x" << std::hex << r.data << std::dec; break;
    default: break;
  }
  return o.str();
}

std::string token_name(const Record& r) {
  std::ostringstream o;
  o << kNames[static_cast<int>(r.kind)];
  const char* format = kFormatNames[static_cast<int>(r.format)];
  switch (r.kind) {
    case RecordKind::kWreg: o << " w" << r.warp << " r" << r.reg << " " << lane_mask_text(r.lanes) << " " << format; break;
    case RecordKind::kWmem:
      o << " " << (r.shared ? "shared" : "global") << "[" << r.word;
      if (r.count > 1) o << ".." << r.word + r.count - 1;
      o << "] " << format;
      break;
    case RecordKind::kRom: o << " B" << r.block << "." << r.slot << (r.half ? " hi" : " lo"); break;
    case RecordKind::kLive:
      if (r.block == kLiveExited)
        o << " exited";
      else
        o << " B" << r.block;
      break;
    case RecordKind::kLaunch: break;  // threads and grid are in its DATA token
    case RecordKind::kBound: o << " " << (r.shared ? "shared" : "global"); break;
    default: return to_text(r);
  }
  return o.str();
}

}  // namespace qgpu::simt
