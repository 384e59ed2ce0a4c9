// SCALE comes from the frontend option clang_flags (-DSCALE=3).
#ifndef SCALE
#error "compile with clang_flags: -DSCALE=<n>"
#endif
__global__ void times(int* a) {
  a[threadIdx.x] *= SCALE;
}
