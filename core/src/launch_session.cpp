#include "qgpu/core/launch_session.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <span>
#include <thread>

#include "qgpu/core/host.h"
#include "qgpu/weights/choice.h"
#include "qgpu/weights/numerics.h"
#include "qgpu/weights/reference.h"
#include "qgpu/weights/row_choice.h"

namespace qgpu::core {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void say(const std::function<void(std::string_view)>& sink, const std::string& line) {
  if (sink) sink(line);
}

weights::DType layer_dtype(sdk::DType dtype) {
  return dtype == sdk::DType::kBF16 ? weights::DType::kBF16 : weights::DType::kF32;
}

}  // namespace

sdk::Expected<sdk::DType> layer_dtype(std::string_view name) {
  auto dtype = sdk::parse_dtype(name);
  if (!dtype || (*dtype != sdk::DType::kF32 && *dtype != sdk::DType::kBF16))
    return sdk::invalid_argument("dtype '" + std::string(name) + "' is not one of f32, bf16");
  return *dtype;
}

sdk::Expected<std::shared_ptr<const sdk::MachineCircuit>> machine_circuit(
    sdk::Machine& machine, const std::string& machine_name, sdk::Engine engine, const ModelHost* model,
    const std::function<void(std::string_view)>& on_progress) {
  sdk::CircuitRequest request;
  request.engine = engine;
  if (engine == sdk::Engine::kModel) {
    if (model == nullptr) return sdk::internal_error("the model engine's circuit needs the model it merges into");
    request.shapes = model->shapes();
    request.mute_width = model->mute_width();
  }
  say(on_progress, std::string("circuit: ") + machine_name + " compiles its circuit " +
                       (engine == sdk::Engine::kModel
                            ? "for the base's layer shapes (hidden " + std::to_string(request.shapes.hidden_size) +
                                  ", with a mute channel)"
                            : std::string("for its own layer shapes")));
  QGPU_ASSIGN_OR_RETURN(std::shared_ptr<const sdk::MachineCircuit> circuit,
                        guarded_call(machine_name, "circuit()", [&] { return machine.circuit(request); }));
  if (!circuit) return sdk::internal_error(machine_name + ": circuit() returned nothing");
  say(on_progress, "circuit: " + circuit->summary());
  return circuit;
}

sdk::Status merge_circuit(ModelHost& model, std::shared_ptr<const sdk::MachineCircuit> circuit,
                          const std::function<void(std::string_view)>& on_progress) {
  const auto t0 = Clock::now();
  say(on_progress, "model: merging " + std::to_string(circuit->compiled().layers.size()) + " circuit layers and " +
                       std::to_string(circuit->records()) + " record rows in front of the base");
  QGPU_RETURN_IF_ERROR(model.merge(std::move(circuit)));
  char took[64];
  std::snprintf(took, sizeof took, " (%.1f s)", seconds_since(t0));
  // describe(): a line on the merge, then the silence certificate and the choice placement.
  const std::string lines = model.describe();
  for (std::size_t start = 0, first = 1; start <= lines.size(); first = 0) {
    const std::size_t end = std::min(lines.find('\n', start), lines.size());
    say(on_progress, "model: " + lines.substr(start, end - start) + (first ? took : ""));
    start = end + 1;
  }
  return sdk::Status::ok();
}

namespace {
std::string margin_text(double margin) {
  char text[64];
  std::snprintf(text, sizeof text, "margin %g; ", margin);
  return text;
}
}  // namespace

struct CircuitEngine::Parts {
  std::shared_ptr<const sdk::MachineCircuit> circuit;
  sdk::DType dtype;
  weights::ReferenceModel layers;
  // The record rows' choice by bounded runs of shared-prefix sums (weights::RowChoice: the same
  // winner and margin, a fraction of the rows summed), but building it costs about 100 plain loops
  // over every row, so the first kScoredPlainly choices on an engine take the plain loop and a
  // longer run builds it.
  static constexpr std::int64_t kScoredPlainly = 100;
  std::unique_ptr<weights::RowChoice> chooser;
  std::int64_t scored = 0;
  std::map<std::int64_t, std::vector<float>> embeddings;  // record rows' embeddings, as fed
};

namespace {
int layer_threads(int threads) {
  if (threads > 0) return std::min(threads, 2);
  return std::thread::hardware_concurrency() >= 2 ? 2 : 1;
}
}  // namespace

CircuitEngine::CircuitEngine(std::shared_ptr<const sdk::MachineCircuit> circuit, sdk::DType dtype, int threads)
    : p_(std::make_unique<Parts>(Parts{circuit, dtype,
                                       weights::ReferenceModel(circuit->compiled().layers,
                                                               circuit->compiled().target.shapes, layer_dtype(dtype),
                                                               layer_threads(threads)),
                                       nullptr, 0, {}})) {}
CircuitEngine::~CircuitEngine() = default;
const std::shared_ptr<const sdk::MachineCircuit>& CircuitEngine::circuit() const {
  return p_->circuit;
}
sdk::DType CircuitEngine::dtype() const {
  return p_->dtype;
}

struct LaunchSession::State {
  std::shared_ptr<const sdk::MachineCircuit> circuit;
  std::unique_ptr<sdk::LaunchCodec> codec;
  ModelRunOptions options;
  ModelHost* model = nullptr;                           // engine model
  CircuitEngine::Parts* engine = nullptr;        // engine circuit
  std::unique_ptr<CircuitEngine> own_engine;     // the same where the caller gave none
  std::vector<float> residual;  // engine circuit: after the last token fed
  std::vector<double> sums;     // engine circuit: the record rows' sums before the residual unit's division
  std::vector<float> logits;    // after the last token fed: over the text rows (model), then the record rows
  std::int64_t text_rows = 0;  // engine model: the base's vocabulary; record r is token id text_rows + r
  std::int64_t prompt_tokens = 0;
  std::vector<std::int64_t> prompt_rows, generated;  // record rows
  std::vector<std::string> records;                  // generated records' text
  double min_margin = 0;
  bool halted = false;
  sdk::ExpectedLaunch expected;  // check: the interpreter's stream and arrays
  double prompt_s = 0, generate_s = 0, readback_s = 0;
  // Where generating spends its time: the layers (feeding each chosen token), scoring the
  // record rows (engine circuit), choosing and checking a token and the codec's bookkeeping.
  // Speculation: drafting with the circuit layers, verifications and those redone token by token.
  struct {
    double layers_s = 0, logits_s = 0, choice_s = 0, draft_s = 0;
    std::int64_t verifications = 0, redone = 0;
  } profile;

  std::string engine_name() const { return model != nullptr ? "model" : "circuit"; }
  std::int64_t first_id() const { return model != nullptr ? text_rows : circuit->first_id(); }

  // Feeds record rows. The merged model takes them in one call; the circuit alone steps the
  // reference layers on each row's embedding, then scores the record rows.
  sdk::Status feed(std::span<const std::int64_t> rows) {
    if (model != nullptr) {
      std::vector<std::int64_t> ids(rows.begin(), rows.end());
      for (std::int64_t& id : ids) id += text_rows;
      QGPU_ASSIGN_OR_RETURN(logits, model->forward(ids));
      return sdk::Status::ok();
    }
    for (std::int64_t row : rows) {
      auto it = engine->embeddings.find(row);
      if (it == engine->embeddings.end()) {
        QGPU_ASSIGN_OR_RETURN(std::vector<float> x, circuit->embedding(row));
        it = engine->embeddings.emplace(row, std::move(x)).first;
      }
      residual = engine->layers.step(it->second);
    }
    logits.clear();
    return sdk::Status::ok();
  }
  // The logits after the last token fed (engine circuit: the record rows scored now).
  std::span<const float> current_logits() {
    if (model != nullptr || !logits.empty()) return logits;
    const weights::SparseMatrix& u = circuit->unembedding();
    sums.assign(static_cast<std::size_t>(u.rows), 0.0);
    for (std::int64_t r = 0; r < u.rows; ++r) {
      double acc = 0;
      for (std::int64_t p = u.row_ptr[r]; p < u.row_ptr[r + 1]; ++p)
        acc += u.val[static_cast<std::size_t>(p)] * residual[static_cast<std::size_t>(u.col[p])];
      sums[static_cast<std::size_t>(r)] = acc;
    }
    logits.resize(sums.size());
    for (std::size_t r = 0; r < sums.size(); ++r) logits[r] = static_cast<float>(sums[r] / weights::kResidualUnit);
    return logits;
  }
  // Engine circuit, after the first kScoredPlainly tokens: the record rows' choice without
  // summing every row (weights::RowChoice: the same winner and margin). Null before, and for
  // engine model (whose logits come from the model).
  weights::RowChoice* row_choice() {
    if (model != nullptr) return nullptr;
    if (!engine->chooser && ++engine->scored > CircuitEngine::Parts::kScoredPlainly)
      engine->chooser = std::make_unique<weights::RowChoice>(circuit->unembedding());
    return engine->chooser.get();
  }
  // "last records: A | B | C": up to three generated records before the failure.
  std::string last_records() const {
    if (records.empty()) return "no record generated yet, after the prompt's RUN";
    std::string t = records.size() == 1 ? "last record: " : "last records: ";
    for (std::size_t i = records.size() > 3 ? records.size() - 3 : 0; i < records.size(); ++i)
      t += records[i] + (i + 1 < records.size() ? " | " : "");
    return t;
  }
};

LaunchSession::LaunchSession(std::unique_ptr<State> state) : s_(std::move(state)) {}
LaunchSession::~LaunchSession() = default;

sdk::Expected<std::unique_ptr<LaunchSession>> LaunchSession::start(std::shared_ptr<const sdk::MachineCircuit> circuit,
                                                                   std::unique_ptr<sdk::LaunchCodec> codec,
                                                                   ModelHost* model, const ModelRunOptions& options,
                                                                   CircuitEngine* engine) {
  if (!circuit || !codec) return sdk::internal_error("a launch session needs the machine's circuit and codec");
  if (options.dtype != sdk::DType::kF32 && options.dtype != sdk::DType::kBF16)
    return sdk::invalid_argument("dtype '" + std::string(sdk::dtype_name(options.dtype)) +
                                 "' is not one of f32, bf16");
  auto s = std::make_unique<State>();
  s->circuit = std::move(circuit);
  s->codec = std::move(codec);
  s->options = options;
  s->model = model;
  if (model != nullptr) {
    if (options.dtype != model->dtype())
      return sdk::invalid_argument("--engine model runs in the backend's dtype " +
                                   std::string(sdk::dtype_name(model->dtype())) + ", not " +
                                   std::string(sdk::dtype_name(options.dtype)) + " (set backend.dtype in the config)");
    s->text_rows = model->text_rows();
  }
  if (options.check) {
    auto e = s->codec->expected();
    if (!e) return e.status().with_context("--check");
    s->expected = std::move(*e);
  }
  if (model != nullptr && model->holds(*s->circuit))
    model->reset();  // merged by an earlier launch: a new sequence
  else if (model != nullptr)
    QGPU_RETURN_IF_ERROR(merge_circuit(*model, s->circuit, options.on_progress));
  else if (engine != nullptr && (engine->circuit() != s->circuit || engine->dtype() != options.dtype))
    return sdk::internal_error("a launch session was given a circuit engine prepared for another circuit or dtype");
  if (model == nullptr) {
    if (engine == nullptr) {
      s->own_engine = std::make_unique<CircuitEngine>(s->circuit, options.dtype, options.circuit_threads);
      engine = s->own_engine.get();
    }
    s->engine = engine->p_.get();
    s->engine->layers.reset();  // a new sequence
  }
  return std::unique_ptr<LaunchSession>(new LaunchSession(std::move(s)));
}

sdk::Status LaunchSession::feed_prompt() {
  State& s = *s_;
  const auto t0 = Clock::now();
  const std::vector<sdk::PromptRecord>& prompt = s.codec->prompt();
  for (const sdk::PromptRecord& r : prompt) s.prompt_rows.insert(s.prompt_rows.end(), r.rows.begin(), r.rows.end());
  if (s.model != nullptr) {
    QGPU_RETURN_IF_ERROR(s.feed(s.prompt_rows).with_context("the prompt"));  // in one call
  } else {
    for (std::size_t i = 0; i < prompt.size(); ++i) {
      sdk::Status st = s.feed(prompt[i].rows);
      if (!st.is_ok()) return st.with_context("prompt record " + std::to_string(i) + " (" + prompt[i].text + ")");
    }
  }
  s.prompt_tokens = static_cast<std::int64_t>(s.prompt_rows.size());
  s.prompt_s = seconds_since(t0);
  say(s.options.on_progress, s.engine_name() + ": fed the prompt: " + std::to_string(prompt.size()) + " records, " +
                                 std::to_string(s.prompt_tokens) + " tokens");
  return sdk::Status::ok();
}

sdk::Status LaunchSession::generate() {
  State& s = *s_;
  if (s.prompt_tokens == 0) return sdk::internal_error("generate() before feed_prompt()");
  const auto t0 = Clock::now();
  // Progress (ModelRunOptions::on_step): records by kind (in the machine's order of kinds),
  // warp-instructions of the generated records.
  std::map<int, std::pair<std::string, std::int64_t>> by_kind;
  std::int64_t warp_instructions = 0;
  auto last_step = t0;
  auto progress = [&](bool done) {
    if (!s.options.on_step) return;
    LaunchProgress p;
    p.generated_tokens = static_cast<std::int64_t>(s.generated.size());
    p.records = static_cast<std::int64_t>(s.records.size());
    for (const auto& [kind, named] : by_kind) p.records_by_kind.push_back(named);
    p.warp_instructions = warp_instructions;
    p.seconds = seconds_since(t0);
    p.min_margin = s.min_margin;
    p.done = done;
    s.options.on_step(p);
  };
  const auto at = [](std::size_t step) { return "generated token " + std::to_string(step); };
  // --check: the generated stream so far (and `got`, when it says better what was chosen)
  // against the expected one.
  auto check_failure = [&](std::size_t step, const std::string& got, const std::string& margin) {
    const std::string where = s.codec->mismatch(s.expected.rows, s.generated, got);
    if (where.empty()) return sdk::internal_error("--check: " + at(step) + ": the streams differ (" + got + ")");
    return sdk::internal_error("--check: " + where + " (" + margin + s.last_records() + ")");
  };
  auto expected_at = [&](std::size_t step, std::int64_t row) {
    return !s.options.check || (step < s.expected.rows.size() && s.expected.rows[step] == row);
  };
  // The model's choice from `logits` for generated token `step` (its margin into min_margin).
  // The choice made (its margin into min_margin), or the failure named.
  auto chose = [&](sdk::Expected<weights::Choice> chosen, std::size_t step) -> sdk::Expected<weights::Choice> {
    if (!chosen) {
      if (s.options.check) return check_failure(step, "no token (" + chosen.status().message() + ")", "");
      return chosen.status().with_context(at(step) + " (" + s.last_records() + ")");
    }
    s.min_margin = step == 0 ? chosen->margin : std::min(s.min_margin, chosen->margin);
    return *chosen;
  };
  auto choose = [&](std::span<const float> logits, std::size_t step) -> sdk::Expected<weights::Choice> {
    if (static_cast<std::int64_t>(logits.size()) != s.text_rows + s.circuit->records())
      return sdk::internal_error(at(step) + ": " + std::to_string(logits.size()) + " logits for " +
                                 std::to_string(s.text_rows) + " text rows and " +
                                 std::to_string(s.circuit->records()) + " record rows");
    return chose(weights::choose(logits, s.text_rows), step);
  };
  // `row` as generated token `step` (after its check): the codec takes it. Whether it was HALT.
  auto take = [&](std::int64_t row, std::size_t step) -> sdk::Expected<bool> {
    s.generated.push_back(row);
    auto token = s.codec->accept(row);
    if (!token) return token.status().with_context(at(step) + " (" + s.last_records() + ")");
    if (!token->complete) return false;
    s.records.push_back(token->record);
    auto& named = by_kind[token->kind];
    named.first = token->kind_name;
    ++named.second;
    warp_instructions += token->warp_instructions;
    if (s.options.trace && s.options.on_record) s.options.on_record(s.records.back());
    return token->halt;  // nothing reads what HALT's pass would do
  };
  const bool speculate = s.model != nullptr && s.options.speculate > 1 && s.model->speculates();
  for (;;) {
    const std::size_t step = s.generated.size();
    if (s.options.cancel != nullptr && s.options.cancel->load())
      return sdk::cancelled("stopped after " + std::to_string(step) + " generated tokens (" +
                            std::to_string(s.records.size()) + " records, " + std::to_string(warp_instructions) +
                            " warp-instructions) in " + std::to_string(static_cast<int>(seconds_since(t0))) + " s; " +
                            s.last_records());
    if (s.options.on_step && seconds_since(last_step) >= s.options.step_interval_s) {
      last_step = Clock::now();
      progress(false);
    }
    if (step >= s.options.max_tokens)
      return sdk::limit_exceeded("the launch did not reach HALT within --max-tokens " +
                                 std::to_string(s.options.max_tokens) + " generated tokens (" + s.last_records() + ")");
    auto clock = Clock::now();
    weights::Choice chosen;
    if (weights::RowChoice* rows = s.row_choice()) {
      auto best = rows->choose(s.residual.data(), weights::kResidualUnit, s.engine->layers.threads());
      s.profile.logits_s += seconds_since(clock);
      clock = Clock::now();
      QGPU_ASSIGN_OR_RETURN(chosen, chose(std::move(best), step));
    } else {
      const std::span<const float> logits = s.current_logits();
      s.profile.logits_s += seconds_since(clock);
      clock = Clock::now();
      QGPU_ASSIGN_OR_RETURN(chosen, choose(logits, step));
    }
    const std::int64_t row = chosen.offset;
    if (!expected_at(step, row)) {
      s.generated.push_back(row);
      return check_failure(step, "", margin_text(chosen.margin));
    }
    QGPU_ASSIGN_OR_RETURN(const bool halt, take(row, step));
    s.profile.choice_s += seconds_since(clock);
    if (halt) break;
    if (!speculate) {
      clock = Clock::now();
      const std::int64_t one[1] = {row};
      sdk::Status st = s.feed(one);
      s.profile.layers_s += seconds_since(clock);
      if (!st.is_ok()) return st.with_context(at(step) + " (" + s.last_records() + ")");
      continue;
    }
    // Speculation: the circuit layers alone draft the tokens after `row` (each the row its own
    // fields choose); the ones that pass the check are taken at once, HALT ends the draft. The
    // whole model then runs the fed ones in one call and must choose every drafted token; the
    // last position's logits choose the next token as above.
    clock = Clock::now();
    std::vector<std::int64_t> drafted;  // generated after `row`, in order
    sdk::Status stopped;                // a drafted token the codec refused, and its row
    std::int64_t refused = -1;
    bool drafted_halt = false;
    for (std::int64_t fed = row;;) {
      QGPU_ASSIGN_OR_RETURN(const std::int64_t next, s.model->draft(fed + s.text_rows));
      const std::size_t next_step = s.generated.size();
      if (static_cast<int>(drafted.size()) + 1 >= s.options.speculate || next_step >= s.options.max_tokens ||
          !expected_at(next_step, next))
        break;
      auto took = take(next, next_step);
      if (!took) {
        stopped = took.status();
        refused = next;
        break;
      }
      drafted.push_back(next);
      if (*took) {
        drafted_halt = true;
        break;
      }
      fed = next;
    }
    s.profile.draft_s += seconds_since(clock);
    clock = Clock::now();
    auto verified = s.model->verify();
    s.profile.layers_s += seconds_since(clock);
    if (!verified) return verified.status().with_context(at(step + 1) + " (" + s.last_records() + ")");
    ++s.profile.verifications;
    s.profile.redone += verified->redone ? 1 : 0;
    const std::size_t columns = static_cast<std::size_t>(s.text_rows + s.circuit->records());
    if (verified->rows != static_cast<std::int64_t>(drafted.size() + (drafted_halt ? 0 : 1)) ||
        verified->logits.size() != columns * static_cast<std::size_t>(verified->rows))
      return sdk::internal_error("speculation: verify() returned " + std::to_string(verified->rows) +
                                 " positions for " + std::to_string(drafted.size()) + " drafted tokens");
    auto position = [&](std::size_t i) {
      return std::span<const float>(verified->logits.data() + i * columns, columns);
    };
    // The model must have chosen every drafted token (the guard vouched for its record row; a
    // text row winning is refused here as above).
    for (std::size_t i = 0; i < drafted.size(); ++i) {
      const std::size_t at_step = step + 1 + i;
      QGPU_ASSIGN_OR_RETURN(const weights::Choice model, choose(position(i), at_step));
      if (model.offset != drafted[i])
        return sdk::internal_error("speculation: " + at(at_step) + ": the model chose record row " +
                                   std::to_string(model.offset) + ", the circuit drafted " +
                                   std::to_string(drafted[i]));
    }
    if (!stopped.is_ok()) {  // the codec's error, once the model has chosen that token too
      const std::size_t at_step = step + 1 + drafted.size();
      QGPU_ASSIGN_OR_RETURN(const weights::Choice model, choose(position(drafted.size()), at_step));
      if (model.offset != refused)
        return sdk::internal_error("speculation: " + at(at_step) + ": the model chose record row " +
                                   std::to_string(model.offset) + ", the circuit drafted " + std::to_string(refused));
      return stopped;
    }
    if (drafted_halt) break;
    s.logits.assign(position(drafted.size()).begin(), position(drafted.size()).end());
  }
  s.halted = true;
  s.generate_s = seconds_since(t0);
  progress(true);
  char line[200];
  // The record that ended the launch by its kind's name (HALT, or a machine's fault record).
  const std::string last = s.records.empty() ? "HALT" : s.records.back().substr(0, s.records.back().find(' '));
  std::snprintf(line, sizeof line, "%s: %s after %zu generated tokens (%.1f ms per token)", s.engine_name().c_str(),
                last.c_str(), s.generated.size(), 1e3 * s.generate_s / static_cast<double>(s.generated.size()));
  std::string text = line;
  if (s.profile.verifications > 0) {
    std::snprintf(line, sizeof line, "; speculative: %lld verifications, %.2f tokens each, %lld redone token by token",
                  static_cast<long long>(s.profile.verifications),
                  static_cast<double>(s.generated.size()) / static_cast<double>(s.profile.verifications),
                  static_cast<long long>(s.profile.redone));
    text += line;
  }
  say(s.options.on_progress, text);
  return sdk::Status::ok();
}

sdk::Expected<std::vector<sdk::LaunchArg>> LaunchSession::read_arrays() {
  State& s = *s_;
  const auto t0 = Clock::now();
  weights::StateView state;
  if (s.model != nullptr) {
    auto v = s.model->circuit_state();
    if (!v) return v.status().with_context("reading the merged model's state");
    state = std::move(*v);
  } else {
    state = s.engine->layers.state_view();
  }
  auto arrays = s.codec->read_arrays(state);
  s.readback_s = seconds_since(t0);
  return arrays;
}

std::int64_t LaunchSession::prompt_tokens() const {
  return s_->prompt_tokens;
}

sdk::Expected<ModelRunResult> LaunchSession::finish() {
  State& s = *s_;
  if (!s.halted) return sdk::internal_error("finish() before the launch reached HALT");
  QGPU_ASSIGN_OR_RETURN(std::vector<sdk::LaunchArg> arrays, read_arrays());
  ModelRunResult r;
  if (s.options.check) {
    for (std::size_t i = 0; i < arrays.size(); ++i) {
      const auto& got = arrays[i].array;
      const auto& want = s.expected.arrays.at(i).array;
      for (std::size_t j = 0; j < want.size(); ++j)
        if (got.at(j) != want[j])
          return sdk::internal_error("--check: array '" + arrays[i].param + "' element " + std::to_string(j) +
                                     ": expected " + std::to_string(want[j]) + " (interpreter), got " +
                                     std::to_string(got[j]) + " (read from the model's state)");
    }
    r.checked = true;
    r.check = "check: " + std::to_string(s.records.size()) + " records (" + std::to_string(s.generated.size()) +
              " tokens) equal the interpreter's stream; " + std::to_string(arrays.size()) + " arrays equal";
  }
  QGPU_ASSIGN_OR_RETURN(r.readout, s.codec->readout());
  r.arrays = std::move(arrays);
  r.generated_records = s.records;
  r.prompt_ids = s.prompt_rows;
  r.generated_ids = s.generated;
  for (auto* ids : {&r.prompt_ids, &r.generated_ids})
    for (std::int64_t& id : *ids) id += s.first_id();
  r.prompt_tokens = s.prompt_tokens;
  r.generated_tokens = static_cast<std::int64_t>(s.generated.size());
  r.min_margin = s.min_margin;
  r.timings = s.circuit->timings();
  r.timings.insert(r.timings.end(),
                   {{"prompt_s", s.prompt_s},
                    {"generate_s", s.generate_s},
                    {"generate_layers_s", s.profile.layers_s},
                    {"generate_logits_s", s.profile.logits_s},
                    {"generate_choice_s", s.profile.choice_s},
                    {"generate_draft_s", s.profile.draft_s},
                    {"readback_s", s.readback_s}});
  r.stats = {{"prompt_tokens", r.prompt_tokens}, {"generated_tokens", r.generated_tokens}};
  if (s.profile.verifications > 0)
    r.stats.insert(r.stats.end(), {{"speculative_verifications", s.profile.verifications},
                                   {"speculative_redone", s.profile.redone}});
  const auto circuit_stats = s.circuit->stats();
  r.stats.insert(r.stats.end(), circuit_stats.begin(), circuit_stats.end());
  // The layers' smallest switch margins over the run (a bf16-exact step keeps >= 128).
  double mlp = 1e30, gdn = 1e30;
  if (s.engine != nullptr)
    for (const weights::LayerMargin& m : s.engine->layers.margins()) {
      mlp = std::min(mlp, m.mlp_min);
      gdn = std::min(gdn, m.gdn_min);
    }
  if (mlp < 1e30) r.stats.emplace_back("mlp_switch_margin_min", static_cast<std::int64_t>(mlp));
  if (gdn < 1e30) r.stats.emplace_back("gdn_switch_margin_min", static_cast<std::int64_t>(gdn));
  return r;
}

sdk::Expected<ModelRunResult> run_launch(std::shared_ptr<const sdk::MachineCircuit> circuit,
                                         std::unique_ptr<sdk::LaunchCodec> codec, ModelHost* model,
                                         const ModelRunOptions& options, CircuitEngine* engine) {
  QGPU_ASSIGN_OR_RETURN(std::unique_ptr<LaunchSession> session,
                        LaunchSession::start(std::move(circuit), std::move(codec), model, options, engine));
  QGPU_RETURN_IF_ERROR(session->feed_prompt());
  QGPU_RETURN_IF_ERROR(session->generate());
  return session->finish();
}

}  // namespace qgpu::core
