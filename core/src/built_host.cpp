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

BuiltHost::BuiltHost(sdk::BaseModel& base, const sdk::ModelInfo& info, sdk::TensorBackend& backend,
                     BuiltManifest manifest, bool sparse)
    : base_(&base), info_(info), backend_(&backend), manifest_(std::move(manifest)), sparse_(sparse) {}
BuiltHost::~BuiltHost() = default;

void BuiltHost::reset() {
  base_->reset();
  if (reference_) reference_->reset();
}

namespace {

// A weight of the checkpoint as the backend holds it, [rows, cols] (cols 1 for a vector).
sdk::Expected<std::vector<float>> download(sdk::BaseModel& base, const std::string& name, std::int64_t rows,
                                           std::int64_t cols, std::int64_t depth = 0) {
  std::vector<float> values(static_cast<std::size_t>(rows * cols * (depth > 0 ? depth : 1)));
  std::vector<std::int64_t> shape = {rows};
  if (cols > 1 || depth > 0) shape.push_back(cols);
  if (depth > 0) shape.push_back(depth);
  QGPU_RETURN_IF_ERROR(base.download_weight(name, detail::view_of(values.data(), sdk::DType::kF32, shape)));
  return values;
}

}  // namespace

sdk::Status BuiltHost::recover_layers() {
  const auto t0 = detail::Clock::now();
  const sdk::LayerShapes& s = info_.shapes;
  const std::int64_t H = s.hidden_size, I = s.intermediate_size, nv = s.linear_num_value_heads;
  const std::int64_t V = nv * s.linear_value_head_dim;
  const std::int64_t C = 2 * s.linear_num_key_heads * s.linear_key_head_dim + V;
  layers_.clear();
  for (std::int64_t i = 0; i < manifest_.circuit_layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    weights::Layer l;
    weights::GdnLayer& g = l.gdn;
    struct Matrix {
      const char* suffix;
      weights::SparseMatrix* out;
      std::int64_t rows, cols;
    };
    for (const Matrix& m : {Matrix{"linear_attn.in_proj_qkv.weight", &g.in_proj_qkv, C, H},
                            Matrix{"linear_attn.in_proj_z.weight", &g.in_proj_z, V, H},
                            Matrix{"linear_attn.in_proj_b.weight", &g.in_proj_b, nv, H},
                            Matrix{"linear_attn.in_proj_a.weight", &g.in_proj_a, nv, H},
                            Matrix{"linear_attn.out_proj.weight", &g.out_proj, H, V},
                            Matrix{"mlp.gate_proj.weight", &l.mlp.gate, I, H}, Matrix{"mlp.up_proj.weight", &l.mlp.up, I, H},
                            Matrix{"mlp.down_proj.weight", &l.mlp.down, H, I}}) {
      QGPU_ASSIGN_OR_RETURN(std::vector<float> dense, download(*base_, p + m.suffix, m.rows, m.cols));
      *m.out = detail::sparse_rows(dense, m.rows, m.cols);
    }
    auto widen = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
    QGPU_ASSIGN_OR_RETURN(std::vector<float> conv, download(*base_, p + "linear_attn.conv1d.weight", C, 1,
                                                            s.linear_conv_kernel));
    g.conv1d = widen(conv);
    QGPU_ASSIGN_OR_RETURN(std::vector<float> a_log, download(*base_, p + "linear_attn.A_log", nv, 1));
    g.a_log = widen(a_log);
    QGPU_ASSIGN_OR_RETURN(std::vector<float> dt_bias, download(*base_, p + "linear_attn.dt_bias", nv, 1));
    g.dt_bias = widen(dt_bias);
    QGPU_ASSIGN_OR_RETURN(std::vector<float> norm,
                          download(*base_, p + "linear_attn.norm.weight", s.linear_value_head_dim, 1));
    // The gated norm's weight: one value for every channel (as the weight compiler writes it).
    for (float w : norm)
      if (w != norm.front())
        return sdk::invalid_argument("built checkpoint: layer " + std::to_string(i) +
                                     "'s linear_attn.norm.weight is not one value, as the circuit writes it");
    g.norm_weight_f32 = g.norm_weight_bf16 = norm.front();
    // The circuit's layer norms are zero (scale 1 + 0), which the reference model assumes.
    for (const char* suffix : {"input_layernorm.weight", "post_attention_layernorm.weight"}) {
      QGPU_ASSIGN_OR_RETURN(std::vector<float> w, download(*base_, p + suffix, H, 1));
      for (float v : w)
        if (v != 0)
          return sdk::invalid_argument("built checkpoint: layer " + std::to_string(i) + "'s " + suffix +
                                       " is not zero, as the circuit writes it");
    }
    layers_.push_back(std::move(l));
  }
  const weights::DType dtype = backend_->dtype() == sdk::DType::kBF16 ? weights::DType::kBF16 : weights::DType::kF32;
  reference_ = std::make_unique<weights::ReferenceModel>(layers_, s, dtype);
  recover_seconds_ = detail::seconds_since(t0);
  return sdk::Status::ok();
}

sdk::DType BuiltHost::dtype() const {
  return backend_->dtype() == sdk::DType::kBF16 ? sdk::DType::kBF16 : sdk::DType::kF32;
}

int BuiltHost::mute_width() const {
  return kMuteWidth;
}

sdk::Status BuiltHost::merge(std::shared_ptr<const sdk::MachineCircuit> machine_circuit) {
  circuit_ = nullptr;
  const weights::CompiledCircuit& circuit = machine_circuit->compiled();
  const RecordRows rows = record_rows(*machine_circuit);
  const std::string where = "built checkpoint '" + info_.checkpoint + "'";
  if (sdk::dtype_name(dtype()) != manifest_.dtype)
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
                                 hash_text(manifest_.compiled_hash) + ", this machine config's is " + hash_text(hash) +
                                 "): rebuild it with this config (qgpu-host build)");
  if (info_.vocab_size != manifest_.first_record + manifest_.records ||
      info_.num_layers < manifest_.circuit_layers)
    return sdk::invalid_argument(where + " has " + std::to_string(info_.num_layers) + " layers and " +
                                 std::to_string(info_.vocab_size) + " vocabulary rows, which its manifest does not "
                                 "describe");
  if (sparse_ && !reference_) QGPU_RETURN_IF_ERROR(recover_layers());
  circuit_ = std::move(machine_circuit);
  reset();
  return sdk::Status::ok();
}

sdk::Expected<std::vector<float>> BuiltHost::forward(std::span<const std::int64_t> ids) {
  if (circuit_ == nullptr) return sdk::internal_error("forward() before merge()");
  if (!reference_) return base_->forward(ids);
  // Sparse: the embedding rows through the circuit layers on the host, token by token, then the
  // checkpoint's remaining layers on the backend.
  const std::int64_t T = static_cast<std::int64_t>(ids.size()), H = info_.shapes.hidden_size;
  auto& be = *backend_;
  QGPU_ASSIGN_OR_RETURN(sdk::Handle<sdk::Tensor> embedded, base_->embed(ids));
  std::vector<float> rows(static_cast<std::size_t>(T * H));
  const std::int64_t shape[2] = {T, H};
  QGPU_RETURN_IF_ERROR(be.download(*embedded, detail::view_of(rows.data(), sdk::DType::kF32, shape)));
  for (std::int64_t t = 0; t < T; ++t) {
    const auto first = rows.begin() + t * H;
    const std::vector<float> y = reference_->step(std::vector<float>(first, first + H));
    std::copy(y.begin(), y.end(), first);
  }
  QGPU_ASSIGN_OR_RETURN(sdk::Handle<sdk::Tensor> h, be.upload(detail::view_of(rows.data(), sdk::DType::kF32, shape)));
  QGPU_ASSIGN_OR_RETURN(h, base_->run_layers_from(*h, manifest_.circuit_layers));
  QGPU_ASSIGN_OR_RETURN(h, be.rows(*h, T - 1, T));
  QGPU_ASSIGN_OR_RETURN(h, base_->final_norm(*h));
  QGPU_ASSIGN_OR_RETURN(h, base_->lm_head(*h));
  std::vector<float> logits(static_cast<std::size_t>(info_.vocab_size));
  const std::int64_t one[2] = {1, info_.vocab_size};
  QGPU_RETURN_IF_ERROR(be.download(*h, detail::view_of(logits.data(), sdk::DType::kF32, one)));
  return logits;
}

sdk::Expected<weights::StateView> BuiltHost::circuit_state() {
  if (circuit_ == nullptr) return sdk::internal_error("circuit_state() before merge()");
  if (reference_) return reference_->state_view();
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
  char recovered[96] = "dense on the backend";
  if (reference_)
    std::snprintf(recovered, sizeof recovered, "read back sparse in %.1f s, run on the host", recover_seconds_);
  return "built checkpoint " + info_.checkpoint + ": " + std::to_string(manifest_.circuit_layers) +
         " circuit layers (" + recovered + ") + the base's " +
         std::to_string(info_.num_layers - manifest_.circuit_layers) + ", " + std::to_string(manifest_.records) +
         " record rows from id " + std::to_string(manifest_.first_record) + "; compiled circuit hash " +
         hash_text(manifest_.compiled_hash) + " verified\nsilence at build: " + manifest_.silence;
}

}  // namespace qgpu::core
