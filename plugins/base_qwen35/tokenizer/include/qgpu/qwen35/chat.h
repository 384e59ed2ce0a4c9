// The Qwen3.5 chat format: the official chat template (tests/golden/chat/qwen35_chat_template.jinja,
// where it comes from: docs/TOKENIZER.md) written out in C++, and the parser of the tool calls that
// template teaches the model to write:
//
//   <tool_call>
//   <function=NAME>
//   <parameter=P>
//   value
//   </parameter>
//   </function>
//   </tool_call>
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qgpu/sdk/chat.h"
#include "qgpu/sdk/status.h"

namespace qgpu::qwen35 {

using ChatMessage = sdk::ChatTurn;

struct ChatOptions {
  bool add_generation_prompt = true;  // end with "<|im_start|>assistant\n" and the thinking prefix
  bool enable_thinking = true;        // on: "<think>\n"; off: "<think>\n\n</think>\n\n"
};

// The text the official template renders (transformers' apply_chat_template) for `messages`,
// `tools` and `options`, byte for byte. What the template refuses is an error here too (no
// messages, no user query, a system turn after the first, a role other than system, user,
// assistant, tool), and so is what would not read back: invalid UTF-8, a parameters_json that is
// not a JSON object, a tool or parameter name with '<', '>' or a newline, a parameter value that
// contains "</parameter>".
sdk::Expected<std::string> render_chat(const std::vector<ChatMessage>& messages,
                                       const std::vector<sdk::ToolDeclaration>& tools, const ChatOptions& options);

// One tool call: `block` is "<tool_call>...</tool_call>" (whitespace around it and between the
// tags is allowed). A parameter's value is the text between its tags less one newline on each side
// (what render_chat puts there). Errors are one line and start with "tool call: ".
sdk::Expected<sdk::ToolCall> parse_tool_call(std::string_view block);

// The first complete "<tool_call>...</tool_call>" in `text` (generated assistant text), parsed;
// nullopt when there is none yet. Text around it is not looked at.
sdk::Expected<std::optional<sdk::ToolCallMatch>> find_tool_call(std::string_view text);

}  // namespace qgpu::qwen35
