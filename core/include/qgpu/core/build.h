// `qgpu-host build`: the machine's circuit merged in front of the configured base, written as a
// checkpoint of the base's own format (for Qwen3.5: a Hugging Face checkpoint that stock
// transformers loads): the circuit layers as stock linear-attention decoder layers in front of
// the base's, the record tokens as added vocabulary rows with an untied head, and a qgpu.json
// manifest (docs/BUILD.md).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "qgpu/core/host.h"
#include "qgpu/sdk/status.h"

namespace qgpu::core {

struct BuildOptions {
  std::string directory;                           // the checkpoint directory to write
  std::string dtype = "bf16";                      // f32 or bf16: the circuit layers and record rows
  std::uint64_t max_shard_bytes = 5'000'000'000;  // 0: one model.safetensors
  std::function<void(std::string_view)> on_progress;                 // lines (compiling, merging, ...)
  std::function<void(std::uint64_t done, std::uint64_t total)> on_bytes;  // while the weights are written
};

struct BuildResult {
  std::vector<std::string> files;  // written, in order
  std::string manifest;            // qgpu.json's contents
  std::int64_t circuit_layers = 0, base_layers = 0;
  std::int64_t text_rows = 0, record_rows = 0;  // record token i is id text_rows + i
  std::uint64_t bytes = 0;                      // of the files written
  double merge_seconds = 0, write_seconds = 0;
};

// The manifest's file name in a built checkpoint.
inline constexpr std::string_view kManifestName = "qgpu.json";

sdk::Expected<BuildResult> build_checkpoint(const Host& host, const BuildOptions& options);

}  // namespace qgpu::core
