// qgpu-host generate: a text prompt continued by the base model on the configured backend (the
// machine's layers are not involved).
#include <cstdio>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"
#include "generation.h"

namespace qgpu::host {
namespace {

// --prompt-ids: "1,2,3" or @FILE (a JSON array, or ids separated by commas or whitespace).
sdk::Expected<std::vector<std::int64_t>> parse_ids(const std::string& spec, std::int64_t vocab_size) {
  std::string text = spec;
  std::string where = "--prompt-ids";
  if (spec.starts_with("@")) {
    where = spec.substr(1);
    std::ifstream in(where, std::ios::binary);
    if (!in) return sdk::not_found("--prompt-ids: cannot open '" + where + "'");
    std::stringstream all;
    all << in.rdbuf();
    text = all.str();
  }
  for (char& c : text)
    if (c == ',' || c == '[' || c == ']' || c == '\n' || c == '\r' || c == '\t') c = ' ';
  std::vector<std::int64_t> ids;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    std::size_t used = 0;
    std::int64_t id = -1;
    try {
      id = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || id < 0 || id >= vocab_size)
      return sdk::invalid_argument(where + ": '" + word + "' is not a token id in [0, " + std::to_string(vocab_size) +
                                   ")");
    ids.push_back(id);
  }
  return ids;
}

}  // namespace

int run_generate(const core::Host& host, const GenerateOptions& options) {
  if (options.prompt.empty() && options.prompt_ids.empty())
    return report(sdk::invalid_argument("generate needs --prompt TEXT or --prompt-ids IDS"));
  if (auto s = core::validate(core::resolve_sampling({}, options.sampling)); !s) return report(s);
  auto m = load_model(host);
  if (!m) return report(m.error());
  const sdk::ModelInfo& info = (*m)->info;
  const core::SamplingOptions sampling = core::resolve_sampling(info.generation, options.sampling);
  if (auto s = core::validate(sampling); !s) return report(s);
  // Plain text generation stops where transformers' generate() would: on the checkpoint's eos ids.
  const std::vector<std::int64_t> stops = options.no_stop ? std::vector<std::int64_t>{} : info.generation.eos_token_ids;
  auto prompt = options.prompt_ids.empty()
                    ? core::guarded_call((*m)->name, "encode()", [&] { return (*m)->model->encode(options.prompt); })
                    : parse_ids(options.prompt_ids, info.vocab_size);
  if (!prompt) return report(prompt.error());
  if (prompt->empty()) return report(sdk::invalid_argument(options.prompt_ids.empty() ? "the prompt encodes to no tokens" : "--prompt-ids holds no ids"));
  core::Sampler sampler(sampling);
  if (options.echo && !options.json) std::fwrite(options.prompt.data(), 1, options.prompt.size(), stdout);
  TextGeneration text;
  text.max_tokens = options.max_tokens;
  text.stops = stops;
  text.stream = !options.json;
  text.logits = options.logits;
  if (!options.no_suppress) text.suppress = info.generation.suppress_token_ids;
  auto g = generate(**m, *prompt, text, sampler);
  if (!g) return report(g.error());
  if (options.json) {
    nlohmann::ordered_json out;
    out["prompt_ids"] = *prompt;
    out["ids"] = g->ids;
    out["text"] = g->text;
    out["stopped"] = g->stopped;
    out["stop_ids"] = stops;
    out["suppressed"] = text.suppress.size();
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
