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
  double shard_mb = 0;
  std::int32_t tokenizer_vocab = 512;
  app.add_option("--out", out, "output directory (created if missing)")->required();
  app.add_option("--layers", layers, "decoder layers (pattern L,L,L,F; at least one full-attention layer)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--vocab", vocab, "embedding rows (default 4096, or 256 with --small)")->check(CLI::Range(1, 1 << 24));
  app.add_option("--seed", seed, "random seed (same seed, same bytes)");
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
  std::printf("writing a %s Qwen3.5 checkpoint: %lld layers, vocab %lld, seed %llu -> %s\n",
              small ? "small" : "2B-shaped", static_cast<long long>(layers),
              static_cast<long long>(spec.text.vocab_size), static_cast<unsigned long long>(seed), out.c_str());
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
