#include "qgpu/weights/row_choice.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <iterator>
#include <string>

#include "qgpu/weights/two_threads.h"

namespace qgpu::weights {
namespace {
constexpr std::int64_t kRunRows = 512;  // measured: 128 and 2048 rows per run score slower

// The best row so far and the runner-up's value; rows arrive out of order, so among equal values the
// lowest row leads (by nothing: a tie).
struct Leader {
  Choice c;
  double second = -INFINITY;
  Leader() { c.logit = -INFINITY; }
  void take(double v, std::int64_t row) {
    if (v > c.logit) {
      second = c.logit;
      c.logit = v;
      c.offset = row;
    } else if (v == c.logit) {
      second = v;
      c.offset = c.offset < 0 ? row : std::min(c.offset, row);
    } else if (v > second) {
      second = v;
    }
  }
  // Takes the rows `other` has seen: the same leader as if this one had seen them itself.
  void take(const Leader& other) {
    if (other.c.offset >= 0) take(other.c.logit, other.c.offset);
    if (other.second > second && other.second < c.logit) second = other.second;
    if (other.second == c.logit && other.c.offset >= 0) second = other.second;  // a tie it saw
  }
  Choice done() {
    c.margin = c.logit - second;
    return c;
  }
};

// The largest runner-up either thread has found, for both to leave out the runs below it.
void raise(std::atomic<double>& bar, double second) {
  double now = bar.load(std::memory_order_relaxed);
  while (second > now && !bar.compare_exchange_weak(now, second, std::memory_order_relaxed)) {
  }
}
}  // namespace

RowChoice::RowChoice(const SparseMatrix& m) : rows_(m.rows) {
  auto columns = [&](std::int64_t r) {
    std::vector<std::int32_t> c(m.col.begin() + m.row_ptr[r], m.col.begin() + m.row_ptr[r + 1]);
    std::sort(c.begin(), c.end());
    return c;
  };
  std::int64_t r = 0;
  while (r < m.rows) {
    Run run;
    run.first = r;
    run.col = columns(r);
    std::int64_t end = r + 1;
    for (; end < m.rows && end - r < kRunRows; ++end) {
      std::vector<std::int32_t> more = columns(end), both;
      std::set_union(run.col.begin(), run.col.end(), more.begin(), more.end(), std::back_inserter(both));
      run.col = std::move(both);
    }
    run.count = end - r;
    run.high.assign(run.col.size(), 0.0);  // 0: a row without the column
    run.low.assign(run.col.size(), 0.0);
    SparseMatrix part;
    part.rows = run.count;
    part.cols = m.cols;
    part.row_ptr.push_back(0);
    for (std::int64_t q = r; q < end; ++q) {
      for (std::int64_t p = m.row_ptr[q]; p < m.row_ptr[q + 1]; ++p) {
        const auto at = static_cast<std::size_t>(p);
        const auto i = static_cast<std::size_t>(
            std::lower_bound(run.col.begin(), run.col.end(), m.col[at]) - run.col.begin());
        run.high[i] = std::max(run.high[i], m.val[at]);
        run.low[i] = std::min(run.low[i], m.val[at]);
        part.col.push_back(m.col[at]);
        part.val.push_back(m.val[at]);
      }
      part.row_ptr.push_back(static_cast<std::int64_t>(part.col.size()));
    }
    run.sums = std::make_unique<RowSums>(part);
    runs_.push_back(std::move(run));
    r = end;
  }
}

RowChoice::~RowChoice() = default;

void RowChoice::order_runs(const float* x, double divisor) {
  order_.clear();
  for (std::size_t k = 0; k < runs_.size(); ++k) {
    const Run& run = runs_[k];
    double bound = 0;
    for (std::size_t i = 0; i < run.col.size(); ++i) {
      const double v = static_cast<double>(x[run.col[i]]);
      bound += std::max(run.high[i] * v, run.low[i] * v);
    }
    order_.emplace_back(std::isnan(bound) ? INFINITY : bound / divisor, k);  // NaN: summed
  }
  // Stable: runs of equal bounds (NaN ones among them) in row order, so a NaN reported is the first.
  std::stable_sort(order_.begin(), order_.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
}

// Every row of a run and the later ones sums to at most `bound` (to rounding far below the slack):
// below the runner-up, none of them can win or come second.
bool RowChoice::below(double bound, double second) {
  return bound + 1e-6 * std::max(1.0, std::fabs(second)) < second;
}

Choice RowChoice::best_sum(const float* x) {
  order_runs(x, 1.0);
  Leader lead;
  for (const auto& [bound, k] : order_) {
    if (below(bound, lead.second)) break;
    Run& run = runs_[k];
    run.sums->compute(x, sums_);
    summed_ += run.count;
    for (std::int64_t i = 0; i < run.count; ++i) lead.take(sums_[static_cast<std::size_t>(i)], run.first + i);
  }
  return lead.done();
}

sdk::Expected<Choice> RowChoice::choose(const float* x, double divisor, TwoThreads* threads) {
  if (rows_ == 0) return sdk::invalid_argument("choose: no rows");
  order_runs(x, divisor);
  // Each thread takes the next run in order until the next bound lies below the runner-up (its own
  // or the other's) or a logit is NaN (the first in the order is reported).
  std::atomic<std::size_t> next{0};
  std::atomic<double> bar{-INFINITY};
  Leader lead[2];
  std::int64_t summed[2] = {0, 0};
  std::size_t nan_at[2] = {SIZE_MAX, SIZE_MAX};  // position in order_ of the run with a NaN
  std::int64_t nan_row[2] = {-1, -1};
  auto part = [&](int t) {
    std::vector<float>& logits = logits_[t];
    Leader& mine = lead[t];
    for (std::size_t at = next.fetch_add(1, std::memory_order_relaxed); at < order_.size();
         at = next.fetch_add(1, std::memory_order_relaxed)) {
      const auto& [bound, k] = order_[at];
      if (below(bound, std::max(mine.second, bar.load(std::memory_order_relaxed)))) return;
      Run& run = runs_[k];
      run.sums->compute_scaled(x, divisor, logits);
      summed[t] += run.count;
      for (std::int64_t i = 0; i < run.count; ++i) {
        const double v = logits[static_cast<std::size_t>(i)];
        if (std::isnan(v)) {
          nan_at[t] = at;
          nan_row[t] = run.first + i;
          return;
        }
        mine.take(v, run.first + i);
      }
      raise(bar, mine.second);
    }
  };
  if (threads != nullptr) {
    threads->run(part);
  } else {
    part(0);
  }
  summed_ += summed[0] + summed[1];
  if (nan_at[0] != SIZE_MAX || nan_at[1] != SIZE_MAX) {
    const std::int64_t row = nan_at[0] <= nan_at[1] ? nan_row[0] : nan_row[1];
    return sdk::internal_error("choose: logit of machine row " + std::to_string(row) + " is NaN");
  }
  lead[0].take(lead[1]);
  const Choice c = lead[0].done();
  if (!(c.margin > 0))
    return sdk::internal_error("choose: no single best row (machine row " + std::to_string(c.offset) +
                               " and another tie at " + std::to_string(c.logit) + ")");
  return c;
}

}  // namespace qgpu::weights
