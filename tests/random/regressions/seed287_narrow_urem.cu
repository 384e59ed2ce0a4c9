// qgpu random kernel, seed 287: grid 1, block 8 (tests/random/kernelgen.py)
extern "C" __global__ void k(const unsigned* in, unsigned* out, unsigned* acc, unsigned p) {
  const unsigned g = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned a = in[g & 63u], b = g, c = p, d = 287u;
  d = (4931u % ((threadIdx.x & 255u) | 1u));
  out[g * 2u] = a;
  out[g * 2u + 1u] = b ^ c ^ d;
}
