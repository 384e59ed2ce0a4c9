// and/or/xor/not and a lane-dependent single-bit mask.
extern "C" __global__ void bit_logic(const int* a, const int* b, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int x = a[i], y = b[i];
    unsigned bit = 1u << (i * 5 & 31);
    out[4 * i + 0] = (x & y) ^ (x | ~y);
    out[4 * i + 1] = (x ^ y) & 0x0ff00ff0;
    out[4 * i + 2] = (int)((unsigned)x | bit);
    out[4 * i + 3] = (x & (int)bit) != 0;
  }
}
