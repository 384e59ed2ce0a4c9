// Per-thread number theory on pairs (a[i], b[i]) into out[7i .. 7i+6]: gcd and lcm by Euclid's
// algorithm, the decimal digit sum of a * b, the inverse of a mod b by the extended algorithm (0
// where there is none), a^b mod 1009 by square-and-multiply, the Collatz step count of a, and the
// integer square root of a * b by bisection. Seven helpers with loops, inlined: 98 ROM blocks, over
// the plugin's default 32 and within the circuit's 128 (configs/simt_qwen2b.yaml), and more values
// live at once than r1-r15 hold, so the lowering spills three to shared memory (docs/ISA.md).
__device__ unsigned gcd(unsigned x, unsigned y) {
  while (y != 0) {
    unsigned t = x % y;
    x = y;
    y = t;
  }
  return x;
}

__device__ unsigned digit_sum(unsigned x) {
  unsigned sum = 0;
  while (x != 0) {
    sum += x % 10;
    x /= 10;
  }
  return sum;
}

// The inverse of a modulo m by the extended Euclidean algorithm; 0 where there is none.
__device__ int inverse(int a, int m) {
  int r0 = m, r1 = a % m, t0 = 0, t1 = 1;
  while (r1 != 0) {
    int q = r0 / r1;
    int r2 = r0 - q * r1;
    r0 = r1, r1 = r2;
    int t2 = t0 - q * t1;
    t0 = t1, t1 = t2;
  }
  if (r0 != 1) return 0;
  return t0 < 0 ? t0 + m : t0;
}
__device__ unsigned power_mod(unsigned base, unsigned e, unsigned m) {
  unsigned result = 1;
  base %= m;
  while (e > 0) {
    if (e & 1) result = result * base % m;
    base = base * base % m;
    e >>= 1;
  }
  return result;
}

__device__ int collatz(unsigned n) {
  int steps = 0;
  while (n > 1) {
    n = (n & 1) ? 3 * n + 1 : n / 2;
    ++steps;
  }
  return steps;
}

__device__ unsigned isqrt(unsigned n) {
  unsigned lo = 0, hi = n < 65536 ? n + 1 : 65536;
  while (hi - lo > 1) {
    unsigned mid = (lo + hi) / 2;
    if (mid * mid <= n) lo = mid;
    else hi = mid;
  }
  return lo;
}

__global__ void number_theory(const unsigned* a, const unsigned* b, unsigned* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned x = a[i], y = b[i];
  unsigned g = gcd(x, y);
  out[7 * i + 0] = g;
  out[7 * i + 1] = g == 0 ? 0 : x / g * y;
  out[7 * i + 2] = digit_sum(x * y);
  out[7 * i + 3] = y > 1 ? inverse(x, y) : 0;
  out[7 * i + 4] = power_mod(x, y, 1009);
  out[7 * i + 5] = collatz(x);
  out[7 * i + 6] = isqrt(x * y);
}
