// qgpu-synth-qwen35: writes a deterministic random Qwen3.5 checkpoint.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "qgpu/qwen35/checkpoint.h"
#include "qgpu/qwen35/synthetic.h"
#include "qgpu/qwen35/tokenizer.h"

int main(int argc, char** argv) {
  CLI::App app{"Writes a synthetic Qwen3.5 checkpoint (config.json + safetensors, bf16) with Qwen3.5-2B layer shapes"};
  std::string out;
  std::int64_t layers = 4;
  std::int64_t vocab = -1;
  std::uint64_t seed = 0;
  bool small = false;
  std::string embedding = "planted";
  bool stress = false;
  double shard_mb = 0;
  std::int32_t tokenizer_vocab = 512;
  app.add_option("--out", out, "output directory (created if missing)")->required();
  app.add_option("--layers", layers, "decoder layers (pattern L,L,L,F; at least one full-attention layer)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--vocab", vocab, "embedding rows (default 4096, or 256 with --small)")->check(CLI::Range(1, 1 << 24));
  app.add_option("--seed", seed, "random seed (same seed, same bytes)");
  app.add_option("--embedding", embedding,
                 "planted: N(0, 0.02) with one channel negative on every row (the default's bytes); "
                 "isotropic: N(0, 0.02); anisotropic: a shared heavy-tailed direction plus noise, like trained "
                 "tied embeddings (neither has a channel of one sign)")
      ->check(CLI::IsMember({"planted", "isotropic", "anisotropic"}));
  app.add_flag("--stress", stress,
               "a stress base for the merged model's next-token choice: residual growing ~100x over depth, "
               "massive-activation channels on every token, attention sinks, final-norm scales over 0.05..20 "
               "with negative and near-zero ones (needs >= 4 layers)");
  app.add_flag("--small", small, "tiny shapes for tests (hidden 64) instead of the 2B shapes");
  app.add_option("--shard-mb", shard_mb, "split the weights into shards of at most this many MB (0: one file)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--tokenizer-vocab", tokenizer_vocab,
                 "BPE tokens of the synthetic tokenizer.json (256..720); 0 writes no tokenizer")
      ->check(CLI::Range(0, 720));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  auto spec = small ? qgpu::qwen35::synthetic_small_spec(layers, vocab > 0 ? vocab : 256)
                    : qgpu::qwen35::synthetic_2b_spec(layers, vocab > 0 ? vocab : 4096);
  spec.max_shard_bytes = static_cast<std::uint64_t>(shard_mb * 1e6);
  spec.options.embedding = *qgpu::qwen35::parse_synthetic_embedding(embedding);
  spec.options.stress = stress;
  if (auto ok = qgpu::qwen35::check_synthetic_options(spec.text, spec.options); !ok) {
    std::fprintf(stderr, "qgpu-synth-qwen35: %s\n", ok.to_string().c_str());
    return 2;
  }
  if (tokenizer_vocab > 0) {
    if (tokenizer_vocab < 256) {
      std::fprintf(stderr, "qgpu-synth-qwen35: --tokenizer-vocab must be 0 or in 256..720\n");
      return 2;
    }
    // The Qwen3.5 added tokens follow the BPE tokens; <|endoftext|> (the first) is the model's EOS.
    const std::int64_t ids = tokenizer_vocab + 33;
    if (ids > spec.text.vocab_size) {
      std::fprintf(stderr, "qgpu-synth-qwen35: the tokenizer's %lld ids do not fit %lld embedding rows\n",
                   static_cast<long long>(ids), static_cast<long long>(spec.text.vocab_size));
      return 2;
    }
    spec.text.eos_token_ids = {tokenizer_vocab};
    spec.write_tokenizer = [tokenizer_vocab](const std::filesystem::path& dir, const qgpu::qwen35::TextConfig&) {
      return qgpu::qwen35::write_synthetic_tokenizer(dir / "tokenizer.json", tokenizer_vocab);
    };
  }
  int last_percent = -1;
  spec.progress = [&](std::string_view stage, std::uint64_t done, std::uint64_t total) {
    const int percent = total ? static_cast<int>(100 * done / total) : 100;
    if (percent / 10 != last_percent / 10) {
      std::printf("%.*s: %3d%% (%.1f of %.1f MB)\n", static_cast<int>(stage.size()), stage.data(), percent, done / 1e6,
                  total / 1e6);
      std::fflush(stdout);
      last_percent = percent;
    }
  };
  std::printf("writing a %s%s Qwen3.5 checkpoint: %lld layers, vocab %lld, %s embedding, seed %llu -> %s\n",
              small ? "small" : "2B-shaped", stress ? " stress" : "", static_cast<long long>(layers),
              static_cast<long long>(spec.text.vocab_size), embedding.c_str(), static_cast<unsigned long long>(seed),
              out.c_str());
  if (stress) {
    const auto layout = qgpu::qwen35::synthetic_stress_layout(spec.text, seed);
    std::printf("stress: massive channels");
    for (std::size_t i = 0; i < layout->massive_channels.size(); ++i)
      std::printf(" %lld (%+.0f)", static_cast<long long>(layout->massive_channels[i]), layout->massive_values[i]);
    std::printf(" from layer %lld; first-token channel %lld (%+.0f) from layer %lld; sinks in layers",
                static_cast<long long>(layout->massive_layer), static_cast<long long>(layout->first_token_channel),
                layout->first_token_value, static_cast<long long>(layout->first_token_layer));
    for (auto l : layout->sink_layers) std::printf(" %lld", static_cast<long long>(l));
    std::printf(" (heads 0..%zu, dim %lld); output scale %.2f..%.2f\n", layout->sink_gaps.size() - 1,
                static_cast<long long>(layout->sink_dim), layout->output_scale.front(), layout->output_scale.back());
  }
  auto result = qgpu::qwen35::write_synthetic_checkpoint(out, spec, seed);
  if (!result) {
    std::fprintf(stderr, "qgpu-synth-qwen35: %s\n", result.error().to_string().c_str());
    return 1;
  }
  // Read it back through the same checks a real checkpoint gets.
  auto check = qgpu::qwen35::Checkpoint::open(out);
  if (!check) {
    std::fprintf(stderr, "qgpu-synth-qwen35: written checkpoint fails its check: %s\n",
                 check.error().to_string().c_str());
    return 1;
  }
  for (const auto& f : result->files) std::printf("  %s\n", f.string().c_str());
  std::printf("done: %zu files, %zu tensors, %.1f MB total\n", result->files.size(), check->tensors().size(),
              result->total_bytes / 1e6);
  return 0;
}
