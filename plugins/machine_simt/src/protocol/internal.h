// What the protocol's sources share (protocol/*.cpp); protocol.h is the API.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "protocol.h"

namespace qgpu::simt::detail {

inline constexpr std::array<const char*, kRecordKinds> kNames = {
    "HALT", "RUN", "SYNC", "LAUNCH", "CTA", "EXEC", "SCHED", "WREG", "WMEM", "ROM", "LIVE", "BOUND", "FAULT", "DATA"};

inline constexpr std::array<const char*, 4> kFormatNames = {"zero", "byte", "half", "word"};

// The values a WREG (its lanes in order) or WMEM record (its words) carries; none for other kinds.
std::vector<std::uint32_t> payload_values(const Record& r);

}  // namespace qgpu::simt::detail
