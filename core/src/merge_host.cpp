// MergeHost, the ModelHost over a base and a backend (`run --engine model`), and
// load_merge: the config's base loaded with a MergeHost over it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

#include "merged_model_internal.h"
#include "qgpu/core/built_host.h"
#include "qgpu/core/merged_model.h"

namespace qgpu::core {

using detail::num;

sdk::Expected<std::unique_ptr<LoadedMerge>> load_merge(const Host& host,
                                                       const std::map<std::string, std::string>& backend_options,
                                                       bool sparse) {
  auto m = std::make_unique<LoadedMerge>();
  auto be = host.instantiate<sdk::TensorBackend>(backend_options);
  if (!be) return be.error();
  m->backend = *be;
  auto bm = host.instantiate<sdk::BaseModel>();
  if (!bm) return bm.error();
  m->base = *bm;
  const std::string name = host.select(QGPU_PLUGIN_BASE_MODEL)->plugin->name;
  auto info = guarded_call(name, "load()", [&] { return m->base->load(*m->backend); });
  if (!info) return info.error();
  QGPU_ASSIGN_OR_RETURN(std::optional<BuiltManifest> manifest, read_built_manifest(info->checkpoint));
  if (manifest)
    m->built = std::make_unique<BuiltHost>(*m->base, *info, *m->backend, std::move(*manifest), sparse);
  else
    m->host = std::make_unique<MergeHost>(*m->base, *info, *m->backend, sparse);
  return m;
}

sdk::DType MergeHost::dtype() const {
  return backend_->dtype() == sdk::DType::kBF16 ? sdk::DType::kBF16 : sdk::DType::kF32;
}

RecordRows record_rows(const sdk::MachineCircuit& circuit) {
  RecordRows rows;
  rows.records = circuit.records();
  const std::int64_t hidden = circuit.compiled().target.shapes.hidden_size;
  // A row the circuit cannot take (one the protocol never feeds) merges as zeros.
  rows.embedding = [&circuit, hidden](std::int64_t record) -> sdk::Expected<std::vector<float>> {
    auto row = circuit.embedding(record);
    if (!row) return std::vector<float>(static_cast<std::size_t>(hidden), 0.0f);
    return row;
  };
  rows.unembedding = &circuit.unembedding();
  return rows;
}

MergeHost::~MergeHost() {
  launch_.reset();  // the launch sequence before the merged model it belongs to
}

sdk::Status MergeHost::merge(std::shared_ptr<const sdk::MachineCircuit> circuit) {
  launch_.reset();
  merged_.reset();  // the old layers leave the backend first
  circuit_ = nullptr;
  const RecordRows rows = record_rows(*circuit);
  MergeInputs in;
  in.circuit = &circuit->compiled();
  in.records = rows;
  in.sparse_circuit = sparse_;
  auto m = MergedModel::create(*base_, info_, *backend_, in);
  if (!m) return m.status();
  merged_ = std::move(*m);
  // Launches run in a sequence of their own where the base has sequences: speculation copies
  // the base's part before each verification.
  if (sparse_ && in.profile_base && rows.unembedding != nullptr && rows.unembedding->rows > 0) {
    auto seq = merged_->create_sequence();
    if (seq) {
      launch_ = std::move(*seq);
      QGPU_RETURN_IF_ERROR(merged_->use(launch_.get()));
    } else if (seq.status().code() != sdk::ErrorCode::kNotAvailable) {
      return seq.status();
    }
  }
  QGPU_RETURN_IF_ERROR(merged_->reset());
  merged_hash_ = compiled_hash(circuit->compiled(), rows);
  circuit_ = std::move(circuit);
  guard_ratio_ = 0;
  guarded_ = 0;
  return sdk::Status::ok();
}

sdk::Status MergeHost::guard(const MergedForward& f, std::size_t row) {
  ++guarded_;
  const double margin = f.circuit_margin[row], deviation = f.deviation[row];
  guard_ratio_ =
      std::max(guard_ratio_, margin > 0 ? deviation / (margin / 2) : std::numeric_limits<double>::infinity());
  if (f.model_choice[row] != f.circuit_choice[row])
    return sdk::internal_error(
        "merge: the base's layers changed the next record: the model's record logits favour record row " +
        std::to_string(f.model_choice[row]) + ", the circuit's fields choose row " +
        std::to_string(f.circuit_choice[row]) + " (the base moved the record logits by up to " + num(deviation) +
        " against the circuit's own margin " + num(margin) + "; " + merged_->placement().to_string() +
        "), so the launch stops here");
  return sdk::Status::ok();
}

sdk::Expected<std::vector<float>> MergeHost::forward(std::span<const std::int64_t> ids) {
  if (!merged_) return sdk::internal_error("forward() before merge()");
  auto f = merged_->forward(ids);
  if (!f) return f.status();
  // The guard, at a record position (the next token is a record; text positions choose text).
  if (!f->circuit_margin.empty() && ids.back() >= merged_->base_rows()) QGPU_RETURN_IF_ERROR(guard(*f, 0));
  return std::move(f->logits);
}

sdk::Expected<std::int64_t> MergeHost::draft(std::int64_t id) {
  if (!launch_) return sdk::internal_error("draft() without speculation (speculates() is false)");
  QGPU_ASSIGN_OR_RETURN(MergedModel::Draft d, merged_->draft(id));
  return d.choice;
}

sdk::Expected<ModelHost::Verified> MergeHost::verify() {
  if (!launch_) return sdk::internal_error("verify() without speculation (speculates() is false)");
  QGPU_ASSIGN_OR_RETURN(MergedForward f, merged_->verify_drafts());
  Verified v;
  v.rows = f.rows;
  const std::int64_t text = merged_->base_rows();
  for (std::int64_t i = 0; i < f.rows && !v.redone; ++i) {
    const auto at = static_cast<std::size_t>(i);
    const float* row = f.logits.data() + i * f.columns;
    // The best and the runner-up over every column, text rows included.
    std::int64_t best = 0;
    for (std::int64_t c = 1; c < f.columns; ++c)
      if (row[c] > row[best]) best = c;
    float second = -std::numeric_limits<float>::infinity();
    for (std::int64_t c = 0; c < f.columns; ++c)
      if (c != best) second = std::max(second, row[c]);
    const bool vouched = best - text == f.circuit_choice[at] && static_cast<double>(row[best]) - second > 2 * verify_slack_;
    if (!vouched) v.redone = true;
  }
  if (v.redone) {
    QGPU_ASSIGN_OR_RETURN(f, merged_->redo_drafts());
  } else if (audit_) {
    QGPU_ASSIGN_OR_RETURN(MergedForward g, merged_->redo_drafts());
    for (std::size_t i = 0; i < f.logits.size(); ++i)
      audit_difference_ = std::max(audit_difference_, static_cast<double>(std::abs(f.logits[i] - g.logits[i])));
    audited_ += f.rows;
    f = std::move(g);
  }
  for (std::int64_t i = 0; i < f.rows; ++i) QGPU_RETURN_IF_ERROR(guard(f, static_cast<std::size_t>(i)));
  v.logits = std::move(f.logits);
  return v;
}

sdk::Expected<weights::StateView> MergeHost::circuit_state() {
  if (!merged_) return sdk::internal_error("circuit_state() before merge()");
  return merged_->circuit_state();
}

std::string MergeHost::describe() const {
  if (!merged_) return "not merged";
  const MergeCost& c = merged_->cost();
  char line[256];
  std::snprintf(line, sizeof line,
                "%lld circuit layers (%s) + the base's %lld, %lld record rows; %.1f GiB uploaded (%s); search %.1f s, "
                "profile %.1f s",
                static_cast<long long>(c.circuit_layers), sparse_ ? "sparse, on the host" : "dense, on the backend",
                static_cast<long long>(info_.num_layers), static_cast<long long>(c.records),
                static_cast<double>(c.uploaded_bytes) / (1 << 30), std::string(sdk::dtype_name(dtype())).c_str(),
                c.search_seconds, c.profile_seconds);
  return std::string(line) + "\nsilence: " + merged_->silence().to_string() +
         "\nchoice: " + merged_->placement().to_string();
}

}  // namespace qgpu::core
