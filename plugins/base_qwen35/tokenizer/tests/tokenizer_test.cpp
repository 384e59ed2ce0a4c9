// Tests of the Qwen3.5 tokenizer against references produced by Hugging Face `tokenizers` (and, for
// the Qwen3.5 ids, cross-checked with tiktoken); see tools/make_goldens.py for how each file is made.
#include "qgpu/qwen35/tokenizer.h"

#include <gtest/gtest.h>
#include <lzma.h>
#include <unicode/uchar.h>
#include <unicode/uversion.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "qgpu/qwen35/chat.h"

namespace qgpu::qwen35 {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const fs::path kData = QWEN35_TOK_DATA_DIR;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "cannot open " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Decompresses an .xz file with liblzma.
std::string read_xz(const fs::path& path) {
  std::string packed = read_file(path);
  lzma_stream strm = LZMA_STREAM_INIT;
  EXPECT_EQ(lzma_stream_decoder(&strm, UINT64_MAX, 0), LZMA_OK);
  std::string out;
  std::vector<char> buf(1 << 20);
  strm.next_in = reinterpret_cast<const uint8_t*>(packed.data());
  strm.avail_in = packed.size();
  lzma_ret ret = LZMA_OK;
  while (ret == LZMA_OK) {
    strm.next_out = reinterpret_cast<uint8_t*>(buf.data());
    strm.avail_out = buf.size();
    ret = lzma_code(&strm, LZMA_FINISH);
    out.append(buf.data(), buf.size() - strm.avail_out);
  }
  lzma_end(&strm);
  EXPECT_EQ(ret, LZMA_STREAM_END) << path;
  return out;
}

std::vector<std::string> read_corpus() {
  std::vector<std::string> lines;
  std::ifstream in(kData / "corpus.jsonl");
  for (std::string line; std::getline(in, line);) lines.push_back(Json::parse(line).get<std::string>());
  return lines;
}

std::vector<Json> read_jsonl(const fs::path& path) {
  std::vector<Json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(Json::parse(line));
  return out;
}

// The three tokenizers under test, loaded once (the Qwen ones take about a second each).
const Tokenizer& tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return *it->second;
  std::string text =
      name == "synthetic" ? read_file(kData / "synthetic_512.json") : read_xz(kData / (name + "_tokenizer.json.xz"));
  auto tok = Tokenizer::parse(text, name);
  if (!tok) {
    ADD_FAILURE() << tok.error().to_string();
    std::abort();
  }
  return *cache.emplace(name, std::make_unique<Tokenizer>(std::move(*tok))).first->second;
}

std::string show(const std::string& s) {
  return Json(s).dump();
}

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, IdsAndDecodeMatchTokenizersOnCorpus) {
  const Tokenizer& tok = tokenizer(GetParam());
  auto corpus = read_corpus();
  auto golden = read_jsonl(kData / ("golden_" + GetParam() + ".jsonl"));
  ASSERT_EQ(corpus.size(), golden.size());
  ASSERT_GE(corpus.size(), 200u);
  int mismatches = 0;
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    auto ids = tok.encode(corpus[i]);
    ASSERT_TRUE(ids) << ids.error().to_string();
    auto want = golden[i]["ids"].get<std::vector<TokenId>>();
    if (*ids != want && ++mismatches <= 10) {
      ADD_FAILURE() << "line " << i + 1 << " " << show(corpus[i]) << ": ids " << Json(*ids).dump() << " want "
                    << Json(want).dump();
    }
    auto text = tok.decode(want);
    ASSERT_TRUE(text) << text.error().to_string();
    EXPECT_EQ(*text, golden[i]["decoded"].get<std::string>()) << "line " << i + 1;
  }
  EXPECT_EQ(mismatches, 0);
}

// decode(encode(x)) is NFC(x) for every x (NFC from Python's unicodedata); it is x itself exactly
// when x is already NFC. The byte-level alphabet makes every other step lossless.
TEST_P(Golden, RoundTripIsNfc) {
  const Tokenizer& tok = tokenizer(GetParam());
  auto corpus = read_corpus();
  auto golden = read_jsonl(kData / ("golden_" + GetParam() + ".jsonl"));
  int stable = 0;
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    auto ids = tok.encode(corpus[i]);
    ASSERT_TRUE(ids);
    auto text = tok.decode(*ids);
    ASSERT_TRUE(text);
    std::string nfc = golden[i]["nfc"].get<std::string>();
    EXPECT_EQ(*text, nfc) << "line " << i + 1 << " " << show(corpus[i]);
    if (nfc == corpus[i]) {
      ++stable;
      EXPECT_EQ(*text, corpus[i]);
    }
  }
  EXPECT_GT(stable, 300);  // most of the corpus; the NFD lines are the exceptions
  EXPECT_LT(stable, static_cast<int>(corpus.size()));
}

std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, Golden, ::testing::Values("qwen35", "qwen3", "synthetic"), param_name);

// Every code point (but surrogates) in four contexts: the pieces our pre-tokenizer cuts must have the
// byte lengths that the Hugging Face pre-tokenizer (Oniguruma running the real regex) cut.
// Known gap: our classes come from ICU 72 (Unicode 15.0), tokenizers 0.23.3 has Unicode 16.0 tables.
// Code points assigned after 15.0 are "other" for us; they are counted separately and must be the
// only differences (and exactly as many as measured, so that any change shows).
class CodePointClasses : public ::testing::TestWithParam<std::string> {};

TEST_P(CodePointClasses, PreTokenizerMatchesRegexOnAllCodePoints) {
  const Tokenizer& tok = tokenizer(GetParam());
  std::ifstream in(kData / ("classes_" + GetParam() + ".txt"));
  ASSERT_TRUE(in);
  std::uint32_t covered = 0;
  int failures = 0, newer_than_icu = 0;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string a, b, want;
    ls >> a >> b >> want;
    const char32_t first = std::stoul(a, nullptr, 16), last = std::stoul(b, nullptr, 16);
    for (char32_t cp = first; cp <= last; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      ++covered;
      std::string c;
      // UTF-8 of cp.
      if (cp < 0x80) {
        c = std::string(1, static_cast<char>(cp));
      } else if (cp < 0x800) {
        c = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
      } else if (cp < 0x10000) {
        c = {static_cast<char>(0xE0 | (cp >> 12)), static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
             static_cast<char>(0x80 | (cp & 0x3F))};
      } else {
        c = {static_cast<char>(0xF0 | (cp >> 18)), static_cast<char>(0x80 | ((cp >> 12) & 0x3F)),
             static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), static_cast<char>(0x80 | (cp & 0x3F))};
      }
      std::string sig;
      for (const std::string& probe : {"a" + c + "a", "1" + c + "1", " " + c + ".", c + " x"}) {
        if (!sig.empty()) sig += '|';
        std::string lens;
        for (std::string_view piece : tok.pre_tokenize(probe)) {
          if (!lens.empty()) lens += ',';
          lens += std::to_string(piece.size());
        }
        sig += lens;
      }
      if (sig != want && u_charType(static_cast<UChar32>(cp)) == U_UNASSIGNED) {
        ++newer_than_icu;
      } else if (sig != want && ++failures <= 10) {
        ADD_FAILURE() << "U+" << std::hex << static_cast<std::uint32_t>(cp) << ": pieces " << sig << " want " << want;
      }
    }
  }
  EXPECT_EQ(covered, 0x110000u - 0x800u);
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(newer_than_icu, GetParam() == "qwen35" ? 5055 : 5004) << "code points unassigned in ICU " U_ICU_VERSION;
}

INSTANTIATE_TEST_SUITE_P(Patterns, CodePointClasses, ::testing::Values("qwen35", "qwen3"), param_name);

TEST(Qwen35, VocabularyAndSpecialTokens) {
  const Tokenizer& tok = tokenizer("qwen35");
  EXPECT_EQ(tok.vocab_size(), 248077);
  EXPECT_EQ(tok.merge_count(), 247556);
  SpecialTokenIds s = tok.special_ids();
  EXPECT_EQ(s.endoftext, 248044);
  EXPECT_EQ(s.im_start, 248045);
  EXPECT_EQ(s.im_end, 248046);
  EXPECT_EQ(s.think, 248068);
  EXPECT_EQ(s.end_think, 248069);
  EXPECT_EQ(tok.token_to_id("<|audio_pad|>"), 248076);
  EXPECT_EQ(tok.token_to_id("<tool_call>"), 248058);
  EXPECT_EQ(tok.id_to_token(248045), "<|im_start|>");
  EXPECT_TRUE(tok.is_special(248045));
  EXPECT_FALSE(tok.is_special(248068));  // <think> is added but not special
  EXPECT_FALSE(tok.is_special(198));
  // Ordinary tokens seen in a same-family oracle (QWEN35.md 6.1), spelled in the byte-level alphabet.
  EXPECT_EQ(tok.token_to_id("\xC4\x8A"), 198);  // "Ċ" = "\n"
  EXPECT_EQ(tok.token_to_id("user"), 846);
  EXPECT_EQ(tok.token_to_id("assistant"), 74455);
  EXPECT_EQ(tok.token_to_id("\xC4\xA0user"), 1156);  // " user"
  EXPECT_EQ(tok.id_to_token(248077), std::nullopt);
  EXPECT_EQ(tok.id_to_token(-1), std::nullopt);
  EXPECT_EQ(tok.token_to_id("no such token"), std::nullopt);
}

TEST(Qwen35, AddedTokensAreCutBeforeTheSplit) {
  const Tokenizer& tok = tokenizer("qwen35");
  auto ids = tok.encode("a<|im_end|>b<think>");
  ASSERT_TRUE(ids);
  ASSERT_EQ(ids->size(), 4u);
  EXPECT_EQ((*ids)[1], 248046);
  EXPECT_EQ((*ids)[3], 248068);
  auto empty = tok.encode("");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
}

TEST(Qwen35, InvalidUtf8InputIsAnError) {
  const Tokenizer& tok = tokenizer("qwen35");
  const std::pair<std::string, std::string> cases[] = {
      {"abc\xFF", "error: encode: invalid UTF-8 at byte offset 3 (byte 0xFF)"},
      {"\xC0\xAF", "error: encode: invalid UTF-8 at byte offset 0 (byte 0xC0)"},           // overlong
      {"ok \xED\xA0\x80", "error: encode: invalid UTF-8 at byte offset 3 (byte 0xED)"},    // surrogate
      {"\xE4\xBD", "error: encode: invalid UTF-8 at byte offset 0 (byte 0xE4)"},           // truncated
      {"x\xF4\x90\x80\x80", "error: encode: invalid UTF-8 at byte offset 1 (byte 0xF4)"},  // > U+10FFFF
      {"12345678\x80", "error: encode: invalid UTF-8 at byte offset 8 (byte 0x80)"},       // lone continuation
  };
  for (const auto& [input, message] : cases) {
    auto ids = tok.encode(input);
    ASSERT_FALSE(ids);
    EXPECT_EQ(ids.error().to_string(), message);
    EXPECT_EQ(ids.error().code(), sdk::ErrorCode::kInvalidArgument);
  }
}

TEST(Qwen35, DecodeOfInvalidUtf8MatchesTokenizers) {
  const Tokenizer& tok = tokenizer("qwen35");
  auto cases = read_jsonl(kData / "golden_decode.jsonl");
  ASSERT_FALSE(cases.empty());
  for (const Json& c : cases) {
    auto ids = c["ids"].get<std::vector<TokenId>>();
    auto text = tok.decode(ids);
    ASSERT_TRUE(text);
    EXPECT_EQ(*text, c["decoded"].get<std::string>()) << c.dump();
  }
  // kKeep returns the raw bytes: the three ids of "你" split across calls join back.
  std::vector<TokenId> ni = {160, 121, 254};
  std::string joined;
  for (TokenId id : ni) joined += *tok.decode(std::span(&id, 1), InvalidUtf8::kKeep);
  EXPECT_EQ(joined, "\xE4\xBD\xA0");
}

TEST(Qwen35, DecodeRejectsIdsOutsideTheVocabulary) {
  const Tokenizer& tok = tokenizer("qwen35");
  std::vector<TokenId> ids = {9419, 248077};
  auto text = tok.decode(ids);
  ASSERT_FALSE(text);
  EXPECT_EQ(text.error().to_string(),
            "error: decode: id 248077 at position 1 is not in the vocabulary (ids 0..248076)");
  ids = {-5};
  EXPECT_FALSE(tok.decode(ids));
}

TEST(Qwen35, ChatTemplateMatchesGoldens) {
  const Tokenizer& tok = tokenizer("qwen35");
  auto cases = read_jsonl(kData / "golden_chat.jsonl");
  ASSERT_GE(cases.size(), 5u);
  for (const Json& c : cases) {
    std::vector<ChatMessage> msgs;
    for (const Json& m : c["messages"]) msgs.push_back({m["role"], m["content"]});
    ChatOptions opt{c["add_generation_prompt"].get<bool>(), c["enable_thinking"].get<bool>()};
    auto text = tok.apply_chat_template(msgs, opt);
    ASSERT_TRUE(text);
    EXPECT_EQ(*text, c["text"].get<std::string>());
    auto ids = tok.encode_chat(msgs, opt);
    ASSERT_TRUE(ids);
    EXPECT_EQ(*ids, c["ids"].get<std::vector<TokenId>>()) << c["text"].dump();
  }
  // The example stream of QWEN35.md 6.2, written out by hand.
  auto ids = tok.encode_chat({{"user", "Hello!"}}, {.add_generation_prompt = true, .enable_thinking = true});
  ASSERT_TRUE(ids);
  std::vector<TokenId> want = {248045, 846, 198, 9419, 0, 248046, 198, 248045, 74455, 198, 248068, 198};
  EXPECT_EQ(*ids, want);
}

// --- The chat format with tools (chat.h) against transformers' apply_chat_template on the official
// template: tests/golden/chat/make_chat_goldens.py.

using OrderedJson = nlohmann::ordered_json;

const fs::path kChatGoldens = QGPU_CHAT_GOLDEN_DIR;

// A transcript of chat_goldens.jsonl (transformers' message and tool dicts) as our types. Argument
// values that are not strings become the text the template writes for them (`|string` of a number).
struct Transcript {
  std::string name;
  std::vector<ChatMessage> messages;
  std::vector<sdk::ToolDeclaration> tools;
  ChatOptions options;
  std::string text;
  std::vector<TokenId> ids;
};

std::vector<Transcript> chat_goldens() {
  std::vector<Transcript> out;
  std::ifstream in(kChatGoldens / "chat_goldens.jsonl");
  EXPECT_TRUE(in) << "cannot open chat_goldens.jsonl in " << kChatGoldens;
  for (std::string line; std::getline(in, line);) {
    const OrderedJson c = OrderedJson::parse(line);
    Transcript t;
    t.name = c["name"].get<std::string>();
    for (const OrderedJson& tool : c["tools"]) {
      const OrderedJson& f = tool["function"];
      t.tools.push_back({f["name"].get<std::string>(), f["description"].get<std::string>(), f["parameters"].dump()});
    }
    for (const OrderedJson& m : c["messages"]) {
      ChatMessage message{m["role"].get<std::string>(), m["content"].get<std::string>()};
      for (const OrderedJson& call : m.value("tool_calls", OrderedJson::array())) {
        sdk::ToolCall tc{call["function"]["name"].get<std::string>()};
        for (const auto& [key, value] : call["function"]["arguments"].items()) {
          tc.parameters.push_back({key, value.is_string() ? value.get<std::string>() : value.dump()});
        }
        message.tool_calls.push_back(std::move(tc));
      }
      t.messages.push_back(std::move(message));
    }
    t.options = {c["add_generation_prompt"].get<bool>(), c["enable_thinking"].get<bool>()};
    t.text = c["text"].get<std::string>();
    t.ids = c["ids"].get<std::vector<TokenId>>();
    out.push_back(std::move(t));
  }
  return out;
}

TEST(Qwen35Chat, MatchesTransformersOnTheOfficialTemplate) {
  const Tokenizer& tok = tokenizer("qwen35");
  const auto goldens = chat_goldens();
  ASSERT_GE(goldens.size(), 8u);
  for (const Transcript& t : goldens) {
    auto text = tok.apply_chat_template(t.messages, t.options, t.tools);
    ASSERT_TRUE(text) << t.name << ": " << text.error().to_string();
    EXPECT_EQ(*text, t.text) << t.name;
    auto ids = tok.encode_chat(t.messages, t.options, t.tools);
    ASSERT_TRUE(ids) << t.name << ": " << ids.error().to_string();
    EXPECT_EQ(*ids, t.ids) << t.name;
  }
}

// Every tool call of the goldens reads back, in order, from the rendered text.
TEST(Qwen35Chat, ToolCallsReadBackFromTheRenderedText) {
  int calls = 0;
  for (const Transcript& t : chat_goldens()) {
    std::vector<sdk::ToolCall> want;
    for (const ChatMessage& m : t.messages) want.insert(want.end(), m.tool_calls.begin(), m.tool_calls.end());
    std::vector<sdk::ToolCall> got;
    std::size_t pos = 0;
    if (!t.tools.empty()) {
      // The tools block shows an example call (then names the tags in prose, past </IMPORTANT>).
      auto example = find_tool_call(t.text);
      ASSERT_TRUE(example && *example) << t.name;
      EXPECT_EQ((*example)->call.name, "example_function_name");
      ASSERT_EQ((*example)->call.parameters.size(), 2u);
      EXPECT_EQ((*example)->call.parameters[1].value,
                "This is the value for the second parameter\nthat can span\nmultiple lines");
      pos = t.text.find("</IMPORTANT>");
    }
    while (true) {
      auto found = find_tool_call(std::string_view(t.text).substr(pos));
      ASSERT_TRUE(found) << t.name << ": " << found.error().to_string();
      if (!*found) break;
      EXPECT_TRUE(std::string_view(t.text).substr(pos + (*found)->begin).starts_with("<tool_call>"));
      EXPECT_TRUE(std::string_view(t.text).substr(0, pos + (*found)->end).ends_with("</tool_call>"));
      got.push_back((*found)->call);
      pos += (*found)->end;
    }
    EXPECT_EQ(got, want) << t.name;
    calls += static_cast<int>(want.size());
  }
  EXPECT_GE(calls, 5);
}

TEST(Qwen35Chat, FindsACompleteCallInStreamedText) {
  const std::string text =
      "Let me check.\n\n<tool_call>\n<function=gpu>\n<parameter=expression>\nsum([1, 2])\n"
      "</parameter>\n</function>\n</tool_call>";
  for (std::size_t n = 0; n < text.size(); ++n) {  // every prefix: nothing yet
    auto found = find_tool_call(std::string_view(text).substr(0, n));
    ASSERT_TRUE(found) << n << ": " << found.error().to_string();
    EXPECT_FALSE(*found) << n;
  }
  auto found = find_tool_call(text + "<|im_end|>");
  ASSERT_TRUE(found && *found);
  EXPECT_EQ((*found)->begin, text.find("<tool_call>"));
  EXPECT_EQ((*found)->end, text.size());
  EXPECT_EQ((*found)->call, (sdk::ToolCall{"gpu", {{"expression", "sum([1, 2])"}}}));
  // Whitespace between the tags is allowed; a value keeps everything but one newline on each side.
  auto loose =
      parse_tool_call("  <tool_call><function=f> <parameter=a>\n\n x \n\n</parameter></function></tool_call>\n");
  ASSERT_TRUE(loose) << loose.error().to_string();
  EXPECT_EQ(*loose, (sdk::ToolCall{"f", {{"a", "\n x \n"}}}));
  auto none = parse_tool_call("<tool_call>\n<function=f>\n</function>\n</tool_call>");
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->parameters.empty());
}

TEST(Qwen35Chat, MalformedToolCallsAreOneLineErrors) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"<tool_call>\n<parameter=a>\n1\n</parameter>\n</tool_call>",
       "tool call: expected '<function=NAME>' after '<tool_call>', found "
       "'<parameter=a>\\n1\\n</parameter>\\n</tool_call...'"},
      {"<tool_call>\n{\"name\": \"gpu\", \"arguments\": {}}\n</tool_call>",
       "tool call: expected '<function=NAME>' after '<tool_call>', found '{\"name\": \"gpu\", \"arguments\": "
       "{}}\\n</tool_...'"},
      {"<tool_call>\n<function=>\n</function>\n</tool_call>", "tool call: missing function name in '<function=...>'"},
      {"<tool_call>\n<function=gpu\n</function>\n</tool_call>", "tool call: '<function=' has no closing '>'"},
      {"<tool_call>\n<function=gpu>\n<parameter=expression>\n1 + 2\n</function>\n</tool_call>",
       "tool call: function 'gpu': parameter 'expression' is not closed by '</parameter>'"},
      {"<tool_call>\n<function=gpu>\n<parameter=a>\n1\n<parameter=b>\n2\n</parameter>\n</function>\n</tool_call>",
       "tool call: function 'gpu': parameter 'a' is not closed by '</parameter>'"},
      {"<tool_call>\n<function=gpu>\n<parameter=>\n1\n</parameter>\n</function>\n</tool_call>",
       "tool call: missing parameter name in '<parameter=...>'"},
      {"<tool_call>\n<function=gpu>\n<parameter=a>\n1\n</parameter>\n<parameter=a>\n2\n</parameter>\n</function>\n</"
       "tool_call>",
       "tool call: function 'gpu': parameter 'a' is given twice"},
      {"<tool_call>\n<function=gpu>\nexpression: 1\n</function>\n</tool_call>",
       "tool call: function 'gpu': expected '<parameter=NAME>' or '</function>', found 'expression: "
       "1\\n</function>\\n</tool_call>'"},
      {"<tool_call>\n<function=gpu>\n</tool_call>",
       "tool call: function 'gpu': expected '<parameter=NAME>' or '</function>', found '</tool_call>'"},
      {"<tool_call>\n<function=gpu>\n", "tool call: function 'gpu' is not closed by '</function>'"},
      {"<tool_call>\n<function=gpu>\n</function>\n", "tool call: missing '</tool_call>'"},
      {"<tool_call>\n<function=a>\n</function>\n<function=b>\n</function>\n</tool_call>",
       "tool call: expected '</tool_call>' after '</function>', found '<function=b>\\n</function>\\n</tool_call>'"},
      {"<tool_call>\n<function=a>\n</function>\n</tool_call> and more",
       "tool call: text after '</tool_call>': 'and more'"},
      {"gpu(1)", "tool call: expected '<tool_call>', found 'gpu(1)'"},
  };
  for (const auto& [block, want] : cases) {
    auto call = parse_tool_call(block);
    ASSERT_FALSE(call) << block;
    EXPECT_EQ(call.error().message(), want) << block;
    EXPECT_EQ(call.error().message().find('\n'), std::string::npos);
  }
  // find_tool_call reports a malformed complete call.
  auto found = find_tool_call("ok <tool_call>\n<function=>\n</function>\n</tool_call>");
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().message(), "tool call: missing function name in '<function=...>'");
}

TEST(Qwen35Chat, RefusesWhatTheTemplateRefusesOrCannotReadBack) {
  const Tokenizer& tok = tokenizer("qwen35");
  const sdk::ToolDeclaration gpu{"gpu", "d", R"({"type": "object"})"};
  auto error = [&](const std::vector<ChatMessage>& msgs, const std::vector<sdk::ToolDeclaration>& tools = {}) {
    auto text = tok.apply_chat_template(msgs, {}, tools);
    return text ? std::string("(rendered)") : text.error().to_string();
  };
  EXPECT_EQ(error({}), "error: chat: no messages (the template needs a user turn)");
  EXPECT_EQ(error({{"system", "s"}}),
            "error: chat: no user query (the template needs a user turn that is not a tool response)");
  EXPECT_EQ(error({{"user", " <tool_response>\n1\n</tool_response>\n"}}),
            "error: chat: no user query (the template needs a user turn that is not a tool response)");
  EXPECT_EQ(error({{"user", "hi"}, {"system", "s"}}), "error: chat message 1: a system turn must be the first");
  EXPECT_EQ(error({{"user", "hi"}, {"bad\nrole", "x"}}),
            "error: chat message 1: role 'bad\\nrole' is not system, user, assistant or tool");
  EXPECT_EQ(error({{"", "x"}}), "error: chat message 0: role '' is not system, user, assistant or tool");
  EXPECT_EQ(error({{"user", "bad \xFF content"}}),
            "error: chat message 0 content: invalid UTF-8 at byte offset 4 (byte 0xFF)");
  EXPECT_EQ(error({{"user", "hi", {{"gpu", {}}}}}), "error: chat message 0: only assistant turns make tool calls");
  EXPECT_EQ(error({{"user", "hi"}, {"assistant", "", {{"a>b", {}}}}}),
            "error: chat message 1 tool call 0 name 'a>b' contains '<', '>' or a newline");
  EXPECT_EQ(error({{"user", "hi"}, {"assistant", "", {{"gpu", {{"x", "1\n</parameter>\n"}}}}}}),
            "error: chat message 1 tool call 0 parameter 'x': the value contains '</parameter>'");
  EXPECT_EQ(error({{"user", "hi"}}, {{"gpu", "d", "[1, 2]"}}),
            "error: tool 0 'gpu': parameters_json is not a JSON object");
  EXPECT_EQ(error({{"user", "hi"}}, {{"gpu", "d", "{"}}), "error: tool 0 'gpu': parameters_json is not valid JSON");
  EXPECT_EQ(error({{"user", "hi"}}, {gpu, {"", "d", "{}"}}), "error: tool 1 name is empty");
  EXPECT_EQ(error({{"user", "hi"}}, {gpu}), "(rendered)");
  // A tool turn first gets no user opener, as in the template (loop.previtem is undefined there).
  auto text = tok.apply_chat_template({{"tool", "1"}, {"user", "hi"}}, {.add_generation_prompt = false});
  ASSERT_TRUE(text);
  EXPECT_EQ(*text, "\n<tool_response>\n1\n</tool_response><|im_end|>\n<|im_start|>user\nhi<|im_end|>\n");
}

// The Python whitespace `trim` removes (str.isspace), around messages.
TEST(Qwen35Chat, TrimsPythonWhitespace) {
  const Tokenizer& tok = tokenizer("qwen35");
  auto text = tok.apply_chat_template({{"user", "\x1c\u3000\u2028 hi\u00a0there\t\xc2\x85\u205f"}},
                                      {.add_generation_prompt = false});
  ASSERT_TRUE(text);
  EXPECT_EQ(*text, "<|im_start|>user\nhi\u00a0there<|im_end|>\n");
  text = tok.apply_chat_template({{"user", "\u200b"}}, {.add_generation_prompt = false});  // ZWSP is not space
  ASSERT_TRUE(text);
  EXPECT_EQ(*text, "<|im_start|>user\n\u200b<|im_end|>\n");
}

// encode is const and may run on several threads at once (the piece cache is shared).
TEST(Qwen35, ConcurrentEncodeGivesTheGoldenIds) {
  const Tokenizer& tok = tokenizer("qwen35");
  auto corpus = read_corpus();
  std::vector<std::vector<TokenId>> want;
  for (const Json& g : read_jsonl(kData / "golden_qwen35.jsonl")) want.push_back(g["ids"].get<std::vector<TokenId>>());
  std::vector<int> wrong(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        for (std::size_t i = t; i < corpus.size(); i += 2) {
          auto ids = tok.encode(corpus[i]);
          if (!ids || *ids != want[i]) ++wrong[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong, std::vector<int>(4, 0));
}

// --- The synthetic tokenizer

TEST(Synthetic, WriterIsDeterministicAndMatchesTheCommittedFile) {
  auto text = synthetic_tokenizer_json(512);
  ASSERT_TRUE(text) << text.error().to_string();
  EXPECT_EQ(*text, read_file(kData / "synthetic_512.json"));
  auto again = synthetic_tokenizer_json(512);
  EXPECT_EQ(*text, *again);
}

TEST(Synthetic, LoadsWithTheQwen35AddedTokensRenumbered) {
  fs::path path = fs::path(::testing::TempDir()) / "qwen35_synthetic_300.json";
  ASSERT_TRUE(write_synthetic_tokenizer(path, 300).is_ok());
  auto tok = Tokenizer::load(path);
  ASSERT_TRUE(tok) << tok.error().to_string();
  EXPECT_EQ(tok->vocab_size(), 300 + 33);
  EXPECT_EQ(tok->merge_count(), 300 - 256);
  EXPECT_EQ(tok->special_ids().endoftext, 300);
  EXPECT_EQ(tok->special_ids().im_start, 301);
  EXPECT_EQ(tok->special_ids().im_end, 302);
  EXPECT_EQ(tok->special_ids().think, 324);
  EXPECT_EQ(tok->id_to_token(0), "!");  // GPT-2 byte order: printable bytes first
  auto ids = tok->encode("<|im_start|>user\nthe 2 dogs\n");
  ASSERT_TRUE(ids);
  EXPECT_EQ(ids->front(), 301);
  EXPECT_EQ(*tok->decode(*ids), "<|im_start|>user\nthe 2 dogs\n");
  fs::remove(path);
}

TEST(Synthetic, VocabSizeLimits) {
  auto small = synthetic_tokenizer_json(255);
  ASSERT_FALSE(small);
  EXPECT_EQ(small.error().to_string(), "error: synthetic tokenizer: vocab_size 255 is outside 256..1024");
  auto big = synthetic_tokenizer_json(1000);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().to_string(),
            "error: synthetic tokenizer: vocab_size 1000 exceeds what the built-in sample yields (720) by 280");
  EXPECT_EQ(write_synthetic_tokenizer("/nonexistent-dir/x.json", 300).to_string(),
            "error: cannot write '/nonexistent-dir/x.json'");
}

// --- Malformed tokenizer.json files: each error names the file and the element.

Json synthetic_doc() {
  return Json::parse(read_file(kData / "synthetic_512.json"));
}

std::string load_error(const Json& doc) {
  auto tok = Tokenizer::parse(doc.dump(), "t.json");
  return tok ? "loaded" : tok.error().to_string();
}

TEST(Malformed, SyntaxErrorsHaveLineAndColumn) {
  auto tok = Tokenizer::parse("{\n  \"model\": [1, 2,,]\n}", "t.json");
  ASSERT_FALSE(tok);
  EXPECT_EQ(tok.error().to_string(),
            "t.json:2:18: error: malformed JSON: syntax error while parsing value - unexpected ','; expected '[', "
            "'{', or a literal");
  EXPECT_EQ(load_error(Json::array()), "t.json: error: : expected a JSON object at the top level");
  auto missing = Tokenizer::load("/nonexistent/tokenizer.json");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().to_string(), "error: cannot open tokenizer file '/nonexistent/tokenizer.json'");
}

TEST(Malformed, UnsupportedComponentsAreNamed) {
  Json d = synthetic_doc();
  d["model"]["type"] = "WordPiece";
  EXPECT_EQ(load_error(d), "t.json: error: /model/type: unsupported model 'WordPiece' (supported: BPE)");
  d = synthetic_doc();
  d["normalizer"] = {{"type", "Lowercase"}};
  EXPECT_EQ(load_error(d),
            "t.json: error: /normalizer/type: unsupported normalizer 'Lowercase' (supported: NFC, NFD, NFKC, NFKD)");
  d = synthetic_doc();
  d["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\s+";
  EXPECT_EQ(load_error(d),
            "t.json: error: /pre_tokenizer/pretokenizers/0/pattern/Regex: unsupported Split regex '\\s+' (supported: "
            "the Qwen3.5 and the Qwen2/Qwen3 patterns)");
  d = synthetic_doc();
  d["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = true;
  EXPECT_EQ(load_error(d),
            "t.json: error: /pre_tokenizer/pretokenizers/1/use_regex: unsupported value true (supported: false)");
  d = synthetic_doc();
  d["decoder"] = {{"type", "WordPiece"}};
  EXPECT_EQ(load_error(d), "t.json: error: /decoder/type: unsupported decoder 'WordPiece' (supported: ByteLevel)");
  d = synthetic_doc();
  d["post_processor"] = {{"type", "TemplateProcessing"}};
  EXPECT_EQ(load_error(d),
            "t.json: error: /post_processor/type: unsupported post-processor 'TemplateProcessing' (supported: "
            "ByteLevel, none)");
  d = synthetic_doc();
  d["model"]["byte_fallback"] = true;
  EXPECT_EQ(load_error(d), "t.json: error: /model/byte_fallback: unsupported value true (supported: false)");
  d = synthetic_doc();
  d["added_tokens"][2]["lstrip"] = true;
  EXPECT_EQ(load_error(d),
            "t.json: error: /added_tokens/2/lstrip: added token '<|im_end|>' sets \"lstrip\": true, which is "
            "unsupported (only false)");
  d = synthetic_doc();
  d["truncation"] = {{"max_length", 5}};
  EXPECT_EQ(load_error(d), "t.json: error: /truncation: \"truncation\" must be null (unsupported)");
}

TEST(Malformed, InconsistentVocabularyAndMerges) {
  Json d = synthetic_doc();
  d["model"]["merges"][3] = "nosuch token";
  EXPECT_EQ(load_error(d), "t.json: error: /model/merges/3: token 'nosuch' is not in the vocabulary");
  d = synthetic_doc();
  d["model"]["merges"][4] = "abc";
  EXPECT_EQ(load_error(d),
            "t.json: error: /model/merges/4: expected \"left right\" (two tokens and one space), found 'abc'");
  d = synthetic_doc();
  d["model"]["merges"][5] = Json::array({"a", 1});
  EXPECT_EQ(load_error(d), "t.json: error: /model/merges/5: expected \"left right\" or [\"left\", \"right\"]");
  d = synthetic_doc();
  d["model"]["vocab"]["A"] = "x";
  EXPECT_EQ(load_error(d), "t.json: error: /model/vocab/A: expected an integer id");
  d = synthetic_doc();
  d["model"]["vocab"] = Json::array();
  EXPECT_EQ(load_error(d), "t.json: error: /model/vocab: missing object");
  d = synthetic_doc();
  d["model"]["merges"][0] = "a z";  // "az" is not a token of the synthetic vocabulary
  EXPECT_EQ(load_error(d), "t.json: error: /model/merges/0: merged token 'az' is not in the vocabulary");
  d = synthetic_doc();
  d["model"]["vocab"].erase("A");
  EXPECT_EQ(load_error(d), "t.json: error: /model/vocab: no token for byte 0x41 (A); byte-level BPE needs all 256");
  d = synthetic_doc();
  d["model"]["vocab"]["A"] = 99999999;
  EXPECT_EQ(load_error(d), "t.json: error: /model/vocab/A: id 99999999 is outside 0..16777215");
  d = synthetic_doc();
  d["model"]["vocab"]["A"] = 0;
  EXPECT_EQ(load_error(d), "t.json: error: /model/vocab/A: id 0 is also used by '!'");
  d = synthetic_doc();
  d["added_tokens"][1]["id"] = 512;
  EXPECT_EQ(load_error(d), "t.json: error: /added_tokens/1/id: id 512 is used by another added token '<|endoftext|>'");
  d = synthetic_doc();
  d["added_tokens"][1]["id"] = 5;
  EXPECT_EQ(load_error(d), "t.json: error: /added_tokens/1/id: id 5 is the vocabulary token '&', not '<|im_start|>'");
  d = synthetic_doc();
  d.erase("model");
  EXPECT_EQ(load_error(d), "t.json: error: /model: missing member \"model\"");
}

// Both merge spellings load to the same tokenizer.
TEST(Malformed, MergesInStringAndPairFormAgree) {
  Json d = synthetic_doc();
  for (Json& m : d["model"]["merges"]) m = m[0].get<std::string>() + " " + m[1].get<std::string>();
  auto a = Tokenizer::parse(d.dump(), "strings");
  ASSERT_TRUE(a) << a.error().to_string();
  const Tokenizer& b = tokenizer("synthetic");
  for (const std::string& text : read_corpus()) EXPECT_EQ(*a->encode(text), *b.encode(text));
}

}  // namespace
}  // namespace qgpu::qwen35
