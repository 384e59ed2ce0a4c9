// The model a launch runs on with engine "model": a machine's circuit merged in front of the
// configured base (MergeHost, core/merged_model.h) or a checkpoint written by `qgpu-host build`
// (BuiltHost, core/built_host.h). The launch session (core/launch_session.h) merges the circuit
// once, then feeds the prompt and every generated token through forward().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "qgpu/sdk/machine.h"
#include "qgpu/sdk/tensor_view.h"
#include "qgpu/weights/compile.h"
#include "qgpu/weights/state.h"

namespace qgpu::core {

// The record rows merged after the base's vocabulary: record i is token id text_rows() + i.
struct RecordRows {
  std::int64_t records = 0;
  // Record i's embedding row: `hidden` values exact in fp32, exactly 0 on the circuit's mute
  // channel (a row the protocol never feeds is all 0). Called for every row when the merge is
  // dense, or for each record token as it arrives on the sparse path.
  std::function<sdk::Expected<std::vector<float>>(std::int64_t record)> embedding;
  // The record rows' unembedding: sparse rows of `hidden` columns, values exact in fp32
  // (may have no rows: no record logits). Read during the merge only.
  const weights::SparseMatrix* unembedding = nullptr;
};

// A machine circuit's record rows (the circuit must outlive the merge that uses them).
RecordRows record_rows(const sdk::MachineCircuit& circuit);

class ModelHost {
 public:
  virtual ~ModelHost() = default;
  virtual sdk::LayerShapes shapes() const = 0;      // the base's layer shapes
  virtual std::int64_t text_rows() const = 0;  // the base's vocabulary: record i is token id text_rows() + i
  virtual sdk::DType dtype() const = 0;        // the backend's compute dtype: f32 or bf16
  // Merges `circuit` in front of the base (kept alive while merged). Replaces any earlier merge
  // and starts a new sequence.
  virtual sdk::Status merge(std::shared_ptr<const sdk::MachineCircuit> circuit) = 0;
  // Whether the last merge was of `circuit` (the same object): a launch may then start a new
  // sequence with reset() instead of merging again.
  virtual bool holds(const sdk::MachineCircuit& circuit) const = 0;
  virtual void reset() = 0;  // a new sequence: every layer's state empty
  // Runs `ids` (text or record ids) after the tokens already seen; the logits of the
  // last position over the base's rows, then the record rows.
  virtual sdk::Expected<std::vector<float>> forward(std::span<const std::int64_t> ids) = 0;
  // Speculative launches (ModelRunOptions::speculate): the circuit layers draft, the whole model
  // verifies. Whether draft() and verify() work on this model now (after merge()).
  virtual bool speculates() const { return false; }
  // A record id through the circuit layers alone, ahead of the base's: the record row the
  // circuit's own fields choose next, the row the model must choose there (its id is
  // text_rows() + row). Fed ids wait for verify().
  virtual sdk::Expected<std::int64_t> draft(std::int64_t id) { return sdk::not_available("speculation"); }
  // The drafted ids through the base's layers in one call: each drafted position's logits (as
  // forward() gives the last position's), row after row. Where the batched call cannot vouch
  // that a position's choice is the one token-by-token calls would make, the drafts are run
  // again one token at a time (Verified::redone) and their logits returned.
  struct Verified {
    std::int64_t rows = 0;
    std::vector<float> logits;  // [rows, text_rows() + record rows]
    bool redone = false;
  };
  virtual sdk::Expected<Verified> verify() { return sdk::not_available("speculation"); }
  // The merged circuit layers' recurrent states (weights::read_ram), valid until the next call.
  virtual sdk::Expected<weights::StateView> circuit_state() = 0;
  // Lines on the merge (layers, upload cost; the silence certificate; where the choice
  // fields went), separated by '\n', for progress output.
  virtual std::string describe() const = 0;
  // Channels the circuit leaves for the mute direction: the machine compiles with
  // sdk::CircuitRequest::mute_width set to this.
  virtual int mute_width() const = 0;
};

}  // namespace qgpu::core
