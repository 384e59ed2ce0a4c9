// BaseModel: a pretrained model family (config, weights, tokenizer) and its
// forward pass, run through a TensorBackend.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "qgpu/sdk/chat.h"
#include "qgpu/sdk/plugin.h"
#include "qgpu/sdk/tensor_backend.h"

namespace qgpu::sdk {

// The shapes a machine's circuit must be compiled into (per-layer sizes of
// the base, which the added layers reuse).
struct LayerShapes {
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;  // SwiGLU width
  std::int64_t linear_num_key_heads = 0;
  std::int64_t linear_num_value_heads = 0;
  std::int64_t linear_key_head_dim = 0;
  std::int64_t linear_value_head_dim = 0;
  std::int64_t linear_conv_kernel = 0;
  double rms_norm_eps = 0;
  bool operator==(const LayerShapes&) const = default;
};

// Text generation defaults a checkpoint ships (for Qwen3.5, transformers' generation_config.json,
// else config.json's eos_token_id); the host's command-line flags override them.
struct GenerationDefaults {
  std::string source;                       // the file they were read from; empty: built-in defaults
  std::vector<std::int64_t> eos_token_ids;  // a generated id among these ends a generation
  bool do_sample = false;                   // false: greedy (the sampling fields below are unused)
  double temperature = 1.0;
  std::int64_t top_k = 50;  // 0: no limit
  double top_p = 1.0;
  std::vector<std::int64_t> suppress_token_ids;  // never generated in text (e.g. a built checkpoint's records)
};

struct ModelInfo {
  std::string checkpoint;  // the directory it was loaded from
  std::int64_t num_layers = 0;
  std::int64_t vocab_size = 0;      // embedding rows = logits per position; any of them may be generated
  std::int64_t tokenizer_size = 0;  // ids the tokenizer has text for (the rest are padding rows)
  bool tied_embeddings = true;
  std::vector<std::string> layer_types;  // e.g. "linear_attention", "full_attention"
  LayerShapes shapes;
  std::int64_t parameters = 0;  // number of text-model weights (a tied head counted once)
  GenerationDefaults generation;
};

// One sequence of a base model: every layer's state (Gated DeltaNet conv windows and
// recurrent states, attention KV caches) and the tokens it has consumed. Made by
// BaseModel::create_sequence of one loaded model; several run side by side on the same
// weights (a chat and a launch). release() destroys it in the plugin that made it; it must
// not outlive that model.
class QGPU_SDK_API Sequence {
 public:
  virtual void release() noexcept = 0;
  virtual std::int64_t tokens() const = 0;  // the position of the next token

 protected:
  ~Sequence() = default;
};

// `qgpu-host build`: a base written as a checkpoint of its own format with `layers` decoder
// layers of another model in front of its own (stock linear-attention layers of the base's
// shapes) and `rows` vocabulary rows after its own (ids vocab_size .. vocab_size + rows - 1),
// with an untied output head. The base's own tensors are copied as stored.
struct CheckpointExport {
  std::string directory;  // created if missing; must hold no checkpoint files yet
  DType dtype = DType::kBF16;  // the added layers and rows (F32 or BF16), and the config's dtype
  std::int64_t layers = 0;
  std::int64_t rows = 0;
  // The tokenizer's text for each added row (added as special tokens), `rows` entries.
  std::vector<std::string> row_tokens;
  // Extra files written into the directory as given: (file name, contents), e.g. a manifest.
  std::vector<std::pair<std::string, std::string>> files;
  std::uint64_t max_shard_bytes = 5'000'000'000;  // 0: one file
};

// What a CheckpointExport adds, asked for tensor by tensor while the files are written.
class QGPU_SDK_API ExportSource {
 public:
  // Added layer `layer` (0-based)'s tensor named `suffix` as the base's checkpoint names it
  // below a layer ("linear_attn.in_proj_qkv.weight", "mlp.down_proj.weight", ...): fills `out`
  // (contiguous, F32 or BF16, of the stock shape) with values exact in CheckpointExport::dtype.
  virtual Status fill_layer(std::int64_t layer, std::string_view suffix, const TensorView& out) = 0;
  // The added rows [rows, hidden] of the embedding (head false) or of the output head (true),
  // as `fill_layer` fills.
  virtual Status fill_rows(bool head, const TensorView& out) = 0;
  // Bytes written so far of `total` (called after every tensor).
  virtual void written(std::uint64_t done, std::uint64_t total) {}

 protected:
  ~ExportSource() = default;
};

class QGPU_SDK_API BaseModel : public Plugin {
 public:
  using Interface = BaseModel;
  static constexpr QgpuPluginKind kKind = QGPU_PLUGIN_BASE_MODEL;

  ~BaseModel() override;
  // Opens the configured checkpoint (config, weights, tokenizer), checks it and
  // uploads the weights to `backend`, which must outlive this model.
  virtual Expected<ModelInfo> load(TensorBackend& backend) = 0;

  // --- Tokenizer (after load).
  virtual Expected<std::vector<std::int64_t>> encode(std::string_view text) = 0;
  // Bytes of the ids' text; a character cut at the end stays as raw bytes. Ids the tokenizer lacks
  // (rows in [tokenizer_size, vocab_size)) decode to nothing; ids outside the embedding are an error.
  virtual Expected<std::string> decode(std::span<const std::int64_t> ids) = 0;
  // The model's chat format for a conversation, ending with the assistant's turn opening; `tools`
  // are declared to the model the way the format does (Qwen3.5: a "# Tools" block in the system
  // turn). Assistant turns carry their tool calls, "tool" turns the responses.
  virtual Expected<std::vector<std::int64_t>> encode_chat(std::span<const ChatTurn> turns,
                                                          std::span<const ToolDeclaration> tools) = 0;
  Expected<std::vector<std::int64_t>> encode_chat(std::span<const ChatTurn> turns) { return encode_chat(turns, {}); }
  // The first complete tool call in generated assistant text, in the chat format's own form; nullopt
  // while there is none (also while one is still being written). A malformed call is an error with
  // a one-line message, which the host can hand back to the model as the tool's response.
  virtual Expected<std::optional<ToolCallMatch>> find_tool_call(std::string_view text) {
    return not_available("tool calls in the chat format");
  }
  // Ids that end a chat turn: ModelInfo::generation.eos_token_ids plus the chat format's own end of
  // turn and end of text. (Plain text generation stops on generation.eos_token_ids alone.)
  virtual std::vector<std::int64_t> stop_ids() const = 0;

  // --- Forward pass (after load). Runs `ids` after the tokens already seen and
  // returns the logits of the last position as f32, one per embedding row.
  virtual Expected<std::vector<float>> forward(std::span<const std::int64_t> ids) = 0;
  // Starts a new sequence.
  virtual void reset() = 0;

  // --- The same forward pass in pieces (after load), for a model that runs
  // layers of its own on the base's residual stream (the merged machine model,
  // docs/MACHINE_CIRCUIT.md §6). Tensors are the load() backend's, [T, H] rows in
  // its compute dtype; the base's weights are used unchanged, so
  // lm_head(final_norm(rows(run_layers(embed(ids)), T-1, T))) is forward(ids) bit
  // for bit. Defaults answer "not available".
  // Embedding rows of `ids` (no scaling); ids outside the embedding are an error.
  virtual Expected<Handle<Tensor>> embed(std::span<const std::int64_t> ids) {
    return not_available("the base's embedding rows");
  }
  // Every decoder layer on `hidden` [T, H], continuing the sequence (it advances by T tokens).
  virtual Expected<Handle<Tensor>> run_layers(const Tensor& hidden) { return not_available("the base's layers"); }
  // The final norm of `hidden` [T, H].
  virtual Expected<Handle<Tensor>> final_norm(const Tensor& hidden) { return not_available("the base's final norm"); }
  // Logits [T, vocab_size] of final-normed rows (the lm_head; the embedding when tied).
  virtual Expected<Handle<Tensor>> lm_head(const Tensor& normed) { return not_available("the base's lm_head"); }

  // --- Sequences (after load). forward(ids), run_layers(hidden) and reset() above use the
  // model's own sequence; these take one of create_sequence()'s. A fork, a snapshot and a
  // restore are all copy_sequence (from a sequence into one that was created for it).
  virtual Expected<Handle<Sequence>> create_sequence() { return not_available("sequences"); }
  // `to` becomes an independent copy of `from` (both made by this model).
  virtual Status copy_sequence(const Sequence& from, Sequence& to) { return not_available("sequences"); }
  // Forgets the tokens at positions >= `tokens`. Only where every layer can: attention
  // caches can, a Gated DeltaNet state keeps no history (then only back to 0; restore a copy
  // taken at that length instead). Nothing changes on an error.
  virtual Status truncate_sequence(Sequence& sequence, std::int64_t tokens) { return not_available("sequences"); }
  // forward() and run_layers() continuing `sequence`.
  virtual Expected<std::vector<float>> forward(Sequence& sequence, std::span<const std::int64_t> ids) {
    return not_available("sequences");
  }
  virtual Expected<Handle<Tensor>> run_layers(Sequence& sequence, const Tensor& hidden) {
    return not_available("sequences");
  }
  // Layers [first_layer, num_layers) on `hidden` [T, H] in the model's own sequence (the layers
  // before keep their state): for a caller that runs the first layers itself (a built
  // checkpoint's circuit layers on the sparse path, core/built_host.h).
  virtual Expected<Handle<Tensor>> run_layers_from(const Tensor& hidden, std::int64_t first_layer) {
    return not_available("running the base's layers from a given layer");
  }
  // The weight `name` as the checkpoint names it below its text prefix
  // ("layers.0.mlp.up_proj.weight"), as the backend holds it, into f32 `out` of its shape.
  virtual Status download_weight(std::string_view name, const TensorView& out) {
    return not_available("downloading the base's weights");
  }
  // Linear-attention layer `layer`'s recurrent state in the model's own sequence, as
  // TensorBackend::download_state gives it ([value heads, dk, dv] f32 into `out`); false (and
  // `out` untouched) when no token has run through the layer yet.
  virtual Expected<bool> download_layer_state(std::int64_t layer, const TensorView& out) {
    return not_available("layer states");
  }

  // --- Export. Writes the loaded base's checkpoint with `request`'s layers and rows added
  // (CheckpointExport); returns the files written, in order.
  virtual Expected<std::vector<std::string>> export_checkpoint(const CheckpointExport& request,
                                                               ExportSource& source) {
    return not_available("writing a checkpoint");
  }
};

}  // namespace qgpu::sdk
