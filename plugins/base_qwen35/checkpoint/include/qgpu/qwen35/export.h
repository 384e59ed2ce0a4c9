// `qgpu-host build` for Qwen3.5 (sdk::BaseModel::export_checkpoint): a checkpoint directory
// written again with decoder layers of another model in front and vocabulary rows after the
// base's own, as a Hugging Face Qwen3.5 checkpoint (docs/BUILD.md).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "qgpu/sdk/base_model.h"

namespace qgpu::qwen35 {

// Reads the checkpoint in `source_dir` and writes request.directory:
//   config.json             the base's, with num_hidden_layers, layer_types (request.layers
//                           linear_attention layers first), vocab_size, tie_word_embeddings
//                           false and dtype changed;
//   model*.safetensors      the added layers (source.fill_layer) as layers 0..N-1, the base's
//                           layers renumbered after them and every other tensor copied as
//                           stored; embed_tokens and lm_head with the added rows appended
//                           (source.fill_rows), in the wider of the base's and the export's dtype;
//   tokenizer.json          the added rows as special added tokens (request.row_tokens);
//   tokenizer_config.json   (when the base has one) the same in added_tokens_decoder;
//   other small files       (generation_config.json, chat_template.jinja, ...) copied;
//   request.files           as given.
// Returns the files written. Refuses a directory that already holds a checkpoint.
sdk::Expected<std::vector<std::string>> export_checkpoint(const std::filesystem::path& source_dir,
                                                          const sdk::CheckpointExport& request,
                                                          sdk::ExportSource& source);

}  // namespace qgpu::qwen35
