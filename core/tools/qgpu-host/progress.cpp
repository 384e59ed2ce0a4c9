#include "progress.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <ctime>
#include <utility>

namespace qgpu::host {
namespace {

std::atomic<bool> g_interrupted{false};
std::atomic<long long> g_first_ns{0};  // CLOCK_MONOTONIC of the first Ctrl-C

long long monotonic_ns() {  // async-signal-safe (clock_gettime)
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<long long>(t.tv_sec) * 1000000000LL + t.tv_nsec;
}

// The first SIGINT sets the flag. One that follows within half a second is the same interrupt
// delivered twice (timeout(1) signals the child and then its process group; `kill -INT -PGID`
// reaches every process of a pipeline) and is ignored; a later one is a second Ctrl-C and ends the
// process as usual.
extern "C" void on_interrupt(int) {
  const long long now = monotonic_ns();
  if (!g_interrupted.exchange(true)) {
    g_first_ns.store(now);
    return;
  }
  if (now - g_first_ns.load() < 500000000LL) return;
  std::signal(SIGINT, SIG_DFL);
  std::raise(SIGINT);
}

}  // namespace

bool stderr_is_terminal() {
  return isatty(fileno(stderr)) != 0;
}

LaunchProgressLine::LaunchProgressLine(std::string engine, bool terminal, double log_interval_s)
    : engine_(std::move(engine)),
      terminal_(terminal),
      log_interval_s_(log_interval_s),
      last_log_(std::chrono::steady_clock::now()) {}

LaunchProgressLine::~LaunchProgressLine() {
  finish();
}

void LaunchProgressLine::finish() {
  if (live_) std::fprintf(stderr, "\r\033[K");
  live_ = false;
}

std::string LaunchProgressLine::describe(const std::string& engine, const core::LaunchProgress& p) {
  std::string kinds;
  for (const auto& [kind, n] : p.records_by_kind) kinds += (kinds.empty() ? "" : " ") + kind + " " + std::to_string(n);
  char line[320];
  std::snprintf(line, sizeof line,
                "%s: %lld generated tokens, %lld records (%s), %lld warp-instructions, %.1f tokens/s, smallest "
                "margin %.4g",
                engine.c_str(), static_cast<long long>(p.generated_tokens), static_cast<long long>(p.records),
                kinds.empty() ? "none yet" : kinds.c_str(), static_cast<long long>(p.warp_instructions),
                p.seconds > 0 ? static_cast<double>(p.generated_tokens) / p.seconds : 0.0, p.min_margin);
  return line;
}

void LaunchProgressLine::operator()(const core::LaunchProgress& p) {
  if (terminal_) {
    if (p.done) {
      if (live_) std::fprintf(stderr, "\r\033[K");
      live_ = false;
      return;
    }
    std::fprintf(stderr, "\r\033[K%s", describe(engine_, p).c_str());
    std::fflush(stderr);
    live_ = true;
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (p.done || std::chrono::duration<double>(now - last_log_).count() < log_interval_s_) return;
  last_log_ = now;
  std::fprintf(stderr, "qgpu-host: %s\n", describe(engine_, p).c_str());
}

InterruptFlag::InterruptFlag() {
  g_interrupted.store(false);
  std::signal(SIGINT, on_interrupt);
}

InterruptFlag::~InterruptFlag() {
  std::signal(SIGINT, SIG_DFL);
}

const std::atomic<bool>* InterruptFlag::flag() const {
  return &g_interrupted;
}

bool InterruptFlag::raised() const {
  return g_interrupted.load();
}

}  // namespace qgpu::host
