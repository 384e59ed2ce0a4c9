// The best row of a sparse matrix's row sums and its margin over the runner-up, without summing
// every row. The rows are split into runs of 512 consecutive rows (rows next to each other share
// their leading fields in an unembedding of records); a run's bound on its rows' sums is, per
// column, the larger of its largest and smallest weight (0 for a row without the column) times x.
// Runs are summed in the order of their bounds until the next bound lies below the runner-up found
// so far: no row of a run left out could have won or come second, so the choice and its margin are
// those of weights::choose over every row's logit. With a helper thread (TwoThreads) both threads
// take runs in that order; the runs left out still lie below the runner-up, so the choice and its
// margin are the same.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "qgpu/sdk/status.h"
#include "qgpu/weights/choice.h"
#include "qgpu/weights/model.h"
#include "qgpu/weights/row_sums.h"

namespace qgpu::weights {

class TwoThreads;

class RowChoice {
 public:
  explicit RowChoice(const SparseMatrix& m);
  ~RowChoice();

  // The winner and its margin among the logits float(sum / divisor) of every row, as choose()
  // gives them (ties and NaN are errors); x holds the columns.
  sdk::Expected<Choice> choose(const float* x, double divisor, TwoThreads* threads = nullptr);
  // The same over the rows' sums themselves (double, no division): the first row with the
  // largest sum and its lead over the largest of the others (0 where tied); a NaN sum never wins.
  Choice best_sum(const float* x);
  std::int64_t rows() const { return rows_; }
  std::int64_t runs() const { return static_cast<std::int64_t>(runs_.size()); }
  std::int64_t summed() const { return summed_; }  // rows summed over every call so far

 private:
  struct Run {
    std::int64_t first = 0, count = 0;
    std::vector<std::int32_t> col;
    std::vector<double> high, low;  // per column: the largest and smallest weight, 0 included
    std::unique_ptr<RowSums> sums;
  };
  std::vector<Run> runs_;
  std::int64_t rows_ = 0, summed_ = 0;
  std::vector<std::pair<double, std::size_t>> order_;  // scratch: bound, run
  std::vector<float> logits_[2];                       // scratch: one run's logits, per thread
  std::vector<double> sums_;                           // scratch: one run's sums
  void order_runs(const float* x, double divisor);     // order_ by bound, largest first
  static bool below(double bound, double second);
};

}  // namespace qgpu::weights
