// A chat script (`qgpu-host chat --script FILE`, docs/CHAT.md): the assistant's turns written in
// advance, forced token by token instead of sampled; everything else (the prompt, the model's
// forward passes, tool-call detection, the launches) runs as in a real chat. CI drives the whole
// chat path with it where no real weights exist.
//
//   # comments until the first marker
//   --- assistant
//   <tool_call>
//   <function=gpu_eval>
//   ...
//   --- assistant
//   The dot product is 32.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "qgpu/sdk/status.h"

namespace qgpu::host {

struct ChatScript {
  std::string file;
  std::vector<std::string> turns;  // each assistant turn's text, trailing newlines dropped
  std::size_t next = 0;            // the next turn to force
};

sdk::Expected<ChatScript> load_chat_script(const std::string& file);

}  // namespace qgpu::host
