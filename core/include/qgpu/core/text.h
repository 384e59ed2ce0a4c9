// Small string helpers for diagnostics.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace qgpu::core {

// Folds a multi-line message into one line ("a\nb" -> "a; b"), trimming blanks.
std::string one_line(std::string_view text);

// Joins with a separator.
std::string join(const std::vector<std::string>& items, std::string_view separator = ", ");

// The candidate closest to `word` by edit distance, or "" when none is close
// enough to be a plausible typo.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

// `bytes` with every maximal invalid UTF-8 subsequence replaced by U+FFFD
// (the Unicode "maximal subpart" practice, as Rust's from_utf8_lossy does).
std::string valid_utf8(std::string_view bytes);

}  // namespace qgpu::core
