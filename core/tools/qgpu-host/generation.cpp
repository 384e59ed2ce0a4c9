#include "generation.h"

#include <limits>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "qgpu/core/text.h"

namespace qgpu::host {

sdk::Expected<std::unique_ptr<LoadedModel>> load_model(const core::Host& host) {
  auto loaded = std::make_unique<LoadedModel>();
  QGPU_ASSIGN_OR_RETURN(loaded->backend, host.instantiate<sdk::TensorBackend>());
  QGPU_ASSIGN_OR_RETURN(loaded->model, host.instantiate<sdk::BaseModel>());
  loaded->name = host.select(QGPU_PLUGIN_BASE_MODEL)->plugin->name;
  QGPU_ASSIGN_OR_RETURN(loaded->info,
                        core::guarded_call(loaded->name, "load()", [&] { return loaded->model->load(*loaded->backend); }));
  return loaded;
}

sdk::Expected<Generated> generate(LoadedModel& m, const std::vector<std::int64_t>& prompt,
                                  const TextGeneration& options, core::Sampler& sampler) {
  Generated out;
  const auto start = std::chrono::steady_clock::now();
  std::size_t printed = 0;
  std::vector<std::int64_t> feed = prompt;
  auto print = [&](std::string_view text, std::size_t ready) {
    if (!options.stream || ready <= printed) return;
    // Segments end on character boundaries, so cleaning them one by one equals cleaning the whole.
    const std::string clean = core::valid_utf8(text.substr(printed, ready - printed));
    std::fwrite(clean.data(), 1, clean.size(), stdout);
    std::fflush(stdout);
    printed = ready;
  };
  std::string text;
  // A forced turn is fed whole, whatever max_tokens says.
  const std::int64_t limit =
      options.forced != nullptr ? static_cast<std::int64_t>(options.forced->size()) + 1 : options.max_tokens;
  for (std::int64_t step = 0; step < limit; ++step) {
    QGPU_ASSIGN_OR_RETURN(std::vector<float> logits,
                          core::guarded_call(m.name, "forward()", [&] {
                            return options.sequence ? m.model->forward(*options.sequence, feed) : m.model->forward(feed);
                          }));
    out.fed = out.ids.size();  // the previous id (if any) went in with this forward
    std::int64_t id = 0;
    if (options.forced != nullptr) {
      if (step >= static_cast<std::int64_t>(options.forced->size())) {
        out.stopped = true;
        break;
      }
      id = (*options.forced)[step];
    } else {
      for (std::int64_t s : options.suppress)
        if (s >= 0 && s < static_cast<std::int64_t>(logits.size()))
          logits[static_cast<std::size_t>(s)] = -std::numeric_limits<float>::infinity();
      QGPU_ASSIGN_OR_RETURN(id, sampler.next(logits, static_cast<std::int64_t>(logits.size())));
    }
    if (id >= m.info.tokenizer_size && !m.warned_textless) {
      m.warned_textless = true;
      spdlog::warn("generated token id {}, which the tokenizer lacks ({} ids for {} logit rows): such ids add no text",
                   id, m.info.tokenizer_size, logits.size());
    }
    if (options.logits) out.logits.push_back(std::move(logits));
    if (std::find(options.stops.begin(), options.stops.end(), id) != options.stops.end()) {
      out.stopped = true;
      break;
    }
    out.ids.push_back(id);
    feed.assign(1, id);
    QGPU_ASSIGN_OR_RETURN(text, core::guarded_call(m.name, "decode()", [&] { return m.model->decode(out.ids); }));
    print(text, core::complete_utf8_prefix(text));
    if (options.stop_after && options.stop_after(text)) {
      out.ended_by_text = true;
      break;
    }
  }
  print(text, text.size());
  out.text = core::valid_utf8(text);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

namespace {

bool starts_with(const std::vector<std::int64_t>& whole, const std::vector<std::int64_t>& prefix) {
  return prefix.size() <= whole.size() && std::equal(prefix.begin(), prefix.end(), whole.begin());
}

}  // namespace

sdk::Expected<std::unique_ptr<ChatSequence>> ChatSequence::create(LoadedModel& m) {
  std::unique_ptr<ChatSequence> c(new ChatSequence(m));
  auto live = m.model->create_sequence();
  if (!live) {
    if (live.error().code() != sdk::ErrorCode::kNotAvailable) return live.error();
    return c;  // the model's own sequence, fed whole each reply
  }
  c->live_ = std::move(*live);
  QGPU_ASSIGN_OR_RETURN(c->snapshot_, m.model->create_sequence());
  return c;
}

ChatSequence::~ChatSequence() = default;

sdk::Expected<std::vector<std::int64_t>> ChatSequence::prepare(const std::vector<std::int64_t>& prompt,
                                                                std::size_t turn_end) {
  reused_ = 0;
  if (!live_) {
    m_.model->reset();
    return prompt;
  }
  const bool live_fits = !live_ids_.empty() && live_ids_.size() < prompt.size() && starts_with(prompt, live_ids_);
  if (!live_fits) {
    if (!snapshot_ids_.empty() && snapshot_ids_.size() < prompt.size() && starts_with(prompt, snapshot_ids_)) {
      QGPU_RETURN_IF_ERROR(m_.model->copy_sequence(*snapshot_, *live_));
      live_ids_ = snapshot_ids_;
    } else {
      QGPU_RETURN_IF_ERROR(m_.model->truncate_sequence(*live_, 0));
      live_ids_.clear();
    }
  }
  reused_ = live_ids_.size();
  // The snapshot moves to the end of the last complete turn (a later prompt repeats it).
  if (turn_end > live_ids_.size() && turn_end < prompt.size()) {
    std::span<const std::int64_t> part(prompt.begin() + static_cast<std::ptrdiff_t>(live_ids_.size()),
                                       prompt.begin() + static_cast<std::ptrdiff_t>(turn_end));
    QGPU_RETURN_IF_ERROR(
        core::guarded_call(m_.name, "forward()", [&] { return m_.model->forward(*live_, part); }).status());
    live_ids_.assign(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(turn_end));
    QGPU_RETURN_IF_ERROR(m_.model->copy_sequence(*live_, *snapshot_));
    snapshot_ids_ = live_ids_;
  }
  return std::vector<std::int64_t>(prompt.begin() + static_cast<std::ptrdiff_t>(live_ids_.size()), prompt.end());
}

void ChatSequence::fed(const std::vector<std::int64_t>& rest, const Generated& g) {
  if (!live_) return;
  live_ids_.insert(live_ids_.end(), rest.begin(), rest.end());
  live_ids_.insert(live_ids_.end(), g.ids.begin(), g.ids.begin() + static_cast<std::ptrdiff_t>(g.fed));
}

void print_stats(bool enabled, std::size_t prompt_tokens, const Generated& g) {
  if (!enabled) return;
  std::fprintf(stderr, "stats: prompt %zu tokens, generated %zu tokens in %.2f s (%.1f tok/s)%s\n", prompt_tokens,
               g.ids.size(), g.seconds, g.seconds > 0 ? (g.ids.size() + 1) / g.seconds : 0.0,
               g.stopped ? ", stopped at a stop token" : g.ended_by_text ? ", ended at a tool call" : ", token limit reached");
}

}  // namespace qgpu::host
