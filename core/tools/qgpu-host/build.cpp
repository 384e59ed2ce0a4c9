// qgpu-host build: the merged model written as a checkpoint of the base's own format
// (core/build.h, docs/BUILD.md).
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "progress.h"
#include "qgpu/core/build.h"

namespace qgpu::host {

int run_build(const core::Host& host, const BuildOptions& options) {
  const bool terminal = stderr_is_terminal();
  core::BuildOptions build;
  build.directory = options.out;
  build.dtype = options.dtype;
  build.max_shard_bytes = options.max_shard_mb * 1'000'000ull;
  build.on_progress = [](std::string_view line) {
    std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
  };
  // Bytes written: a live line on a terminal, else a line every 10 seconds.
  auto last = std::chrono::steady_clock::now();
  bool live = false;
  build.on_bytes = [&](std::uint64_t done, std::uint64_t total) {
    const auto now = std::chrono::steady_clock::now();
    const bool end = done == total;
    if (!end && std::chrono::duration<double>(now - last).count() < (terminal ? 0.2 : 10)) return;
    last = now;
    const double gb = 1e-9;
    if (terminal) {
      std::fprintf(stderr, "\r\033[Kbuild: %.2f of %.2f GB written (%.0f%%)", done * gb, total * gb,
                   total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0);
      live = !end;
      if (end) std::fprintf(stderr, "\n");
    } else {
      std::fprintf(stderr, "build: %.2f of %.2f GB written\n", done * gb, total * gb);
    }
  };
  auto result = core::build_checkpoint(host, build);
  if (live) std::fprintf(stderr, "\n");
  if (!result) return report(result.status());
  if (options.json) {
    nlohmann::ordered_json out;
    out["directory"] = options.out;
    out["files"] = result->files;
    out["bytes"] = result->bytes;
    out["circuit_layers"] = result->circuit_layers;
    out["base_layers"] = result->base_layers;
    out["text_rows"] = result->text_rows;
    out["record_rows"] = result->record_rows;
    out["merge_seconds"] = result->merge_seconds;
    out["write_seconds"] = result->write_seconds;
    out["manifest"] = nlohmann::ordered_json::parse(result->manifest);
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  std::printf("wrote %s: %lld layers (%lld circuit + %lld base), vocabulary %lld text + %lld record rows, %s, "
              "%zu files, %.2f GB (merge %.1f s, write %.1f s)\n",
              options.out.c_str(), static_cast<long long>(result->circuit_layers + result->base_layers),
              static_cast<long long>(result->circuit_layers), static_cast<long long>(result->base_layers),
              static_cast<long long>(result->text_rows), static_cast<long long>(result->record_rows),
              options.dtype.c_str(), result->files.size(), static_cast<double>(result->bytes) * 1e-9,
              result->merge_seconds, result->write_seconds);
  return kExitOk;
}

}  // namespace qgpu::host
