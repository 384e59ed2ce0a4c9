// Scheduling, allocation, dumps, budget errors and the dense export.
#include <bit>
#include <cstdio>
#include <fstream>

#include "harness.h"
#include "qgpu/weights/report.h"

namespace qgpu::weights {
namespace {

using testing::must;

// A small machine-like circuit: a register file, an adder on its reads, a compare.
struct Small {
  Circuit c{"small"};
  Word wa, wd, ra, rb;
  Small() {
    wa = must(c.input("tok", "wr_addr", 4));
    wd = must(c.input("tok", "wr_val", 32));
    ra = must(c.input("tok", "rs1", 4));
    rb = must(c.input("tok", "rs2", 4));
    int rf = must(c.add_ram("regs", "file", 16, 32));
    EXPECT_TRUE(c.ram_write(rf, wa, wd, std::nullopt).is_ok());
    Word a = must(c.ram_read(rf, "a", ra, std::nullopt));
    Word b = must(c.ram_read(rf, "b", rb, std::nullopt));
    must(add(c, "alu", "sum", a, b, c.zero()));
    must(less_than(c, "alu", "lt", a, b, true));
  }
};

bool same(const SparseMatrix& x, const SparseMatrix& y) {
  return x.rows == y.rows && x.cols == y.cols && x.row_ptr == y.row_ptr && x.col == y.col && x.val == y.val;
}

TEST(Compile, ScheduleAndAllocationRoundTrip) {
  Small s;
  CompiledCircuit cc = must(compile(s.c, testing::qwen2b_target()));
  EXPECT_EQ(cc.schedule.num_layers, 2);  // GDN 0 reads the registers; MLP 0 and MLP 1 add and compare
  auto dir = std::filesystem::temp_directory_path() / ("qgpu_weights_dump_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ASSERT_OK(dump(s.c, cc, dir));
  Schedule sched = must(load_schedule(s.c, dir / "schedule.yaml"));
  Allocation alloc = must(load_allocation(s.c, dir / "allocation.yaml"));
  EXPECT_EQ(sched.num_layers, cc.schedule.num_layers);
  EXPECT_EQ(sched.op_layer, cc.schedule.op_layer);
  EXPECT_EQ(sched.op_first_head, cc.schedule.op_first_head);
  EXPECT_EQ(alloc.field_base, cc.allocation.field_base);
  EXPECT_EQ(alloc.pad_channel, cc.allocation.pad_channel);
  EXPECT_EQ(alloc.pad_value, cc.allocation.pad_value);
  EXPECT_EQ(alloc.const_hi, cc.allocation.const_hi);
  auto layers = must(emit(s.c, cc.target, sched, alloc));
  ASSERT_EQ(layers.size(), cc.layers.size());
  for (std::size_t l = 0; l < layers.size(); ++l) {
    EXPECT_TRUE(same(layers[l].mlp.gate, cc.layers[l].mlp.gate));
    EXPECT_TRUE(same(layers[l].mlp.down, cc.layers[l].mlp.down));
    EXPECT_TRUE(same(layers[l].gdn.in_proj_qkv, cc.layers[l].gdn.in_proj_qkv));
    EXPECT_TRUE(same(layers[l].gdn.out_proj, cc.layers[l].gdn.out_proj));
  }
  // A hand-edited schedule that puts the adder before its operands are read is refused.
  Schedule early = sched;
  for (std::size_t i = 0; i < s.c.ops().size(); ++i)
    if (s.c.ops()[i].name == "alu.sum.select") early.op_layer[i] = 0;
  auto refused = emit(s.c, cc.target, early, alloc);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.status().message().find("op alu.sum.select in layer 0 reads"), std::string::npos)
      << refused.status().message();
  // A damaged file is reported at its line and column.
  {
    std::ofstream f(dir / "schedule.yaml", std::ios::app);
    f << "ops: [\n";
  }
  auto bad = load_schedule(s.c, dir / "schedule.yaml");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().location().find("schedule.yaml:"), std::string::npos) << bad.status().to_string();
  auto wrong_circuit = load_allocation(Circuit("other"), dir / "allocation.yaml");
  ASSERT_FALSE(wrong_circuit.has_value());
  EXPECT_NE(wrong_circuit.status().message().find("fields"), std::string::npos);
  std::filesystem::remove_all(dir);
  EXPECT_FALSE(dump(s.c, cc, dir).is_ok());  // the directory must exist: never a silent default
}

TEST(Compile, ReportCountsEachUnitPerLayer) {
  Small s;
  CompiledCircuit cc = must(compile(s.c, testing::qwen2b_target()));
  const sdk::CircuitReport r = report(s.c, cc, "circuit");
  EXPECT_EQ(r.name, "small");
  EXPECT_EQ(r.engine, "circuit");
  ASSERT_EQ(r.layers.size(), 2u);
  // Layer 0's Gated DeltaNet reads the two operands: one 32-bit row each, one value head of
  // 128 / 4 bits, one key head per value head at 2B's 16 / 16 heads.
  ASSERT_FALSE(r.layers[0].units.empty());
  EXPECT_EQ(r.layers[0].units.back().unit, "regs");
  EXPECT_EQ(r.layers[0].units.back().key_heads, 2);
  EXPECT_EQ(r.layers[0].key_heads, 2);
  EXPECT_EQ(r.layers[1].key_heads, 0);
  // The adder and the compare are the ALU's; per layer the units and the clears add up to
  // the neurons the emitted MLP holds.
  for (std::size_t l = 0; l < r.layers.size(); ++l) {
    EXPECT_EQ(r.layers[l].mlp_neurons, cc.layers[l].mlp.used_neurons()) << "layer " << l;
    std::int64_t sum = r.layers[l].clear_neurons;
    for (const auto& u : r.layers[l].units) {
      EXPECT_TRUE(u.unit == "alu" || u.unit == "regs") << u.unit;
      sum += u.mlp_neurons;
    }
    EXPECT_EQ(sum, r.layers[l].mlp_neurons) << "layer " << l;
  }
  EXPECT_GT(r.layers[0].mlp_neurons + r.layers[1].mlp_neurons, 0);
  EXPECT_EQ(r.channels_used, cc.allocation.channels_used);
  EXPECT_EQ(r.fields, static_cast<std::int64_t>(s.c.fields().size()));
  EXPECT_EQ(unit_of(s.c, s.c.ops().back()), "alu");
}

TEST(Compile, CircuitRunsEndToEnd) {
  Small s;
  CompiledCircuit cc = must(compile(s.c, testing::qwen2b_target()));
  for (DType dt : testing::kBothDtypes) {
    ReferenceModel m(cc.layers, cc.target.shapes, dt);
    std::mt19937_64 rng(5);
    std::uint32_t regs[16] = {};
    int wrong = 0;
    int f_sum = s.c.find_field("alu.sum"), f_lt = s.c.find_field("alu.lt");
    Word ws, wl{Bit{f_lt, 0, false}};
    for (int b = 0; b < 32; ++b) ws.push_back(Bit{f_sum, b, false});
    for (int t = 0; t < 600; ++t) {
      std::uint32_t wa = rng() % 16, wd = testing::operand(rng), ra = rng() % 16, rb = rng() % 16;
      auto y = m.step(embed(s.c, cc.allocation, {{s.wa, wa}, {s.wd, wd}, {s.ra, ra}, {s.rb, rb}}));
      regs[wa] = wd;
      wrong += read_word(cc.allocation, y, ws) != regs[ra] + regs[rb];
      wrong += read_word(cc.allocation, y, wl) !=
               (static_cast<std::int32_t>(regs[ra]) < static_cast<std::int32_t>(regs[rb]) ? 1u : 0u);
      ASSERT_TRUE(testing::residual_exact(s.c, cc.allocation, y));
    }
    EXPECT_EQ(wrong, 0) << dtype_name(dt);
  }
}

TEST(Compile, BudgetErrorsNameLayerAndResource) {
  // MLP width 500: the 4-lane adder's first MLP (about 950 neurons) cannot fit two layers.
  Circuit c("tight");
  for (int i = 0; i < 4; ++i) {
    std::string o = "lane" + std::to_string(i);
    Word a = must(c.input(o, "a", 32)), b = must(c.input(o, "b", 32));
    must(add(c, o, "sum", a, b, c.zero()));
  }
  Target t = testing::qwen2b_target();
  t.shapes.intermediate_size = 500;
  t.max_layers = 2;
  auto r = compile(c, t);
  ASSERT_FALSE(r.has_value());
  const std::string msg = r.status().message();
  EXPECT_NE(msg.find("layer 1: MLP neurons"), std::string::npos) << "message: " << msg;
  EXPECT_NE(msg.find("over by"), std::string::npos) << msg;
  std::printf("budget error: %s\n", msg.c_str());
  // Without the layer limit the scheduler spreads the work over more layers instead.
  t.max_layers = 0;
  auto ok = compile(c, t);
  ASSERT_TRUE(ok.has_value()) << ok.status().to_string();
  EXPECT_GT(ok->schedule.num_layers, 2);
  for (const LayerUse& u : ok->schedule.use) EXPECT_LE(u.mlp_neurons, 500);

  // One op larger than a whole layer.
  t.shapes.intermediate_size = 100;
  auto big = compile(c, t);
  ASSERT_FALSE(big.has_value());
  EXPECT_NE(big.status().message().find("MLP neurons, a layer has 100"), std::string::npos) << big.status().message();

  // Residual channels.
  Target narrow = testing::qwen2b_target();
  narrow.shapes.hidden_size = 256;
  auto res = compile(c, narrow);
  ASSERT_FALSE(res.has_value());
  EXPECT_NE(res.status().message().find("residual"), std::string::npos) << res.status().message();

  // Gated DeltaNet heads: 3 key heads of a 2-head layer.
  Circuit h("heads");
  Word a = must(h.input("t", "a", 7)), d = must(h.input("t", "d", 96));
  int m = must(h.add_ram("m", "wide", 128, 96));
  ASSERT_TRUE(h.ram_write(m, a, d, std::nullopt).is_ok());
  must(h.ram_read(m, "r", a, std::nullopt));
  Target few = testing::qwen2b_target();
  few.shapes.linear_num_key_heads = 2;
  few.shapes.linear_num_value_heads = 2;
  auto hr = compile(h, few);
  ASSERT_FALSE(hr.has_value());
  EXPECT_NE(hr.status().message().find("Gated DeltaNet key heads, a layer has 2 (over by 1)"), std::string::npos)
      << hr.status().message();
}

TEST(Compile, SumOfSquaresIsFixedAndAPowerOfFour) {
  Small s;
  CompiledCircuit cc = must(compile(s.c, testing::qwen2b_target()));
  auto x = embed(s.c, cc.allocation, {{s.wd, 0xDEADBEEF}, {s.wa, 3}});
  double ss = 0;
  for (float v : x) ss += static_cast<double>(v) * v;
  EXPECT_EQ(ss / static_cast<double>(x.size()), 64.0);  // mean(x²) = 64: the norm scale is exactly 1/8
}

TEST(Compile, DenseExportUsesTheBaseNames) {
  Small s;
  CompiledCircuit cc = must(compile(s.c, testing::qwen2b_target()));
  const auto& sh = cc.target.shapes;
  auto tensors = export_layer(cc.layers[0], sh, 30, DType::kBF16);
  ASSERT_EQ(tensors.size(), 14u);
  std::map<std::string, const DenseTensor*> by;
  for (const auto& t : tensors) by[t.name] = &t;
  const DenseTensor* qkv = by.at("model.language_model.layers.30.linear_attn.in_proj_qkv.weight");
  EXPECT_EQ(qkv->shape, (std::vector<std::int64_t>{6144, 2048}));
  const DenseTensor* conv = by.at("model.language_model.layers.30.linear_attn.conv1d.weight");
  EXPECT_EQ(conv->shape, (std::vector<std::int64_t>{6144, 1, 4}));
  const DenseTensor* dtb = by.at("model.language_model.layers.30.linear_attn.dt_bias");
  EXPECT_EQ(dtb->bf16[0], 0xC200);  // bf16 -32
  const DenseTensor* nw = by.at("model.language_model.layers.30.linear_attn.norm.weight");
  EXPECT_EQ(nw->bf16[0], 0x3F00);  // bf16 0.5
  EXPECT_TRUE(by.count("model.language_model.layers.30.mlp.down_proj.weight"));
  // Dense values equal the sparse ones.
  const auto& m = cc.layers[0].gdn.in_proj_qkv;
  std::size_t nz = 0;
  for (std::uint16_t b : qkv->bf16) nz += b != 0 && b != 0x8000;
  EXPECT_EQ(nz, m.nonzeros());
  auto f32 = export_layer(cc.layers[0], sh, 30, DType::kF32);
  for (const auto& t : f32)
    if (t.name.ends_with("norm.weight") && t.name.find("linear_attn") != std::string::npos) {
      EXPECT_EQ(t.f32[0], 0.50000006f);
    }
}

}  // namespace
}  // namespace qgpu::weights
