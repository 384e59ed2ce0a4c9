// libFuzzer harness: arbitrary text through the launch-argument parser (core/src/launch_args.cpp), as
// `qgpu-host run --arg TEXT` passes it. Expected: a value or a one-line error; a parsed array formats back.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "qgpu/core/launch_args.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace qgpu;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto spec = core::parse_arg(text);
  if (!spec) {
    fuzz::check_error(spec.error(), text);
  } else {
    fuzz::check(spec->text == text, "the spec keeps the text");
    // The formatted array parses back to the same values (small ones: zeros(N) reaches 2^24 words,
    // whose text round trip would cost seconds per input).
    if (spec->value.is_array && spec->value.array.size() <= 4096) {
      auto again = core::parse_arg_value(core::format_array(spec->value.array));
      fuzz::check(again && again->is_array && again->array == spec->value.array, "an array round-trips");
    }
  }
  auto value = core::parse_arg_value(text);
  if (!value) fuzz::check_error(value.error(), text);
  return 0;
}
