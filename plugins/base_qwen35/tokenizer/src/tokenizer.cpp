// Encoding and decoding with a loaded tokenizer (byte-level BPE, added tokens, the chat format).
#include "qgpu/qwen35/tokenizer.h"

#include <algorithm>
#include <array>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "byte_level.h"
#include "text.h"
#include "tokenizer_impl.h"

namespace qgpu::qwen35 {

using sdk::ErrorCode;
using sdk::Expected;
using sdk::Status;

using namespace detail;

// Byte-pair merging of one pre-tokenized piece, lowest merge rank first and leftmost among equal
// ranks, which is the order Hugging Face's BPE applies merges in.
void Tokenizer::Impl::bpe(std::string_view piece, std::vector<TokenId>& out) const {
  if (piece.empty()) return;
  const bool cacheable = piece.size() <= kCachePieceBytes;
  if (cacheable) {
    std::lock_guard lock(cache_mutex);
    auto it = cache.find(piece);
    if (it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const std::size_t before = out.size();
  std::optional<TokenId> whole;
  if (ignore_merges) {
    auto it = ids.find(byte_level::to_token(piece));
    if (it != ids.end() && kinds[it->second] == Kind::kBpe) whole = it->second;
  }
  if (whole) {
    out.push_back(*whole);
  } else if (piece.size() == 1) {
    out.push_back(byte_ids[static_cast<unsigned char>(piece[0])]);
  } else {
    struct Symbol {
      TokenId id;
      int prev, next;
      bool alive;
    };
    struct Candidate {
      std::uint32_t rank;
      int pos;
      TokenId id;
      // std heaps are max-heaps: "less" means larger rank, then larger position.
      bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    thread_local std::vector<Symbol> sym;
    thread_local std::vector<Candidate> heap;
    sym.clear();
    heap.clear();
    const int n = static_cast<int>(piece.size());
    for (int i = 0; i < n; ++i) sym.push_back({byte_ids[static_cast<unsigned char>(piece[i])], i - 1, i + 1, true});
    sym.back().next = -1;
    auto push = [&](int pos) {
      int nx = sym[pos].next;
      if (nx < 0) return;
      auto it = merges.find(pair_key(sym[pos].id, sym[nx].id));
      if (it == merges.end()) return;
      heap.push_back({it->second.rank, pos, it->second.id});
      std::push_heap(heap.begin(), heap.end());
    };
    for (int i = 0; i + 1 < n; ++i) push(i);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end());
      Candidate top = heap.back();
      heap.pop_back();
      Symbol& s = sym[top.pos];
      if (!s.alive || s.next < 0) continue;
      // Stale when either side has merged since the candidate was queued.
      auto it = merges.find(pair_key(s.id, sym[s.next].id));
      if (it == merges.end() || it->second.id != top.id) continue;
      Symbol& right = sym[s.next];
      s.id = top.id;
      right.alive = false;
      s.next = right.next;
      if (s.next >= 0) sym[s.next].prev = top.pos;
      if (s.prev >= 0) push(s.prev);
      push(top.pos);
    }
    for (int i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
  }
  if (cacheable) {
    std::lock_guard lock(cache_mutex);
    if (cache.size() >= kCacheEntries) cache.clear();
    cache.emplace(std::string(piece),
                  std::vector<TokenId>(out.begin() + static_cast<std::ptrdiff_t>(before), out.end()));
  }
}

void Tokenizer::Impl::encode_segment(std::string_view segment, std::vector<TokenId>& out) const {
  if (segment.empty()) return;
  std::string normalized = text::normalize(form, segment);
  thread_local std::vector<std::string_view> pieces;
  pieces.clear();
  text::pre_tokenize(split, normalized, pieces);
  for (std::string_view p : pieces) bpe(p, out);
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Status validate_utf8(std::string_view text) {
  std::size_t bad = text::first_invalid_utf8(text);
  if (bad == std::string_view::npos) return Status::ok();
  return sdk::invalid_argument("invalid UTF-8 at byte offset " + std::to_string(bad) + " (byte " +
                               hex_byte(static_cast<unsigned char>(text[bad])) + ")");
}

Expected<std::vector<TokenId>> Tokenizer::encode(std::string_view text) const {
  QGPU_RETURN_IF_ERROR(validate_utf8(text).with_context("encode"));
  const Impl& m = *impl_;
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 4);
  std::size_t segment = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    if (m.added_first_byte[static_cast<unsigned char>(text[pos])]) {
      const AddedToken* hit = nullptr;
      for (const AddedToken& t : m.added) {
        if (text.compare(pos, t.content.size(), t.content) == 0) {
          hit = &t;
          break;
        }
      }
      if (hit != nullptr) {
        m.encode_segment(text.substr(segment, pos - segment), out);
        out.push_back(hit->id);
        pos += hit->content.size();
        segment = pos;
        continue;
      }
    }
    ++pos;
  }
  m.encode_segment(text.substr(segment), out);
  return out;
}

Expected<std::string> Tokenizer::decode(std::span<const TokenId> ids, InvalidUtf8 policy) const {
  const Impl& m = *impl_;
  std::string out;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    TokenId id = ids[i];
    if (id < 0 || id >= static_cast<TokenId>(m.kinds.size()) || m.kinds[id] == Kind::kHole) {
      return sdk::invalid_argument("decode: id " + std::to_string(id) + " at position " + std::to_string(i) +
                                   " is not in the vocabulary (ids 0.." + std::to_string(m.kinds.size() - 1) + ")");
    }
    out += m.bytes[id];
  }
  if (policy == InvalidUtf8::kReplace && text::first_invalid_utf8(out) != std::string_view::npos) {
    return text::replace_invalid_utf8(out);
  }
  return out;
}

std::optional<TokenId> Tokenizer::token_to_id(std::string_view token) const {
  auto it = impl_->ids.find(token);
  if (it == impl_->ids.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> Tokenizer::id_to_token(TokenId id) const {
  if (id < 0 || id >= static_cast<TokenId>(impl_->kinds.size()) || impl_->kinds[id] == Kind::kHole) return std::nullopt;
  return impl_->tokens[id];
}

std::int32_t Tokenizer::vocab_size() const {
  return static_cast<std::int32_t>(impl_->kinds.size());
}
std::int32_t Tokenizer::merge_count() const {
  return impl_->merge_count;
}
SpecialTokenIds Tokenizer::special_ids() const {
  return impl_->special;
}
bool Tokenizer::is_special(TokenId id) const {
  return id >= 0 && id < vocab_size() && impl_->kinds[id] == Kind::kSpecial;
}

std::string Tokenizer::normalize(std::string_view text) const {
  return text::normalize(impl_->form, text);
}

std::vector<std::string_view> Tokenizer::pre_tokenize(std::string_view normalized) const {
  std::vector<std::string_view> pieces;
  text::pre_tokenize(impl_->split, normalized, pieces);
  return pieces;
}

Expected<std::string> Tokenizer::apply_chat_template(const std::vector<ChatMessage>& messages,
                                                     const ChatOptions& options,
                                                     const std::vector<sdk::ToolDeclaration>& tools) const {
  return render_chat(messages, tools, options);
}

Expected<std::vector<TokenId>> Tokenizer::encode_chat(const std::vector<ChatMessage>& messages,
                                                      const ChatOptions& options,
                                                      const std::vector<sdk::ToolDeclaration>& tools) const {
  const SpecialTokenIds& s = impl_->special;
  if (s.im_start < 0 || s.im_end < 0 || s.think < 0 || s.end_think < 0) {
    return sdk::unsupported(
        "encode_chat: the tokenizer lacks the ChatML tokens <|im_start|>, <|im_end|>, <think>, </think>");
  }
  auto text = apply_chat_template(messages, options, tools);
  if (!text) return text.error();
  return encode(*text);
}

}  // namespace qgpu::qwen35
