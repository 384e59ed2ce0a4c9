// The merged model (core/src/merged_*.cpp) on the real plugins: the
// synthetic Qwen3.5-2B-shaped base (4 layers, 4,096 rows; the default
// `checkpoint: synthetic`) on backend_torch, with the machine's fetch/decode
// stage compiled at the base's shapes with a mute channel, in f32 and bf16.
//
//   Merge.TextOnly*        text-only sequences: the merged model's logits equal
//                          the base's bit for bit (prefill and decode), KL = 0.
//   Merge.CircuitTokens*   text P, ROM records, text M, EXEC records, text S:
//                          after the circuit layers every token's residual equals
//                          weights::ReferenceModel's (over the merged circuit
//                          layers, fed the same tokens) bit for bit, the decoded
//                          fields are isa.h's decode(), text rows are untouched;
//                          KL(base || merged) after the circuit tokens is printed
//                          (measured, not asserted), exactly 0 before them.
//   Merge.TextInTheConvWindow*  the same without the merge's conv-window mute (measured).
//
// The small synthetic base (hidden 64) cannot hold any circuit: the norm
// scheme alone needs 256 units of sum of squares (docs/CIRCUITS.md §1), so the
// 2B-shaped default is used. Expected values come from the base's own forward,
// the reference layer math and the ISA, never from the merged model.
#include "qgpu/core/merged_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fetch_decode.h"
#include "isa.h"
#include "protocol.h"
#include "qgpu/core/plugin_registry.h"
#include "qgpu/weights/compile.h"
#include "qgpu/weights/reference.h"

namespace qgpu::core {
namespace {

namespace w = qgpu::weights;
using simt::Record;

constexpr int kSlots = 5;  // block_instructions 4 + the terminator

// Three prompts of at least 64 tokens each (the synthetic tokenizer's BPE).
const char* const kPrompts[] = {
    "The quick brown fox jumps over the lazy dog while the machine inside the model waits for its next "
    "instruction; every layer adds nothing to a text token, so the base continues exactly as before.",
    "def dot(a, b):\n    total = 0\n    for x, y in zip(a, b):\n        total += x * y\n    return total\n\n"
    "print(dot([1, 2, 3], [4, 5, 6]))  # 32\n",
    "Gated DeltaNet layers keep a matrix of state per head; a key selects a row, beta decides whether it "
    "is written, and z gates what is read. Forty-five layers of that make a small GPU.",
};
constexpr std::int64_t kPromptTokens = 72;

struct Loaded {
  std::shared_ptr<sdk::TensorBackend> backend;
  std::shared_ptr<sdk::BaseModel> base;
  sdk::ModelInfo info;
  ~Loaded() { base.reset(); }  // the base's tensors belong to the backend
};

PluginRegistry& registry() {
  static PluginRegistry* r = [] {
    auto* reg = new PluginRegistry();
    auto s = reg->scan_directory(QGPU_PLUGIN_DIR);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    return reg;
  }();
  return *r;
}

// The default synthetic base on backend_torch in `dtype` ("f32" or "bf16"); null (with a reason) when unavailable.
std::unique_ptr<Loaded> load(const std::string& dtype, std::string& why) {
  const PluginInfo* be = registry().find(QGPU_PLUGIN_TENSOR_BACKEND, "backend_torch");
  const PluginInfo* bm = registry().find(QGPU_PLUGIN_BASE_MODEL, "base_qwen35");
  if (be == nullptr || bm == nullptr) {
    why = "backend_torch or base_qwen35 is not built (QGPU_WITH_TORCH=OFF?)";
    return nullptr;
  }
  auto l = std::make_unique<Loaded>();
  auto backend =
      registry().create<sdk::TensorBackend>(*be, sdk::Options({{"device", "cpu"}, {"dtype", dtype}, {"threads", "1"}}));
  if (!backend) {
    why = backend.error().to_string();
    return nullptr;
  }
  l->backend = *backend;
  auto base =
      registry().create<sdk::BaseModel>(*bm, sdk::Options({{"checkpoint", "synthetic"}, {"enable_thinking", "false"}}));
  if (!base) {
    why = base.error().to_string();
    return nullptr;
  }
  l->base = *base;
  auto info = l->base->load(*l->backend);
  if (!info) {
    why = info.error().to_string();
    return nullptr;
  }
  l->info = *info;
  return l;
}

// fetch/decode compiled at the base's shapes, with and without the mute channel.
struct FetchDecode {
  w::Circuit c{"simt.fetch_decode"};
  simt::circuit::FetchDecode fd;
  w::CompiledCircuit cc;
  bool ok = false;
  FetchDecode(const sdk::LayerShapes& shapes, bool mute) {
    auto f = simt::circuit::build_fetch_decode(c, kSlots);
    EXPECT_TRUE(f.has_value()) << f.status().to_string();
    if (!f) return;
    fd = std::move(*f);
    w::Target t;
    t.shapes = shapes;
    t.mute_channel = mute;
    auto r = w::compile(c, t);
    EXPECT_TRUE(r.has_value()) << r.status().to_string();
    if (!r) return;
    cc = std::move(*r);
    ok = true;
  }
  // The embedding row of a machine token id (records.h: a function of the id alone).
  std::vector<float> row(std::int64_t id) const {
    auto in = simt::circuit::token_inputs(fd.records, id);
    EXPECT_TRUE(in.has_value()) << in.status().to_string();
    return w::embed(c, cc.allocation, in ? *in : simt::circuit::TokenInputs{});
  }
};

// The circuit tokens: ROM records of `blocks` blocks (random valid instructions
// and random words; a header and two DATA tokens each), then EXEC records
// reading them (every block twice). `ids` are the machine's token ids in order.
struct CircuitTokens {
  std::vector<Record> records;
  std::vector<std::uint64_t> rows;  // [block * kSlots + slot]
  std::vector<std::int64_t> ids;
  std::vector<std::int64_t> record_of;  // per token: its record
  std::int64_t rom_tokens = 0;
};

CircuitTokens circuit_tokens(const simt::circuit::Records& rec, int blocks, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  CircuitTokens t;
  for (int i = 0; i < blocks * kSlots; ++i) {
    if (i % 3 == 2) {  // any 64-bit word: invalid opcodes and kinds decode to 0 / valid = 0
      t.rows.push_back(rng());
      continue;
    }
    simt::Instr in;
    in.op = static_cast<simt::Op>(rng() % simt::kOpCount);
    in.ak = static_cast<simt::Kind>(rng() % 3);
    in.bk = static_cast<simt::Kind>(rng() % 3);
    in.d = rng() % 16;
    in.a = in.ak == simt::Kind::kSpecial ? rng() % static_cast<int>(simt::Special::kCount) : rng() % 16;
    in.b = in.bk == simt::Kind::kSpecial ? rng() % static_cast<int>(simt::Special::kCount) : rng() % 16;
    in.c = rng() % 16;
    in.flags = rng() % 64;
    in.imm = static_cast<std::uint32_t>(rng());
    t.rows.push_back(simt::encode(in));
  }
  for (int b = 0; b < blocks; ++b)
    for (int s = 0; s < kSlots; ++s)
      for (const Record& r : simt::rom_records(b, s, t.rows[static_cast<std::size_t>(b * kSlots + s)]))
        t.records.push_back(r);
  const std::size_t rom_records = t.records.size();
  for (int pass = 0; pass < 2; ++pass)
    for (int b = 0; b < blocks; ++b)
      t.records.push_back(simt::exec_record(b, rng() % simt::kProtoWarps, 1 + rng() % 15));
  for (std::size_t i = 0; i < t.records.size(); ++i) {
    auto ids = simt::circuit::record_token_ids(rec, t.records[i]);
    EXPECT_TRUE(ids.has_value()) << ids.status().to_string();
    if (!ids) continue;
    for (std::int64_t id : *ids) {
      t.ids.push_back(id);
      t.record_of.push_back(static_cast<std::int64_t>(i));
    }
    if (i + 1 == rom_records) t.rom_tokens = static_cast<std::int64_t>(t.ids.size());
  }
  return t;
}

std::vector<std::int64_t> prompt_ids(sdk::BaseModel& base, const char* text, std::int64_t n) {
  auto ids = base.encode(text);
  EXPECT_TRUE(ids.has_value()) << ids.status().to_string();
  std::vector<std::int64_t> out = ids ? *ids : std::vector<std::int64_t>{};
  EXPECT_GE(static_cast<std::int64_t>(out.size()), n) << "prompt too short: " << text;
  if (static_cast<std::int64_t>(out.size()) > n) out.resize(static_cast<std::size_t>(n));
  return out;
}

bool bitwise_equal(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i])) return false;
  return true;
}

std::vector<float> download(sdk::TensorBackend& be, const sdk::Tensor& t) {
  std::vector<float> out(static_cast<std::size_t>(t.dim(0) * t.dim(1)));
  auto v = sdk::make_view(out.data(), sdk::DType::kF32, {t.dim(0), t.dim(1)});
  EXPECT_TRUE(v.has_value());
  auto s = be.download(t, *v);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return out;
}

// One merged model per dtype: the base, fetch/decode, record rows for the
// circuit tokens (one row per distinct machine token id, as a compact table:
// merged id = base rows + index).
struct Setup {
  std::unique_ptr<Loaded> loaded;
  std::unique_ptr<FetchDecode> circuit;
  CircuitTokens tokens;
  std::vector<std::int64_t> merged_ids;  // tokens.ids as merged-model ids
  std::unique_ptr<RecordTables> tables;  // the record rows: outlive the merge
  std::unique_ptr<MergedModel> merged;
  std::string skip;
  ~Setup() {
    merged.reset();
    loaded.reset();
  }
};

std::unique_ptr<Setup> setup(const std::string& dtype, bool mute_window = true, bool sparse = false) {
  auto s = std::make_unique<Setup>();
  s->loaded = load(dtype, s->skip);
  if (!s->loaded) return s;
  s->circuit = std::make_unique<FetchDecode>(s->loaded->info.shapes, /*mute=*/true);
  if (!s->circuit->ok) return s;
  s->tokens = circuit_tokens(s->circuit->fd.records, 8, 11);
  MergeInputs in;
  in.circuit = &s->circuit->cc;
  in.mute_window = mute_window;
  in.sparse_circuit = sparse;
  // No final-norm compensation: the stand-in record head stays bf16-exact, so the sparse and
  // dense paths' record logits differ only by the backend's rounding (compensation: Merge.Choice*).
  in.profile_base = false;
  s->tables = std::make_unique<RecordTables>(s->loaded->info.shapes.hidden_size);
  std::map<std::int64_t, std::int64_t> index;
  for (std::int64_t id : s->tokens.ids) {
    auto [it, fresh] = index.emplace(id, static_cast<std::int64_t>(index.size()));
    if (fresh) s->tables->add(s->circuit->row(id));
    s->merged_ids.push_back(s->loaded->info.vocab_size + it->second);
  }
  // A stand-in unembedding (this circuit has no choice fields): the record rows themselves (tied).
  s->tables->tie();
  in.records = s->tables->rows();
  auto m = MergedModel::create(*s->loaded->base, s->loaded->info, *s->loaded->backend, in);
  EXPECT_TRUE(m.has_value()) << m.status().to_string();
  if (m) s->merged = std::move(*m);
  return s;
}

// A table of `rows` rows of H channels: N(0, 1) noise, and (anisotropic) on channels
// 3, 7, 11 and 19 a shared offset -0.6 kept only where their sum is below -1, so that
// each of those channels has rows of both signs but the four together separate.
std::vector<float> table_of(std::int64_t rows, std::int64_t H, bool anisotropic, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> t(static_cast<std::size_t>(rows * H));
  const int shared[] = {3, 7, 11, 19};
  for (std::int64_t r = 0; r < rows; ++r) {
    float* x = t.data() + r * H;
    for (std::int64_t c = 0; c < H; ++c) x[c] = normal(rng);
    if (!anisotropic) continue;
    for (;;) {
      float sum = 0;
      for (int c : shared) sum += x[c] = -0.6f + normal(rng);
      if (sum < -1) break;
    }
  }
  return t;
}

// Rows that have one strict sign on channel c.
bool clean_channel(const std::vector<float>& t, std::int64_t rows, std::int64_t H, std::int64_t c) {
  bool neg = true, pos = true;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float v = t[static_cast<std::size_t>(r * H + c)];
    neg = neg && v < 0;
    pos = pos && v > 0;
  }
  return neg || pos;
}

// A compiled circuit and its record tables handed over as a machine hands over its circuit
// (sdk::MachineCircuit), for MergeHost::merge.
class TableCircuit final : public sdk::MachineCircuit {
 public:
  TableCircuit(const weights::CompiledCircuit& cc, const RecordTables& tables)
      : cc_(cc), tables_(tables), rows_(tables.rows()) {}
  const weights::CompiledCircuit& compiled() const override { return cc_; }
  std::int64_t records() const override { return rows_.records; }
  std::int64_t first_id() const override { return 0; }
  sdk::Expected<std::vector<float>> embedding(std::int64_t record) const override { return rows_.embedding(record); }
  const weights::SparseMatrix& unembedding() const override { return tables_.unembedding; }
  std::string summary() const override { return "record tables"; }
  std::vector<std::pair<std::string, double>> timings() const override { return {}; }
  std::vector<std::pair<std::string, std::int64_t>> stats() const override { return {}; }

 private:
  const weights::CompiledCircuit& cc_;
  const RecordTables& tables_;
  RecordRows rows_;
};


// d·x / rms(x) of a row, in double (the test's own arithmetic).
double normalized_dot(const std::vector<float>& t, std::int64_t r, std::int64_t H, const MuteDirection& d) {
  double dot = 0, sq = 0;
  for (std::size_t i = 0; i < d.channels.size(); ++i)
    dot += d.weights[i] * t[static_cast<std::size_t>(r * H + d.channels[i])];
  for (std::int64_t c = 0; c < H; ++c) sq += std::pow(t[static_cast<std::size_t>(r * H + c)], 2);
  return dot / std::sqrt(sq / static_cast<double>(H));
}

TEST(Silence, FindsADirectionWhereNoChannelIsClean) {
  const std::int64_t H = 32, rows = 3000;
  const std::vector<float> t = table_of(rows, H, /*anisotropic=*/true, 7);
  for (std::int64_t c = 0; c < H; ++c) ASSERT_FALSE(clean_channel(t, rows, H, c)) << "channel " << c;
  MuteBounds bounds;
  bounds.circuit_terms = 1e5;
  bounds.terms = H;
  const SilenceCertificate one = find_mute_direction(t, rows, H, 1, bounds);
  EXPECT_FALSE(one.exact()) << one.to_string();
  EXPECT_GT(one.leaking, 0);
  const SilenceCertificate c = find_mute_direction(t, rows, H, 8, bounds);
  ASSERT_TRUE(c.exact()) << c.to_string();
  EXPECT_EQ(c.rows, rows);
  EXPECT_NE(c.to_string().find("exact (certified on 3,000 text rows;"), std::string::npos) << c.to_string();
  // Independently: every row strictly on the negative side, by more than the margin the gain needs.
  const MuteDirection& d = c.direction;
  ASSERT_FALSE(d.channels.empty());
  for (std::size_t i = 0; i < d.weights.size(); ++i) {
    EXPECT_EQ(static_cast<double>(w::round_bf16(static_cast<float>(d.weights[i]))), d.weights[i]);
    EXPECT_LE(std::abs(d.weights[i]), 1.0);
  }
  for (std::int64_t r = 0; r < rows; ++r) EXPECT_LT(normalized_dot(t, r, H, d), -c.needed_margin) << "row " << r;
  // ... and the gain takes each of them past the saturation with the headroom, in exact arithmetic.
  for (std::int64_t r = 0; r < rows; ++r)
    EXPECT_GE(c.direction.gain * -normalized_dot(t, r, H, d), kMuteHeadroom * (kMuteSaturation + bounds.circuit_terms))
        << "row " << r;
  EXPECT_LE(c.direction.gain, kMuteGainMax);
  int e = 0;
  EXPECT_EQ(std::frexp(c.direction.gain, &e), 0.5) << "the gain is a power of two";
}

TEST(Silence, IsotropicTablesLeakAndSayWhichRows) {
  const std::int64_t H = 32, rows = 2000;
  std::vector<float> t = table_of(rows, H, /*anisotropic=*/false, 9);
  std::fill_n(t.begin() + 5 * H, H, 0.0f);  // two all-zero rows: silent whatever the direction
  std::fill_n(t.begin() + 6 * H, H, 0.0f);
  MuteBounds bounds;
  bounds.terms = H;
  const SilenceCertificate c = find_mute_direction(t, rows, H, 8, bounds);
  EXPECT_FALSE(c.exact());
  EXPECT_EQ(c.zero_rows, 2);
  EXPECT_LE(c.direction.gain, kMuteGainLeaking);
  std::int64_t wrong_side = 0, close = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (r == 5 || r == 6) continue;
    const double v = normalized_dot(t, r, H, c.direction);
    wrong_side += v >= 0 ? 1 : 0;
    close += v > -c.needed_margin - 1e-2 ? 1 : 0;
  }
  EXPECT_GT(wrong_side, rows / 10);  // nothing separates an isotropic table
  EXPECT_GE(c.leaking, wrong_side);
  EXPECT_LE(c.leaking, close);
  ASSERT_FALSE(c.worst.empty());
  for (std::size_t i = 0; i < c.worst.size(); ++i) {
    EXPECT_NE(c.worst[i].row, 5);
    EXPECT_GE(normalized_dot(t, c.worst[i].row, H, c.direction), -c.needed_margin - 1e-2);
    if (i > 0) {
      EXPECT_LE(c.worst[i - 1].margin, c.worst[i].margin);
    }
  }
  EXPECT_EQ(c.to_string().rfind("approximate: ", 0), 0u) << c.to_string();
}

TEST(Silence, TheRoundingBoundDecidesCloseRows) {
  // d = (1, 1): row 0 is on the negative side by 1e-3 of terms of size 0.5, row 1 by far.
  const std::int64_t H = 4;
  const std::vector<float> t = {0.5f, -0.501f, 0.0f, 0.0f, -1.0f, 0.2f, 0.0f, 0.0f};
  MuteDirection d;
  d.channels = {0, 1};
  d.weights = {1.0, 1.0};
  MuteBounds bounds;
  bounds.terms = 2048;
  bounds.dtype = sdk::DType::kF32;
  const SilenceCertificate f32 = certify(t, 2, H, d, bounds);  // products and sums in fp32: certified
  EXPECT_TRUE(f32.exact()) << f32.to_string();
  bounds.dtype = sdk::DType::kBF16;  // the normalized residual rounded to 8 bits: -0.501 may read as -0.5
  const SilenceCertificate bf16 = certify(t, 2, H, d, bounds);
  EXPECT_EQ(bf16.leaking, 1) << bf16.to_string();
  ASSERT_EQ(bf16.worst.size(), 1u);
  EXPECT_EQ(bf16.worst[0].row, 0);
  // A fixed gain too small for the margin: nothing is certified.
  d.gain = 1;
  bounds.dtype = sdk::DType::kF32;
  EXPECT_EQ(certify(t, 2, H, d, bounds).leaking, 2);
}

TEST(Merge, RefusesCircuitsItCannotSilence) {
  std::string why;
  auto l = load("f32", why);
  if (!l) GTEST_SKIP() << why;
  FetchDecode unmuted(l->info.shapes, /*mute=*/false);
  ASSERT_TRUE(unmuted.ok);
  MergeInputs in;
  in.circuit = &unmuted.cc;
  auto m = MergedModel::create(*l->base, l->info, *l->backend, in);
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.status().message(),
            "merge: the circuit was compiled without a mute channel (set weights::Target::mute_channel)");

  FetchDecode muted(l->info.shapes, /*mute=*/true);
  ASSERT_TRUE(muted.ok);
  in.circuit = &muted.cc;
  const std::int64_t H = l->info.shapes.hidden_size;
  const int mute = muted.cc.allocation.mute;
  // Record rows are checked as the host asks for them (here: all at merge, the dense path).
  in.records.records = 2;
  in.records.embedding = [&](std::int64_t r) -> sdk::Expected<std::vector<float>> {
    std::vector<float> row(static_cast<std::size_t>(H), 0.0f);
    if (r == 1) row[static_cast<std::size_t>(mute)] = 1.0f;
    return row;
  };
  m = MergedModel::create(*l->base, l->info, *l->backend, in);
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.status().message(),
            "merge: record row 1 is 1 on the circuit's mute channel " + std::to_string(mute) + " (must be exactly 0)");
  ASSERT_FALSE(muted.cc.allocation.free.empty());
  const int free_channel = muted.cc.allocation.free.back();
  in.records.embedding = [&](std::int64_t r) -> sdk::Expected<std::vector<float>> {
    std::vector<float> row(static_cast<std::size_t>(H), 0.0f);
    if (r == 1) row[static_cast<std::size_t>(free_channel)] = -2.0f;
    return row;
  };
  m = MergedModel::create(*l->base, l->info, *l->backend, in);
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.status().message(), "merge: record row 1 is -2 on the circuit's free channel " +
                                      std::to_string(free_channel) + " (must be exactly 0)");
  in.records.embedding = [&](std::int64_t r) -> sdk::Expected<std::vector<float>> {
    return std::vector<float>(static_cast<std::size_t>(r == 1 ? H - 1 : H), 0.0f);
  };
  m = MergedModel::create(*l->base, l->info, *l->backend, in);
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.status().message(), "merge: record row 1 has 2047 values, the base's hidden size is 2048");
  in.records.embedding = [&](std::int64_t) -> sdk::Expected<std::vector<float>> {
    return sdk::invalid_argument("no such record");
  };
  m = MergedModel::create(*l->base, l->info, *l->backend, in);
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.status().message(), "the embedding row of record 0: no such record");
  in.records.embedding = nullptr;
  m = MergedModel::create(*l->base, l->info, *l->backend, in);
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.status().message(), "merge: 2 record rows and no embedding function");
  in.records.records = 0;
  weights::SparseMatrix narrow_head;
  narrow_head.rows = 1;
  narrow_head.cols = H - 1;
  narrow_head.row_ptr = {0, 0};
  in.records.unembedding = &narrow_head;
  m = MergedModel::create(*l->base, l->info, *l->backend, in);
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.status().message(), "merge: the record unembedding has 2047 columns, the base's hidden size is 2048");
  weights::SparseMatrix inexact_head = narrow_head;
  inexact_head.cols = H;
  inexact_head.row_ptr = {0, 1};
  inexact_head.col = {3};
  inexact_head.val = {0.1};
  in.records.unembedding = &inexact_head;
  m = MergedModel::create(*l->base, l->info, *l->backend, in);
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.status().message().rfind("merge: the record unembedding row 0 holds 0.1", 0), 0u) << m.status().message();
  in.records.unembedding = nullptr;

  sdk::LayerShapes other = l->info.shapes;
  other.intermediate_size = 4096;
  FetchDecode narrow(other, true);
  ASSERT_TRUE(narrow.ok);
  in = {};
  in.circuit = &narrow.cc;
  m = MergedModel::create(*l->base, l->info, *l->backend, in);
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.status().message(), "merge: the circuit was compiled for MLP width 4096, the base has 6144");
}

// (a) Text only: the merged logits over the base's rows equal the base's bit for bit.
void text_only(const char* dtype) {
  {
    auto s = setup(dtype);
    if (!s->loaded) GTEST_SKIP() << s->skip;
    ASSERT_TRUE(s->merged) << dtype;
    MergedModel& m = *s->merged;
    sdk::BaseModel& base = *s->loaded->base;
    std::printf("[ %s ] silence: %s\n[ %s ] choice: %s\n", dtype, m.silence().to_string().c_str(), dtype,
                m.placement().to_string().c_str());
    const MergeCost& cost = m.cost();
    std::printf(
        "[ %s ] merge: %lld circuit layers, %lld record rows, %lld unembedding rows, %.1f MB uploaded; "
        "search %.2f s, profile %.2f s, upload %.2f s\n",
        dtype, static_cast<long long>(cost.circuit_layers), static_cast<long long>(cost.records),
        static_cast<long long>(cost.unembedding_rows), static_cast<double>(cost.uploaded_bytes) / 1e6,
        cost.search_seconds, cost.profile_seconds, cost.upload_seconds);
    EXPECT_TRUE(m.silence().exact()) << m.silence().to_string();
    double kl_total = 0;
    std::int64_t positions = 0;
    for (const char* prompt : kPrompts) {
      const auto ids = prompt_ids(base, prompt, kPromptTokens);
      auto rep = measure_silence(m, base, *s->loaded->backend, ids);
      ASSERT_TRUE(rep.has_value()) << rep.status().to_string();
      EXPECT_EQ(rep->before, static_cast<std::int64_t>(ids.size()));
      EXPECT_EQ(rep->before_identical, rep->before) << dtype << ": text logits differ from the base's";
      EXPECT_EQ(rep->kl_before_max, 0.0);
      for (double k : rep->kl) kl_total += k;
      positions += rep->before;
      std::printf(
          "[ %s ] %lld text tokens: %lld of %lld logit rows identical, max KL(base||merged) = %g; "
          "unmasked record mass <= %.3g; merged %.2f s, base %.2f s\n",
          dtype, static_cast<long long>(ids.size()), static_cast<long long>(rep->before_identical),
          static_cast<long long>(rep->before), rep->kl_before_max, rep->record_mass_max, rep->merged_seconds,
          rep->base_seconds);

      // The public forward(), prefill then greedy decode one token at a time, against the merged model's.
      base.reset();
      ASSERT_TRUE(m.reset().is_ok());
      auto b = base.forward(ids);
      ASSERT_TRUE(b.has_value()) << b.status().to_string();
      // base.forward and the merged model share the base's sequence state: one after the other.
      ASSERT_TRUE(m.reset().is_ok());
      auto mf = m.forward(ids);
      ASSERT_TRUE(mf.has_value()) << mf.status().to_string();
      EXPECT_TRUE(bitwise_equal(*b, std::span<const float>(mf->logits).first(b->size()))) << dtype << " prefill";
      // Decode: the merged model alone (it owns the base's state now); the base replays the whole sequence.
      std::vector<std::int64_t> seq = ids;
      for (int step = 0; step < 3; ++step) {
        const auto& last = mf->logits;
        std::int64_t next = 0;
        for (std::int64_t j = 1; j < m.base_rows(); ++j)
          if (last[static_cast<std::size_t>(j)] > last[static_cast<std::size_t>(next)]) next = j;
        seq.push_back(next);
        mf = m.forward(std::span<const std::int64_t>(&seq.back(), 1));
        ASSERT_TRUE(mf.has_value()) << mf.status().to_string();
        ++positions;
      }
      // The base decoding the same tokens one by one from its own prefill.
      ASSERT_TRUE(m.reset().is_ok());
      auto bb = base.forward(ids);
      ASSERT_TRUE(bb.has_value());
      for (std::size_t j = ids.size(); j < seq.size(); ++j) {
        bb = base.forward(std::span<const std::int64_t>(&seq[j], 1));
        ASSERT_TRUE(bb.has_value());
      }
      EXPECT_TRUE(bitwise_equal(*bb, std::span<const float>(mf->logits).first(bb->size())))
          << dtype << " after 3 decode steps";
      kl_total += kl_divergence(*bb, mf->logits, m.base_rows());
    }
    std::printf("[ %s ] text only: KL(base||merged) summed over %lld positions = %g\n", dtype,
                static_cast<long long>(positions), kl_total);
    EXPECT_EQ(kl_total, 0.0);
  }
}

TEST(Merge, TextOnlyLogitsEqualTheBaseBitForBitF32) {
  text_only("f32");
}
TEST(Merge, TextOnlyLogitsEqualTheBaseBitForBitBf16) {
  text_only("bf16");
}

// (b) + (c): circuit tokens between text. The merged model runs P + ROM + M + EXEC + S
// (P, M, S text); the reference math runs the circuit tokens alone.
struct CircuitCase {
  std::int64_t circuit_tokens = 0, text_tokens = 0;
  std::int64_t differ = 0;                           // circuit tokens whose residual differs from ReferenceModel's
  std::int64_t differ_first = -1;                    // the first such token (index among circuit tokens)
  std::int64_t wrong = 0, inexact = 0, checked = 0;  // decoded fields against isa.h's decode()
  std::int64_t text_changed = 0;                     // text rows the circuit layers changed
  std::int64_t text_reference_changed = 0;           // text rows the reference math changed
  double mlp_min = INFINITY, gdn_min = INFINITY;
  SilenceReport silence;
  std::size_t prefix = 0, middle = 0, suffix = 0;
};

CircuitCase run_circuit_case(Setup& s, const char* dtype) {
  CircuitCase cc;
  MergedModel& m = *s.merged;
  sdk::BaseModel& base = *s.loaded->base;
  const FetchDecode& k = *s.circuit;
  const CircuitTokens& ct = s.tokens;
  const std::int64_t H = s.loaded->info.shapes.hidden_size;
  const auto prefix = prompt_ids(base, kPrompts[0], 16);
  const auto middle = prompt_ids(base, kPrompts[1], 12);
  const auto suffix = prompt_ids(base, kPrompts[2], 64);
  cc.prefix = prefix.size(), cc.middle = middle.size(), cc.suffix = suffix.size();
  std::vector<std::int64_t> seq = prefix;
  std::vector<std::int64_t> pos;  // position in seq of circuit token i
  auto add_tokens = [&](std::int64_t from, std::int64_t to) {
    for (std::int64_t i = from; i < to; ++i) {
      pos.push_back(static_cast<std::int64_t>(seq.size()));
      seq.push_back(s.merged_ids[static_cast<std::size_t>(i)]);
    }
  };
  add_tokens(0, ct.rom_tokens);
  seq.insert(seq.end(), middle.begin(), middle.end());
  add_tokens(ct.rom_tokens, static_cast<std::int64_t>(ct.ids.size()));
  seq.insert(seq.end(), suffix.begin(), suffix.end());

  MergedForward out;
  auto rep = measure_silence(m, base, *s.loaded->backend, seq, &out, /*circuit_residual=*/true);
  EXPECT_TRUE(rep.has_value()) << rep.status().to_string();
  if (!rep) return cc;
  cc.silence = *rep;

  // Every token of the sequence through the reference math over the merged model's own circuit
  // layers (circuit channel order): text rows as the base embeds them, circuit rows as records.h says.
  std::vector<std::int64_t> text;
  for (std::int64_t id : seq)
    if (id < m.base_rows()) text.push_back(id);
  cc.text_tokens = static_cast<std::int64_t>(text.size());
  base.reset();
  auto e = base.embed(text);
  EXPECT_TRUE(e.has_value()) << e.status().to_string();
  if (!e) return cc;
  const std::vector<float> text_rows = download(*s.loaded->backend, **e);
  w::ReferenceModel ref(m.circuit_layers(), k.cc.target.shapes,
                        dtype == std::string("f32") ? w::DType::kF32 : w::DType::kBF16);
  // Switch margins of the circuit tokens alone (on text tokens the q/k values are
  // unsaturated noise that beta = 0 and z = 0 discard; every other switch is at -2^100·|mute|).
  w::ReferenceModel ref_circuit(m.circuit_layers(), k.cc.target.shapes, ref.dtype());
  cc.circuit_tokens = static_cast<std::int64_t>(ct.ids.size());
  std::size_t next_circuit = 0, next_text = 0;
  for (std::size_t p = 0; p < seq.size(); ++p) {
    const std::vector<float> got =
        m.circuit_order(std::span<const float>(out.circuit_residual.data() + p * H, static_cast<std::size_t>(H)));
    if (seq[p] < m.base_rows()) {
      const std::span<const float> row(text_rows.data() + next_text++ * H, static_cast<std::size_t>(H));
      const std::vector<float> in = m.circuit_order(row);
      const std::vector<float> want = ref.step(in);
      cc.text_changed += !bitwise_equal(got, in);
      cc.text_reference_changed += !bitwise_equal(want, in);
      continue;
    }
    const std::size_t i = next_circuit++;
    const std::vector<float> want = ref.step(k.row(ct.ids[i]));
    ref_circuit.step(k.row(ct.ids[i]));
    if (!bitwise_equal(got, want) && cc.differ++ == 0) cc.differ_first = static_cast<std::int64_t>(i);
    const Record& r = ct.records[static_cast<std::size_t>(ct.record_of[i])];
    if (r.kind != simt::RecordKind::kExec) continue;
    EXPECT_EQ(w::read_word(k.cc.allocation, got, k.fd.exec_warp), r.warp);
    for (int slot = 0; slot < kSlots; ++slot) {
      const std::uint64_t row = ct.rows[static_cast<std::size_t>(r.block * kSlots + slot)];
      const auto& f = k.fd.slot[static_cast<std::size_t>(slot)];
      simt::Instr in;
      const bool valid = simt::decode(row, in);
      const unsigned opcode = row & 0x3f;
      auto expect = [&](const w::Word& word, std::uint64_t value) {
        bool exact = true;
        cc.wrong += w::read_word(k.cc.allocation, got, word, &exact) != value;
        cc.inexact += !exact;
        ++cc.checked;
      };
      expect(f.lo, row & 0xffffffffu);
      expect(f.hi, row >> 32);
      expect(f.opcode, opcode < static_cast<unsigned>(simt::kOpCount) ? std::uint64_t{1} << opcode : 0);
      expect(w::Word{f.valid}, valid ? 1 : 0);
      if (valid) {
        expect(f.d, in.d);
        expect(f.a, in.a);
        expect(f.b, in.b);
        expect(f.c, in.c);
        expect(f.imm, in.imm);
        expect(f.ak, 1u << static_cast<int>(in.ak));
        expect(f.bk, 1u << static_cast<int>(in.bk));
      }
    }
  }
  for (const w::LayerMargin& lm : ref_circuit.margins()) {
    cc.mlp_min = std::min(cc.mlp_min, lm.mlp_min);
    cc.gdn_min = std::min(cc.gdn_min, lm.gdn_min);
  }
  return cc;
}

void circuit_tokens_case(const char* dtype) {
  {
    auto s = setup(dtype);
    if (!s->loaded) GTEST_SKIP() << s->skip;
    ASSERT_TRUE(s->merged) << dtype;
    const CircuitCase c = run_circuit_case(*s, dtype);
    const SilenceReport& rep = c.silence;
    std::printf(
        "[ %s ] %lld text + %lld circuit tokens (%lld ROM, %lld EXEC; %lld value channels muted for the conv "
        "window): residual after the circuit layers differs from ReferenceModel on %lld circuit tokens; %lld of "
        "%lld decoded fields wrong, %lld inexact; reference switch margins MLP %g, GDN %g; %lld text rows changed "
        "(%lld in the reference math)\n",
        dtype, static_cast<long long>(c.text_tokens), static_cast<long long>(c.circuit_tokens),
        static_cast<long long>(s->tokens.rom_tokens), static_cast<long long>(c.circuit_tokens - s->tokens.rom_tokens),
        static_cast<long long>(s->merged->cost().window_channels), static_cast<long long>(c.differ),
        static_cast<long long>(c.wrong), static_cast<long long>(c.checked), static_cast<long long>(c.inexact),
        c.mlp_min, c.gdn_min, static_cast<long long>(c.text_changed), static_cast<long long>(c.text_reference_changed));
    EXPECT_EQ(c.differ, 0) << "first at circuit token " << c.differ_first;
    EXPECT_EQ(c.wrong, 0);
    EXPECT_EQ(c.inexact, 0);
    EXPECT_GT(c.checked, 0);
    EXPECT_EQ(c.text_changed, 0);
    EXPECT_EQ(c.text_reference_changed, 0);
    EXPECT_GE(c.mlp_min, 88.73);
    EXPECT_GE(c.gdn_min, 88.73);

    // (c) KL(base || merged) at text positions: the base saw P + M + S, the merged model P + ROM + M + EXEC + S.
    EXPECT_EQ(rep.before, static_cast<std::int64_t>(c.prefix));
    EXPECT_EQ(rep.before_identical, rep.before);
    EXPECT_EQ(rep.kl_before_max, 0.0);
    ASSERT_EQ(rep.kl.size(), c.prefix + c.middle + c.suffix);
    EXPECT_TRUE(std::isfinite(rep.kl_after_mean) && std::isfinite(rep.kl_after_max));
    double kl_m = 0, kl_s = 0;
    for (std::size_t i = c.prefix; i < c.prefix + c.middle; ++i) kl_m += rep.kl[i];
    for (std::size_t i = c.prefix + c.middle; i < rep.kl.size(); ++i) kl_s += rep.kl[i];
    std::printf(
        "[ %s ] KL(base||merged) per text position: prefix (%zu, before any circuit token) max %g; after circuit "
        "tokens (%lld positions, %lld identical): mean %.4g, max %.4g at token %lld; middle (%zu, after ROM) mean "
        "%.4g, suffix (%zu, after EXEC) mean %.4g, first %.4g, last %.4g; unmasked record mass <= %.3g; merged "
        "%.2f s, base %.2f s\n",
        dtype, c.prefix, rep.kl_before_max, static_cast<long long>(rep.after),
        static_cast<long long>(rep.after_identical), rep.kl_after_mean, rep.kl_after_max,
        static_cast<long long>(rep.kl_after_max_at), c.middle, kl_m / static_cast<double>(c.middle), c.suffix,
        kl_s / static_cast<double>(c.suffix), rep.kl[c.prefix + c.middle], rep.kl.back(), rep.record_mass_max,
        rep.merged_seconds, rep.base_seconds);
  }
}

TEST(Merge, CircuitTokensMatchTheReferenceAndTextAfterThemIsMeasuredF32) {
  circuit_tokens_case("f32");
}
TEST(Merge, CircuitTokensMatchTheReferenceAndTextAfterThemIsMeasuredBf16) {
  circuit_tokens_case("bf16");
}

// Without the conv-window mute, text before a record reaches the circuit through
// previous(): measured (the count is printed), not asserted.
// The exact sparse path (MergeInputs::sparse_circuit: the circuit layers on the host through
// weights::ReferenceModel) against the dense layers on the backend: the residual after the
// circuit layers, the base's logits and every circuit layer's recurrent state (read from the
// backend with download_state) equal bit for bit, on text, circuit tokens and text after
// them; the record rows' logits (scored on the host) to their last bits.
void sparse_case(const char* dtype) {
  auto dense = setup(dtype);
  if (!dense->loaded) GTEST_SKIP() << dense->skip;
  auto sparse = setup(dtype, /*mute_window=*/true, /*sparse=*/true);
  ASSERT_TRUE(dense->merged && sparse->merged);
  const auto prefix = prompt_ids(*dense->loaded->base, kPrompts[0], 16);
  std::vector<std::int64_t> seq = prefix;
  seq.insert(seq.end(), dense->merged_ids.begin(), dense->merged_ids.end());
  seq.insert(seq.end(), prefix.begin(), prefix.end());
  ASSERT_EQ(dense->merged_ids, sparse->merged_ids);
  ForwardOptions fo;
  fo.all_logits = true;
  fo.circuit_residual = true;
  ASSERT_TRUE(dense->merged->reset().is_ok());
  ASSERT_TRUE(sparse->merged->reset().is_ok());
  auto a = dense->merged->forward(seq, fo);
  auto b = sparse->merged->forward(seq, fo);
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(bitwise_equal(a->circuit_residual, b->circuit_residual)) << dtype;
  // The base's columns bit for bit; the record rows' (scored on the host on the sparse path,
  // in double; on the backend in its dtype) to the backend's rounding. (The stand-in record
  // rows here are dense, 2,048 terms each: the sums cancel, so f32 keeps about 4 digits.)
  ASSERT_EQ(a->logits.size(), b->logits.size());
  const std::int64_t cols = a->columns, text = dense->merged->base_rows();
  double worst = 0;
  std::int64_t base_differ = 0;
  for (std::int64_t i = 0; i < a->rows; ++i) {
    const float* p = a->logits.data() + i * cols;
    const float* q = b->logits.data() + i * cols;
    base_differ += !bitwise_equal(std::span<const float>(p, static_cast<std::size_t>(text)),
                                  std::span<const float>(q, static_cast<std::size_t>(text)));
    for (std::int64_t c = text; c < cols; ++c)
      worst = std::max(worst, std::abs(static_cast<double>(p[c]) - q[c]) / (1 + std::abs(static_cast<double>(p[c]))));
  }
  std::printf("[ %s ] record logits: largest difference %g (relative to 1 + |logit|)\n", dtype, worst);
  EXPECT_EQ(base_differ, 0) << dtype;
  EXPECT_LE(worst, std::string(dtype) == "f32" ? 1.0 / 1024 : 1.0 / 64) << dtype;
  auto sa = dense->merged->circuit_state();
  auto sb = sparse->merged->circuit_state();
  ASSERT_TRUE(sa.has_value()) << sa.status().to_string();
  ASSERT_TRUE(sb.has_value()) << sb.status().to_string();
  ASSERT_EQ(sa->layers.size(), sb->layers.size());
  std::int64_t values = 0, differ = 0, written = 0;
  for (std::size_t l = 0; l < sa->layers.size(); ++l) {
    const w::LayerStateView &x = sa->layers[l], &y = sb->layers[l];
    ASSERT_TRUE(x.data != nullptr && y.data != nullptr) << "layer " << l;
    for (std::int64_t h = 0; h < x.value_heads; ++h)
      for (std::int64_t k = 0; k < x.key_dim; ++k)
        for (std::int64_t v = 0; v < x.value_dim; ++v) {
          const float p = x.at(h, k, v), q = y.at(h, k, v);
          differ += std::bit_cast<std::uint32_t>(p) != std::bit_cast<std::uint32_t>(q);
          written += p != 0;
          ++values;
        }
  }
  std::printf(
      "[ %s ] %zu tokens (%zu circuit): logits, circuit residuals equal; state values: %lld, %lld nonzero, "
      "%lld differ\n",
      dtype, seq.size(), dense->merged_ids.size(), static_cast<long long>(values), static_cast<long long>(written),
      static_cast<long long>(differ));
  EXPECT_GT(written, 0);
  EXPECT_EQ(differ, 0);
}

TEST(Merge, SparsePathEqualsTheDenseLayersF32) {
  sparse_case("f32");
}
TEST(Merge, SparsePathEqualsTheDenseLayersBf16) {
  sparse_case("bf16");
}

// Sequences of the merged model: a sequence run in pieces with other sequences (and the
// model's own) in between gives the logits, circuit residuals and circuit states of one
// uninterrupted run bit for bit; a snapshot restored continues as the first time.
void merged_sequences(const char* dtype, bool sparse) {
  auto s = setup(dtype, /*mute_window=*/true, sparse);
  if (!s->loaded) GTEST_SKIP() << s->skip;
  ASSERT_TRUE(s->merged);
  MergedModel& m = *s->merged;
  sdk::BaseModel& base = *s->loaded->base;
  const auto text = prompt_ids(base, kPrompts[0], 24);
  std::vector<std::vector<std::int64_t>> calls = {
      std::vector<std::int64_t>(text.begin(), text.begin() + 16),
      std::vector<std::int64_t>(s->merged_ids.begin(), s->merged_ids.begin() + 40),
      std::vector<std::int64_t>(text.begin() + 16, text.end())};
  ForwardOptions o;
  o.all_logits = true;
  o.circuit_residual = true;
  auto states = [&]() {
    auto v = m.circuit_state();
    EXPECT_TRUE(v.has_value()) << v.status().to_string();
    std::vector<float> all;
    for (const auto& l : v->layers)
      if (l.data != nullptr) all.insert(all.end(), l.data, l.data + l.value_heads * l.key_dim * l.value_dim);
    return all;
  };
  // The reference: the model's own sequence, the three calls in a row.
  ASSERT_TRUE(m.reset().is_ok());
  std::vector<MergedForward> want;
  std::vector<float> want_state;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    auto f = m.forward(calls[i], o);
    ASSERT_TRUE(f.has_value()) << f.status().to_string();
    want.push_back(std::move(*f));
    if (i == 1) want_state = states();
  }
  auto a = m.create_sequence(), b = m.create_sequence(), snapshot = m.create_sequence();
  ASSERT_TRUE(a && b && snapshot) << a.status().to_string();
  auto run = [&](MergedModel::Sequence* seq, const std::vector<std::int64_t>& ids) {
    EXPECT_TRUE(m.use(seq).is_ok());
    auto f = m.forward(ids, o);
    EXPECT_TRUE(f.has_value()) << f.status().to_string();
    return f ? std::move(*f) : MergedForward{};
  };
  auto same = [&](const MergedForward& got, const MergedForward& ref, const char* what) {
    EXPECT_TRUE(bitwise_equal(got.logits, ref.logits)) << dtype << (sparse ? " sparse " : " dense ") << what;
    EXPECT_TRUE(bitwise_equal(got.circuit_residual, ref.circuit_residual)) << dtype << " " << what;
  };
  same(run(a->get(), calls[0]), want[0], "first call");
  run(b->get(), calls[1]);  // another sequence in between: circuit tokens of its own
  ASSERT_TRUE(m.use(nullptr).is_ok());
  ASSERT_TRUE(m.reset().is_ok());
  run(nullptr, calls[0]);  // and the model's own
  same(run(a->get(), calls[1]), want[1], "second call");
  EXPECT_TRUE(bitwise_equal(states(), want_state)) << dtype << ": the circuit layers' states";
  ASSERT_TRUE(m.copy_sequence(**a, **snapshot).is_ok());
  same(run(a->get(), calls[2]), want[2], "third call");
  ASSERT_TRUE(m.copy_sequence(**snapshot, **a).is_ok());  // restore while in use
  EXPECT_EQ(m.tokens(), 56);
  EXPECT_TRUE(bitwise_equal(states(), want_state)) << dtype << ": the restored circuit states";
  same(run(a->get(), calls[2]), want[2], "third call after the restore");
  same(run(snapshot->get(), calls[2]), want[2], "third call on the snapshot");
  EXPECT_TRUE(m.copy_sequence(**a, **a).is_ok());
  ASSERT_TRUE(m.use(nullptr).is_ok());
}
TEST(Merge, SequencesRunSideBySideAndRestoreF32) {
  merged_sequences("f32", /*sparse=*/true);
}
TEST(Merge, SequencesRunSideBySideAndRestoreDenseBf16) {
  merged_sequences("bf16", /*sparse=*/false);
}

// Speculation's pieces refuse what they cannot do, before touching any state: drafting needs the
// guard's circuit choice (a profiled merge with record rows; this one is not profiled), verifying
// needs drafts, redoing needs a verification; the model goes on as if nothing was asked.
TEST(Merge, SpeculationRefusesWhatItCannotVouchFor) {
  auto s = setup("f32", /*mute_window=*/true, /*sparse=*/true);
  if (!s->loaded) GTEST_SKIP() << s->skip;
  ASSERT_TRUE(s->merged);
  MergedModel& m = *s->merged;
  auto d = m.draft(s->merged_ids.front());
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.status().message(),
            "speculation needs the circuit on the host (sparse) and its record rows profiled against the base");
  EXPECT_EQ(m.drafted(), 0);
  auto v = m.verify_drafts();
  ASSERT_FALSE(v.has_value());
  EXPECT_EQ(v.status().message(), "verify_drafts: nothing drafted");
  auto r = m.redo_drafts();
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().message(), "redo_drafts: no verify_drafts() to redo");
  const std::int64_t first[] = {s->merged_ids.front()};
  EXPECT_TRUE(m.forward(first).has_value());
  EXPECT_EQ(m.tokens(), 1);
}

TEST(Merge, TextInTheConvWindowWithoutTheWindowMute) {
  auto s = setup("f32", /*mute_window=*/false);
  if (!s->loaded) GTEST_SKIP() << s->skip;
  ASSERT_TRUE(s->merged);
  const CircuitCase c = run_circuit_case(*s, "f32");
  std::printf(
      "[ f32, no window mute ] residual differs from ReferenceModel on %lld of %lld circuit tokens (first: %lld); "
      "%lld of %lld decoded fields wrong, %lld inexact; %lld text rows changed\n",
      static_cast<long long>(c.differ), static_cast<long long>(c.circuit_tokens),
      static_cast<long long>(c.differ_first), static_cast<long long>(c.wrong), static_cast<long long>(c.checked),
      static_cast<long long>(c.inexact), static_cast<long long>(c.text_changed));
  EXPECT_EQ(c.text_changed, 0);  // text itself stays silent either way
}

// A stand-in base whose embedding is a given table (text rows), with identity
// layers and norm and a tied lm_head: the mute search and the merge's sign
// handling on embeddings the synthetic generator does not make.
TEST(Merge, ChoiceNeedsUsableBaseChannels) {
  // 8 channels, the first two free (mute direction on base channels 6 and 7), three choice
  // columns, and only two base channels with |1 + w| >= 1/64.
  BaseProfile p;
  p.final_scale = {1.0, 1.0 / 128, 1.0 / 128, -2.0, 1.0 / 256, 0.0, 1.0, 1.0};
  p.perturbation.assign(8, 1.0);
  const int free[] = {0, 1};
  const std::int64_t mute[] = {6, 7}, choice[] = {2, 3, 4};
  auto map = plan_channels(8, free, mute, choice, p, nullptr);
  ASSERT_FALSE(map.has_value());
  EXPECT_EQ(map.status().message(),
            "merge: the next token's 3 fields need base channels whose final-norm scale |1+w| is at least 0.015625 "
            "and that carry no massive activation; the base has 2");
  p.final_scale[2] = 0.5;  // now three: 3 (|-2|), 0 and 2, in order of the probes' perturbation
  p.perturbation[0] = 0.5;
  ChoicePlacement placed;
  map = plan_channels(8, free, mute, choice, p, &placed);
  ASSERT_TRUE(map.has_value()) << map.status().to_string();
  EXPECT_EQ(map->merged(2), 0);  // the most important column on the quietest channel
  EXPECT_EQ(placed.channels.size(), 3u);
  EXPECT_EQ(map->merged(0), 6);
  EXPECT_EQ(map->merged(1), 7);
  for (std::int64_t c = 0; c < 8; ++c) EXPECT_EQ(map->circuit(map->merged(c)), c);
}

// A base of an embedding table alone: its layers add `added` to every row (none: nothing),
// its final norm is RMSNorm with scales `scale` (none: the identity), its head the table.
class TableBase final : public sdk::BaseModel {
 public:
  TableBase(std::vector<float> table, std::int64_t rows, sdk::LayerShapes shapes, std::vector<float> scale = {},
            std::vector<float> added = {})
      : table_(std::move(table)), rows_(rows), shapes_(shapes), scale_(std::move(scale)), added_(std::move(added)) {}
  sdk::Expected<sdk::Description> describe() const override { return sdk::Description{}; }
  sdk::Expected<sdk::ModelInfo> load(sdk::TensorBackend& backend) override {
    backend_ = &backend;
    auto v = sdk::make_view(table_.data(), sdk::DType::kF32, {rows_, shapes_.hidden_size});
    if (!v) return v.error();
    auto t = backend.upload(*v);
    if (!t) return t.error();
    uploaded_ = std::move(*t);
    sdk::ModelInfo info;
    info.vocab_size = info.tokenizer_size = rows_;
    info.shapes = shapes_;
    return info;
  }
  sdk::Expected<std::vector<std::int64_t>> encode(std::string_view) override { return sdk::not_available("encode"); }
  sdk::Expected<std::string> decode(std::span<const std::int64_t>) override { return sdk::not_available("decode"); }
  sdk::Expected<std::vector<std::int64_t>> encode_chat(std::span<const sdk::ChatTurn>,
                                                       std::span<const sdk::ToolDeclaration>) override {
    return sdk::not_available("chat");
  }
  std::vector<std::int64_t> stop_ids() const override { return {}; }
  sdk::Expected<std::vector<float>> forward(std::span<const std::int64_t>) override {
    return sdk::not_available("forward");
  }
  void reset() override {}
  sdk::Expected<sdk::Handle<sdk::Tensor>> embed(std::span<const std::int64_t> ids) override {
    return backend_->embed(*uploaded_, ids);
  }
  sdk::Expected<sdk::Handle<sdk::Tensor>> run_layers(const sdk::Tensor& h) override {
    if (added_.empty()) return backend_->rows(h, 0, h.dim(0));
    std::vector<float> rows = download(*backend_, h);
    for (std::size_t i = 0; i < rows.size(); ++i) rows[i] += added_[i % added_.size()];
    auto v = sdk::make_view(rows.data(), sdk::DType::kF32, {h.dim(0), h.dim(1)});
    if (!v) return v.error();
    return backend_->upload(*v);
  }
  sdk::Expected<sdk::Handle<sdk::Tensor>> final_norm(const sdk::Tensor& h) override {
    if (scale_.empty()) return backend_->rows(h, 0, h.dim(0));
    std::vector<float> w(scale_.size());
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = scale_[i] - 1;  // the norm multiplies by 1 + w
    auto v = sdk::make_view(w.data(), sdk::DType::kF32, {static_cast<std::int64_t>(w.size())});
    if (!v) return v.error();
    auto t = backend_->upload(*v);
    if (!t) return t.error();
    return backend_->rms_norm(h, **t, shapes_.rms_norm_eps);
  }
  sdk::Expected<sdk::Handle<sdk::Tensor>> lm_head(const sdk::Tensor& x) override {
    return backend_->linear(x, *uploaded_);
  }
  ~TableBase() override = default;

 private:
  std::vector<float> table_;
  std::int64_t rows_;
  sdk::LayerShapes shapes_;
  std::vector<float> scale_, added_;
  sdk::TensorBackend* backend_ = nullptr;
  sdk::Handle<sdk::Tensor> uploaded_;
};

// Any table merges (a launch needs no silence); where a direction separates every row,
// text is silent bit for bit; where none does, the merge says which rows leak.
TEST(Merge, MergesAnyTableAndCertifiesWhereItCan) {
  std::string why;
  auto l = load("f32", why);  // the real backend; the synthetic base only lends its shapes
  if (!l) GTEST_SKIP() << why;
  const sdk::LayerShapes shapes = l->info.shapes;
  const std::int64_t H = shapes.hidden_size, rows = 400;
  FetchDecode k(shapes, /*mute=*/true);
  ASSERT_TRUE(k.ok);
  RecordTables tables(H);  // three fetch/decode tokens, tied
  for (std::int64_t id : {k.fd.records.base + 1, k.fd.records.base + 7, k.fd.records.base + 12}) tables.add(k.row(id));
  tables.tie();
  MergeInputs in;
  in.circuit = &k.cc;
  in.records = tables.rows();
  in.sparse_circuit = true;
  std::mt19937 rng(5);
  for (bool anisotropic : {false, true}) {
    std::vector<float> table = table_of(rows, H, anisotropic, 13);
    for (float& x : table) x *= 0.02f;  // the scale of a real embedding
    for (std::int64_t c = 0; c < H; ++c) ASSERT_FALSE(clean_channel(table, rows, H, c));
    TableBase base(table, rows, shapes);
    auto info = base.load(*l->backend);
    ASSERT_TRUE(info.has_value());
    auto m = MergedModel::create(base, *info, *l->backend, in);
    ASSERT_TRUE(m.has_value()) << m.status().to_string();
    const SilenceCertificate& c = (*m)->silence();
    std::printf("[ %s ] silence: %s\n", anisotropic ? "anisotropic" : "isotropic", c.to_string().c_str());
    EXPECT_EQ(c.rows, rows);
    if (!anisotropic) {
      EXPECT_FALSE(c.exact());
      EXPECT_GT(c.leaking, rows / 10);
      // A launch needs no silence: circuit tokens after the approximate merge are still exact —
      // the residual after the circuit layers is weights::ReferenceModel's bit for bit.
      const std::int64_t ids[] = {rows, rows + 1, rows + 2};
      ForwardOptions o;
      o.circuit_residual = true;
      auto f = (*m)->forward(ids, o);
      ASSERT_TRUE(f.has_value()) << f.status().to_string();
      w::ReferenceModel ref((*m)->circuit_layers(), shapes, w::DType::kF32);
      for (std::size_t i = 0; i < 3; ++i) {
        const std::vector<float> want = ref.step(tables.rows().embedding(static_cast<std::int64_t>(i)).value());
        const std::vector<float> got = (*m)->circuit_order(std::span<const float>(
            f->circuit_residual.data() + i * static_cast<std::size_t>(H), static_cast<std::size_t>(H)));
        EXPECT_TRUE(bitwise_equal(got, want)) << "circuit token " << i;
      }
      m->reset();
      continue;
    }
    ASSERT_TRUE(c.exact()) << c.to_string();
    // The direction's channels hold the circuit's free channels (the mute channel first).
    EXPECT_EQ((*m)->merged_channel(k.cc.allocation.mute), c.direction.channels.front());
    std::vector<std::int64_t> ids;
    for (int i = 0; i < 80; ++i) ids.push_back(static_cast<std::int64_t>(rng() % rows));
    auto rep = measure_silence(**m, base, *l->backend, ids);
    ASSERT_TRUE(rep.has_value()) << rep.status().to_string();
    EXPECT_EQ(rep->before_identical, 80);
    EXPECT_EQ(rep->kl_before_max, 0.0);
    m->reset();
  }
}

// The choice on a base whose final norm scales channels by anything from -20 to 20 (a few
// near 0) and whose layers add a massive activation to two channels and noise elsewhere:
// the next token's fields go to quiet channels with a usable scale, the unembedding is
// divided by the scales (the record logits read the fields as the circuit wrote them),
// and a base that moves the fields more than they hold is refused token by token.
TEST(Merge, ChoicePlacementCompensationAndGuard) {
  std::string why;
  auto l = load("f32", why);
  if (!l) GTEST_SKIP() << why;
  const sdk::LayerShapes shapes = l->info.shapes;
  const std::int64_t H = shapes.hidden_size, rows = 64;
  FetchDecode k(shapes, /*mute=*/true);
  ASSERT_TRUE(k.ok);
  std::vector<float> table = table_of(rows, H, /*anisotropic=*/true, 17);
  for (float& x : table) x *= 0.02f;
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> mag(0.05f, 20.0f), small(-0.5f, 0.5f);
  std::vector<float> scale(static_cast<std::size_t>(H)), added(static_cast<std::size_t>(H));
  for (std::int64_t c = 0; c < H; ++c) {
    scale[static_cast<std::size_t>(c)] = (c % 10 == 3 ? -1.0f : 1.0f) * mag(rng);
    added[static_cast<std::size_t>(c)] = small(rng);
  }
  for (std::int64_t c : {5, 6, 7}) scale[static_cast<std::size_t>(c)] = 1.0f / 256;  // near 0
  const std::int64_t massive[] = {11, 900};
  for (std::int64_t c : massive) added[static_cast<std::size_t>(c)] = 4000.0f;

  // Record rows: three fetch/decode tokens; the unembedding reads four circuit channels with
  // sign patterns, row 2 also a heavier constant term on a fifth.
  RecordTables tables(H);
  for (std::int64_t id : {k.fd.records.base + 1, k.fd.records.base + 2, k.fd.records.base + 3}) tables.add(k.row(id));
  std::vector<std::int64_t> used;
  for (std::int64_t c = 0; c < H && used.size() < 5; ++c)
    if (std::find(k.cc.allocation.free.begin(), k.cc.allocation.free.end(), c) == k.cc.allocation.free.end() &&
        c != k.cc.allocation.mute)
      used.push_back(c);
  tables.unembedding.rows = 3;
  tables.unembedding.cols = H;
  tables.unembedding.row_ptr = {0};
  const double signs[3][4] = {{1, 1, -1, -1}, {1, -1, 1, -1}, {-1, 1, 1, 1}};
  std::vector<std::pair<std::int64_t, double>> row_entries;
  for (int r = 0; r < 3; ++r) {
    std::vector<std::pair<std::int64_t, double>> e;
    for (int j = 0; j < 4; ++j) e.emplace_back(used[static_cast<std::size_t>(j)], 8 * signs[r][j]);
    if (r == 2) e.emplace_back(used[4], -64);
    std::sort(e.begin(), e.end());
    for (const auto& [c, v] : e) {
      tables.unembedding.col.push_back(static_cast<std::int32_t>(c));
      tables.unembedding.val.push_back(v);
    }
    tables.unembedding.row_ptr.push_back(static_cast<std::int64_t>(tables.unembedding.val.size()));
  }
  MergeInputs in;
  in.circuit = &k.cc;
  in.records = tables.rows();
  in.sparse_circuit = true;
  {
    TableBase base(table, rows, shapes, scale, added);
    auto info = base.load(*l->backend);
    ASSERT_TRUE(info.has_value());
    auto m = MergedModel::create(base, *info, *l->backend, in);
    ASSERT_TRUE(m.has_value()) << m.status().to_string();
    const ChoicePlacement& p = (*m)->placement();
    std::printf("[ choice ] %s\n", p.to_string().c_str());
    ASSERT_EQ(p.channels.size(), 5u);
    const auto& mute_channels = (*m)->silence().direction.channels;
    for (std::int64_t c : massive)  // found, unless the mute direction took the channel first
      if (std::find(mute_channels.begin(), mute_channels.end(), c) == mute_channels.end()) {
        EXPECT_NE(std::find(p.massive.begin(), p.massive.end(), c), p.massive.end()) << "channel " << c;
      }
    for (std::int64_t c : p.channels) {
      EXPECT_NE(c, massive[0]);
      EXPECT_NE(c, massive[1]);
      EXPECT_GE(std::abs(scale[static_cast<std::size_t>(c)]), kSmallestChoiceScale) << "channel " << c;
    }
    // The heaviest column (used[4], the constant term) on the quietest channel.
    std::int64_t quietest = -1;
    for (std::int64_t c = 0; c < H; ++c)
      if (std::abs(scale[static_cast<std::size_t>(c)]) >= kSmallestChoiceScale &&
          std::find(mute_channels.begin(), mute_channels.end(), c) == mute_channels.end() &&
          (quietest < 0 ||
           std::abs(added[static_cast<std::size_t>(c)]) < std::abs(added[static_cast<std::size_t>(quietest)])))
        quietest = c;
    EXPECT_EQ((*m)->merged_channel(used[4]), quietest);
    // The record logits, independently: U·h / rms(h) over the final residual h (the circuit's
    // output plus what the layers add), whatever the final norm's scales.
    const std::int64_t ids[] = {rows, rows + 1, rows + 2};
    ForwardOptions o;
    o.all_logits = true;
    o.circuit_residual = true;
    auto f = (*m)->forward(ids, o);
    ASSERT_TRUE(f.has_value()) << f.status().to_string();
    for (std::int64_t t = 0; t < 3; ++t) {
      std::vector<double> h(static_cast<std::size_t>(H));
      double sq = 0;
      for (std::int64_t c = 0; c < H; ++c) {
        h[static_cast<std::size_t>(c)] = static_cast<double>(f->circuit_residual[static_cast<std::size_t>(t * H + c)]) +
                                         added[static_cast<std::size_t>(c)];
        sq += h[static_cast<std::size_t>(c)] * h[static_cast<std::size_t>(c)];
      }
      const double inv = 1 / std::sqrt(sq / static_cast<double>(H) + shapes.rms_norm_eps);
      for (std::int64_t r = 0; r < 3; ++r) {
        double want = 0;
        for (std::int64_t q = tables.unembedding.row_ptr[r]; q < tables.unembedding.row_ptr[r + 1]; ++q)
          want +=
              tables.unembedding.val[static_cast<std::size_t>(q)] *
              h[static_cast<std::size_t>((*m)->merged_channel(tables.unembedding.col[static_cast<std::size_t>(q)]))];
        want *= inv;
        const float got = f->logits[static_cast<std::size_t>(t * f->columns + rows + r)];
        EXPECT_NEAR(got, want, 1e-4 * (1 + std::abs(want))) << "token " << t << " record row " << r;
      }
      EXPECT_EQ(f->model_choice[static_cast<std::size_t>(t)], f->circuit_choice[static_cast<std::size_t>(t)]);
    }
    m->reset();
  }
  // Layers that add ±4,000 to every channel, far more than the fields hold: the record logits
  // follow what the base added, whose best row is one row under +Δ and another under -Δ, so
  // under one of them the model's choice is not the circuit's and MergeHost::forward stops.
  bool refused = false;
  for (float sign : {1.0f, -1.0f}) {
    std::vector<float> loud(static_cast<std::size_t>(H));
    for (std::int64_t c = 0; c < H; ++c)
      loud[static_cast<std::size_t>(c)] = sign * (c * 7919 % 3 == 0 ? -4000.0f : 4000.0f);
    TableBase base(table, rows, shapes, scale, loud);
    auto info = base.load(*l->backend);
    ASSERT_TRUE(info.has_value());
    MergeHost host(base, *info, *l->backend, /*sparse=*/true);
    ASSERT_TRUE(host.merge(std::make_shared<TableCircuit>(k.cc, tables)).is_ok());
    const std::int64_t one[] = {rows};
    auto r = host.forward(one);
    EXPECT_GT(host.guard_ratio(), 1.0);
    if (r) continue;
    refused = true;
    EXPECT_EQ(r.status().message().rfind("merge: the base's layers changed the next record: the model's record "
                                         "logits favour record row ",
                                         0),
              0u)
        << r.status().message();
  }
  EXPECT_TRUE(refused);
}

// The base's sequences: independent of each other and of the model's own, forked and
// restored by copy_sequence, truncated only back to 0 (Qwen3.5's Gated DeltaNet layers).
TEST(BaseSequences, RunSideBySideForkRestoreAndTruncate) {
  std::string why;
  auto l = load("f32", why);
  if (!l) GTEST_SKIP() << why;
  sdk::BaseModel& base = *l->base;
  const auto ids = prompt_ids(base, kPrompts[0], 24);
  const std::span<const std::int64_t> first(ids.data(), 16), second(ids.data() + 16, 8);
  const auto other = prompt_ids(base, kPrompts[1], 12);
  // The reference: the model's own sequence, from empty.
  base.reset();
  const auto want_first = base.forward(first), want_second = base.forward(second);
  ASSERT_TRUE(want_first && want_second);
  base.reset();
  auto must = [](auto e) {
    EXPECT_TRUE(e.has_value()) << e.status().to_string();
    return std::move(e).value();
  };
  sdk::Handle<sdk::Sequence> a = must(base.create_sequence()), b = must(base.create_sequence());
  EXPECT_EQ(must(base.forward(*a, first)), *want_first);
  EXPECT_TRUE(base.forward(*b, other).has_value());  // another sequence in between
  EXPECT_TRUE(base.forward(other).has_value());      // and the model's own
  sdk::Handle<sdk::Sequence> snapshot = must(base.create_sequence());
  ASSERT_TRUE(base.copy_sequence(*a, *snapshot).is_ok());
  EXPECT_EQ(snapshot->tokens(), 16);
  EXPECT_EQ(must(base.forward(*a, second)), *want_second);
  EXPECT_EQ(a->tokens(), 24);
  // Restore: a back to 16 tokens continues as the first time; the snapshot is still there.
  ASSERT_TRUE(base.copy_sequence(*snapshot, *a).is_ok());
  EXPECT_EQ(a->tokens(), 16);
  EXPECT_EQ(must(base.forward(*a, second)), *want_second);
  EXPECT_EQ(must(base.forward(*snapshot, second)), *want_second);
  // Truncation: the Gated DeltaNet layers keep no history.
  const sdk::Status t = base.truncate_sequence(*a, 20);
  EXPECT_EQ(t.code(), sdk::ErrorCode::kUnsupported);
  EXPECT_EQ(t.message().rfind("the sequence cannot forget tokens 20..23: layer 0 is a Gated DeltaNet layer", 0), 0u)
      << t.message();
  EXPECT_EQ(a->tokens(), 24);
  ASSERT_TRUE(base.truncate_sequence(*a, 0).is_ok());
  EXPECT_EQ(a->tokens(), 0);
  EXPECT_EQ(must(base.forward(*a, first)), *want_first);
  EXPECT_EQ(base.truncate_sequence(*a, 17).message(), "the sequence holds 16 tokens, not 17");
}

// The base's forward in pieces (BaseModel::embed / run_layers / final_norm / lm_head) checks its inputs.
TEST(Merge, BasePiecesNameBadInputs) {
  std::string why;
  auto l = load("f32", why);
  if (!l) GTEST_SKIP() << why;
  sdk::BaseModel& base = *l->base;
  const std::int64_t bad_id[] = {3, l->info.vocab_size};
  auto e = base.embed(bad_id);
  ASSERT_FALSE(e.has_value());
  EXPECT_EQ(e.status().message(), "token id 4096 is outside the model's 4096 embedding rows");
  EXPECT_EQ(base.embed({}).status().message(), "embed needs at least one token");
  std::vector<float> narrow(7, 0.0f);
  auto v = sdk::make_view(narrow.data(), sdk::DType::kF32, {1, 7});
  ASSERT_TRUE(v.has_value());
  auto t = l->backend->upload(*v);
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  using Piece = sdk::Expected<sdk::Handle<sdk::Tensor>> (sdk::BaseModel::*)(const sdk::Tensor&);
  for (Piece call :
       {Piece{&sdk::BaseModel::run_layers}, Piece{&sdk::BaseModel::final_norm}, Piece{&sdk::BaseModel::lm_head}}) {
    auto r = (base.*call)(**t);
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.status().message().find(": expected a [T, 2048] tensor, got [1, 7]"), std::string::npos)
        << r.status().message();
  }
}

TEST(Merge, ForwardNamesIdsOutsideTheMergedVocabulary) {
  auto s = setup("f32");
  if (!s->loaded) GTEST_SKIP() << s->skip;
  ASSERT_TRUE(s->merged);
  const std::int64_t bad[] = {1, s->merged->vocab_rows()};
  auto r = s->merged->forward(bad);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().message(), "token id " + std::to_string(s->merged->vocab_rows()) +
                                      " is outside the merged model's " + std::to_string(s->merged->vocab_rows()) +
                                      " rows (4096 base + " + std::to_string(s->merged->vocab_rows() - 4096) +
                                      " records)");
}

}  // namespace
}  // namespace qgpu::core
