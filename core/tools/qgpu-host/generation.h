// Text generation with a loaded base model, shared by `generate` and `chat`: a prompt fed, then
// tokens sampled (or forced from a script) one at a time and streamed to stdout as text.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qgpu/core/host.h"
#include "qgpu/core/sampling.h"
#include "qgpu/sdk/sdk.h"

namespace qgpu::host {

// The backend and the base model loaded into it; the model is released first.
struct LoadedModel {
  std::shared_ptr<sdk::TensorBackend> backend;
  std::shared_ptr<sdk::BaseModel> model;
  sdk::ModelInfo info;
  std::string name;
  bool warned_textless = false;  // an id without text was generated (warned once per run)

  ~LoadedModel() { model.reset(); }
};

// The config's base on its backend.
sdk::Expected<std::unique_ptr<LoadedModel>> load_model(const core::Host& host);

struct Generated {
  std::vector<std::int64_t> ids;
  std::vector<std::vector<float>> logits;  // per step, when asked for
  bool stopped = false;                    // ended on a stop token (not on the token limit)
  bool ended_by_text = false;              // TextGeneration::stop_after said so
  std::size_t fed = 0;                     // of `ids`, those fed to the model (all but a last one)
  std::string text;                        // the generated text, invalid UTF-8 replaced
  double seconds = 0;
};

struct TextGeneration {
  std::int64_t max_tokens = 64;
  std::vector<std::int64_t> stops;  // a chosen id among these ends the generation and is not part of it
  bool stream = true;               // print the text to stdout as it is generated
  bool logits = false;              // keep every step's logits
  // Ids fed instead of sampled, one forward each (a scripted turn, max_tokens does not apply);
  // when they run out the generation ends as on a stop id.
  const std::vector<std::int64_t>* forced = nullptr;
  // Called with the text so far after each token; true ends the generation there.
  std::function<bool(std::string_view)> stop_after;
  sdk::Sequence* sequence = nullptr;  // continue this sequence of the model (nullptr: its own)
  // Ids never chosen (their logits are -inf), as transformers' suppress_tokens: the checkpoint's
  // generation defaults (ModelInfo::generation.suppress_token_ids) unless the caller clears them.
  std::vector<std::int64_t> suppress;
};

// Feeds `prompt` to the model's sequence (continuing it), then chooses tokens over all logit
// rows (as transformers does).
sdk::Expected<Generated> generate(LoadedModel& m, const std::vector<std::int64_t>& prompt,
                                  const TextGeneration& options, core::Sampler& sampler);

// A conversation's own sequence of the model, kept between replies. Each reply re-encodes the
// whole conversation; what the sequence already holds (or a snapshot taken at the end of the
// last complete turn) is kept where it is a prefix of the new prompt, and only the rest is fed.
// A launch never runs here: it has a sequence of its own.
class ChatSequence {
 public:
  // Uses a sequence made by the model when it has them, else the model's own (then every
  // reply feeds the whole prompt).
  static sdk::Expected<std::unique_ptr<ChatSequence>> create(LoadedModel& m);
  ~ChatSequence();
  // Makes the sequence hold a prefix of `prompt` and returns the rest to feed (never empty).
  // `turn_end`: prompt[0, turn_end) ends with the last complete turn (the snapshot's place).
  sdk::Expected<std::vector<std::int64_t>> prepare(const std::vector<std::int64_t>& prompt, std::size_t turn_end);
  // After generate(): the rest and the generated ids it fed.
  void fed(const std::vector<std::int64_t>& rest, const Generated& g);
  sdk::Sequence* sequence() { return live_.get(); }
  std::size_t reused() const { return reused_; }  // prompt tokens the last prepare() did not feed again

 private:
  explicit ChatSequence(LoadedModel& m) : m_(m) {}
  LoadedModel& m_;
  sdk::Handle<sdk::Sequence> live_, snapshot_;
  std::vector<std::int64_t> live_ids_, snapshot_ids_;
  std::size_t reused_ = 0;
};

// "stats: prompt 20 tokens, generated 8 tokens in 1.04 s (8.7 tok/s), ..." on stderr when `enabled`.
void print_stats(bool enabled, std::size_t prompt_tokens, const Generated& g);

}  // namespace qgpu::host
