#include "util.h"

#include <limits>

namespace qgpu::qwen35 {

std::string printable(std::string_view text) {
  constexpr std::size_t kMaxChars = 200;
  std::string out;
  for (unsigned char c : text) {
    if (out.size() >= kMaxChars) {
      out += "...";
      break;
    }
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

bool checked_mul(std::uint64_t a, std::uint64_t b, std::uint64_t& out) {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) return false;
  out = a * b;
  return true;
}

std::string line_col(const std::string& file, std::string_view text, std::size_t byte) {
  if (byte > 0) --byte;  // nlohmann's byte is 1-based (the count read so far)
  if (byte > text.size()) byte = text.size();
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < byte; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return file + ":" + std::to_string(line) + ":" + std::to_string(col);
}

}  // namespace qgpu::qwen35
