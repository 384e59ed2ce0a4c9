// qgpu-host generate: a text prompt continued by the base model on the configured backend (the
// machine's layers are not involved).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"
#include "generation.h"

namespace qgpu::host {

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
  TextGeneration text;
  text.max_tokens = options.max_tokens;
  text.stops = stops;
  text.stream = !options.json;
  text.logits = options.logits;
  auto g = generate(**m, *prompt, text, sampler);
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
  print_stats(options.stats, prompt->size(), *g);
  return kExitOk;
}

}  // namespace qgpu::host
