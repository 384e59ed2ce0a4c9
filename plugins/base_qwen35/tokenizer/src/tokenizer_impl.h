// The tokenizer's tables (Tokenizer::Impl) shared by its two halves: encoding and decoding
// (tokenizer.cpp) and loading tokenizer.json (tokenizer_load.cpp). Private to the library.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "qgpu/qwen35/tokenizer.h"
#include "text.h"

namespace qgpu::qwen35::detail {

// Ids above this are refused: they would only make the id table huge.
constexpr TokenId kMaxId = 1 << 24;
// Pieces up to this many bytes are remembered; the cache is dropped when it reaches kCacheEntries.
constexpr std::size_t kCachePieceBytes = 48;
constexpr std::size_t kCacheEntries = 1 << 17;

inline std::string hex_byte(unsigned char b) {
  static const char* digits = "0123456789ABCDEF";
  return std::string("0x") + digits[b >> 4] + digits[b & 15];
}

inline std::string quote_short(std::string_view s) {
  std::string out = "'";
  out.append(s.substr(0, 60));
  if (s.size() > 60) out += "...";
  return out + "'";
}

enum class Kind : std::uint8_t { kHole, kBpe, kAdded, kSpecial };

struct AddedToken {
  std::string content;
  TokenId id;
};

struct Merge {
  std::uint32_t rank;
  TokenId id;
};

// Lets the string-keyed maps be searched with a string_view, without building a std::string.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

inline std::uint64_t pair_key(TokenId a, TokenId b) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}


}  // namespace qgpu::qwen35::detail

namespace qgpu::qwen35 {

struct Tokenizer::Impl {
  std::vector<std::string> tokens;  // id -> token as spelled in the file
  std::vector<std::string> bytes;   // id -> the bytes it decodes to
  std::vector<detail::Kind> kinds;
  detail::StringMap<TokenId> ids;  // token spelling -> id (vocabulary and added tokens)
  std::array<TokenId, 256> byte_ids{};
  std::unordered_map<std::uint64_t, detail::Merge> merges;
  std::int32_t merge_count = 0;
  bool ignore_merges = false;
  std::vector<detail::AddedToken> added;  // longest first, so the first match at a position is the longest
  std::array<bool, 256> added_first_byte{};
  text::Form form = text::Form::kNone;
  text::SplitPattern split = text::SplitPattern::kQwen35;
  SpecialTokenIds special;

  mutable std::mutex cache_mutex;
  mutable detail::StringMap<std::vector<TokenId>> cache;

  void bpe(std::string_view piece, std::vector<TokenId>& out) const;
  void encode_segment(std::string_view segment, std::vector<TokenId>& out) const;
};

}  // namespace qgpu::qwen35
