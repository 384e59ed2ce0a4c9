// Small helpers shared by the checkpoint sources (not installed).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qgpu::qwen35 {

// Text from a file made safe for a one-line message: control and non-ASCII
// bytes escaped as \xNN, cut at 200 characters.
std::string printable(std::string_view text);
// "[2048, 4096]"
std::string shape_string(const std::vector<std::int64_t>& shape);
// a * b into out; false on overflow (out unchanged).
bool checked_mul(std::uint64_t a, std::uint64_t b, std::uint64_t& out);
// "file:line:col" for a byte offset into text (nlohmann reports offsets one past the bad byte).
std::string line_col(const std::string& file, std::string_view text, std::size_t byte);

}  // namespace qgpu::qwen35
