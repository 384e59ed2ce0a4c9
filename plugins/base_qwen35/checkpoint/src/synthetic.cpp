// Synthetic checkpoint writer.
#include "qgpu/qwen35/synthetic.h"

#include <cmath>
#include <cstring>
#include <fstream>

#include "qgpu/qwen35/checkpoint.h"

namespace qgpu::qwen35 {

using sdk::Expected;
using sdk::Status;

namespace {

std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

class Rng {  // xoshiro256**
 public:
  explicit Rng(std::uint64_t seed) {
    for (auto& w : s_) w = splitmix64(seed);
  }
  std::uint64_t next() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 24 random bits (exact in float).
  float uniform() { return static_cast<float>(next() >> 40) * 0x1p-24f; }
  // Mean 0, variance 1: the sum of four uniforms (16-bit each), rescaled. Only
  // integer arithmetic and one float multiply, so the result is exact and
  // portable; the tails stop at +-3.46 (fine for weights).
  float near_normal() {
    const std::uint64_t r = next();
    std::int64_t sum = 0;
    for (int i = 0; i < 4; ++i) sum += static_cast<std::int64_t>((r >> (16 * i)) & 0xffff);
    // (sum + 2) / 65536 - 2 has variance 1/3.
    const std::int64_t centered = sum + 2 - 2 * 65536;
    return static_cast<float>(centered) * (1.7320508075688772f / 65536.0f);
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

std::uint64_t tensor_seed(std::uint64_t seed, std::string_view name) {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the name
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  std::uint64_t x = seed ^ h;
  return splitmix64(x);
}

enum class Init { kNormal002, kZeroCentredNorm, kGatedNormWeight, kALog, kDtBias };

Init init_for(std::string_view name) {
  auto ends = [&](std::string_view s) { return name.ends_with(s); };
  if (ends(".A_log")) return Init::kALog;
  if (ends(".dt_bias")) return Init::kDtBias;
  if (ends("linear_attn.norm.weight")) return Init::kGatedNormWeight;
  if (ends("layernorm.weight") || ends("q_norm.weight") || ends("k_norm.weight") ||
      name == "model.language_model.norm.weight") {
    return Init::kZeroCentredNorm;
  }
  return Init::kNormal002;
}

// One value of a tensor. Scaled like a trained model so activations stay sane:
// projections N(0, 0.02); zero-centred norms (scale 1 + w) near 0; the gated
// norm (scale w) near 1; A = exp(A_log) uniform in [1, 16] as in HF's init;
// dt_bias = softplus^-1(dt) with dt log-uniform in [1e-3, 1e-1] (Mamba's init),
// so the per-token decay exp(-A softplus(a + dt_bias)) keeps some memory.
float sample(Init init, Rng& rng) {
  switch (init) {
    case Init::kNormal002: return 0.02f * rng.near_normal();
    case Init::kZeroCentredNorm: return 0.02f * rng.near_normal();
    case Init::kGatedNormWeight: return 1.0f + 0.02f * rng.near_normal();
    case Init::kALog: return static_cast<float>(std::log(1.0 + 15.0 * static_cast<double>(rng.uniform())));
    case Init::kDtBias: {
      const double dt = std::exp(std::log(1e-3) + (std::log(1e-1) - std::log(1e-3)) * rng.uniform());
      return static_cast<float>(dt + std::log(-std::expm1(-dt)));
    }
  }
  return 0;
}

}  // namespace

std::vector<LayerType> synthetic_layer_types(std::int64_t num_layers) {
  auto types = derive_layer_types(num_layers, 4);
  if (num_layers > 0 && num_layers < 4) types.back() = LayerType::kFullAttention;
  return types;
}

static TextConfig common_text(std::int64_t num_layers, std::int64_t vocab_size) {
  TextConfig t;
  t.vocab_size = vocab_size;
  t.num_hidden_layers = num_layers;
  t.layer_types = synthetic_layer_types(num_layers);
  t.full_attention_interval = 4;
  t.hidden_act = "silu";
  t.max_position_embeddings = 262144;
  t.rms_norm_eps = 1e-6;
  t.tie_word_embeddings = true;
  t.rope.rope_type = "default";
  t.rope.rope_theta = 1e7;
  t.rope.partial_rotary_factor = 0.25;
  t.rope.mrope_interleaved = true;
  t.linear_conv_kernel_dim = 4;
  // The real eos id (248044) lies outside a small vocabulary: use the last row.
  t.eos_token_ids = {vocab_size - 1};
  t.dtype = "bfloat16";
  t.mtp_num_hidden_layers = 0;  // no mtp.* tensors are written
  return t;
}

SyntheticSpec synthetic_2b_spec(std::int64_t num_layers, std::int64_t vocab_size) {
  SyntheticSpec spec;
  TextConfig& t = spec.text = common_text(num_layers, vocab_size);
  t.hidden_size = 2048;
  t.intermediate_size = 6144;
  t.num_attention_heads = 8;
  t.num_key_value_heads = 2;
  t.head_dim = 256;
  t.linear_key_head_dim = 128;
  t.linear_value_head_dim = 128;
  t.linear_num_key_heads = 16;
  t.linear_num_value_heads = 16;
  t.rope.mrope_section = {11, 11, 10};
  return spec;
}

SyntheticSpec synthetic_small_spec(std::int64_t num_layers, std::int64_t vocab_size) {
  SyntheticSpec spec;
  TextConfig& t = spec.text = common_text(num_layers, vocab_size);
  t.hidden_size = 64;
  t.intermediate_size = 128;
  t.num_attention_heads = 4;
  t.num_key_value_heads = 2;
  t.head_dim = 32;  // rotary dim 8
  t.linear_key_head_dim = 16;
  t.linear_value_head_dim = 16;
  t.linear_num_key_heads = 2;
  t.linear_num_value_heads = 4;
  t.rope.mrope_section = {2, 1, 1};
  return spec;
}

std::int64_t synthetic_negative_channel(std::int64_t hidden_size, std::uint64_t seed) {
  if (hidden_size <= 0) return -1;
  return static_cast<std::int64_t>(tensor_seed(seed, "negative_channel") % static_cast<std::uint64_t>(hidden_size));
}

std::vector<TensorToWrite> synthetic_tensors(const TextConfig& text, std::uint64_t seed) {
  std::vector<TensorToWrite> out;
  const std::string embed_name = std::string(kWrapperPrefix) + "embed_tokens.weight";
  for (auto& e : expected_text_tensors(text, kWrapperPrefix)) {
    TensorToWrite t{e.name, e.dtype, e.shape, nullptr};
    const Init init = init_for(e.name);
    const StDType dtype = e.dtype;
    const std::uint64_t s = tensor_seed(seed, e.name);
    // The embedding's massive-activation channel: every row -(1/8 + |w|) there
    // (w the value drawn for it, so the other channels do not change).
    const std::int64_t cols = e.shape.empty() ? 1 : e.shape.back();
    const std::int64_t negative = e.name == embed_name ? synthetic_negative_channel(text.hidden_size, seed) : -1;
    t.fill = [init, dtype, s, cols, negative](std::span<std::byte> bytes) {
      Rng rng(s);
      std::int64_t index = 0;
      auto next = [&] {
        float v = sample(init, rng);
        if (index++ % cols == negative) v = -(0.125f + std::fabs(v));
        return v;
      };
      if (dtype == StDType::kF32) {
        for (std::size_t i = 0; i + 4 <= bytes.size(); i += 4) {
          const float v = next();
          std::memcpy(bytes.data() + i, &v, 4);
        }
      } else {
        for (std::size_t i = 0; i + 2 <= bytes.size(); i += 2) {
          const std::uint16_t v = f32_to_bf16(next());
          std::memcpy(bytes.data() + i, &v, 2);  // little-endian host (x86-64, aarch64)
        }
      }
      return Status::ok();
    };
    out.push_back(std::move(t));
  }
  return out;
}

Expected<SyntheticResult> write_synthetic_checkpoint(const std::filesystem::path& dir, const SyntheticSpec& spec,
                                                     std::uint64_t seed) {
  QGPU_RETURN_IF_ERROR(validate_text_config(spec.text, "text_config.").with_context("synthetic checkpoint"));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return sdk::error_at(dir.string(), sdk::ErrorCode::kIoError, "cannot create directory: " + ec.message());
  SyntheticResult result;
  const auto config_path = dir / "config.json";
  {
    std::ofstream out(config_path, std::ios::binary | std::ios::trunc);
    out << wrapper_config_json(spec.text);
    out.close();
    if (!out) return sdk::error_at(config_path.string(), sdk::ErrorCode::kIoError, "write failed");
  }
  result.files.push_back(config_path);
  WriteOptions options;
  options.metadata = {{"format", "pt"}};  // what HF's save_pretrained writes
  options.max_shard_bytes = spec.max_shard_bytes;
  if (spec.progress) {
    options.progress = [&spec](std::uint64_t done, std::uint64_t total) { spec.progress("weights", done, total); };
  }
  auto files = write_checkpoint_tensors(dir, synthetic_tensors(spec.text, seed), options);
  if (!files) return files.error();
  result.files.insert(result.files.end(), files->begin(), files->end());
  if (spec.write_tokenizer) {
    QGPU_RETURN_IF_ERROR(spec.write_tokenizer(dir, spec.text).with_context("writing the tokenizer"));
  }
  for (const auto& f : result.files) result.total_bytes += std::filesystem::file_size(f, ec);
  return result;
}

}  // namespace qgpu::qwen35
