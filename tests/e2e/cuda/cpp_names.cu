// Kernels written as C++ (no extern "C"): PTX knows them as _Z3dblPii, ...; qgpu by their source
// names (docs/FRONTEND.md "Kernel names"): dbl, img::inc, fill<int>, fill<unsigned int>,
// scale(int*, int), scale(unsigned int*, unsigned int).
__global__ void dbl(int* a, int n) {
  int i = threadIdx.x;
  if (i < n) a[i] *= 2;
}

namespace img {
__global__ void inc(int* a) {
  a[threadIdx.x] += 1;
}
}  // namespace img

template <typename T>
__global__ void fill(T* a, T v) {
  a[threadIdx.x] = v;
}
template __global__ void fill<int>(int*, int);
template __global__ void fill<unsigned>(unsigned*, unsigned);

__global__ void scale(int* a, int k) {
  a[threadIdx.x] *= k;
}
__global__ void scale(unsigned* a, unsigned k) {
  a[threadIdx.x] *= k + 1;
}
