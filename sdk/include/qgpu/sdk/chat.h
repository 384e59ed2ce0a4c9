// A conversation as a base model's chat format sees it: turns, the tool calls an assistant turn makes
// and the tools declared to the model. Plain data; how it becomes text is the base's chat format
// (BaseModel::encode_chat; for Qwen3.5, docs/TOKENIZER.md "Chat format").
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace qgpu::sdk {

// One argument of a tool call: its value is the text the model wrote between the parameter's tags
// (a number, an expression, CUDA source ...), kept verbatim.
struct ToolParameter {
  std::string name;
  std::string value;
  bool operator==(const ToolParameter&) const = default;
};

struct ToolCall {
  std::string name;                            // the function called
  std::vector<ToolParameter> parameters = {};  // in the order written
  bool operator==(const ToolCall&) const = default;
};

struct ChatTurn {
  std::string role;  // "system" (first turn only), "user", "assistant" or "tool" (a tool's response)
  std::string content;
  std::vector<ToolCall> tool_calls = {};  // assistant turns: the calls that follow the content
};

// A tool declared to the model.
struct ToolDeclaration {
  std::string name;
  std::string description = {};
  std::string parameters_json = {};  // a JSON Schema object: {"type": "object", "properties": {...}, ...}
};

// A complete tool call found in generated text: text[begin, end) is the whole call as written.
struct ToolCallMatch {
  ToolCall call;
  std::size_t begin = 0;
  std::size_t end = 0;
};

}  // namespace qgpu::sdk
