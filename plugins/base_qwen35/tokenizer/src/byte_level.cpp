#include "byte_level.h"

#include "text.h"

namespace qgpu::qwen35::byte_level {

namespace {

struct Tables {
  std::array<char32_t, 256> to_char{};
  std::array<short, 324> to_byte{};  // the alphabet ends at U+0143
  Tables() {
    to_byte.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_char[b] = printable ? static_cast<char32_t>(b) : next++;
      to_byte[to_char[b]] = static_cast<short>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t char_of(unsigned char b) {
  return tables().to_char[b];
}

int byte_of(char32_t cp) {
  return cp < 324 ? tables().to_byte[cp] : -1;
}

std::string to_token(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) text::append_utf8(out, char_of(static_cast<unsigned char>(c)));
  return out;
}

std::string to_bytes(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  // Token spellings come from a JSON string, so they are valid UTF-8.
  for (std::size_t pos = 0; pos < token.size();) {
    std::size_t start = pos;
    char32_t cp = text::next_code_point(token, pos);
    int b = byte_of(cp);
    if (b >= 0) {
      out.push_back(static_cast<char>(b));
    } else {
      out.append(token.substr(start, pos - start));
    }
  }
  return out;
}

}  // namespace qgpu::qwen35::byte_level
