// Fuzzes config.json parsing and the tensor list a valid config implies.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "qgpu/qwen35/checkpoint.h"
#include "qgpu/qwen35/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace qgpu::qwen35;
  auto config = parse_config_json(std::string_view(reinterpret_cast<const char*>(data), size), "config.json");
  if (!config) {
    if (config.error().to_string().find('\n') != std::string::npos) std::abort();
    if (config.error().code() == qgpu::sdk::ErrorCode::kInternal) std::abort();  // caught an exception
    return 0;
  }
  if (!validate_text_config(config->text)) std::abort();  // parsing validated it already
  // Bound the work: the list has about 14 entries per layer.
  if (config->text.num_hidden_layers <= 256) {
    auto tensors = expected_text_tensors(config->text);
    if (tensors.empty()) std::abort();
  }
  return 0;
}
