// bench/base: prefill and decode tokens/s of a Qwen3.5-2B-shaped stack on the
// config's tensor backend (LibTorch; random weights), the mat-vec floor, and peak RSS.
//
//   qgpu_bench_base [--dtype f32|bf16] [--layers N] [--prompt T] [--decode N] [--threads N] [--vocab V]
//                   [--config FILE]
//
// The backend is the plugin the config selects (default configs/simt_qwen2b.yaml), loaded as
// qgpu-host loads it, with its dtype and threads set from the command line; every layer runs
// through sdk::decoder_layer, the definition the base plugin's stack runs.
// Without --dtype it runs itself once per dtype (separate processes, so each
// peak RSS is its own). The mat-vec floor is the time of one token's weight
// mat-vecs alone (every Linear of the stack and the lm_head, [1, in] x W^T,
// through the same backend call); decode can approach it but not beat it. The
// memory floor is the time to read those weights once at the machine's read
// bandwidth (a plain read of a 1 GiB buffer on --threads threads).
#include <immintrin.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "qgpu/core/host.h"
#include "qgpu/sdk/sdk.h"

namespace {

using namespace qgpu;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;
}

template <typename T>
T must(sdk::Expected<T> e, const char* what) {
  if (!e) {
    std::fprintf(stderr, "bench_base: %s: %s\n", what, e.error().to_string().c_str());
    std::exit(1);
  }
  return std::move(e).value();
}

struct Args {
  std::string dtype;
  std::string config = QGPU_CONFIG;
  int layers = 4, prompt = 256, decode = 32, threads = 2;
  std::int64_t vocab = 8192;
};

// The sum of n words, read as fast as the core can: 64-byte loads into four independent sums
// where the CPU has AVX-512.
__attribute__((target("avx512f"))) std::uint64_t read_sum_avx512(const std::uint64_t* p, std::size_t n) {
  __m512i s[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int j = 0; j < 4; ++j) s[j] = _mm512_add_epi64(s[j], _mm512_loadu_si512(p + i + 8 * j));
  alignas(64) std::uint64_t lanes[8];  // (not _mm512_reduce_add_epi64: GCC 12 warns inside it)
  _mm512_store_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(s[0], s[1]), _mm512_add_epi64(s[2], s[3])));
  std::uint64_t sum = 0;
  for (const std::uint64_t v : lanes) sum += v;
  for (; i < n; ++i) sum += p[i];
  return sum;
}
std::uint64_t read_sum(const std::uint64_t* p, std::size_t n) {
  if (__builtin_cpu_supports("avx512f")) return read_sum_avx512(p, n);
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum += p[i];
  return sum;
}

// Bytes per second of a plain read of a 1 GiB buffer on `threads` threads (the best of 3).
double read_bandwidth(int threads) {
  std::vector<std::uint64_t> buffer((std::size_t{1} << 30) / sizeof(std::uint64_t), 1);
  std::vector<std::uint64_t> sums(static_cast<std::size_t>(threads), 0);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = Clock::now();
    std::vector<std::thread> workers;
    const std::size_t part = buffer.size() / static_cast<std::size_t>(threads);
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        sums[static_cast<std::size_t>(t)] = read_sum(buffer.data() + static_cast<std::size_t>(t) * part, part);
      });
    for (auto& w : workers) w.join();
    best = std::max(best, static_cast<double>(part * static_cast<std::size_t>(threads) * sizeof(std::uint64_t)) /
                              seconds_since(t0));
  }
  if (sums[0] == 0) std::printf("(read nothing)\n");  // keeps the reads
  return best;
}

// The stack's shapes: Qwen3.5-2B's layers (every fourth a full-attention layer).
struct StackShape {
  std::int64_t hidden = 2048, intermediate = 6144, vocab = 0;
  std::vector<bool> linear;  // per layer: Gated DeltaNet (else attention)
  sdk::DeltaNetShape delta_net{16, 16, 128, 128, 4, 1e-6};
  sdk::AttentionShape attention{8, 2, 256, 64, 1e7, 1e-6};
  double eps = 1e-6;
};

// The decoder stack over uploaded weights: embedding, the layers with their states, the final
// norm and the lm_head (tied to the embedding).
class Stack {
 public:
  Stack(sdk::TensorBackend& backend, StackShape shape, const std::map<std::string, sdk::Handle<sdk::Tensor>>& weights)
      : be_(backend), shape_(std::move(shape)), weights_(weights) {
    for (std::size_t i = 0; i < shape_.linear.size(); ++i) states_.push_back(must(be_.create_state(), "state"));
  }

  sdk::Expected<sdk::Handle<sdk::Tensor>> forward(std::span<const std::int64_t> ids) {
    sdk::Handle<sdk::Tensor> h, x;
    QGPU_ASSIGN_OR_RETURN(h, be_.embed(weight("embed_tokens.weight"), ids));
    for (std::size_t i = 0; i < shape_.linear.size(); ++i) {
      const std::string p = "layers." + std::to_string(i) + ".";
      sdk::LayerState& state = *states_[i];
      auto in_layer = [&](const std::string& suffix) { return &weight(p + suffix); };
      auto mixer = [&](const sdk::Tensor& normed) -> sdk::Expected<sdk::Handle<sdk::Tensor>> {
        if (shape_.linear[i])
          return be_.gated_delta_net(normed, sdk::delta_net_weights(in_layer), shape_.delta_net, state);
        return be_.gated_attention(normed, sdk::attention_weights(in_layer), shape_.attention, state);
      };
      QGPU_ASSIGN_OR_RETURN(h, sdk::decoder_layer(be_, *h, weight(p + "input_layernorm.weight"),
                                                  weight(p + "post_attention_layernorm.weight"),
                                                  sdk::mlp_weights(in_layer), shape_.eps, mixer));
    }
    QGPU_ASSIGN_OR_RETURN(h, be_.rows(*h, h->dim(0) - 1, h->dim(0)));  // the last position's logits
    QGPU_ASSIGN_OR_RETURN(x, be_.rms_norm(*h, weight("norm.weight"), shape_.eps));
    return be_.linear(*x, weight("embed_tokens.weight"));
  }

  void reset() {
    for (auto& state : states_) state->reset();
  }

 private:
  const sdk::Tensor& weight(const std::string& name) const { return *weights_.at(name); }

  sdk::TensorBackend& be_;
  StackShape shape_;
  const std::map<std::string, sdk::Handle<sdk::Tensor>>& weights_;
  std::vector<sdk::Handle<sdk::LayerState>> states_;
};

int run(const Args& args) {
  const auto dtype = must(sdk::parse_dtype(args.dtype), "--dtype");
  core::HostOptions host_options;
  host_options.config_file = args.config;
  std::error_code ec;
  host_options.executable = std::filesystem::read_symlink("/proc/self/exe", ec);
  auto host = must(core::Host::open(host_options), "config");
  auto backend_object =
      must(host->instantiate<sdk::TensorBackend>({{"dtype", args.dtype}, {"threads", std::to_string(args.threads)}}),
           "backend");
  sdk::TensorBackend& backend = *backend_object;
  StackShape cfg;
  cfg.vocab = args.vocab;
  for (int i = 0; i < args.layers; ++i) cfg.linear.push_back(i % 4 != 3);

  // Random weights: a shared pool of N(0,1) values, each tensor a scaled window of it.
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> pool(1 << 22);
  for (auto& v : pool) v = normal(rng);
  std::map<std::string, sdk::Handle<sdk::Tensor>> weights;
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> linears;  // for the floor
  std::size_t cursor = 0;
  std::vector<float> buffer;
  auto add = [&](const std::string& name, std::vector<std::int64_t> shape, float scale, float offset = 0) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    buffer.resize(static_cast<std::size_t>(n));
    for (auto& v : buffer) v = offset + scale * pool[cursor++ % pool.size()];
    cursor += 12345;
    sdk::TensorView view;
    view.data = buffer.data();
    view.rank = static_cast<std::int32_t>(shape.size());
    for (std::size_t i = 0; i < shape.size(); ++i) view.shape[i] = shape[i];
    weights.emplace(name, must(backend.upload(view), "upload"));
    if (shape.size() == 2 && name.find("embed") == std::string::npos) linears.emplace_back(name, shape);
  };
  const std::int64_t H = cfg.hidden, I = cfg.intermediate, K = 16 * 128, V = 16 * 128;
  auto lin = [&](const std::string& name, std::int64_t out, std::int64_t in) {
    add(name, {out, in}, 1.0f / std::sqrt(static_cast<float>(in)));
  };
  add("embed_tokens.weight", {cfg.vocab, H}, 1.0f);
  add("norm.weight", {H}, 0.1f);
  for (int i = 0; i < args.layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    if (cfg.linear[static_cast<std::size_t>(i)]) {
      const std::string a = p + "linear_attn.";
      lin(a + "in_proj_qkv.weight", 2 * K + V, H);
      lin(a + "in_proj_z.weight", V, H);
      lin(a + "in_proj_b.weight", 16, H);
      lin(a + "in_proj_a.weight", 16, H);
      add(a + "conv1d.weight", {2 * K + V, 1, 4}, 0.5f);
      add(a + "dt_bias", {16}, 0.5f);
      add(a + "A_log", {16}, 0.5f, 1.0f);
      add(a + "norm.weight", {128}, 0.1f, 1.0f);
      lin(a + "out_proj.weight", H, V);
    } else {
      const std::string a = p + "self_attn.";
      lin(a + "q_proj.weight", 2 * 8 * 256, H);
      lin(a + "k_proj.weight", 2 * 256, H);
      lin(a + "v_proj.weight", 2 * 256, H);
      lin(a + "o_proj.weight", H, 8 * 256);
      add(a + "q_norm.weight", {256}, 0.1f);
      add(a + "k_norm.weight", {256}, 0.1f);
    }
    lin(p + "mlp.gate_proj.weight", I, H);
    lin(p + "mlp.up_proj.weight", I, H);
    lin(p + "mlp.down_proj.weight", H, I);
    add(p + "input_layernorm.weight", {H}, 0.1f);
    add(p + "post_attention_layernorm.weight", {H}, 0.1f);
  }
  buffer = {};
  Stack stack(backend, cfg, weights);

  std::vector<std::int64_t> prompt(static_cast<std::size_t>(args.prompt));
  for (auto& id : prompt) id = static_cast<std::int64_t>(rng() % cfg.vocab);
  std::vector<float> logit(static_cast<std::size_t>(cfg.vocab));
  auto view = must(sdk::make_view(logit.data(), sdk::DType::kF32, {1, cfg.vocab}), "view");

  // Warm-up (allocator, oneDNN primitives), then the measured runs.
  (void)must(stack.forward(std::span(prompt.data(), std::min<std::size_t>(8, prompt.size()))), "warm-up");
  stack.reset();
  auto t0 = Clock::now();
  auto last = must(stack.forward(prompt), "prefill");
  if (!backend.download(*last, view)) return 1;
  const double prefill_s = seconds_since(t0);

  std::int64_t next = 0;
  t0 = Clock::now();
  for (int s = 0; s < args.decode; ++s) {
    auto l = must(stack.forward(std::span(&next, 1)), "decode");
    if (!backend.download(*l, view)) return 1;
    next = std::max_element(logit.begin(), logit.end()) - logit.begin();
  }
  const double decode_s = seconds_since(t0);

  // Mat-vec floor: one token through every Linear of the stack (lm_head included).
  std::map<std::int64_t, sdk::Handle<sdk::Tensor>> inputs;
  for (const auto& [name, shape] : linears) {
    if (!inputs.count(shape[1])) {
      std::vector<float> x(static_cast<std::size_t>(shape[1]), 0.01f);
      inputs.emplace(shape[1], must(backend.upload(*sdk::make_view(x.data(), sdk::DType::kF32, {1, shape[1]})), "x"));
    }
  }
  auto lm_head = weights.find("embed_tokens.weight");
  auto floor_once = [&] {
    for (const auto& [name, shape] : linears) (void)must(backend.linear(*inputs[shape[1]], *weights[name]), "linear");
    (void)must(backend.linear(*inputs[H], *lm_head->second), "lm_head");
  };
  floor_once();
  const int reps = 10;
  t0 = Clock::now();
  for (int r = 0; r < reps; ++r) floor_once();
  const double floor_s = seconds_since(t0) / reps;

  // Memory floor: the same weights read once at the read bandwidth.
  double weight_bytes = 0;
  const double element = dtype == sdk::DType::kBF16 ? 2 : 4;
  for (const auto& [name, shape] : linears) weight_bytes += element * static_cast<double>(shape[0] * shape[1]);
  weight_bytes += element * static_cast<double>(cfg.vocab * H);
  const double bandwidth = read_bandwidth(args.threads);
  const double memory_floor_s = weight_bytes / bandwidth;

  const double decode_tok_s = args.decode / decode_s;
  std::printf(
      "%-4s layers %d (hidden 2048, mlp 6144, DeltaNet 16+16x128, attention 8q/2kv x256), vocab %lld, threads %d\n"
      "     prefill %d tokens: %.2f s = %.1f tokens/s\n"
      "     decode %d tokens: %.3f s = %.2f tokens/s (%.1f ms/token)\n"
      "     mat-vec floor: %.1f ms/token = %.2f tokens/s; decode reaches %.0f%% of it\n"
      "     memory floor: %.0f MB of weights at %.1f GB/s (a plain read on %d threads) = %.1f ms/token; decode "
      "reaches %.0f%% of it\n"
      "     peak RSS %.0f MiB\n",
      args.dtype.c_str(), args.layers, static_cast<long long>(cfg.vocab), args.threads, args.prompt, prefill_s,
      args.prompt / prefill_s, args.decode, decode_s, decode_tok_s, 1e3 * decode_s / args.decode, 1e3 * floor_s,
      1.0 / floor_s, 100.0 * floor_s / (decode_s / args.decode), weight_bytes / 1e6, bandwidth / 1e9, args.threads,
      1e3 * memory_floor_s, 100.0 * memory_floor_s / (decode_s / args.decode), peak_rss_mib());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_base: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--dtype")
      args.dtype = value();
    else if (a == "--layers")
      args.layers = std::stoi(value());
    else if (a == "--prompt")
      args.prompt = std::stoi(value());
    else if (a == "--decode")
      args.decode = std::stoi(value());
    else if (a == "--threads")
      args.threads = std::stoi(value());
    else if (a == "--vocab")
      args.vocab = std::stoll(value());
    else if (a == "--config")
      args.config = value();
    else {
      std::fprintf(stderr, "bench_base: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  if (args.layers < 1 || args.prompt < 1 || args.decode < 1 || args.threads < 1 || args.vocab < 1) {
    std::fprintf(stderr, "bench_base: --layers, --prompt, --decode, --threads and --vocab must be positive\n");
    return 2;
  }
  if (!args.dtype.empty()) return run(args);
  int rc = 0;
  for (const char* dtype : {"f32", "bf16"}) {
    std::string cmd = std::string("'") + argv[0] + "' --dtype " + dtype;
    for (int i = 1; i < argc; ++i) cmd += std::string(" '") + argv[i] + "'";
    std::fflush(stdout);
    rc |= std::system(cmd.c_str());
  }
  return rc == 0 ? 0 : 1;
}
