#include "qgpu/weights/row_sums.h"

#include <algorithm>
#include <bit>
#include <immintrin.h>
#include <unordered_map>

namespace qgpu::weights {

namespace {
struct Key {
  std::int32_t parent, col;
  std::uint64_t val;  // the weight's bits (equal weights share, -0 and +0 do not)
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  std::size_t operator()(const Key& k) const {
    std::uint64_t h = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(k.parent)) << 32) ^
                      static_cast<std::uint32_t>(k.col);
    h ^= k.val + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return static_cast<std::size_t>(h * 0xBF58476D1CE4E5B9ull);
  }
};
}  // namespace

RowSums::RowSums(const SparseMatrix& m) {
  std::unordered_map<Key, std::int32_t, KeyHash> prefixes;
  prefixes.reserve(m.nonzeros());
  leaf_.reserve(static_cast<std::size_t>(m.rows));
  bool narrow = true;
  for (std::int64_t r = 0; r < m.rows; ++r) {
    std::int32_t prefix = 0;
    for (std::int64_t p = m.row_ptr[r]; p < m.row_ptr[r + 1]; ++p) {
      const std::size_t at = static_cast<std::size_t>(p);
      const Key key{prefix, m.col[at], std::bit_cast<std::uint64_t>(m.val[at])};
      auto [it, fresh] = prefixes.try_emplace(key, static_cast<std::int32_t>(col_.size() + 1));
      if (fresh) {
        parent_.push_back(prefix);
        col_.push_back(key.col);
        weight_wide_.push_back(m.val[at]);
        narrow = narrow && static_cast<double>(static_cast<float>(m.val[at])) == m.val[at];
      }
      prefix = it->second;
    }
    leaf_.push_back(prefix);
  }
  // Shortest prefixes first: a prefix's sum then never waits for the one computed just before it
  // (in creation order most prefixes extend the previous one, a chain of dependent adds).
  const std::size_t n = col_.size();
  std::vector<std::int32_t> depth(n + 1, 0), order(n), position(n + 1, 0);
  std::int32_t deepest = 0;
  for (std::size_t i = 0; i < n; ++i) {
    depth[i + 1] = depth[static_cast<std::size_t>(parent_[i])] + 1;
    deepest = std::max(deepest, depth[i + 1]);
  }
  std::vector<std::size_t> first(static_cast<std::size_t>(deepest) + 2, 0);
  for (std::size_t i = 0; i < n; ++i) ++first[static_cast<std::size_t>(depth[i + 1]) + 1];
  for (std::size_t d = 1; d < first.size(); ++d) first[d] += first[d - 1];
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t at = first[static_cast<std::size_t>(depth[i + 1])]++;
    order[at] = static_cast<std::int32_t>(i);
    position[i + 1] = static_cast<std::int32_t>(at + 1);
  }
  auto permute = [&](auto& v) {
    auto old = v;
    for (std::size_t at = 0; at < n; ++at) v[at] = old[static_cast<std::size_t>(order[at])];
  };
  permute(col_);
  permute(weight_wide_);
  permute(parent_);
  for (std::int32_t& p : parent_) p = position[static_cast<std::size_t>(p)];
  for (std::int32_t& l : leaf_) l = position[static_cast<std::size_t>(l)];
  terms_ = static_cast<std::int64_t>(n);
  // A row's own last prefix leaves the tree (RowSums in row_sums.h): the row keeps the term.
  std::vector<std::int32_t> extended(n + 1, 0), ends(n + 1, 0);
  for (const std::int32_t p : parent_) ++extended[static_cast<std::size_t>(p)];
  for (const std::int32_t l : leaf_) ++ends[static_cast<std::size_t>(l)];
  auto own = [&](std::int32_t l) { return l != 0 && extended[static_cast<std::size_t>(l)] == 0 && ends[static_cast<std::size_t>(l)] == 1; };
  std::vector<std::int32_t> renumbered(n + 1, 0);
  std::int32_t kept = 0;
  for (std::size_t i = 1; i <= n; ++i)
    if (!own(static_cast<std::int32_t>(i))) renumbered[i] = ++kept;
  last_col_.assign(leaf_.size(), -1);
  last_weight_.assign(leaf_.size(), 0.0);
  for (std::size_t r = 0; r < leaf_.size(); ++r) {
    const std::int32_t l = leaf_[r];
    if (own(l)) {
      const auto i = static_cast<std::size_t>(l - 1);
      last_col_[r] = col_[i];
      last_weight_[r] = weight_wide_[i];
      leaf_[r] = renumbered[static_cast<std::size_t>(parent_[i])];
    } else {
      leaf_[r] = renumbered[static_cast<std::size_t>(l)];
    }
  }
  std::size_t at = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (own(static_cast<std::int32_t>(i + 1))) continue;
    parent_[at] = renumbered[static_cast<std::size_t>(parent_[i])];
    col_[at] = col_[i];
    weight_wide_[at] = weight_wide_[i];
    ++at;
  }
  parent_.resize(at);
  col_.resize(at);
  weight_wide_.resize(at);
  if (narrow) {
    weight_.assign(weight_wide_.begin(), weight_wide_.end());
    weight_wide_ = {};
  }
  sums_.assign(col_.size() + 1, 0.0);
}

void RowSums::extend(const float* x) {
  double* sum = sums_.data();
  sum[0] = 0.0;
  const std::size_t n = col_.size();
  if (!weight_.empty()) {
    for (std::size_t i = 0; i < n; ++i)
      sum[i + 1] = sum[parent_[i]] + static_cast<double>(weight_[i]) * static_cast<double>(x[col_[i]]);
  } else {
    for (std::size_t i = 0; i < n; ++i) sum[i + 1] = sum[parent_[i]] + weight_wide_[i] * static_cast<double>(x[col_[i]]);
  }
}

double RowSums::sum(std::size_t row, const float* x) const {
  const double base = sums_[static_cast<std::size_t>(leaf_[row])];
  const std::int32_t c = last_col_[row];
  return c < 0 ? base : base + last_weight_[row] * static_cast<double>(x[c]);
}

void RowSums::compute(const float* x, std::vector<double>& out) {
  extend(x);
  out.resize(leaf_.size());
  for (std::size_t r = 0; r < leaf_.size(); ++r) out[r] = sum(r, x);
}

namespace {
// out[r] = float(row r's sum / divisor) for r in [0, n), 8 rows at a time (RowSums::sum on lanes);
// returns where it stopped.
__attribute__((target("avx512f"))) std::size_t scale_avx512(const double* sum, const std::int32_t* leaf,
                                                            const std::int32_t* last_col, const double* last_weight,
                                                            const float* x, std::size_t n, double divisor, float* out) {
  const __m512d d = _mm512_set1_pd(divisor);
  std::size_t r = 0;
  for (; r + 8 <= n; r += 8) {
    const __m256i at = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(leaf + r));
    const __m256i col = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(last_col + r));
    const __m256i has = _mm256_cmpgt_epi32(col, _mm256_set1_epi32(-1));  // the rows with a last term
    __m512d v = _mm512_mask_i32gather_pd(_mm512_setzero_pd(), 0xFF, at, sum, 8);
    const __m256 xs = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), x, col, _mm256_castsi256_ps(has), 4);
    // (The masked conversions with every lane on: GCC 12 warns on the unmasked ones' undefined source.)
    const __m512d term = _mm512_mul_pd(_mm512_loadu_pd(last_weight + r), _mm512_maskz_cvtps_pd(0xFF, xs));
    v = _mm512_mask_add_pd(v, static_cast<__mmask8>(_mm256_movemask_ps(_mm256_castsi256_ps(has))), v, term);
    _mm256_storeu_ps(out + r, _mm512_maskz_cvtpd_ps(0xFF, _mm512_div_pd(v, d)));
  }
  return r;
}
}  // namespace

void RowSums::compute_scaled(const float* x, double divisor, std::vector<float>& out) {
  extend(x);
  const std::size_t n = leaf_.size();
  out.resize(n);
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  std::size_t r =
      avx512 ? scale_avx512(sums_.data(), leaf_.data(), last_col_.data(), last_weight_.data(), x, n, divisor, out.data())
             : 0;
  for (; r < n; ++r) out[r] = static_cast<float>(sum(r, x) / divisor);
}

}  // namespace qgpu::weights
