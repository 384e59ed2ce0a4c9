// Text stages of the tokenizer: UTF-8 handling, Unicode normalization and the pre-tokenizer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qgpu::qwen35::text {

// Decodes one code point of valid UTF-8 at `pos` and advances it.
char32_t next_code_point(std::string_view s, std::size_t& pos);
void append_utf8(std::string& out, char32_t cp);
// Offset of the first byte of the first ill-formed sequence (Unicode 3.9, D92), or npos.
std::size_t first_invalid_utf8(std::string_view s);
// Replaces each maximal ill-formed subsequence with U+FFFD (the W3C / Rust from_utf8_lossy rule).
std::string replace_invalid_utf8(std::string_view s);

enum class Form { kNone, kNfc, kNfd, kNfkc, kNfkd };
// `s` in normalization form `form`; `s` must be valid UTF-8.
std::string normalize(Form form, std::string_view s);

// The two Split patterns we implement. The Qwen3.5 one adds \p{M} (combining marks) to letter runs.
enum class SplitPattern { kQwen2, kQwen35 };
extern const char* const kQwen2Pattern;
extern const char* const kQwen35Pattern;

// Appends the pieces of `s` (valid UTF-8) as the pattern's matches, in order; they tile `s`.
void pre_tokenize(SplitPattern pattern, std::string_view s, std::vector<std::string_view>& pieces);

}  // namespace qgpu::qwen35::text
