// A Qwen3.5 checkpoint written again with added layers and vocabulary rows (qgpu/qwen35/export.h).
#include "qgpu/qwen35/export.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "qgpu/qwen35/checkpoint.h"
#include "util.h"

namespace qgpu::qwen35 {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using sdk::Expected;
using sdk::Status;

Expected<json> read_json(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return sdk::error_at(file.string(), sdk::ErrorCode::kIoError, "cannot open");
  std::stringstream text;
  text << in.rdbuf();
  json value = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return sdk::error_at(file.string(), sdk::ErrorCode::kParseError, "not valid JSON");
  return value;
}

// Written beside the target and renamed, so that a failed write leaves no plausible file.
Status write_file(const fs::path& file, std::string_view text) {
  const fs::path tmp = file.string() + ".partial";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return sdk::error_at(tmp.string(), sdk::ErrorCode::kIoError, "cannot create");
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.close();
    if (!out) return sdk::error_at(tmp.string(), sdk::ErrorCode::kIoError, "write failed");
  }
  std::error_code ec;
  fs::rename(tmp, file, ec);
  if (ec) return sdk::error_at(file.string(), sdk::ErrorCode::kIoError, "cannot rename into place: " + ec.message());
  return Status::ok();
}

std::string dump(const json& value) {
  return value.dump(2, ' ', /*ensure_ascii=*/false) + "\n";
}

StDType st_dtype(sdk::DType dtype) {
  return dtype == sdk::DType::kF32 ? StDType::kF32 : StDType::kBF16;
}

// The dtype that holds both the base's rows and the added rows exactly.
StDType wider(StDType base, StDType added) {
  return base == added && base == StDType::kBF16 ? StDType::kBF16 : StDType::kF32;
}

// `n` elements of a stored tensor into `out` in `to` (the same dtype, or F32 from BF16/F16/F32).
Status convert(const TensorRef& from, std::byte* out, StDType to) {
  if (from.dtype() == to) {
    std::memcpy(out, from.data, from.bytes().size());
    return Status::ok();
  }
  if (to != StDType::kF32) return sdk::internal_error("export: narrowing " + from.name());
  const auto n = static_cast<std::size_t>(from.numel());
  std::vector<float> values(n);
  QGPU_RETURN_IF_ERROR(to_f32(from, values));
  std::memcpy(out, values.data(), n * sizeof(float));
  return Status::ok();
}

sdk::TensorView view(std::span<std::byte> out, StDType dtype, const std::vector<std::int64_t>& shape) {
  sdk::TensorView v;
  v.data = out.data();
  v.dtype = dtype == StDType::kF32 ? sdk::DType::kF32 : sdk::DType::kBF16;
  v.rank = static_cast<std::int32_t>(shape.size());
  std::copy(shape.begin(), shape.end(), v.shape);
  return v;
}

std::uint64_t nbytes(StDType dtype, const std::vector<std::int64_t>& shape) {
  std::uint64_t n = st_dtype_size(dtype);
  for (std::int64_t d : shape) n *= static_cast<std::uint64_t>(d);
  return n;
}

// config.json with the added layers and rows.
Status write_config(const fs::path& source, const fs::path& out, const TextConfig& merged, sdk::DType dtype) {
  QGPU_ASSIGN_OR_RETURN(json root, read_json(source / "config.json"));
  const bool wrapper = root.contains("text_config") && root["text_config"].is_object();
  json& text = wrapper ? root["text_config"] : root;
  text["num_hidden_layers"] = merged.num_hidden_layers;
  json types = json::array();
  for (LayerType t : merged.layer_types) types.push_back(std::string(layer_type_name(t)));
  text["layer_types"] = std::move(types);
  text["vocab_size"] = merged.vocab_size;
  text["tie_word_embeddings"] = false;
  if (wrapper) root["tie_word_embeddings"] = false;
  const std::string name = dtype == sdk::DType::kF32 ? "float32" : "bfloat16";
  bool named = false;
  for (json* node : {&root, &text})
    for (const char* key : {"dtype", "torch_dtype"})
      if (node->contains(key)) (*node)[key] = name, named = true;
  if (!named) root["dtype"] = name;
  return write_file(out / "config.json", dump(root));
}

// tokenizer.json (and tokenizer_config.json's added_tokens_decoder) with the added rows.
Status write_tokenizer(const fs::path& source, const fs::path& out, std::int64_t first_id,
                       const std::vector<std::string>& tokens, std::vector<std::string>& files) {
  QGPU_ASSIGN_OR_RETURN(json tok, read_json(source / "tokenizer.json"));
  if (!tok.contains("added_tokens") || !tok["added_tokens"].is_array()) tok["added_tokens"] = json::array();
  std::set<std::string, std::less<>> taken;
  std::int64_t next = 0;  // one past the tokenizer's largest id
  auto id_of = [&next](const json& id) {
    if (id.is_number_integer()) next = std::max(next, id.get<std::int64_t>() + 1);
  };
  for (const json& t : tok["added_tokens"]) {
    if (t.contains("content") && t["content"].is_string()) taken.insert(t["content"].get<std::string>());
    if (t.contains("id")) id_of(t["id"]);
  }
  if (tok.contains("model") && tok["model"].contains("vocab") && tok["model"]["vocab"].is_object())
    for (const auto& [piece, id] : tok["model"]["vocab"].items()) {
      taken.insert(piece);
      id_of(id);
    }
  if (next > first_id)
    return sdk::invalid_argument("export: the base's tokenizer has ids up to " + std::to_string(next - 1) +
                                 ", past its " + std::to_string(first_id) + " embedding rows");
  auto entry = [](const std::string& content) {
    return json{{"content", content}, {"single_word", false}, {"lstrip", false},
                {"rstrip", false},    {"normalized", false},  {"special", true}};
  };
  // Embedding rows the base's tokenizer has no text for (Qwen3.5 pads its 248,077 tokens to
  // 248,320 rows) get placeholders: the tokenizers library numbers added tokens without gaps, so
  // without them every added token after the gap would get another id.
  std::vector<std::pair<std::int64_t, std::string>> added;
  for (std::int64_t id = next; id < first_id; ++id) added.emplace_back(id, "<|qgpu:unused " + std::to_string(id) + "|>");
  for (std::size_t i = 0; i < tokens.size(); ++i) added.emplace_back(first_id + static_cast<std::int64_t>(i), tokens[i]);
  for (const auto& [id, content] : added) {
    if (!taken.insert(content).second)
      return sdk::invalid_argument("export: the added token '" + printable(content) +
                                   "' is already in the base's tokenizer");
    json t = {{"id", id}};
    t.update(entry(content));
    tok["added_tokens"].push_back(std::move(t));
  }
  QGPU_RETURN_IF_ERROR(write_file(out / "tokenizer.json", dump(tok)));
  files.push_back((out / "tokenizer.json").string());
  if (!fs::exists(source / "tokenizer_config.json")) return Status::ok();
  QGPU_ASSIGN_OR_RETURN(json config, read_json(source / "tokenizer_config.json"));
  if (config.contains("added_tokens_decoder") && config["added_tokens_decoder"].is_object())
    for (const auto& [id, content] : added) config["added_tokens_decoder"][std::to_string(id)] = entry(content);
  QGPU_RETURN_IF_ERROR(write_file(out / "tokenizer_config.json", dump(config)));
  files.push_back((out / "tokenizer_config.json").string());
  return Status::ok();
}

bool is_weights_file(const fs::path& p) {
  return p.extension() == ".safetensors" || p.filename() == kIndexFileName || p.extension() == ".partial";
}

}  // namespace

Expected<std::vector<std::string>> export_checkpoint(const fs::path& source_dir, const sdk::CheckpointExport& request,
                                                     sdk::ExportSource& source) {
  if (request.dtype != sdk::DType::kF32 && request.dtype != sdk::DType::kBF16)
    return sdk::invalid_argument("export: dtype " + std::string(sdk::dtype_name(request.dtype)) +
                                 " is not one of f32, bf16");
  if (request.layers < 0 || request.rows < 0 || static_cast<std::int64_t>(request.row_tokens.size()) != request.rows)
    return sdk::invalid_argument("export: " + std::to_string(request.layers) + " layers, " +
                                 std::to_string(request.rows) + " rows and " +
                                 std::to_string(request.row_tokens.size()) + " token names");
  const fs::path out = request.directory;
  std::error_code ec;
  if (fs::exists(out, ec)) {
    if (fs::equivalent(out, source_dir, ec))
      return sdk::invalid_argument("export: '" + out.string() + "' is the base's own checkpoint directory");
    for (const auto& f : fs::directory_iterator(out, ec))
      if (f.path().filename() == "config.json" || is_weights_file(f.path()))
        return sdk::invalid_argument("export: '" + out.string() + "' already holds a checkpoint (" +
                                     f.path().filename().string() + "); choose a new or empty directory");
  }
  fs::create_directories(out, ec);
  if (ec) return sdk::error_at(out.string(), sdk::ErrorCode::kIoError, "cannot create: " + ec.message());

  QGPU_ASSIGN_OR_RETURN(Checkpoint base, Checkpoint::open(source_dir, CheckOptions{/*exact_dtypes=*/false}));
  const TextConfig& text = base.config().text;
  TextConfig merged = text;
  const std::int64_t N = request.layers, V = text.vocab_size, H = text.hidden_size;
  merged.num_hidden_layers = text.num_hidden_layers + N;
  merged.layer_types.assign(static_cast<std::size_t>(N), LayerType::kLinearAttention);
  merged.layer_types.insert(merged.layer_types.end(), text.layer_types.begin(), text.layer_types.end());
  merged.layer_types_derived = false;
  merged.vocab_size = V + request.rows;
  merged.tie_word_embeddings = false;
  const std::string& prefix = base.prefix();
  const StDType added = st_dtype(request.dtype);

  std::vector<TensorToWrite> tensors;
  std::set<std::string, std::less<>> written;
  auto copy = [&](const std::string& name, const TensorRef& from) {
    tensors.push_back(tensor_from_bytes(name, from.dtype(), from.shape(), from.bytes()));
    written.insert(name);
  };
  // embed_tokens / lm_head: the base's rows, then the added ones.
  auto extended = [&](const std::string& name, const TensorRef& from, bool head) {
    const StDType dtype = wider(from.dtype(), added);
    std::vector<std::int64_t> shape = {V + request.rows, H};
    tensors.push_back({name, dtype, shape, [from, dtype, head, &source, &request, H](std::span<std::byte> bytes) {
                         const std::uint64_t base_bytes = nbytes(dtype, from.shape());
                         QGPU_RETURN_IF_ERROR(convert(from, bytes.data(), dtype));
                         if (request.rows == 0) return Status::ok();
                         return source.fill_rows(head, view(bytes.subspan(base_bytes), dtype, {request.rows, H}));
                       }});
    written.insert(name);
  };
  const std::string layers = prefix + "layers.";
  for (const ExpectedTensor& e : expected_text_tensors(merged, prefix)) {
    if (e.name == prefix + "embed_tokens.weight") {
      QGPU_ASSIGN_OR_RETURN(TensorRef embed, base.text_tensor("embed_tokens.weight"));
      extended(e.name, embed, false);
    } else if (e.name == kLmHeadName) {
      QGPU_ASSIGN_OR_RETURN(TensorRef head, base.lm_head());
      extended(e.name, head, true);
    } else if (e.name.starts_with(layers)) {
      const std::size_t dot = e.name.find('.', layers.size());
      const std::int64_t index = std::stoll(e.name.substr(layers.size(), dot - layers.size()));
      const std::string suffix = e.name.substr(dot + 1);
      if (index >= N) {
        QGPU_ASSIGN_OR_RETURN(TensorRef from, base.tensors().get(layers + std::to_string(index - N) + "." + suffix));
        copy(e.name, from);
        continue;
      }
      const StDType dtype = e.dtype == StDType::kF32 ? StDType::kF32 : added;
      tensors.push_back({e.name, dtype, e.shape, [&source, index, suffix, dtype, shape = e.shape](std::span<std::byte> b) {
                           return source.fill_layer(index, suffix, view(b, dtype, shape));
                         }});
      written.insert(e.name);
    } else {
      QGPU_ASSIGN_OR_RETURN(TensorRef from, base.tensors().get(e.name));
      copy(e.name, from);
    }
  }
  // Everything else the base holds (vision tower, MTP layers) as stored; a tied base's spare head goes.
  for (const std::string& name : base.tensors().names()) {
    if (written.count(name) || name.starts_with(layers) || name == prefix + "embed_tokens.weight" ||
        name == kLmHeadName)
      continue;
    QGPU_ASSIGN_OR_RETURN(TensorRef from, base.tensors().get(name));
    copy(name, from);
  }

  std::vector<std::string> files;
  QGPU_RETURN_IF_ERROR(write_config(source_dir, out, merged, request.dtype));
  files.push_back((out / "config.json").string());
  WriteOptions options;
  options.metadata = {{"format", "pt"}};
  options.max_shard_bytes = request.max_shard_bytes;
  options.progress = [&source](std::uint64_t done, std::uint64_t total) { source.written(done, total); };
  QGPU_ASSIGN_OR_RETURN(std::vector<fs::path> weights, write_checkpoint_tensors(out, std::move(tensors), options));
  for (const fs::path& f : weights) files.push_back(f.string());
  QGPU_RETURN_IF_ERROR(write_tokenizer(source_dir, out, V, request.row_tokens, files));

  // The base's other small files as they are (generation_config.json, chat_template.jinja, ...).
  std::set<std::string> own = {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"};
  for (const auto& [name, contents] : request.files) own.insert(name);
  for (const auto& f : fs::directory_iterator(source_dir, ec)) {
    const std::string name = f.path().filename().string();
    if (!f.is_regular_file() || own.count(name) || is_weights_file(f.path())) continue;
    fs::copy_file(f.path(), out / name, fs::copy_options::overwrite_existing, ec);
    if (ec) return sdk::error_at((out / name).string(), sdk::ErrorCode::kIoError, "cannot copy: " + ec.message());
    files.push_back((out / name).string());
  }
  // generation_config.json: the base's (or its eos ids), and the added rows never generated in
  // text (transformers' suppress_tokens; qgpu-host honours it too).
  json generation = json::object();
  if (fs::exists(source_dir / "generation_config.json")) {
    QGPU_ASSIGN_OR_RETURN(generation, read_json(source_dir / "generation_config.json"));
  } else if (!text.eos_token_ids.empty()) {
    generation["eos_token_id"] = text.eos_token_ids;
  }
  if (request.rows > 0) {
    json suppress = generation.contains("suppress_tokens") && generation["suppress_tokens"].is_array()
                        ? generation["suppress_tokens"]
                        : json::array();
    for (std::int64_t i = 0; i < request.rows; ++i) suppress.push_back(V + i);
    generation["suppress_tokens"] = std::move(suppress);
  }
  QGPU_RETURN_IF_ERROR(write_file(out / "generation_config.json", generation.dump() + "\n"));
  files.push_back((out / "generation_config.json").string());
  for (const auto& [name, contents] : request.files) {
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
      return sdk::invalid_argument("export: extra file name '" + printable(name) + "' is not a plain file name");
    QGPU_RETURN_IF_ERROR(write_file(out / name, contents));
    files.push_back((out / name).string());
  }
  return files;
}

}  // namespace qgpu::qwen35
