// Reading RAMs back out of the Gated DeltaNet state (state.h): RAMs written by
// random tokens through the reference model, then read_ram on the model's state
// against a plain array model of the writes; the recorded placement against the
// emitted weights; corrupted states and bad requests give one clear error.
#include "qgpu/weights/state.h"

#include <cstdio>
#include <string>
#include <vector>

#include "harness.h"

namespace qgpu::weights {
namespace {

using testing::kBothDtypes;
using testing::must;

// mem.words: 100 rows x 32 bits, write enable, replicas in layers 0 and 1.
// mem.wide: 60 rows x 48 bits (two value heads, the second with 16 pads), one replica in layer 1.
// mem.small: 16 rows x 8 bits, no write enable (every token writes), one replica in layer 0.
struct StateCircuit {
  Circuit c{"state"};
  Word wa, wd, we, ra, wa2, wd2, we2, ra2, wa3, wd3, ra3;
  int words = -1, wide = -1, small = -1;
  StateCircuit() {
    wa = must(c.input("w", "addr", 7));
    wd = must(c.input("w", "data", 32));
    we = must(c.input("w", "we", 1));
    ra = must(c.input("r", "addr", 7));
    words = must(c.add_ram("mem", "words", 100, 32));
    EXPECT_TRUE(c.ram_write(words, wa, wd, we[0]).is_ok());
    must(c.ram_read(words, "read0", ra, std::nullopt));
    Word late = must(copy(c, "r", "addr_late", ra));  // final after MLP 0: the next replica is in layer 1
    must(c.ram_read(words, "read1", late, std::nullopt));
    wa2 = must(c.input("w2", "addr", 6));
    wd2 = must(c.input("w2", "data", 48));
    we2 = must(c.input("w2", "we", 1));
    ra2 = must(c.input("r2", "addr", 6));
    wide = must(c.add_ram("mem", "wide", 60, 48));
    EXPECT_TRUE(c.ram_write(wide, wa2, wd2, we2[0]).is_ok());
    Word late2 = must(copy(c, "r2", "addr_late", ra2));
    must(c.ram_read(wide, "wide_read", late2, std::nullopt));
    wa3 = must(c.input("w3", "addr", 4));
    wd3 = must(c.input("w3", "data", 8));
    ra3 = must(c.input("r3", "addr", 4));
    small = must(c.add_ram("mem", "small", 16, 8));
    EXPECT_TRUE(c.ram_write(small, wa3, wd3, std::nullopt).is_ok());
    must(c.ram_read(small, "small_read", ra3, std::nullopt));
  }
};

// The RAMs' contents as a plain array model of the writes sees them.
struct Contents {
  std::vector<std::uint64_t> words = std::vector<std::uint64_t>(100, 0), wide = std::vector<std::uint64_t>(60, 0),
                             small = std::vector<std::uint64_t>(16, 0);
  std::vector<bool> words_written = std::vector<bool>(100, false);
};

// Random writes (a hot set of 4 rows takes half of them, so rows are overwritten
// many times; 5 % address past the last row and must change nothing).
Contents run_writes(const StateCircuit& sc, const CompiledCircuit& cc, ReferenceModel& m, int tokens,
                    std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Contents ram;
  auto addr = [&](int rows, int span) -> std::uint32_t {
    const std::uint32_t roll = rng() % 20;
    if (roll == 0) return static_cast<std::uint32_t>(rows + rng() % (span - rows));
    if (roll < 10) return static_cast<std::uint32_t>(rng() % 4 * 7 % rows);
    return static_cast<std::uint32_t>(rng() % rows);
  };
  for (int t = 0; t < tokens; ++t) {
    const std::uint32_t a = addr(100, 128), a2 = addr(60, 64), a3 = static_cast<std::uint32_t>(rng() % 16);
    const std::uint64_t d = testing::operand(rng), d2 = rng() & 0xFFFFFFFFFFFFull, d3 = rng() & 0xFF;
    const bool w = rng() % 10 < 6, w2 = rng() % 10 < 6;
    m.step(embed(sc.c, cc.allocation,
                 {{sc.wa, a},
                  {sc.wd, d},
                  {sc.we, w},
                  {sc.ra, rng() % 128},
                  {sc.wa2, a2},
                  {sc.wd2, d2},
                  {sc.we2, w2},
                  {sc.ra2, rng() % 64},
                  {sc.wa3, a3},
                  {sc.wd3, d3},
                  {sc.ra3, rng() % 16}}));
    if (w && a < 100) {
      ram.words[a] = d;
      ram.words_written[a] = true;
    }
    if (w2 && a2 < 60) ram.wide[a2] = d2;
    ram.small[a3] = d3;
  }
  return ram;
}

std::string message(const sdk::Expected<std::vector<std::uint64_t>>& r) {
  return r ? std::string("(no error)") : r.status().message();
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(RamState, ReadRamGivesExactlyTheWrittenRows) {
  StateCircuit sc;
  CompiledCircuit cc = must(compile(sc.c, testing::qwen2b_target()));
  ASSERT_EQ(cc.rams.size(), 3u);
  ASSERT_EQ(cc.rams[sc.words].replicas.size(), 2u);
  EXPECT_EQ(cc.rams[sc.words].replicas[0].layer, 0);
  EXPECT_EQ(cc.rams[sc.words].replicas[1].layer, 1);
  ASSERT_EQ(cc.rams[sc.wide].replicas.size(), 1u);
  EXPECT_EQ(cc.rams[sc.wide].replicas[0].layer, 1);
  EXPECT_EQ(cc.rams[sc.wide].replicas[0].value_heads, 2);
  EXPECT_EQ(must(find_ram(cc, "mem.wide")), sc.wide);
  std::printf("3 RAMs, 4 replicas: %d layers, key heads per layer %lld / %lld, %d channels\n", cc.schedule.num_layers,
              static_cast<long long>(cc.schedule.use[0].key_heads),
              static_cast<long long>(cc.schedule.use[1].key_heads), cc.allocation.channels_used);
  constexpr int kTokens = 600;
  for (DType dt : kBothDtypes) {
    ReferenceModel m(cc.layers, cc.target.shapes, dt);
    const Contents want = run_writes(sc, cc, m, kTokens, 17);
    const StateView view = m.state_view();
    int written = 0, wrong = 0;
    for (bool w : want.words_written) written += w;
    EXPECT_GT(written, 50);
    EXPECT_LT(written, 100);  // some rows never written: they must read 0
    for (int replica : {-1, 0, 1}) {
      auto got = read_ram(cc, sc.words, view, {-1, replica});
      ASSERT_TRUE(got.has_value()) << got.status().message();
      ASSERT_EQ(got->size(), want.words.size());
      for (std::size_t r = 0; r < want.words.size(); ++r) wrong += (*got)[r] != want.words[r];
    }
    auto wide = read_ram(cc, sc.wide, view);
    ASSERT_TRUE(wide.has_value()) << wide.status().message();
    for (std::size_t r = 0; r < want.wide.size(); ++r) wrong += (*wide)[r] != want.wide[r];
    for (int first : {0, 16, 31, 40}) {  // a window of the row (RamReadOptions::first_bit), across its two heads
      RamReadOptions o;
      o.first_bit = first;
      auto part = read_ram(cc, sc.wide, view, o);
      ASSERT_TRUE(part.has_value()) << part.status().message();
      for (std::size_t r = 0; r < want.wide.size(); ++r) wrong += (*part)[r] != want.wide[r] >> first;
    }
    auto small = read_ram(cc, sc.small, view);
    ASSERT_TRUE(small.has_value()) << small.status().message();
    for (std::size_t r = 0; r < want.small.size(); ++r) wrong += (*small)[r] != want.small[r];
    for (int row : {0, 7, 21, 99}) {  // one row at a time
      auto one = read_ram(cc, sc.words, view, {row, -1});
      ASSERT_TRUE(one.has_value()) << one.status().message();
      ASSERT_EQ(one->size(), 1u);
      wrong += (*one)[0] != want.words[static_cast<std::size_t>(row)];
    }
    EXPECT_EQ(wrong, 0) << dtype_name(dt);
    std::printf("[ %s ] %d tokens; read back 3 x 100 + 60 + 16 rows (%d of 100 written), %d wrong\n",
                std::string(dtype_name(dt)).c_str(), kTokens, written, wrong);
  }
}

// The recorded placement is where emit() put the RAM: every data bit's channel feeds
// the value channel pair the placement names (U·d and U·(1 - d)), and the
// key rows come from the write address.
TEST(RamState, PlacementIsWhereTheWeightsPutTheRam) {
  StateCircuit sc;
  CompiledCircuit cc = must(compile(sc.c, testing::qwen2b_target()));
  const auto& s = cc.target.shapes;
  const std::int64_t kq = s.linear_num_key_heads * s.linear_key_head_dim, dk = s.linear_key_head_dim,
                     dv = s.linear_value_head_dim, r = s.linear_num_value_heads / s.linear_num_key_heads;
  auto weight = [](const SparseMatrix& m, std::int64_t row, std::int64_t col) {
    for (std::int64_t k = m.row_ptr[row]; k < m.row_ptr[row + 1]; ++k)
      if (m.col[k] == col) return m.val[k];
    return 0.0;
  };
  int checked = 0;
  for (int ram : {sc.words, sc.wide, sc.small}) {
    const Ram& def = sc.c.rams()[ram];
    const RamPlacement& p = cc.rams[ram];
    EXPECT_EQ(p.name, def.owner + "." + def.name);
    EXPECT_EQ(p.bits_per_head, dv / 4);
    for (const RamReplica& rep : p.replicas) {
      const GdnLayer& g = cc.layers[rep.layer].gdn;
      for (int b = 0; b < def.width; ++b) {
        const std::int64_t h = rep.first_value_head + b / p.bits_per_head, ch = 2 * (b % p.bits_per_head);
        const std::int64_t row = 2 * kq + h * dv + ch;
        // U·d = U/2·x + U/2 and U·(1 - d) = -U/2·x + U/2 from the bit's channel x = ±1.
        const Bit d = def.wr_data[b];
        const double half = d.neg ? -kValueUnit / 2 : kValueUnit / 2;
        EXPECT_EQ(weight(g.in_proj_qkv, row, cc.allocation.channel(d)), half) << p.name << " " << b;
        EXPECT_EQ(weight(g.in_proj_qkv, row + 1, cc.allocation.channel(d)), -half);
        ++checked;
      }
      // Key row i of the replica's key head: A·[address bit j matches i], so +A/2 on the
      // bit's channel where i has a 1 and -A/2 where it has a 0 (the addresses are plain bits).
      const std::int64_t key_head = rep.first_value_head / r;
      for (int i = 0; i < def.rows; i += 13)
        for (std::size_t j = 0; j < def.wr_addr.size(); ++j) {
          ASSERT_FALSE(def.wr_addr[j].neg);
          EXPECT_EQ(weight(g.in_proj_qkv, kq + key_head * dk + i, cc.allocation.channel(def.wr_addr[j])),
                    ((i >> j) & 1) ? kGain / 2 : -kGain / 2);
        }
    }
  }
  EXPECT_EQ(checked, 2 * 32 + 48 + 8);
}

// A corrupted state is reported with the RAM, row, bit and values; never decoded.
TEST(RamState, CorruptStateIsAClearError) {
  StateCircuit sc;
  CompiledCircuit cc = must(compile(sc.c, testing::qwen2b_target()));
  const auto& s = cc.target.shapes;
  const std::int64_t dk = s.linear_key_head_dim, dv = s.linear_value_head_dim;
  for (DType dt : kBothDtypes) {
    ReferenceModel m(cc.layers, cc.target.shapes, dt);
    const Contents want = run_writes(sc, cc, m, 300, 5);
    // Copies of every layer's state, to corrupt.
    std::vector<std::vector<float>> copy;
    StateView base = m.state_view();
    for (const LayerStateView& v : base.layers)
      copy.emplace_back(v.data, v.data + v.value_heads * v.key_dim * v.value_dim);
    auto view = [&] {
      StateView out = base;
      for (std::size_t l = 0; l < out.layers.size(); ++l) out.layers[l].data = copy[l].data();
      return out;
    };
    ASSERT_TRUE(read_ram(cc, sc.words, view()).has_value());
    int row = -1, empty = -1;
    for (int i = 0; i < 100; ++i) {
      if (want.words[i] != 0 && row < 0) row = i;
      if (!want.words_written[i] && empty < 0) empty = i;
    }
    ASSERT_GE(row, 0);
    // S[layer][head][row][channel] of bit b of a RAM's replica.
    auto cell = [&](int ram, int replica, int r, int b, int rail) -> float& {
      const RamPlacement& p = cc.rams[ram];
      const RamReplica& rep = p.replicas[replica];
      const std::int64_t h = rep.first_value_head + b / p.bits_per_head, ch = 2 * (b % p.bits_per_head) + rail;
      return copy[rep.layer][static_cast<std::size_t>((h * dk + r) * dv + ch)];
    };
    const std::string rn = "read_ram mem.words row " + std::to_string(row);
    {  // both rails of bit 5 hold a 1
      cell(sc.words, 0, row, 5, 0) = static_cast<float>(kValueUnit);
      cell(sc.words, 0, row, 5, 1) = static_cast<float>(kValueUnit);
      std::string e = message(read_ram(cc, sc.words, view()));
      EXPECT_TRUE(contains(e, rn + " bit 5: rails read (")) << e;
      EXPECT_TRUE(contains(e, "from state (64, 64)")) << e;
      EXPECT_TRUE(contains(e, "layer 0")) << e;
      if (dt == DType::kBF16) std::printf("%s\n", e.c_str());
      copy[0] = std::vector<float>(base.layers[0].data, base.layers[0].data + copy[0].size());
    }
    {  // half a one on bit 9's 1 rail
      float& pos = cell(sc.words, 0, row, 9, (want.words[row] >> 9) & 1 ? 0 : 1);
      pos = 32;
      std::string e = message(read_ram(cc, sc.words, view()));
      EXPECT_TRUE(contains(e, rn + " bit 9: rails read (")) << e;
      EXPECT_TRUE(contains(e, "32")) << e;
      copy[0] = std::vector<float>(base.layers[0].data, base.layers[0].data + copy[0].size());
    }
    {  // a clean flip in the layer-1 replica only: the replicas disagree
      const int rail = (want.words[row] >> 3) & 1 ? 0 : 1;
      std::swap(cell(sc.words, 1, row, 3, rail), cell(sc.words, 1, row, 3, 1 - rail));
      std::string e = message(read_ram(cc, sc.words, view()));
      EXPECT_TRUE(contains(e, rn + ": replica 1 (layer 1) reads")) << e;
      EXPECT_TRUE(contains(e, "(bits 0x8 differ)")) << e;
      if (dt == DType::kBF16) std::printf("%s\n", e.c_str());
      auto only0 = read_ram(cc, sc.words, view(), {row, 0});
      ASSERT_TRUE(only0.has_value()) << only0.status().message();
      EXPECT_EQ((*only0)[0], want.words[row]);
      auto only1 = read_ram(cc, sc.words, view(), {row, 1});
      ASSERT_TRUE(only1.has_value());
      EXPECT_EQ((*only1)[0], want.words[row] ^ 8);
      copy[1] = std::vector<float>(base.layers[1].data, base.layers[1].data + copy[1].size());
    }
    {  // a wide row's constant-one pad lost: the row no longer normalizes to exact bits
      int wrow = -1;
      for (int i = 0; i < 60 && wrow < 0; ++i)
        if (want.wide[i] != 0) wrow = i;
      ASSERT_GE(wrow, 0);
      cell(sc.wide, 0, wrow, 48 + 3, 0) = 0;  // pad 3 (bit slot 51 of the two heads)
      std::string e = message(read_ram(cc, sc.wide, view()));
      EXPECT_TRUE(contains(e, "read_ram mem.wide row " + std::to_string(wrow) + " pad 3 (constant 1)")) << e;
      if (dt == DType::kBF16) std::printf("%s\n", e.c_str());
      copy[1] = std::vector<float>(base.layers[1].data, base.layers[1].data + copy[1].size());
    }
    if (empty >= 0) {  // a stray value in a row never written
      cell(sc.words, 0, empty, 17, 0) = 64;
      std::string e = message(read_ram(cc, sc.words, view()));
      EXPECT_TRUE(contains(e, "read_ram mem.words row " + std::to_string(empty) + " bit 0: rails read (0, 0)")) << e;
      copy[0] = std::vector<float>(base.layers[0].data, base.layers[0].data + copy[0].size());
    }
    ASSERT_TRUE(read_ram(cc, sc.words, view()).has_value());  // restored
  }
}

TEST(RamState, BadRequestsNameTheProblem) {
  StateCircuit sc;
  CompiledCircuit cc = must(compile(sc.c, testing::qwen2b_target()));
  ReferenceModel m(cc.layers, cc.target.shapes, DType::kF32);
  StateView v = m.state_view();
  auto fresh = read_ram(cc, sc.words, v);  // nothing written yet: every row reads 0
  ASSERT_TRUE(fresh.has_value()) << fresh.status().message();
  EXPECT_EQ(*fresh, std::vector<std::uint64_t>(100, 0));
  EXPECT_TRUE(contains(message(read_ram(cc, 7, v)), "ram index 7 outside the circuit's 3 rams"));
  EXPECT_TRUE(
      contains(message(read_ram(cc, sc.words, v, {100, -1})), "read_ram mem.words: row 100 outside its 100 rows"));
  EXPECT_TRUE(contains(message(read_ram(cc, sc.words, v, {0, 2})), "replica 2 of 2"));
  StateView short_view = v;
  short_view.layers.resize(1);
  EXPECT_TRUE(contains(message(read_ram(cc, sc.wide, short_view)),
                       "read_ram mem.wide: replica 0 in layer 1: the state view has no state for that layer (1 layers "
                       "given)"));
  StateView wrong = v;
  wrong.layers[0].value_dim = 64;
  EXPECT_TRUE(contains(message(read_ram(cc, sc.small, wrong)),
                       "state is [16][128][64], the target's shapes give [16][128][128]"))
      << message(read_ram(cc, sc.small, wrong));
  auto none = find_ram(cc, "mem.nothing");
  ASSERT_FALSE(none.has_value());
  EXPECT_TRUE(contains(none.status().message(), "no ram named mem.nothing")) << none.status().message();
  // Wider than a word, and a RAM nobody reads.
  Circuit c("edge");
  Word a = must(c.input("w", "a", 3)), d = must(c.input("w", "d", 80)), d2 = must(c.input("w", "d2", 4));
  int big = must(c.add_ram("m", "big", 8, 80)), unread = must(c.add_ram("m", "unread", 8, 4));
  ASSERT_TRUE(c.ram_write(big, a, d, std::nullopt).is_ok());
  must(c.ram_read(big, "x", a, std::nullopt));
  ASSERT_TRUE(c.ram_write(unread, a, d2, std::nullopt).is_ok());
  CompiledCircuit ce = must(compile(c, testing::qwen2b_target()));
  ReferenceModel me(ce.layers, ce.target.shapes, DType::kF32);
  EXPECT_TRUE(contains(message(read_ram(ce, big, me.state_view())),
                       "read_ram m.big: 80 bits wide, a word holds 64 (over by 16; read it 64 bits at a time with "
                       "first_bit)"));
  RamReadOptions window;
  window.first_bit = 80;
  EXPECT_TRUE(contains(message(read_ram(ce, big, me.state_view(), window)), "read_ram m.big: first bit 80 outside its 80 bits"));
  EXPECT_TRUE(contains(message(read_ram(ce, unread, me.state_view())), "read_ram m.unread: no port reads it"));
}

// A transposed store (Sᵀ per head, as a backend might keep it) read through strides.
TEST(RamState, StridedViewsReadTheSame) {
  StateCircuit sc;
  CompiledCircuit cc = must(compile(sc.c, testing::qwen2b_target()));
  ReferenceModel m(cc.layers, cc.target.shapes, DType::kBF16);
  const Contents want = run_writes(sc, cc, m, 200, 11);
  StateView v = m.state_view();
  std::vector<std::vector<float>> t;
  t.reserve(v.layers.size());  // the views point into t
  for (LayerStateView& l : v.layers) {
    std::vector<float> tr(static_cast<std::size_t>(l.value_heads * l.key_dim * l.value_dim));
    for (std::int64_t h = 0; h < l.value_heads; ++h)
      for (std::int64_t i = 0; i < l.key_dim; ++i)
        for (std::int64_t j = 0; j < l.value_dim; ++j)
          tr[static_cast<std::size_t>((h * l.value_dim + j) * l.key_dim + i)] = l.at(h, i, j);
    t.push_back(std::move(tr));
    l.data = t.back().data();
    l.strides[0] = l.key_dim * l.value_dim;
    l.strides[1] = 1;
    l.strides[2] = l.key_dim;
  }
  auto got = read_ram(cc, sc.words, v);
  ASSERT_TRUE(got.has_value()) << got.status().message();
  EXPECT_EQ(*got, want.words);
}

}  // namespace
}  // namespace qgpu::weights

namespace qgpu::weights {
namespace {

// Circuit::ram_clear: a token with the clear bit erases every row (through the decay
// gate) before its own write; other tokens, and text tokens whose clear rails happen to
// read 1 (the mute channel negative), keep every row.
TEST(RamState, ClearErasesEveryRowBeforeTheTokensWrite) {
  Circuit c{"clear"};
  const Word wa = must(c.input("w", "addr", 4)), wd = must(c.input("w", "data", 32)), we = must(c.input("w", "we", 1));
  const Word clr = must(c.input("w", "clear", 1)), ra = must(c.input("r", "addr", 4));
  const int ram = must(c.add_ram("mem", "rows", 16, 32));
  ASSERT_TRUE(c.ram_write(ram, wa, wd, we[0]).is_ok());
  ASSERT_TRUE(c.ram_clear(ram, clr[0]).is_ok());
  EXPECT_FALSE(c.ram_clear(ram, clr[0]).is_ok());  // one clear bit per RAM
  const Word out = must(c.ram_read(ram, "read", ra, std::nullopt));
  Target t = testing::qwen2b_target();
  t.mute_channel = true;
  CompiledCircuit cc = must(compile(c, t));
  ASSERT_GE(cc.allocation.mute, 0);
  for (DType dt : kBothDtypes) {
    ReferenceModel m(cc.layers, cc.target.shapes, dt);
    std::mt19937_64 rng(5);
    std::vector<std::uint64_t> model(16, 0);
    int wrong = 0, reads = 0;
    auto step = [&](std::uint64_t a, std::uint64_t d, bool w, bool clear, std::uint64_t r, bool text) {
      std::vector<float> x = embed(c, cc.allocation, {{wa, a}, {wd, d}, {we, w}, {clr, clear}, {ra, r}});
      if (text) x[static_cast<std::size_t>(cc.allocation.mute)] = -0.5f * kResidualUnit;  // a text token
      const std::vector<float> y = m.step(x);
      if (!text) {
        if (clear) std::fill(model.begin(), model.end(), 0);
        if (w) model[a] = d;
        bool exact = true;
        wrong += read_word(cc.allocation, y, out, &exact) != model[r] || !exact;
        ++reads;
      }
    };
    for (int round = 0; round < 6; ++round) {
      for (int i = 0; i < 20; ++i) step(rng() % 16, testing::operand(rng), rng() % 3 != 0, false, rng() % 16, false);
      step(rng() % 16, rng() & 0xFFFFFFFFu, true, true, rng() % 16, true);               // text: nothing happens
      step(rng() % 16, testing::operand(rng), round % 2 == 0, true, rng() % 16, false);  // clear (+ a write)
      for (int r = 0; r < 16; ++r) step(0, 0, false, false, static_cast<std::uint64_t>(r), false);
    }
    auto rows = read_ram(cc, ram, m.state_view());
    ASSERT_TRUE(rows.has_value()) << rows.status().message();
    for (int r = 0; r < 16; ++r) wrong += (*rows)[static_cast<std::size_t>(r)] != model[static_cast<std::size_t>(r)];
    EXPECT_EQ(wrong, 0) << dtype_name(dt);
    std::printf("[ %s ] ram_clear: %d reads and 16 state rows, %d wrong\n", std::string(dtype_name(dt)).c_str(), reads,
                wrong);
  }
}

}  // namespace
}  // namespace qgpu::weights
