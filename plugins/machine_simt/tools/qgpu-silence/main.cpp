// qgpu-silence: measures the merged model's silence on text (docs/MACHINE_CIRCUIT.md §6).
//
// Loads the config's base model and tensor backend, compiles a circuit of the
// machine at the base's layer shapes with a mute channel, merges it in front of
// the base and compares next-token distributions over the base's rows
// (record rows masked, as in text mode), KL(base ‖ merged):
//   text only      the merged model and the base both see PROMPT + SUFFIX;
//   after circuit  the merged model sees PROMPT + circuit tokens + SUFFIX, the
//                  base PROMPT + SUFFIX; KL at each SUFFIX position.
// The circuit tokens are ROM records of BLOCKS blocks of random rows (two
// records of 3 tokens per ROM row) followed by one EXEC record per block.
//
// A tool of this machine (it builds a part of the machine's circuit), kept beside it; core's merge
// library does the rest. The whole machine's silence is measured by `qgpu-host run --silence`.
#include <CLI/CLI.hpp>
#include <boost/dll/runtime_symbol_info.hpp>
#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "fetch_decode.h"
#include "protocol.h"
#include "qgpu/core/host.h"
#include "qgpu/core/log.h"
#include "qgpu/core/merged_model.h"
#include "qgpu/core/report.h"
#include "qgpu/core/silence_json.h"
#include "qgpu/core/text.h"
#include "qgpu/weights/compile.h"
#include "records.h"

namespace qgpu::silence {
namespace {

constexpr int kExitOk = 0;
using core::kExitFailure;
using core::kExitUsage;

int report(const sdk::Status& status) {
  return core::report_error("qgpu-silence", status);
}

struct Options {
  std::string config;
  std::vector<std::string> plugin_dirs;
  std::string circuit = "fetch_decode";
  std::string prompt;
  std::string suffix;
  int blocks = 8;
  int slots = 5;
  int decode_steps = 8;
  std::uint64_t seed = 1;
  bool json = false;
};

nlohmann::ordered_json to_json(const core::SilenceReport& r) {
  nlohmann::ordered_json j;
  j["tokens"] = r.tokens;
  j["record_tokens"] = r.records;
  j["text_positions_before_records"] = r.before;
  j["identical_before"] = r.before_identical;
  j["kl_before_max"] = r.kl_before_max;
  j["text_positions_after_records"] = r.after;
  j["identical_after"] = r.after_identical;
  j["kl_after_mean"] = r.kl_after_mean;
  j["kl_after_max"] = r.kl_after_max;
  j["kl_after_max_at"] = r.kl_after_max_at;
  j["kl"] = r.kl;
  j["record_mass_max_unmasked"] = r.record_mass_max;
  j["merged_seconds"] = r.merged_seconds;
  j["base_seconds"] = r.base_seconds;
  return j;
}

int run(const Options& o, const char* argv0) {
  if (o.circuit != "fetch_decode")
    return report(sdk::invalid_argument("--circuit: unknown circuit '" + o.circuit + "' (available: fetch_decode)"));
  if (o.blocks < 1 || o.blocks > simt::kProtoBlocks)
    return report(sdk::invalid_argument("--blocks: " + std::to_string(o.blocks) + " is outside 1.." +
                                        std::to_string(simt::kProtoBlocks)));
  core::HostOptions host_options;
  host_options.config_file = o.config;
  for (const auto& d : o.plugin_dirs) host_options.plugin_dirs.emplace_back(d);
  host_options.executable = boost::dll::program_location().string();
  (void)argv0;
  auto host = core::Host::open(host_options);
  if (!host) return report(host.error());
  auto backend = (*host)->instantiate<sdk::TensorBackend>();
  if (!backend) return report(backend.error());
  auto base = (*host)->instantiate<sdk::BaseModel>();
  if (!base) return report(base.error());
  auto info = (*base)->load(**backend);
  if (!info) return report(info.error());
  sdk::BaseModel& model = **base;

  weights::Circuit c("simt.fetch_decode");
  auto fd = simt::circuit::build_fetch_decode(c, o.slots);
  if (!fd) return report(fd.error().with_context("--slots"));
  weights::Target target;
  target.shapes = info->shapes;
  target.mute_channel = true;
  auto cc = weights::compile(c, target);
  if (!cc) return report(cc.error().with_context("compiling " + o.circuit + " at the base's shapes"));

  // Circuit tokens: ROM rows (random words) of every block, then one EXEC per block.
  std::mt19937_64 rng(o.seed);
  std::vector<simt::Record> records;
  for (int b = 0; b < o.blocks; ++b)
    for (int s = 0; s < o.slots; ++s)
      for (const simt::Record& r : simt::rom_records(b, s, rng())) records.push_back(r);
  for (int b = 0; b < o.blocks; ++b) records.push_back(simt::exec_record(b, rng() % simt::kProtoWarps, 1 + rng() % 15));
  // Record rows: one per distinct machine token id (records.h: a function of the id), compact.
  core::MergeInputs in;
  in.circuit = &*cc;
  core::RecordTables tables(cc->target.shapes.hidden_size);
  std::map<std::int64_t, std::int64_t> index;
  std::vector<std::int64_t> circuit_ids;  // as merged-model ids
  for (const simt::Record& r : records) {
    auto ids = simt::circuit::record_token_ids(fd->records, r);
    if (!ids) return report(ids.error());
    for (std::int64_t id : *ids) {
      auto [it, fresh] = index.emplace(id, static_cast<std::int64_t>(index.size()));
      if (fresh) {
        auto values = simt::circuit::token_inputs(fd->records, id);
        if (!values) return report(values.error());
        tables.add(weights::embed(c, cc->allocation, *values));
      }
      circuit_ids.push_back(info->vocab_size + it->second);
    }
  }
  tables.tie();  // stand-in until the sequencer's choice fields exist
  in.records = tables.rows();
  auto merged = core::MergedModel::create(model, *info, **backend, in);
  if (!merged) return report(merged.error());

  auto prompt = model.encode(o.prompt);
  if (!prompt) return report(prompt.error().with_context("--prompt"));
  auto suffix = model.encode(o.suffix.empty() ? o.prompt : o.suffix);
  if (!suffix) return report(suffix.error().with_context("--suffix"));
  if (prompt->empty() || suffix->empty()) return report(sdk::invalid_argument("--prompt/--suffix encode to no tokens"));

  std::vector<std::int64_t> text = *prompt;
  text.insert(text.end(), suffix->begin(), suffix->end());
  auto text_only = core::measure_silence(**merged, model, **backend, text);
  if (!text_only) return report(text_only.error());
  std::vector<std::int64_t> seq = *prompt;
  seq.insert(seq.end(), circuit_ids.begin(), circuit_ids.end());
  seq.insert(seq.end(), suffix->begin(), suffix->end());
  auto after = core::measure_silence(**merged, model, **backend, seq);
  if (!after) return report(after.error());

  // Decode cost: greedy steps of one token after the prompt, merged model vs base (text rows only).
  auto decode_ms = [&](bool use_merged) -> sdk::Expected<double> {
    QGPU_RETURN_IF_ERROR((*merged)->reset());
    std::vector<float> logits;
    if (use_merged) {
      auto f = (*merged)->forward(*prompt);
      if (!f) return f.error();
      logits = std::move(f->logits);
    } else {
      auto f = model.forward(*prompt);
      if (!f) return f.error();
      logits = std::move(*f);
    }
    const auto start = std::chrono::steady_clock::now();
    for (int step = 0; step < o.decode_steps; ++step) {
      std::int64_t next = 0;
      for (std::int64_t j = 1; j < info->vocab_size; ++j)
        if (logits[static_cast<std::size_t>(j)] > logits[static_cast<std::size_t>(next)]) next = j;
      const std::int64_t one[1] = {next};
      if (use_merged) {
        auto f = (*merged)->forward(one);
        if (!f) return f.error();
        logits = std::move(f->logits);
      } else {
        auto f = model.forward(one);
        if (!f) return f.error();
        logits = std::move(*f);
      }
    }
    QGPU_RETURN_IF_ERROR((*merged)->reset());
    return 1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / o.decode_steps;
  };
  sdk::Expected<double> merged_ms = 0.0, base_ms = 0.0;
  if (o.decode_steps > 0) {
    merged_ms = decode_ms(true);
    if (!merged_ms) return report(merged_ms.error());
    base_ms = decode_ms(false);
    if (!base_ms) return report(base_ms.error());
  }

  const auto& silence = (*merged)->silence();
  const auto& cost = (*merged)->cost();
  std::int64_t heads = 0;
  for (const auto& u : cc->schedule.use) heads += u.key_heads;
  if (o.json) {
    nlohmann::ordered_json j;
    j["checkpoint"] = info->checkpoint;
    j["dtype"] = std::string(sdk::dtype_name((*backend)->dtype()));
    j["circuit"] = {{"name", o.circuit},
                    {"layers", cc->schedule.num_layers},
                    {"key_heads", heads},
                    {"mlp_neurons", cc->total_neurons()},
                    {"channels", cc->allocation.channels_used},
                    {"mute_channel", cc->allocation.mute}};
    j["silence"] = core::to_json(silence);
    j["cost"] = {{"uploaded_bytes", cost.uploaded_bytes},
                 {"window_channels", cost.window_channels},
                 {"records", cost.records},
                 {"search_seconds", cost.search_seconds},
                 {"upload_seconds", cost.upload_seconds}};
    if (o.decode_steps > 0) j["decode_ms_per_token"] = {{"merged", *merged_ms}, {"base", *base_ms}};
    j["prompt_tokens"] = prompt->size();
    j["suffix_tokens"] = suffix->size();
    j["text_only"] = to_json(*text_only);
    j["after_circuit"] = to_json(*after);
    std::printf("%s\n", j.dump().c_str());
    return kExitOk;
  }
  std::printf("base: %s (%s)\n", info->checkpoint.c_str(), std::string(sdk::dtype_name((*backend)->dtype())).c_str());
  std::printf("circuit: %s, %d layers, %lld key heads, %lld MLP neurons, %d channels (mute channel %d)\n",
              o.circuit.c_str(), cc->schedule.num_layers, static_cast<long long>(heads),
              static_cast<long long>(cc->total_neurons()), cc->allocation.channels_used, cc->allocation.mute);
  std::printf("silence: %s\n", silence.to_string().c_str());
  std::printf("merge: %.1f MB uploaded, search %.2f s, upload %.2f s\n", static_cast<double>(cost.uploaded_bytes) / 1e6,
              cost.search_seconds, cost.upload_seconds);
  std::printf("text only (%lld tokens): %lld of %lld logit rows identical to the base's, max KL(base||merged) = %g\n",
              static_cast<long long>(text_only->tokens), static_cast<long long>(text_only->before_identical),
              static_cast<long long>(text_only->before), text_only->kl_before_max);
  std::printf(
      "after %lld circuit tokens: prompt positions max KL %g; %lld suffix positions: KL(base||merged) mean %.6g, "
      "max %.6g (token %lld), %lld identical; unmasked record mass <= %.3g\n",
      static_cast<long long>(after->records), after->kl_before_max, static_cast<long long>(after->after),
      after->kl_after_mean, after->kl_after_max, static_cast<long long>(after->kl_after_max_at),
      static_cast<long long>(after->after_identical), after->record_mass_max);
  std::printf("time: prefill of the after-circuit run: merged %.2f s (%lld tokens), base %.2f s (%lld tokens)",
              after->merged_seconds, static_cast<long long>(after->tokens), after->base_seconds,
              static_cast<long long>(after->tokens - after->records));
  if (o.decode_steps > 0)
    std::printf("; decode (%d steps): merged %.1f ms/token, base %.1f ms/token", o.decode_steps, *merged_ms, *base_ms);
  std::printf("\n");
  return kExitOk;
}

}  // namespace
}  // namespace qgpu::silence

int main(int argc, char** argv) {
  using namespace qgpu;
  core::init_logging();
  CLI::App app{"qgpu-silence: KL(base || merged) of the machine's circuit merged in front of the base model"};
  silence::Options o;
  app.add_option("-c,--config", o.config, "YAML config (base and backend sections are used)")->required();
  app.add_option("--plugin-dir", o.plugin_dirs, "extra directory to search for plugins (repeatable)");
  app.add_option("--circuit", o.circuit, "circuit to merge (fetch_decode)");
  app.add_option("--prompt", o.prompt, "text before the circuit tokens")->required();
  app.add_option("--suffix", o.suffix, "text after them (default: the prompt again)");
  app.add_option("--blocks", o.blocks, "ROM blocks written and executed (1-32, default 8)");
  app.add_option("--seed", o.seed, "seed of the random ROM rows and EXEC warps/lanes");
  app.add_option("--decode-steps", o.decode_steps, "greedy one-token steps timed per model (default 8; 0: none)")
      ->check(CLI::Range(0, 4096));
  app.add_flag("--json", o.json, "print one JSON object");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "qgpu-silence: error: %s\n", e.what());
    return silence::kExitUsage;
  }
  try {
    return silence::run(o, argv[0]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qgpu-silence: error: %s\n", e.what());
    return silence::kExitFailure;
  }
}
