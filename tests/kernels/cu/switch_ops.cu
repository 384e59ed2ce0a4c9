// A switch over a per-element opcode.
extern "C" __global__ void switch_ops(const int* op, const int* a, const int* b, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int x = a[i], y = b[i], r;
  switch (op[i]) {
    case 0: r = x + y; break;
    case 1: r = x - y; break;
    case 2: r = x * y; break;
    case 3: r = x & y; break;
    case 4: r = x | y; break;
    case 5: r = x ^ y; break;
    case 6: r = (int)((unsigned)x << (y & 31)); break;
    default: r = -12345; break;
  }
  out[i] = r;
}
