// Writes a[i + shift] for every thread i < n: with n past a's length (or a negative shift) it writes
// outside a, into b (adjacent in global memory) or before a. Only --memcheck catches that.
extern "C" __global__ void overrun(int* a, int* b, int n, int shift) {
  const int i = threadIdx.x;
  if (i < n) a[i + shift] = 7;
}
