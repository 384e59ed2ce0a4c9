// Byte extraction and sign extension of bit fields.
extern "C" __global__ void byte_fields(const int* x, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int v = x[i];
    out[4 * i + 0] = (v >> 8) & 0xff;
    out[4 * i + 1] = (int)(signed char)v;
    out[4 * i + 2] = (int)(short)(v >> 12);
    out[4 * i + 3] = (int)((unsigned)v << 20) >> 26;
  }
}
