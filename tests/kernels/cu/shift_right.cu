// Arithmetic (int) versus logical (unsigned) right shifts by a per-element amount in 0..31.
extern "C" __global__ void shift_right(const int* x, const int* s, int* sar, int* shr, int* shl, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int k = s[i];
    sar[i] = x[i] >> k;
    shr[i] = (int)((unsigned)x[i] >> k);
    shl[i] = (int)((unsigned)x[i] << k);
  }
}
