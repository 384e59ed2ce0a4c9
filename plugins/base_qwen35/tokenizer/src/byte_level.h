// GPT-2's byte-level alphabet: every byte is spelled as one printable code point, so that BPE
// tokens are strings. Bytes that are printable in Latin-1 map to themselves; the 68 others map to
// U+0100.. in byte order (space, 0x20, becomes U+0120 'Ġ').
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace qgpu::qwen35::byte_level {

// The code point that spells byte b.
char32_t char_of(unsigned char b);
// The byte a code point spells, or -1 when it is outside the alphabet.
int byte_of(char32_t cp);
// Bytes -> token spelling.
std::string to_token(std::string_view bytes);
// Token spelling -> bytes; code points outside the alphabet are kept as their UTF-8 (as the
// Hugging Face ByteLevel decoder does).
std::string to_bytes(std::string_view token);

}  // namespace qgpu::qwen35::byte_level
