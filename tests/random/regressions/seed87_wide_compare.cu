// qgpu random kernel, seed 87: grid 1, block 8 (tests/random/kernelgen.py)
extern "C" __global__ void k(const unsigned* in, unsigned* out, unsigned* acc, unsigned p) {
  const unsigned g = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned a = in[g & 63u], b = g, c = p, d = 87u;
  for (unsigned i0 = 0, ni0 = (__umulhi(b, c)) & 3u; i0 < ni0; ++i0) {
    d = 0u;
  }
  out[g * 2u] = a;
  out[g * 2u + 1u] = b ^ c ^ d;
}
