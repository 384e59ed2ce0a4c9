// A sparse matrix laid out for a one-token product y = W·x that keeps every
// row's own order of operations. Rows with nonzeros are taken 16 at a time
// (a slice, one row per AVX-512 lane, in row order), and each slice is stored
// in the cheaper of two forms:
//  - by column: the slice's columns in ascending order, each with its 16
//    weights and a mask of the lanes whose row has it. A step broadcasts one
//    x[c] and adds w·x[c] in the masked lanes only. Rows of a circuit's unit
//    read the same few channels, so a slice has few columns.
//  - by lane: step k holds every row's k-th nonzero (a gather of 16 x values);
//    shorter rows are padded with a zero weight on column `cols`, where x
//    holds an exact 0.
// Slices by column are then grouped four at a time (those of similar step
// counts together) and their steps interleaved, so that one loop runs four
// independent sums; a slice shorter than its group's longest is padded with
// steps that add in no lane.
// Each output is acc = fl(acc + fl(w·x)) over its row's nonzeros in column
// order, then one rounding to the dtype: exactly what a loop over the
// compressed row computes, for any values (a padded term adds fl(0·0) = +0,
// which leaves acc unchanged, and acc never holds -0). Multiplies and adds stay
// separate: the file is built without contraction into FMA.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "qgpu/weights/model.h"
#include "qgpu/weights/numerics.h"

namespace qgpu::weights::reference {

inline constexpr int kSliceRows = 16;
inline constexpr int kGroupSlices = 4;

// Where lane L's 4-bit weight code sits in a step's 64-bit code word: the even lanes in the low
// 32 bits, the odd ones in the high 32, each at nibble L / 2 of its half.
constexpr int code_bit(int lane) {
  return lane % 2 * 32 + lane / 2 * 4;
}

struct SlicedMatrix {
  struct Slice {
    std::int64_t first = 0;      // its first step (an index into column, mask and val / 16)
    std::int64_t steps = 0;      // its own steps: step k is first + k · stride
    std::int64_t stride = 1;     // kGroupSlices by column (a group's steps interleave), 1 by lane
    std::int64_t lane_cols = -1; // by lane: its first step's offset into lane_col / 16; by column: -1
    std::int32_t first_row = -1; // where its rows are consecutive (the usual case): the first; else -1
    std::uint16_t lanes = 0;     // the lanes with a row
  };
  std::int64_t rows = 0;
  std::int64_t cols = 0;                // x needs cols + 1 floats: x[cols] must be 0 (the padding's column)
  std::vector<Slice> slices;
  struct Group {
    std::int64_t first = 0;  // step k of its j-th slice is first + k · kGroupSlices + j
    std::int64_t steps = 0;  // its longest slice's
    std::int32_t slice[kGroupSlices] = {-1, -1, -1, -1};  // (-1: none; its steps add in no lane)
    std::int32_t first_row[kGroupSlices] = {-1, -1, -1, -1};  // each slice's, and its lanes: where the
    std::uint16_t lanes[kGroupSlices] = {0, 0, 0, 0};         // sums go, without reading the slice
  };
  std::vector<Group> groups;            // the slices by column
  std::vector<std::int32_t> by_lane;    // the slices by lane
  std::vector<std::int32_t> row;        // [slices * 16]: each lane's output row (-1: none)
  std::vector<std::int32_t> column;     // [steps]: by column, the step's column (cols on padding)
  std::vector<std::uint16_t> mask;      // [steps]: by column, the lanes whose row has that column
  // The weights [steps * 16], rounded to the dtype, 0 where absent, in one of three forms (the
  // fewest bytes to stream that hold them exactly):
  std::vector<std::uint64_t> code;      // 4-bit indices into `table`, one 64-bit word a step, where
                                        // the matrix has at most 16 distinct weights (a circuit's
                                        // usually has a handful): lane L's at bit code_bit(L), so
                                        // that a step's word broadcast to every 64 bits puts lane
                                        // L's code in lane L's 32 bits, shifted by 4 · (L / 2)
  std::vector<float> table;             // 16 floats (unused ones 0)
  std::vector<std::uint16_t> val_bf16;  // bf16 bits, where every weight is exact in bf16 (a circuit's are)
  std::vector<float> val;               // else the floats themselves
  float weight(std::int64_t cell) const {
    const auto at = static_cast<std::size_t>(cell);
    if (!code.empty()) return table[(code[at / kSliceRows] >> code_bit(static_cast<int>(at % kSliceRows))) & 15u];
    return val_bf16.empty() ? val[at] : bf16_from_bits(val_bf16[at]);
  }
  std::vector<std::int32_t> lane_col;   // [by-lane steps * 16]: by lane, each lane's column
  std::vector<std::int32_t> nonempty;   // the rows with nonzeros, ascending
};

SlicedMatrix slice(const SparseMatrix& m, DType dtype);

// A part of a matrix's slices: its groups [group_begin, group_end), the slices [slice_begin,
// slice_end) of group `cut` (-1: none; a group cut between two parts), and its slices by lane
// by_lane[lane_begin, lane_end). A part computes its slices' rows and no others.
struct SliceRange {
  std::int32_t group_begin = 0, group_end = 0, lane_begin = 0, lane_end = 0;
  std::int32_t cut = -1, slice_begin = 0, slice_end = 0;
  bool empty() const { return group_begin == group_end && lane_begin == lane_end && cut < 0; }
};
SliceRange whole(const SlicedMatrix& m);

// y[r] = W·x rounded to dtype for every row with nonzeros (of the part's slices); other rows of y are
// not written. AVX-512 where the CPU has it, else multiply_plain.
void multiply(const SlicedMatrix& m, const float* x, float* y, DType dtype);
void multiply(const SlicedMatrix& m, const SliceRange& part, const float* x, float* y, DType dtype);
// The same with plain loops, one lane after another (the tests hold the two equal).
void multiply_plain(const SlicedMatrix& m, const float* x, float* y, DType dtype);
void multiply_plain(const SlicedMatrix& m, const SliceRange& part, const float* x, float* y, DType dtype);

// Products that two threads share: the matrices' slices cut into two parts of about equal work
// (steps, a gathered one counting as several), in order: part 0 the first matrices' slices, part 1
// the rest, a group cut between its slices where the half falls inside it; [k][0] and [k][1] are
// matrix k's share of each. Where the products are too small to be worth a second thread (below
// min_steps), part 1 is empty.
std::vector<std::array<SliceRange, 2>> split_in_two(std::span<const SlicedMatrix* const> matrices,
                                                    std::int64_t min_steps);

}  // namespace qgpu::weights::reference
