// Fuzzes the safetensors header parser: any input must give a value or a
// one-line error, and every tensor it accepts must lie inside the input
// (libFuzzer's buffer is exactly sized, so ASan flags any read past it).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "qgpu/qwen35/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace qgpu::qwen35;
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  auto header = parse_safetensors(file, "fuzz.safetensors");
  if (!header) {
    if (header.error().to_string().find('\n') != std::string::npos) std::abort();  // errors are one line
    if (header.error().code() == qgpu::sdk::ErrorCode::kInternal) std::abort();    // caught an exception
    return 0;
  }
  std::uint64_t covered = 0;
  for (const auto& t : header->tensors) {
    if (t.begin > t.end || header->data_offset + t.end > size) std::abort();
    covered += t.nbytes();
    TensorRef ref{&t, file.data() + header->data_offset + t.begin};
    if (st_dtype_is_float(t.dtype) && ref.numel() <= (1 << 20)) {
      std::vector<float> out(static_cast<std::size_t>(ref.numel()));
      if (!to_f32(ref, out)) std::abort();
    } else {
      volatile std::byte sink{};
      for (std::byte b : ref.bytes()) sink = sink ^ b;  // touch every byte
    }
  }
  if (covered != header->data_bytes) std::abort();  // the tensors tile the data area
  return 0;
}
