#include "golden.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace qgpu::torch_backend::testing {

std::int64_t GoldenTensor::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::vector<float> GoldenTensor::to_f32() const {
  std::vector<float> out(static_cast<std::size_t>(numel()));
  if (dtype == sdk::DType::kF32) {
    std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  } else {
    for (std::size_t i = 0; i < out.size(); ++i) {
      std::uint16_t half;
      std::memcpy(&half, bytes.data() + 2 * i, 2);
      const std::uint32_t bits = static_cast<std::uint32_t>(half) << 16;
      std::memcpy(&out[i], &bits, 4);
    }
  }
  return out;
}

sdk::TensorView GoldenTensor::view() const {
  sdk::TensorView v;
  v.data = const_cast<std::uint8_t*>(bytes.data());
  v.dtype = dtype;
  v.rank = static_cast<std::int32_t>(shape.size());
  for (std::size_t i = 0; i < shape.size(); ++i) v.shape[i] = shape[i];
  return v;
}

Golden Golden::load(const std::string& name) {
  const std::string base = std::string(QGPU_BACKEND_GOLDEN_DIR) + "/" + name;
  std::ifstream json_file(base + ".json");
  if (!json_file) throw std::runtime_error(base + ".json: cannot open");
  Golden g;
  g.manifest_ = nlohmann::json::parse(json_file);
  std::ifstream bin_file(base + ".bin", std::ios::binary);
  if (!bin_file) throw std::runtime_error(base + ".bin: cannot open");
  const std::vector<char> data((std::istreambuf_iterator<char>(bin_file)), std::istreambuf_iterator<char>());
  for (const auto& e : g.manifest_.at("tensors")) {
    GoldenTensor t;
    t.dtype = e.at("dtype").get<std::string>() == "bf16" ? sdk::DType::kBF16 : sdk::DType::kF32;
    t.shape = e.at("shape").get<std::vector<std::int64_t>>();
    const auto offset = e.at("offset").get<std::size_t>(), nbytes = e.at("nbytes").get<std::size_t>();
    if (offset + nbytes > data.size()) throw std::runtime_error(base + ".bin: tensor past the end of the file");
    if (static_cast<std::size_t>(t.numel()) * sdk::dtype_size(t.dtype) != nbytes) {
      throw std::runtime_error(base + ".json: size of " + e.at("name").get<std::string>() +
                               " disagrees with its shape");
    }
    t.bytes.assign(data.begin() + offset, data.begin() + offset + nbytes);
    g.tensors_.emplace(e.at("name").get<std::string>(), std::move(t));
  }
  return g;
}

const GoldenTensor& Golden::at(const std::string& tensor) const {
  auto it = tensors_.find(tensor);
  if (it == tensors_.end()) throw std::runtime_error("golden tensor '" + tensor + "' is missing");
  return it->second;
}

Qwen35Config Golden::config() const {
  const auto& c = manifest_.at("config");
  Qwen35Config out;
  out.hidden_size = c.at("hidden_size");
  out.intermediate_size = c.at("intermediate_size");
  out.vocab_size = c.at("vocab_size");
  out.layer_types = c.at("layer_types").get<std::vector<std::string>>();
  out.rms_norm_eps = c.at("rms_norm_eps");
  out.tie_word_embeddings = c.at("tie_word_embeddings");
  out.delta_net.num_key_heads = c.at("linear_num_key_heads");
  out.delta_net.num_value_heads = c.at("linear_num_value_heads");
  out.delta_net.key_head_dim = c.at("linear_key_head_dim");
  out.delta_net.value_head_dim = c.at("linear_value_head_dim");
  out.delta_net.conv_kernel = c.at("linear_conv_kernel_dim");
  out.delta_net.eps = out.rms_norm_eps;
  out.attention.num_heads = c.at("num_attention_heads");
  out.attention.num_kv_heads = c.at("num_key_value_heads");
  out.attention.head_dim = c.at("head_dim");
  out.attention.rotary_dim =
      static_cast<std::int64_t>(out.attention.head_dim * manifest_.at("partial_rotary_factor").get<double>());
  out.attention.rope_theta = manifest_.at("rope_theta");
  out.attention.eps = out.rms_norm_eps;
  return out;
}

std::vector<std::int64_t> Golden::prompt() const {
  return manifest_.at("prompt").get<std::vector<std::int64_t>>();
}
std::vector<std::int64_t> Golden::decode() const {
  return manifest_.at("decode").get<std::vector<std::int64_t>>();
}

std::vector<std::string> Golden::weight_names() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : tensors_) {
    if (name.rfind("model.", 0) == 0)
      out.push_back(name.substr(6));
    else if (name == "lm_head.weight")
      out.push_back(name);
  }
  return out;
}

}  // namespace qgpu::torch_backend::testing
