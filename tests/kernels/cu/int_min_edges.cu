// Edge cases around INT_MIN and -1 that stay well defined in C++.
extern "C" __global__ void int_min_edges(const int* x, int* out) {
  int m = x[0];   // INT_MIN
  int m1 = x[1];  // -1
  out[0] = m >> 31;
  out[1] = (int)((unsigned)m >> 31);
  out[2] = m / -2;
  out[3] = m / m;
  out[4] = m % 3;
  out[5] = (int)((unsigned)m + (unsigned)m1);
  out[6] = (int)(0u - (unsigned)m);
  out[7] = m1 / 2;
  out[8] = m1 % 2;
  out[9] = m1 >> 1;
  out[10] = (int)((unsigned)m1 >> 1);
  out[11] = m < m1;
  out[12] = (unsigned)m < (unsigned)m1;
  out[13] = m1 * m1;
  out[14] = m1 / m;
  out[15] = (int)((unsigned)m * (unsigned)m1);
}
