// qgpu random kernel, seed 50: grid 1, block 8 (tests/random/kernelgen.py)
extern "C" __global__ void k(const unsigned* in, unsigned* out, unsigned* acc, unsigned p) {
  const unsigned g = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned a = in[g & 63u], b = g, c = p, d = 50u;
  for (unsigned i0 = 0; i0 < 3u; ++i0) {
    if ((unsigned)(a != threadIdx.x)) {
      atomicXor(&acc[(0u) & 3u], threadIdx.x);
    } else {
      atomicXor(&acc[(d) & 3u], i0);
    }
  }
  out[g * 2u] = a;
  out[g * 2u + 1u] = b ^ c ^ d;
}
