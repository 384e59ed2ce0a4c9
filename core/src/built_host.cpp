#include "qgpu/core/built_host.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "merged_model_internal.h"
#include "qgpu/core/build.h"
#include "qgpu/core/merged_model.h"
#include "qgpu/weights/state.h"

namespace qgpu::core {
namespace {

std::string hex64(std::uint64_t v) {
  char text[24];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

}  // namespace

sdk::Expected<std::optional<BuiltManifest>> read_built_manifest(const std::string& checkpoint_dir) {
  const std::filesystem::path file = std::filesystem::path(checkpoint_dir) / kManifestName;
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return std::optional<BuiltManifest>();
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& why) {
    return sdk::error_at(file.string(), sdk::ErrorCode::kParseError, why + " (rewrite it with qgpu-host build)");
  };
  if (j.is_discarded() || !j.is_object()) return bad("not valid JSON");
  if (j.value("format", "") != "qgpu-build") return bad("not a qgpu build manifest (\"format\" is not \"qgpu-build\")");
  if (j.value("format_version", 0) != 1) return bad("manifest format_version is not 1");
  BuiltManifest m;
  m.file = file.string();
  try {
    m.circuit_layers = j.at("circuit").at("layers").get<std::int64_t>();
    m.first_record = j.at("records").at("first_id").get<std::int64_t>();
    m.records = j.at("records").at("rows").get<std::int64_t>();
    const std::string hash = j.at("circuit").at("compiled_hash").get<std::string>();
    if (!hash.starts_with("fnv1a64:") || hash.size() != 8 + 16) return bad("circuit.compiled_hash is not fnv1a64:<16 hex>");
    m.compiled_hash = std::stoull(hash.substr(8), nullptr, 16);
    m.dtype = j.at("dtype").get<std::string>();
    m.machine = j.at("machine").at("plugin").get<std::string>();
    m.silence = j.contains("silence") ? j["silence"].value("summary", "") : "";
  } catch (const std::exception& e) {
    return bad(std::string("a field is missing or of the wrong type: ") + e.what());
  }
  return std::optional<BuiltManifest>(std::move(m));
}

std::string BuiltHost::dtype() const {
  return backend_->dtype() == sdk::DType::kBF16 ? "bf16" : "f32";
}

int BuiltHost::mute_width() const {
  return kMuteWidth;
}

sdk::Status BuiltHost::merge(const weights::CompiledCircuit& circuit, const sdk::RecordRows& rows) {
  circuit_ = nullptr;
  const std::string where = "built checkpoint '" + info_.checkpoint + "'";
  if (dtype() != manifest_.dtype)
    return sdk::invalid_argument(where + " was built for " + manifest_.dtype + " (its layers are calibrated for it); "
                                 "run it with --dtype " + manifest_.dtype);
  if (static_cast<std::int64_t>(circuit.layers.size()) != manifest_.circuit_layers || rows.records != manifest_.records)
    return sdk::invalid_argument(where + " holds " + std::to_string(manifest_.circuit_layers) + " circuit layers and " +
                                 std::to_string(manifest_.records) + " record rows; the machine's circuit has " +
                                 std::to_string(circuit.layers.size()) + " and " + std::to_string(rows.records) +
                                 ": rebuild it with this config (qgpu-host build)");
  const std::uint64_t hash = compiled_hash(circuit, rows);
  if (hash != manifest_.compiled_hash)
    return sdk::invalid_argument(where + " was built from another circuit (compiled hash " +
                                 hex64(manifest_.compiled_hash) + ", this machine config's is " + hex64(hash) +
                                 "): rebuild it with this config (qgpu-host build)");
  if (info_.vocab_size != manifest_.first_record + manifest_.records ||
      info_.num_layers < manifest_.circuit_layers)
    return sdk::invalid_argument(where + " has " + std::to_string(info_.num_layers) + " layers and " +
                                 std::to_string(info_.vocab_size) + " vocabulary rows, which its manifest does not "
                                 "describe");
  circuit_ = &circuit;
  base_->reset();
  return sdk::Status::ok();
}

sdk::Expected<std::vector<float>> BuiltHost::forward(std::span<const std::int64_t> ids) {
  if (circuit_ == nullptr) return sdk::internal_error("forward() before merge()");
  return base_->forward(ids);
}

sdk::Expected<weights::StateView> BuiltHost::circuit_state() {
  if (circuit_ == nullptr) return sdk::internal_error("circuit_state() before merge()");
  const sdk::LayerShapes& s = info_.shapes;
  weights::StateView view;
  view.dtype = backend_->dtype() == sdk::DType::kBF16 ? weights::DType::kBF16 : weights::DType::kF32;
  states_.resize(static_cast<std::size_t>(manifest_.circuit_layers));
  for (std::int64_t i = 0; i < manifest_.circuit_layers; ++i) {
    weights::LayerStateView lv;
    lv.value_heads = s.linear_num_value_heads;
    lv.key_dim = s.linear_key_head_dim;
    lv.value_dim = s.linear_value_head_dim;
    std::vector<float>& buffer = states_[static_cast<std::size_t>(i)];
    buffer.assign(static_cast<std::size_t>(lv.value_heads * lv.key_dim * lv.value_dim), 0.0f);
    const std::int64_t shape[3] = {lv.value_heads, lv.key_dim, lv.value_dim};
    auto ran = base_->download_layer_state(i, detail::view_of(buffer.data(), sdk::DType::kF32, shape));
    if (!ran) return ran.status().with_context("reading circuit layer " + std::to_string(i));
    if (*ran) lv.data = buffer.data();
    view.layers.push_back(lv);
  }
  return view;
}

std::string BuiltHost::describe() const {
  return "built checkpoint " + info_.checkpoint + ": " + std::to_string(manifest_.circuit_layers) +
         " circuit layers (stock layers, dense on the backend) + the base's " +
         std::to_string(info_.num_layers - manifest_.circuit_layers) + ", " + std::to_string(manifest_.records) +
         " record rows from id " + std::to_string(manifest_.first_record) + "; compiled circuit hash " +
         hex64(manifest_.compiled_hash) + " verified\nsilence at build: " + manifest_.silence;
}

}  // namespace qgpu::core
