// Read ports sharing one output field (Circuit::ram_read_shared) under one-hot
// enables, the mute gain on previous() value channels (text tokens in the conv
// window), Target::mute_index, and the residual limit under channel reuse —
// through the reference layer math in fp32 and bf16 against plain C++ models.
#include <algorithm>
#include <array>
#include <cstdio>
#include <limits>

#include "harness.h"

namespace qgpu::weights {
namespace {

using testing::kBothDtypes;
using testing::must;

constexpr int kRams = 8, kWindowRams = 4, kRows = 32;

// 8 RAMs (32 rows x 32 bits) read into ONE 32-bit field, each port z-gated by a bit
// of the declared one-hot input `sel`; and a 64-bit window written by 4 RAMs in two
// halves, each half-pair enabled by a bit of a lookup's one-hot output.
struct SharedCircuit {
  Circuit c{"shared"};
  Word waddr, wdata, we, raddr, sel, wsel, out, onehot, window;
  SharedCircuit() {
    waddr = must(c.input("w", "addr", 5));
    wdata = must(c.input("w", "data", 32));
    we = must(c.input("w", "we", kRams + kWindowRams));
    raddr = must(c.input("r", "addr", 5));
    sel = must(c.input("r", "sel", kRams));
    wsel = must(c.input("r", "wsel", 2));
    EXPECT_TRUE(c.declare_one_hot(sel).is_ok());
    std::vector<int> rams;
    for (int k = 0; k < kRams + kWindowRams; ++k) {
      rams.push_back(must(c.add_ram("mem", "r" + std::to_string(k), kRows, 32)));
      EXPECT_TRUE(c.ram_write(rams.back(), waddr, wdata, we[k]).is_ok());
    }
    std::vector<RamReadSpec> ports;
    for (int k = 0; k < kRams; ++k) ports.push_back(RamReadSpec{rams[k], raddr, sel[k], 0});
    out = must(c.ram_read_shared("r", "out", ports));
    // wsel 1 -> bit 0, 2 -> bit 1, else none: single-bit cubes, so the lookup declares its output one-hot.
    onehot = must(lookup(c, "r", "onehot", wsel, 2, {Cube{1, 3, 1}, Cube{2, 3, 2}}));
    std::vector<RamReadSpec> halves;
    for (int k = 0; k < kWindowRams; ++k)
      halves.push_back(RamReadSpec{rams[kRams + k], raddr, onehot[k / 2], 32 * (k % 2)});
    window = must(c.ram_read_shared("r", "window", halves));
  }
};

TEST(SharedRead, EightRamsIntoOneFieldUnderOneHotEnables) {
  SharedCircuit sc;
  CompiledCircuit cc = must(compile(sc.c, testing::qwen2b_target()));
  ASSERT_EQ(static_cast<int>(sc.out.size()), 32);
  ASSERT_EQ(static_cast<int>(sc.window.size()), 64);
  ASSERT_EQ(cc.schedule.num_layers, 2);
  EXPECT_EQ(cc.schedule.use[0].key_heads, kRams);        // the 8 ports share one Gated DeltaNet sub-layer
  EXPECT_EQ(cc.schedule.use[1].key_heads, kWindowRams);  // after the lookup's MLP
  int input_bits = 0;
  for (const Field& f : sc.c.fields()) input_bits += f.kind == FieldKind::kInput ? f.width : 0;
  std::printf(
      "shared reads: %d layers, key heads %lld + %lld, %lld MLP neurons, %d channels (%d without the "
      "test's %d input bits)\n",
      cc.schedule.num_layers, static_cast<long long>(cc.schedule.use[0].key_heads),
      static_cast<long long>(cc.schedule.use[1].key_heads), static_cast<long long>(cc.total_neurons()),
      cc.allocation.channels_used, cc.allocation.channels_used - 2 * input_bits, input_bits);
  constexpr int kTokens = 1500;
  for (DType dt : kBothDtypes) {
    ReferenceModel model(cc.layers, cc.target.shapes, dt);
    std::mt19937_64 rng(2024);
    std::array<std::array<std::uint32_t, kRows>, kRams + kWindowRams> mem{};
    int wrong = 0, inexact = 0, enabled = 0;
    for (int t = 0; t < kTokens; ++t) {
      const std::uint32_t wa = rng() % kRows, wd = testing::operand(rng), ra = rng() % kRows;
      const std::uint32_t we = static_cast<std::uint32_t>(rng()) & ((1u << (kRams + kWindowRams)) - 1);
      const int k = static_cast<int>(rng() % (kRams + 1));  // kRams: no port enabled
      const std::uint32_t sel = k < kRams ? 1u << k : 0u, wsel = rng() % 4;
      auto y = model.step(
          embed(sc.c, cc.allocation,
                {{sc.waddr, wa}, {sc.wdata, wd}, {sc.we, we}, {sc.raddr, ra}, {sc.sel, sel}, {sc.wsel, wsel}}));
      for (int r = 0; r < kRams + kWindowRams; ++r)
        if ((we >> r) & 1) mem[r][wa] = wd;  // a read in the writing token sees the write
      const std::uint32_t want = k < kRams ? mem[k][ra] : 0;
      std::uint64_t want_window = 0;
      if (wsel == 1 || wsel == 2) {
        const int base = kRams + 2 * static_cast<int>(wsel - 1);
        want_window = mem[base][ra] | static_cast<std::uint64_t>(mem[base + 1][ra]) << 32;
      }
      enabled += k < kRams;
      wrong += read_word(cc.allocation, y, sc.out) != want;
      wrong += read_word(cc.allocation, y, sc.window) != want_window;
      if (!testing::residual_exact(sc.c, cc.allocation, y)) ++inexact;
    }
    EXPECT_EQ(wrong, 0) << dtype_name(dt);
    EXPECT_EQ(inexact, 0) << dtype_name(dt);
    for (const LayerMargin& m : model.margins()) EXPECT_EQ(m.gdn_min, kGain) << m.gdn_where;
    std::printf("[ %s ] %d tokens (%d with a port enabled), %d wrong words\n%s", std::string(dtype_name(dt)).c_str(),
                kTokens, enabled, wrong, model.margin_report().c_str());
  }
}

TEST(SharedRead, NonExclusiveEnablesAreRefused) {
  Circuit c("bad");
  Word a = must(c.input("w", "addr", 5)), d = must(c.input("w", "data", 32));
  Word e1 = must(c.input("r", "e1", 2)), e2 = must(c.input("r", "e2", 1)), oh = must(c.input("r", "oh", 3));
  ASSERT_OK(c.declare_one_hot(oh));
  std::vector<int> r;
  for (int k = 0; k < 3; ++k) {
    r.push_back(must(c.add_ram("mem", "r" + std::to_string(k), kRows, 32)));
    ASSERT_OK(c.ram_write(r.back(), a, d, std::nullopt));
  }
  auto refused = [&](const std::vector<RamReadSpec>& ports, const std::string& name, const std::string& says) {
    const std::size_t fields = c.fields().size(), ops = c.ops().size();
    auto w = c.ram_read_shared("r", name, ports);
    ASSERT_FALSE(w.has_value()) << name;
    EXPECT_NE(w.status().message().find(says), std::string::npos) << w.status().message();
    EXPECT_EQ(c.fields().size(), fields) << "a refused port group leaves no field behind";
    EXPECT_EQ(c.ops().size(), ops);
  };
  const std::string not_one_hot = "not distinct bits of one group declared one-hot";
  // Bits of a field nobody declared one-hot.
  refused({{r[0], a, e1[0], 0}, {r[1], a, e1[1], 0}}, "x1", not_one_hot);
  // Bits of two different fields.
  refused({{r[0], a, oh[0], 0}, {r[1], a, e2[0], 0}}, "x2", not_one_hot);
  // The same bit twice, and a negated bit of the one-hot field.
  refused({{r[0], a, oh[0], 0}, {r[1], a, oh[0], 0}}, "x3", not_one_hot);
  refused({{r[0], a, oh[0], 0}, {r[1], a, !oh[1], 0}}, "x4", not_one_hot);
  // Partial overlap is an overlap; the message names both ports and the bits.
  refused({{r[0], a, oh[0], 0}, {r[1], a, e2[0], 16}}, "x5", "both write bits 16..31");
  refused({{r[0], a, oh[0], 0}, {r[1], a, oh[1], 40}}, "x6", "bit 32 is written by no port");
  // A lookup whose cube sets two bits is not one-hot.
  Word two = must(lookup(c, "r", "two", e1, 2, {Cube{3, 3, 3}}));
  refused({{r[0], a, two[0], 0}, {r[1], a, two[1], 0}}, "x7", not_one_hot);
  EXPECT_FALSE(c.declare_one_hot(Word{oh[0], e2[0]}).is_ok());
  // Accepted: exclusive bits overlapping, and disjoint ranges under any enables.
  ASSERT_TRUE(
      c.ram_read_shared("r", "ok1", {{r[0], a, oh[0], 0}, {r[1], a, oh[2], 0}, {r[2], a, oh[1], 0}}).has_value());
  ASSERT_TRUE(c.ram_read_shared("r", "ok2", {{r[0], a, e2[0], 0}, {r[1], a, e2[0], 32}}).has_value());
  // A later MLP may not write a shared field's bits.
  Word ok3 = must(c.ram_read_shared("r", "ok3", {{r[2], a, e1[0], 0}}));
  MlpBuilder mb(c);
  mb.constant({Term{ok3[0], 1}});
  EXPECT_FALSE(mb.commit("overwrite_read").is_ok());
}

// A text token in the conv window of a previous() head: the mute gain on its value
// channels makes it read as 0 (as an empty window does) instead of leaking.
TEST(MuteWindow, TextTokensInTheConvWindowReadAsZero) {
  Circuit c("window");
  Word src = must(c.input("p", "src", 16)), wide = must(c.input("p", "wide", 40));
  std::array<Word, 3> prev;
  for (int lag = 1; lag <= 3; ++lag)
    prev[lag - 1] = must(c.previous("lag" + std::to_string(lag), src, lag, std::nullopt));
  Word prev_wide = must(c.previous("wide2", wide, 2, std::nullopt));  // two heads, the second padded with ones
  Target t = testing::qwen2b_target();
  t.mute_channel = true;
  CompiledCircuit cc = must(compile(c, t));
  // The same layers without the gain on the value channels: what the merge measured leaking.
  std::vector<Layer> unmuted = cc.layers;
  const std::int64_t kq = t.shapes.linear_num_key_heads * t.shapes.linear_key_head_dim;
  int muted_rows = 0;
  for (Layer& l : unmuted) {
    const SparseMatrix& m = l.gdn.in_proj_qkv;
    SparseBuilder b(m.rows, m.cols);
    for (std::int64_t r = 0; r < m.rows; ++r)
      for (std::int64_t k = m.row_ptr[r]; k < m.row_ptr[r + 1]; ++k) {
        const bool mute = r >= 2 * kq && m.col[k] == cc.allocation.mute;
        muted_rows += mute;
        if (!mute) b.add(r, m.col[k], m.val[k]);
      }
    l.gdn.in_proj_qkv = b.build();
  }
  EXPECT_EQ(muted_rows, 3 * (2 * 16 + 16) + (2 * 40 + 24));  // both rails of every bit, and the constant-one pads
  for (DType dt : kBothDtypes) {
    for (int variant = 0; variant < 2; ++variant) {
      ReferenceModel model(variant == 0 ? cc.layers : unmuted, t.shapes, dt);
      std::mt19937_64 rng(7);
      std::normal_distribution<float> text(0.0f, 0.03f);
      std::vector<std::uint64_t> hist, hist_wide;  // per token: the value, or 0 for text (an empty window reads 0)
      int wrong = 0, changed = 0, inexact = 0, after_text = 0;
      for (int step = 0; step < 600; ++step) {
        if (rng() % 5 < 2) {  // text: arbitrary values, mute channel negative
          std::vector<float> x(static_cast<std::size_t>(t.shapes.hidden_size));
          for (float& v : x) v = round_to(dt, text(rng));
          x[cc.allocation.mute] = round_to(dt, -std::fabs(text(rng)) - 1e-3f);
          changed += model.step(x) != x;
          hist.push_back(0);
          hist_wide.push_back(0);
          continue;
        }
        const std::uint64_t v = rng() & 0xFFFF, vw = rng() & 0xFFFFFFFFFFull;
        auto y = model.step(embed(c, cc.allocation, {{src, v}, {wide, vw}}));
        const std::size_t n = hist.size();
        for (int lag = 1; lag <= 3; ++lag) {
          const std::uint64_t want = n >= static_cast<std::size_t>(lag) ? hist[n - lag] : 0;
          wrong += read_word(cc.allocation, y, prev[lag - 1]) != want;
        }
        wrong += read_word(cc.allocation, y, prev_wide) != (n >= 2 ? hist_wide[n - 2] : 0);
        after_text += n >= 1 && hist[n - 1] == 0;
        if (!testing::residual_exact(c, cc.allocation, y)) ++inexact;
        hist.push_back(v);
        hist_wide.push_back(vw);
      }
      EXPECT_EQ(changed, 0) << dtype_name(dt);
      if (variant == 0) {
        EXPECT_EQ(wrong, 0) << dtype_name(dt);
        EXPECT_EQ(inexact, 0) << dtype_name(dt);
        // (No margin check: on text tokens the unmuted constant q/k of these heads see arbitrary
        // values; beta and z are muted there, so they write and output exactly 0.)
      } else {
        EXPECT_GT(wrong, 0) << dtype_name(dt) << ": the test cannot see the leak";
      }
      std::printf(
          "[ %s ] %s: 600 tokens (text 40 %%, %d circuit tokens right after text), %d wrong reads, %d text "
          "tokens changed\n",
          std::string(dtype_name(dt)).c_str(), variant == 0 ? "value channels muted" : "without the gain", after_text,
          wrong, changed);
    }
  }
}

// The mute channel at a given index: a pair-preserving permutation of the
// others (a field across the index is scattered around it); the circuit
// computes the same and text tokens stay silent.
TEST(MuteIndex, PlacesTheMuteChannelAndKeepsTheCircuitExact) {
  for (int m : {0, 1, 2, 57, 100, 2047}) {
    Circuit c("idx");
    Word a = must(c.input("x", "a", 32)), b = must(c.input("x", "b", 32));
    AddResult s = must(add(c, "x", "sum", a, b, c.zero()));
    Word p = must(c.previous("prev_a", a, 1, std::nullopt));
    for (bool reuse : {false, true}) {
      Target t = testing::qwen2b_target();
      t.mute_channel = true;
      t.mute_index = m;
      t.reuse_channels = reuse;
      t.reuse_eagerly = reuse;
      CompiledCircuit cc = must(compile(c, t));
      ASSERT_EQ(cc.allocation.mute, m);
      EXPECT_GT(cc.allocation.channels_used, m);
      bool across = false;  // some field's channels lie on both sides of m
      for (std::size_t f = 0; f < c.fields().size(); ++f) {
        int lo = std::numeric_limits<int>::max(), hi = -1;
        for (int bit = 0; bit < c.fields()[f].width; ++bit) {
          const int ch = cc.allocation.channel(Bit{static_cast<int>(f), bit, false});
          EXPECT_NE(ch, m);
          lo = std::min(lo, ch);
          hi = std::max(hi, ch);
        }
        across = across || (lo < m && hi > m);
      }
      if (!reuse && (m == 57 || m == 100)) {
        EXPECT_TRUE(across) << m;
      }
      for (DType dt : kBothDtypes) {
        ReferenceModel model(cc.layers, t.shapes, dt);
        std::mt19937_64 rng(static_cast<unsigned>(m));
        std::normal_distribution<float> text(0.0f, 0.03f);
        int wrong = 0, changed = 0, inexact = 0;
        std::uint32_t last = 0;
        for (int step = 0; step < 120; ++step) {
          if (step % 3 == 1) {
            std::vector<float> x(static_cast<std::size_t>(t.shapes.hidden_size));
            for (float& v : x) v = round_to(dt, text(rng));
            x[static_cast<std::size_t>(m)] = round_to(dt, -std::fabs(text(rng)) - 1e-3f);
            changed += model.step(x) != x;
            last = 0;
            continue;
          }
          const std::uint32_t av = testing::operand(rng), bv = testing::operand(rng);
          auto y = model.step(embed(c, cc.allocation, {{a, av}, {b, bv}}));
          wrong += read_word(cc.allocation, y, s.sum) != static_cast<std::uint32_t>(av + bv);
          wrong += read_word(cc.allocation, y, p) != last;
          inexact += !testing::residual_exact(c, cc.allocation, y);
          inexact += y[static_cast<std::size_t>(m)] != 0;
          last = av;
        }
        EXPECT_EQ(wrong, 0) << "mute_index " << m << " " << dtype_name(dt);
        EXPECT_EQ(changed, 0) << "mute_index " << m << " " << dtype_name(dt);
        EXPECT_EQ(inexact, 0) << "mute_index " << m << " " << dtype_name(dt);
      }
    }
  }
  Circuit c("idx");
  must(c.input("x", "a", 8));
  Target t = testing::qwen2b_target();
  t.mute_index = 5;
  auto off = compile(c, t);
  ASSERT_FALSE(off.has_value());
  EXPECT_NE(off.status().message().find("mute_channel is off"), std::string::npos) << off.status().message();
  t.mute_channel = true;
  t.mute_index = 2048;
  auto out = compile(c, t);
  ASSERT_FALSE(out.has_value());
  EXPECT_NE(out.status().message().find("mute_index 2048 outside the residual: hidden size 2048"), std::string::npos)
      << out.status().message();
}

// Reuse cannot shrink what is live at once: a circuit whose live bits exceed
// the residual still fails, naming the channels, the overflow and the live peak.
TEST(Reuse, TooBigStillFailsWithTheLivePeakInTheMessage) {
  Circuit c("big");
  // 3 x 200 input bits, each read by an MLP in layer 1 (after a copy in layer 0): all live together.
  std::vector<Word> in, late;
  for (int k = 0; k < 3; ++k) in.push_back(must(c.input("big", "in" + std::to_string(k), 200)));
  Word gate = must(copy(c, "big", "gate", Word{in[0][0]}));
  for (int k = 0; k < 3; ++k) late.push_back(must(scale_by_bit(c, "big", "late" + std::to_string(k), gate[0], in[k])));
  Target t = testing::qwen2b_target();
  t.shapes.hidden_size = 512;  // the constants, 1 bit + ~510 channels
  for (bool eager : {false, true}) {
    t.reuse_channels = true;
    t.reuse_eagerly = eager;
    auto cc = compile(c, t);
    ASSERT_FALSE(cc.has_value());
    const std::string msg = cc.status().message();
    EXPECT_NE(msg.find("residual: "), std::string::npos) << msg;
    EXPECT_NE(msg.find("(over by "), std::string::npos) << msg;
    EXPECT_NE(msg.find("at most 602 bits live at once"), std::string::npos) << msg;
    std::printf("%s reuse: %s\n", eager ? "eager" : "lazy", msg.c_str());
  }
}

}  // namespace
}  // namespace qgpu::weights
