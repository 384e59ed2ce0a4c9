// The memory unit of the circuit (plugins/machine_simt/circuit/src/memory.h):
// random memory images written by WMEM tokens, then EXEC tokens with one
// memory instruction for 4 lanes (every lane mask, same-word collisions,
// every built opcode), run through the reference layer math in fp32 and bf16
// and compared with a plain C++ model that applies the lanes in order with
// the ISA's own eval(). The write-backs are fed back as WMEM tokens, as the
// machine does, so later reads see them. QGPU_MEM_SCHEDULE=1 also prints
// each op's layer.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "circuit_harness.h"
#include "isa.h"
#include "memory.h"
#include "protocol.h"
#include "qgpu/weights/compile.h"
#include "qgpu/weights/reference.h"
#include "qgpu/weights/state.h"

namespace qgpu::simt {
namespace {

using circuit::MemoryLayout;
using test::Inputs;
using weights::DType;

constexpr int kLanes = kProtoLanes;

const char* layout_name(MemoryLayout layout) {
  switch (layout) {
    case MemoryLayout::kStandard: return "standard";
    case MemoryLayout::kWide: return "wide";
    case MemoryLayout::kCompact: return "compact";
  }
  return "?";
}

struct Compiled {
  weights::Circuit c{"simt.memory"};
  circuit::Records rec;  // token ids → inputs (the WMEM records' write ports)
  circuit::Memory mem;
  weights::Bit enable, shared;
  weights::Word opcode, imm, lanes;
  std::array<weights::Word, kLanes> a, b, cc_;
  weights::Bit bound_we, bound_row;  // with fault checks: the bounds RAM's write port
  weights::Word bound_value;
  weights::CompiledCircuit cc;
  int input_bits = 0;
  bool ok = false;

  explicit Compiled(MemoryLayout layout, bool writes = true, bool faults = false) {
    auto in = [&](const std::string& owner, const std::string& name, int width) {
      auto w = c.input(owner, name, width);
      EXPECT_TRUE(w.has_value()) << w.status().to_string();
      input_bits += width;
      return w ? *w : weights::Word{};
    };
    auto rc = circuit::build_records(c, 1);
    EXPECT_TRUE(rc.has_value()) << rc.status().to_string();
    if (!rc) return;
    rec = std::move(*rc);
    // The EXEC side's inputs (decode and register reads in the machine) come from this test.
    circuit::MemoryIn mi;
    enable = in("t", "enable", 1)[0];
    opcode = in("slot", "opcode", kOpCount);
    shared = in("slot", "shared", 1)[0];
    imm = in("slot", "imm", 32);
    lanes = in("t", "lanes", kLanes);
    for (int l = 0; l < kLanes; ++l) {
      a[l] = in("lane" + std::to_string(l), "a", 32);
      b[l] = in("lane" + std::to_string(l), "b", 32);
      cc_[l] = in("lane" + std::to_string(l), "c", 32);
      mi.active[l] = lanes[l];
      mi.a[l] = a[l];
      mi.b[l] = b[l];
      mi.c[l] = cc_[l];
    }
    mi.enable = enable;
    mi.opcode = opcode;
    mi.shared = shared;
    mi.imm = imm;
    mi.writes = writes;
    if (faults) {  // the bounds RAM, written from test inputs (the machine's BOUND records)
      bound_we = in("bound", "we", 1)[0];
      bound_row = in("bound", "row", 1)[0];
      bound_value = in("bound", "value", circuit::kBoundBits);
      auto ram = c.add_ram("fault", "bounds", 2, circuit::kBoundBits);
      EXPECT_TRUE(ram.has_value()) << ram.status().to_string();
      if (!ram) return;
      auto st = c.ram_write(*ram, weights::Word{bound_row}, bound_value, bound_we);
      EXPECT_TRUE(st.ok()) << st.to_string();
      mi.bounds = circuit::FaultBounds{*ram};
    }
    auto m = circuit::build_memory(c, layout, rec, mi);
    EXPECT_TRUE(m.has_value()) << m.status().to_string();
    if (!m) return;
    mem = std::move(*m);
    for (const auto& ln : mem.lane) {
      for (const weights::Word& w : {ln.word, ln.ld_value, ln.loaded, ln.value, weights::Word{ln.writes}}) {
        auto st = c.mark_output(w);
        EXPECT_TRUE(st.ok()) << st.to_string();
      }
      if (faults)
        for (const weights::Bit& b : {ln.misaligned, ln.out_of_bounds}) {
          auto st = c.mark_output(weights::Word{b});
          EXPECT_TRUE(st.ok()) << st.to_string();
        }
    }
    // The WMEM write ports are checked at every token: kept to the last layer too.
    const circuit::WmemWrite& wp = mem.rams.write;
    for (const weights::Word& w : {wp.enable, wp.bank_enable, wp.row[0], wp.row[1], wp.row[2], wp.row[3], wp.value[0],
                                   wp.value[1], wp.value[2], wp.value[3]}) {
      auto st = c.mark_output(w);
      EXPECT_TRUE(st.ok()) << st.to_string();
    }
    // Qwen3.5-2B shapes; dead fields' channels reused (the unit's outputs are kept).
    weights::Target t;
    t.shapes = test::qwen2b_shapes();
    t.reuse_channels = true;
    t.reuse_eagerly = true;
    t.keep_unread_fields = false;
    auto r = weights::compile(c, t);
    if (!r) {  // report the need, then compile on a wider residual to test the logic
      std::printf("memory (%s): at Qwen3.5-2B shapes: %s\n", layout_name(layout), r.status().to_string().c_str());
      t.shapes.hidden_size = 8192;
      r = weights::compile(c, t);
    }
    EXPECT_TRUE(r.has_value()) << r.status().to_string();
    if (!r) return;
    cc = std::move(*r);
    ok = true;
  }
};

const Compiled& compiled(MemoryLayout layout) {
  static const Compiled* q = new Compiled(MemoryLayout::kCompact);
  static const Compiled* p = new Compiled(MemoryLayout::kStandard);
  static const Compiled* w = new Compiled(MemoryLayout::kWide);
  return layout == MemoryLayout::kCompact ? *q : layout == MemoryLayout::kWide ? *w : *p;
}

// --- The plain model: lanes in order, eval() from the ISA table.

struct Exec {
  Op op = Op::kLd;
  bool shared = false;
  std::uint32_t imm = 0;
  unsigned lanes = 0;
  std::array<std::uint32_t, kLanes> a{}, b{}, c{};
};

struct Expected {
  std::array<std::uint32_t, kLanes> word{}, loaded{}, value{};
  std::array<bool, kLanes> writes{};
};

Expected model(const Exec& e, const std::vector<std::uint32_t>& mem_in, int words) {
  Expected x;
  std::vector<std::uint32_t> m = mem_in;
  for (int l = 0; l < kLanes; ++l) x.word[l] = ((e.a[l] + e.imm) >> 2) % static_cast<std::uint32_t>(words);
  for (int l = 0; l < kLanes; ++l) {
    if (!((e.lanes >> l) & 1)) continue;
    std::uint32_t& w = m[x.word[l]];
    if (e.op == Op::kLd) x.loaded[l] = w;
    if (e.op == Op::kSt) w = e.b[l];
    if (is_atomic(e.op)) {
      x.loaded[l] = w;
      w = eval(e.op, w, e.b[l], e.c[l]);
    }
  }
  for (int l = 0; l < kLanes; ++l) {
    if (!((e.lanes >> l) & 1) || !(e.op == Op::kSt || is_atomic(e.op))) continue;
    bool last = true;
    for (int k = l + 1; k < kLanes; ++k)
      if (((e.lanes >> k) & 1) && x.word[k] == x.word[l]) last = false;
    x.writes[l] = last;
    if (last) x.value[l] = m[x.word[l]];
  }
  return x;
}

// --- Running tokens.

struct Run {
  const Compiled& k;
  weights::ReferenceModel m;
  std::array<int, 2> words;  // per space: global, shared
  int wrap;                  // the unit's word addresses wrap here (the larger space)
  std::array<std::vector<std::uint32_t>, 2> mem;  // global, shared
  int checked = 0, wrong = 0, inexact = 0, tokens = 0;

  Run(const Compiled& kc, DType dt)
      : k(kc),
        m(kc.cc.layers, kc.cc.target.shapes, dt),
        words{circuit::memory_words(kc.mem.rams.layout), circuit::shared_memory_words(kc.mem.rams.layout)},
        wrap(words[0]) {}

  std::vector<float> step(const Inputs& in) { return m.step(weights::embed(k.c, k.cc.allocation, in)); }

  // The words as the protocol writes them (wmem_records' split), token id by token id; at
  // every token the write ports must hold exactly the words that token completes.
  void write(bool shared, std::uint32_t word, const std::vector<std::uint32_t>& values) {
    for (const Record& r : wmem_records(shared, word, values)) feed(r);
    for (std::size_t i = 0; i < values.size(); ++i) mem[shared][word + i] = values[i];
  }
  void feed(const Record& r) {
    auto ids = circuit::record_token_ids(k.rec, r);
    ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
    const auto want = completed_words(r);
    ASSERT_EQ(want.size(), ids->size());
    for (std::size_t t = 0; t < ids->size(); ++t) {
      auto in = circuit::token_inputs(k.rec, (*ids)[t]);
      ASSERT_TRUE(in.has_value()) << in.status().to_string();
      auto y = step(*in);
      ++tokens;
      // A WMEM token executes nothing: every output stays 0.
      for (const auto& ln : k.mem.lane)
        for (const weights::Word* w : {&ln.loaded, &ln.value, &ln.ld_value})
          if (weights::read_word(k.cc.allocation, y, *w) != 0) ++wrong;
      const std::string at = to_text(r) + " token " + std::to_string(t);
      const circuit::WmemWrite& p = k.mem.rams.write;
      std::uint64_t en = 0, ben = 0;
      for (const auto& [wd, v] : want[t]) {
        const int bank = static_cast<int>(wd & 3);
        en |= std::uint64_t{1} << ((r.shared ? 4 : 0) + bank);
        ben |= std::uint64_t{1} << bank;
        expect(y, p.row[bank], (wd >> 2) | (r.shared ? 256u : 0u), at + " row" + std::to_string(bank));
      }
      expect(y, p.enable, en, at + " enable");
      expect(y, p.bank_enable, ben, at + " bank enable");
      for (int b = 0; b < kLanes; ++b) {
        std::uint64_t v = 0;
        for (const auto& [wd, x] : want[t])
          if (static_cast<int>(wd & 3) == b) v = x;
        expect(y, p.value[b], v, at + " value" + std::to_string(b));
      }
    }
  }
  // Per token of a WMEM record, the (word, value) pairs it completes (docs/PROTOCOL.md §3.1:
  // zero at the header; byte: words 2i, 2i+1 at DATA i+1; half: word i at DATA i+1; word: at DATA 2).
  static std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>> completed_words(const Record& r) {
    std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>> t(1);
    const std::uint32_t n = r.count;
    switch (r.format) {
      case ValueFormat::kZero:
        for (std::uint32_t i = 0; i < n; ++i) t[0].emplace_back(r.word + i, 0);
        break;
      case ValueFormat::kByte:
        for (std::uint32_t i = 0; i < n; ++i) {
          if (i % 2 == 0) t.emplace_back();
          t.back().emplace_back(r.word + i, r.values[i]);
        }
        break;
      case ValueFormat::kHalf:
        for (std::uint32_t i = 0; i < n; ++i) t.push_back({{r.word + i, r.values[i]}});
        break;
      case ValueFormat::kWord:
        t.emplace_back();
        t.push_back({{r.word, r.values[0]}});
        break;
    }
    return t;
  }

  Inputs exec_inputs(const Exec& e, bool enable) const {
    Inputs in{{weights::Word{k.enable}, enable ? 1 : 0},
              {k.opcode, std::uint64_t{1} << static_cast<int>(e.op)},
              {weights::Word{k.shared}, e.shared ? 1 : 0},
              {k.imm, e.imm},
              {k.lanes, e.lanes}};
    for (int l = 0; l < kLanes; ++l) {
      in.emplace_back(k.a[l], e.a[l]);
      in.emplace_back(k.b[l], e.b[l]);
      in.emplace_back(k.cc_[l], e.c[l]);
    }
    return in;
  }

  void expect(const std::vector<float>& y, const weights::Word& w, std::uint64_t want, const std::string& what) {
    bool exact = true;
    const std::uint64_t got = weights::read_word(k.cc.allocation, y, w, &exact);
    ++checked;
    if (!exact) ++inexact;
    if (got != want && ++wrong <= 12) ADD_FAILURE() << what << " = 0x" << std::hex << got << ", expected 0x" << want;
  }

  // Runs one EXEC token, checks every output, and (if asked) feeds the
  // write-backs to memory as one-word WMEM tokens.
  void exec(const Exec& e, bool write_back, const std::string& where) {
    const Expected x = model(e, mem[e.shared], wrap);
    auto y = step(exec_inputs(e, true));
    const std::string w0 = where + " " + std::string(disassemble(Instr{e.op})) + " lanes " + lane_mask_text(e.lanes);
    for (int l = 0; l < kLanes; ++l) {
      const circuit::MemoryLane& ln = k.mem.lane[l];
      const std::string w = w0 + " lane " + std::to_string(l);
      expect(y, ln.word, x.word[l], w + " word");
      expect(y, ln.loaded, x.loaded[l], w + " loaded");
      expect(y, weights::Word{ln.writes}, x.writes[l] ? 1 : 0, w + " writes");
      expect(y, ln.value, x.value[l], w + " value");
    }
    if (!write_back) return;
    for (int l = 0; l < kLanes; ++l)
      if (x.writes[l]) write(e.shared, x.word[l], {x.value[l]});
  }

  void margins(double& mlp, double& gdn) const {
    mlp = gdn = std::numeric_limits<double>::infinity();
    test::fold_margins(m, mlp, gdn);
  }
};

const std::uint32_t kEdges[] = {0, 1, 2, 0x7fffffff, 0x80000000, 0xffffffff, 0xfffffffe, 0x80000001};

std::uint32_t value(std::mt19937_64& rng) {
  switch (rng() % 4) {
    case 0: return kEdges[rng() % std::size(kEdges)];
    case 1: return static_cast<std::uint32_t>(rng() % 8);
    default: return static_cast<std::uint32_t>(rng());
  }
}

// Writes a random image of both spaces, 4 words per token.
void write_image(Run& run, std::mt19937_64& rng) {
  for (int s = 0; s < 2; ++s) {
    run.mem[s].assign(static_cast<std::size_t>(run.words[s]), 0);
    for (int w = 0; w < run.words[s]; w += 4) {
      std::vector<std::uint32_t> v(4);
      for (auto& x : v) x = value(rng);
      run.write(s == 1, static_cast<std::uint32_t>(w), v);
    }
  }
}

// Word addresses of the 4 lanes: all on one word, pairs, all distinct, or random.
std::array<std::uint32_t, kLanes> words_for(int shape, int words, std::mt19937_64& rng) {
  std::array<std::uint32_t, kLanes> w{};
  auto any = [&] { return static_cast<std::uint32_t>(rng() % static_cast<std::uint64_t>(words)); };
  switch (shape) {
    case 0: w.fill(any()); break;  // all lanes on one word
    case 1: {                      // two pairs (random pairing)
      const std::uint32_t p = any(), q = any();
      const int pairing = static_cast<int>(rng() % 3);
      for (int l = 0; l < kLanes; ++l)
        w[l] = (pairing == 0 ? l < 2 : pairing == 1 ? (l % 2 == 0) : (l == 0 || l == 3)) ? p : q;
      break;
    }
    case 2:  // all distinct, often adjacent (every bank)
      w[0] = any();
      for (int l = 1; l < kLanes; ++l) w[l] = (rng() % 2) ? (w[0] + l) % words : any();
      break;
    default:  // random from a small pool: any collision pattern
      for (auto& x : w) x = static_cast<std::uint32_t>((rng() % 3) * 37 % words);
      break;
  }
  return w;
}

Exec make_exec(Op op, unsigned lanes, int shape, const Run& run, std::mt19937_64& rng) {
  Exec e;
  e.op = op;
  e.shared = rng() % 2;
  e.lanes = lanes;
  // imm: 0, small, the base of an array, or anything; a = 4·word − imm (+ a wrap of the space).
  const std::uint32_t imms[] = {0, 4, 0x40, static_cast<std::uint32_t>(rng()), 0xfffffffc};
  e.imm = imms[rng() % std::size(imms)];
  const auto w = words_for(shape, run.words[e.shared], rng);
  const auto& m = run.mem[e.shared];
  for (int l = 0; l < kLanes; ++l) {
    const std::uint32_t wrap = static_cast<std::uint32_t>(rng() % 4) * 4u * static_cast<std::uint32_t>(run.wrap);
    e.a[l] = 4 * w[l] + wrap - e.imm;
    e.c[l] = value(rng);
    // cas and min/max need operands near the stored values: the stored word, an earlier
    // lane's c (a cas chain), an edge or anything.
    switch (rng() % 5) {
      case 0: e.b[l] = m[w[l]]; break;
      case 4: e.b[l] = m[w[l]] + static_cast<std::uint32_t>(rng() % 7) - 3; break;  // inc wraps, dec reloads
      case 1: e.b[l] = l > 0 ? e.c[rng() % l] : m[w[l]]; break;
      default: e.b[l] = value(rng); break;
    }
  }
  return e;
}

const Op kBuilt[] = {Op::kLd,       Op::kSt,       Op::kAtomAdd,  Op::kAtomMin, Op::kAtomMax,
                     Op::kAtomMinU, Op::kAtomMaxU, Op::kAtomExch, Op::kAtomAnd, Op::kAtomOr,
                     Op::kAtomXor,  Op::kAtomCas,  Op::kAtomInc,  Op::kAtomDec};

// Every word of both spaces read back by ld and compared with the model.
void read_back(Run& run, weights::DType dt) {
  for (int s = 0; s < 2; ++s)
    for (int w = 0; w < run.words[s]; w += kLanes) {
      Exec e;
      e.op = Op::kLd;
      e.shared = s == 1;
      e.lanes = 0xf;
      for (int l = 0; l < kLanes; ++l) e.a[l] = 4u * static_cast<std::uint32_t>(w + l);
      run.exec(e, false, std::string(weights::dtype_name(dt)) + " read-back");
    }
}

// The unit's own fields (owner "mem", not the test's inputs) live between sub-layers under the
// compiled schedule, as channel reuse sees them (weights::live_ranges). ld_value is kept to
// the end only because the test reads it; the machine does not, so it counts until its
// last reader here.
struct OwnLive {
  std::vector<int> after;  // [s + 1]: bits live after sub-layer s (index 0: the embedding)
  int peak = 0, peak_at = -1;
  std::map<std::string, int> at_peak;  // field name (digits as #) -> bits
};

OwnLive own_live_bits(const Compiled& k) {
  const auto& fields = k.c.fields();
  auto lr = weights::live_ranges(k.c, k.cc.target, k.cc.schedule);
  for (const auto& ln : k.mem.lane) lr[static_cast<std::size_t>(ln.ld_value.front().field)].forever = false;
  const int subs = 2 * k.cc.schedule.num_layers;
  OwnLive o;
  o.after.assign(static_cast<std::size_t>(subs + 1), 0);
  auto own = [&](std::size_t f) {
    const int root = lr[f].root < 0 ? static_cast<int>(f) : lr[f].root;
    return static_cast<std::size_t>(root) == f && fields[f].owner == "mem" &&
           fields[f].kind != weights::FieldKind::kInput;
  };
  for (int sl = -1; sl < subs; ++sl) {
    int& n = o.after[static_cast<std::size_t>(sl + 1)];
    for (std::size_t f = 1; f < fields.size(); ++f)
      if (own(f) && lr[f].live_after(sl)) n += fields[f].width;
    if (n > o.peak) {
      o.peak = n;
      o.peak_at = sl;
    }
  }
  for (std::size_t f = 1; f < fields.size(); ++f)
    if (own(f) && lr[f].live_after(o.peak_at)) {
      std::string n = fields[f].name;
      for (char& ch : n)
        if (ch >= '0' && ch <= '9') ch = '#';
      o.at_peak[n] += fields[f].width;
    }
  return o;
}

void print_cost(const Compiled& k, const char* name) {
  std::printf("memory (%s): %d layers;", name, k.cc.schedule.num_layers);
  std::int64_t heads = 0;
  for (int l = 0; l < k.cc.schedule.num_layers; ++l) {
    heads += k.cc.schedule.use[l].key_heads;
    std::printf(" L%d %lld heads %lld neurons;", l, static_cast<long long>(k.cc.schedule.use[l].key_heads),
                static_cast<long long>(k.cc.schedule.use[l].mlp_neurons));
  }
  if (std::getenv("QGPU_MEM_SCHEDULE"))
    for (std::size_t i = 0; i < k.c.ops().size(); ++i)
      std::printf("\n  op %s -> layer %d", k.c.ops()[i].name.c_str(), k.cc.schedule.op_layer[i]);
  std::printf("\n  total %lld heads, %lld neurons, %d residual channels (%d without the test's %d input bits)\n",
              static_cast<long long>(heads), static_cast<long long>(k.cc.total_neurons()),
              k.cc.allocation.channels_used, k.cc.allocation.channels_used - k.input_bits, k.input_bits);
  const OwnLive o = own_live_bits(k);
  std::printf(
      "  of the neurons, %lld clear dead channels (channel reuse); the allocator's live peak: %d bits\n"
      "  the unit's own fields, live bits after each layer (after its MLP):",
      static_cast<long long>(weights::clear_neurons(k.c, k.cc.allocation)), k.cc.allocation.live_peak);
  for (int l = 0; l < k.cc.schedule.num_layers; ++l) std::printf(" %d", o.after[static_cast<std::size_t>(2 * l + 2)]);
  std::printf("\n  own peak %d bits after sub-layer %d (layer %d %s):", o.peak, o.peak_at, o.peak_at / 2,
              o.peak_at % 2 ? "MLP" : "GDN");
  for (const auto& [n, w] : o.at_peak) std::printf(" %s=%d", n.c_str(), w);
  std::printf("\n");
}

void run_layout(MemoryLayout layout, const char* name) {
  const Compiled& k = compiled(layout);
  ASSERT_TRUE(k.ok);
  print_cost(k, name);
  // One warp memory instruction must run beside its operands in a residual of ~1,000
  // bits (docs/MACHINE_CIRCUIT.md §8.1): its own fields, outputs included, stay within 400.
  EXPECT_LE(own_live_bits(k).peak, 400);
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Run run(k, dt);
    std::mt19937_64 rng(layout == MemoryLayout::kCompact ? 11 : layout == MemoryLayout::kWide ? 13 : 12);
    write_image(run, rng);
    int n = 0;
    for (int rep = 0; rep < 4; ++rep)
      for (Op op : kBuilt)
        for (unsigned lanes = 0; lanes < 16; ++lanes) {
          const int shape = static_cast<int>(rng() % 4);
          run.exec(make_exec(op, lanes, shape, run, rng), true, std::string(weights::dtype_name(dt)));
          ++n;
        }
    // Every word of both spaces read back by ld: EXEC tokens never changed a row.
    read_back(run, dt);
    double mlp, gdn;
    run.margins(mlp, gdn);
    std::printf("[ %s %s ] %d EXEC sets + read-back, %d words checked, %d wrong, %d inexact; margins MLP %g GDN %g\n",
                name, std::string(weights::dtype_name(dt)).c_str(), n, run.checked, run.wrong, run.inexact, mlp, gdn);
    EXPECT_EQ(run.wrong, 0);
    EXPECT_EQ(run.inexact, 0);
    EXPECT_GE(mlp, 88.73);
    EXPECT_GE(gdn, 88.73);
  }
}

// EXEC tokens with enable = 0 (any opcode) leave every output 0; enabled
// tokens whose opcode is not a memory instruction (ALU, shuffle, control
// rows) leave every result 0 (the word address is still computed); no such
// token changes memory.
void run_silent(MemoryLayout layout, const char* name) {
  const Compiled& k = compiled(layout);
  ASSERT_TRUE(k.ok);
  const Op others[] = {Op::kNop, Op::kAdd, Op::kSub, Op::kMov, Op::kSel, Op::kShflIdx, Op::kBallot, Op::kExit};
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Run run(k, dt);
    std::mt19937_64 rng(21);
    write_image(run, rng);
    int leaked = 0, tokens = 0;
    for (int t = 0; t < 160; ++t) {
      const bool enable = t % 2;
      const Op op = enable ? others[rng() % std::size(others)] : kBuilt[rng() % std::size(kBuilt)];
      const Exec e = make_exec(op, static_cast<unsigned>(rng() % 16), static_cast<int>(rng() % 4), run, rng);
      auto y = run.step(run.exec_inputs(e, enable));
      ++tokens;
      for (int l = 0; l < kLanes; ++l) {
        const circuit::MemoryLane& ln = k.mem.lane[l];
        for (const weights::Word* w : {&ln.loaded, &ln.value, &ln.ld_value})
          if (weights::read_word(k.cc.allocation, y, *w) != 0) ++leaked;
        if (weights::read_word(k.cc.allocation, y, weights::Word{ln.writes}) != 0) ++leaked;
        const std::uint32_t word = enable ? ((e.a[l] + e.imm) >> 2) % static_cast<std::uint32_t>(run.wrap) : 0;
        run.expect(y, ln.word, word, std::string(name) + " word");
      }
    }
    read_back(run, dt);
    std::printf("[ %s %s ] %d silent tokens: %d nonzero outputs; read-back %d wrong\n", name,
                std::string(weights::dtype_name(dt)).c_str(), tokens, leaked, run.wrong);
    EXPECT_EQ(leaked, 0);
    EXPECT_EQ(run.wrong, 0);
    EXPECT_EQ(run.inexact, 0);
  }
}

// A loads-only unit (MemoryIn::writes = false, the machine's slots 0-2: the block's memory
// write is in its last slot, docs/ISA.md §6): ld is exact under every lane mask; a store or an
// atomic there reads and writes nothing (outputs 0, memory unchanged); no lane chain: 4 layers with
// the records stage (layer 0), kStandard reading lanes 2-3 in the Gated DeltaNet of layer 3.
void run_loads_only() {
  static const Compiled* k = new Compiled(MemoryLayout::kStandard, /*writes=*/false);
  ASSERT_TRUE(k->ok);
  print_cost(*k, "standard, loads only");
  EXPECT_LE(k->cc.schedule.num_layers, 4);
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Run run(*k, dt);
    std::mt19937_64 rng(31);
    write_image(run, rng);
    int leaked = 0, n = 0;
    for (int rep = 0; rep < 4; ++rep)
      for (unsigned lanes = 0; lanes < 16; ++lanes) {
        run.exec(make_exec(Op::kLd, lanes, static_cast<int>(rng() % 4), run, rng), true,
                 std::string(weights::dtype_name(dt)));
        const Op w = kBuilt[1 + rng() % (std::size(kBuilt) - 1)];  // a store or an atomic
        ASSERT_NE(w, Op::kLd);
        auto y = run.step(run.exec_inputs(make_exec(w, lanes, static_cast<int>(rng() % 4), run, rng), true));
        for (const circuit::MemoryLane& ln : k->mem.lane) {
          for (const weights::Word* o : {&ln.loaded, &ln.value, &ln.ld_value})
            leaked += weights::read_word(k->cc.allocation, y, *o) != 0;
          leaked += weights::read_word(k->cc.allocation, y, weights::Word{ln.writes}) != 0;
        }
        n += 2;
      }
    read_back(run, dt);  // the stores and atomics changed nothing
    std::printf("[ loads only %s ] %d EXEC tokens, %d words checked, %d wrong, %d inexact, %d nonzero outputs\n",
                std::string(weights::dtype_name(dt)).c_str(), n, run.checked, run.wrong, run.inexact, leaked);
    EXPECT_EQ(run.wrong, 0);
    EXPECT_EQ(run.inexact, 0);
    EXPECT_EQ(leaked, 0);
  }
}
// Fault checks (MemoryIn::bounds): every lane's misaligned and out-of-bounds bits against the
// interpreter's rule on the full 32-bit address x = a + imm (wrapping), for bounds from 0 to the
// space's words, addresses around the bound, with high bits set, and wrapping back to small ones;
// 0 for inactive lanes, other opcodes (and in a loads-only unit, stores and atomics) and on
// disabled tokens.
void run_faults(MemoryLayout layout, bool writes, const char* name) {
  static std::map<std::pair<int, bool>, std::unique_ptr<const Compiled>> built;
  std::unique_ptr<const Compiled>& kp = built[{static_cast<int>(layout), writes}];
  if (!kp) kp = std::make_unique<const Compiled>(layout, writes, /*faults=*/true);
  const Compiled& k = *kp;
  ASSERT_TRUE(k.ok);
  print_cost(k, name);
  const Op others[] = {Op::kAdd, Op::kMov, Op::kShflIdx, Op::kExit};
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Run run(k, dt);
    std::mt19937_64 rng(41 + static_cast<int>(layout));
    int faults[2] = {0, 0}, n = 0;
    for (int t = 0; t < 600; ++t) {
      Exec e;
      const int kind = static_cast<int>(rng() % 10);
      e.op = kind == 0                  ? others[rng() % std::size(others)]
             : !writes && kind % 2 == 0 ? Op::kLd  // a loads-only unit checks ld only
                                        : kBuilt[rng() % std::size(kBuilt)];
      e.shared = rng() % 2;
      e.lanes = static_cast<unsigned>(rng() % 16);
      const bool enable = rng() % 16 != 0;
      std::array<std::uint32_t, 2> bound{};
      for (int s = 0; s < 2; ++s) {
        const std::uint32_t words = static_cast<std::uint32_t>(run.words[s]);
        bound[s] = rng() % 8 == 0 ? (rng() % 2 ? 0 : words) : static_cast<std::uint32_t>(rng() % (words + 1));
      }
      const std::uint32_t imms[] = {0, 4, 2, 0x40, static_cast<std::uint32_t>(rng()), 0xfffffffc, 0x80000000};
      e.imm = imms[rng() % std::size(imms)];
      for (int l = 0; l < kLanes; ++l) {
        std::uint32_t x = 0;
        switch (rng() % 5) {
          case 0: x = static_cast<std::uint32_t>(rng()); break;                           // anything
          case 1: x = static_cast<std::uint32_t>(rng() % 8) << (12 + rng() % 20); break;  // a high bit or few
          default:  // around the bound, aligned or not
            x = 4u * (bound[e.shared] + static_cast<std::uint32_t>(rng() % 5) - 3u) +
                static_cast<std::uint32_t>(rng() % 4 == 0 ? rng() % 4 : 0);
            break;
        }
        e.a[l] = x - e.imm;  // a + imm wraps back to x
        e.b[l] = value(rng);
        e.c[l] = value(rng);
      }
      for (int s = 0; s < 2; ++s) {  // the bounds, one token each (the unit is off on them: no fault)
        auto y = run.step({{weights::Word{k.bound_we}, 1},
                           {weights::Word{k.bound_row}, static_cast<std::uint64_t>(s)},
                           {k.bound_value, bound[s]}});
        for (const circuit::MemoryLane& ln : k.mem.lane) {
          run.expect(y, weights::Word{ln.misaligned}, 0, "bound token: misaligned");
          run.expect(y, weights::Word{ln.out_of_bounds}, 0, "bound token: out of bounds");
        }
      }
      auto y = run.step(run.exec_inputs(e, enable));
      const bool access = e.op == Op::kLd || (writes && (e.op == Op::kSt || is_atomic(e.op)));
      for (int l = 0; l < kLanes; ++l) {
        const std::uint32_t x = e.a[l] + e.imm;
        const bool on = enable && access && ((e.lanes >> l) & 1);
        const bool mis = on && x % 4 != 0;
        const bool oob = on && x % 4 == 0 && x / 4 >= bound[e.shared];
        faults[0] += mis;
        faults[1] += oob;
        const std::string w = std::string(name) + " " + std::string(weights::dtype_name(dt)) + " " +
                              std::string(disassemble(Instr{e.op})) + (e.shared ? " shared" : " global") + " x=0x" +
                              [&] {
                                char b[16];
                                std::snprintf(b, sizeof b, "%x", x);
                                return std::string(b);
                              }() +
                              " bound " + std::to_string(bound[e.shared]) + " lane " + std::to_string(l);
        run.expect(y, weights::Word{k.mem.lane[l].misaligned}, mis, w + " misaligned");
        run.expect(y, weights::Word{k.mem.lane[l].out_of_bounds}, oob, w + " out of bounds");
      }
      ++n;
    }
    std::printf("[ %s faults %s ] %d EXEC tokens: %d misaligned, %d out-of-bounds lanes; %d wrong, %d inexact\n", name,
                std::string(weights::dtype_name(dt)).c_str(), n, faults[0], faults[1], run.wrong, run.inexact);
    EXPECT_GT(faults[0], 100);
    EXPECT_GT(faults[1], 100);
    EXPECT_EQ(run.wrong, 0);
    EXPECT_EQ(run.inexact, 0);
  }
}
TEST(CircuitMemory, FaultChecksStandard) {
  run_faults(MemoryLayout::kStandard, true, "standard");
}
TEST(CircuitMemory, FaultChecksWide) {
  run_faults(MemoryLayout::kWide, true, "wide");
}
TEST(CircuitMemory, FaultChecksLoadsOnly) {
  run_faults(MemoryLayout::kStandard, false, "standard, loads only");
}

TEST(CircuitMemory, LoadsOnlyUnitLoadsAndNeverWrites) {
  run_loads_only();
}

TEST(CircuitMemory, SupportedOpcodes) {
  int n = 0;
  for (Op op : kBuilt) EXPECT_TRUE(circuit::memory_circuit_supports(op)) << disassemble(Instr{op});
  for (int o = 0; o < kOpCount; ++o) n += circuit::memory_circuit_supports(static_cast<Op>(o));
  EXPECT_EQ(n, static_cast<int>(std::size(kBuilt)));
}

// A block may hold two memory reads (docs/ISA.md §6): two units over one set of RAMs.
TEST(CircuitMemory, TwoUnitsShareTheRams) {
  weights::Circuit c("simt.memory2");
  auto rec = circuit::build_records(c, 1);
  ASSERT_TRUE(rec.has_value()) << rec.status().to_string();
  auto rams = circuit::build_memory_rams(c, MemoryLayout::kCompact, *rec);
  ASSERT_TRUE(rams.has_value()) << rams.status().to_string();
  std::vector<circuit::Memory> units;
  for (const char* owner : {"mem0", "mem1"}) {
    circuit::MemoryIn mi;
    mi.owner = owner;
    mi.enable = (*c.input(owner, "enable", 1))[0];
    mi.opcode = *c.input(owner, "opcode", kOpCount);
    mi.shared = (*c.input(owner, "shared", 1))[0];
    mi.imm = *c.input(owner, "imm", 32);
    for (int l = 0; l < kLanes; ++l) {
      const std::string ln = std::string(owner) + ".lane" + std::to_string(l);
      mi.active[l] = (*c.input(ln, "active", 1))[0];
      mi.a[l] = *c.input(ln, "a", 32);
      mi.b[l] = *c.input(ln, "b", 32);
      mi.c[l] = *c.input(ln, "c", 32);
    }
    auto m = circuit::build_memory(c, *rams, mi);
    ASSERT_TRUE(m.has_value()) << m.status().to_string();
    units.push_back(std::move(*m));
  }
  EXPECT_EQ(c.rams().size(), 4u);
  EXPECT_NE(units[0].lane[0].loaded.front().field, units[1].lane[0].loaded.front().field);
  // A second set of RAMs (and WMEM write ports) in the same circuit is refused by name.
  auto again = circuit::build_memory_rams(c, MemoryLayout::kCompact, *rec);
  EXPECT_FALSE(again.has_value());
}

// A WMEM record's header fields from its token id (values worked out by hand from
// docs/PROTOCOL.md §3.1), and the compact layout refusing rows past its 256 words.
TEST(CircuitMemory, WmemTokenIdsCarryTheRecord) {
  const Compiled& k = compiled(MemoryLayout::kCompact);
  ASSERT_TRUE(k.ok);
  const std::uint32_t v[] = {7, 8, 9};
  const Record r = wmem_record(true, 6, v);  // byte format: DATA 7 | 8 << 8, DATA 9
  auto ids = circuit::record_token_ids(k.rec, r);
  ASSERT_TRUE(ids.has_value()) << ids.status().to_string();
  ASSERT_EQ(ids->size(), 3u);
  // id = base + 68892 + ((s·1024 + a)·4 + n − 1)·4 + f
  EXPECT_EQ(ids->front(), 248320 + 68892 + ((1024 + 6) * 4 + 2) * 4 + 1);
  auto in = circuit::token_inputs(k.rec, ids->front());
  ASSERT_TRUE(in.has_value()) << in.status().to_string();
  std::map<std::string, std::uint64_t> got;
  for (const auto& [w, x] : *in) got[k.c.fields()[static_cast<std::size_t>(w.front().field)].full_name()] = x;
  // Words 6, 7, 8: banks 2, 3, 0; rows 1, 1, 2 (bank 0 wraps); DATA 1: 6 low, 7 high; DATA 2: 8.
  const std::map<std::string, std::uint64_t> want = {{"rec.row", 1},       {"wmem.row7", 0},     {"wmem.shared", 1},
                                                     {"wmem.wrap", 0b0001},
                                                     {"wmem.zero", 0},     {"wmem.byte", 0b11},  {"wmem.word", 0},
                                                     {"wmem.lo1", 0b0100}, {"wmem.hi1", 0b1000}, {"wmem.lo2", 0b0001},
                                                     {"wmem.hi2", 0},      {"wmem.lo3", 0}};
  EXPECT_EQ(got, want);
  const std::uint32_t four[] = {1, 2, 3, 4};
  auto past_ids = circuit::record_token_ids(k.rec, wmem_record(false, 254, four));
  ASSERT_TRUE(past_ids.has_value());  // the protocol holds 1,024 global words
  auto past = circuit::token_inputs(k.rec, past_ids->front());
  ASSERT_FALSE(past.has_value());
  EXPECT_NE(past.status().to_string().find(
                "global words 254..257 run past the 256 words of the circuit's memory layout (over by 2)"),
            std::string::npos)
      << past.status().to_string();
}

// Every format × word count × first bank × space, with each format's edge values, written by
// token ids and read back by ld (and the write ports checked at every token).
void run_formats(MemoryLayout layout, const char* name) {
  const Compiled& k = compiled(layout);
  ASSERT_TRUE(k.ok);
  const std::vector<std::vector<std::uint32_t>> pools = {
      {0},
      {1, 0xffffffffu, 0x7f, 0xffffff80u /* -128 */, 2, 0xfffffffeu},
      {0x7fff, 0xffff8000u /* -32768 */, 0x80, 0xffffff7fu, 0xff, 0x100, 0xfffffe00u},
      {0x80000000u, 0x7fffffff, 0x8000, 0xffff7fffu, 0x10000, 0xffffffffu}};
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Run run(k, dt);
    std::mt19937_64 rng(31);
    write_image(run, rng);
    int records = 0;
    for (int f = 0; f < 4; ++f)
      for (std::uint32_t n = 1; n <= 4; ++n) {
        if ((f == 2 && n > 3) || (f == 3 && n > 1)) continue;  // reserved rows
        for (std::uint32_t first = 0; first < 4; ++first)
          for (int s = 0; s < 2; ++s) {
            const auto& pool = pools[static_cast<std::size_t>(f)];
            std::vector<std::uint32_t> v(n);
            for (auto& x : v) x = pool[rng() % pool.size()];
            v[rng() % n] = pool[rng() % std::min<std::size_t>(pool.size(), 2)];  // needs format f
            const std::uint32_t word = 4 * static_cast<std::uint32_t>(rng() % (run.words[s] / 4 - 1)) + first;
            const Record r = wmem_record(s == 1, word, v);
            ASSERT_EQ(static_cast<int>(r.format), f) << to_text(r);
            run.feed(r);
            for (std::uint32_t i = 0; i < n; ++i) run.mem[s][word + i] = v[i];
            ++records;
          }
      }
    read_back(run, dt);
    double mlp, gdn;
    run.margins(mlp, gdn);
    std::printf(
        "[ %s %s ] %d WMEM records of every format (%d tokens) + read-back: %d checked, %d wrong, %d inexact; "
        "margins MLP %g GDN %g\n",
        name, std::string(weights::dtype_name(dt)).c_str(), records, run.tokens, run.checked, run.wrong, run.inexact,
        mlp, gdn);
    EXPECT_EQ(records, 2 * 4 * (4 + 4 + 3 + 1));
    EXPECT_EQ(run.wrong, 0);
    EXPECT_EQ(run.inexact, 0);
    EXPECT_GE(mlp, 88.73);
    EXPECT_GE(gdn, 88.73);
  }
}

TEST(CircuitMemory, WmemFormatsWriteExactlyCompact) {
  run_formats(MemoryLayout::kCompact, "compact");
}
TEST(CircuitMemory, WmemFormatsWriteExactlyStandard) {
  run_formats(MemoryLayout::kStandard, "standard");
}
TEST(CircuitMemory, WmemFormatsWriteExactlyWide) {
  run_formats(MemoryLayout::kWide, "wide");
}

TEST(CircuitMemory, DisabledOrOtherOpcodesLeaveOutputsAndMemory) {
  run_silent(MemoryLayout::kCompact, "compact");
  run_silent(MemoryLayout::kStandard, "standard");
  run_silent(MemoryLayout::kWide, "wide");
}

TEST(CircuitMemory, StandardLayoutMatchesLaneOrderModel) {
  run_layout(MemoryLayout::kStandard, "standard");
}
TEST(CircuitMemory, WideLayoutMatchesLaneOrderModel) {
  run_layout(MemoryLayout::kWide, "wide");
}
TEST(CircuitMemory, CompactLayoutMatchesLaneOrderModel) {
  run_layout(MemoryLayout::kCompact, "compact");
}

// The host's read-back (docs/PROTOCOL.md §5): after WMEM records (a random image, then
// overwrites of 1-4 words in every format at random places), every word of both spaces
// read straight from the bank RAMs' recurrent state with weights::read_ram (every
// replica must agree) equals the plain model's memory.
void run_host_read(MemoryLayout layout) {
  const Compiled& k = compiled(layout);
  ASSERT_TRUE(k.ok);
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Run run(k, dt);
    std::mt19937_64 rng(77);
    write_image(run, rng);
    for (int i = 0; i < 60; ++i) {
      std::vector<std::uint32_t> v(1 + rng() % 4);
      for (auto& x : v) x = value(rng);
      const bool shared = rng() % 2;
      run.write(shared, static_cast<std::uint32_t>(rng() % (run.words[shared] - v.size() + 1)), v);
    }
    const weights::StateView state = run.m.state_view();
    std::vector<std::vector<std::uint64_t>> banks(k.mem.rams.rams.size());  // read_ram of each bank RAM
    for (std::size_t r = 0; r < k.mem.rams.rams.size(); ++r) {
      auto rows = weights::read_ram(k.cc, k.mem.rams.rams[r], state);
      ASSERT_TRUE(rows.has_value()) << rows.status().to_string();
      banks[r] = std::move(*rows);
    }
    int wrong = 0, nonzero = 0;
    for (int s = 0; s < 2; ++s)
      for (int w = 0; w < run.words[s]; ++w) {
        const circuit::BankRow at = circuit::bank_row(layout, s == 1, w);
        const std::size_t ram = static_cast<std::size_t>(at.ram), row = static_cast<std::size_t>(at.row);
        const std::uint32_t want = run.mem[s][static_cast<std::size_t>(w)];
        nonzero += want != 0;
        if (banks[ram][row] != want && ++wrong <= 8)
          ADD_FAILURE() << (s ? "shared" : "global") << " word " << w << " = 0x" << std::hex << banks[ram][row]
                        << ", expected 0x" << want;
      }
    std::printf(
        "[ %s %s ] host read-back of %d + %d words from the bank RAMs' state (%zu replicas each) after %d "
        "tokens: %d wrong (%d nonzero words)\n",
        layout_name(layout), std::string(weights::dtype_name(dt)).c_str(), run.words[0], run.words[1],
        k.cc.rams[static_cast<std::size_t>(k.mem.rams.rams[0])].replicas.size(), run.tokens, wrong, nonzero);
    EXPECT_EQ(wrong, 0);
    EXPECT_GT(nonzero, run.words[0]);
  }
}

TEST(CircuitMemory, HostReadsEveryWordFromTheState) {
  run_host_read(MemoryLayout::kCompact);
  run_host_read(MemoryLayout::kStandard);
  run_host_read(MemoryLayout::kWide);
}

}  // namespace
}  // namespace qgpu::simt
