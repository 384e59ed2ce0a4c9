#include "model_run.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <optional>
#include <span>
#include <utility>

#include "choice.h"
#include "interp.h"
#include "machine.h"
#include "protocol.h"
#include "qgpu/weights/compile.h"
#include "qgpu/weights/numerics.h"
#include "qgpu/weights/reference.h"
#include "qgpu/weights/report.h"
#include "qgpu/weights/state.h"
#include "records.h"
#include "writeback.h"

namespace qgpu::simt {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The choice's logit scale: α = 1 puts the logits in bits (the chosen row scores
// kChoiceKindWeight, a row with one wrong bit one less).
constexpr double kChoiceAlpha = 1;
// In the merged model the record rows compete with the base's text rows (and read the
// residual after the base's layers): α = 16 puts the chosen row at 16 · 17 = 272 in
// units of the fields' normalized value.
constexpr double kMergedChoiceAlpha = 16;
// ... and the fields are amplified in the circuit's last layer (build_successor's
// choice_gain, circuit::kMergedChoiceGain): at ±gain·u they make up almost all of the
// residual the base's layers add to, so after the final norm each reads about
// ±sqrt(hidden / fields) and what the base adds moves the logits gain times less than it
// would at ±u.

// The machine's circuit, compiled once per process.
struct CompiledMachine {
  weights::Circuit c{"machine"};
  circuit::Machine m;
  weights::CompiledCircuit cc;
  weights::SparseMatrix unembed;  // the machine's rows
  double build_s = 0, compile_s = 0;
  std::int64_t key_heads = 0;
  bool merged = false;  // compiled for the merge: the base's shapes, a mute channel, kMergedChoiceAlpha
};

void say(const sdk::ModelRunOptions& o, const std::string& line) {
  if (o.on_progress) o.on_progress(line);
}

sdk::Expected<std::unique_ptr<CompiledMachine>> build_compiled(const sdk::ModelRunOptions& o,
                                                               const weights::Target& target, bool merged) {
  auto x = std::make_unique<CompiledMachine>();
  x->merged = merged;
  say(o, "circuit: building the machine");
  auto t0 = Clock::now();
  auto m = circuit::build_machine(x->c, merged ? circuit::kMergedChoiceGain : 1);
  if (!m) return m.status().with_context("building the machine's circuit");
  x->m = std::move(*m);
  const circuit::NextToken* next = &x->m.sequencer.next;
  // The choice reads the NextToken fields after the last layer: they keep their channels.
  QGPU_RETURN_IF_ERROR(circuit::mark_choice_outputs(x->c, *next));
  x->build_s = seconds_since(t0);
  say(o, "circuit: compiling " + std::to_string(x->c.fields().size()) + " fields, " +
             std::to_string(x->c.ops().size()) + " ops to " +
             (merged ? std::string("the base's layer shapes (with a mute channel)") : "Qwen3.5-2B layer shapes") +
             " at hidden " + std::to_string(target.shapes.hidden_size));
  t0 = Clock::now();
  auto cc = weights::compile(x->c, target);
  if (!cc && merged && cc.status().code() == sdk::ErrorCode::kLimitExceeded)
    return cc.status().with_context("the machine does not fit the base's layer shapes (hidden " +
                                    std::to_string(target.shapes.hidden_size) + ", MLP " +
                                    std::to_string(target.shapes.intermediate_size) + ", " +
                                    std::to_string(target.shapes.linear_num_value_heads) +
                                    " value heads; Qwen3.5-2B's shapes and larger fit, with the mute direction's " +
                                    std::to_string(target.mute_width) + " channels)");
  if (!cc) return cc.status().with_context("compiling the machine's circuit");
  x->cc = std::move(*cc);
  x->compile_s = seconds_since(t0);
  for (const weights::LayerUse& u : x->cc.schedule.use) x->key_heads += u.key_heads;
  auto u = circuit::record_unembedding(*next, x->cc.allocation, merged ? kMergedChoiceAlpha : kChoiceAlpha);
  if (!u) return u.status().with_context("the machine's unembedding");
  x->unembed = std::move(*u);
  char line[256];
  std::snprintf(line, sizeof line,
                "circuit: %d layers, %lld neurons, %lld key heads, %lld of %lld channels (built in %.1f s, compiled "
                "in %.1f s)",
                x->cc.schedule.num_layers, static_cast<long long>(x->cc.total_neurons()),
                static_cast<long long>(x->key_heads), static_cast<long long>(x->cc.allocation.channels_used),
                static_cast<long long>(target.shapes.hidden_size), x->build_s, x->compile_s);
  say(o, line);
  return x;
}

// Compiled once per process and target: the circuit engine's (machine_target()) and the
// merge's (the base's shapes with a mute channel).
sdk::Expected<const CompiledMachine*> compiled_machine(bool merged, const weights::Target& target,
                                                       const sdk::ModelRunOptions& o) {
  static std::mutex mu;
  struct Entry {
    weights::Target target;
    bool merged = false;
    std::unique_ptr<CompiledMachine> x;
    std::optional<sdk::Status> failed;
  };
  static std::vector<Entry> cache;
  auto same = [&](const Entry& e) {
    return e.merged == merged && e.target.shapes == target.shapes && e.target.mute_width == target.mute_width;
  };
  std::lock_guard<std::mutex> lock(mu);
  for (const Entry& e : cache) {
    if (!same(e)) continue;
    if (e.failed) return *e.failed;
    return static_cast<const CompiledMachine*>(e.x.get());
  }
  Entry e{target, merged, nullptr, std::nullopt};
  auto x = build_compiled(o, target, merged);
  if (x)
    e.x = std::move(*x);
  else
    e.failed = x.status();
  cache.push_back(std::move(e));
  if (cache.back().failed) return *cache.back().failed;
  return static_cast<const CompiledMachine*>(cache.back().x.get());
}

// The target of an engine: the machine's own, or (merged) the base's shapes with the mute
// direction's channels reserved.
weights::Target target_for(bool merged, const sdk::LayerShapes& shapes, int mute_width) {
  weights::Target target = circuit::machine_target();
  if (merged) {
    if (shapes.hidden_size > 0) target.shapes = shapes;
    target.mute_channel = true;
    target.mute_width = mute_width;
  }
  return target;
}

sdk::Expected<const CompiledMachine*> compiled_machine(const sdk::ModelRunOptions& o) {
  const bool merged = o.engine == "model";
  return compiled_machine(merged, merged ? target_for(true, o.model->shapes(), o.model->mute_width())
                                         : circuit::machine_target(), o);
}

// The record rows of the merge: row i embeds token id base + i (weights::embed of its
// inputs, asked for by the host; a row the protocol reserves is 0) and scores with the
// machine's unembedding row i (sparse, as compiled).
sdk::Status merge_machine(const CompiledMachine& x, sdk::ModelHost& host, const sdk::ModelRunOptions& o) {
  const auto t0 = Clock::now();
  sdk::RecordRows rows;
  rows.records = vocabulary_rows();
  rows.embedding = [&x](std::int64_t r) -> sdk::Expected<std::vector<float>> {
    auto in = circuit::token_inputs(x.m.fd.records, x.m.fd.records.base + r);
    if (!in) return std::vector<float>(static_cast<std::size_t>(x.cc.target.shapes.hidden_size), 0.0f);
    return weights::embed(x.c, x.cc.allocation, *in);
  };
  rows.unembedding = &x.unembed;
  say(o, "model: merging " + std::to_string(x.cc.schedule.num_layers) + " circuit layers and " +
             std::to_string(rows.records) + " record rows in front of the base");
  QGPU_RETURN_IF_ERROR(host.merge(x.cc, rows));
  char line[96];
  std::snprintf(line, sizeof line, " (%.1f s)", seconds_since(t0));
  // describe(): a line on the merge, then the silence certificate and the choice placement.
  std::string lines = host.describe();
  for (std::size_t start = 0, first = 1; start <= lines.size(); first = 0) {
    const std::size_t end = std::min(lines.find('\n', start), lines.size());
    say(o, "model: " + lines.substr(start, end - start) + (first ? line : ""));
    start = end + 1;
  }
  return sdk::Status::ok();
}

bool never_generated(RecordKind k) {
  return k == RecordKind::kRun || k == RecordKind::kLaunch || k == RecordKind::kRom || k == RecordKind::kLive;
}

}  // namespace

struct CircuitRun::State {
  const CompiledMachine* x = nullptr;
  const Program* program = nullptr;
  std::vector<sdk::LaunchArg> args;
  sdk::ModelRunOptions options;
  weights::DType dtype = weights::DType::kF32;
  std::unique_ptr<weights::ReferenceModel> model;  // engine "circuit"
  sdk::ModelHost* host = nullptr;                  // engine "model"
  std::vector<float> logits;                       // engine "model": after the last token fed
  std::vector<Record> prompt;
  MemoryLayout layout;
  std::vector<float> y;  // the residual after the last token fed
  std::int64_t prompt_tokens = 0;
  std::vector<std::int64_t> prompt_ids;  // token ids (the machine's numbering)
  std::vector<std::int64_t> generated;   // token ids
  std::vector<std::string> records;      // generated records' text
  double min_margin = 0;
  bool halted = false;
  // --check: the interpreter's stream and final arrays.
  std::vector<std::int64_t> expected;
  std::vector<sdk::LaunchArg> expected_arrays;
  double prompt_s = 0, generate_s = 0, readback_s = 0;

  std::int64_t base() const { return x->m.fd.records.base; }
  // Feeds machine token ids (numbered from base(); the merged model's from host->text_rows()).
  sdk::Status feed(std::span<const std::int64_t> ids) {
    if (host != nullptr) {
      std::vector<std::int64_t> merged(ids.begin(), ids.end());
      for (std::int64_t& id : merged) id = id - base() + host->text_rows();
      auto l = host->forward(merged);
      if (!l) return l.status();
      logits = std::move(*l);
      return sdk::Status::ok();
    }
    for (std::int64_t id : ids) {
      auto in = circuit::token_inputs(x->m.fd.records, id);
      if (!in) return in.status();
      y = model->step(weights::embed(x->c, x->cc.allocation, *in));
    }
    return sdk::Status::ok();
  }
  sdk::Status feed(std::int64_t id) { return feed(std::span<const std::int64_t>(&id, 1)); }
  std::string engine() const { return host != nullptr ? "model" : "circuit"; }
  // "last records: A | B | C": up to three generated records before the failure.
  std::string last_records() const {
    if (records.empty()) return "no record generated yet, after the prompt's RUN";
    std::string t = records.size() == 1 ? "last record: " : "last records: ";
    for (std::size_t i = records.size() > 3 ? records.size() - 3 : 0; i < records.size(); ++i)
      t += records[i] + (i + 1 < records.size() ? " | " : "");
    return t;
  }
};

CircuitRun::CircuitRun(std::unique_ptr<State> state) : s_(std::move(state)) {}
CircuitRun::~CircuitRun() = default;

sdk::Expected<std::unique_ptr<CircuitRun>> CircuitRun::start(const Program& program,
                                                             const std::vector<sdk::LaunchArg>& args,
                                                             const sdk::ModelRunOptions& options) {
  if (options.engine != "circuit" && options.engine != "model")
    return sdk::invalid_argument("engine '" + options.engine + "' is not one of circuit, model");
  if (options.engine == "model" && options.model == nullptr)
    return sdk::invalid_argument("--engine model needs the host's merged model (ModelRunOptions::model)");
  auto s = std::make_unique<State>();
  if (options.engine == "model") {
    s->host = options.model;
    if (options.dtype != s->host->dtype())
      return sdk::invalid_argument("--engine model runs in the backend's dtype " + s->host->dtype() + ", not " +
                                   options.dtype + " (set backend.dtype in the config)");
  }
  if (options.dtype == "f32")
    s->dtype = weights::DType::kF32;
  else if (options.dtype == "bf16")
    s->dtype = weights::DType::kBF16;
  else
    return sdk::invalid_argument("dtype '" + options.dtype + "' is not one of f32, bf16");
  s->program = &program;
  s->args = args;
  s->options = options;
  auto prompt = encode_prompt(program, args);
  if (!prompt) return prompt.status();
  s->prompt = std::move(*prompt);
  auto layout = layout_arguments(program, args);
  if (!layout) return layout.status();
  s->layout = std::move(*layout);
  if (options.check) {
    auto lr = record_launch(program, args, {});
    if (!lr) return lr.status().with_context("--check: the interpreter's run");
    auto ids = encode_tokens(lr->generated, kQwen35VocabRows);
    if (!ids) return ids.status().with_context("--check: the expected stream");
    s->expected = std::move(*ids);
    s->expected_arrays = std::move(lr->result.arrays);
  }
  // The one multiplier and the one writing memory unit (docs/ISA.md §6).
  for (std::size_t b = 0; b < program.blocks.size(); ++b)
    for (std::size_t i = 0; i < program.blocks[b].slots.size(); ++i) {
      const Unit u = op_info(program.blocks[b].slots[i].in.op).unit;
      const bool mul = u == kUnitMul, write = u == kUnitStore || u == kUnitAtomic;
      const int want = mul ? circuit::kMulSlot : circuit::kMemWriteSlot;
      if ((mul || write) && static_cast<int>(i) != want)
        return sdk::unsupported("--engine " + options.engine + ": block B" + std::to_string(b) + " (" +
                                program.blocks[b].label + ") has " +
                                std::string(op_info(program.blocks[b].slots[i].in.op).mnemonic) + " in slot " +
                                std::to_string(i) + ", the circuit " + (mul ? "multiplies" : "writes memory") +
                                " only in slot " + std::to_string(want) + " (docs/ISA.md §6)");
    }
  auto x = compiled_machine(options);
  if (!x) return x.status();
  s->x = *x;
  if (s->options.check && s->base() != kQwen35VocabRows)
    return sdk::internal_error("the circuit's first machine row " + std::to_string(s->base()) +
                               " differs from the protocol's " + std::to_string(kQwen35VocabRows));
  // What the circuit was built for (the machine's default options).
  if (program.config.block_instructions != circuit::kMachineSlots)
    return sdk::unsupported("--engine " + options.engine + ": the circuit runs blocks of " +
                            std::to_string(circuit::kMachineSlots) +
                            " instructions, the program was lowered with block_instructions " +
                            std::to_string(program.config.block_instructions));
  const int words = circuit::memory_words(s->x->m.memory.layout);
  if (s->layout.total_words > words)
    return sdk::limit_exceeded("--engine " + options.engine + ": the launch's arrays need " +
                               std::to_string(s->layout.total_words) +
                               " words of global memory, the circuit's memory holds " + std::to_string(words) +
                               " (over by " + std::to_string(s->layout.total_words - words) + ")");
  if (s->host != nullptr && s->host->holds(s->x->cc))
    s->host->reset();  // merged by an earlier run: a new sequence
  else if (s->host != nullptr)
    QGPU_RETURN_IF_ERROR(merge_machine(*s->x, *s->host, options));
  else
    s->model = std::make_unique<weights::ReferenceModel>(s->x->cc.layers, s->x->cc.target.shapes, s->dtype);
  return std::unique_ptr<CircuitRun>(new CircuitRun(std::move(s)));
}

sdk::Status CircuitRun::feed_prompt() {
  State& s = *s_;
  const auto t0 = Clock::now();
  std::vector<std::int64_t> all;  // the merged model takes the whole prompt in one call
  for (std::size_t i = 0; i < s.prompt.size(); ++i) {
    const Record& r = s.prompt[i];
    auto ids = circuit::record_token_ids(s.x->m.fd.records, r);
    if (!ids) return ids.status().with_context("prompt record " + std::to_string(i) + " (" + to_text(r) + ")");
    s.prompt_ids.insert(s.prompt_ids.end(), ids->begin(), ids->end());
    if (s.host != nullptr) {
      all.insert(all.end(), ids->begin(), ids->end());
      s.prompt_tokens += static_cast<std::int64_t>(ids->size());
      continue;
    }
    for (std::int64_t id : *ids) {
      sdk::Status st = s.feed(id);
      if (!st.is_ok()) return st.with_context("prompt record " + std::to_string(i) + " (" + to_text(r) + ")");
      ++s.prompt_tokens;
    }
  }
  if (s.host != nullptr) QGPU_RETURN_IF_ERROR(s.feed(all).with_context("the prompt"));
  s.prompt_s = seconds_since(t0);
  say(s.options, s.engine() + ": fed the prompt: " + std::to_string(s.prompt.size()) + " records, " +
                     std::to_string(s.prompt_tokens) + " tokens");
  return sdk::Status::ok();
}

sdk::Status CircuitRun::generate() {
  State& s = *s_;
  if (s.prompt_tokens == 0) return sdk::internal_error("generate() before feed_prompt()");
  const weights::SparseMatrix& u = s.x->unembed;
  std::vector<float> logits(static_cast<std::size_t>(u.rows), 0.f);
  const std::int64_t text = s.host != nullptr ? s.host->text_rows() : 0;
  std::vector<std::int64_t> current;  // the record being generated: header + DATA so far
  int need = 0;                       // DATA tokens it still needs
  const auto t0 = Clock::now();
  // Progress (ModelRunOptions::on_step): records by kind, warp-instructions of the EXECs.
  std::array<std::int64_t, kRecordKinds> by_kind{};
  std::int64_t warp_instructions = 0;
  auto last_step = t0;
  auto progress = [&](bool done) {
    if (!s.options.on_step) return;
    sdk::LaunchProgress p;
    p.generated_tokens = static_cast<std::int64_t>(s.generated.size());
    p.records = static_cast<std::int64_t>(s.records.size());
    for (int k = 0; k < kRecordKinds; ++k)
      if (by_kind[static_cast<std::size_t>(k)] > 0)
        p.records_by_kind.emplace_back(kind_name(static_cast<RecordKind>(k)), by_kind[static_cast<std::size_t>(k)]);
    p.warp_instructions = warp_instructions;
    p.seconds = seconds_since(t0);
    p.min_margin = s.min_margin;
    p.done = done;
    s.options.on_step(p);
  };
  for (std::size_t step = 0;; ++step) {
    const std::string at = "generated token " + std::to_string(step);
    if (s.options.cancel != nullptr && s.options.cancel->load())
      return sdk::cancelled("stopped after " + std::to_string(step) + " generated tokens (" +
                            std::to_string(s.records.size()) + " records, " + std::to_string(warp_instructions) +
                            " warp-instructions) in " + std::to_string(static_cast<int>(seconds_since(t0))) + " s; " +
                            s.last_records());
    if (s.options.on_step &&
        std::chrono::duration<double>(Clock::now() - last_step).count() >= s.options.step_interval_s) {
      last_step = Clock::now();
      progress(false);
    }
    if (step >= s.options.max_tokens)
      return sdk::limit_exceeded("the launch did not reach HALT within --max-tokens " +
                                 std::to_string(s.options.max_tokens) + " generated tokens (" + s.last_records() + ")");
    sdk::Expected<circuit::Choice> ch = circuit::Choice{};
    if (s.host != nullptr) {
      ch = circuit::choose(s.logits, text);  // the model's own logits over every row: no text row may win
    } else {
      for (std::int64_t r = 0; r < u.rows; ++r) {
        double acc = 0;
        for (std::int64_t p = u.row_ptr[r]; p < u.row_ptr[r + 1]; ++p)
          acc += u.val[p] * s.y[static_cast<std::size_t>(u.col[p])];
        logits[static_cast<std::size_t>(r)] = static_cast<float>(acc / weights::kResidualUnit);
      }
      ch = circuit::choose(logits);
    }
    // --check: the expected token at this step against what was chosen (`got`: a text when
    // nothing or a row the machine never generates was chosen).
    auto check_failure = [&](const std::string& got, const std::string& margin) {
      auto mm = first_mismatch(s.expected, s.generated, s.base());
      if (!mm) return sdk::internal_error("--check: " + at + ": the streams differ (" + got + ")");
      if (!got.empty()) mm->got = got;
      return sdk::internal_error("--check: " + mm->to_string() + " (" + margin + s.last_records() + ")");
    };
    if (!ch) {
      if (s.options.check) return check_failure("no token (" + ch.status().message() + ")", "");
      return ch.status().with_context(at + " (" + s.last_records() + ")");
    }
    char margin[64];
    std::snprintf(margin, sizeof margin, "margin %g; ", ch->margin);
    auto rec = token_record(ch->offset);
    if (!rec || never_generated(rec->kind)) {
      const std::string what = "machine row " + std::to_string(ch->offset) + " (" +
                               (rec ? to_text(*rec) : rec.status().message()) + "), which the machine never generates";
      if (s.options.check) return check_failure(what, margin);
      return sdk::internal_error(at + ": the model chose " + what + " (" + s.last_records() + ")");
    }
    const std::int64_t id = s.base() + ch->offset;
    s.min_margin = step == 0 ? ch->margin : std::min(s.min_margin, ch->margin);
    s.generated.push_back(id);
    if (s.options.check && (step >= s.expected.size() || s.expected[step] != id)) return check_failure("", margin);
    // Records as they complete.
    if (rec->kind == RecordKind::kData) {
      if (need == 0)
        return sdk::internal_error(at + ": a DATA token where a record header was due (" + s.last_records() + ")");
      current.push_back(id);
      --need;
    } else {
      if (need > 0)
        return sdk::internal_error(at + ": header " + to_text(*rec) + " while the record before still needs " +
                                   std::to_string(need) + " DATA tokens (" + s.last_records() + ")");
      current.assign(1, id);
      need = data_tokens(*rec);
    }
    if (need == 0) {
      auto done = decode_tokens(current, s.base());
      if (!done || done->size() != 1)
        return sdk::internal_error(at + ": the generated record does not decode" +
                                   (done ? std::string() : ": " + done.status().message()) + " (" + s.last_records() +
                                   ")");
      s.records.push_back(to_text(done->front()));
      const Record& complete = done->front();
      ++by_kind[static_cast<std::size_t>(complete.kind)];
      if (complete.kind == RecordKind::kExec &&
          static_cast<std::size_t>(complete.block) < s.program->blocks.size())
        warp_instructions +=
            static_cast<std::int64_t>(s.program->blocks[static_cast<std::size_t>(complete.block)].slots.size());
      if (s.options.trace && s.options.on_record) s.options.on_record(s.records.back());
      if (done->front().kind == RecordKind::kHalt) break;  // nothing reads what HALT's pass would do
    }
    sdk::Status st = s.feed(id);
    if (!st.is_ok()) return st.with_context(at + " (" + s.last_records() + ")");
  }
  s.halted = true;
  s.generate_s = seconds_since(t0);
  progress(true);
  char line[160];
  std::snprintf(line, sizeof line, "%s: HALT after %zu generated tokens (%.1f ms per token)", s.engine().c_str(),
                s.generated.size(), 1e3 * s.generate_s / static_cast<double>(s.generated.size()));
  say(s.options, line);
  return sdk::Status::ok();
}

sdk::Expected<std::vector<sdk::LaunchArg>> CircuitRun::read_arrays() const {
  const State& s = *s_;
  const auto t0 = Clock::now();
  const circuit::MemoryRams& mem = s.x->m.memory;
  weights::StateView state;
  if (s.host != nullptr) {
    auto v = s.host->circuit_state();
    if (!v) return v.status().with_context("reading the merged model's state");
    state = std::move(*v);
  } else {
    state = s.model->state_view();
  }
  // Global memory (space 0): word w in bank w & 3, row w >> 2 (both layouts; kCompact
  // puts shared memory at rows 64.., kProtocol in its own 4 RAMs).
  std::vector<std::vector<std::uint64_t>> banks(4);
  std::vector<std::int32_t> global(static_cast<std::size_t>(s.layout.total_words), 0);
  for (int w = 0; w < s.layout.total_words; ++w) {
    const int bank = w & 3;
    if (banks[static_cast<std::size_t>(bank)].empty()) {
      if (static_cast<std::size_t>(bank) >= mem.rams.size())
        return sdk::internal_error("reading global memory: the machine has " + std::to_string(mem.rams.size()) +
                                   " memory RAMs, bank " + std::to_string(bank) + " is missing");
      auto rows = weights::read_ram(s.x->cc, mem.rams[static_cast<std::size_t>(bank)], state);
      if (!rows) return rows.status().with_context("reading global memory bank " + std::to_string(bank));
      banks[static_cast<std::size_t>(bank)] = std::move(*rows);
    }
    const auto& rows = banks[static_cast<std::size_t>(bank)];
    const std::size_t row = static_cast<std::size_t>(w >> 2);
    if (row >= rows.size())
      return sdk::internal_error("reading global memory: word " + std::to_string(w) + " is past bank " +
                                 std::to_string(bank) + "'s " + std::to_string(rows.size()) + " rows");
    global[static_cast<std::size_t>(w)] = static_cast<std::int32_t>(static_cast<std::uint32_t>(rows[row]));
  }
  std::vector<sdk::LaunchArg> out;
  for (std::size_t i = 0; i < s.args.size(); ++i) {
    if (!s.args[i].is_array) continue;
    sdk::LaunchArg a;
    a.param = s.program->params[i].name;
    a.is_array = true;
    const int b = s.layout.base_word[i];
    a.array.assign(global.begin() + b, global.begin() + b + static_cast<std::ptrdiff_t>(s.args[i].array.size()));
    out.push_back(std::move(a));
  }
  s_->readback_s = seconds_since(t0);
  return out;
}

std::int64_t CircuitRun::prompt_tokens() const {
  return s_->prompt_tokens;
}
std::int64_t CircuitRun::generated_tokens() const {
  return static_cast<std::int64_t>(s_->generated.size());
}
double CircuitRun::min_margin() const {
  return s_->min_margin;
}
const std::vector<std::string>& CircuitRun::generated_records() const {
  return s_->records;
}

sdk::Expected<sdk::ModelRunResult> CircuitRun::finish() {
  State& s = *s_;
  if (!s.halted) return sdk::internal_error("finish() before the launch reached HALT");
  auto arrays = read_arrays();
  if (!arrays) return arrays.status();
  sdk::ModelRunResult r;
  if (s.options.check) {
    for (std::size_t i = 0; i < arrays->size(); ++i) {
      const auto& got = (*arrays)[i].array;
      const auto& want = s.expected_arrays.at(i).array;
      for (std::size_t j = 0; j < want.size(); ++j)
        if (got.at(j) != want[j])
          return sdk::internal_error("--check: array '" + (*arrays)[i].param + "' element " + std::to_string(j) +
                                     ": expected " + std::to_string(want[j]) + " (interpreter), got " +
                                     std::to_string(got[j]) + " (read from the model's state)");
    }
    r.checked = true;
    r.check = "check: " + std::to_string(s.records.size()) + " records (" + std::to_string(s.generated.size()) +
              " tokens) equal the interpreter's stream; " + std::to_string(arrays->size()) + " arrays equal";
  }
  // Where each element lives: word w in bank w & 3 (a RAM), row w >> 2, as read_arrays reads it.
  const circuit::MemoryRams& mem = s.x->m.memory;
  for (std::size_t i = 0; i < s.args.size(); ++i) {
    if (!s.args[i].is_array) continue;
    std::vector<sdk::WordLocation> words;
    for (std::size_t j = 0; j < s.args[i].array.size(); ++j) {
      const int w = s.layout.base_word[i] + static_cast<int>(j);
      const weights::RamPlacement& p = s.x->cc.rams.at(static_cast<std::size_t>(mem.rams.at(static_cast<std::size_t>(w & 3))));
      if (p.replicas.empty()) return sdk::internal_error("global memory bank " + std::to_string(w & 3) + " is in no layer");
      const weights::RamReplica& rep = p.replicas.front();
      words.push_back({rep.layer, rep.first_value_head, rep.value_heads, p.bits_per_head, w >> 2});
    }
    r.readout.push_back(std::move(words));
  }
  r.arrays = std::move(*arrays);
  r.generated_records = s.records;
  r.prompt_ids = s.prompt_ids;
  r.generated_ids = s.generated;
  if (s.host != nullptr)
    for (auto* v : {&r.prompt_ids, &r.generated_ids})
      for (std::int64_t& id : *v) id = id - s.base() + s.host->text_rows();
  r.prompt_tokens = s.prompt_tokens;
  r.generated_tokens = static_cast<std::int64_t>(s.generated.size());
  r.min_margin = s.min_margin;
  r.timings = {{"build_s", s.x->build_s},
               {"compile_s", s.x->compile_s},
               {"prompt_s", s.prompt_s},
               {"generate_s", s.generate_s},
               {"readback_s", s.readback_s}};
  r.stats = {{"prompt_tokens", r.prompt_tokens},
             {"generated_tokens", r.generated_tokens},
             {"circuit_layers", s.x->cc.schedule.num_layers},
             {"circuit_neurons", s.x->cc.total_neurons()},
             {"circuit_key_heads", s.x->key_heads},
             {"circuit_channels", s.x->cc.allocation.channels_used}};
  // The layers' smallest switch margins over the run (a bf16-exact step keeps >= 128).
  double mlp = 1e30, gdn = 1e30;
  if (s.model)
    for (const weights::LayerMargin& m : s.model->margins()) {
      mlp = std::min(mlp, m.mlp_min);
      gdn = std::min(gdn, m.gdn_min);
    }
  if (mlp < 1e30) r.stats.emplace_back("mlp_switch_margin_min", static_cast<std::int64_t>(mlp));
  if (gdn < 1e30) r.stats.emplace_back("gdn_switch_margin_min", static_cast<std::int64_t>(gdn));
  return r;
}

sdk::Status circuit_supports(const MachineConfig& config) {
  const int words = circuit::memory_words(circuit::MemoryLayout::kProtocol);
  struct Range {
    const char* option;
    int value, most;
    bool exact;  // the circuit takes this value only
  };
  const Range ranges[] = {
      {"lanes", config.lanes, kProtoLanes, true},
      {"block_instructions", config.block_instructions, circuit::kMachineSlots, true},
      {"registers", config.registers, kProtoRegisters, false},
      {"rom_blocks", config.rom_blocks, kProtoBlocks, false},
      {"global_words", config.global_words, words, false},
      {"shared_words", config.shared_words, words, false},
      {"max_block_threads", config.max_block_threads, kProtoWarps * kProtoLanes, false},
      {"max_threads", config.max_threads, kProtoCtas * kProtoWarps * kProtoLanes, false},
  };
  for (const Range& r : ranges) {
    if (r.exact ? r.value == r.most : r.value <= r.most) continue;
    return sdk::unsupported(std::string(r.option) + " " + std::to_string(r.value) + " is beyond the circuit, which takes " +
                            (r.exact ? "only " : "at most ") + std::to_string(r.most) + "; --engine interp runs it");
  }
  return sdk::Status::ok();
}

sdk::Expected<sdk::CircuitReport> describe_circuit(const sdk::CircuitRequest& request,
                                                   const std::function<void(std::string_view)>& on_progress) {
  if (request.engine != "circuit" && request.engine != "model")
    return sdk::invalid_argument("unknown engine '" + request.engine + "' (the circuit of: circuit, model)");
  const bool merged = request.engine == "model";
  sdk::ModelRunOptions progress;
  progress.engine = request.engine;
  progress.on_progress = on_progress;
  auto x = compiled_machine(merged, target_for(merged, request.shapes, request.mute_width), progress);
  if (!x) return x.status();
  return weights::report((*x)->c, (*x)->cc, request.engine);
}

sdk::Status merge_circuit(sdk::ModelHost& host, const sdk::ModelRunOptions& options) {
  sdk::ModelRunOptions o = options;
  o.engine = "model";
  o.model = &host;
  auto x = compiled_machine(o);
  if (!x) return x.status();
  return merge_machine(**x, host, o);
}

sdk::Expected<sdk::ModelRunResult> run_on_circuit(const Program& program, const std::vector<sdk::LaunchArg>& args,
                                                  const sdk::ModelRunOptions& options) {
  auto run = CircuitRun::start(program, args, options);
  if (!run) return run.status();
  QGPU_RETURN_IF_ERROR((*run)->feed_prompt());
  QGPU_RETURN_IF_ERROR((*run)->generate());
  return (*run)->finish();
}

}  // namespace qgpu::simt
