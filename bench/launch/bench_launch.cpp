// Tokens per launch for the whole kernel suite: for every accepted launch of tests/kernels (same
// kernel file, entry, shape and argument spelling as `kernels.<case>` runs through qgpu-host), the
// prompt and generated token counts of the machine's token protocol, the generated records by kind,
// and the interpreter's executed warp-instructions per generated token.
//
//   qgpu_bench_launch [--json] [--kernel NAME] [--nvcc] [--config FILE]
//
// The frontend comes from the config's plugin (as in qgpu-host run); the program is lowered by the
// machine's own lowering with the machine options the config selects, and simt::record_launch gives
// the stream the model must generate. Every launch's arrays are compared with the suite's reference:
// a wrong or failed launch ends the bench with one line on stderr and exit status 1.
// A benchmark (it prints figures), never a test.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config.h"
#include "lower.h"
#include "model_run.h"
#include "protocol.h"
#include "qgpu/core/host.h"
#include "qgpu/core/launch_args.h"
#include "qgpu/core/text.h"
#include "qgpu/sdk/sdk.h"
#include "suite.h"

namespace qgpu::bench {
namespace {

using simt::Record;
using simt::RecordKind;

// The launch the issue sets the aim for ([1,2,3]·[4,5,6], grid 1, block 4): printed first.
constexpr std::string_view kDotCase = "dot_atomic_123_456";

struct Options {
  bool json = false;
  bool nvcc = false;                  // the kernels_nvcc.* family: ptx-nvcc/<file>.ptx, arguments by position
  bool circuit = false;               // also generate each launch with the machine's circuit (--check)
  std::string dtype = "f32";          // the circuit's dtype
  std::int64_t max_generated = 2000;  // circuit: skip launches whose stream is longer
  std::string kernel;
  std::string config = QGPU_CONFIG;
};

// One measured launch.
struct Row {
  std::string name, kernel, file;
  int grid = 0, block = 0;
  std::int64_t prompt_tokens = 0, generated_tokens = 0;
  std::int64_t exec = 0, wreg = 0, wmem = 0, sched = 0, sync = 0, cta = 0, halt = 0;
  std::int64_t data_tokens = 0;
  std::int64_t block_executions = 0, warp_instructions = 0;
  // --engine circuit: "exact", "skipped (...)", or the run's one-line error.
  std::string circuit;
  double circuit_s = 0;  // generation time (prompt excluded)

  std::int64_t records() const { return exec + wreg + wmem + sched + sync + cta + halt; }
  double per_token() const {
    return generated_tokens > 0 ? static_cast<double>(warp_instructions) / static_cast<double>(generated_tokens) : 0;
  }
};

// A failure that ends the bench: the launch (or "" for setup) and one line saying why.
struct Failure {
  std::string where, what;
};

std::string source_path(const kernels::Case& c, bool nvcc) {
  if (!nvcc) return std::string(QGPU_KERNEL_DIR) + "/" + c.file;
  return std::string(QGPU_NVCC_PTX_DIR) + "/" + std::filesystem::path(c.file).stem().string() + ".ptx";
}

// The kernel a case launches: --kernel's entry, or the file's only one when the case leaves it off.
sdk::Expected<const sdk::KernelIR*> choose_kernel(const sdk::KernelModule& module, const kernels::Case& c,
                                                  const std::string& file) {
  if (!c.pass_kernel) {
    if (module.kernels.size() == 1) return &module.kernels.front();
    return sdk::invalid_argument("'" + file + "' defines " + std::to_string(module.kernels.size()) +
                                 " kernels and the case names none");
  }
  for (const auto& k : module.kernels)
    if (k.name == c.kernel) return &k;
  return sdk::not_found("no kernel '" + c.kernel + "' in '" + file + "'");
}

// The case's arguments exactly as the suite spells them on qgpu-host's command line.
sdk::Expected<std::vector<core::ArgSpec>> case_args(const kernels::Case& c, bool nvcc) {
  const std::vector<std::string> cli = c.cli_args(/*ptx_names=*/nvcc);
  std::vector<core::ArgSpec> out;
  for (std::size_t i = 0; i + 1 < cli.size(); ++i) {
    if (cli[i] != "--arg") continue;
    auto spec = core::parse_arg(cli[i + 1]);
    if (!spec) return spec.error();
    out.push_back(std::move(*spec));
  }
  return out;
}

// The final arrays must be the reference's (arrays in parameter order, as the table lists them).
std::optional<std::string> check_arrays(const kernels::Case& c, const sdk::LaunchResult& result) {
  const auto expected = c.expected();
  if (expected.size() != result.arrays.size())
    return "the launch returned " + std::to_string(result.arrays.size()) + " arrays, the reference " +
           std::to_string(expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto& want = expected[i].second;
    const auto& got = result.arrays[i].array;
    if (got.size() != want.size())
      return "array '" + expected[i].first + "' has " + std::to_string(got.size()) + " words, the reference " +
             std::to_string(want.size());
    for (std::size_t j = 0; j < want.size(); ++j) {
      if (got[j] != want[j])
        return "array '" + expected[i].first + "' word " + std::to_string(j) + " is " + std::to_string(got[j]) +
               ", the reference says " + std::to_string(want[j]);
    }
  }
  return std::nullopt;
}

std::int64_t stat(const sdk::LaunchResult& result, std::string_view key) {
  for (const auto& [name, value] : result.stats)
    if (name == key) return value;
  return -1;
}

class Bench {
 public:
  Bench(std::shared_ptr<sdk::Frontend> frontend, std::string frontend_name, simt::MachineConfig config,
        const Options& o)
      : frontend_(std::move(frontend)),
        frontend_name_(std::move(frontend_name)),
        config_(config),
        nvcc_(o.nvcc),
        o_(o) {}

  // Runs one case; a failure names what went wrong in one line.
  std::optional<Failure> measure(const kernels::Case& c, Row& row) {
    auto fail = [&](const std::string& what) { return Failure{c.name, core::one_line(what)}; };
    const std::string file = source_path(c, nvcc_);
    auto module = compiled(file);
    if (!module) return fail(module.error().to_string());
    auto kernel = choose_kernel(**module, c, file);
    if (!kernel) return fail(kernel.error().to_string());
    auto specs = case_args(c, nvcc_);
    if (!specs) return fail(specs.error().to_string());
    auto args = core::bind_args(**kernel, *specs);
    if (!args) return fail(args.error().to_string());
    const sdk::LaunchShape shape{static_cast<std::uint32_t>(c.launch.grid), static_cast<std::uint32_t>(c.launch.block)};
    auto program = simt::lower_kernel(**kernel, shape, config_);
    if (!program) return fail(program.error().to_string());
    // The options `qgpu-host run` passes by default (the suite sets none).
    auto launch = simt::record_launch(**program, *args, sdk::InterpretOptions{});
    if (!launch) return fail(launch.error().to_string());
    if (auto wrong = check_arrays(c, launch->result)) return fail(*wrong);

    row.name = c.name;
    row.kernel = (*kernel)->name;
    row.file = std::filesystem::path(file).filename().string();
    row.grid = c.launch.grid;
    row.block = c.launch.block;
    row.prompt_tokens = launch->prompt_tokens;
    row.generated_tokens = launch->generated_tokens;
    for (const Record& r : launch->generated) {
      row.data_tokens += simt::data_tokens(r);
      switch (r.kind) {
        case RecordKind::kExec: ++row.exec; break;
        case RecordKind::kWreg: ++row.wreg; break;
        case RecordKind::kWmem: ++row.wmem; break;
        case RecordKind::kSched: ++row.sched; break;
        case RecordKind::kSync: ++row.sync; break;
        case RecordKind::kCta: ++row.cta; break;
        case RecordKind::kHalt: ++row.halt; break;
        default: return fail("the generated stream holds a " + simt::to_text(r) + " record, which only the host feeds");
      }
    }
    // The columns must add up to the protocol's own count, or a kind is being missed.
    if (row.records() + row.data_tokens != row.generated_tokens)
      return fail("records (" + std::to_string(row.records()) + ") + DATA tokens (" + std::to_string(row.data_tokens) +
                  ") != generated tokens (" + std::to_string(row.generated_tokens) + ")");
    row.block_executions = stat(launch->result, "block_executions");
    row.warp_instructions = stat(launch->result, "warp_instructions");
    if (row.block_executions < 0 || row.warp_instructions < 0)
      return fail("the interpreter reported no block_executions / warp_instructions statistics");
    if (o_.circuit) run_circuit(**program, *args, row);
    return std::nullopt;
  }

  // The launch generated by the machine's compiled layers, every token checked against the
  // interpreter's stream; the outcome (exact, or the run's error) goes into the row.
  void run_circuit(const simt::Program& program, const std::vector<sdk::LaunchArg>& args, Row& row) {
    if (row.generated_tokens > o_.max_generated) {
      row.circuit = "skipped (" + std::to_string(row.generated_tokens) + " generated tokens > --max-generated " +
                    std::to_string(o_.max_generated) + ")";
      return;
    }
    sdk::ModelRunOptions mo;
    mo.engine = "circuit";
    mo.dtype = o_.dtype;
    mo.check = true;
    mo.on_progress = [](std::string_view line) {
      std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
    };
    auto r = simt::run_on_circuit(program, args, mo);
    if (!r) {
      row.circuit = core::one_line(r.error().to_string());
      return;
    }
    row.circuit = r->checked ? "exact" : "not checked";
    for (const auto& [name, secs] : r->timings)
      if (name == "generate_s") row.circuit_s = secs;
  }

 private:
  // Each file is compiled once (several cases launch the same file).
  sdk::Expected<const sdk::KernelModule*> compiled(const std::string& file) {
    auto it = modules_.find(file);
    if (it == modules_.end()) {
      sdk::SourceInput input{file, sdk::SourceLanguage::kAuto};
      auto module = core::guarded_call(frontend_name_, "compile()", [&] { return frontend_->compile(input); });
      if (!module) return module.error();
      it = modules_.emplace(file, std::move(*module)).first;
    }
    return &it->second;
  }

  std::shared_ptr<sdk::Frontend> frontend_;
  std::string frontend_name_;
  simt::MachineConfig config_;
  bool nvcc_;
  Options o_;
  std::map<std::string, sdk::KernelModule> modules_;
};

struct Summary {
  Row total;
  const Row* median = nullptr;               // by generated tokens
  const Row* median_per_token = nullptr;     // by warp-instructions per generated token
  std::vector<const Row*> most_tokens;       // the 5 longest streams
  std::vector<const Row*> fewest_per_token;  // the 5 lowest warp-instructions per generated token
};

// Medians are the lower middle element, so that each names a launch.
Summary summarize(const std::vector<Row>& rows) {
  Summary s;
  s.total.name = "total";
  for (const Row& r : rows) {
    s.total.prompt_tokens += r.prompt_tokens;
    s.total.generated_tokens += r.generated_tokens;
    s.total.exec += r.exec;
    s.total.wreg += r.wreg;
    s.total.wmem += r.wmem;
    s.total.sched += r.sched;
    s.total.sync += r.sync;
    s.total.cta += r.cta;
    s.total.halt += r.halt;
    s.total.data_tokens += r.data_tokens;
    s.total.block_executions += r.block_executions;
    s.total.warp_instructions += r.warp_instructions;
  }
  if (rows.empty()) return s;
  std::vector<const Row*> by_tokens, by_rate;
  for (const Row& r : rows) by_tokens.push_back(&r);
  by_rate = by_tokens;
  std::stable_sort(by_tokens.begin(), by_tokens.end(),
                   [](const Row* a, const Row* b) { return a->generated_tokens < b->generated_tokens; });
  std::stable_sort(by_rate.begin(), by_rate.end(),
                   [](const Row* a, const Row* b) { return a->per_token() < b->per_token(); });
  const std::size_t mid = (rows.size() - 1) / 2;
  s.median = by_tokens[mid];
  s.median_per_token = by_rate[mid];
  const std::size_t n = std::min<std::size_t>(5, rows.size());
  s.most_tokens.assign(by_tokens.rbegin(), by_tokens.rbegin() + static_cast<std::ptrdiff_t>(n));
  s.fewest_per_token.assign(by_rate.begin(), by_rate.begin() + static_cast<std::ptrdiff_t>(n));
  return s;
}

void print_row(const Row& r, bool with_shape) {
  const std::string shape = with_shape ? std::to_string(r.grid) + " x " + std::to_string(r.block) : "";
  std::printf("%-32s %7s %7lld %6lld %5lld %5lld %5lld %5lld %4lld %4lld %4lld %5lld %7lld %8lld %6.2f\n",
              r.name.c_str(), shape.c_str(), static_cast<long long>(r.prompt_tokens),
              static_cast<long long>(r.generated_tokens), static_cast<long long>(r.exec),
              static_cast<long long>(r.wreg), static_cast<long long>(r.wmem), static_cast<long long>(r.sched),
              static_cast<long long>(r.sync), static_cast<long long>(r.cta), static_cast<long long>(r.halt),
              static_cast<long long>(r.data_tokens), static_cast<long long>(r.block_executions),
              static_cast<long long>(r.warp_instructions), r.per_token());
}

std::string short_list(const std::vector<const Row*>& rows, bool rate) {
  std::string s;
  char buf[160];
  for (const Row* r : rows) {
    if (rate) {
      std::snprintf(buf, sizeof buf, "%s (%.2f)", r->name.c_str(), r->per_token());
    } else {
      std::snprintf(buf, sizeof buf, "%s (%lld)", r->name.c_str(), static_cast<long long>(r->generated_tokens));
    }
    s += (s.empty() ? "" : ", ") + std::string(buf);
  }
  return s;
}

void print_text(const std::vector<Row>& rows, const Summary& s, int skipped, const Options& o) {
  std::printf("qgpu_bench_launch: generated tokens per launch, kernel suite from %s, config %s\n",
              o.nvcc ? "ptx-nvcc/*.ptx (nvcc)" : "cu/*.cu (clang-16)", o.config.c_str());
  std::printf(
      "(records of the generated stream by kind; DATA = payload tokens; wi/tok = executed "
      "warp-instructions per generated token)\n\n");
  std::printf("%-32s %7s %7s %6s %5s %5s %5s %5s %4s %4s %4s %5s %7s %8s %6s\n", "launch", "shape", "prompt", "gen",
              "EXEC", "WREG", "WMEM", "SCHED", "SYNC", "CTA", "HALT", "DATA", "blocks", "warp-ins", "wi/tok");
  for (const Row& r : rows) print_row(r, true);
  if (rows.empty()) return;
  std::printf("\n");
  Row total = s.total;
  total.name = "total (" + std::to_string(rows.size()) + " launches)";
  print_row(total, false);
  std::printf("\nmedian launch by generated tokens: %s, %lld tokens\n", s.median->name.c_str(),
              static_cast<long long>(s.median->generated_tokens));
  std::printf("median launch by warp-instructions per generated token: %s, %.2f\n", s.median_per_token->name.c_str(),
              s.median_per_token->per_token());
  std::printf("most generated tokens: %s\n", short_list(s.most_tokens, false).c_str());
  std::printf("fewest warp-instructions per generated token: %s\n", short_list(s.fewest_per_token, true).c_str());
  for (const Row& r : rows) {
    if (r.name != kDotCase) continue;
    std::printf(
        "dot product (%s, %d x %d): %lld generated tokens for %lld warp-instructions (aim: at most 24; the "
        "prior art needed 47)\n",
        r.name.c_str(), r.grid, r.block, static_cast<long long>(r.generated_tokens),
        static_cast<long long>(r.warp_instructions));
  }
  if (!o.circuit) return;
  std::printf("\ncircuit engine (%s; every generated token checked against the interpreter's stream):\n",
              o.dtype.c_str());
  int exact = 0, failed = 0, skipped_long = 0;
  std::int64_t tokens = 0;
  double secs = 0;
  for (const Row& r : rows) {
    std::printf("  %-32s %s\n", r.name.c_str(), r.circuit.c_str());
    if (r.circuit == "exact") {
      ++exact;
      tokens += r.generated_tokens;
      secs += r.circuit_s;
    } else if (r.circuit.rfind("skipped", 0) == 0) {
      ++skipped_long;
    } else {
      ++failed;
    }
  }
  std::printf(
      "circuit: %d launches exact (%lld generated tokens, %.1f tokens/s), %d failed, %d skipped as longer "
      "than --max-generated\n",
      exact, static_cast<long long>(tokens), secs > 0 ? static_cast<double>(tokens) / secs : 0.0, failed, skipped_long);
  if (skipped > 0)
    std::printf("not measured: %d rejection cases (launches the machine must refuse; nothing runs)\n", skipped);
}

nlohmann::ordered_json row_json(const Row& r) {
  nlohmann::ordered_json j;
  if (!r.circuit.empty()) {
    j["circuit"] = r.circuit;
    j["circuit_generate_s"] = r.circuit_s;
  }
  if (!r.kernel.empty()) {
    j["launch"] = r.name;
    j["kernel"] = r.kernel;
    j["file"] = r.file;
    j["grid"] = r.grid;
    j["block"] = r.block;
  }
  j["prompt_tokens"] = r.prompt_tokens;
  j["generated_tokens"] = r.generated_tokens;
  j["records"] = {{"EXEC", r.exec}, {"WREG", r.wreg}, {"WMEM", r.wmem}, {"SCHED", r.sched},
                  {"SYNC", r.sync}, {"CTA", r.cta},   {"HALT", r.halt}};
  j["data_tokens"] = r.data_tokens;
  j["block_executions"] = r.block_executions;
  j["warp_instructions"] = r.warp_instructions;
  j["warp_instructions_per_token"] = r.per_token();
  return j;
}

void print_json(const std::vector<Row>& rows, const Summary& s, int skipped, const Options& o) {
  nlohmann::ordered_json out;
  out["source"] = o.nvcc ? "nvcc" : "clang";
  out["config"] = o.config;
  out["launches"] = nlohmann::ordered_json::array();
  for (const Row& r : rows) out["launches"].push_back(row_json(r));
  out["total"] = row_json(s.total);
  out["total"]["launches"] = rows.size();
  if (!rows.empty()) {
    out["median"] = {{"by_generated_tokens", {{"launch", s.median->name}, {"value", s.median->generated_tokens}}},
                     {"by_warp_instructions_per_token",
                      {{"launch", s.median_per_token->name}, {"value", s.median_per_token->per_token()}}}};
    auto names = [](const std::vector<const Row*>& v) {
      auto a = nlohmann::ordered_json::array();
      for (const Row* r : v) a.push_back(r->name);
      return a;
    };
    out["worst"] = {{"most_generated_tokens", names(s.most_tokens)},
                    {"fewest_warp_instructions_per_token", names(s.fewest_per_token)}};
  }
  out["skipped_rejection_cases"] = skipped;
  std::printf("%s\n", out.dump(2).c_str());
}

const char* kUsage =
    "usage: qgpu_bench_launch [--json] [--kernel NAME] [--nvcc] [--config FILE]\n"
    "  --json         print one JSON object instead of the table\n"
    "  --kernel NAME  only the launches of this kernel entry (or this suite case)\n"
    "  --nvcc         launch the committed nvcc PTX (tests/kernels/ptx-nvcc) instead of the .cu\n"
    "  --config FILE  the qgpu config (default: configs/simt_qwen2b.yaml)\n"
    "  --circuit      also generate every launch with the machine's compiled layers (run --engine circuit\n"
    "                 --check; one compile) and report exact launches, tokens replayed and tokens/s\n"
    "  --dtype f32|bf16      the circuit's dtype (default f32)\n"
    "  --max-generated N     circuit: skip launches with more than N generated tokens (default 2000)\n";

int fail(const std::string& where, const std::string& what) {
  std::fprintf(stderr, "qgpu_bench_launch: %s%s\n", where.empty() ? "" : (where + ": ").c_str(),
               core::one_line(what).c_str());
  return 1;
}

int main_impl(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--json") {
      o.json = true;
    } else if (a == "--nvcc") {
      o.nvcc = true;
    } else if (a == "--circuit") {
      o.circuit = true;
    } else if (a == "--dtype" && i + 1 < argc) {
      o.dtype = argv[++i];
    } else if (a == "--max-generated" && i + 1 < argc) {
      o.max_generated = std::strtoll(argv[++i], nullptr, 10);
    } else if ((a == "--kernel" || a == "--config") && i + 1 < argc) {
      (a == "--kernel" ? o.kernel : o.config) = argv[++i];
    } else if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return 0;
    } else {
      std::fprintf(stderr, "qgpu_bench_launch: unknown or incomplete argument '%s' (see --help)\n", argv[i]);
      return 2;
    }
  }

  // The launches, the dot product first, then in table order; rejection cases run nothing.
  std::vector<const kernels::Case*> cases;
  int skipped = 0;
  std::vector<std::string> known;
  for (const kernels::Case& c : kernels::all_cases()) {
    known.push_back(c.kernel);
    if (!o.kernel.empty() && c.kernel != o.kernel && c.name != o.kernel) continue;
    if (c.rejected()) {
      ++skipped;
      continue;
    }
    cases.insert(c.name == kDotCase ? cases.begin() : cases.end(), &c);
  }
  if (cases.empty()) {
    std::string message = "no accepted suite launch of kernel '" + o.kernel + "'";
    const std::string hint = core::closest_match(o.kernel, known);
    if (!hint.empty()) message += " (did you mean '" + hint + "'?)";
    return fail("", message);
  }

  core::HostOptions host_options;
  host_options.config_file = o.config;
  std::error_code ec;
  host_options.executable = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) host_options.executable = argv[0];
  auto host = core::Host::open(host_options);
  if (!host) return fail("", host.error().to_string());
  auto frontend = (*host)->instantiate<sdk::Frontend>();
  if (!frontend) return fail("", frontend.error().to_string());
  auto frontend_selection = (*host)->select(QGPU_PLUGIN_FRONTEND);
  if (!frontend_selection) return fail("", frontend_selection.error().to_string());
  // The machine options the config selects (validated against the plugin's table, defaults filled
  // in), lowered by the same code the plugin runs.
  auto machine = (*host)->select(QGPU_PLUGIN_MACHINE);
  if (!machine) return fail("", machine.error().to_string());
  if (machine->plugin->name != "machine_simt")
    return fail("", "the config's machine is '" + machine->plugin->name + "'; this bench measures machine_simt");
  auto config = simt::MachineConfig::from_options(machine->options);
  if (!config) return fail("", config.error().to_string());

  Bench bench(*frontend, frontend_selection->plugin->name, *config, o);
  std::vector<Row> rows(cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    if (auto f = bench.measure(*cases[i], rows[i])) return fail(f->where, f->what);
  }
  const Summary s = summarize(rows);
  if (o.json) {
    print_json(rows, s, skipped, o);
  } else {
    print_text(rows, s, skipped, o);
  }
  return 0;
}

}  // namespace
}  // namespace qgpu::bench

int main(int argc, char** argv) {
  // The suite's table throws std::out_of_range on a broken entry; nothing escapes as a trace.
  try {
    return qgpu::bench::main_impl(argc, argv);
  } catch (const std::exception& e) {
    return qgpu::bench::fail("", std::string("internal error: ") + e.what());
  }
}
