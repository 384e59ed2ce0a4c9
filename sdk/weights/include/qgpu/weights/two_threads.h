// The calling thread and one helper thread, for work that splits into two
// independent parts: the circuit engine's layer products (different output
// rows, each summed by one thread in its own order) and its record rows' scoring.
//
// run() publishes the two parts; each thread claims parts until none is left,
// so the caller never waits for a helper the system has not scheduled: it takes
// the second part itself. It waits only for a part the helper has claimed and
// is still running. Between calls the helper spins for a short while (the next
// product of a token comes within microseconds), then sleeps until woken.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

namespace qgpu::weights {

class TwoThreads {
 public:
  TwoThreads();
  ~TwoThreads();
  TwoThreads(const TwoThreads&) = delete;
  TwoThreads& operator=(const TwoThreads&) = delete;

  // Runs part(0) and part(1) once each and returns when both have finished.
  template <typename Part>
  void run(const Part& part) {
    run_parts([](const void* p, int i) { (*static_cast<const Part*>(p))(i); }, &part);
  }
  // How many parts the helper ran (for tests and profiles).
  std::int64_t helped() const { return helped_.load(std::memory_order_relaxed); }

 private:
  using Function = void (*)(const void*, int);
  void run_parts(Function f, const void* arg);
  // Claims a part of job `epoch`; false when both are taken (or a later job is out).
  bool claim(std::uint64_t epoch, int& part);
  void serve();  // the helper's loop

  // The current job: its number << 2 | the parts claimed so far (0, 1 or 2).
  std::atomic<std::uint64_t> job_{0};
  std::atomic<int> done_{0};
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> stop_{false};
  std::atomic<std::int64_t> helped_{0};
  // Written by run() before it publishes a job, read by a thread that has claimed one of its parts.
  Function function_ = nullptr;
  const void* argument_ = nullptr;
  std::thread helper_;
};

}  // namespace qgpu::weights
