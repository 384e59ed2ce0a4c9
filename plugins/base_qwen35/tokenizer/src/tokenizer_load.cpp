// Loading tokenizer.json into the tokenizer's tables: a streaming reader for the vocabulary and
// merges, checked field by field, errors naming the JSON pointer.
#include "qgpu/qwen35/tokenizer.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>

#include "byte_level.h"
#include "text.h"
#include "tokenizer_impl.h"

namespace qgpu::qwen35 {

using sdk::ErrorCode;
using sdk::Expected;
using sdk::Status;
using Json = nlohmann::json;

using namespace detail;

namespace {

// Streams /model/vocab and /model/merges (99% of a real file) into flat vectors and builds the
// DOM only for the rest: a DOM of 250k vocabulary entries costs more than the tokenizer itself.
struct BigParts {
  std::vector<std::pair<std::string, std::int64_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;  // second empty: "left right" form
  bool has_vocab = false, has_merges = false;
};

class Reader : public nlohmann::json_sax<Json> {
 public:
  Json root;
  BigParts big;
  std::string error_pointer, error_message;  // a shape error inside vocab/merges
  bool syntax_error = false;
  std::size_t error_byte = 0;
  std::string syntax_message;

  bool null() override { return value(Json(nullptr)); }
  bool boolean(bool v) override { return value(Json(v)); }
  bool number_integer(number_integer_t v) override { return integer(v); }
  bool number_unsigned(number_unsigned_t v) override {
    return integer(v > static_cast<number_unsigned_t>(INT64_MAX) ? INT64_MAX : static_cast<std::int64_t>(v));
  }
  bool number_float(number_float_t v, const string_t&) override { return value(Json(v)); }
  bool binary(binary_t&) override { return value(Json()); }
  bool string(string_t& v) override {
    if (mode_ == Mode::kMerges) {
      big.merges.emplace_back(std::move(v), std::string());
      return true;
    }
    if (mode_ == Mode::kPair) {
      if (pair_.size() < 2) pair_.push_back(std::move(v));
      ++pair_count_;
      return true;
    }
    return value(Json(std::move(v)));
  }
  bool start_object(std::size_t) override {
    if (mode_ == Mode::kDom && at_model() && key_ == "vocab") {
      mode_ = Mode::kVocab;
      big.has_vocab = true;
      return true;
    }
    return open(Json::object());
  }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool end_object() override {
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kDom;
      return true;
    }
    stack_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    if (mode_ == Mode::kDom && at_model() && key_ == "merges") {
      mode_ = Mode::kMerges;
      big.has_merges = true;
      return true;
    }
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kPair;
      pair_.clear();
      pair_count_ = 0;
      return true;
    }
    return open(Json::array());
  }
  bool end_array() override {
    if (mode_ == Mode::kPair) {
      mode_ = Mode::kMerges;
      // A non-string element left an empty slot; an empty right side would read as "left right".
      if (pair_count_ != 2 || pair_.size() != 2 || pair_[0].empty() || pair_[1].empty()) return bad_merge();
      big.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      return true;
    }
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kDom;
      return true;
    }
    stack_.pop_back();
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    syntax_error = true;
    error_byte = position;
    syntax_message = e.what();
    return false;
  }

 private:
  enum class Mode { kDom, kVocab, kMerges, kPair };

  bool at_model() const { return stack_.size() == 2 && model_ == stack_[1]; }

  bool integer(std::int64_t v) {
    if (mode_ == Mode::kVocab) {
      big.vocab.emplace_back(std::move(key_), v);
      return true;
    }
    return value(Json(v));
  }
  bool bad_merge() {
    error_pointer = "/model/merges/" + std::to_string(big.merges.size());
    error_message = "expected \"left right\" or [\"left\", \"right\"]";
    return false;
  }
  bool value(Json v) {
    if (mode_ == Mode::kVocab) {
      error_pointer = "/model/vocab/" + key_;
      error_message = "expected an integer id";
      return false;
    }
    if (mode_ == Mode::kMerges || mode_ == Mode::kPair) {
      if (mode_ == Mode::kMerges) return bad_merge();
      ++pair_count_;  // a non-string inside a pair: reported at its end
      pair_.emplace_back();
      return true;
    }
    if (stack_.empty()) {
      root = std::move(v);
      return true;
    }
    Json* top = stack_.back();
    if (top->is_object()) {
      (*top)[key_] = std::move(v);
    } else {
      top->push_back(std::move(v));
    }
    return true;
  }
  bool open(Json container) {
    if (mode_ != Mode::kDom) {
      if (mode_ == Mode::kVocab) return value(Json());
      if (mode_ == Mode::kMerges || mode_ == Mode::kPair) {
        mode_ = Mode::kMerges;
        return bad_merge();
      }
    }
    Json* slot;
    if (stack_.empty()) {
      root = std::move(container);
      slot = &root;
    } else if (stack_.back()->is_object()) {
      slot = &((*stack_.back())[key_] = std::move(container));
    } else {
      stack_.back()->push_back(std::move(container));
      slot = &stack_.back()->back();
    }
    if (stack_.size() == 1 && key_ == "model" && slot->is_object()) model_ = slot;
    stack_.push_back(slot);
    return true;
  }

  Mode mode_ = Mode::kDom;
  std::vector<Json*> stack_;
  std::string key_;
  Json* model_ = nullptr;
  std::vector<std::string> pair_;
  int pair_count_ = 0;
};

class Loader {
 public:
  explicit Loader(std::string source) : source_(std::move(source)) {}

  Status error(ErrorCode code, const std::string& pointer, const std::string& message) const {
    return Status(code, pointer + ": " + message, source_);
  }
  Status bad(const std::string& pointer, const std::string& message) const {
    return error(ErrorCode::kParseError, pointer, message);
  }
  Status unsupported(const std::string& pointer, const std::string& message) const {
    return error(ErrorCode::kUnsupported, pointer, message);
  }

  // `j[key]` must be absent, null, or equal to `want`.
  Status expect_value(const Json& obj, const std::string& pointer, const char* key, const Json& want,
                      bool null_ok = true) const {
    auto it = obj.find(key);
    if (it == obj.end() || (null_ok && it->is_null())) return Status::ok();
    if (*it != want) {
      return unsupported(pointer + "/" + key, "unsupported value " + it->dump() + " (supported: " + want.dump() + ")");
    }
    return Status::ok();
  }

  Status type_of(const Json& obj, const std::string& pointer, std::string& type) const {
    if (!obj.is_object()) return bad(pointer, "expected an object, found " + std::string(obj.type_name()));
    auto it = obj.find("type");
    if (it == obj.end() || !it->is_string()) return bad(pointer + "/type", "missing string member \"type\"");
    type = it->get<std::string>();
    return Status::ok();
  }

  Status normalizer(const Json& j, text::Form& form) const {
    form = text::Form::kNone;
    if (j.is_null()) return Status::ok();
    std::string type;
    QGPU_RETURN_IF_ERROR(type_of(j, "/normalizer", type));
    const Json* one = &j;
    std::string pointer = "/normalizer";
    if (type == "Sequence") {
      auto it = j.find("normalizers");
      if (it == j.end() || !it->is_array()) return bad("/normalizer/normalizers", "missing array");
      if (it->empty()) return Status::ok();
      if (it->size() > 1) {
        return unsupported("/normalizer/normalizers",
                           "a sequence of " + std::to_string(it->size()) + " normalizers is unsupported (at most 1)");
      }
      one = &(*it)[0];
      pointer = "/normalizer/normalizers/0";
      QGPU_RETURN_IF_ERROR(type_of(*one, pointer, type));
    }
    if (type == "NFC") {
      form = text::Form::kNfc;
    } else if (type == "NFD") {
      form = text::Form::kNfd;
    } else if (type == "NFKC") {
      form = text::Form::kNfkc;
    } else if (type == "NFKD") {
      form = text::Form::kNfkd;
    } else {
      return unsupported(pointer + "/type", "unsupported normalizer '" + type + "' (supported: NFC, NFD, NFKC, NFKD)");
    }
    return Status::ok();
  }

  Status byte_level(const Json& j, const std::string& pointer) const {
    QGPU_RETURN_IF_ERROR(expect_value(j, pointer, "add_prefix_space", false));
    QGPU_RETURN_IF_ERROR(expect_value(j, pointer, "use_regex", false, false));
    return Status::ok();
  }

  Status pre_tokenizer(const Json& j, text::SplitPattern& pattern) const {
    std::string type;
    if (j.is_null())
      return unsupported("/pre_tokenizer", "a missing pre-tokenizer is unsupported (need Split + ByteLevel)");
    QGPU_RETURN_IF_ERROR(type_of(j, "/pre_tokenizer", type));
    if (type != "Sequence") {
      return unsupported("/pre_tokenizer/type",
                         "unsupported pre-tokenizer '" + type + "' (supported: Sequence of Split and ByteLevel)");
    }
    auto it = j.find("pretokenizers");
    if (it == j.end() || !it->is_array()) return bad("/pre_tokenizer/pretokenizers", "missing array");
    if (it->size() != 2) {
      return unsupported("/pre_tokenizer/pretokenizers",
                         "expected 2 pre-tokenizers (Split, ByteLevel), found " + std::to_string(it->size()));
    }
    const Json& split = (*it)[0];
    QGPU_RETURN_IF_ERROR(type_of(split, "/pre_tokenizer/pretokenizers/0", type));
    if (type != "Split") {
      return unsupported("/pre_tokenizer/pretokenizers/0/type",
                         "unsupported pre-tokenizer '" + type + "' (supported: Split)");
    }
    const std::string sp = "/pre_tokenizer/pretokenizers/0";
    auto pat = split.find("pattern");
    if (pat == split.end() || !pat->is_object() || !pat->contains("Regex") || !(*pat)["Regex"].is_string()) {
      return unsupported(sp + "/pattern", "expected {\"Regex\": \"...\"}");
    }
    std::string regex = (*pat)["Regex"].get<std::string>();
    if (regex == text::kQwen35Pattern) {
      pattern = text::SplitPattern::kQwen35;
    } else if (regex == text::kQwen2Pattern) {
      pattern = text::SplitPattern::kQwen2;
    } else {
      return unsupported(sp + "/pattern/Regex", "unsupported Split regex " + quote_short(regex) +
                                                    " (supported: the Qwen3.5 and the Qwen2/Qwen3 patterns)");
    }
    QGPU_RETURN_IF_ERROR(expect_value(split, sp, "behavior", "Isolated", false));
    QGPU_RETURN_IF_ERROR(expect_value(split, sp, "invert", false));
    const Json& level = (*it)[1];
    QGPU_RETURN_IF_ERROR(type_of(level, "/pre_tokenizer/pretokenizers/1", type));
    if (type != "ByteLevel") {
      return unsupported("/pre_tokenizer/pretokenizers/1/type",
                         "unsupported pre-tokenizer '" + type + "' (supported: ByteLevel)");
    }
    return byte_level(level, "/pre_tokenizer/pretokenizers/1");
  }

  Status model(const Json& j, BigParts& big, Tokenizer::Impl& m) const;
  Status added_tokens(const Json& j, Tokenizer::Impl& m) const;

 private:
  std::string source_;
};

Status Loader::model(const Json& j, BigParts& big, Tokenizer::Impl& m) const {
  std::string type;
  QGPU_RETURN_IF_ERROR(type_of(j, "/model", type));
  if (type != "BPE") return unsupported("/model/type", "unsupported model '" + type + "' (supported: BPE)");
  QGPU_RETURN_IF_ERROR(expect_value(j, "/model", "dropout", nullptr));
  QGPU_RETURN_IF_ERROR(expect_value(j, "/model", "unk_token", nullptr));
  QGPU_RETURN_IF_ERROR(expect_value(j, "/model", "continuing_subword_prefix", ""));
  QGPU_RETURN_IF_ERROR(expect_value(j, "/model", "end_of_word_suffix", ""));
  QGPU_RETURN_IF_ERROR(expect_value(j, "/model", "byte_fallback", false));
  if (auto it = j.find("ignore_merges"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) return bad("/model/ignore_merges", "expected a boolean");
    m.ignore_merges = it->get<bool>();
  }
  if (!big.has_vocab) return bad("/model/vocab", "missing object");
  TokenId max_id = -1;
  for (const auto& [token, id] : big.vocab) {
    if (id < 0 || id >= kMaxId) {
      return error(ErrorCode::kLimitExceeded, "/model/vocab/" + token,
                   "id " + std::to_string(id) + " is outside 0.." + std::to_string(kMaxId - 1));
    }
    max_id = std::max(max_id, static_cast<TokenId>(id));
  }
  m.tokens.assign(static_cast<std::size_t>(max_id + 1), {});
  m.bytes.assign(m.tokens.size(), {});
  m.kinds.assign(m.tokens.size(), Kind::kHole);
  m.ids.reserve(big.vocab.size() + 64);
  for (auto& [token, id64] : big.vocab) {
    auto id = static_cast<TokenId>(id64);
    if (m.kinds[id] != Kind::kHole) {
      return bad("/model/vocab/" + token, "id " + std::to_string(id) + " is also used by " + quote_short(m.tokens[id]));
    }
    m.kinds[id] = Kind::kBpe;
    m.bytes[id] = byte_level::to_bytes(token);
    m.ids.emplace(token, id);
    m.tokens[id] = std::move(token);
  }
  for (int b = 0; b < 256; ++b) {
    auto it = m.ids.find(byte_level::to_token(std::string(1, static_cast<char>(b))));
    if (it == m.ids.end()) {
      return bad("/model/vocab", "no token for byte " + hex_byte(static_cast<unsigned char>(b)) + " (" +
                                     byte_level::to_token(std::string(1, static_cast<char>(b))) +
                                     "); byte-level BPE needs all 256");
    }
    m.byte_ids[b] = it->second;
  }
  if (!big.has_merges) return bad("/model/merges", "missing array");
  m.merges.reserve(big.merges.size());
  std::uint32_t rank = 0;
  std::string joined;
  for (const auto& [left, right] : big.merges) {
    const std::string pointer = "/model/merges/" + std::to_string(rank);
    std::string_view a = left, b = right;
    if (right.empty()) {  // "left right"
      std::size_t space = left.find(' ');
      if (space == std::string::npos || left.find(' ', space + 1) != std::string::npos) {
        return bad(pointer, "expected \"left right\" (two tokens and one space), found " + quote_short(left));
      }
      a = std::string_view(left).substr(0, space);
      b = std::string_view(left).substr(space + 1);
    }
    auto ia = m.ids.find(a);
    auto ib = m.ids.find(b);
    if (ia == m.ids.end()) return bad(pointer, "token " + quote_short(a) + " is not in the vocabulary");
    if (ib == m.ids.end()) return bad(pointer, "token " + quote_short(b) + " is not in the vocabulary");
    joined.assign(a);
    joined.append(b);
    auto ij = m.ids.find(joined);
    if (ij == m.ids.end()) return bad(pointer, "merged token " + quote_short(joined) + " is not in the vocabulary");
    // A repeated pair takes its last rank, as Hugging Face's map building does.
    m.merges[pair_key(ia->second, ib->second)] = Merge{rank, ij->second};
    ++rank;
  }
  m.merge_count = static_cast<std::int32_t>(rank);
  return Status::ok();
}

Status Loader::added_tokens(const Json& j, Tokenizer::Impl& m) const {
  if (j.is_null()) return Status::ok();
  if (!j.is_array()) return bad("/added_tokens", "expected an array");
  for (std::size_t i = 0; i < j.size(); ++i) {
    const std::string pointer = "/added_tokens/" + std::to_string(i);
    const Json& t = j[i];
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
        !t["content"].is_string()) {
      return bad(pointer, "expected an object with an integer \"id\" and a string \"content\"");
    }
    auto id64 = t["id"].get<std::int64_t>();
    if (id64 < 0 || id64 >= kMaxId) {
      return error(ErrorCode::kLimitExceeded, pointer + "/id",
                   "id " + std::to_string(id64) + " is outside 0.." + std::to_string(kMaxId - 1));
    }
    auto id = static_cast<TokenId>(id64);
    const std::string& content = t["content"].get_ref<const std::string&>();
    if (content.empty()) return bad(pointer + "/content", "empty added token");
    if (text::first_invalid_utf8(content) != std::string_view::npos) return bad(pointer + "/content", "invalid UTF-8");
    for (const char* flag : {"single_word", "lstrip", "rstrip", "normalized"}) {
      auto f = t.find(flag);
      if (f != t.end() && !f->is_boolean()) return bad(pointer + "/" + flag, "expected a boolean");
      if (f != t.end() && f->get<bool>()) {
        return unsupported(pointer + "/" + flag, std::string("added token ") + quote_short(content) + " sets \"" +
                                                     flag + "\": true, which is unsupported (only false)");
      }
    }
    bool special = false;
    if (auto f = t.find("special"); f != t.end()) {
      if (!f->is_boolean()) return bad(pointer + "/special", "expected a boolean");
      special = f->get<bool>();
    }
    if (static_cast<std::size_t>(id) >= m.kinds.size()) {
      m.tokens.resize(static_cast<std::size_t>(id) + 1);
      m.bytes.resize(m.tokens.size());
      m.kinds.resize(m.tokens.size(), Kind::kHole);
    }
    if (m.kinds[id] == Kind::kAdded || m.kinds[id] == Kind::kSpecial) {
      return bad(pointer + "/id",
                 "id " + std::to_string(id) + " is used by another added token " + quote_short(m.tokens[id]));
    }
    if (m.kinds[id] == Kind::kBpe && m.tokens[id] != content) {
      return bad(pointer + "/id", "id " + std::to_string(id) + " is the vocabulary token " + quote_short(m.tokens[id]) +
                                      ", not " + quote_short(content));
    }
    if (auto other = m.ids.find(content); other != m.ids.end() && other->second != id) {
      return bad(pointer + "/content", quote_short(content) + " already has id " + std::to_string(other->second) +
                                           ", not " + std::to_string(id));
    }
    m.kinds[id] = special ? Kind::kSpecial : Kind::kAdded;
    m.tokens[id] = content;
    m.bytes[id] = content;  // added tokens decode to their content verbatim
    m.ids[content] = id;
    m.added.push_back({content, id});
    m.added_first_byte[static_cast<unsigned char>(content[0])] = true;
  }
  std::stable_sort(m.added.begin(), m.added.end(),
                   [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
  return Status::ok();
}

// "line L, column C" of byte `offset`, 1-based.
std::string line_col(std::string_view text, std::size_t offset) {
  offset = std::min(offset, text.size());
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

}  // namespace

Expected<Tokenizer> Tokenizer::parse(std::string_view json_text, std::string_view source) {
  const std::string src(source);
  Reader reader;
  try {
    Json::sax_parse(json_text, &reader);
  } catch (const std::exception& e) {
    return Status(ErrorCode::kParseError, std::string("malformed JSON: ") + e.what(), src);
  }
  if (reader.syntax_error) {
    // nlohmann's message: "[json.exception.parse_error.101] parse error at line 1, column 2: <reason>".
    const std::string& what = reader.syntax_message;
    std::size_t colon = what.find(": ", what.find("column"));
    std::string reason = colon == std::string::npos ? what : what.substr(colon + 2);
    std::size_t at = reader.error_byte == 0 ? 0 : reader.error_byte - 1;
    return sdk::error_at(src + ":" + line_col(json_text, at), ErrorCode::kParseError, "malformed JSON: " + reason);
  }
  if (!reader.error_pointer.empty()) {
    return Status(ErrorCode::kParseError, reader.error_pointer + ": " + reader.error_message, src);
  }
  Json& doc = reader.root;
  Loader loader(src);
  if (!doc.is_object()) return loader.bad("", "expected a JSON object at the top level");
  try {
    auto impl = std::make_unique<Impl>();
    for (const char* key : {"truncation", "padding"}) {
      if (auto it = doc.find(key); it != doc.end() && !it->is_null()) {
        return loader.unsupported(std::string("/") + key, std::string("\"") + key + "\" must be null (unsupported)");
      }
    }
    auto get = [&](const char* key) -> const Json& {
      static const Json kNull;
      auto it = doc.find(key);
      return it == doc.end() ? kNull : *it;
    };
    if (get("model").is_null()) return loader.bad("/model", "missing member \"model\"");
    QGPU_RETURN_IF_ERROR(loader.model(get("model"), reader.big, *impl));
    QGPU_RETURN_IF_ERROR(loader.normalizer(get("normalizer"), impl->form));
    QGPU_RETURN_IF_ERROR(loader.pre_tokenizer(get("pre_tokenizer"), impl->split));
    std::string type;
    if (const Json& pp = get("post_processor"); !pp.is_null()) {
      QGPU_RETURN_IF_ERROR(loader.type_of(pp, "/post_processor", type));
      if (type != "ByteLevel") {
        return loader.unsupported("/post_processor/type",
                                  "unsupported post-processor '" + type + "' (supported: ByteLevel, none)");
      }
    }
    const Json& dec = get("decoder");
    if (dec.is_null()) return loader.unsupported("/decoder", "a missing decoder is unsupported (need ByteLevel)");
    QGPU_RETURN_IF_ERROR(loader.type_of(dec, "/decoder", type));
    if (type != "ByteLevel") {
      return loader.unsupported("/decoder/type", "unsupported decoder '" + type + "' (supported: ByteLevel)");
    }
    QGPU_RETURN_IF_ERROR(loader.added_tokens(get("added_tokens"), *impl));
    auto find = [&](const char* s) {
      auto it = impl->ids.find(s);
      return it == impl->ids.end() ? TokenId{-1} : it->second;
    };
    impl->special = {find("<|endoftext|>"), find("<|im_start|>"), find("<|im_end|>"), find("<think>"),
                     find("</think>")};
    return Tokenizer(std::move(impl));
  } catch (const std::exception& e) {
    return Status(ErrorCode::kParseError, std::string("unexpected JSON content: ") + e.what(), src);
  }
}

Expected<Tokenizer> Tokenizer::load(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return sdk::io_error("cannot open tokenizer file '" + path.string() + "'");
  std::string text;
  in.seekg(0, std::ios::end);
  auto size = in.tellg();
  if (size < 0) return sdk::io_error("cannot read tokenizer file '" + path.string() + "'");
  text.resize(static_cast<std::size_t>(size));
  in.seekg(0);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (!in) return sdk::io_error("cannot read tokenizer file '" + path.string() + "'");
  return parse(text, path.string());
}

}  // namespace qgpu::qwen35
