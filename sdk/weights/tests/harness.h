// Shared test helpers: Qwen3.5-2B shapes, compiling a circuit, and running
// tokens through the reference layer math in fp32 and bf16.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "qgpu/weights/compile.h"
#include "qgpu/weights/primitives.h"
#include "qgpu/weights/reference.h"

namespace qgpu::weights::testing {

inline sdk::LayerShapes qwen2b_shapes() { return qwen35_2b_shapes(); }

inline Target qwen2b_target() {
  Target t;
  t.shapes = qwen2b_shapes();
  return t;
}

#define ASSERT_OK(expr)                                  \
  do {                                                   \
    auto qgpu_s_ = (expr);                               \
    ASSERT_TRUE(qgpu_s_.is_ok()) << qgpu_s_.to_string(); \
  } while (false)

template <typename T>
T must(sdk::Expected<T> e) {
  EXPECT_TRUE(e.has_value()) << e.status().to_string();
  if (!e.has_value()) throw std::runtime_error(e.status().to_string());
  return std::move(e).value();
}

// Operand values: uniform random with ~30 % special values (NUMERICS.md §5's mix).
inline std::uint32_t operand(std::mt19937_64& rng) {
  static const std::uint32_t kSpecial[] = {0,          1,          0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0x00FF00FF,
                                           0xFF00FF00, 0x0000FFFF, 0xFFFF0000, 0x01010101, 0xFEFEFEFF, 0x12345678,
                                           0x80000001, 0x7FFFFFFE, 0x000000FF, 0x00000100};
  if (rng() % 10 < 3) return kSpecial[rng() % (sizeof(kSpecial) / sizeof(kSpecial[0]))];
  return static_cast<std::uint32_t>(rng());
}

// Every bit channel of every field is exactly +u or -u, and the constant
// and pad channels are untouched.
inline bool residual_exact(const Circuit& c, const Allocation& a, const std::vector<float>& x) {
  const float u = static_cast<float>(kResidualUnit);
  if (x[a.const_hi] != static_cast<float>(kConstHi) * u) return false;
  for (std::size_t i = 0; i < a.pad_channel.size(); ++i)
    if (x[a.pad_channel[i]] != static_cast<float>(a.pad_value[i]) * u) return false;
  for (std::size_t f = 0; f < c.fields().size(); ++f) {
    if (c.fields()[f].alias_of >= 0) continue;
    Word w;
    for (int b = 0; b < c.fields()[f].width; ++b) w.push_back(Bit{static_cast<int>(f), b, false});
    bool exact = true;
    read_word(a, x, w, &exact);
    if (!exact) return false;
  }
  for (int ch = a.channels_used; ch < static_cast<int>(x.size()); ++ch)
    if (x[ch] != 0) return false;
  return true;
}

inline const DType kBothDtypes[] = {DType::kF32, DType::kBF16};

}  // namespace qgpu::weights::testing
