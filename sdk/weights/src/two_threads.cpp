#include "qgpu/weights/two_threads.h"

#include <immintrin.h>

namespace qgpu::weights {

namespace {
// Polls of an idle helper before it sleeps (a pause is tens of nanoseconds: a few hundred µs in all), and of
// a caller waiting for the helper's part before it yields its core.
constexpr int kIdlePolls = 4096;
constexpr int kWaitPolls = 4096;
constexpr std::uint64_t kBothClaimed = 2;
}  // namespace

TwoThreads::TwoThreads() : helper_([this] { serve(); }) {}

TwoThreads::~TwoThreads() {
  stop_.store(true);
  // A job with both parts claimed: it wakes the helper and gives it nothing to run.
  job_.store(((job_.load() >> 2) + 1) << 2 | kBothClaimed);
  job_.notify_one();
  helper_.join();
}

bool TwoThreads::claim(std::uint64_t epoch, int& part) {
  std::uint64_t s = job_.load(std::memory_order_acquire);
  while ((s >> 2) == epoch && (s & 3) < kBothClaimed) {
    if (job_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
      part = static_cast<int>(s & 3);
      return true;
    }
  }
  return false;
}

void TwoThreads::run_parts(Function f, const void* arg) {
  function_ = f;
  argument_ = arg;
  done_.store(0, std::memory_order_relaxed);
  const std::uint64_t epoch = (job_.load(std::memory_order_relaxed) >> 2) + 1;
  job_.store(epoch << 2);  // publishes function_ and argument_
  if (sleeping_.load()) job_.notify_one();
  int part = 0;
  while (claim(epoch, part)) {
    f(arg, part);
    done_.fetch_add(1, std::memory_order_release);
  }
  for (int polls = 0; done_.load(std::memory_order_acquire) < 2; ++polls) {
    if (polls < kWaitPolls)
      _mm_pause();
    else
      std::this_thread::yield();  // the helper holds a part and has lost its core
  }
}

void TwoThreads::serve() {
  std::uint64_t handled = 0;  // the last job looked at
  for (;;) {
    std::uint64_t s = job_.load(std::memory_order_acquire);
    for (int polls = 0; (s >> 2) == handled && polls < kIdlePolls; ++polls) {
      _mm_pause();
      s = job_.load(std::memory_order_acquire);
    }
    if ((s >> 2) == handled) {
      sleeping_.store(true);
      job_.wait(s);  // returns at once if run() published a job since
      sleeping_.store(false);
      continue;
    }
    if (stop_.load()) return;
    handled = s >> 2;
    int part = 0;
    while (claim(handled, part)) {
      function_(argument_, part);
      helped_.fetch_add(1, std::memory_order_relaxed);
      done_.fetch_add(1, std::memory_order_release);
    }
  }
}

}  // namespace qgpu::weights
