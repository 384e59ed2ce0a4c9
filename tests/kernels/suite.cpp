// The kernel suite's table. Every reference below is written from the CUDA semantics of its
// kernel, sequentially, and where it is cheap by a different method than the kernel uses
// (std::gcd, a sieve, 64-bit arithmetic, closed forms), so that a shared misreading of the
// kernel is unlikely. Atomic and reduction results are order-independent by construction.
#include "suite.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <stdexcept>

namespace qgpu::kernels {
namespace {

constexpr std::int32_t kIntMin = INT32_MIN;
constexpr std::int32_t kIntMax = INT32_MAX;

// Two's-complement wrap of a wider value to int32 (well defined for any int64).
std::int32_t wrap(std::int64_t v) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
}
std::int32_t wrapu(std::uint64_t v) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
}
std::uint32_t u(std::int32_t v) {
  return static_cast<std::uint32_t>(v);
}
std::int32_t s(std::uint32_t v) {
  return static_cast<std::int32_t>(v);
}

// Deterministic pseudo-random words in [lo, hi] (a fixed LCG, so every platform agrees).
Words rnd(int n, std::uint32_t seed, std::int32_t lo, std::int32_t hi) {
  Words w;
  std::uint64_t state = seed * 2654435761u + 12345u;
  const std::uint64_t span = static_cast<std::uint64_t>(static_cast<std::int64_t>(hi) - lo) + 1;
  for (int i = 0; i < n; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    w.push_back(static_cast<std::int32_t>(lo + static_cast<std::int64_t>((state >> 33) % span)));
  }
  return w;
}
Words fill(int n, std::int32_t v) {
  return Words(static_cast<std::size_t>(n), v);
}
Words iota(int n, std::int32_t start = 0) {
  Words w(static_cast<std::size_t>(n));
  std::iota(w.begin(), w.end(), start);
  return w;
}

Arg arr(std::string name, Words values) {
  return Arg{std::move(name), true, std::move(values), ""};
}
Arg zeros(std::string name, int n) {
  return Arg{std::move(name), true, fill(n, 0), "zeros(" + std::to_string(n) + ")"};
}
Arg val(std::string name, std::int32_t v) {
  return Arg{std::move(name), false, {v}, ""};
}
Arg hex(std::string name, std::int32_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << u(v);
  return Arg{std::move(name), false, {v}, os.str()};
}

// Runs f(i) for every global thread index i of the launch, in order.
template <class F>
void each_thread(const Launch& l, F f) {
  for (int i = 0; i < l.threads(); ++i) f(i);
}

Case make(std::string name, std::string file, std::string kernel, int grid, int block, std::vector<Arg> args,
          Reference ref) {
  Case c;
  c.name = std::move(name);
  c.file = std::move(file);
  c.kernel = std::move(kernel);
  c.launch = Launch{grid, block, std::move(args)};
  c.reference = std::move(ref);
  return c;
}
// A kernel whose file name is its entry point name.
Case make(std::string kernel, int grid, int block, std::vector<Arg> args, Reference ref) {
  return make(kernel, kernel + ".cu", kernel, grid, block, std::move(args), std::move(ref));
}
Case make_named(std::string name, std::string kernel, int grid, int block, std::vector<Arg> args, Reference ref) {
  return make(std::move(name), kernel + ".cu", kernel, grid, block, std::move(args), std::move(ref));
}
// A case at the circuit's full sizes (Case::full_size); a 2-D launch when the y extents are not 1.
Case full(Case c, int grid_y = 1, int block_y = 1) {
  c.full_size = true;
  c.launch.grid_y = grid_y;
  c.launch.block_y = block_y;
  return c;
}
Case reject(std::string name, std::string file, std::string kernel, int grid, int block, std::vector<Arg> args,
            std::string error_regex) {
  Case c = make(std::move(name), std::move(file), std::move(kernel), grid, block, std::move(args), nullptr);
  c.expect_error = std::move(error_regex);
  return c;
}

// ---------------------------------------------------------------------------------------------
// References, one per kernel (some shared by several launches).

void ref_vec_add(Launch& l) {
  auto &a = l.array("a"), &b = l.array("b"), &c = l.array("c");
  const int n = l.scalar("n");
  each_thread(l, [&](int i) {
    if (i < n) c.at(i) = wrap(std::int64_t{a.at(i)} + b.at(i));
  });
}

void ref_saxpy(Launch& l) {
  auto &x = l.array("x"), &y = l.array("y");
  const std::int64_t a = l.scalar("a");
  for (int i = 0; i < std::min(l.scalar("n"), l.threads()); ++i) y.at(i) = wrap(a * x.at(i) + y.at(i));
}

void ref_grid_stride(Launch& l) {
  // Every index below n is covered exactly once whatever the launch shape.
  auto &in = l.array("in"), &out = l.array("out");
  for (int i = 0; i < l.scalar("n"); ++i) out.at(i) = wrap(std::int64_t{in.at(i)} * 3 - 1);
}

void ref_dot(Launch& l) {
  auto &a = l.array("a"), &b = l.array("b"), &r = l.array("result");
  const int n = l.scalar("n");
  const std::int64_t dot = std::inner_product(a.begin(), a.begin() + n, b.begin(), std::int64_t{0});
  r.at(0) = wrap(r.at(0) + dot);
}

void ref_fill_poly(Launch& l) {
  auto& out = l.array("out");
  each_thread(l, [&](int i) { out.at(i) = wrap(std::int64_t{i} * (i - 5)); });
}

void ref_affine(Launch& l) {
  auto& out = l.array("out");
  const std::int64_t a = l.scalar("a"), b = l.scalar("b"), c = l.scalar("c");
  each_thread(l, [&](int i) {
    if (i < l.scalar("n")) out.at(i) = wrap(a * i * i + b * i + c);
  });
}

void ref_reverse(Launch& l) {
  auto &in = l.array("in"), &out = l.array("out");
  const int n = l.scalar("n");
  std::reverse_copy(in.begin(), in.begin() + n, out.begin());
}

void ref_mad3(Launch& l) {
  auto &a = l.array("a"), &b = l.array("b"), &c = l.array("c");
  for (int i = 0; i < l.scalar("n"); ++i) c.at(i) = wrap(std::int64_t{a.at(i)} * b.at(i) + c.at(i));
}

void ref_select(Launch& l) {
  auto &cond = l.array("cond"), &a = l.array("a"), &b = l.array("b"), &out = l.array("out");
  for (int i = 0; i < l.scalar("n"); ++i) out.at(i) = cond.at(i) != 0 ? a.at(i) : b.at(i);
}

void ref_inplace(Launch& l) {
  auto& a = l.array("a");
  const std::int64_t k = l.scalar("k");
  for (int i = 0; i < l.scalar("n"); ++i) {
    const std::int64_t v = a.at(i);
    // Arithmetic shift right by one is floor division by two.
    const std::int64_t half = v >= 0 ? v / 2 : -((-v + 1) / 2);
    a.at(i) = wrap(v * k + half);
  }
}

void ref_square(Launch& l) {
  auto& a = l.array("a");
  for (int i = 0; i < l.scalar("n"); ++i) a.at(i) = wrap(std::int64_t{a.at(i)} * a.at(i));
}
void ref_negate(Launch& l) {
  auto& a = l.array("a");
  for (int i = 0; i < l.scalar("n"); ++i) a.at(i) = wrap(-std::int64_t{a.at(i)});
}

void ref_div_rem_signed(Launch& l) {
  auto &a = l.array("a"), &b = l.array("b"), &q = l.array("q"), &r = l.array("r");
  for (int i = 0; i < l.scalar("n"); ++i) {
    // In 64 bits: quotient truncated toward zero, remainder = a - q*b.
    const std::int64_t x = a.at(i), y = b.at(i);
    const std::int64_t qq = x / y;
    q.at(i) = wrap(qq);
    r.at(i) = wrap(x - qq * y);
  }
}

void ref_div_rem_unsigned(Launch& l) {
  auto &a = l.array("a"), &b = l.array("b"), &q = l.array("q"), &r = l.array("r");
  for (int i = 0; i < l.scalar("n"); ++i) {
    const std::uint64_t x = u(a.at(i)), y = u(b.at(i));
    q.at(i) = wrapu(x / y);
    r.at(i) = wrapu(x - (x / y) * y);
  }
}

std::int64_t trunc_div(std::int64_t x, std::int64_t y) {
  // Division rounding toward zero, from floor division of magnitudes.
  const bool neg = (x < 0) != (y < 0);
  const std::int64_t q = std::llabs(x) / std::llabs(y);
  return neg ? -q : q;
}

void ref_div_by_const(Launch& l) {
  auto &x = l.array("x"), &out = l.array("out");
  for (int i = 0; i < l.scalar("n"); ++i) {
    const std::int64_t v = x.at(i);
    out.at(3 * i + 0) = wrap(trunc_div(v, 7));
    out.at(3 * i + 1) = wrap(v - trunc_div(v, 7) * 7);
    out.at(3 * i + 2) = wrap(trunc_div(v, -3));
  }
}

void ref_div_by_const_unsigned(Launch& l) {
  auto &x = l.array("x"), &out = l.array("out");
  for (int i = 0; i < l.scalar("n"); ++i) {
    const std::uint64_t uv = u(x.at(i));
    out.at(3 * i + 0) = wrap(trunc_div(x.at(i), 10));
    out.at(3 * i + 1) = wrapu(uv / 10);
    out.at(3 * i + 2) = wrapu(uv - (uv / 3) * 3);
  }
}

void ref_mul_hi(Launch& l) {
  auto &a = l.array("a"), &b = l.array("b"), &hi = l.array("hi"), &uhi = l.array("uhi");
  for (int i = 0; i < l.scalar("n"); ++i) {
    const std::int64_t p = std::int64_t{a.at(i)} * b.at(i);
    hi.at(i) = wrap(p >> 32);  // arithmetic shift of a 64-bit product: floor(p / 2^32)
    uhi.at(i) = wrapu((std::uint64_t{u(a.at(i))} * u(b.at(i))) >> 32);
  }
}

void ref_mul_wrap(Launch& l) {
  auto &a = l.array("a"), &b = l.array("b"), &prod = l.array("prod"), &mad = l.array("mad");
  for (int i = 0; i < l.scalar("n"); ++i) {
    const std::uint64_t p = std::uint64_t{u(a.at(i))} * u(b.at(i));
    prod.at(i) = wrapu(p % (1ull << 32));
    mad.at(i) = wrapu(p + 0x9e3779b9ull);
  }
}

// Shift semantics spelled out bit by bit rather than with the C++ shift operators.
std::uint32_t bits_shl(std::uint32_t x, unsigned k) {
  if (k >= 32) return 0;
  std::uint64_t v = x;
  for (unsigned j = 0; j < k; ++j) v *= 2;
  return static_cast<std::uint32_t>(v);
}
std::uint32_t bits_shr(std::uint32_t x, unsigned k) {
  if (k >= 32) return 0;
  for (unsigned j = 0; j < k; ++j) x /= 2;
  return x;
}
std::int32_t bits_sar(std::int32_t x, unsigned k) {
  std::int64_t v = x;
  for (unsigned j = 0; j < std::min(k, 32u); ++j) v = (v - (v < 0 && (v % 2) != 0 ? 1 : 0)) / 2;  // floor(v / 2)
  return static_cast<std::int32_t>(v);
}

void ref_shift_right(Launch& l) {
  auto &x = l.array("x"), &sh = l.array("s");
  auto &sar = l.array("sar"), &shr = l.array("shr"), &shl = l.array("shl");
  for (int i = 0; i < l.scalar("n"); ++i) {
    const unsigned k = u(sh.at(i));
    sar.at(i) = bits_sar(x.at(i), k);
    shr.at(i) = s(bits_shr(u(x.at(i)), k));
    shl.at(i) = s(bits_shl(u(x.at(i)), k));
  }
}

void ref_shift_wide(Launch& l) {
  auto &x = l.array("x"), &sh = l.array("s"), &out = l.array("out");
  for (int i = 0; i < l.scalar("n"); ++i) {
    const unsigned k = u(sh.at(i));
    out.at(3 * i + 0) = s(bits_shl(u(x.at(i)), k));
    out.at(3 * i + 1) = s(bits_shr(u(x.at(i)), k));
    out.at(3 * i + 2) = bits_sar(x.at(i), k);
  }
}

void ref_compare(Launch& l) {
  auto &a = l.array("a"), &b = l.array("b"), &out = l.array("out");
  for (int i = 0; i < l.scalar("n"); ++i) {
    // Unsigned order = signed order after flipping the sign bit.
    const std::int64_t x = a.at(i), y = b.at(i);
    const std::int64_t ux = x < 0 ? x + (1ll << 32) : x, uy = y < 0 ? y + (1ll << 32) : y;
    out.at(i) = (x < y ? 1 : 0) + (ux < uy ? 2 : 0) + (x >= y ? 4 : 0) + (ux >= uy ? 8 : 0) + (x == y ? 16 : 0);
  }
}

void ref_min_max(Launch& l) {
  auto &a = l.array("a"), &b = l.array("b"), &out = l.array("out");
  for (int i = 0; i < l.scalar("n"); ++i) {
    // Unsigned order of int32 words: compare with the sign bit flipped.
    const std::int64_t x = a.at(i), y = b.at(i);
    const std::int64_t ux = x < 0 ? x + (1ll << 32) : x, uy = y < 0 ? y + (1ll << 32) : y;
    out.at(4 * i + 0) = static_cast<std::int32_t>(x < y ? x : y);
    out.at(4 * i + 1) = static_cast<std::int32_t>(x < y ? y : x);
    out.at(4 * i + 2) = wrap(ux < uy ? ux : uy);
    out.at(4 * i + 3) = wrap(ux < uy ? uy : ux);
  }
}

void ref_abs_neg_not(Launch& l) {
  auto &x = l.array("x"), &out = l.array("out");
  for (int i = 0; i < l.scalar("n"); ++i) {
    const std::int64_t v = x.at(i);
    out.at(3 * i + 0) = wrap(v < 0 ? -v : v);
    out.at(3 * i + 1) = wrap(-v);
    out.at(3 * i + 2) = wrap(-v - 1);
  }
}

void ref_int_min_edges(Launch& l) {
  // Values worked out by hand for x = {INT_MIN, -1}.
  auto& out = l.array("out");
  const Words expect = {-1, 1, 1073741824, 1, -2, kIntMax, kIntMin, 0, -1, -1, kIntMax, 1, 1, 1, 0, kIntMin};
  if (l.array("x") != Words{kIntMin, -1}) throw std::logic_error("int_min_edges: reference assumes x = {INT_MIN, -1}");
  out = expect;
}

std::int32_t brev_loop(std::uint32_t v) {
  std::uint32_t r = 0;
  for (int b = 0; b < 32; ++b)
    if (v & (1u << b)) r |= 1u << (31 - b);
  return s(r);
}

void ref_bit_counts(Launch& l) {
  auto &x = l.array("x"), &out = l.array("out");
  for (int i = 0; i < l.scalar("n"); ++i) {
    const std::uint32_t v = u(x.at(i));
    out.at(4 * i + 0) = std::popcount(v);
    out.at(4 * i + 1) = std::countl_zero(v);
    out.at(4 * i + 2) = brev_loop(v);
    out.at(4 * i + 3) = v == 0 ? 0 : std::countr_zero(v) + 1;
  }
}

void ref_bit_logic(Launch& l) {
  auto &a = l.array("a"), &b = l.array("b"), &out = l.array("out");
  for (int i = 0; i < l.scalar("n"); ++i) {
    const std::uint32_t x = u(a.at(i)), y = u(b.at(i));
    const std::uint32_t bit = std::uint32_t{1} << ((i * 5) % 32);
    // (x & y) ^ (x | ~y): per bit, the truth table gives NOT x OR y... checked per bit below.
    std::uint32_t r0 = 0;
    for (int k = 0; k < 32; ++k) {
      const bool xb = (x >> k) & 1, yb = (y >> k) & 1;
      if ((xb && yb) != (xb || !yb)) r0 |= 1u << k;
    }
    out.at(4 * i + 0) = s(r0);
    out.at(4 * i + 1) = s((x ^ y) & 0x0ff00ff0u);
    out.at(4 * i + 2) = s(x | bit);
    out.at(4 * i + 3) = (x & bit) ? 1 : 0;
  }
}

void ref_select_chain(Launch& l) {
  auto &x = l.array("x"), &cls = l.array("cls");
  for (int i = 0; i < l.scalar("n"); ++i) {
    const int v = x.at(i);
    int c = 50;
    if (v < 100) c = 40;
    if (v == 0) c = 30;
    if (v < 0) c = 20;
    if (v < -100) c = 10;
    cls.at(i) = c;
  }
}

void ref_clamp(Launch& l) {
  auto& a = l.array("a");
  for (int i = 0; i < l.scalar("n"); ++i) a.at(i) = std::clamp(a.at(i), l.scalar("lo"), l.scalar("hi"));
}

void ref_byte_fields(Launch& l) {
  auto &x = l.array("x"), &out = l.array("out");
  auto field = [](std::uint32_t v, int lo, int width) {  // signed bit field [lo, lo+width)
    std::int64_t f = (v >> lo) & ((1u << width) - 1);
    if (f >= (1ll << (width - 1))) f -= 1ll << width;
    return static_cast<std::int32_t>(f);
  };
  for (int i = 0; i < l.scalar("n"); ++i) {
    const std::uint32_t v = u(x.at(i));
    out.at(4 * i + 0) = static_cast<std::int32_t>((v / 256) % 256);
    out.at(4 * i + 1) = field(v, 0, 8);
    out.at(4 * i + 2) = field(v, 12, 16);
    out.at(4 * i + 3) = field(v, 6, 6);
  }
}

void ref_divergent_if(Launch& l) {
  auto &a = l.array("a"), &odd = l.array("odd_count");
  for (int i = 0; i < l.scalar("n"); ++i) {
    const std::int64_t v = a.at(i);
    if (v % 2 != 0) {
      a.at(i) = wrap(3 * v + 1);
      odd.at(0) += 1;
    } else {
      a.at(i) = wrap(v / 2);
    }
  }
}

void ref_divergent_loop(Launch& l) {
  auto &count = l.array("count"), &out = l.array("out");
  for (int i = 0; i < l.scalar("n"); ++i) {
    const std::int64_t c = std::max(count.at(i), 0);
    // sum_{k<c} (k^2 + i) in closed form.
    out.at(i) = wrap((c - 1) * c * (2 * c - 1) / 6 + c * i);
  }
}

void ref_collatz(Launch& l) {
  auto &start = l.array("start"), &steps = l.array("steps");
  for (int i = 0; i < l.scalar("n"); ++i) {
    std::uint64_t v = u(start.at(i));
    int k = 0;
    for (; v != 1 && k < 200; ++k) {
      v = v % 2 ? 3 * v + 1 : v / 2;
      if (v >= (1ull << 32)) throw std::logic_error("collatz reference: value leaves 32 bits");
    }
    steps.at(i) = k;
  }
}

void ref_nested(Launch& l) {
  auto& out = l.array("out");
  for (int i = 0; i < l.scalar("n"); ++i) {
    std::int64_t acc = 0;
    for (int k = 0; k < i + 2; ++k)  // the same pairs (j <= i, j <= k < i + 2), k outermost
      for (int j = 0; j <= std::min(i, k); ++j) acc += (j | k) - (j & k) - 1;  // j ^ k = (j | k) - (j & k)
    out.at(i) = wrap(acc);
  }
}

void ref_early_return(Launch& l) {
  auto &a = l.array("a"), &out = l.array("out");
  for (int i = 0; i < l.scalar("n"); ++i) {
    const int v = a.at(i);
    if (v < 0)
      out.at(i) = -1;
    else if (v > 100)
      out.at(i) = 100;
    else if (v > 0)
      out.at(i) = 2 * v + 1;
  }
}

void ref_gcd(Launch& l) {
  auto &a = l.array("a"), &b = l.array("b"), &g = l.array("g");
  for (int i = 0; i < l.scalar("n"); ++i) g.at(i) = std::gcd(a.at(i), b.at(i));
}

void ref_search(Launch& l) {
  auto &data = l.array("data"), &keys = l.array("keys"), &found = l.array("found");
  const int len = l.scalar("len");
  for (int i = 0; i < l.scalar("n"); ++i) {
    const auto it = std::find(data.begin(), data.begin() + len, keys.at(i));
    found.at(i) = it == data.begin() + len ? -1 : static_cast<int>(it - data.begin());
  }
}

void ref_switch(Launch& l) {
  auto &op = l.array("op"), &a = l.array("a"), &b = l.array("b"), &out = l.array("out");
  for (int i = 0; i < l.scalar("n"); ++i) {
    const std::int64_t x = a.at(i), y = b.at(i);
    std::int64_t r = -12345;
    if (op.at(i) == 0) r = x + y;
    if (op.at(i) == 1) r = x - y;
    if (op.at(i) == 2) r = x * y;
    if (op.at(i) == 3) r = u(a.at(i)) & u(b.at(i));
    if (op.at(i) == 4) r = u(a.at(i)) | u(b.at(i));
    if (op.at(i) == 5) r = u(a.at(i)) ^ u(b.at(i));
    if (op.at(i) == 6) r = bits_shl(u(a.at(i)), u(b.at(i)) % 32);
    out.at(i) = wrap(r);
  }
}

void ref_isqrt(Launch& l) {
  auto &x = l.array("x"), &root = l.array("root");
  for (int i = 0; i < l.scalar("n"); ++i) {
    const std::uint64_t v = u(x.at(i));
    std::uint64_t r = static_cast<std::uint64_t>(std::sqrt(static_cast<double>(v)));
    while (r * r > v) --r;
    while ((r + 1) * (r + 1) <= v) ++r;
    root.at(i) = wrapu(r);
  }
}

void ref_is_prime(Launch& l) {
  auto &x = l.array("x"), &prime = l.array("prime");
  constexpr int kLimit = 10000;
  std::vector<bool> composite(kLimit + 1, false);  // sieve of Eratosthenes
  composite[0] = composite[1] = true;
  for (int p = 2; p * p <= kLimit; ++p)
    if (!composite[p])
      for (int m = p * p; m <= kLimit; m += p) composite[m] = true;
  for (int i = 0; i < l.scalar("n"); ++i) {
    const int v = x.at(i);
    if (v > kLimit) throw std::logic_error("is_prime reference: input above the sieve");
    prime.at(i) = v >= 0 && !composite[v] ? 1 : 0;
  }
}

void ref_fibonacci(Launch& l) {
  auto &nth = l.array("nth"), &fib = l.array("fib");
  std::vector<std::uint64_t> f = {0, 1};  // F(k) mod 2^32
  for (int k = 2; k <= 200; ++k) f.push_back((f[k - 1] + f[k - 2]) % (1ull << 32));
  for (int i = 0; i < l.scalar("n"); ++i) fib.at(i) = wrapu(f.at(std::max(nth.at(i), 0)));
}

void ref_pow_mod(Launch& l) {
  auto &base = l.array("base"), &expo = l.array("expo"), &out = l.array("out");
  const std::int64_t m = l.scalar("m");
  for (int i = 0; i < l.scalar("n"); ++i) {
    std::int64_t r = 1 % m;  // plain repeated multiplication (inputs are non-negative)
    for (int k = 0; k < expo.at(i); ++k) r = r * base.at(i) % m;
    out.at(i) = static_cast<std::int32_t>(r);
  }
}

void ref_serial_scan(Launch& l) {
  auto& a = l.array("a");
  const int n = l.scalar("n");
  std::int64_t acc = 0;
  for (int i = 0; i < n; ++i) a.at(i) = wrap(acc += a.at(i));
}

void ref_horner(Launch& l) {
  auto &coef = l.array("coef"), &x = l.array("x"), &y = l.array("y");
  for (int i = 0; i < l.scalar("n"); ++i) {
    std::int64_t acc = 0, p = 1;  // sum of coef[k] * x^k, power by power
    for (int k = 0; k <= l.scalar("degree"); ++k, p *= x.at(i)) acc += coef.at(k) * p;
    y.at(i) = wrap(acc);
  }
}

void ref_matvec(Launch& l) {
  auto &A = l.array("A"), &x = l.array("x"), &y = l.array("y");
  const int rows = l.scalar("rows"), cols = l.scalar("cols");
  for (int r = 0; r < rows; ++r) {
    std::int64_t acc = 0;
    for (int c = 0; c < cols; ++c) acc += std::int64_t{A.at(r * cols + c)} * x.at(c);
    y.at(r) = wrap(acc);
  }
}

void ref_matmul(Launch& l) {
  auto &A = l.array("A"), &B = l.array("B"), &C = l.array("C");
  const int n = l.scalar("n");
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < n; ++c) {
      std::int64_t acc = 0;
      for (int k = 0; k < n; ++k) acc += std::int64_t{A.at(r * n + k)} * B.at(k * n + c);
      C.at(r * n + c) = wrap(acc);
    }
}

void ref_block_ids(Launch& l) {
  auto& out = l.array("out");
  for (int b = 0; b < l.grid; ++b)
    for (int t = 0; t < l.block; ++t) out.at(b * l.block + t) = b * 1000000 + t * 10000 + l.block * 100 + l.grid;
}

void ref_max_threads(Launch& l) {
  l.array("total").at(0) += l.threads();
  for (int b = 0; b < l.grid; ++b) {
    l.array("per_block").at(b) += l.block;
    for (int t = 0; t < l.block; ++t) l.array("lane_sum").at(b) += t % 4;
  }
}

void ref_histogram(Launch& l) {
  auto &data = l.array("data"), &bins = l.array("bins");
  for (int i = 0; i < l.scalar("n"); ++i) bins.at(u(data.at(i)) % 8) += 1;
}

void ref_histogram_shared(Launch& l) {
  // Only elements covered by a thread count (no grid-stride loop here).
  auto &data = l.array("data"), &bins = l.array("bins");
  for (int i = 0; i < std::min(l.scalar("n"), l.threads()); ++i) bins.at(u(data.at(i)) % 8) += 1;
}

void ref_atomic_min_max(Launch& l) {
  auto& x = l.array("x");
  const int n = l.scalar("n");
  Words v(x.begin(), x.begin() + n);
  std::vector<std::uint32_t> uv;
  for (auto w : v) uv.push_back(u(w));
  auto& smin = l.array("smin").at(0);
  auto& smax = l.array("smax").at(0);
  auto& umn = l.array("umn").at(0);
  auto& umx = l.array("umx").at(0);
  smin = std::min(smin, *std::min_element(v.begin(), v.end()));
  smax = std::max(smax, *std::max_element(v.begin(), v.end()));
  umn = s(std::min(u(umn), *std::min_element(uv.begin(), uv.end())));
  umx = s(std::max(u(umx), *std::max_element(uv.begin(), uv.end())));
}

void ref_atomic_bitwise(Launch& l) {
  auto &x = l.array("x"), &acc = l.array("acc");
  for (int i = 0; i < l.scalar("n"); ++i) {
    acc.at(0) = s(u(acc.at(0)) & u(x.at(i)));
    acc.at(1) = s(u(acc.at(1)) | u(x.at(i)));
    acc.at(2) = s(u(acc.at(2)) ^ u(x.at(i)));
  }
}

void ref_atomic_sub(Launch& l) {
  auto &cost = l.array("cost"), &budget = l.array("budget");
  for (int i = 0; i < l.scalar("n"); ++i) budget.at(i % 2) = wrap(std::int64_t{budget.at(i % 2)} - cost.at(i));
}

void ref_exch_claim(Launch& l) {
  auto &key = l.array("key"), &flag = l.array("flag"), &winners = l.array("winners"), &members = l.array("members");
  std::map<int, int> count;
  for (int i = 0; i < l.scalar("n"); ++i) count[key.at(i) & 3] += 1;
  for (auto [k, c] : count) {
    if (flag.at(k) == 0) winners.at(k) += 1;  // only a bucket whose flag starts at 0 has a winner
    flag.at(k) = 1;
    members.at(k) += c;
  }
}

void ref_cas_mul(Launch& l) {
  auto &x = l.array("x"), &prod = l.array("prod");
  std::uint64_t p[2] = {u(prod.at(0)), u(prod.at(1))};
  for (int i = 0; i < l.scalar("n"); ++i) p[i % 2] = (p[i % 2] * u(x.at(i))) % (1ull << 32);
  prod.at(0) = wrapu(p[0]);
  prod.at(1) = wrapu(p[1]);
}

void ref_cas_set(Launch& l) {
  auto &key = l.array("key"), &slot = l.array("slot"), &inserted = l.array("inserted");
  std::set<int> keys(key.begin(), key.begin() + l.scalar("n"));
  for (int k : keys) {
    if (slot.at(k) == -1) {
      slot.at(k) = k;
      inserted.at(0) += 1;
    }
  }
}

void ref_inc_dec(Launch& l) {
  auto& c = l.array("ctr");
  const int n = l.scalar("n");
  // atomicInc(p, lim): old >= lim ? 0 : old + 1; atomicDec(p, lim): old == 0 || old > lim ? lim : old - 1.
  std::uint32_t c0 = u(c.at(0)), c1 = u(c.at(1)), c2 = u(c.at(2));
  for (int i = 0; i < n; ++i) {
    c0 = c0 >= 5 ? 0 : c0 + 1;
    c1 = (c1 == 0 || c1 > 7) ? 7 : c1 - 1;
    c2 = c2 >= 0xffffffffu ? 0 : c2 + 1;
  }
  c = {s(c0), s(c1), s(c2)};
}

void ref_old_values(Launch& l) {
  const std::int64_t n = l.scalar("n");
  const std::int64_t start = l.array("counter").at(0);
  l.array("counter").at(0) = wrap(start + n);
  l.array("old_sum").at(0) = wrap(l.array("old_sum").at(0) + n * start + n * (n - 1) / 2);
  if (start <= n - 1 && n - 1 < start + n) l.array("last_seen").at(0) = 1;
}

// Shuffles: every 4 consecutive threads form one segment.
void ref_warp_reduce_down(Launch& l) {
  auto &x = l.array("x"), &sums = l.array("sums");
  for (int b = 0; b < l.grid; ++b) {
    std::int64_t acc = 0;
    for (int t = 0; t < 4; ++t) acc += x.at(b * 4 + t);
    sums.at(b) = wrap(acc);
  }
}

// A CUDA warp of 32 threads (docs/ISA.md §8): sums[0] = the sum of x[0..31] (std::accumulate).
void ref_warp_sum32(Launch& l) {
  auto &x = l.array("x"), &sums = l.array("sums");
  sums.at(0) = wrap(std::accumulate(x.begin(), x.begin() + 32, std::int64_t{0}));
}

// __shfl_xor_sync(0xff, v, 4, 8) in an 8-thread block: the two halves swap.
void ref_swap8(Launch& l) {
  auto &x = l.array("x"), &out = l.array("out");
  for (int t = 0; t < 8; ++t) out.at(t) = x.at(t < 4 ? t + 4 : t - 4);
}

void ref_allreduce_xor(Launch& l) {
  auto &x = l.array("x"), &sum = l.array("sum"), &mx = l.array("mx");
  for (int g = 0; g < l.threads(); g += 4) {
    const auto first = x.begin() + g;
    const std::int64_t total = std::accumulate(first, first + 4, std::int64_t{0});
    const std::int32_t m = *std::max_element(first, first + 4);
    for (int t = 0; t < 4; ++t) {
      sum.at(g + t) = wrap(total);
      mx.at(g + t) = m;
    }
  }
}

void ref_scan4(Launch& l) {
  auto& x = l.array("x");
  for (int g = 0; g < l.threads(); g += 4) std::partial_sum(x.begin() + g, x.begin() + g + 4, x.begin() + g);
}

void ref_shfl_idx(Launch& l) {
  const Words x = l.array("x");
  auto &bcast = l.array("bcast"), &rot = l.array("rot");
  for (int i = 0; i < l.threads(); ++i) {
    const int g = i - i % 4;
    bcast.at(i) = x.at(g + 2);
    rot.at(i) = x.at(g + (i % 4 + 1) % 4);
  }
}

void ref_shfl_edge(Launch& l) {
  const Words x = l.array("x");
  auto &down3 = l.array("down3"), &up2 = l.array("up2");
  for (int i = 0; i < l.threads(); ++i) {
    const int lane = i % 4;
    down3.at(i) = lane + 3 < 4 ? x.at(i + 3) : x.at(i);
    up2.at(i) = lane >= 2 ? x.at(i - 2) : x.at(i);
  }
}

void ref_block_sums(Launch& l) {
  auto &x = l.array("x"), &sums = l.array("block_sums");
  for (int b = 0; b < l.grid; ++b)
    sums.at(b) = wrap(std::accumulate(x.begin() + b * l.block, x.begin() + (b + 1) * l.block, std::int64_t{0}));
}

void ref_block_scan(Launch& l) {
  auto& x = l.array("x");
  for (int b = 0; b < l.grid; ++b)
    std::partial_sum(x.begin() + b * l.block, x.begin() + (b + 1) * l.block, x.begin() + b * l.block);
}

void ref_block_reverse(Launch& l) {
  auto &in = l.array("in"), &out = l.array("out");
  for (int b = 0; b < l.grid; ++b)
    std::reverse_copy(in.begin() + b * l.block, in.begin() + (b + 1) * l.block, out.begin() + b * l.block);
}

void ref_transpose(Launch& l) {
  auto &in = l.array("in"), &out = l.array("out");
  for (int b = 0; b < l.grid; ++b)
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 4; ++c) out.at(b * 16 + c * 4 + r) = in.at(b * 16 + r * 4 + c);
}

void ref_stencil(Launch& l) {
  auto &in = l.array("in"), &out = l.array("out");
  const int n = l.scalar("n");
  auto at = [&](int i) { return std::int64_t{in.at(std::clamp(i, 0, n - 1))}; };
  for (int i = 0; i < n; ++i) out.at(i) = wrap(at(i - 1) - 2 * at(i) + at(i + 1));
}

void ref_block_sum_atomic(Launch& l) {
  auto &x = l.array("x"), &total = l.array("total");
  const int n = std::min(l.scalar("n"), l.threads());
  total.at(0) = wrap(total.at(0) + std::accumulate(x.begin(), x.begin() + n, std::int64_t{0}));
}

void ref_smem_two(Launch& l) {
  auto &x = l.array("x"), &lo = l.array("lo"), &hi = l.array("hi");
  for (int b = 0; b < l.grid; ++b)
    for (int t = 0; t < 16; ++t) {
      const int i = b * 16 + t, nb = b * 16 + (t + 1) % 16;
      lo.at(i) = std::min<std::int64_t>(x.at(i), 2 * std::int64_t{x.at(nb)});
      hi.at(i) = std::max<std::int64_t>(x.at(nb), 2 * std::int64_t{x.at(i)});
    }
}

void ref_unguarded(Launch& l) {
  auto &in = l.array("in"), &out = l.array("out");
  each_thread(l, [&](int i) { out.at(i) = wrap(std::int64_t{in.at(i)} + 1); });
}

// ---------------------------------------------------------------------------------------------
// CUDA programs as CUDA programmers write them, at the circuit's full sizes (full_size cases).

void ref_tiled_matmul(Launch& l) {
  // Column by column of C, each entry an inner product of a row of A and a column of B in 64 bits.
  auto &A = l.array("A"), &B = l.array("B"), &C = l.array("C");
  const int M = l.scalar("M"), K = l.scalar("K"), N = l.scalar("N");
  for (int c = 0; c < N; ++c) {
    std::vector<std::int64_t> column(static_cast<std::size_t>(K));
    for (int k = 0; k < K; ++k) column[k] = B.at(k * N + c);
    for (int r = 0; r < M; ++r)
      C.at(r * N + c) =
          wrap(std::inner_product(A.begin() + r * K, A.begin() + (r + 1) * K, column.begin(), std::int64_t{0}));
  }
}

void ref_histogram64(Launch& l) {
  // Bin b counts the values in [4b, 4b + 3] (inputs are 0..255).
  auto &pixels = l.array("pixels"), &hist = l.array("hist");
  const auto first = pixels.begin(), last = pixels.begin() + l.scalar("n");
  if (std::any_of(first, last, [](std::int32_t v) { return v < 0 || v > 255; }))
    throw std::logic_error("histogram64 reference: pixels must be 0..255");
  for (int b = 0; b < 64; ++b)
    hist.at(b) += static_cast<std::int32_t>(
        std::count_if(first, last, [&](std::int32_t v) { return v >= 4 * b && v < 4 * b + 4; }));
}

void ref_bitonic_sort(Launch& l) {
  auto& keys = l.array("keys");
  for (int b = 0; b < l.blocks(); ++b) std::sort(keys.begin() + 64 * b, keys.begin() + 64 * (b + 1));
}

void ref_radix_sort(Launch& l) {
  auto& keys = l.array("keys");
  const int bits = l.scalar("bits");
  if (std::any_of(keys.begin(), keys.end(), [&](std::int32_t k) { return k < 0 || k >= (1 << bits); }))
    throw std::logic_error("radix_sort reference: keys must fit in `bits` bits");
  for (int b = 0; b < l.blocks(); ++b) std::sort(keys.begin() + 128 * b, keys.begin() + 128 * (b + 1));
}

void ref_compact(Launch& l) {
  auto &in = l.array("in"), &out = l.array("out"), &count = l.array("count");
  const int n = l.scalar("n"), chunk = l.scalar("chunk"), threshold = l.scalar("threshold");
  for (int b = 0; b < l.blocks(); ++b) {
    const int start = std::min(n, b * chunk), end = std::min(n, start + chunk);
    const auto last = std::copy_if(in.begin() + start, in.begin() + end, out.begin() + start,
                                   [&](std::int32_t x) { return x > threshold; });
    count.at(b) = static_cast<std::int32_t>(last - (out.begin() + start));
  }
}

void ref_scan_tiles(Launch& l) {
  auto &x = l.array("x"), &sums = l.array("block_sums");
  for (int b = 0; b < l.blocks(); ++b) {
    const auto first = x.begin() + 128 * b;
    sums.at(b) = wrap(std::accumulate(first, first + 128, std::int64_t{0}));
    std::partial_sum(first, first + 128, first);
  }
}

// CRC-32 (zlib's) of bytes, with the usual 256-entry table (the kernel works bit by bit).
std::uint32_t crc32_bytes(const std::vector<std::uint8_t>& bytes) {
  static const auto table = [] {
    std::vector<std::uint32_t> t(256);
    for (std::uint32_t n = 0; n < 256; ++n) {
      std::uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[n] = c;
    }
    return t;
  }();
  std::uint32_t c = 0xffffffffu;
  for (std::uint8_t b : bytes) c = table[(c ^ b) & 0xff] ^ (c >> 8);
  return ~c;
}

void ref_crc32_chunks(Launch& l) {
  // The published check value of CRC-32: "123456789" -> 0xcbf43926.
  if (crc32_bytes({'1', '2', '3', '4', '5', '6', '7', '8', '9'}) != 0xcbf43926u)
    throw std::logic_error("crc32 reference: wrong check value");
  auto &data = l.array("data"), &crc = l.array("crc");
  const int words = l.scalar("words");
  each_thread(l, [&](int i) {
    std::vector<std::uint8_t> bytes;
    for (int w = 0; w < words; ++w)
      for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<std::uint8_t>(u(data.at(i * words + w)) >> (8 * k)));
    crc.at(i) = s(crc32_bytes(bytes));
  });
}

void ref_conv1d(Launch& l) {
  auto &in = l.array("in"), &w = l.array("w"), &out = l.array("out");
  const int n = l.scalar("n");
  // Scatter form: every input adds its contribution to the outputs it reaches.
  std::vector<std::int64_t> acc(static_cast<std::size_t>(n), 0);
  for (int j = 0; j < n; ++j)
    for (int k = 0; k < 7; ++k) {
      const int i = j - k + 3;  // in[j] is in[i + k - 3]
      if (i >= 0 && i < n) acc[i] += std::int64_t{w.at(k)} * in.at(j);
    }
  for (int i = 0; i < n; ++i) out.at(i) = wrap(acc[i]);
}

// Words holding the bytes of a string, little-endian, padded with zeros to whole words.
Words text_words(std::string_view text) {
  Words w((text.size() + 3) / 4, 0);
  for (std::size_t i = 0; i < text.size(); ++i)
    w[i / 4] = s(u(w[i / 4]) | std::uint32_t{static_cast<unsigned char>(text[i])} << (8 * (i % 4)));
  return w;
}

// ---------------------------------------------------------------------------------------------

std::vector<Case> build_cases() {
  std::vector<Case> t;
  const Words edge = {kIntMin, kIntMax, -1, 0, 1, -7, 7, -10, 69, -69, 1000000007, -2147483647};

  // Basics: guards, grid-stride loops, scalars, several arrays.
  t.push_back(make_named("vec_add_guard", "vec_add", 2, 8,
                         {arr("a", rnd(16, 1, -1000000, 1000000)), arr("b", rnd(16, 2, -1000000, 1000000)),
                          arr("c", fill(16, -7)), val("n", 13)},
                         ref_vec_add));
  t.push_back(make_named("vec_add_one_warp", "vec_add", 1, 4,
                         {arr("a", {1, 2, 3}), arr("b", {4, 5, 6}), zeros("c", 3), val("n", 3)}, ref_vec_add));
  Case named = make_named("vec_add_named_args", "vec_add", 1, 8,
                          {arr("a", {-1, 2, -3, 4, -5}), arr("b", {10, 20, 30, 40, 50}), zeros("c", 5), hex("n", 5)},
                          ref_vec_add);
  named.named_args = true;
  t.push_back(std::move(named));
  t.push_back(make("saxpy_int", 3, 8,
                   {val("n", 20), val("a", -3), arr("x", rnd(20, 3, -50000, 50000)), arr("y", rnd(20, 4, -9, 9))},
                   ref_saxpy));
  t.push_back(
      make("grid_stride", 2, 4, {arr("in", rnd(21, 5, -300, 300)), zeros("out", 21), val("n", 21)}, ref_grid_stride));
  t.push_back(make_named("grid_stride_spare_threads", "grid_stride", 4, 8,
                         {arr("in", {5, -6, 7, 8, 9}), arr("out", fill(5, 1)), val("n", 5)}, ref_grid_stride));
  t.push_back(make_named("dot_atomic_123_456", "dot_atomic", 1, 4,
                         {arr("a", {1, 2, 3}), arr("b", {4, 5, 6}), zeros("result", 1), val("n", 3)}, ref_dot));
  t.push_back(make_named(
      "dot_atomic_multi_block", "dot_atomic", 2, 8,
      {arr("a", rnd(40, 6, -100, 100)), arr("b", rnd(40, 7, -100, 100)), arr("result", {5}), val("n", 40)}, ref_dot));
  t.push_back(make("fill_poly", 3, 8, {zeros("out", 24)}, ref_fill_poly));
  t.push_back(make("affine_scalars", 1, 16,
                   {arr("out", fill(16, 3)), val("n", 15), val("a", -7), hex("b", 0x10), val("c", -2147480000)},
                   ref_affine));
  t.push_back(make("reverse_copy", 2, 8, {arr("in", rnd(13, 8, -99, 99)), arr("out", fill(13, 99)), val("n", 13)},
                   ref_reverse));
  t.push_back(make("mad3", 1, 12,
                   {arr("a", rnd(10, 9, -3000, 3000)), arr("b", rnd(10, 10, -3000, 3000)),
                    arr("c", rnd(10, 11, -100000, 100000)), val("n", 10)},
                   ref_mad3));
  t.push_back(make("select_arrays", 2, 4,
                   {arr("cond", {0, 1, 2, -1, 0, 0, 7, 0}), arr("a", rnd(8, 12, 100, 199)),
                    arr("b", rnd(8, 13, -199, -100)), zeros("out", 8), val("n", 8)},
                   ref_select));
  t.push_back(make("inplace_update", 1, 8,
                   {arr("a", {-7, -1, 0, 1, 7, -100001, 99999, 12345}), val("k", 5), val("n", 7)}, ref_inplace));
  t.push_back(make("square_all", "two_kernels.cu", "square_all", 1, 16,
                   {arr("a", rnd(10, 14, -4000, 4000)), val("n", 10)}, ref_square));
  t.push_back(make("negate_all", "two_kernels.cu", "negate_all", 1, 16,
                   {arr("a", {kIntMax, -kIntMax, 0, -1, 1, 42, -42, 5, 6, 7}), val("n", 9)}, ref_negate));

  // Signed and unsigned arithmetic edge cases.
  t.push_back(make("div_rem_signed", 3, 4,
                   {arr("a", {7, -7, 7, -7, kIntMin, kIntMin, kIntMax, kIntMax, 0, -1, 123456789, kIntMin}),
                    arr("b", {2, 2, -2, -2, 3, kIntMin, -1, kIntMin, -5, 2, -1000, 1}), zeros("q", 12), zeros("r", 12),
                    val("n", 12)},
                   ref_div_rem_signed));
  t.push_back(make("div_rem_unsigned", 1, 8,
                   {arr("a", {-1, kIntMin, kIntMin, 7, s(0xDEADBEEFu), 100, -2, 1}),
                    arr("b", {3, 7, kIntMin, -1, 0x10000, 100, -1, 1}), zeros("q", 8), zeros("r", 8), val("n", 8)},
                   ref_div_rem_unsigned));
  t.push_back(make("div_by_const", 3, 4, {arr("x", edge), zeros("out", 36), val("n", 12)}, ref_div_by_const));
  t.push_back(
      make("div_by_const_unsigned", 3, 4, {arr("x", edge), zeros("out", 36), val("n", 12)}, ref_div_by_const_unsigned));
  t.push_back(make("mul_hi", 2, 4,
                   {arr("a", {kIntMin, -1, kIntMax, 0x10000, -5, 123456789, kIntMin, 0}),
                    arr("b", {kIntMin, -1, kIntMax, 0x10000, 7, -987654321, kIntMax, -1}), zeros("hi", 8),
                    zeros("uhi", 8), val("n", 8)},
                   ref_mul_hi));
  t.push_back(make(
      "mul_wrap", 2, 4,
      {arr("a", {65536, -1, 123456789, 3, kIntMin, 0x7fff, 46341, -2}),
       arr("b", {65536, -1, 987654321, 5, 2, 0x10001, 46341, kIntMax}), zeros("prod", 8), zeros("mad", 8), val("n", 8)},
      ref_mul_wrap));
  t.push_back(
      make("shift_right", 2, 4,
           {arr("x", {kIntMin, -1, -12345, 12345, kIntMax, s(0xF0F0F0F0u), 1, -2}),
            arr("s", {31, 1, 4, 15, 16, 30, 0, 7}), zeros("sar", 8), zeros("shr", 8), zeros("shl", 8), val("n", 8)},
           ref_shift_right));
  t.push_back(make("shift_wide", 2, 4,
                   {arr("x", {-1, -1, 12345, kIntMin, -77, 5, 1, kIntMin}), arr("s", {31, 32, 33, 40, 255, -1, 63, 0}),
                    zeros("out", 24), val("n", 8)},
                   ref_shift_wide));
  t.push_back(make("compare_signedness", 3, 4,
                   {arr("a", {-1, 1, kIntMin, kIntMax, 0, -5, 5, kIntMin, -1, 3}),
                    arr("b", {1, -1, kIntMax, kIntMin, 0, -6, 6, 0, -1, 3}), zeros("out", 10), val("n", 10)},
                   ref_compare));
  t.push_back(make("min_max", 2, 4,
                   {arr("a", {-1, 1, kIntMin, kIntMax, 0, -5, 5, 0}), arr("b", {1, -1, kIntMax, kIntMin, -1, -6, 6, 0}),
                    zeros("out", 32), val("n", 8)},
                   ref_min_max));
  t.push_back(make("abs_neg_not", 2, 4,
                   {arr("x", {kIntMax, -kIntMax, 0, -1, 5, -5, 1, -1000000}), zeros("out", 24), val("n", 8)},
                   ref_abs_neg_not));
  t.push_back(make("int_min_edges", 1, 1, {arr("x", {kIntMin, -1}), zeros("out", 16)}, ref_int_min_edges));
  t.push_back(make("bit_counts", 3, 4,
                   {arr("x", {0, -1, kIntMin, 1, 0x00F0F000, 0x12345678, kIntMax, s(0x80000001u), 6, 0x00010000}),
                    zeros("out", 40), val("n", 10)},
                   ref_bit_counts));
  t.push_back(make(
      "bit_logic", 2, 4,
      {arr("a", rnd(8, 15, kIntMin, kIntMax)), arr("b", rnd(8, 16, kIntMin, kIntMax)), zeros("out", 32), val("n", 8)},
      ref_bit_logic));
  t.push_back(
      make("select_chain", 3, 4,
           {arr("x", {-101, -100, -1, 0, 1, 99, 100, kIntMin, kIntMax, -50, 50, 1000}), zeros("cls", 12), val("n", 12)},
           ref_select_chain));
  t.push_back(make("clamp_range", 2, 8,
                   {arr("a", rnd(16, 17, -500, 500)), val("lo", -100), val("hi", 250), val("n", 14)}, ref_clamp));
  t.push_back(make("byte_fields", 2, 4,
                   {arr("x", {0x12345678, -1, 0x000000FF, 0x00000080, s(0x8000F000u), 0x7FFFFFFF, 0, s(0xABCDEF01u)}),
                    zeros("out", 32), val("n", 8)},
                   ref_byte_fields));

  // Control flow: divergence, loops, early exits.
  t.push_back(make("divergent_if", 2, 8, {arr("a", rnd(16, 18, -50, 50)), zeros("odd_count", 1), val("n", 15)},
                   ref_divergent_if));
  t.push_back(make("divergent_loop", 3, 4,
                   {arr("count", {0, 1, 2, 3, 9, 5, 0, 7, 4, 4, 1, 8}), zeros("out", 12), val("n", 12)},
                   ref_divergent_loop));
  t.push_back(make("collatz", 3, 4,
                   {arr("start", {1, 2, 3, 6, 7, 27, 97, 871, 5, 16, 0, 9}), zeros("steps", 12), val("n", 12)},
                   ref_collatz));
  t.push_back(make("nested_loops", 1, 12, {zeros("out", 12), val("n", 10)}, ref_nested));
  t.push_back(make("early_return", 2, 8,
                   {arr("a", {-5, 0, 3, 101, 100, 50, -1, 0, 7, 1000}), arr("out", fill(10, 77)), val("n", 10)},
                   ref_early_return));
  t.push_back(make("gcd", 2, 4,
                   {arr("a", {12, -12, 17, 0, 9, 0, 1071, -48}), arr("b", {18, 18, 5, 9, 0, 0, 462, -180}),
                    zeros("g", 8), val("n", 8)},
                   ref_gcd));
  t.push_back(make("linear_search", 1, 8,
                   {arr("data", {5, 3, 9, 3, -1, 7, 5, 0, 2, 8}), val("len", 10),
                    arr("keys", {3, 5, 8, 4, -1, 0, 42, 9}), zeros("found", 8), val("n", 8)},
                   ref_search));
  t.push_back(
      make("switch_ops", 3, 4,
           {arr("op", {0, 1, 2, 3, 4, 5, 6, 7, 9, -1, 2, 6}), arr("a", rnd(12, 19, -30000, 30000)),
            arr("b", {5, -9, -3000, 0x0ff0, 0x00f0, -1, 33, 1, 2, 3, 30000, 31}), zeros("out", 12), val("n", 12)},
           ref_switch));
  t.push_back(
      make("isqrt", 3, 4,
           {arr("x", {0, 1, 2, 3, 4, 15, 16, 17, 99, 2147395600, kIntMax, -1}), zeros("root", 12), val("n", 12)},
           ref_isqrt));
  t.push_back(
      make("is_prime", 2, 8,
           {arr("x", {0, 1, 2, 3, 4, 5, 9, 17, 25, 29, 91, 97, 7919, 1, -7, 7917}), zeros("prime", 16), val("n", 16)},
           ref_is_prime));
  t.push_back(make("fibonacci", 3, 4,
                   {arr("nth", {0, 1, 2, 10, 30, 46, 47, 48, 60, 100}), zeros("fib", 10), val("n", 10)},
                   ref_fibonacci));
  t.push_back(make("pow_mod", 2, 4,
                   {arr("base", {2, 3, 10, 1008, 0, 1, 999, 5}), arr("expo", {10, 0, 7, 1001, 5, 1000, 2, 999}),
                    val("m", 1009), zeros("out", 8), val("n", 8)},
                   ref_pow_mod));
  t.push_back(
      make("serial_scan_one_thread", 2, 4, {arr("a", rnd(16, 20, -1000, 1000)), val("n", 16)}, ref_serial_scan));
  t.push_back(
      make("horner", 3, 4,
           {arr("coef", {3, -2, 0, 5}), val("degree", 3), arr("x", rnd(12, 21, -20, 20)), zeros("y", 12), val("n", 12)},
           ref_horner));
  t.push_back(
      make("matvec", 2, 4,
           {arr("A", rnd(64, 22, -9, 9)), arr("x", rnd(8, 23, -9, 9)), zeros("y", 8), val("rows", 8), val("cols", 8)},
           ref_matvec));
  t.push_back(make("matmul", 1, 16,
                   {arr("A", rnd(16, 24, -20, 20)), arr("B", rnd(16, 25, -20, 20)), zeros("C", 16), val("n", 4)},
                   ref_matmul));

  // Launch shapes: many blocks, odd block sizes (partial warps), the full 128 threads.
  t.push_back(make_named("block_ids_15x8", "block_ids", 15, 8, {zeros("out", 120)}, ref_block_ids));
  t.push_back(make_named("block_ids_4x31", "block_ids", 4, 31, {zeros("out", 124)}, ref_block_ids));
  t.push_back(make_named("block_ids_1x1", "block_ids", 1, 1, {zeros("out", 1)}, ref_block_ids));
  t.push_back(
      make("max_threads", 4, 32, {zeros("total", 1), zeros("per_block", 4), zeros("lane_sum", 4)}, ref_max_threads));

  // Atomics.
  t.push_back(
      make("histogram", 2, 8, {arr("data", rnd(40, 26, -1000, 1000)), val("n", 40), zeros("bins", 8)}, ref_histogram));
  t.push_back(make("histogram_shared", 3, 8,
                   {arr("data", rnd(24, 27, -1000, 1000)), val("n", 22), arr("bins", iota(8, 1))},
                   ref_histogram_shared));
  t.push_back(make("atomic_min_max", 2, 8,
                   {arr("x", {5, -3, 17, kIntMin + 5, 0, 99, -1, 42, 7, -100, 3, 1}), val("n", 12),
                    arr("smin", {kIntMax}), arr("smax", {kIntMin}), arr("umn", {-1}), arr("umx", {0})},
                   ref_atomic_min_max));
  t.push_back(make("atomic_bitwise", 3, 4,
                   {arr("x", rnd(10, 28, kIntMin, kIntMax)), val("n", 10), arr("acc", {-1, 0, 0x5a5a5a5a})},
                   ref_atomic_bitwise));
  t.push_back(make("atomic_sub", 2, 8,
                   {arr("cost", rnd(12, 29, -300, 300)), val("n", 11), arr("budget", {1000, -1000})}, ref_atomic_sub));
  t.push_back(make("atomic_exch_claim", 2, 8,
                   {arr("key", {0, 1, 3, 3, 0, 5, 7, 8, 11, 13, 4, 9, 17, 21}), val("n", 14), zeros("flag", 4),
                    zeros("winners", 4), zeros("members", 4)},
                   ref_exch_claim));
  t.push_back(make(
      "atomic_cas_mul", 3, 4,
      {arr("x", {3, 5, -1, 7, 65537, 2, s(0x9e3779b9u), 11, 13, kIntMin, 1, 3}), val("n", 12), arr("prod", {1, 3})},
      ref_cas_mul));
  t.push_back(make("atomic_cas_set", 2, 8,
                   {arr("key", {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3}), val("n", 16),
                    arr("slot", {-1, -1, -1, -1, -1, -1, -1, 7, -1, -1}), zeros("inserted", 1)},
                   ref_cas_set));
  t.push_back(make("atomic_inc_dec", 3, 8, {arr("ctr", {0, 3, -16}), val("n", 23)}, ref_inc_dec));
  t.push_back(make("atomic_old_values", 3, 8,
                   {val("n", 20), zeros("counter", 1), zeros("old_sum", 1), zeros("last_seen", 1)}, ref_old_values));

  // Warp shuffles (4-lane segments: mask 0xf with 4-thread blocks, full mask with 32-thread blocks).
  t.push_back(
      make("warp_reduce_down", 5, 4, {arr("x", rnd(20, 30, -1000, 1000)), zeros("sums", 5)}, ref_warp_reduce_down));
  t.push_back(make("warp_allreduce_xor", 1, 32,
                   {arr("x", rnd(32, 31, -100000, 100000)), zeros("sum", 32), zeros("mx", 32)}, ref_allreduce_xor));
  t.push_back(make("warp_scan_up", 2, 32, {arr("x", rnd(64, 32, -1000, 1000))}, ref_scan4));
  t.push_back(make("warp_shfl_idx", 3, 4, {arr("x", rnd(12, 33, -1000, 1000)), zeros("bcast", 12), zeros("rot", 12)},
                   ref_shfl_idx));
  t.push_back(make("warp_shfl_down_edge", 1, 32, {arr("x", iota(32, 100)), zeros("down3", 32), zeros("up2", 32)},
                   ref_shfl_edge));

  // Shared memory and barriers.
  t.push_back(make_named("smem_reduce_2x32", "smem_reduce", 2, 32,
                         {arr("x", rnd(64, 34, -10000, 10000)), zeros("block_sums", 2)}, ref_block_sums));
  t.push_back(make_named("smem_reduce_4x16", "smem_reduce", 4, 16,
                         {arr("x", rnd(64, 35, -10000, 10000)), zeros("block_sums", 4)}, ref_block_sums));
  t.push_back(make_named("smem_scan_2x16", "smem_scan", 2, 16, {arr("x", rnd(32, 36, -500, 500))}, ref_block_scan));
  t.push_back(make_named("smem_scan_1x32", "smem_scan", 1, 32, {arr("x", rnd(32, 37, -500, 500))}, ref_block_scan));
  t.push_back(make("smem_reverse", 2, 16, {arr("in", iota(32, -16)), zeros("out", 32)}, ref_block_reverse));
  t.push_back(make("smem_transpose", 2, 16, {arr("in", iota(32)), zeros("out", 32)}, ref_transpose));
  t.push_back(
      make("smem_stencil", 2, 8, {arr("in", rnd(13, 38, -100, 100)), zeros("out", 13), val("n", 13)}, ref_stencil));
  t.push_back(make("block_sum_atomic", 4, 8, {arr("x", rnd(30, 39, -5000, 5000)), val("n", 30), arr("total", {-1})},
                   ref_block_sum_atomic));
  t.push_back(make("smem_two_arrays", 2, 16, {arr("x", rnd(32, 40, -1000, 1000)), zeros("lo", 32), zeros("hi", 32)},
                   ref_smem_two));
  t.push_back(make_named("unguarded_copy_exact", "unguarded_copy", 2, 4,
                         {arr("in", rnd(8, 41, -9, 9)), zeros("out", 8)}, ref_unguarded));

  // CUDA programs as written for a GPU, at the circuit's full sizes (configs/simt_qwen2b.yaml).
  {
    // Pixels 0..254 in two clusters, dark (about 64) and bright (about 192, every third pixel): the
    // sum of two uniform values 0..63, plus 128 for the bright ones.
    Words pixels = rnd(437, 71, 0, 63);
    const Words noise = rnd(437, 72, 0, 63);
    for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] += noise[i] + (i % 3 == 0 ? 128 : 0);
    t.push_back(
        full(make("histogram64", 4, 32, {arr("pixels", pixels), val("n", 437), zeros("hist", 64)}, ref_histogram64)));
  }
  t.push_back(full(make("tiled_matmul", 3, 4,
                        {arr("A", rnd(13 * 14, 73, -10000, 10000)), arr("B", rnd(14 * 10, 74, -10000, 10000)),
                         zeros("C", 13 * 10), val("M", 13), val("K", 14), val("N", 10)},
                        ref_tiled_matmul),
                   /*grid_y=*/4, /*block_y=*/4));
  {
    // Duplicates, the extremes, a sorted and a reversed run among random keys.
    Words keys = rnd(256, 75, -500, 500);
    for (int k = 0; k < 12; ++k) keys[static_cast<std::size_t>(k * 21 + 3)] = edge[static_cast<std::size_t>(k)];
    for (int k = 0; k < 16; ++k) keys[static_cast<std::size_t>(64 + k)] = 7;
    for (int k = 0; k < 64; ++k) keys[static_cast<std::size_t>(128 + k)] = 1000 - 3 * k;
    t.push_back(full(make("bitonic_sort", 4, 32, {arr("keys", keys)}, ref_bitonic_sort)));
  }
  {
    // 10-bit keys: random ones with repeats (0..1023 drawn 256 times), a run of one key, both ends.
    Words keys = rnd(256, 80, 0, 1023);
    for (int k = 0; k < 10; ++k) keys[static_cast<std::size_t>(140 + k)] = 512;
    keys[7] = 0;
    keys[200] = 1023;
    t.push_back(full(make("radix_sort", 2, 32, {arr("keys", keys), val("bits", 10)}, ref_radix_sort)));
  }
  t.push_back(full(make("compact_ballot", 4, 32,
                        {arr("in", rnd(240, 76, -1000, 1000)), val("n", 240), val("chunk", 64), val("threshold", 250),
                         arr("out", fill(240, -1)), zeros("count", 4)},
                        ref_compact)));
  t.push_back(full(
      make("scan_shfl", 3, 32, {arr("x", rnd(384, 77, -100000, 100000)), zeros("block_sums", 3)}, ref_scan_tiles)));
  {
    // Chunks of 16 bytes: 60 bytes of text (the last chunk padded with zeros), a chunk of zeros, one
    // of ones, then random words.
    Words data = text_words("The quick brown fox jumps over the lazy dog 0123456789abcdef");
    data.resize(20, 0);
    data.resize(24, -1);
    const Words random = rnd(256 - 24, 78, kIntMin, kIntMax);
    data.insert(data.end(), random.begin(), random.end());
    t.push_back(
        full(make("crc32_chunks", 2, 32, {arr("data", data), val("words", 4), zeros("crc", 64)}, ref_crc32_chunks)));
  }
  t.push_back(full(make(
      "conv1d_halo", 7, 32,
      {arr("in", rnd(200, 79, -5000, 5000)), arr("w", {-1, 3, -7, 12, -7, 3, -1}), zeros("out", 200), val("n", 200)},
      ref_conv1d)));

  // Launches the machine must refuse, with the error they must give (case-insensitive regex).
  // Rejected before CUDA warps of 32 threads were lowered across machine warps; the files keep their
  // names and "REJECTED" comments until ptx-nvcc/ is regenerated with nvcc (the header hashes the .cu).
  t.push_back(make("warp_sum32", "rejected_warp_sum32.cu", "warp_sum32", 1, 32,
                   {arr("x", rnd(32, 61, -1000, 1000)), zeros("sums", 1)}, ref_warp_sum32));
  t.push_back(make("swap8", "rejected_swap8.cu", "swap8", 1, 8, {arr("x", rnd(8, 62, -1000, 1000)), zeros("out", 8)},
                   ref_swap8));
  t.push_back(reject("reject_float", "rejected_half_scale.cu", "half_scale", 1, 4,
                     {arr("x", {1, 2, 3, 4}), zeros("out", 4), val("n", 4)}, "float|f32"));
  t.push_back(reject("reject_big_shared", "rejected_big_tile.cu", "big_tile", 1, 32,
                     {arr("x", iota(32)), zeros("out", 32)}, "shared"));
  t.push_back(reject("reject_out_of_bounds", "unguarded_copy.cu", "unguarded_copy", 2, 8,
                     {arr("in", iota(12)), zeros("out", 12)}, "out[ -]of[ -](bounds|range)"));
  t.push_back(reject("reject_block_64", "vec_add.cu", "vec_add", 1, 64,
                     {arr("a", iota(20)), arr("b", iota(20)), zeros("c", 20), val("n", 20)},
                     "(block|thread).*(64|32)|(64|32).*(block|thread)"));
  t.push_back(reject("reject_160_threads", "vec_add.cu", "vec_add", 5, 32,
                     {arr("a", iota(10)), arr("b", iota(10)), zeros("c", 10), val("n", 10)},
                     "thread.*(160|128)|(160|128).*thread"));
  t.push_back(reject("reject_150_words", "vec_add.cu", "vec_add", 2, 32,
                     {arr("a", iota(50)), arr("b", iota(50)), zeros("c", 50), val("n", 50)},
                     "(word|memory).*(150|126)|(150|126).*(word|memory)"));
  t.push_back(reject("reject_unknown_kernel", "vec_add.cu", "no_such_kernel", 1, 4,
                     {arr("a", iota(4)), arr("b", iota(4)), zeros("c", 4), val("n", 4)}, "no_such_kernel"));
  t.push_back(reject("reject_missing_argument", "vec_add.cu", "vec_add", 1, 4,
                     {arr("a", iota(4)), arr("b", iota(4)), zeros("c", 4)},
                     "missing.*(\\bn\\b|#4|param3)|(\\bn\\b|#4|param3).*missing"));
  Case ambiguous = reject("reject_ambiguous_kernel", "two_kernels.cu", "", 1, 4, {arr("a", iota(4)), val("n", 4)},
                          "square_all|negate_all|--kernel");
  ambiguous.pass_kernel = false;
  t.push_back(std::move(ambiguous));
  return t;
}

std::string json_string(std::string_view v) {
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string json_words(const Words& w) {
  std::string out = "[";
  for (std::size_t i = 0; i < w.size(); ++i) out += (i ? "," : "") + std::to_string(w[i]);
  return out + "]";
}

}  // namespace

Words& Launch::array(std::string_view name) {
  for (auto& a : args)
    if (a.is_array && a.name == name) return a.values;
  throw std::out_of_range("no array argument '" + std::string(name) + "'");
}

std::int32_t Launch::scalar(std::string_view name) const {
  for (const auto& a : args)
    if (!a.is_array && a.name == name) return a.values.at(0);
  throw std::out_of_range("no scalar argument '" + std::string(name) + "'");
}

std::vector<std::string> Case::cli_args(bool ptx_names) const {
  std::vector<std::string> out;
  if (pass_kernel) out.insert(out.end(), {"--kernel", kernel});
  auto extent = [&](int x, int y) {
    return std::to_string(x) + (launch.two_dimensional() ? "," + std::to_string(y) : "");
  };
  out.insert(out.end(),
             {"--grid", extent(launch.grid, launch.grid_y), "--block", extent(launch.block, launch.block_y)});
  for (const auto& a : launch.args) {
    std::string v = a.cli;
    if (v.empty()) {
      if (a.is_array) {
        v = json_words(a.values);
      } else {
        v = std::to_string(a.values.at(0));
      }
    }
    if (named_args) v = (ptx_names ? ptx_param_name(a.name) : a.name) + "=" + v;
    out.insert(out.end(), {"--arg", v});
  }
  out.insert(out.end(), {"--engine", "interp", "--json"});
  return out;
}

std::string Case::ptx_param_name(std::string_view cuda_name) const {
  for (std::size_t i = 0; i < launch.args.size(); ++i)
    if (launch.args[i].name == cuda_name) return "param" + std::to_string(i);
  throw std::out_of_range("no argument '" + std::string(cuda_name) + "'");
}

std::vector<std::pair<std::string, Words>> Case::expected() const {
  Launch l = launch;
  if (reference) reference(l);
  std::vector<std::pair<std::string, Words>> out;
  for (const auto& a : l.args)
    if (a.is_array) out.emplace_back(a.name, a.values);
  return out;
}

const std::vector<Case>& all_cases() {
  static const std::vector<Case> cases = build_cases();
  return cases;
}

std::vector<std::string> validate(const Case& c) {
  std::vector<std::string> problems;
  auto problem = [&](std::string what) { problems.push_back(c.name + ": " + std::move(what)); };
  const Launch& l = c.launch;
  std::size_t words = 0;
  std::set<std::string> names;
  for (const auto& a : l.args) {
    if (!names.insert(a.name).second) problem("argument '" + a.name + "' appears twice");
    if (a.is_array && a.values.empty()) problem("array '" + a.name + "' is empty");
    if (!a.is_array && a.values.size() != 1) problem("scalar '" + a.name + "' needs exactly one value");
    if (a.is_array) words += a.values.size();
  }
  if (c.file.empty() || c.name.empty()) problem("needs a name and a file");
  if (c.rejected() == static_cast<bool>(c.reference)) problem("needs exactly one of a reference or an expected error");
  if (!c.rejected()) {
    const int max_threads = c.full_size ? kFullMaxThreads : kMaxThreads;
    const int max_words = c.full_size ? kFullMaxArrayWords : kMaxArrayWords;
    if (l.grid < 1 || l.block < 1 || l.grid_y < 1 || l.block_y < 1) problem("grid and block must be positive");
    if (l.block_threads() > kMaxBlock)
      problem("block " + std::to_string(l.block_threads()) + " exceeds the machine's " + std::to_string(kMaxBlock));
    if (l.threads() > max_threads)
      problem(std::to_string(l.threads()) + " threads exceed the machine's " + std::to_string(max_threads));
    if (words > static_cast<std::size_t>(max_words))
      problem(std::to_string(words) + " array words exceed the machine's " + std::to_string(max_words));
  }
  return problems;
}

std::string fingerprint(const Case& c, const std::string& source_text) {
  std::uint64_t h = 14695981039346656037ull;
  auto mix = [&](std::string_view bytes) {
    for (unsigned char ch : bytes) h = (h ^ ch) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;  // field separator
  };
  mix(source_text);
  mix(c.kernel);
  mix(std::to_string(c.launch.grid) + "x" + std::to_string(c.launch.block));
  // The y extents of 2-D launches only, so the fingerprints of 1-D launches stay as they were.
  if (c.launch.two_dimensional()) mix(std::to_string(c.launch.grid_y) + "y" + std::to_string(c.launch.block_y));
  for (const auto& a : c.launch.args)
    mix(a.name + (a.is_array ? "=" + json_words(a.values) : ":" + std::to_string(a.values.at(0))));
  std::ostringstream os;
  os << std::hex << h;
  return os.str();
}

std::string cases_json(const std::function<std::string(const Case&)>& source) {
  std::string out = "{\n  \"limits\": {\"block\": " + std::to_string(kMaxBlock) +
                    ", \"threads\": " + std::to_string(kMaxThreads) +
                    ", \"array_words\": " + std::to_string(kMaxArrayWords) +
                    "},\n  \"full_size_limits\": {\"block\": " + std::to_string(kMaxBlock) +
                    ", \"threads\": " + std::to_string(kFullMaxThreads) +
                    ", \"array_words\": " + std::to_string(kFullMaxArrayWords) + "},\n  \"cases\": [";
  bool first = true;
  for (const auto& c : all_cases()) {
    out += first ? "\n" : ",\n";
    first = false;
    out += "    {\"name\": " + json_string(c.name) + ", \"file\": " + json_string(c.file) +
           ", \"kernel\": " + json_string(c.kernel) + ", \"grid\": " + std::to_string(c.launch.grid) +
           ", \"block\": " + std::to_string(c.launch.block) +
           (c.launch.two_dimensional() ? ", \"grid_y\": " + std::to_string(c.launch.grid_y) +
                                             ", \"block_y\": " + std::to_string(c.launch.block_y)
                                       : "") +
           (c.full_size ? ", \"full_size\": true" : "") +
           (source ? ", \"fingerprint\": " + json_string(fingerprint(c, source(c))) : "") + ",\n     \"args\": [";
    for (std::size_t i = 0; i < c.launch.args.size(); ++i) {
      const Arg& a = c.launch.args[i];
      out += (i ? ", " : "") + std::string("{\"name\": ") + json_string(a.name) +
             (a.is_array ? ", \"array\": " + json_words(a.values) : ", \"scalar\": " + std::to_string(a.values[0])) +
             "}";
    }
    out += "]";
    if (c.rejected()) {
      out += ",\n     \"expect_error\": " + json_string(c.expect_error);
    } else {
      out += ",\n     \"expected\": {";
      bool first_array = true;
      for (const auto& [name, words] : c.expected()) {
        out += (first_array ? "" : ", ") + json_string(name) + ": " + json_words(words);
        first_array = false;
      }
      out += "}";
    }
    out += "}";
  }
  return out + "\n  ]\n}\n";
}

}  // namespace qgpu::kernels
