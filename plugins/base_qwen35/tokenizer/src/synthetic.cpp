// A small tokenizer.json with the Qwen3.5 pipeline, for synthetic checkpoints and tests.
//
// The BPE merges are learnt from a built-in sample with the classic greedy trainer: pre-tokenize
// with the Qwen3.5 pattern, then repeatedly merge the most frequent adjacent pair (ties: the pair
// of smaller ids). Everything is deterministic, so the file is identical on every machine.
#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "byte_level.h"
#include "qgpu/qwen35/tokenizer.h"
#include "text.h"

namespace qgpu::qwen35 {

namespace {

constexpr std::int32_t kMinVocab = 256;
constexpr std::int32_t kMaxVocab = 1024;

constexpr const char* kSample = R"(The quick brown fox jumps over the lazy dog. A small machine runs inside the weights
of a language model: every step of the program is generated as tokens, and the results are read back
from the recurrent state of the model. The compiler computes each weight; nothing is trained.
In the beginning the host compiles a kernel to PTX, lowers it to machine blocks and feeds the
program and its data to the model. The model then generates the trace of the launch, one step
after another, while the host checks every step against the reference interpreter.
We're testing the tokenizer, and it's important that they'll agree on every token they've seen.
Numbers such as 2024, 3.14159 and 65536 are split into single digits before the merges apply.
def encode(self, text):
    ids = []
    for piece in self.pre_tokenize(text):
        ids.extend(self.bpe(piece))
    return ids

int main(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    printf("%s\n", argv[i]);
  }
  return 0;
}
<|im_start|>user
What is the sum of the first ten integers?<|im_end|>
<|im_start|>assistant
<think>
The sum of the integers from one to ten is fifty five.
</think>

The answer is fifty five.<|im_end|>
Language models read text as tokens. A tokenizer splits the text into pieces, maps each piece to
bytes and merges frequent byte pairs into larger tokens, so that common words become one token and
rare words become several. The merges are ordered by rank: the lower the rank, the earlier it applies.
Qwen uses a byte-level alphabet, so every string can be encoded, and the decoder maps tokens back to
the exact bytes of the input. Special tokens mark the start and the end of each message in a chat.
)";

// Qwen3.5's added tokens in id order, with their "special" flags.
const std::pair<const char*, bool> kAdded[] = {
    {"<|endoftext|>", true},      {"<|im_start|>", true},
    {"<|im_end|>", true},         {"<|object_ref_start|>", true},
    {"<|object_ref_end|>", true}, {"<|box_start|>", true},
    {"<|box_end|>", true},        {"<|quad_start|>", true},
    {"<|quad_end|>", true},       {"<|vision_start|>", true},
    {"<|vision_end|>", true},     {"<|vision_pad|>", true},
    {"<|image_pad|>", true},      {"<|video_pad|>", true},
    {"<tool_call>", false},       {"</tool_call>", false},
    {"<|fim_prefix|>", false},    {"<|fim_middle|>", false},
    {"<|fim_suffix|>", false},    {"<|fim_pad|>", false},
    {"<|repo_name|>", false},     {"<|file_sep|>", false},
    {"<tool_response>", false},   {"</tool_response>", false},
    {"<think>", false},           {"</think>", false},
    {"<|audio_start|>", true},    {"<|audio_end|>", true},
    {"<tts_pad>", true},          {"<tts_text_bos>", true},
    {"<tts_text_eod>", true},     {"<tts_text_bos_single>", true},
    {"<|audio_pad|>", true},
};

}  // namespace

sdk::Expected<std::string> synthetic_tokenizer_json(std::int32_t vocab_size) {
  if (vocab_size < kMinVocab || vocab_size > kMaxVocab) {
    return sdk::limit_exceeded("synthetic tokenizer: vocab_size " + std::to_string(vocab_size) + " is outside " +
                               std::to_string(kMinVocab) + ".." + std::to_string(kMaxVocab));
  }
  // Base alphabet: byte-level characters in GPT-2's order (printable bytes first), as Qwen's ids 0..255.
  std::vector<std::string> tokens;
  std::map<std::string, std::int32_t> index;
  std::vector<int> order;
  for (int b = 0; b < 256; ++b) {
    if (byte_level::char_of(static_cast<unsigned char>(b)) == static_cast<char32_t>(b)) order.push_back(b);
  }
  for (int b = 0; b < 256; ++b) {
    if (byte_level::char_of(static_cast<unsigned char>(b)) != static_cast<char32_t>(b)) order.push_back(b);
  }
  for (int b : order) {
    index[byte_level::to_token(std::string(1, static_cast<char>(b)))] = static_cast<std::int32_t>(tokens.size());
    tokens.push_back(byte_level::to_token(std::string(1, static_cast<char>(b))));
  }

  // Words of the sample (without the added tokens) with their counts, as sequences of token ids.
  std::map<std::vector<std::int32_t>, std::int64_t> words;
  {
    std::string sample = kSample;
    for (const auto& [content, special] : kAdded) {
      for (std::size_t at; (at = sample.find(content)) != std::string::npos;)
        sample.replace(at, std::strlen(content), " ");
    }
    std::vector<std::string_view> pieces;
    text::pre_tokenize(text::SplitPattern::kQwen35, sample, pieces);
    for (std::string_view p : pieces) {
      std::vector<std::int32_t> w;
      for (char c : p) w.push_back(index[byte_level::to_token(std::string(1, c))]);
      ++words[w];
    }
  }

  std::vector<std::pair<std::string, std::string>> merges;
  while (static_cast<std::int32_t>(tokens.size()) < vocab_size) {
    std::map<std::pair<std::int32_t, std::int32_t>, std::int64_t> counts;
    for (const auto& [w, n] : words) {
      for (std::size_t i = 0; i + 1 < w.size(); ++i) counts[{w[i], w[i + 1]}] += n;
    }
    if (counts.empty()) {
      return sdk::limit_exceeded("synthetic tokenizer: vocab_size " + std::to_string(vocab_size) +
                                 " exceeds what the built-in sample yields (" + std::to_string(tokens.size()) +
                                 ") by " + std::to_string(vocab_size - static_cast<std::int32_t>(tokens.size())));
    }
    auto best = counts.begin();
    for (auto it = counts.begin(); it != counts.end(); ++it) {
      if (it->second > best->second) best = it;  // map order breaks ties towards smaller ids
    }
    auto [a, b] = best->first;
    std::string joined = tokens[a] + tokens[b];
    std::int32_t id;
    if (auto it = index.find(joined); it != index.end()) {
      id = it->second;
    } else {
      id = static_cast<std::int32_t>(tokens.size());
      tokens.push_back(joined);
      index[joined] = id;
    }
    merges.emplace_back(tokens[a], tokens[b]);
    std::map<std::vector<std::int32_t>, std::int64_t> next;
    for (const auto& [w, n] : words) {
      std::vector<std::int32_t> v;
      for (std::size_t i = 0; i < w.size(); ++i) {
        if (i + 1 < w.size() && w[i] == a && w[i + 1] == b) {
          v.push_back(id);
          ++i;
        } else {
          v.push_back(w[i]);
        }
      }
      next[v] += n;
    }
    words.swap(next);
  }

  using Json = nlohmann::ordered_json;
  Json level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  Json added = Json::array();
  for (std::size_t i = 0; i < std::size(kAdded); ++i) {
    added.push_back({{"id", vocab_size + static_cast<std::int32_t>(i)},
                     {"content", kAdded[i].first},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", kAdded[i].second}});
  }
  Json vocab = Json::object();
  for (std::size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = static_cast<std::int32_t>(i);
  Json merge_list = Json::array();
  for (const auto& [a, b] : merges) merge_list.push_back(Json::array({a, b}));
  Json doc = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers", Json::array({{{"type", "Split"},
                                        {"pattern", {{"Regex", text::kQwen35Pattern}}},
                                        {"behavior", "Isolated"},
                                        {"invert", false}},
                                       level})}}},
      {"post_processor", level},
      {"decoder", level},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", merge_list}}},
  };
  return doc.dump(1) + "\n";
}

sdk::Status write_synthetic_tokenizer(const std::filesystem::path& path, std::int32_t vocab_size) {
  auto text = synthetic_tokenizer_json(vocab_size);
  if (!text) return text.error();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return sdk::io_error("cannot write '" + path.string() + "'");
  out << *text;
  out.close();
  if (!out) return sdk::io_error("cannot write '" + path.string() + "'");
  return sdk::Status::ok();
}

}  // namespace qgpu::qwen35
