// Launches on a checkpoint written by `qgpu-host build` (core/build.h): its circuit layers are
// already the base's first layers and its record tokens its last vocabulary rows, so nothing is
// merged. The machine compiles its circuit as for a merge; BuiltHost::merge only checks that it
// is the circuit the checkpoint was built from (the manifest's compiled hash). Then each token runs
// through the checkpoint's own layers: its circuit layers read back as sparse matrices on the host
// (the default, as fast as the merge's sparse path) or dense on the backend with the rest, and the
// circuit state is read from them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "qgpu/core/model_host.h"
#include "qgpu/sdk/base_model.h"
#include "qgpu/sdk/machine.h"
#include "qgpu/sdk/tensor_backend.h"
#include "qgpu/weights/model.h"
#include "qgpu/weights/reference.h"

namespace qgpu::core {

// What a built checkpoint's qgpu.json says that a launch needs.
struct BuiltManifest {
  std::string file;
  std::int64_t circuit_layers = 0;
  std::int64_t first_record = 0;  // record token i is id first_record + i
  std::int64_t records = 0;
  std::uint64_t compiled_hash = 0;
  std::string dtype;    // "f32" or "bf16": what the layers were built (and calibrated) for
  std::string machine;  // the machine plugin's name
  std::string silence;  // the certificate's summary at build time
};

// The manifest in `checkpoint_dir`, nullopt when there is none (an ordinary checkpoint); a
// manifest that does not parse or lacks a field is an error naming the file.
sdk::Expected<std::optional<BuiltManifest>> read_built_manifest(const std::string& checkpoint_dir);

class BuiltHost final : public ModelHost {
 public:
  // `base` is the built checkpoint loaded into `backend` (info: its load() result).
  // `sparse`: after merge(), the circuit layers are read back from the checkpoint as sparse
  // matrices (their nonzeros) and run on the host (weights::ReferenceModel, as the merge's sparse
  // path runs them); else every token runs through all of the checkpoint's layers on the backend.
  BuiltHost(sdk::BaseModel& base, const sdk::ModelInfo& info, sdk::TensorBackend& backend, BuiltManifest manifest,
            bool sparse);
  ~BuiltHost() override;
  sdk::LayerShapes shapes() const override { return info_.shapes; }
  std::int64_t text_rows() const override { return manifest_.first_record; }
  sdk::DType dtype() const override;
  // Checks `circuit` against the manifest (layers, records, compiled hash, dtype); merges nothing.
  sdk::Status merge(std::shared_ptr<const sdk::MachineCircuit> circuit) override;
  bool holds(const sdk::MachineCircuit& circuit) const override { return circuit_.get() == &circuit; }
  void reset() override;
  sdk::Expected<std::vector<float>> forward(std::span<const std::int64_t> ids) override;
  sdk::Expected<weights::StateView> circuit_state() override;
  std::string describe() const override;
  int mute_width() const override;
  const BuiltManifest& manifest() const { return manifest_; }

 private:
  sdk::BaseModel* base_;
  sdk::ModelInfo info_;
  sdk::TensorBackend* backend_;
  BuiltManifest manifest_;
  // The circuit layers read back from the checkpoint (sparse), and the model that runs them.
  sdk::Status recover_layers();

  std::shared_ptr<const sdk::MachineCircuit> circuit_;
  bool sparse_ = false;
  std::vector<weights::Layer> layers_;
  std::unique_ptr<weights::ReferenceModel> reference_;
  double recover_seconds_ = 0;
  std::vector<std::vector<float>> states_;  // circuit_state()'s buffers
};

}  // namespace qgpu::core
