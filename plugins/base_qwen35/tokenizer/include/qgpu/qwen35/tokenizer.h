// The Qwen3.5 tokenizer: a Hugging Face tokenizer.json (byte-level BPE) loaded and run in C++.
//
// Pipeline, as the file describes it: added tokens are cut out of the raw text first (whole-string,
// leftmost-longest); every other stretch is normalized (NFC), split by the Qwen pre-tokenizer regex
// (a hand-written matcher equivalent to the pattern), mapped to bytes and merged by BPE rank.
// Decoding maps tokens back to bytes (ByteLevel decoder). See docs/TOKENIZER.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qgpu/qwen35/chat.h"
#include "qgpu/sdk/status.h"

namespace qgpu::qwen35 {

using TokenId = std::int32_t;

// Ids of the tokens the runtime needs by name; -1 where the file lacks the token.
struct SpecialTokenIds {
  TokenId endoftext = -1;  // <|endoftext|>: the model's EOS and the pad token
  TokenId im_start = -1;   // <|im_start|>
  TokenId im_end = -1;     // <|im_end|>: the tokenizer's EOS, ends a chat turn
  TokenId think = -1;      // <think>
  TokenId end_think = -1;  // </think>
};

// What decode() does with bytes that are not valid UTF-8 (a token sequence cut inside a character).
enum class InvalidUtf8 {
  kReplace,  // each maximal invalid subsequence becomes U+FFFD (as Rust's from_utf8_lossy / HF decode)
  kKeep,     // return the bytes unchanged (for streaming: join pieces, then validate)
};

class Tokenizer {
 public:
  // Reads and validates `path` (a tokenizer.json). Errors name the file and the JSON pointer of the
  // offending element ("tokenizer.json: /model/merges/17: ..."), or file:line:col for bad JSON.
  static sdk::Expected<Tokenizer> load(const std::filesystem::path& path);
  // The same from text already in memory; `source` names it in errors.
  static sdk::Expected<Tokenizer> parse(std::string_view json_text, std::string_view source = "tokenizer.json");

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Text (UTF-8) -> ids. Invalid UTF-8 is an error naming the byte offset. No BOS/EOS is added.
  sdk::Expected<std::vector<TokenId>> encode(std::string_view text) const;
  // Ids -> text. An id outside the vocabulary is an error; added tokens decode to their content.
  sdk::Expected<std::string> decode(std::span<const TokenId> ids, InvalidUtf8 policy = InvalidUtf8::kReplace) const;

  std::optional<TokenId> token_to_id(std::string_view token) const;  // token as spelled in the file
  std::optional<std::string> id_to_token(TokenId id) const;
  // Number of ids: one past the largest id of the vocabulary and the added tokens.
  std::int32_t vocab_size() const;
  std::int32_t merge_count() const;
  SpecialTokenIds special_ids() const;
  bool is_special(TokenId id) const;  // an added token with "special": true

  // The official chat template (chat.h: render_chat), then, for encode_chat, encode(): message text
  // is encoded like any other text, so added tokens written in it are recognized.
  sdk::Expected<std::string> apply_chat_template(const std::vector<ChatMessage>& messages,
                                                 const ChatOptions& options = {},
                                                 const std::vector<sdk::ToolDeclaration>& tools = {}) const;
  sdk::Expected<std::vector<TokenId>> encode_chat(const std::vector<ChatMessage>& messages,
                                                  const ChatOptions& options = {},
                                                  const std::vector<sdk::ToolDeclaration>& tools = {}) const;

  // The stages, exposed for tests and tools. Both take valid UTF-8.
  std::string normalize(std::string_view text) const;
  std::vector<std::string_view> pre_tokenize(std::string_view normalized) const;

  struct Impl;  // opaque; defined in tokenizer.cpp

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Checks that `text` is well-formed UTF-8; the error names the first bad byte's offset.
sdk::Status validate_utf8(std::string_view text);

// Writes a small, deterministic tokenizer.json with the same pipeline as Qwen3.5: the 256 byte-level
// tokens (ids 0..255, in GPT-2's byte order), merges learnt greedily from a built-in English/code
// sample until the BPE vocabulary has `vocab_size` tokens, then the 33 Qwen3.5 added tokens renumbered
// to vocab_size..vocab_size+32. vocab_size must be in [256, 720] (720: what the sample yields).
sdk::Status write_synthetic_tokenizer(const std::filesystem::path& path, std::int32_t vocab_size);
// The same document as text.
sdk::Expected<std::string> synthetic_tokenizer_json(std::int32_t vocab_size);

}  // namespace qgpu::qwen35
