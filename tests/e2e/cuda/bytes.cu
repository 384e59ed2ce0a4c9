// 8- and 16-bit arrays and vector types (docs/ISA.md "Sub-word and vector memory access"). Arrays
// are 32-bit words in the machine: 4 bytes or 2 shorts per word, little-endian (byte k of word w is
// element 4w + k); give them packed or as u8[...] / i16[...] (docs/USER_GUIDE.md).
__global__ void invert(unsigned char* img, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) img[i] = 255 - img[i];
}

__global__ void histogram(const unsigned char* in, int* hist, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&hist[in[i] >> 6], 1);
}

__global__ void short_sum(const short* a, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(out, a[i]);
}

__global__ void signed_bytes(const signed char* a, int* out) {
  out[threadIdx.x] = a[threadIdx.x] * 3;
}

__global__ void swap2(const int2* in, int2* out) {
  int2 v = in[threadIdx.x];
  out[threadIdx.x] = make_int2(v.y, v.x + 1);
}

__global__ void reverse4(const int4* in, int4* out) {
  int4 v = in[threadIdx.x];
  out[threadIdx.x] = make_int4(v.w, v.z, v.y, v.x);
}

__global__ void pixels(const uchar4* in, uchar4* out) {
  uchar4 v = in[threadIdx.x];
  out[threadIdx.x] = make_uchar4(255 - v.x, v.y, v.z + 1, v.w >> 1);
}

__global__ void swap_shorts(const short2* in, short2* out) {
  short2 v = in[threadIdx.x];
  out[threadIdx.x] = make_short2(v.y, v.x - 1);
}

// clang copies the whole struct as two ld/st.u64 (two words each on the machine).
__global__ void copy_int4(const int4* in, int4* out) {
  out[threadIdx.x] = in[threadIdx.x];
}
