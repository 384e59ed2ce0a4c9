// Liveness-based channel reuse (Target::reuse_channels): circuits that only fit
// the residual when dead fields give their channels to later ones, run through
// the reference layer math in fp32 and bf16 against plain C++.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>

#include "harness.h"

namespace qgpu::weights {
namespace {

using testing::kBothDtypes;
using testing::must;

Target small_target(std::int64_t hidden, std::int64_t intermediate) {
  Target t = testing::qwen2b_target();
  t.shapes.hidden_size = hidden;
  t.shapes.intermediate_size = intermediate;
  return t;
}

Target reusing(Target t, bool eagerly) {
  t.reuse_channels = true;
  t.reuse_eagerly = eagerly;
  return t;
}

// x_k = x_{k-1} + b (k = 1..n, x_0 = a) under the enable `en`: every adder's
// intermediates and every x_k but the last die two MLPs after they are written.
struct AddChain {
  Circuit c{"chain"};
  Word a, b, en;
  std::vector<Word> x;
  explicit AddChain(int n) {
    a = must(c.input("chain", "a", 32));
    b = must(c.input("chain", "b", 32));
    en = must(c.input("chain", "en", 1));
    c.push_enable(en[0]);
    x.push_back(a);
    for (int k = 1; k <= n; ++k) x.push_back(must(add(c, "chain", "x" + std::to_string(k), x.back(), b, c.zero())).sum);
    c.pop_enable();
  }
  std::uint32_t want(std::uint32_t av, std::uint32_t bv, bool e) const {
    return e ? av + static_cast<std::uint32_t>(x.size() - 1) * bv : 0;
  }
};

int field_channels(const Allocation& a) {  // channels of the field region (const_hi, mute and pads excluded)
  return a.channels_used - 1 - (a.mute >= 0 ? 1 : 0) - static_cast<int>(a.pad_channel.size());
}

void report(const char* what, const Circuit& c, const CompiledCircuit& cc) {
  int scattered = 0;
  for (const auto& v : cc.allocation.bit_channel) scattered += !v.empty();
  std::printf(
      "%s: %d layers, %lld MLP neurons (%zu clears of %lld neurons before merging with identical ones), %d residual "
      "channels, "
      "%d field channels (%d fields scattered), at most %d bits live at once\n",
      what, cc.schedule.num_layers, static_cast<long long>(cc.total_neurons()), cc.allocation.clears.size(),
      static_cast<long long>(clear_neurons(c, cc.allocation)), cc.allocation.channels_used,
      field_channels(cc.allocation), scattered, cc.allocation.live_peak);
}

// Runs `tokens` random tokens (a third with en = 0) and counts wrong results and inexact residuals.
void run_chain(const AddChain& ch, const CompiledCircuit& cc, int tokens, std::uint64_t seed) {
  for (DType dt : kBothDtypes) {
    ReferenceModel m(cc.layers, cc.target.shapes, dt);
    std::mt19937_64 rng(seed);
    int wrong = 0, inexact = 0, leaked = 0;
    for (int t = 0; t < tokens; ++t) {
      const std::uint32_t av = testing::operand(rng), bv = testing::operand(rng);
      const bool e = rng() % 3 != 0;
      auto y = m.step(embed(ch.c, cc.allocation, {{ch.a, av}, {ch.b, bv}, {ch.en, e}}));
      bool exact = true;
      wrong += read_word(cc.allocation, y, ch.x.back(), &exact) != ch.want(av, bv, e);
      inexact += !exact || !testing::residual_exact(ch.c, cc.allocation, y);
      if (!e)  // every computed field that is still on its channels reads 0
        for (std::size_t k = 1; k < ch.x.size(); ++k) {
          const int carry = ch.c.find_field("chain.x" + std::to_string(k) + ".carry");
          leaked += read_word(cc.allocation, y, Word{Bit{carry, 0, false}}) != 0;
        }
    }
    double margin = 1e30;
    for (const LayerMargin& lm : m.margins()) margin = std::min(margin, lm.mlp_min);
    std::printf("[ %s ] %d tokens: %d wrong, %d inexact, %d leaked; smallest MLP switch margin %g\n",
                std::string(dtype_name(dt)).c_str(), tokens, wrong, inexact, leaked, margin);
    EXPECT_EQ(wrong, 0) << dtype_name(dt);
    EXPECT_EQ(inexact, 0) << dtype_name(dt);
    EXPECT_EQ(leaked, 0) << dtype_name(dt);
    EXPECT_GE(margin, 88.73) << dtype_name(dt);
  }
}

// Hidden 512 holds 253 dual-rail bits; the six adders' fields need about 600.
TEST(Reuse, ChainFitsOnlyWithReuse) {
  AddChain ch(6);
  Target t = small_target(512, 1024);
  t.reuse_channels = false;  // explicit: the default may change
  auto plain = compile(ch.c, t);
  ASSERT_FALSE(plain.has_value());
  EXPECT_NE(plain.status().message().find("residual"), std::string::npos) << plain.status().message();
  std::printf("without reuse: %s\n", plain.status().message().c_str());
  CompiledCircuit cc = must(compile(ch.c, reusing(t, false)));
  report("with reuse (when needed)", ch.c, cc);
  EXPECT_FALSE(cc.allocation.clears.empty());
  EXPECT_LE(cc.allocation.channels_used, 512);
  run_chain(ch, cc, 1000, 11);
}

// Eager reuse: every dead adder's intermediates go to later fields.
TEST(Reuse, ChainIntermediatesDieAndTheirChannelsAreReused) {
  constexpr int kAdds = 6;
  AddChain ch(kAdds);
  const Target t = small_target(512, 1024);
  CompiledCircuit cc = must(compile(ch.c, reusing(t, true)));
  report("eager reuse", ch.c, cc);
  const Allocation& al = cc.allocation;
  const auto& fields = ch.c.fields();
  // The field region is never smaller than what is live at once; fragmentation costs at most a word.
  EXPECT_GE(field_channels(al), al.live_peak);
  EXPECT_LE(field_channels(al), al.live_peak + 32);
  // Bits live at once, by hand: const.one, b, en, the carries so far, x_{k-1} being read by adder k
  // (32) and adder k's sums s0, s1 (24 each), G, P (3 each) written in its first MLP: at most
  // 1 + 32 + 1 + 6 + 32 + 54 + ... The measured peak must sit well below the 600-odd bits of all fields.
  int all_bits = 0;
  for (const Field& f : fields)
    if (f.alias_of < 0) all_bits += f.width;
  EXPECT_LT(al.live_peak * 2, all_bits);
  // The intermediates of adders 1..kAdds-2 and their sums x_1..x_{kAdds-2} end on channels a later field takes.
  int reused = 0, dead = 0;
  for (std::size_t f = 0; f < fields.size(); ++f) {
    const std::string& n = fields[f].name;
    if (n.size() < 2 || n[0] != 'x' || n.find(".carry") != std::string::npos) continue;
    const int k = std::stoi(n.substr(1));
    if (k > kAdds - 2) continue;
    ++dead;
    const int lo = al.field_base[f], hi = lo + 2 * fields[f].width;
    bool taken = false;
    for (std::size_t g = f + 1; g < fields.size() && !taken; ++g)
      taken = al.field_base[g] < hi && al.field_base[g] + 2 * fields[g].width > lo;
    reused += taken;
    EXPECT_TRUE(taken) << fields[f].full_name() << " keeps its channels";
  }
  std::printf("%d of %d dead adder fields gave their channels to later fields\n", reused, dead);
  run_chain(ch, cc, 800, 12);
}

// Every pair holds exactly (0,1) or (1,0) at every sub-layer boundary, whatever
// field it currently carries: mean(x²) is exactly 64 at every norm on real tokens.
TEST(Reuse, SumOfSquaresStaysExactAtEverySublayer) {
  AddChain ch(6);
  const Target t = small_target(512, 1024);
  CompiledCircuit cc = must(compile(ch.c, reusing(t, true)));
  ASSERT_FALSE(cc.allocation.clears.empty());
  const auto& sh = cc.target.shapes;
  // Model k runs sub-layers 0..k-1: layers [0, k/2) plus, for odd k, layer k/2's mixer alone.
  std::vector<std::vector<Layer>> prefixes;
  for (int k = 1; k <= 2 * cc.schedule.num_layers; ++k) {
    std::vector<Layer> p(cc.layers.begin(), cc.layers.begin() + (k + 1) / 2);
    if (k % 2 == 1) {
      p.back().mlp = MlpLayer{};
      p.back().mlp.gate = SparseBuilder(sh.intermediate_size, sh.hidden_size).build();
      p.back().mlp.up = SparseBuilder(sh.intermediate_size, sh.hidden_size).build();
      p.back().mlp.down = SparseBuilder(sh.hidden_size, sh.intermediate_size).build();
    }
    prefixes.push_back(std::move(p));
  }
  for (DType dt : kBothDtypes) {
    std::vector<ReferenceModel> models;
    for (const auto& p : prefixes) models.emplace_back(p, sh, dt);
    std::mt19937_64 rng(13);
    int off = 0, checked = 0;
    for (int t = 0; t < 48; ++t) {
      const std::uint32_t av = testing::operand(rng), bv = testing::operand(rng);
      const auto x0 = embed(ch.c, cc.allocation, {{ch.a, av}, {ch.b, bv}, {ch.en, t % 4 != 0}});
      for (auto& m : models) {
        const auto y = m.step(x0);
        double ss = 0;
        for (float v : y) ss += static_cast<double>(v) * v;
        off += ss / static_cast<double>(y.size()) != 64.0;
        ++checked;
      }
    }
    std::printf("[ %s ] mean(x^2) checked at %d sub-layer boundaries: %d not exactly 64\n",
                std::string(dtype_name(dt)).c_str(), checked, off);
    EXPECT_EQ(off, 0) << dtype_name(dt);
  }
}

// A RAM whose write data is computed in MLP 0 and whose second read port sits in
// layer 3: the write data must keep its channels until the last replica reads it.
TEST(Reuse, RamWriteDataLivesUntilTheLastReplica) {
  constexpr int kRamTokens = 1500;
  Circuit c("ramreuse");
  Word wa = must(c.input("w", "addr", 4)), wd_in = must(c.input("w", "data_in", 32));
  Word we = must(c.input("w", "we", 1)), ra = must(c.input("r", "addr", 4)), ra2 = must(c.input("r", "addr2", 4));
  Word p = must(c.input("f", "p", 32));
  Word wd = must(copy(c, "w", "data", wd_in));  // written by MLP 0
  int mem = must(c.add_ram("m", "mem", 16, 32));
  ASSERT_OK(c.ram_write(mem, wa, wd, we[0]));
  Word read0 = must(c.ram_read(mem, "read0", ra, std::nullopt));  // layer 1
  Word late = ra2;
  for (int k = 0; k < 3; ++k) late = must(copy(c, "r", "late" + std::to_string(k), late));
  Word read1 = must(c.ram_read(mem, "read1", late, std::nullopt));  // layer 3
  // Filler: a chain of copies of p, each dead after the next; they want channels in layers 1..3.
  Word f = p;
  for (int k = 0; k < 5; ++k) f = must(bitwise(c, "f", "t" + std::to_string(k), Logic::kXor, f, wd_in));
  Target t = small_target(256, 1024);
  t.reuse_channels = false;                 // explicit: the default may change
  ASSERT_FALSE(compile(c, t).has_value());  // about 346 bits: over the 255 of hidden 256
  CompiledCircuit cc = must(compile(c, reusing(t, true)));
  report("ram + filler, eager reuse", c, cc);
  int read1_layer = -1;
  for (std::size_t i = 0; i < c.ops().size(); ++i)
    if (c.ops()[i].name == "m.mem.read.read1") read1_layer = cc.schedule.op_layer[i];
  ASSERT_EQ(read1_layer, 3);
  const auto live = live_ranges(c, cc.target, cc.schedule);
  EXPECT_EQ(live[wd.front().field].start, 1);                      // MLP 0
  EXPECT_EQ(live[wd.front().field].free_from(), 2 * read1_layer);  // the Gated DeltaNet of layer 3
  EXPECT_FALSE(cc.allocation.clears.empty());
  for (DType dt : kBothDtypes) {
    ReferenceModel m(cc.layers, cc.target.shapes, dt);
    std::mt19937_64 rng(21);
    std::uint32_t model[16] = {};
    int wrong = 0, inexact = 0;
    for (int tok = 0; tok < kRamTokens; ++tok) {
      const std::uint32_t a = rng() % 16, d = testing::operand(rng), r = rng() % 16, r2 = rng() % 16,
                          pv = testing::operand(rng);
      const bool w = rng() % 2;
      auto y = m.step(embed(c, cc.allocation, {{wa, a}, {wd_in, d}, {we, w}, {ra, r}, {ra2, r2}, {p, pv}}));
      if (w) model[a] = d;
      bool exact = true;
      wrong += read_word(cc.allocation, y, read0, &exact) != model[r];
      wrong += read_word(cc.allocation, y, read1, &exact) != model[r2];
      wrong += read_word(cc.allocation, y, f, &exact) != (pv ^ (5 % 2 ? d : 0u));
      inexact += !exact || !testing::residual_exact(c, cc.allocation, y);
    }
    std::printf("[ %s ] %d tokens: %d wrong, %d inexact\n", std::string(dtype_name(dt)).c_str(), kRamTokens, wrong,
                inexact);
    EXPECT_EQ(wrong, 0) << dtype_name(dt);
    EXPECT_EQ(inexact, 0) << dtype_name(dt);
  }
  // Moving the write data onto a field written in layer 2 is refused, naming both fields and the layer.
  CompiledCircuit bad = cc;
  const int victim = c.find_field("f.t2");
  ASSERT_GE(victim, 0);
  bad.allocation.field_base[victim] = bad.allocation.field_base[wd.front().field];
  sdk::Status st = check_allocation(c, cc.target, cc.schedule, bad.allocation);
  ASSERT_FALSE(st.is_ok());
  std::printf("refused: %s\n", st.message().c_str());
  EXPECT_NE(st.message().find("w.data"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("f.t2"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("both live in layer"), std::string::npos) << st.message();
}

// x -> y1 -> y2 -> ... copies: a clear of x fits only where an MLP has room for it.
TEST(Reuse, ClearsRespectTheNeuronBudget) {
  Circuit c("copies");
  Word x = must(c.input("chain", "x", 32));
  Word y = x;
  for (int k = 1; k <= 6; ++k) y = must(copy(c, "chain", "y" + std::to_string(k), y));
  // Hidden 128: 123 channels besides the constant and 4 pads; 7 words of 32 do not fit, 3 at once do.
  auto full = compile(c, reusing(small_target(128, 32), false));  // every MLP holds its copy: no room
  ASSERT_FALSE(full.has_value());
  const std::string msg = full.status().message();
  std::printf("refused: %s\n", msg.c_str());
  EXPECT_NE(msg.find("clearing chain.x (32 neurons) for chain.y3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("layer 0: MLP neurons: 32 of 32 used (over by 32)"), std::string::npos) << msg;
  CompiledCircuit cc = must(compile(c, reusing(small_target(128, 64), false)));
  report("copies, room for clears", c, cc);
  for (const LayerUse& u : cc.schedule.use) EXPECT_LE(u.mlp_neurons, 64);
  for (DType dt : kBothDtypes) {
    ReferenceModel m(cc.layers, cc.target.shapes, dt);
    std::mt19937_64 rng(31);
    int wrong = 0;
    for (int t = 0; t < 200; ++t) {
      const std::uint32_t v = testing::operand(rng);
      auto y6 = m.step(embed(c, cc.allocation, {{x, v}}));
      wrong += read_word(cc.allocation, y6, y) != v || !testing::residual_exact(c, cc.allocation, y6);
    }
    EXPECT_EQ(wrong, 0) << dtype_name(dt);
  }
  // A hand-made clear in a full layer is refused, naming the layer.
  Allocation over = cc.allocation;
  Target tight = cc.target;
  tight.shapes.intermediate_size = 32;
  Schedule sched = cc.schedule;
  auto st = check_allocation(c, tight, sched, over);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("MLP neurons: 32 for ops + 32 for clears of 32 (over by 32)"), std::string::npos)
      << st.message();
}

TEST(Reuse, DumpAndLoadRoundTripWithClears) {
  AddChain ch(6);
  const Target t = reusing(small_target(512, 1024), true);
  CompiledCircuit cc = must(compile(ch.c, t));
  ASSERT_FALSE(cc.allocation.clears.empty());
  auto dir = std::filesystem::temp_directory_path() / ("qgpu_weights_reuse_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ASSERT_OK(dump(ch.c, cc, dir));
  Schedule sched = must(load_schedule(ch.c, dir / "schedule.yaml"));
  Allocation al = must(load_allocation(ch.c, t, sched, dir / "allocation.yaml"));
  EXPECT_EQ(al.field_base, cc.allocation.field_base);
  ASSERT_EQ(al.clears.size(), cc.allocation.clears.size());
  for (std::size_t i = 0; i < al.clears.size(); ++i) {
    EXPECT_EQ(al.clears[i].field, cc.allocation.clears[i].field);
    EXPECT_EQ(al.clears[i].layer, cc.allocation.clears[i].layer);
  }
  EXPECT_EQ(al.pad_value, cc.allocation.pad_value);
  EXPECT_EQ(al.live_peak, cc.allocation.live_peak);
  auto layers = must(emit(ch.c, t, sched, al));
  ASSERT_EQ(layers.size(), cc.layers.size());
  for (std::size_t l = 0; l < layers.size(); ++l) {
    EXPECT_EQ(layers[l].mlp.down.val, cc.layers[l].mlp.down.val);
    EXPECT_EQ(layers[l].mlp.down.col, cc.layers[l].mlp.down.col);
    EXPECT_EQ(layers[l].mlp.gate.col, cc.layers[l].mlp.gate.col);
    EXPECT_EQ(layers[l].mlp.neuron_op, cc.layers[l].mlp.neuron_op);
  }
  // Hand edits: a clear removed, then two live fields on the same channels.
  CompiledCircuit edited = cc;
  edited.allocation.clears.erase(edited.allocation.clears.begin());
  ASSERT_OK(dump(ch.c, edited, dir));
  auto missing = load_allocation(ch.c, t, sched, dir / "allocation.yaml");
  ASSERT_FALSE(missing.has_value());
  std::printf("refused: %s\n", missing.status().to_string().c_str());
  EXPECT_NE(missing.status().message().find("is not cleared before"), std::string::npos) << missing.status().message();
  EXPECT_NE(missing.status().location().find("allocation.yaml"), std::string::npos);
  edited = cc;
  const int x3 = ch.x[3].front().field;
  edited.allocation.field_base[x3] = edited.allocation.field_base[ch.b.front().field];
  ASSERT_OK(dump(ch.c, edited, dir));
  auto shared = load_allocation(ch.c, t, sched, dir / "allocation.yaml");
  ASSERT_FALSE(shared.has_value());
  std::printf("refused: %s\n", shared.status().to_string().c_str());
  EXPECT_NE(shared.status().message().find("fields chain.b and chain.x3 share channel"), std::string::npos)
      << shared.status().message();
  EXPECT_NE(shared.status().message().find("both live in layer"), std::string::npos) << shared.status().message();
  // emit() checks the allocation too.
  EXPECT_FALSE(emit(ch.c, t, sched, edited.allocation).has_value());
  std::filesystem::remove_all(dir);
}

// Dead 8-bit inputs between live ones leave only holes: a 32-bit field goes onto
// four of them (Allocation::bit_channel), reaching the live peak exactly.
TEST(Reuse, FieldsScatterOverHoles) {
  Circuit c("holes");
  Word keep, dead;
  for (int i = 0; i < 4; ++i) {
    Word k = must(c.input("in", "keep" + std::to_string(i), 8)), d = must(c.input("in", "dead" + std::to_string(i), 8));
    keep.insert(keep.end(), k.begin(), k.end());
    dead.insert(dead.end(), d.begin(), d.end());
  }
  Word t = must(copy(c, "mid", "t", dead));  // MLP 0: the inputs die here
  Word z = must(copy(c, "out", "z", t));     // MLP 1
  const Target tg = reusing(small_target(512, 1024), true);
  CompiledCircuit cc = must(compile(c, tg));
  report("holes, eager reuse", c, cc);
  const Allocation& al = cc.allocation;
  EXPECT_EQ(al.live_peak, 1 + 32 + 32);  // const.one, the kept inputs, then dead -> t -> z
  EXPECT_EQ(field_channels(al), al.live_peak);
  int scattered = 0;
  for (const auto& v : al.bit_channel) scattered += !v.empty();
  EXPECT_GE(scattered, 1);
  for (DType dt : kBothDtypes) {
    ReferenceModel m(cc.layers, cc.target.shapes, dt);
    std::mt19937_64 rng(41);
    int wrong = 0;
    for (int i = 0; i < 200; ++i) {
      const std::uint32_t kv = testing::operand(rng), dv = testing::operand(rng);
      auto y = m.step(embed(c, al, {{keep, kv}, {dead, dv}}));
      bool exact = true;
      wrong += read_word(al, y, z, &exact) != dv || read_word(al, y, keep, &exact) != kv;
      wrong += !exact || !testing::residual_exact(c, al, y);
    }
    EXPECT_EQ(wrong, 0) << dtype_name(dt);
  }
  auto dir = std::filesystem::temp_directory_path() / ("qgpu_weights_holes_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ASSERT_OK(dump(c, cc, dir));
  Schedule sched = must(load_schedule(c, dir / "schedule.yaml"));
  Allocation back = must(load_allocation(c, tg, sched, dir / "allocation.yaml"));
  EXPECT_EQ(back.bit_channel, al.bit_channel);
  EXPECT_EQ(back.field_base, al.field_base);
  // Two bits of one field on the same pair are refused.
  Allocation twice = al;
  for (auto& v : twice.bit_channel)
    if (!v.empty()) {
      v[1] = v[0];
      break;
    }
  auto st = check_allocation(c, tg, sched, twice);
  EXPECT_FALSE(st.is_ok());
  std::printf("refused: %s\n", st.message().c_str());
  std::filesystem::remove_all(dir);
}

// Without pressure, reuse changes nothing: the allocation is the plain one.
TEST(Reuse, FittingCircuitsKeepThePlainAllocation) {
  AddChain ch(2);
  const Target t = testing::qwen2b_target();
  CompiledCircuit plain = must(compile(ch.c, t));
  CompiledCircuit reuse = must(compile(ch.c, reusing(t, false)));
  EXPECT_EQ(plain.allocation.field_base, reuse.allocation.field_base);
  EXPECT_TRUE(reuse.allocation.clears.empty());
  EXPECT_GT(reuse.allocation.live_peak, 0);
}

// Two adder chains side by side, one on the tokens where `e` is 1 and one on the others
// (Circuit::declare_mode_bit): x_k = x_{k-1} + b under e, y_k = y_{k-1} + a under !e.
struct TwoModes {
  Circuit c{"modes"};
  Word a, b, e;
  std::vector<Word> x, y;
  TwoModes(int n, bool declare) {
    a = must(c.input("in", "a", 32));
    b = must(c.input("in", "b", 32));
    e = must(c.input("in", "e", 1));
    if (declare) {
      EXPECT_TRUE(c.declare_mode_bit(e[0]).is_ok());
    }
    x.push_back(a);
    y.push_back(b);
    for (int k = 1; k <= n; ++k) {
      c.push_enable(e[0]);
      x.push_back(must(add(c, "x", "x" + std::to_string(k), x.back(), b, c.zero())).sum);
      c.pop_enable();
      c.push_enable(!e[0]);
      y.push_back(must(add(c, "y", "y" + std::to_string(k), y.back(), a, c.zero())).sum);
      c.pop_enable();
    }
    EXPECT_TRUE(c.mark_output(x.back()).is_ok());
    EXPECT_TRUE(c.mark_output(y.back()).is_ok());
  }
};

int mode_of(const Circuit& c, const std::vector<int>& modes, const std::string& name) {
  const int f = c.find_field(name);
  EXPECT_GE(f, 0) << name;
  return f < 0 ? 99 : modes[static_cast<std::size_t>(f)];
}

// Fields of the two modes share channels while both are live: the circuit fits a
// residual that its fields of both modes together overflow, and runs exactly.
TEST(Modes, FieldsOfTheTwoModesShareChannelsWhileBothAreLive) {
  constexpr int kAdds = 4;
  TwoModes plain(kAdds, false), moded(kAdds, true);
  const std::vector<int> modes = field_modes(moded.c);
  EXPECT_EQ(mode_of(moded.c, modes, "x.x1"), 1);
  EXPECT_EQ(mode_of(moded.c, modes, "y.y1"), -1);
  EXPECT_EQ(mode_of(moded.c, modes, "in.e"), 0);  // the mode bit and the inputs are never shared
  EXPECT_EQ(mode_of(moded.c, modes, "in.a"), 0);
  EXPECT_EQ(mode_of(moded.c, modes, "x.x" + std::to_string(kAdds)), 0);  // read back after the last layer
  for (int m : field_modes(plain.c)) EXPECT_EQ(m, 0);

  Target t = reusing(small_target(192, 4096), true);  // about 246 bits live without modes, 156 with
  auto without = compile(plain.c, t);
  ASSERT_FALSE(without.has_value());
  std::printf("without modes: %s\n", without.status().message().c_str());
  CompiledCircuit cc = must(compile(moded.c, t));
  report("with modes", moded.c, cc);
  const CompiledCircuit wide = must(compile(plain.c, reusing(small_target(1024, 4096), true)));
  EXPECT_LT(cc.allocation.live_peak, wide.allocation.live_peak);
  // The allocation relies on the modes: without them, two live fields share a channel.
  const sdk::Status st = check_allocation(plain.c, t, cc.schedule, cc.allocation);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("both live"), std::string::npos) << st.message();
  // Channels holding a +1 and a -1 field at once, and clears gated by their mode.
  const auto live = live_ranges(moded.c, cc.target, cc.schedule);
  std::map<int, std::vector<int>> on;
  for (std::size_t f = 0; f < moded.c.fields().size(); ++f)
    if (modes[f] != 0)
      for (int bit = 0; bit < moded.c.fields()[f].width; ++bit)
        on[cc.allocation.channel(Bit{static_cast<int>(f), bit, false})].push_back(static_cast<int>(f));
  auto both_live = [&](const std::vector<int>& fs) {
    for (int f : fs)
      for (int g : fs)
        if (modes[f] > 0 && modes[g] < 0 && live[f].start < live[g].clear_from() &&
            live[g].start < live[f].clear_from())
          return true;
    return false;
  };
  int shared = 0;
  for (const auto& [ch, fs] : on) shared += both_live(fs);
  std::printf("%d channels hold fields of both modes while both are live\n", shared);
  EXPECT_GT(shared, 0);

  for (DType dt : kBothDtypes) {
    ReferenceModel m(cc.layers, cc.target.shapes, dt);
    std::mt19937_64 rng(21);
    int wrong = 0, inexact = 0;
    for (int tok = 0; tok < 600; ++tok) {
      const std::uint32_t av = testing::operand(rng), bv = testing::operand(rng);
      const bool ev = rng() % 2 != 0;
      auto out = m.step(embed(moded.c, cc.allocation, {{moded.a, av}, {moded.b, bv}, {moded.e, ev}}));
      bool exact = true;
      const std::uint32_t xv = static_cast<std::uint32_t>(read_word(cc.allocation, out, moded.x.back(), &exact));
      const std::uint32_t yv = static_cast<std::uint32_t>(read_word(cc.allocation, out, moded.y.back(), &exact));
      wrong += xv != (ev ? av + kAdds * bv : 0u);
      wrong += yv != (ev ? 0u : bv + kAdds * av);
      inexact += !exact || !testing::residual_exact(moded.c, cc.allocation, out);
    }
    double margin = 1e30;
    for (const LayerMargin& lm : m.margins()) margin = std::min(margin, lm.mlp_min);
    std::printf("[ %s ] 600 tokens of both modes: %d wrong, %d inexact; smallest MLP switch margin %g\n",
                std::string(dtype_name(dt)).c_str(), wrong, inexact, margin);
    EXPECT_EQ(wrong, 0) << dtype_name(dt);
    EXPECT_EQ(inexact, 0) << dtype_name(dt);
    EXPECT_GE(margin, 88.73) << dtype_name(dt);
  }
}

// A field is shared only when nothing sees its channel on the other mode's tokens:
// every writer and every reader gated by its mode.
TEST(Modes, OnlyFieldsGatedOnBothSidesShare) {
  Circuit c("gates");
  const Word e = must(c.input("in", "e", 1)), a = must(c.input("in", "a", 4)), addr = must(c.input("in", "addr", 2));
  ASSERT_OK(c.declare_mode_bit(e[0]));
  EXPECT_FALSE(c.declare_mode_bit(a[0]).is_ok());  // one mode bit per circuit
  c.push_enable(e[0]);
  const Word gated = must(copy(c, "f", "gated", a));           // read only under e: +1
  const Word ungated_read = must(copy(c, "f", "ungated", a));  // read by an ungated op: 0
  const Word other_read = must(copy(c, "f", "other", a));      // read under !e: 0
  const Word lagged = must(copy(c, "f", "lagged", a));         // read at a lag: 0
  const Word ram_data = must(copy(c, "f", "ram_data", a));     // a RAM's data, written under e: +1
  const Word gate = must(copy(c, "f", "gate", Word{a[0]}));    // a gate itself: 0
  c.pop_enable();
  c.push_enable(!e[0]);
  const Word off = must(copy(c, "g", "off", a));  // written under !e, read under !e: -1
  c.pop_enable();
  const Word free_field = must(copy(c, "g", "free", a));  // written ungated: 0
  c.push_enable(gate[0]);
  const Word chained = must(copy(c, "f", "chained", a));  // written under `gate` (itself +1): +1
  c.pop_enable();
  c.push_enable(e[0]);
  must(copy(c, "r", "gated", concat(gated, chained)));
  must(copy(c, "r", "free", free_field));
  c.pop_enable();
  must(copy(c, "r", "ungated", ungated_read));
  c.push_enable(!e[0]);
  must(copy(c, "r", "other", other_read));
  must(copy(c, "r", "off", off));
  c.pop_enable();
  must(c.previous("lag", lagged, 1, e[0]));
  const int ram = must(c.add_ram("m", "ram", 4, 4));
  ASSERT_OK(c.ram_write(ram, addr, ram_data, e[0]));
  must(c.ram_read(ram, "rd", addr, e[0]));
  const std::vector<int> modes = field_modes(c);
  EXPECT_EQ(mode_of(c, modes, "f.gated"), 1);
  EXPECT_EQ(mode_of(c, modes, "f.ungated"), 0);
  EXPECT_EQ(mode_of(c, modes, "f.other"), 0);
  EXPECT_EQ(mode_of(c, modes, "f.lagged"), 0);
  EXPECT_EQ(mode_of(c, modes, "f.ram_data"), 1);
  EXPECT_EQ(mode_of(c, modes, "f.gate"), 0);
  EXPECT_EQ(mode_of(c, modes, "f.chained"), 1);
  EXPECT_EQ(mode_of(c, modes, "g.off"), -1);
  EXPECT_EQ(mode_of(c, modes, "g.free"), 0);
  EXPECT_EQ(mode_of(c, modes, "in.a"), 0);
}

}  // namespace
}  // namespace qgpu::weights
