#include "qgpu/core/build.h"

#include <bit>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "qgpu/core/launch_session.h"
#include "qgpu/core/merged_model.h"
#include "qgpu/core/plugin_registry.h"
#include "qgpu/core/silence_json.h"
#include "qgpu/sdk/sdk.h"
#include "qgpu/weights/model.h"
#include "qgpu/weights/numerics.h"

namespace qgpu::core {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Copies f32 values (already exact in the export dtype) or bf16 bit patterns into a view the
// base plugin asked for (F32 or BF16, contiguous, `n` elements).
sdk::Status copy_into(const sdk::TensorView& out, std::span<const float> f32, std::span<const std::uint16_t> bf16) {
  const std::size_t n = f32.empty() ? bf16.size() : f32.size();
  if (static_cast<std::size_t>(out.numel()) != n || !out.is_contiguous())
    return sdk::invalid_argument("export: the checkpoint asks for " + std::to_string(out.numel()) +
                                 " contiguous values, the merged model has " + std::to_string(n));
  if (out.dtype == sdk::DType::kF32) {
    auto* dst = static_cast<float*>(out.data);
    if (!f32.empty())
      std::memcpy(dst, f32.data(), n * sizeof(float));
    else
      for (std::size_t i = 0; i < n; ++i) dst[i] = std::bit_cast<float>(std::uint32_t{bf16[i]} << 16);
    return sdk::Status::ok();
  }
  if (out.dtype == sdk::DType::kBF16) {
    auto* dst = static_cast<std::uint16_t*>(out.data);
    if (!bf16.empty()) {
      std::memcpy(dst, bf16.data(), n * sizeof(std::uint16_t));
      return sdk::Status::ok();
    }
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint16_t bits = weights::bf16_bits(f32[i]);
      if (std::bit_cast<float>(std::uint32_t{bits} << 16) != f32[i])
        return sdk::invalid_argument("export: value " + std::to_string(f32[i]) + " is not exact in bf16");
      dst[i] = bits;
    }
    return sdk::Status::ok();
  }
  return sdk::invalid_argument("export: the checkpoint asks for " + std::string(sdk::dtype_name(out.dtype)) +
                               " values; the merged model gives f32 or bf16");
}

// The merged model's tensors, handed to the base plugin as it writes the checkpoint.
class MergedSource final : public sdk::ExportSource {
 public:
  MergedSource(const MergedModel& model, const BuildOptions& options) : model_(model), options_(options) {}

  sdk::Status fill_layer(std::int64_t layer, std::string_view suffix, const sdk::TensorView& out) override {
    // The writer asks for a layer's tensors one after another: the layer is moved to the merged
    // channels once for all of them.
    if (layer != layer_index_) {
      QGPU_ASSIGN_OR_RETURN(layer_, model_.merged_layer(layer));
      layer_index_ = layer;
    }
    auto t = weights::export_layer_tensor(layer_, model_.shapes(), layer, std::string(suffix), model_.dtype());
    if (!t) return sdk::not_found("export: a linear-attention layer has no tensor '" + std::string(suffix) + "'");
    std::int64_t numel = 1;
    for (std::int64_t d : t->shape) numel *= d;
    if (static_cast<std::size_t>(out.rank) != t->shape.size() ||
        !std::equal(t->shape.begin(), t->shape.end(), out.shape))
      return sdk::invalid_argument("export: layer " + std::to_string(layer) + " '" + std::string(suffix) +
                                   "': the checkpoint's shape differs from the circuit's (" +
                                   std::to_string(out.numel()) + " and " + std::to_string(numel) + " values)");
    return copy_into(out, t->f32, t->bf16);
  }

  sdk::Status fill_rows(bool head, const sdk::TensorView& out) override {
    auto rows = model_.export_record_rows(head);
    if (!rows) return rows.status();
    return copy_into(out, *rows, {});
  }

  void written(std::uint64_t done, std::uint64_t total) override {
    if (options_.on_bytes) options_.on_bytes(done, total);
  }

 private:
  const MergedModel& model_;
  const BuildOptions& options_;
  std::int64_t layer_index_ = -1;  // the layer in layer_
  weights::Layer layer_;
};

nlohmann::ordered_json options_json(const sdk::Options& options) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& [key, value] : options.values()) out[key] = value;
  return out;
}

}  // namespace


sdk::Expected<BuildResult> build_checkpoint(const Host& host, const BuildOptions& options) {
  auto dtype = layer_dtype(options.dtype);
  if (!dtype) return dtype.error().with_context("--dtype");
  if (options.directory.empty()) return sdk::invalid_argument("build: no output directory (--out)");
  auto say = [&](const std::string& line) {
    if (options.on_progress) options.on_progress(line);
  };

  QGPU_ASSIGN_OR_RETURN(Selection machine_selection, host.select(QGPU_PLUGIN_MACHINE));
  QGPU_ASSIGN_OR_RETURN(Selection base_selection, host.select(QGPU_PLUGIN_BASE_MODEL));
  const std::string machine_name = machine_selection.plugin->name;
  QGPU_ASSIGN_OR_RETURN(std::shared_ptr<sdk::Machine> machine, host.instantiate<sdk::Machine>());

  // The merge as `run --engine model` makes it, kept sparse: build writes the layers dense itself.
  const auto t0 = Clock::now();
  QGPU_ASSIGN_OR_RETURN(std::unique_ptr<LoadedMerge> merge,
                        load_merge(host, {{"dtype", std::string(sdk::dtype_name(*dtype))}}, /*sparse=*/true));
  auto progress = [&](std::string_view line) { say(std::string(line)); };
  QGPU_ASSIGN_OR_RETURN(std::shared_ptr<const sdk::MachineCircuit> circuit,
                        machine_circuit(*machine, machine_name, sdk::Engine::kModel, merge->host.get(), progress));
  QGPU_RETURN_IF_ERROR(merge_circuit(*merge->host, circuit, progress));
  const MergedModel* model = merge->host->merged();
  if (model == nullptr) return sdk::internal_error("build: " + machine_name + " merged nothing");
  QGPU_ASSIGN_OR_RETURN(std::vector<std::string> names,
                        guarded_call(machine_name, "record_token_names()", [&] { return machine->record_token_names(); }));
  const std::int64_t records = model->vocab_rows() - model->base_rows();
  if (static_cast<std::int64_t>(names.size()) != records)
    return sdk::internal_error("build: " + machine_name + " names " + std::to_string(names.size()) +
                               " record tokens, the merge has " + std::to_string(records) + " record rows");

  BuildResult result;
  result.circuit_layers = model->cost().circuit_layers;
  result.base_layers = merge->host->info().num_layers;
  result.text_rows = model->base_rows();
  result.record_rows = records;
  result.merge_seconds = seconds_since(t0);

  sdk::CheckpointExport request;
  request.directory = options.directory;
  request.dtype = *dtype;
  request.layers = result.circuit_layers;
  request.rows = records;
  request.max_shard_bytes = options.max_shard_bytes;
  request.row_tokens.reserve(names.size());
  for (const std::string& name : names) request.row_tokens.push_back("<|qgpu:" + name + "|>");

  // The manifest: what was merged, how, and what a reader needs to run launches on the result.
  nlohmann::ordered_json manifest;
  manifest["format"] = "qgpu-build";
  manifest["format_version"] = 1;
  manifest["qgpu_version"] = QGPU_SDK_VERSION_STRING;
  manifest["dtype"] = std::string(sdk::dtype_name(*dtype));
  manifest["machine"] = {{"plugin", machine_name},
                         {"version", machine_selection.plugin->version},
                         {"options", options_json(machine_selection.options)}};
  manifest["base"] = {{"plugin", base_selection.plugin->name},
                      {"checkpoint", merge->host->info().checkpoint},
                      {"layers", result.base_layers},
                      {"vocab_size", result.text_rows}};
  manifest["circuit"] = {{"layers", result.circuit_layers},
                         {"first_base_layer", result.circuit_layers},
                         {"hash", hash_text(model->circuit_hash())},
                         {"compiled_hash", hash_text(merge->host->merged_hash())}};
  manifest["records"] = {{"rows", records},
                         {"first_id", result.text_rows},
                         {"token_format", "<|qgpu:NAME|>"}};
  manifest["silence"] = to_json(model->silence());
  manifest["choice_placement"] = to_json(model->placement());
  result.manifest = manifest.dump(2) + "\n";
  request.files.emplace_back(std::string(kManifestName), result.manifest);

  say("build: writing " + options.directory + " (" + std::to_string(result.circuit_layers) + " circuit layers + " +
      std::to_string(result.base_layers) + " base layers, " + std::to_string(records) + " record tokens, " +
      std::string(sdk::dtype_name(*dtype)) + ")");
  const auto t1 = Clock::now();
  MergedSource source(*model, options);
  const std::string base_name = base_selection.plugin->name;
  QGPU_ASSIGN_OR_RETURN(result.files, guarded_call(base_name, "export_checkpoint()", [&] {
                          return merge->base->export_checkpoint(request, source);
                        }));
  result.write_seconds = seconds_since(t1);
  for (const std::string& f : result.files) {
    std::error_code ec;
    const auto n = std::filesystem::file_size(f, ec);
    if (!ec) result.bytes += n;
  }
  return result;
}

}  // namespace qgpu::core
