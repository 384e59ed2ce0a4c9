// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320, as zlib) of each thread's own chunk of
// `words` little-endian 32-bit words, bit by bit without a table: crc[i] is the CRC of the
// 4 * words bytes of chunk i.
extern "C" __global__ void crc32_chunks(const unsigned* data, int words, unsigned* crc) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned c = 0xffffffffu;
  for (int w = 0; w < words; ++w) {
    c ^= data[i * words + w];  // four bytes at once: byte 0 is the word's low byte
    for (int bit = 0; bit < 32; ++bit) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  crc[i] = ~c;
}
