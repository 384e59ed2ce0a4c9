#include "text.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>

#include <array>
#include <memory>

namespace qgpu::qwen35::text {

const char* const kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen35Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

char32_t next_code_point(std::string_view s, std::size_t& pos) {
  auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  unsigned char c = b(pos);
  if (c < 0x80) {
    ++pos;
    return c;
  }
  if (c < 0xE0) {
    char32_t cp = ((c & 0x1Fu) << 6) | (b(pos + 1) & 0x3Fu);
    pos += 2;
    return cp;
  }
  if (c < 0xF0) {
    char32_t cp = ((c & 0x0Fu) << 12) | ((b(pos + 1) & 0x3Fu) << 6) | (b(pos + 2) & 0x3Fu);
    pos += 3;
    return cp;
  }
  char32_t cp = ((c & 0x07u) << 18) | ((b(pos + 1) & 0x3Fu) << 12) | ((b(pos + 2) & 0x3Fu) << 6) | (b(pos + 3) & 0x3Fu);
  pos += 4;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {

// Length of the well-formed sequence at `pos`, or the length of the maximal ill-formed prefix
// negated (at least 1) when the sequence there is ill-formed (Unicode Table 3-7).
int sequence_length(std::string_view s, std::size_t pos) {
  auto b = [&](std::size_t i) -> int { return i < s.size() ? static_cast<unsigned char>(s[i]) : -1; };
  int c = b(pos);
  if (c < 0x80) return 1;
  int need;
  int lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return -1;
  }
  for (int k = 1; k <= need; ++k) {
    int x = b(pos + k);
    int l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (x < l || x > h) return -k;
  }
  return need + 1;
}

}  // namespace

std::size_t first_invalid_utf8(std::string_view s) {
  std::size_t pos = 0;
  while (pos < s.size()) {
    // ASCII fast path, 8 bytes at a time.
    while (pos + 8 <= s.size()) {
      std::uint64_t w;
      __builtin_memcpy(&w, s.data() + pos, 8);
      if (w & 0x8080808080808080ull) break;
      pos += 8;
    }
    if (pos >= s.size()) break;
    int n = sequence_length(s, pos);
    if (n < 0) return pos;
    pos += static_cast<std::size_t>(n);
  }
  return std::string_view::npos;
}

std::string replace_invalid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t pos = 0;
  while (pos < s.size()) {
    int n = sequence_length(s, pos);
    if (n > 0) {
      out.append(s.substr(pos, static_cast<std::size_t>(n)));
      pos += static_cast<std::size_t>(n);
    } else {
      out.append("\xEF\xBF\xBD");
      pos += static_cast<std::size_t>(-n);
    }
  }
  return out;
}

std::string normalize(Form form, std::string_view s) {
  if (form == Form::kNone) return std::string(s);
  // Code points below U+0300 are stable under NFC and NFD (they neither decompose nor compose with
  // what precedes them), and their UTF-8 bytes are all below 0xCC: skip ICU for such text.
  bool low = true;
  for (char ch : s) {
    if (static_cast<unsigned char>(ch) >= 0xCC) {
      low = false;
      break;
    }
  }
  if (low && (form == Form::kNfc || form == Form::kNfd)) return std::string(s);
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  switch (form) {
    case Form::kNfc: n = icu::Normalizer2::getNFCInstance(err); break;
    case Form::kNfd: n = icu::Normalizer2::getNFDInstance(err); break;
    case Form::kNfkc: n = icu::Normalizer2::getNFKCInstance(err); break;
    case Form::kNfkd: n = icu::Normalizer2::getNFKDInstance(err); break;
    case Form::kNone: break;
  }
  if (U_FAILURE(err) || n == nullptr) return std::string(s);
  icu::StringPiece piece(s.data(), static_cast<int32_t>(s.size()));
  if (n->isNormalizedUTF8(piece, err) && U_SUCCESS(err)) return std::string(s);
  err = U_ZERO_ERROR;
  std::string out;
  out.reserve(s.size() + 16);
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(s.size()));
  n->normalizeUTF8(0, piece, sink, nullptr, err);
  return out;
}

namespace {

// Character classes of the pattern: \p{L}, \p{M}, \p{N}, \s (Unicode White_Space, which is what
// Oniguruma's \s means for Unicode text).
enum : std::uint8_t { kL = 1, kM = 2, kN = 4, kS = 8 };

std::uint8_t classify_slow(char32_t cp) {
  std::uint32_t mask = U_GET_GC_MASK(static_cast<UChar32>(cp));
  std::uint8_t c = 0;
  if (mask & U_GC_L_MASK) c |= kL;
  if (mask & U_GC_M_MASK) c |= kM;
  if (mask & U_GC_N_MASK) c |= kN;
  if (u_isUWhiteSpace(static_cast<UChar32>(cp))) c |= kS;
  return c;
}

// The Basic Multilingual Plane is tabulated once; the rest goes to ICU.
const std::array<std::uint8_t, 0x10000>& bmp_table() {
  static const auto* table = [] {
    auto* t = new std::array<std::uint8_t, 0x10000>();
    for (char32_t cp = 0; cp < 0x10000; ++cp) (*t)[cp] = classify_slow(cp);
    return t;
  }();
  return *table;
}

inline std::uint8_t classify(char32_t cp) {
  return cp < 0x10000 ? bmp_table()[cp] : classify_slow(cp);
}

// ASCII case folding plus U+017F (long s), whose simple case fold is 's'; the only non-ASCII
// characters that fold onto the letters of the contractions.
inline char32_t fold(char32_t cp) {
  if (cp >= 'A' && cp <= 'Z') return cp + 32;
  if (cp == 0x17F) return 's';
  return cp;
}

}  // namespace

void pre_tokenize(SplitPattern pattern, std::string_view s, std::vector<std::string_view>& pieces) {
  // Decode once: code points, their classes and byte offsets.
  thread_local std::vector<char32_t> cps;
  thread_local std::vector<std::uint8_t> cls;
  thread_local std::vector<std::uint32_t> off;
  cps.clear();
  cls.clear();
  off.clear();
  for (std::size_t pos = 0; pos < s.size();) {
    off.push_back(static_cast<std::uint32_t>(pos));
    char32_t cp = next_code_point(s, pos);
    cps.push_back(cp);
    cls.push_back(classify(cp));
  }
  const std::size_t n = cps.size();
  off.push_back(static_cast<std::uint32_t>(s.size()));

  const bool marks = pattern == SplitPattern::kQwen35;
  const std::uint8_t run_mask = kL | (marks ? kM : 0);                  // [\p{L}\p{M}]+ or \p{L}+
  const std::uint8_t other_excluded = kS | kL | kN | (marks ? kM : 0);  // [^\s\p{L}(\p{M})\p{N}]
  auto is_nl = [&](std::size_t i) { return cps[i] == '\r' || cps[i] == '\n'; };
  auto is_run = [&](std::size_t i) { return i < n && (cls[i] & run_mask); };
  auto is_other = [&](std::size_t i) { return i < n && !(cls[i] & other_excluded); };

  // Each branch below is one alternative of the pattern, tried in order at p; the comments give
  // the match that the backtracking regex would produce.
  auto match = [&](std::size_t p) -> std::size_t {
    const char32_t c = cps[p];
    // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if (c == '\'' && p + 1 < n) {
      char32_t a = fold(cps[p + 1]);
      if (a == 's' || a == 't' || a == 'm' || a == 'd') return p + 2;
      if (p + 2 < n) {
        char32_t b = fold(cps[p + 2]);
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return p + 3;
      }
    }
    // [^\r\n\p{L}\p{N}]?RUN+ : an optional non-letter, non-digit, non-newline prefix, then the run.
    if (!is_nl(p) && !(cls[p] & (kL | kN)) && is_run(p + 1)) {
      std::size_t q = p + 1;
      while (is_run(q)) ++q;
      return q;
    }
    if (is_run(p)) {
      std::size_t q = p;
      while (is_run(q)) ++q;
      return q;
    }
    // \p{N}: one digit at a time.
    if (cls[p] & kN) return p + 1;
    // ' ?OTHER+[\r\n]*'
    std::size_t q = (c == ' ' && is_other(p + 1)) ? p + 1 : p;
    if (is_other(q)) {
      while (is_other(q)) ++q;
      while (q < n && is_nl(q)) ++q;
      return q;
    }
    // Only whitespace is left here. Let [p, e) be the whitespace run.
    std::size_t e = p, last_nl = n;
    while (e < n && (cls[e] & kS)) {
      if (is_nl(e)) last_nl = e;
      ++e;
    }
    if (e == p) return p + 1;  // unreachable: every code point is in some class above
    // \s*[\r\n]+ : \s* backtracks to the last newline of the run.
    if (last_nl < n) return last_nl + 1;
    // \s+(?!\S) : the whole run at the end of text, else all but its last character.
    if (e == n) return e;
    if (e - p >= 2) return e - 1;
    // \s+
    return e;
  };

  for (std::size_t p = 0; p < n;) {
    std::size_t e = match(p);
    pieces.push_back(s.substr(off[p], off[e] - off[p]));
    p = e;
  }
}

}  // namespace qgpu::qwen35::text
