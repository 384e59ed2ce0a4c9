// pow_mod(b, e, m) elementwise: out[i] = b[i]^e[i] mod m[i] in [0, m[i]), for e[i] >= 0 and
// m[i] >= 1 (the caller checks). Exact for every int32 modulus: products are formed by doubling
// and modular addition of values below m < 2^31, so no intermediate leaves 32 unsigned bits (a
// plain (r * b) % m overflows as soon as m > 46341). Launch: at least n threads, one per element
// (a grid-stride loop would need more than the machine's 15 registers).

// (x + y) mod m for x, y < m.
__device__ inline unsigned add_mod(unsigned x, unsigned y, unsigned m) {
  return x >= m - y ? x - (m - y) : x + y;
}

extern "C" __global__ void pow_mod(const int* b, const int* e, const int* m, int n, int* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    unsigned mod = (unsigned)m[i];
    int base = b[i] % (int)mod;
    unsigned x = base < 0 ? (unsigned)base + mod : (unsigned)base;
    unsigned r = 1u % mod;
#pragma unroll 1
    for (unsigned k = (unsigned)e[i]; k != 0; k >>= 1) {
      // r * x and x * x mod m in one pass over x's bits (both multiply by x; one loop keeps the
      // program within the machine's ROM): sum the doublings of r and of x where x has a 1 bit.
      unsigned pr = 0, px = 0, dr = r, dx = x;
#pragma unroll 1
      for (unsigned y = x; y != 0; y >>= 1) {
        if (y & 1) {
          pr = add_mod(pr, dr, mod);
          px = add_mod(px, dx, mod);
        }
        dr = add_mod(dr, dr, mod);
        dx = add_mod(dx, dx, mod);
      }
      if (k & 1) r = pr;
      x = px;
    }
    out[i] = (int)r;
  }
}
