#include "sliced.h"

#include "lanes.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>

namespace qgpu::weights::reference {

namespace {
// A gathered step costs about this many broadcast steps (measured on AVX-512 CPUs: a 16-lane
// gather is microcoded, a broadcast is one load).
constexpr std::int64_t kGatherSteps = 4;
}  // namespace

namespace {
// Moves the slices' steps into groups (sliced.h): the slices by column four at a time, longest first,
// each group's steps interleaved; then the slices by lane, each contiguous.
void group(SlicedMatrix& s) {
  const std::vector<std::int32_t> column = std::move(s.column);
  const std::vector<std::uint16_t> mask = std::move(s.mask);
  const std::vector<float> val = std::move(s.val);
  s.column.clear();
  s.mask.clear();
  s.val.clear();
  auto copy = [&](const SlicedMatrix::Slice* from, std::int64_t k) {  // one step, or padding
    const bool real = from != nullptr && k < from->steps;
    const std::size_t at = real ? static_cast<std::size_t>(from->first + k) : 0;
    s.column.push_back(real ? column[at] : static_cast<std::int32_t>(s.cols));
    s.mask.push_back(real ? mask[at] : 0);
    for (int lane = 0; lane < kSliceRows; ++lane) s.val.push_back(real ? val[at * kSliceRows + lane] : 0.0f);
  };
  std::vector<std::int32_t> by_column;
  for (std::size_t i = 0; i < s.slices.size(); ++i)
    (s.slices[i].lane_cols < 0 ? by_column : s.by_lane).push_back(static_cast<std::int32_t>(i));
  std::stable_sort(by_column.begin(), by_column.end(),
                   [&](std::int32_t a, std::int32_t b) { return s.slices[a].steps > s.slices[b].steps; });
  std::vector<SlicedMatrix::Slice> moved = s.slices;
  for (std::size_t g = 0; g < by_column.size(); g += kGroupSlices) {
    SlicedMatrix::Group& group = s.groups.emplace_back();
    group.first = static_cast<std::int64_t>(s.column.size());
    group.steps = s.slices[by_column[g]].steps;  // the longest (sorted)
    for (std::size_t j = 0; j < kGroupSlices && g + j < by_column.size(); ++j) {
      group.slice[j] = by_column[g + j];
      group.first_row[j] = s.slices[by_column[g + j]].first_row;
      group.lanes[j] = s.slices[by_column[g + j]].lanes;
      moved[by_column[g + j]].first = group.first + static_cast<std::int64_t>(j);
      moved[by_column[g + j]].stride = kGroupSlices;
    }
    for (std::int64_t k = 0; k < group.steps; ++k)
      for (const std::int32_t j : group.slice) copy(j < 0 ? nullptr : &s.slices[j], k);
  }
  for (const std::int32_t i : s.by_lane) {
    moved[i].first = static_cast<std::int64_t>(s.column.size());
    for (std::int64_t k = 0; k < s.slices[i].steps; ++k) copy(&s.slices[i], k);
  }
  s.slices = std::move(moved);
}
}  // namespace

SlicedMatrix slice(const SparseMatrix& m, DType dtype) {
  SlicedMatrix s;
  s.rows = m.rows;
  s.cols = m.cols;
  for (std::int64_t r = 0; r < m.rows; ++r)
    if (m.row_ptr[r + 1] > m.row_ptr[r]) s.nonempty.push_back(static_cast<std::int32_t>(r));
  const std::size_t count = s.nonempty.size();
  s.row.assign((count + kSliceRows - 1) / kSliceRows * kSliceRows, -1);
  std::copy(s.nonempty.begin(), s.nonempty.end(), s.row.begin());
  auto weight = [&](std::int64_t p) { return round_to(dtype, static_cast<float>(m.val[static_cast<std::size_t>(p)])); };
  for (std::size_t i = 0; i < count; i += kSliceRows) {
    const std::size_t lanes = std::min<std::size_t>(kSliceRows, count - i);
    std::int64_t width = 0;
    bool ascending = true;
    std::vector<std::int32_t> columns;
    for (std::size_t lane = 0; lane < lanes; ++lane) {
      const std::int32_t r = s.row[i + lane];
      width = std::max(width, m.row_ptr[r + 1] - m.row_ptr[r]);
      for (std::int64_t p = m.row_ptr[r]; p < m.row_ptr[r + 1]; ++p) {
        columns.push_back(m.col[static_cast<std::size_t>(p)]);
        if (p > m.row_ptr[r] && m.col[static_cast<std::size_t>(p)] <= m.col[static_cast<std::size_t>(p - 1)])
          ascending = false;
      }
    }
    std::sort(columns.begin(), columns.end());
    columns.erase(std::unique(columns.begin(), columns.end()), columns.end());
    SlicedMatrix::Slice& sl = s.slices.emplace_back();
    sl.first = static_cast<std::int64_t>(s.column.size());
    sl.lanes = static_cast<std::uint16_t>((1u << lanes) - 1u);
    if (s.row[i + lanes - 1] - s.row[i] == static_cast<std::int32_t>(lanes) - 1) sl.first_row = s.row[i];
    // By column only where every row is in column order (else only by lane keeps the row's order).
    if (ascending && static_cast<std::int64_t>(columns.size()) <= kGatherSteps * width) {
      sl.steps = static_cast<std::int64_t>(columns.size());
      s.column.insert(s.column.end(), columns.begin(), columns.end());
      s.mask.resize(s.column.size(), 0);
      s.val.resize(s.column.size() * kSliceRows, 0.0f);
      for (std::size_t lane = 0; lane < lanes; ++lane) {
        const std::int32_t r = s.row[i + lane];
        std::size_t t = 0;
        for (std::int64_t p = m.row_ptr[r]; p < m.row_ptr[r + 1]; ++p) {
          while (columns[t] != m.col[static_cast<std::size_t>(p)]) ++t;
          const std::size_t step = static_cast<std::size_t>(sl.first) + t;
          s.mask[step] = static_cast<std::uint16_t>(s.mask[step] | (1u << lane));
          s.val[step * kSliceRows + lane] = weight(p);
        }
      }
      continue;
    }
    sl.steps = width;
    sl.lane_cols = static_cast<std::int64_t>(s.lane_col.size()) / kSliceRows;
    s.column.resize(s.column.size() + static_cast<std::size_t>(width), -1);
    s.mask.resize(s.column.size(), 0);
    s.val.resize(s.column.size() * kSliceRows, 0.0f);
    s.lane_col.resize(s.lane_col.size() + static_cast<std::size_t>(width) * kSliceRows,
                      static_cast<std::int32_t>(m.cols));  // padding reads x[cols] = 0
    for (std::size_t lane = 0; lane < lanes; ++lane) {
      const std::int32_t r = s.row[i + lane];
      std::int64_t k = 0;
      for (std::int64_t p = m.row_ptr[r]; p < m.row_ptr[r + 1]; ++p, ++k) {
        s.lane_col[static_cast<std::size_t>((sl.lane_cols + k) * kSliceRows) + lane] = m.col[static_cast<std::size_t>(p)];
        s.val[static_cast<std::size_t>((sl.first + k) * kSliceRows) + lane] = weight(p);
      }
    }
  }
  group(s);
  std::vector<float> distinct = s.val;
  std::sort(distinct.begin(), distinct.end());
  // (Entries are told apart by their bits: a -0 is not a +0. Equal floats of other bits sort
  // together; a -0 among +0s may leave a +0 twice in the table, which costs nothing.)
  distinct.erase(std::unique(distinct.begin(), distinct.end(), [](float a, float b) {
                   return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
                 }),
                 distinct.end());
  if (distinct.size() <= static_cast<std::size_t>(kSliceRows) &&
      std::none_of(distinct.begin(), distinct.end(), [](float v) { return std::isnan(v); })) {
    s.table = distinct;
    s.table.resize(kSliceRows, 0.0f);
    s.code.assign(s.val.size() / kSliceRows, 0);
    for (std::size_t cell = 0; cell < s.val.size(); ++cell) {
      const auto at = std::find_if(distinct.begin(), distinct.end(), [&](float d) {
        return std::bit_cast<std::uint32_t>(d) == std::bit_cast<std::uint32_t>(s.val[cell]);
      });
      s.code[cell / kSliceRows] |= static_cast<std::uint64_t>(at - distinct.begin())
                                   << code_bit(static_cast<int>(cell % kSliceRows));
    }
    s.val = {};
  } else if (std::all_of(s.val.begin(), s.val.end(), [](float v) { return round_bf16(v) == v; })) {
    s.val_bf16.reserve(s.val.size());
    for (float v : s.val) s.val_bf16.push_back(bf16_bits(v));
    s.val = {};
  }
  return s;
}

namespace {
// Slice i's rows with plain loops.
void plain_slice(const SlicedMatrix& m, std::size_t i, const float* x, float* y, DType dtype) {
  const SlicedMatrix::Slice& sl = m.slices[i];
  float acc[kSliceRows] = {};
  for (std::int64_t k = 0; k < sl.steps; ++k) {
    const std::size_t step = static_cast<std::size_t>(sl.first + k * sl.stride);
    const std::int64_t cell = static_cast<std::int64_t>(step) * kSliceRows;
    if (sl.lane_cols < 0) {
      const float xc = x[m.column[step]];
      for (int lane = 0; lane < kSliceRows; ++lane)
        if (m.mask[step] >> lane & 1u) acc[lane] += m.weight(cell + lane) * xc;
    } else {
      const std::int32_t* col = &m.lane_col[static_cast<std::size_t>((sl.lane_cols + k) * kSliceRows)];
      for (int lane = 0; lane < kSliceRows; ++lane) acc[lane] += m.weight(cell + lane) * x[col[lane]];
    }
  }
  const std::int32_t* row = &m.row[i * kSliceRows];
  for (int lane = 0; lane < kSliceRows; ++lane)
    if (row[lane] >= 0) y[row[lane]] = round_to(dtype, acc[lane]);
}
}  // namespace

SliceRange whole(const SlicedMatrix& m) {
  return {0, static_cast<std::int32_t>(m.groups.size()), 0, static_cast<std::int32_t>(m.by_lane.size())};
}

void multiply_plain(const SlicedMatrix& m, const SliceRange& part, const float* x, float* y, DType dtype) {
  for (std::int32_t g = part.group_begin; g < part.group_end; ++g)
    for (const std::int32_t i : m.groups[static_cast<std::size_t>(g)].slice)
      if (i >= 0) plain_slice(m, static_cast<std::size_t>(i), x, y, dtype);
  for (std::int32_t j = part.slice_begin; part.cut >= 0 && j < part.slice_end; ++j)
    if (const std::int32_t i = m.groups[static_cast<std::size_t>(part.cut)].slice[j]; i >= 0)
      plain_slice(m, static_cast<std::size_t>(i), x, y, dtype);
  for (std::int32_t j = part.lane_begin; j < part.lane_end; ++j)
    plain_slice(m, static_cast<std::size_t>(m.by_lane[static_cast<std::size_t>(j)]), x, y, dtype);
}

void multiply_plain(const SlicedMatrix& m, const float* x, float* y, DType dtype) {
  multiply_plain(m, whole(m), x, y, dtype);
}

std::vector<std::array<SliceRange, 2>> split_in_two(std::span<const SlicedMatrix* const> matrices,
                                                    std::int64_t min_steps) {
  // The work of a slice of a group (its own steps), of a group (its longest slice's, four at a
  // time) and of a slice by lane (gathers).
  auto slice_work = [](const SlicedMatrix& m, std::int32_t i) {
    return i < 0 ? 0 : m.slices[static_cast<std::size_t>(i)].steps;
  };
  auto group_work = [](const SlicedMatrix::Group& g) { return g.steps * kGroupSlices; };
  auto lane_work = [](const SlicedMatrix& m, std::int32_t j) {
    return m.slices[static_cast<std::size_t>(m.by_lane[static_cast<std::size_t>(j)])].steps * kGatherSteps;
  };
  std::int64_t total = 0;
  for (const SlicedMatrix* m : matrices) {
    for (const SlicedMatrix::Group& g : m->groups) total += group_work(g);
    for (std::size_t j = 0; j < m->by_lane.size(); ++j) total += lane_work(*m, static_cast<std::int32_t>(j));
  }
  const std::int64_t half = total < min_steps ? total + 1 : total / 2;
  std::int64_t done = 0;  // part 0's work so far
  std::vector<std::array<SliceRange, 2>> parts;
  for (const SlicedMatrix* m : matrices) {
    std::array<SliceRange, 2>& p = parts.emplace_back();
    const SliceRange all = whole(*m);
    SliceRange& first = p[0];
    // Part 0 takes whole groups while they fit in its half; the group across the half is cut
    // between its slices, part 0 taking its first slices while they fit.
    while (first.group_end < all.group_end && done < half) {
      const SlicedMatrix::Group& g = m->groups[static_cast<std::size_t>(first.group_end)];
      if (done + group_work(g) <= half || g.slice[1] < 0) {
        done += group_work(g);
        ++first.group_end;
        continue;
      }
      std::int32_t j = 0;
      std::int64_t taken = 0;
      while (j < kGroupSlices && done + taken + slice_work(*m, g.slice[j]) * kGroupSlices / 2 <= half)
        taken += slice_work(*m, g.slice[j++]) * kGroupSlices / 2;  // alone, a slice runs at half the rate
      if (j > 0) {
        first.cut = first.group_end;
        first.slice_begin = 0;
        first.slice_end = j;
        p[1].cut = first.group_end;
        p[1].slice_begin = j;
        p[1].slice_end = kGroupSlices;
        done = half;
      }
      break;
    }
    if (first.group_end == all.group_end && first.cut < 0)
      while (first.lane_end < all.lane_end && done < half) done += lane_work(*m, first.lane_end++);
    // Part 1: the rest (its whole groups after a cut group, which neither part has whole).
    p[1].group_begin = first.cut >= 0 ? first.cut + 1 : first.group_end;
    p[1].group_end = all.group_end;
    p[1].lane_begin = first.lane_end;
    p[1].lane_end = all.lane_end;
  }
  return parts;
}

namespace {

// How a matrix holds its weights (SlicedMatrix: code, val_bf16, val).
enum class Form { kCode, kBf16, kF32 };

// Step `step`'s 16 weights; `table` is the matrix's table, loaded (kCode).
template <Form kForm>
__attribute__((target("avx512f"))) inline __m512 weights(const SlicedMatrix& m, std::int64_t step, __m512 table) {
  if constexpr (kForm == Form::kCode) {
    // The step's word in every 64 bits (a load, no shuffle): lane L holds its half (code_bit), and a
    // shift by 4 · (L / 2) brings its code down (the permutation reads an index's low 4 bits only).
    // (The masked forms with every lane on: GCC 12 warns on the unmasked ones' undefined source.)
    const __m512i word = _mm512_set1_epi64(static_cast<long long>(m.code[static_cast<std::size_t>(step)]));
    const __m512i codes =
        _mm512_maskz_srlv_epi32(0xFFFF, word, _mm512_set_epi32(28, 28, 24, 24, 20, 20, 16, 16, 12, 12, 8, 8, 4, 4, 0, 0));
    return _mm512_maskz_permutexvar_ps(0xFFFF, codes, table);
  } else if constexpr (kForm == Form::kBf16) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m.val_bf16.data() + step * kSliceRows));
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, _mm512_maskz_cvtepu16_epi32(0xFFFF, bits), 16));
  } else {
    return _mm512_loadu_ps(m.val.data() + step * kSliceRows);
  }
}

// Rounds slice i's sums to the dtype and writes them to its rows: 16 rows from first_row on (the
// lanes `lanes`), or where m.row says (first_row -1).
__attribute__((target("avx512f"))) inline void store(const SlicedMatrix& m, std::size_t i, std::int32_t first_row,
                                                      std::uint16_t lanes, __m512 acc, float* y, DType dtype) {
  if (dtype == DType::kBF16) acc = round_bf16_lanes(acc);
  if (first_row >= 0) {
    _mm512_mask_storeu_ps(y + first_row, static_cast<__mmask16>(lanes), acc);
    return;
  }
  alignas(64) float sums[kSliceRows];
  _mm512_store_ps(sums, acc);
  const std::int32_t* row = m.row.data() + i * kSliceRows;
  for (int lane = 0; lane < kSliceRows; ++lane)
    if (row[lane] >= 0) y[row[lane]] = sums[lane];
}

template <Form kForm>
__attribute__((target("avx512f"))) void multiply_avx512(const SlicedMatrix& m, const SliceRange& part, const float* x,
                                                         float* y, DType dtype) {
  const __m512 table = kForm == Form::kCode ? _mm512_loadu_ps(m.table.data()) : _mm512_setzero_ps();
  static_assert(kGroupSlices == 4);
  for (std::int32_t gi = part.group_begin; gi < part.group_end; ++gi) {
    const SlicedMatrix::Group& g = m.groups[static_cast<std::size_t>(gi)];
    // Four chains of adds side by side, one per slice.
    __m512 acc[kGroupSlices] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (std::int64_t k = 0; k < g.steps; ++k) {
      const std::int64_t step = g.first + k * kGroupSlices;
#pragma GCC unroll 4
      for (int j = 0; j < kGroupSlices; ++j) {
        const std::size_t at = static_cast<std::size_t>(step + j);
        acc[j] = _mm512_mask_add_ps(acc[j], static_cast<__mmask16>(m.mask[at]), acc[j],
                                    _mm512_mul_ps(weights<kForm>(m, step + j, table), _mm512_set1_ps(x[m.column[at]])));
      }
    }
    for (int j = 0; j < kGroupSlices; ++j)
      if (g.slice[j] >= 0) store(m, static_cast<std::size_t>(g.slice[j]), g.first_row[j], g.lanes[j], acc[j], y, dtype);
  }
  // A group cut between two parts: its slices [slice_begin, slice_end), one chain each (the padding
  // steps past a slice's own add in no lane, so its own steps give the same sum).
  for (std::int32_t j = part.slice_begin; part.cut >= 0 && j < part.slice_end; ++j) {
    const SlicedMatrix::Group& g = m.groups[static_cast<std::size_t>(part.cut)];
    if (g.slice[j] < 0) continue;
    const std::int64_t steps = m.slices[static_cast<std::size_t>(g.slice[j])].steps;
    __m512 acc = _mm512_setzero_ps();
    for (std::int64_t k = 0; k < steps; ++k) {
      const std::int64_t step = g.first + k * kGroupSlices + j;
      const std::size_t at = static_cast<std::size_t>(step);
      acc = _mm512_mask_add_ps(acc, static_cast<__mmask16>(m.mask[at]), acc,
                               _mm512_mul_ps(weights<kForm>(m, step, table), _mm512_set1_ps(x[m.column[at]])));
    }
    store(m, static_cast<std::size_t>(g.slice[j]), g.first_row[j], g.lanes[j], acc, y, dtype);
  }
  for (std::int32_t j = part.lane_begin; j < part.lane_end; ++j) {
    const std::int32_t i = m.by_lane[static_cast<std::size_t>(j)];
    const SlicedMatrix::Slice& sl = m.slices[static_cast<std::size_t>(i)];
    __m512 acc = _mm512_setzero_ps();
    // (The masked gather with every lane on is the plain one, without GCC 12's warning.)
    const std::int32_t* col = m.lane_col.data() + sl.lane_cols * kSliceRows;
    for (std::int64_t k = 0; k < sl.steps; ++k) {
      const __m512i idx = _mm512_loadu_si512(col + k * kSliceRows);
      const __m512 xs = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), 0xFFFF, idx, x, 4);
      acc = _mm512_add_ps(acc, _mm512_mul_ps(weights<kForm>(m, sl.first + k, table), xs));
    }
    store(m, static_cast<std::size_t>(i), sl.first_row, sl.lanes, acc, y, dtype);
  }
}


}  // namespace

void multiply(const SlicedMatrix& m, const SliceRange& part, const float* x, float* y, DType dtype) {
  if (has_avx512() && !m.code.empty())
    multiply_avx512<Form::kCode>(m, part, x, y, dtype);
  else if (has_avx512() && !m.val_bf16.empty())
    multiply_avx512<Form::kBf16>(m, part, x, y, dtype);
  else if (has_avx512() && !m.val.empty())
    multiply_avx512<Form::kF32>(m, part, x, y, dtype);
  else
    multiply_plain(m, part, x, y, dtype);
}

void multiply(const SlicedMatrix& m, const float* x, float* y, DType dtype) {
  multiply(m, whole(m), x, y, dtype);
}

}  // namespace qgpu::weights::reference
