// Safetensors writer: deterministic layout, optional sharding with an index.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "qgpu/qwen35/safetensors.h"
#include "util.h"

namespace qgpu::qwen35 {

using sdk::Expected;
using sdk::Status;

namespace {

Expected<std::string> json_string(const std::string& text) {
  try {
    return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
  } catch (const std::exception&) {
    return sdk::invalid_argument("'" + printable(text) + "' is not valid UTF-8");
  }
}

Expected<std::uint64_t> tensor_bytes(const TensorToWrite& t) {
  std::uint64_t n = st_dtype_size(t.dtype);
  bool empty = false;
  for (auto d : t.shape) {
    if (d < 0)
      return sdk::invalid_argument("tensor '" + printable(t.name) + "': negative dimension in shape " +
                                   shape_string(t.shape));
    if (d == 0) empty = true;
  }
  if (empty) return std::uint64_t{0};
  for (auto d : t.shape)
    if (!checked_mul(n, static_cast<std::uint64_t>(d), n)) {
      return sdk::invalid_argument("tensor '" + printable(t.name) + "': shape " + shape_string(t.shape) +
                                   " overflows a 64-bit byte count");
    }
  return n;
}

Status check_tensors(const std::vector<TensorToWrite>& tensors) {
  std::set<std::string_view> names;
  for (const auto& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__") {
      return sdk::invalid_argument("invalid tensor name '" + printable(t.name) + "'");
    }
    if (!names.insert(t.name).second) return sdk::invalid_argument("duplicate tensor name '" + printable(t.name) + "'");
    if (!t.fill) return sdk::invalid_argument("tensor '" + printable(t.name) + "' has no data");
    auto n = tensor_bytes(t);
    if (!n) return n.error();
  }
  return Status::ok();
}

struct Progress {
  std::uint64_t done = 0;
  std::uint64_t total = 0;
  const std::function<void(std::uint64_t, std::uint64_t)>* callback = nullptr;
};

Status write_one(const std::filesystem::path& file, std::vector<TensorToWrite> tensors,
                 const std::map<std::string, std::string>& metadata, Progress& progress) {
  // The reference writer's order: wider dtypes first (keeps elements aligned), then by name.
  std::sort(tensors.begin(), tensors.end(), [](const TensorToWrite& a, const TensorToWrite& b) {
    if (a.dtype != b.dtype) return a.dtype > b.dtype;
    return a.name < b.name;
  });
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      auto ks = json_string(k);
      if (!ks) return ks.error();
      auto vs = json_string(v);
      if (!vs) return vs.error();
      if (!first) header += ",";
      first = false;
      header += *ks + ":" + *vs;
    }
    header += "}";
  }
  std::uint64_t offset = 0;
  std::vector<std::uint64_t> sizes;
  for (const auto& t : tensors) {
    auto name = json_string(t.name);
    if (!name) return name.error();
    const std::uint64_t n = *tensor_bytes(t);
    if (header.size() > 1) header += ",";
    header += *name + ":{\"dtype\":\"" + std::string(st_dtype_name(t.dtype)) + "\",\"shape\":[";
    for (std::size_t i = 0; i < t.shape.size(); ++i) header += (i ? "," : "") + std::to_string(t.shape[i]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + n) + "]}";
    offset += n;
    sizes.push_back(n);
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');

  // Write beside the target and rename, so a failed write never leaves a plausible file.
  const std::filesystem::path tmp = file.string() + ".partial";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out)
    return sdk::error_at(tmp.string(), sdk::ErrorCode::kIoError, "cannot create: " + std::string(std::strerror(errno)));
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(header.size()) >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  std::vector<std::byte> buffer;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    buffer.assign(sizes[i], std::byte{0});
    Status s = tensors[i].fill(buffer);
    if (!s) {
      out.close();
      std::filesystem::remove(tmp);
      return s.with_context("tensor '" + printable(tensors[i].name) + "'");
    }
    out.write(reinterpret_cast<const char*>(buffer.data()), static_cast<std::streamsize>(buffer.size()));
    progress.done += sizes[i];
    if (progress.callback && *progress.callback) (*progress.callback)(progress.done, progress.total);
  }
  out.close();
  if (!out) {
    std::filesystem::remove(tmp);
    return sdk::error_at(tmp.string(), sdk::ErrorCode::kIoError, "write failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
  if (ec) return sdk::error_at(file.string(), sdk::ErrorCode::kIoError, "cannot rename into place: " + ec.message());
  return Status::ok();
}

}  // namespace

TensorToWrite tensor_from_bytes(std::string name, StDType dtype, std::vector<std::int64_t> shape,
                                std::span<const std::byte> bytes) {
  TensorToWrite t{std::move(name), dtype, std::move(shape), nullptr};
  t.fill = [bytes](std::span<std::byte> out) {
    if (out.size() != bytes.size()) {
      return sdk::invalid_argument("holds " + std::to_string(bytes.size()) + " bytes, shape needs " +
                                   std::to_string(out.size()));
    }
    if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
    return Status::ok();
  };
  return t;
}

Status write_safetensors(const std::filesystem::path& file, std::vector<TensorToWrite> tensors,
                         const WriteOptions& options) {
  QGPU_RETURN_IF_ERROR(check_tensors(tensors));
  Progress progress;
  for (const auto& t : tensors) progress.total += *tensor_bytes(t);
  progress.callback = &options.progress;
  return write_one(file, std::move(tensors), options.metadata, progress);
}

Expected<std::vector<std::filesystem::path>> write_checkpoint_tensors(const std::filesystem::path& dir,
                                                                      std::vector<TensorToWrite> tensors,
                                                                      const WriteOptions& options) {
  QGPU_RETURN_IF_ERROR(check_tensors(tensors));
  Progress progress;
  for (const auto& t : tensors) progress.total += *tensor_bytes(t);
  progress.callback = &options.progress;
  if (options.max_shard_bytes == 0) {
    const auto file = dir / kSingleFileName;
    QGPU_RETURN_IF_ERROR(write_one(file, std::move(tensors), options.metadata, progress));
    return std::vector<std::filesystem::path>{file};
  }
  // Greedy in the given order: a shard closes when the next tensor would overflow it.
  std::vector<std::vector<TensorToWrite>> shards(1);
  std::uint64_t in_shard = 0;
  for (auto& t : tensors) {
    const std::uint64_t n = *tensor_bytes(t);
    if (!shards.back().empty() && in_shard + n > options.max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    in_shard += n;
    shards.back().push_back(std::move(t));
  }
  std::vector<std::filesystem::path> files;
  nlohmann::json weight_map = nlohmann::json::object();
  for (std::size_t i = 0; i < shards.size(); ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
    for (const auto& t : shards[i]) weight_map[t.name] = name;
    QGPU_RETURN_IF_ERROR(write_one(dir / name, std::move(shards[i]), options.metadata, progress));
    files.push_back(dir / name);
  }
  nlohmann::json index;
  index["metadata"]["total_size"] = progress.total;
  index["weight_map"] = std::move(weight_map);
  const auto index_path = dir / kIndexFileName;
  std::ofstream out(index_path, std::ios::binary | std::ios::trunc);
  out << index.dump(2) << "\n";
  out.close();
  if (!out) return sdk::error_at(index_path.string(), sdk::ErrorCode::kIoError, "write failed");
  files.push_back(index_path);
  return files;
}

}  // namespace qgpu::qwen35
