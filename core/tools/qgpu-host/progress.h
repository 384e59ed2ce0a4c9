// Progress of long work on stderr: a live line on a terminal, periodic log lines otherwise;
// and Ctrl-C turned into a flag that work polls (core::ModelRunOptions::cancel).
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "qgpu/core/launch_session.h"

namespace qgpu::host {

// Reports a launch's progress (core::LaunchProgress) as it is generated: on a terminal one line
// rewritten in place (and cleared at the end), else a line every `log_interval_s` seconds.
class LaunchProgressLine {
 public:
  LaunchProgressLine(std::string engine, bool terminal, double log_interval_s = 10);
  ~LaunchProgressLine();  // clears the live line
  void operator()(const core::LaunchProgress& p);
  void finish();  // clears the live line (before an error or the result is printed)
  static std::string describe(const std::string& engine, const core::LaunchProgress& p);

 private:
  std::string engine_;
  bool terminal_;
  double log_interval_s_;
  bool live_ = false;  // a live line is on the terminal
  std::chrono::steady_clock::time_point last_log_;
};

// While alive, the first Ctrl-C sets the flag (a second one, half a second or more later, ends the
// process as usual; a duplicate delivery of the first is ignored).
class InterruptFlag {
 public:
  InterruptFlag();
  ~InterruptFlag();
  const std::atomic<bool>* flag() const;
  bool raised() const;
};

bool stderr_is_terminal();

}  // namespace qgpu::host
