// The merged model (docs/MACHINE_CIRCUIT.md §6): a compiled circuit's layers
// run in front of a base model's layers on the same residual stream.
//
//   ids < base rows  : the base's embedding rows (text)
//   ids >= base rows : record rows (the circuit's token embeddings)
//   -> N circuit layers (all linear_attention, dense on the backend)
//   -> the base's layers, final norm (unchanged, through BaseModel's pieces)
//   -> logits = [base lm_head rows ; record unembedding rows] (untied)
//
// Silence on text (qgpu/core/silence.h): the circuit is compiled with a mute
// channel (weights::Target::mute_channel) carrying one gain in every MLP gate,
// beta, decay and z, and a few channels left free. The merge finds a direction
// d over up to that many base channels on which every embedding row lies
// strictly on the negative side, certifies it row by row, and spreads the gain
// over it; then permutes the circuit's channels (qgpu/core/channel_plan.h: the
// free ones onto the direction's, the next token's fields onto well-behaved
// base channels; exact). On a certified text row every circuit switch is far
// below zero: every circuit layer adds exactly ±0 and writes no state, so
// text-only logits equal the base's bit for bit. Where no direction separates
// every row (an isotropic table) the merge still succeeds — a launch holds only
// record tokens and needs no silence — and says which rows leak.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "qgpu/core/channel_plan.h"
#include "qgpu/core/host.h"
#include "qgpu/core/model_host.h"
#include "qgpu/core/silence.h"
#include "qgpu/sdk/base_model.h"
#include "qgpu/sdk/machine.h"
#include "qgpu/sdk/tensor_backend.h"
#include "qgpu/weights/compile.h"
#include "qgpu/weights/model.h"
#include "qgpu/weights/reference.h"
#include "qgpu/weights/row_choice.h"
#include "qgpu/weights/state.h"

namespace qgpu::core {

struct MergeInputs {
  // Compiled with Target::mute_channel at the base's layer shapes (hidden size,
  // heads, MLP width); every layer is linear_attention.
  const weights::CompiledCircuit* circuit = nullptr;
  // The record rows (RecordRows; record i is token id base_rows + i): the embedding
  // is called for every row here when the circuit runs dense, else as record tokens arrive.
  RecordRows records;
  // Embedding rows that can appear in text (the mute direction is certified on them);
  // 0: every embedding row (the sampler may choose any logit row).
  std::int64_t text_rows = 0;
  // Measure the base's channels: the final norm's scales 1 + w (the record unembedding is
  // divided by them, in fp32: the dense path's bf16 head then rounds those weights) and what
  // its layers add on probe tokens (the choice fields go to channels with large |1 + w| and
  // no massive activation), and the choice guard runs (MergedForward::circuit_margin ...).
  // Off: no compensation, no guard, the choice fields keep their order (a stand-in head that
  // must stay exact in bf16).
  bool profile_base = true;
  // Text in the conv window: a Gated DeltaNet value channel that reads an earlier
  // token through the conv1d (weights::Circuit::previous) would carry a text
  // token's values into a circuit token's state and residual. With this on, the
  // merge adds the mute gain to every such channel, so an earlier text token
  // reads as 0 there, as a fresh state does (exact: records are 0 on the mute
  // channel). The weight compiler already mutes the value rows of ports that do not read;
  // this adds the rest.
  bool mute_window = true;
  // Runs the circuit layers on the host with weights::ReferenceModel over their sparse
  // weights instead of dense on the backend: the same residual bit for bit (the reference
  // math is the backend's, backend.Circuits.*), a fraction of the memory and time; the
  // base's layers and its logits stay on the backend. The record rows' logits are then
  // also taken on the host from the same final-normed residual over their sparse rows (in
  // double, rounded once: the last bits may differ from the backend's dense product), and a
  // record token's embedding row is asked for when it arrives: no dense record table.
  bool sparse_circuit = false;
};

// Record rows held as tables (tests, qgpu-silence): dense embedding rows of `hidden` values
// and a sparse unembedding. rows() views them: the tables must outlive the merge.
struct RecordTables {
  explicit RecordTables(std::int64_t hidden) : hidden(hidden) {}
  RecordTables(const RecordTables&) = delete;  // rows() points at this object
  RecordTables& operator=(const RecordTables&) = delete;
  std::int64_t hidden;
  std::vector<float> embedding;  // [records, hidden] row-major
  weights::SparseMatrix unembedding;
  std::int64_t records() const { return static_cast<std::int64_t>(embedding.size()) / hidden; }
  void add(std::span<const float> row) { embedding.insert(embedding.end(), row.begin(), row.end()); }
  void tie();  // the unembedding := the embedding rows (a stand-in where no choice fields exist)
  RecordRows rows() const;
};

struct MergeCost {
  std::int64_t circuit_layers = 0;
  std::int64_t records = 0;
  std::int64_t unembedding_rows = 0;
  std::int64_t window_channels = 0;  // value channels muted for text in the conv window
  std::int64_t uploaded_bytes = 0;   // circuit layers + record tables, in the backend's dtype
  double search_seconds = 0;         // the mute direction: search and certificate
  double profile_seconds = 0;        // the base's final-norm scales and probe perturbations
  double upload_seconds = 0;
};

struct MergedForward {
  std::int64_t rows = 0;      // logits rows: T, or 1 (the last position)
  std::int64_t columns = 0;   // base vocab + unembedding rows
  std::vector<float> logits;  // [rows, columns]
  // With ForwardOptions::circuit_residual: the residual after the circuit layers,
  // [T, H] in the merged channel order (circuit_order() maps a row back).
  std::vector<float> circuit_residual;
  // The choice guard, per logits row (with record unembedding rows): the record rows'
  // logits from the circuit's residual alone (C = U·h_circuit / rms(h_final)) pick a
  // winner with margin `circuit_margin`; the model's record logits L differ from C by at
  // most `deviation` (what the base's layers and the roundings added). When deviation <
  // circuit_margin / 2 the model's best record row is the circuit's, whatever the base did.
  std::vector<double> circuit_margin, deviation;
  std::vector<std::int64_t> circuit_choice;  // the circuit's winner (record row index)
  std::vector<std::int64_t> model_choice;    // the record row with the model's largest record logit
};

struct ForwardOptions {
  bool all_logits = false;
  bool circuit_residual = false;
};

class MergedModel {
 public:
  // Finds and certifies the mute direction, measures the base's channels, permutes
  // and uploads the circuit layers and record tables. `base`
  // (loaded into `backend`) and `backend` must outlive the merged model; the
  // merged model drives the base's sequence state (forward/reset).
  static sdk::Expected<std::unique_ptr<MergedModel>> create(sdk::BaseModel& base, const sdk::ModelInfo& info,
                                                            sdk::TensorBackend& backend, const MergeInputs& inputs);
  ~MergedModel();

  std::int64_t base_rows() const { return base_rows_; }  // text ids: [0, base_rows)
  std::int64_t vocab_rows() const { return base_rows_ + records_; }
  std::int64_t logit_columns() const { return base_rows_ + unembedding_rows_; }
  const SilenceCertificate& silence() const { return silence_; }
  const ChoicePlacement& placement() const { return placement_; }
  const ChannelMap& channels() const { return map_; }
  // The circuit layers as run (with the conv-window mute), in the circuit's channel order:
  // weights::ReferenceModel over these, fed circuit_order() rows, is the merged circuit's reference.
  const std::vector<weights::Layer>& circuit_layers() const { return circuit_layers_; }
  const MergeCost& cost() const { return cost_; }
  // The merged residual channel that holds circuit channel c (a transposition).
  std::int64_t merged_channel(std::int64_t c) const;
  // A residual row in the merged channel order, back in the circuit's (for weights::read_word).
  std::vector<float> circuit_order(std::span<const float> merged_row) const;

  // `qgpu-host build` (core/build.h): the merged model's own tensors as a stock checkpoint holds
  // them. Circuit layer `layer` in the merged channel order, as the dense path uploads it
  // (weights::export_layer_tensor in dtype() gives its tensors).
  sdk::Expected<weights::Layer> merged_layer(std::int64_t layer) const;
  const sdk::LayerShapes& shapes() const { return shapes_; }
  // The record rows [records, H] of the embedding (head false) or of the output head (true: the
  // unembedding divided by the final norm's scales), values rounded to the backend's dtype, as
  // the dense path uploads them.
  sdk::Expected<std::vector<float>> export_record_rows(bool head) const;
  // A hash of the circuit layers as merged (FNV-1a 64 over every weight, merged channel order)
  // and of the record rows: equal hashes, equal merged layers.
  std::uint64_t circuit_hash() const;
  weights::DType dtype() const { return dtype_; }
  std::int64_t unembedding_rows() const { return unembedding_rows_; }

  // Runs `ids` after the tokens already seen in the sequence in use (runs of text and of
  // record ids go through the layers in turn; a run is one backend call per layer).
  sdk::Expected<MergedForward> forward(std::span<const std::int64_t> ids, const ForwardOptions& options = {});
  // The sequence in use back to empty (the base's and every circuit layer's state).
  sdk::Status reset();
  std::int64_t tokens() const;  // tokens the sequence in use has consumed

  // Sequences: the base's sequence and the circuit layers' states. The model starts on one
  // of its own; use() makes another the one forward(), reset() and circuit_state() work on,
  // so that a launch runs next to a chat on the same weights. copy_sequence is a fork, a
  // snapshot and a restore (between created sequences; the base must have sequences).
  class Sequence;
  struct SequenceDeleter {
    void operator()(Sequence* s) const;
  };
  using SequenceHandle = std::unique_ptr<Sequence, SequenceDeleter>;
  sdk::Expected<SequenceHandle> create_sequence();
  sdk::Status copy_sequence(const Sequence& from, Sequence& to);
  sdk::Status use(Sequence* sequence);  // nullptr: the model's own; must outlive its use
  // Every circuit layer's Gated DeltaNet recurrent state, downloaded from the backend
  // (valid until the next call), in the form weights::read_ram reads RAM rows from.
  sdk::Expected<weights::StateView> circuit_state();

  // Speculative launches (core/launch_session.h). The circuit layers run ahead of the base:
  // draft() feeds a record id through them alone (sparse circuit, profiled record rows) and
  // returns the record row the circuit's own fields choose next, the choice guard's
  // circuit_choice (margin in the circuit's units, before the final norm's scale): the row the
  // merged model must choose there. verify_drafts() then runs the drafted positions through the
  // base's layers in one call and both heads: every position's logits and guard, as forward()
  // with all_logits gives them, but from one batched call (the base rounds its [n, H] products
  // and its chunked delta rule differently from n one-token calls). The base's sequence is
  // copied first; redo_drafts() puts it back and runs the same drafts one token at a time, as
  // forward() would have. Needs a created sequence in use (the base's sequence is copied).
  struct Draft {
    std::int64_t choice = -1;  // record row
    double margin = 0;
  };
  sdk::Expected<Draft> draft(std::int64_t id);
  std::int64_t drafted() const { return drafts_.count; }  // drafted ids not yet verified
  sdk::Expected<MergedForward> verify_drafts();
  sdk::Expected<MergedForward> redo_drafts();  // after verify_drafts(): the same positions, one by one

 private:
  struct Layer;
  MergedModel(sdk::BaseModel& base, sdk::TensorBackend& backend);
  sdk::Expected<sdk::Handle<sdk::Tensor>> run_circuit(const sdk::Tensor& h);
  // Record `r`'s embedding row (MergeInputs::records), checked, in the merged channel order
  // and rounded to the backend's dtype as an uploaded table holds it.
  sdk::Expected<std::vector<float>> record_row(std::int64_t r) const;
  // Sparse path: [T, H] rows (merged channel order) through the reference model, in place.
  void step_reference(std::span<float> rows, std::int64_t T);
  // After the circuit layers: `n` positions' residual `h` (tokens begin..begin+n of the call)
  // through the base's layers, then (with_logits) the final norm and both heads into `out` at
  // row `row0` (every position's when options.all_logits, else the last's). `circuit` holds the
  // circuit residual of the rows that get logits (the choice guard's input).
  sdk::Status run_base(sdk::Handle<sdk::Tensor> h, std::span<const float> circuit, std::int64_t n, std::int64_t row0,
                       bool with_logits, const ForwardOptions& options, MergedForward& out);
  // The drafts' n rows through run_base, in one call or one by one.
  sdk::Expected<MergedForward> run_drafts(bool batched);

  sdk::BaseModel* base_;
  sdk::TensorBackend* backend_;
  sdk::LayerShapes shapes_;
  std::int64_t base_rows_ = 0, records_ = 0, unembedding_rows_ = 0;
  ChannelMap map_;         // circuit channel -> merged channel
  int mute_ = -1;          // the circuit's mute channel (its own channel order)
  std::vector<int> free_;  // the circuit's free channels (its own order), the mute channel first
  SilenceCertificate silence_;
  ChoicePlacement placement_;
  MergeCost cost_;
  std::vector<sdk::Handle<sdk::Tensor>> tensors_;
  std::vector<Layer> layers_;
  std::vector<weights::Layer> circuit_layers_;
  std::unique_ptr<weights::ReferenceModel> reference_;  // MergeInputs::sparse_circuit
  // With sparse_circuit: the record embedding, asked for row by row, and the record rows'
  // unembedding (merged channel order).
  std::function<sdk::Expected<std::vector<float>>(std::int64_t)> record_embedding_;
  // The record unembedding in the merged channel order: `val` as the circuit built it (the
  // choice guard's C) and `scaled` divided by the final norm's 1 + w (the model's logits).
  struct SparseHead {
    std::vector<std::int64_t> row_ptr;
    std::vector<std::int32_t> col;
    std::vector<float> val, scaled;
  } sparse_head_;
  std::vector<double> final_scale_;              // the base's final-norm 1 + w per merged channel (1 if not measured)
  bool profiled_ = false;                        // MergeInputs::profile_base with record rows: compensated, guarded
  SequenceHandle own_;                           // the model's own sequence
  Sequence* active_ = nullptr;                   // the sequence in use
  weights::DType dtype_ = weights::DType::kF32;  // the backend's, as the circuit layers run
  std::vector<std::vector<float>> states_;       // circuit_state()'s buffers
  // Speculation: the drafted positions' circuit residuals (merged channel order) and their
  // count; the base's sequence before verify_drafts(); the record rows' unembedding as the
  // circuit built it, chosen by weights::RowChoice::best_sum (the guard's circuit choice, the same sums).
  struct Drafts {
    std::vector<float> rows;
    std::int64_t count = 0;
    bool verified = false;  // verify_drafts() ran them: redo_drafts() may, the next draft() starts anew
  } drafts_;
  sdk::Handle<sdk::Sequence> base_snapshot_;
  std::unique_ptr<weights::RowChoice> circuit_head_;
  sdk::Handle<sdk::Tensor> record_table_, record_head_;
};

// The mute direction over embedding rows [0, rows) of a loaded base (as the backend holds
// them) and its certificate (find_mute_direction over at most `width` channels).
sdk::Expected<SilenceCertificate> base_silence(sdk::BaseModel& base, sdk::TensorBackend& backend, std::int64_t hidden,
                                               std::int64_t rows, std::int64_t width, const MuteBounds& bounds);

// Channels a machine compiled for the merge leaves for the mute direction (the mute
// channel and kMuteWidth - 1 free ones: weights::Target::mute_width).
inline constexpr int kMuteWidth = 64;

// A hash of a compiled circuit and its record rows as a machine hands them to the merge
// (FNV-1a 64 over the layers' weights, the record count and the unembedding): `qgpu-host build`
// records it, and a built checkpoint accepts only the circuit it was built from.
std::uint64_t compiled_hash(const weights::CompiledCircuit& circuit, const RecordRows& rows);
// A hash as a manifest writes it: "fnv1a64:" and 16 lowercase hex digits.
std::string hash_text(std::uint64_t hash);

// The ModelHost over a base and a backend (`run --engine model`): each merge()
// replaces the merged model; forward() returns the last position's logits.
class MergeHost final : public ModelHost {
 public:
  // `base` is loaded into `backend` (info is its load() result); both must outlive this.
  // `sparse`: MergeInputs::sparse_circuit for every merge.
  MergeHost(sdk::BaseModel& base, const sdk::ModelInfo& info, sdk::TensorBackend& backend, bool sparse)
      : base_(&base), info_(info), backend_(&backend), sparse_(sparse) {}
  ~MergeHost() override;
  sdk::LayerShapes shapes() const override { return info_.shapes; }
  const sdk::ModelInfo& info() const { return info_; }  // the base's, as load() returned it
  std::int64_t text_rows() const override { return info_.vocab_size; }
  sdk::DType dtype() const override;
  sdk::Status merge(std::shared_ptr<const sdk::MachineCircuit> circuit) override;
  bool holds(const sdk::MachineCircuit& circuit) const override { return merged_ && circuit_.get() == &circuit; }
  void reset() override {
    if (merged_) (void)merged_->reset();  // the own sequence: the base's reset() cannot fail
  }
  int mute_width() const override { return kMuteWidth; }
  // The last position's logits; fails when the model's best record row is not the one the
  // circuit's own fields choose (MergedForward::model_choice != circuit_choice): what the
  // base's layers added changed the choice.
  sdk::Expected<std::vector<float>> forward(std::span<const std::int64_t> ids) override;
  sdk::Expected<weights::StateView> circuit_state() override;
  // Speculation needs the sparse circuit, a profiled merge (the choice guard) and a base with
  // sequences (the launch runs in one of its own, copied before each verification).
  bool speculates() const override { return launch_ != nullptr; }
  sdk::Expected<std::int64_t> draft(std::int64_t id) override;
  // A batched position is vouched for when its best logit is the circuit's record row with a
  // lead over every other row (text rows included) above 2 * slack: a token-by-token call, whose
  // logits differ from the batched call's by rounding (far less than the slack), chooses the
  // same row. Otherwise the drafts are redone token by token (ModelHost::Verified::redone), and
  // the guard runs on the logits that decide.
  sdk::Expected<Verified> verify() override;
  static constexpr double kVerifySlack = 1.0;
  void set_verify_slack(double slack) { verify_slack_ = slack; }  // tests and benches: e.g. huge, to redo every one
  // Audit (benches): every verification is also redone token by token, and the largest
  // difference between the two calls' logits (any column, any position) is kept.
  void set_verify_audit(bool on) { audit_ = on; }
  double audit_difference() const { return audit_difference_; }
  std::int64_t audited() const { return audited_; }  // positions compared
  std::string describe() const override;
  MergedModel* merged() { return merged_.get(); }  // after merge()
  std::uint64_t merged_hash() const { return merged_hash_; }  // compiled_hash() of the last merge
  // The largest deviation / (circuit margin / 2) over the guarded forwards since the merge: below 1
  // the base could not have changed the choice whatever the details; above 1 the choice
  // held at every token (or forward() failed) but with less to spare.
  double guard_ratio() const { return guard_ratio_; }
  std::int64_t guarded() const { return guarded_; }  // forwards whose last position was checked

 private:
  // The guard at one logits row: the ratio and the error where the base changed the choice.
  sdk::Status guard(const MergedForward& f, std::size_t row);

  sdk::BaseModel* base_;
  sdk::ModelInfo info_;
  sdk::TensorBackend* backend_;
  bool sparse_ = false;
  std::shared_ptr<const sdk::MachineCircuit> circuit_;  // of the last merge
  std::unique_ptr<MergedModel> merged_;
  MergedModel::SequenceHandle launch_;  // the sequence launches run in, where the base has sequences
  double verify_slack_ = kVerifySlack;
  bool audit_ = false;
  double audit_difference_ = 0;
  std::int64_t audited_ = 0;
  double guard_ratio_ = 0;
  std::int64_t guarded_ = 0;
  std::uint64_t merged_hash_ = 0;
};

// The config's base loaded on its backend and a MergeHost over them (`run --engine model`,
// `qgpu_bench_launch --model`). `backend_options` replace config values (e.g. the dtype);
// `sparse`: MergeInputs::sparse_circuit. Destroys the merged layers, then the base, then
// the backend.
// A base whose checkpoint was written by `qgpu-host build` (its directory holds qgpu.json) gets a
// BuiltHost instead: it runs the launch on the checkpoint's own layers and merges nothing.
struct LoadedMerge {
  std::shared_ptr<sdk::TensorBackend> backend;
  std::shared_ptr<sdk::BaseModel> base;
  std::unique_ptr<MergeHost> host;        // an ordinary base: the machine merges in front of it
  std::unique_ptr<ModelHost> built;  // a built checkpoint (core/built_host.h); `host` is null
  ModelHost* model_host() const { return built ? built.get() : static_cast<ModelHost*>(host.get()); }
  ~LoadedMerge() {
    host.reset();
    built.reset();
    base.reset();
  }
};
sdk::Expected<std::unique_ptr<LoadedMerge>> load_merge(const Host& host,
                                                       const std::map<std::string, std::string>& backend_options,
                                                       bool sparse);

// Silence on text, measured: the merged model runs `sequence` (text and record
// ids) and the base runs the same sequence with the record ids removed, both
// from a fresh sequence, each run of text ids in one call (all logits; the
// merged model calls its layers once per run of text or record ids, so the two
// see the same batch shapes). At every text position
// the next-token distributions over the base's rows (record columns masked, as
// the text-mode sampler masks them) are compared: KL(base ‖ merged) in double.
// Text positions before the first record id see the same tokens in both, so
// their KL is exactly 0 when the circuit is silent; after it, the base's layers
// have also seen the circuit tokens in the merged model.
struct SilenceReport {
  std::int64_t tokens = 0, records = 0;  // of the merged sequence
  std::int64_t before = 0, after = 0;    // text positions before / after the first record id
  std::int64_t before_identical = 0;     // of `before`: logit rows equal bit for bit over the base's rows
  std::int64_t after_identical = 0;
  double kl_before_max = 0;
  double kl_after_mean = 0, kl_after_max = 0;
  std::int64_t kl_after_max_at = -1;  // position in the merged sequence
  std::vector<double> kl;             // per text position, in order
  // Probability of the record columns at text positions without the mask (the largest).
  double record_mass_max = 0;
  double merged_seconds = 0, base_seconds = 0;
};
sdk::Expected<SilenceReport> measure_silence(MergedModel& merged, sdk::BaseModel& base, sdk::TensorBackend& backend,
                                             std::span<const std::int64_t> sequence,
                                             MergedForward* merged_out = nullptr, bool circuit_residual = false);

// KL(p ‖ q) of the softmax distributions of two logit rows over columns [0, n), in double.
double kl_divergence(std::span<const float> p_logits, std::span<const float> q_logits, std::int64_t n);

}  // namespace qgpu::core
