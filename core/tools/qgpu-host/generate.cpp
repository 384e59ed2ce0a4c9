// qgpu-host generate / chat: text generation with the base model on the
// configured backend (the machine's layers are not involved).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"
#include "qgpu/core/sampling.h"
#include "qgpu/core/text.h"
#include "qgpu/sdk/sdk.h"

namespace qgpu::host {
namespace {

// The backend and the base model loaded into it; the model is destroyed first.
struct LoadedModel {
  std::shared_ptr<sdk::TensorBackend> backend;
  std::shared_ptr<sdk::BaseModel> model;
  sdk::ModelInfo info;
  std::string name;
  bool warned_textless = false;  // an id without text was generated (warned once per run)

  ~LoadedModel() { model.reset(); }
};

sdk::Expected<std::unique_ptr<LoadedModel>> load_model(const core::Host& host) {
  auto loaded = std::make_unique<LoadedModel>();
  auto backend = host.instantiate<sdk::TensorBackend>();
  if (!backend) return backend.error();
  loaded->backend = *backend;
  auto model = host.instantiate<sdk::BaseModel>();
  if (!model) return model.error();
  loaded->model = *model;
  loaded->name = host.select(QGPU_PLUGIN_BASE_MODEL)->plugin->name;
  auto info = core::guarded_call(loaded->name, "load()", [&] { return loaded->model->load(*loaded->backend); });
  if (!info) return info.error();
  loaded->info = *info;
  return loaded;
}

struct Generated {
  std::vector<std::int64_t> ids;
  std::vector<std::vector<float>> logits;  // per step, when asked for
  bool stopped = false;                    // ended on a stop token (not on the token limit)
  std::string text;                        // the generated text, invalid UTF-8 replaced
  double seconds = 0;
};

// Feeds `prompt`, then chooses up to `max_tokens` over all logit rows (as transformers), streaming
// text to stdout; a chosen id among `stops` ends the generation and is not part of it.
sdk::Expected<Generated> generate(LoadedModel& m, const std::vector<std::int64_t>& prompt,
                                  const std::vector<std::int64_t>& stops, const GenerateOptions& options,
                                  core::Sampler& sampler) {
  Generated out;
  const auto start = std::chrono::steady_clock::now();
  std::size_t printed = 0;
  std::vector<std::int64_t> feed = prompt;
  for (std::int64_t step = 0; step < options.max_tokens; ++step) {
    auto logits = core::guarded_call(m.name, "forward()", [&] { return m.model->forward(feed); });
    if (!logits) return logits.error();
    auto id = sampler.next(*logits, static_cast<std::int64_t>(logits->size()));
    if (!id) return id.error();
    if (*id >= m.info.tokenizer_size && !m.warned_textless) {
      m.warned_textless = true;
      spdlog::warn("generated token id {}, which the tokenizer lacks ({} ids for {} logit rows): such ids add no text",
                   *id, m.info.tokenizer_size, logits->size());
    }
    if (options.logits) out.logits.push_back(*logits);
    if (std::find(stops.begin(), stops.end(), *id) != stops.end()) {
      out.stopped = true;
      break;
    }
    out.ids.push_back(*id);
    feed.assign(1, *id);
    auto text = core::guarded_call(m.name, "decode()", [&] { return m.model->decode(out.ids); });
    if (!text) return text.error();
    const std::size_t ready = options.json ? printed : core::complete_utf8_prefix(*text);
    if (ready > printed) {
      // Segments end on character boundaries, so cleaning them one by one equals cleaning the whole.
      const std::string clean = core::valid_utf8(std::string_view(*text).substr(printed, ready - printed));
      std::fwrite(clean.data(), 1, clean.size(), stdout);
      std::fflush(stdout);
      printed = ready;
    }
  }
  auto text = m.model->decode(out.ids);
  if (!text) return text.error();
  out.text = core::valid_utf8(*text);
  if (!options.json && text->size() > printed) {
    const std::string clean = core::valid_utf8(std::string_view(*text).substr(printed));
    std::fwrite(clean.data(), 1, clean.size(), stdout);
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

void print_stats(const GenerateOptions& options, std::size_t prompt_tokens, const Generated& g) {
  if (!options.stats) return;
  std::fprintf(stderr, "stats: prompt %zu tokens, generated %zu tokens in %.2f s (%.1f tok/s)%s\n", prompt_tokens,
               g.ids.size(), g.seconds, g.seconds > 0 ? (g.ids.size() + 1) / g.seconds : 0.0,
               g.stopped ? ", stopped at a stop token" : ", token limit reached");
}

}  // namespace

int run_generate(const core::Host& host, const GenerateOptions& options) {
  if (auto s = core::validate(core::resolve_sampling({}, options.sampling)); !s) return report(s);
  auto m = load_model(host);
  if (!m) return report(m.error());
  const sdk::ModelInfo& info = (*m)->info;
  const core::SamplingOptions sampling = core::resolve_sampling(info.generation, options.sampling);
  if (auto s = core::validate(sampling); !s) return report(s);
  // Plain text generation stops where transformers' generate() would: on the checkpoint's eos ids.
  const std::vector<std::int64_t> stops = options.no_stop ? std::vector<std::int64_t>{} : info.generation.eos_token_ids;
  auto prompt = core::guarded_call((*m)->name, "encode()", [&] { return (*m)->model->encode(options.prompt); });
  if (!prompt) return report(prompt.error());
  if (prompt->empty()) return report(sdk::invalid_argument("the prompt encodes to no tokens"));
  core::Sampler sampler(sampling);
  if (options.echo && !options.json) std::fwrite(options.prompt.data(), 1, options.prompt.size(), stdout);
  auto g = generate(**m, *prompt, stops, options, sampler);
  if (!g) return report(g.error());
  if (options.json) {
    nlohmann::ordered_json out;
    out["prompt_ids"] = *prompt;
    out["ids"] = g->ids;
    out["text"] = g->text;
    out["stopped"] = g->stopped;
    out["stop_ids"] = stops;
    out["sampling"] = {{"temperature", sampling.temperature},
                       {"top_k", sampling.top_k},
                       {"top_p", sampling.top_p},
                       {"seed", sampling.seed},
                       {"defaults_from", info.generation.source}};
    out["model"] = {
        {"vocab_size", info.vocab_size}, {"tokenizer_size", info.tokenizer_size}, {"parameters", info.parameters}};
    if (options.logits) out["logits"] = g->logits;
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("\n");
  }
  print_stats(options, prompt->size(), *g);
  return kExitOk;
}

int run_chat(const core::Host& host, const GenerateOptions& options) {
  if (auto s = core::validate(core::resolve_sampling({}, options.sampling)); !s) return report(s);
  auto m = load_model(host);
  if (!m) return report(m.error());
  const core::SamplingOptions sampling = core::resolve_sampling((*m)->info.generation, options.sampling);
  if (auto s = core::validate(sampling); !s) return report(s);
  core::Sampler sampler(sampling);
  // A turn ends on the checkpoint's eos ids or the chat format's end of turn.
  const std::vector<std::int64_t> stops = (*m)->model->stop_ids();
  std::vector<sdk::ChatTurn> turns;
  if (!options.system.empty()) turns.push_back({"system", options.system});
  std::fprintf(stderr, "chat with %s (%s); /reset starts over, /exit or end of input quits\n", (*m)->name.c_str(),
               (*m)->info.checkpoint.c_str());
  std::string line;
  while (true) {
    std::fprintf(stderr, "> ");
    std::fflush(stderr);
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line == "/reset") {
      turns.resize(options.system.empty() ? 0 : 1);
      continue;
    }
    if (line.empty()) continue;
    turns.push_back({"user", line});
    // The whole conversation is re-encoded each turn: simple and exact.
    (*m)->model->reset();
    auto prompt = core::guarded_call((*m)->name, "encode_chat()", [&] { return (*m)->model->encode_chat(turns); });
    if (!prompt) return report(prompt.error());
    auto g = generate(**m, *prompt, stops, options, sampler);
    if (!g) return report(g.error());
    std::printf("\n");
    std::fflush(stdout);
    print_stats(options, prompt->size(), *g);
    auto reply = (*m)->model->decode(g->ids);
    if (!reply) return report(reply.error());
    turns.push_back({"assistant", core::valid_utf8(*reply)});
  }
  return kExitOk;
}

}  // namespace qgpu::host
