// What every harness asserts about a result besides "no crash, no UB, no leak": an error is a
// one-line message with a code. A violation aborts, so libFuzzer saves the input like a crash.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "qgpu/sdk/status.h"

namespace qgpu::fuzz {

inline void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz check failed: %s\n", what);
    std::abort();
  }
}

// `input`: the text parsed. Messages quote the user's text verbatim, so a line break in an error is
// accepted only when the input has a control character (a line break; yaml-cpp turned the bytes
// "\x00r" into "\r"); callers that need one line fold messages with core::one_line.
inline void check_error(const sdk::Status& status, std::string_view input) {
  check(!status.is_ok(), "an error Status is not ok");
  check(!status.message().empty(), "an error has a message");
  const bool input_has_control =
      std::any_of(input.begin(), input.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 && c != '\t'; });
  check(input_has_control || status.message().find_first_of("\n\r") == std::string::npos,
        "an error message is one line");
  (void)status.to_string();
}

}  // namespace qgpu::fuzz
