// qgpu random kernel, seed 3583: grid 1, block 8 (tests/random/kernelgen.py)
extern "C" __global__ void k(const unsigned* in, unsigned* out, unsigned* acc, unsigned p) {
  const unsigned g = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned a = in[g & 63u], b = g, c = p, d = 583u;
  a = (unsigned)((int)(c) >> ((~d) & 31u));
  c = 0u;
  out[g * 2u] = a;
  out[g * 2u + 1u] = b ^ c ^ d;
}
