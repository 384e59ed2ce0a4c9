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
  std::vector<std::int32_t> col;
  std::vector<double> weight;
  for (std::int64_t r = 0; r < m.rows; ++r) {
    std::int32_t prefix = 0;
    for (std::int64_t p = m.row_ptr[r]; p < m.row_ptr[r + 1]; ++p) {
      const std::size_t at = static_cast<std::size_t>(p);
      const Key key{prefix, m.col[at], std::bit_cast<std::uint64_t>(m.val[at])};
      auto [it, fresh] = prefixes.try_emplace(key, static_cast<std::int32_t>(col.size() + 1));
      if (fresh) {
        parent_.push_back(prefix);
        col.push_back(key.col);
        weight.push_back(m.val[at]);
      }
      prefix = it->second;
    }
    leaf_.push_back(prefix);
  }
  // Shortest prefixes first: a prefix's sum then never waits for the one computed just before it
  // (in creation order most prefixes extend the previous one, a chain of dependent adds).
  const std::size_t n = col.size();
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
  permute(col);
  permute(weight);
  permute(parent_);
  for (std::int32_t& p : parent_) p = position[static_cast<std::size_t>(p)];
  for (std::int32_t& l : leaf_) l = position[static_cast<std::size_t>(l)];
  terms_ = static_cast<std::int64_t>(n);
  // Each prefix's term as a pair number (pair 0: none).
  std::unordered_map<Key, std::int32_t, KeyHash> pairs;
  pair_col_.push_back(0);
  pair_weight_.push_back(0.0);
  std::vector<std::int32_t> pair(n);
  for (std::size_t i = 0; i < n; ++i) {
    const Key key{0, col[i], std::bit_cast<std::uint64_t>(weight[i])};
    auto [it, fresh] = pairs.try_emplace(key, static_cast<std::int32_t>(pair_col_.size()));
    if (fresh) {
      pair_col_.push_back(col[i]);
      pair_weight_.push_back(weight[i]);
    }
    pair[i] = it->second;
  }
  // A row's own last prefix leaves the tree (RowSums in row_sums.h): the row keeps the pair.
  std::vector<std::int32_t> extended(n + 1, 0), ends(n + 1, 0);
  for (const std::int32_t p : parent_) ++extended[static_cast<std::size_t>(p)];
  for (const std::int32_t l : leaf_) ++ends[static_cast<std::size_t>(l)];
  auto own = [&](std::int32_t l) { return l != 0 && extended[static_cast<std::size_t>(l)] == 0 && ends[static_cast<std::size_t>(l)] == 1; };
  std::vector<std::int32_t> renumbered(n + 1, 0);
  std::int32_t kept = 0;
  for (std::size_t i = 1; i <= n; ++i)
    if (!own(static_cast<std::int32_t>(i))) renumbered[i] = ++kept;
  last_.assign(leaf_.size(), 0);
  for (std::size_t r = 0; r < leaf_.size(); ++r) {
    const std::int32_t l = leaf_[r];
    if (own(l)) {
      const auto i = static_cast<std::size_t>(l - 1);
      last_[r] = pair[i];
      leaf_[r] = renumbered[static_cast<std::size_t>(parent_[i])];
    } else {
      leaf_[r] = renumbered[static_cast<std::size_t>(l)];
    }
  }
  std::size_t at = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (own(static_cast<std::int32_t>(i + 1))) continue;
    parent_[at] = renumbered[static_cast<std::size_t>(parent_[i])];
    pair[at] = pair[i];
    ++at;
  }
  parent_.resize(at);
  pair.resize(at);
  if (pair_col_.size() <= 65536)
    pair_.assign(pair.begin(), pair.end());
  else
    pair_wide_ = std::move(pair);
  products_.assign(pair_col_.size(), 0.0);
  sums_.assign(parent_.size() + 1, 0.0);
}

namespace {
template <typename Pair>
void extend_prefixes(const std::int32_t* parent, const Pair* pair, std::size_t n, const double* product, double* sum) {
  for (std::size_t i = 0; i < n; ++i) sum[i + 1] = sum[parent[i]] + product[pair[i]];
}
}  // namespace

void RowSums::extend(const float* x) {
  products_[0] = 0.0;
  for (std::size_t p = 1; p < products_.size(); ++p)
    products_[p] = pair_weight_[p] * static_cast<double>(x[pair_col_[p]]);
  sums_[0] = 0.0;
  if (!pair_.empty() || pair_wide_.empty())
    extend_prefixes(parent_.data(), pair_.data(), parent_.size(), products_.data(), sums_.data());
  else
    extend_prefixes(parent_.data(), pair_wide_.data(), parent_.size(), products_.data(), sums_.data());
}

double RowSums::sum(std::size_t row) const {
  return sums_[static_cast<std::size_t>(leaf_[row])] + products_[static_cast<std::size_t>(last_[row])];
}

void RowSums::compute(const float* x, std::vector<double>& out) {
  extend(x);
  out.resize(leaf_.size());
  for (std::size_t r = 0; r < leaf_.size(); ++r) out[r] = sum(r);
}

namespace {
// out[r] = float(row r's sum / divisor) for r in [0, n), 8 rows at a time (RowSums::sum on lanes);
// returns where it stopped.
__attribute__((target("avx512f"))) std::size_t scale_avx512(const double* sum, const std::int32_t* leaf,
                                                            const double* product, const std::int32_t* last,
                                                            std::size_t n, double divisor, float* out) {
  const __m512d d = _mm512_set1_pd(divisor);
  std::size_t r = 0;
  for (; r + 8 <= n; r += 8) {
    const __m256i at = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(leaf + r));
    const __m256i pair = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(last + r));
    // (The masked gathers and conversion with every lane on: GCC 12 warns on the unmasked ones'
    // undefined source.)
    const __m512d base = _mm512_mask_i32gather_pd(_mm512_setzero_pd(), 0xFF, at, sum, 8);
    const __m512d term = _mm512_mask_i32gather_pd(_mm512_setzero_pd(), 0xFF, pair, product, 8);
    _mm256_storeu_ps(out + r, _mm512_maskz_cvtpd_ps(0xFF, _mm512_div_pd(_mm512_add_pd(base, term), d)));
  }
  return r;
}
}  // namespace

void RowSums::compute_scaled(const float* x, double divisor, std::vector<float>& out) {
  extend(x);
  const std::size_t n = leaf_.size();
  out.resize(n);
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  std::size_t r = avx512 ? scale_avx512(sums_.data(), leaf_.data(), products_.data(), last_.data(), n, divisor, out.data())
                         : 0;
  for (; r < n; ++r) out[r] = static_cast<float>(sum(r) / divisor);
}

}  // namespace qgpu::weights
