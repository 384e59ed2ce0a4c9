// clang unrolls both loops at -O2 into 39 ROM blocks, over the machine's 32; with '#pragma unroll 1'
// before a loop, or clang_flags: -fno-unroll-loops, it fits (9 blocks).
__global__ void mix(int* a) {
  for (int i = 0; i < 16; ++i) a[i] = (a[i] ^ (a[i] >> 3)) * 5 + i;
  for (int i = 0; i < 16; ++i) a[i] += a[15 - i] >> 1;
}
