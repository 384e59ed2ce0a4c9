// The Qwen3.5 chat template in C++ (see chat.h). The comments quote the jinja each step writes out;
// tests/golden/chat/ holds the template and what transformers renders with it.
#include "qgpu/qwen35/chat.h"

#include <nlohmann/json.hpp>
#include <string>

#include "qgpu/qwen35/tokenizer.h"
#include "text.h"

namespace qgpu::qwen35 {

using sdk::Expected;
using sdk::Status;

namespace {

using OrderedJson = nlohmann::ordered_json;

constexpr std::string_view kToolsHeader = "# Tools\n\nYou have access to the following functions:\n\n<tools>";
constexpr std::string_view kToolsFooter =
    "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
    "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple "
    "lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow "
    "the specified format: an inner <function=...></function> block must be nested within "
    "<tool_call></tool_call> XML tags\n- Required parameters MUST be specified\n- You may provide optional "
    "reasoning for your function call in natural language BEFORE the function call, but NOT after\n- If "
    "there is no function call available, answer the question like normal with your current knowledge and do "
    "not tell the user about function calls\n</IMPORTANT>";

constexpr std::string_view kToolCallOpen = "<tool_call>";
constexpr std::string_view kToolCallClose = "</tool_call>";
constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParameterOpen = "<parameter=";
constexpr std::string_view kParameterClose = "</parameter>";

// Python's str.isspace(), which jinja's `trim` (str.strip) uses: the Unicode White_Space characters
// plus the four information separators U+001C..U+001F.
bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// `s|trim` of valid UTF-8.
std::string_view trim(std::string_view s) {
  std::size_t begin = s.size(), end = 0;
  for (std::size_t pos = 0; pos < s.size();) {
    const std::size_t at = pos;
    if (!is_python_space(text::next_code_point(s, pos))) {
      if (begin == s.size()) begin = at;
      end = pos;
    }
  }
  return begin < end ? s.substr(begin, end - begin) : std::string_view();
}

std::string_view lstrip_newlines(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}

std::string_view rstrip_newlines(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

// At most 40 bytes of `s`, cut at a character boundary, in quotes, newlines written as \n: error
// messages stay on one line.
std::string quote(std::string_view s) {
  std::size_t n = std::min<std::size_t>(s.size(), 40);
  while (n < s.size() && n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  std::string out = "'";
  for (char c : s.substr(0, n)) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  return out + (n < s.size() ? "...'" : "'");
}

// transformers' `tojson`: Python's json.dumps(value, ensure_ascii=False) with its default separators
// ", " and ": ", keys in the order given.
void append_python_json(const OrderedJson& j, std::string& out) {
  switch (j.type()) {
    case OrderedJson::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, value] : j.items()) {
        if (!first) out += ", ";
        first = false;
        append_python_json(OrderedJson(key), out);
        out += ": ";
        append_python_json(value, out);
      }
      out += '}';
      return;
    }
    case OrderedJson::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& value : j) {
        if (!first) out += ", ";
        first = false;
        append_python_json(value, out);
      }
      out += ']';
      return;
    }
    case OrderedJson::value_t::string: {
      static const char* hex = "0123456789abcdef";
      out += '"';
      for (unsigned char c : j.get_ref<const std::string&>()) {
        switch (c) {
          case '"': out += "\\\""; break;
          case '\\': out += "\\\\"; break;
          case '\n': out += "\\n"; break;
          case '\r': out += "\\r"; break;
          case '\t': out += "\\t"; break;
          case '\b': out += "\\b"; break;
          case '\f': out += "\\f"; break;
          default:
            if (c < 0x20) {
              out += "\\u00";
              out += hex[c >> 4];
              out += hex[c & 15];
            } else {
              out += static_cast<char>(c);
            }
        }
      }
      out += '"';
      return;
    }
    default:  // null, true, false, integers; floats in the shortest round-trip form, as Python's repr
      out += j.dump();
  }
}

Status check_name(std::string_view name, const std::string& what) {
  if (name.empty()) return sdk::invalid_argument(what + " is empty");
  if (name.find_first_of("<>\n") != std::string_view::npos) {
    return sdk::invalid_argument(what + " " + quote(name) + " contains '<', '>' or a newline");
  }
  return validate_utf8(name).with_context(what);
}

Status check_message(const ChatMessage& m, std::size_t i) {
  const std::string where = "chat message " + std::to_string(i);
  if (m.role != "system" && m.role != "user" && m.role != "assistant" && m.role != "tool") {
    return sdk::invalid_argument(where + ": role " + quote(m.role) + " is not system, user, assistant or tool");
  }
  if (m.role == "system" && i != 0) return sdk::invalid_argument(where + ": a system turn must be the first");
  QGPU_RETURN_IF_ERROR(validate_utf8(m.content).with_context(where + " content"));
  if (!m.tool_calls.empty() && m.role != "assistant") {
    return sdk::invalid_argument(where + ": only assistant turns make tool calls");
  }
  for (std::size_t c = 0; c < m.tool_calls.size(); ++c) {
    const sdk::ToolCall& call = m.tool_calls[c];
    const std::string call_where = where + " tool call " + std::to_string(c);
    QGPU_RETURN_IF_ERROR(check_name(call.name, call_where + " name"));
    for (const sdk::ToolParameter& p : call.parameters) {
      QGPU_RETURN_IF_ERROR(check_name(p.name, call_where + " parameter name"));
      QGPU_RETURN_IF_ERROR(validate_utf8(p.value).with_context(call_where + " parameter '" + p.name + "'"));
      if (p.value.find(kParameterClose) != std::string::npos) {
        return sdk::invalid_argument(call_where + " parameter '" + p.name + "': the value contains '</parameter>'");
      }
    }
  }
  return {};
}

// {"type": "function", "function": {"name": ..., "description": ..., "parameters": ...}}: the form
// transformers gives a Python function (get_json_schema), written with tojson.
Expected<std::string> tool_json(const sdk::ToolDeclaration& tool, std::size_t i) {
  const std::string where = "tool " + std::to_string(i);
  QGPU_RETURN_IF_ERROR(check_name(tool.name, where + " name"));
  QGPU_RETURN_IF_ERROR(validate_utf8(tool.description).with_context(where + " description"));
  OrderedJson parameters = OrderedJson::parse(tool.parameters_json, nullptr, /*allow_exceptions=*/false);
  if (parameters.is_discarded()) {
    return sdk::invalid_argument(where + " '" + tool.name + "': parameters_json is not valid JSON");
  }
  if (!parameters.is_object()) {
    return sdk::invalid_argument(where + " '" + tool.name + "': parameters_json is not a JSON object");
  }
  OrderedJson function = OrderedJson::object();
  function["name"] = tool.name;
  function["description"] = tool.description;
  function["parameters"] = std::move(parameters);
  OrderedJson declaration = OrderedJson::object();
  declaration["type"] = "function";
  declaration["function"] = std::move(function);
  std::string out;
  append_python_json(declaration, out);
  return out;
}

bool starts_with_at(std::string_view s, std::size_t pos, std::string_view prefix) {
  return s.substr(pos, prefix.size()) == prefix;
}

void skip_space(std::string_view s, std::size_t& pos) {
  while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\n' || s[pos] == '\t' || s[pos] == '\r')) ++pos;
}

// The NAME of "<tag=NAME>" with `pos` just after "=", moving `pos` past ">".
Expected<std::string> tag_name(std::string_view s, std::size_t& pos, std::string_view tag) {
  const std::size_t gt = s.find('>', pos);
  const std::size_t nl = s.find('\n', pos);
  if (gt == std::string_view::npos || nl < gt) {
    return sdk::invalid_argument("tool call: '" + std::string(tag) + "' has no closing '>'");
  }
  std::string name(s.substr(pos, gt - pos));
  if (name.empty()) {
    return sdk::invalid_argument("tool call: missing " + std::string(tag == kFunctionOpen ? "function" : "parameter") +
                                 " name in '" + std::string(tag) + "...>'");
  }
  if (name.find('<') != std::string::npos) {
    return sdk::invalid_argument("tool call: malformed name " + quote(name) + " in '" + std::string(tag) + "...>'");
  }
  pos = gt + 1;
  return name;
}

}  // namespace

Expected<std::string> render_chat(const std::vector<ChatMessage>& messages,
                                  const std::vector<sdk::ToolDeclaration>& tools, const ChatOptions& options) {
  // {%- if not messages %} raise_exception('No messages provided.')
  if (messages.empty()) return sdk::invalid_argument("chat: no messages (the template needs a user turn)");
  for (std::size_t i = 0; i < messages.size(); ++i) QGPU_RETURN_IF_ERROR(check_message(messages[i], i));

  std::string out;
  const bool has_system = messages[0].role == "system";
  if (!tools.empty()) {
    // The system turn declares the tools, then adds the system message's own text, if any.
    out += "<|im_start|>system\n";
    out += kToolsHeader;
    for (std::size_t i = 0; i < tools.size(); ++i) {
      auto json = tool_json(tools[i], i);
      if (!json) return json.error();
      out += '\n';
      out += *json;
    }
    out += kToolsFooter;
    if (has_system) {
      const std::string_view content = trim(messages[0].content);
      if (!content.empty()) {
        out += "\n\n";
        out += content;
      }
    }
    out += "<|im_end|>\n";
  } else if (has_system) {
    out += "<|im_start|>system\n";
    out += trim(messages[0].content);
    out += "<|im_end|>\n";
  }

  // The last user turn that is not a wrapped tool response is the query; assistant turns after it
  // (the current multi-step tool exchange) keep their thinking block.
  std::size_t last_query = messages.size();
  for (std::size_t i = messages.size(); i-- > 0;) {
    if (messages[i].role != "user") continue;
    const std::string_view content = trim(messages[i].content);
    if (!(content.starts_with("<tool_response>") && content.ends_with("</tool_response>"))) {
      last_query = i;
      break;
    }
  }
  if (last_query == messages.size()) {
    return sdk::invalid_argument("chat: no user query (the template needs a user turn that is not a tool response)");
  }

  for (std::size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    std::string_view content = trim(m.content);
    if (m.role == "user") {
      out += "<|im_start|>user\n";
      out += content;
      out += "<|im_end|>\n";
    } else if (m.role == "assistant") {
      // Reasoning written inside the content ("<think>...</think>answer") is split off.
      std::string_view reasoning;
      if (const std::size_t first = content.find("</think>"); first != std::string_view::npos) {
        reasoning = rstrip_newlines(content.substr(0, first));
        if (const std::size_t open = reasoning.rfind("<think>"); open != std::string_view::npos) {
          reasoning.remove_prefix(open + 7);
        }
        reasoning = lstrip_newlines(reasoning);
        content = lstrip_newlines(content.substr(content.rfind("</think>") + 8));
      }
      reasoning = trim(reasoning);
      out += "<|im_start|>assistant\n";
      if (i > last_query) {
        out += "<think>\n";
        out += reasoning;
        out += "\n</think>\n\n";
      }
      out += content;
      for (std::size_t c = 0; c < m.tool_calls.size(); ++c) {
        const sdk::ToolCall& call = m.tool_calls[c];
        if (c > 0) {
          out += '\n';
        } else if (!trim(content).empty()) {
          out += "\n\n";
        }
        out += "<tool_call>\n<function=";
        out += call.name;
        out += ">\n";
        for (const sdk::ToolParameter& p : call.parameters) {
          out += "<parameter=";
          out += p.name;
          out += ">\n";
          out += p.value;
          out += "\n</parameter>\n";
        }
        out += "</function>\n</tool_call>";
      }
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      // Consecutive tool responses share one user turn.
      if (i > 0 && messages[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n";
      out += content;
      out += "\n</tool_response>";
      if (i + 1 == messages.size() || messages[i + 1].role != "tool") out += "<|im_end|>\n";
    }
  }
  if (options.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    out += options.enable_thinking ? "<think>\n" : "<think>\n\n</think>\n\n";
  }
  return out;
}

Expected<sdk::ToolCall> parse_tool_call(std::string_view block) {
  std::size_t pos = 0;
  skip_space(block, pos);
  if (!starts_with_at(block, pos, kToolCallOpen)) {
    return sdk::invalid_argument("tool call: expected '<tool_call>', found " + quote(block.substr(pos)));
  }
  pos += kToolCallOpen.size();
  skip_space(block, pos);
  if (!starts_with_at(block, pos, kFunctionOpen)) {
    return sdk::invalid_argument("tool call: expected '<function=NAME>' after '<tool_call>', found " +
                                 quote(block.substr(pos)));
  }
  pos += kFunctionOpen.size();
  sdk::ToolCall call;
  QGPU_ASSIGN_OR_RETURN(call.name, tag_name(block, pos, kFunctionOpen));
  const std::string where = "tool call: function '" + call.name + "'";
  while (true) {
    skip_space(block, pos);
    if (starts_with_at(block, pos, kFunctionClose)) {
      pos += kFunctionClose.size();
      break;
    }
    if (pos == block.size()) return sdk::invalid_argument(where + " is not closed by '</function>'");
    if (!starts_with_at(block, pos, kParameterOpen)) {
      return sdk::invalid_argument(where + ": expected '<parameter=NAME>' or '</function>', found " +
                                   quote(block.substr(pos)));
    }
    pos += kParameterOpen.size();
    sdk::ToolParameter p;
    QGPU_ASSIGN_OR_RETURN(p.name, tag_name(block, pos, kParameterOpen));
    const std::size_t close = block.find(kParameterClose, pos);
    std::string_view value = block.substr(pos, close == std::string_view::npos ? std::string_view::npos : close - pos);
    // A value that runs into the next tag was never closed.
    if (close == std::string_view::npos || value.find(kParameterOpen) != std::string_view::npos ||
        value.find(kFunctionClose) != std::string_view::npos) {
      return sdk::invalid_argument(where + ": parameter '" + p.name + "' is not closed by '</parameter>'");
    }
    if (value.starts_with('\n')) value.remove_prefix(1);
    if (value.ends_with('\n')) value.remove_suffix(1);
    p.value = std::string(value);
    for (const sdk::ToolParameter& q : call.parameters) {
      if (q.name == p.name) return sdk::invalid_argument(where + ": parameter '" + p.name + "' is given twice");
    }
    call.parameters.push_back(std::move(p));
    pos = close + kParameterClose.size();
  }
  skip_space(block, pos);
  if (!starts_with_at(block, pos, kToolCallClose)) {
    return sdk::invalid_argument(pos == block.size()
                                     ? std::string("tool call: missing '</tool_call>'")
                                     : "tool call: expected '</tool_call>' after '</function>', found " +
                                           quote(block.substr(pos)));
  }
  pos += kToolCallClose.size();
  skip_space(block, pos);
  if (pos != block.size()) {
    return sdk::invalid_argument("tool call: text after '</tool_call>': " + quote(block.substr(pos)));
  }
  return call;
}

Expected<std::optional<sdk::ToolCallMatch>> find_tool_call(std::string_view text) {
  const std::size_t begin = text.find(kToolCallOpen);
  if (begin == std::string_view::npos) return std::optional<sdk::ToolCallMatch>();
  const std::size_t close = text.find(kToolCallClose, begin);
  if (close == std::string_view::npos) return std::optional<sdk::ToolCallMatch>();
  const std::size_t end = close + kToolCallClose.size();
  auto call = parse_tool_call(text.substr(begin, end - begin));
  if (!call) return call.error();
  return std::optional<sdk::ToolCallMatch>(sdk::ToolCallMatch{std::move(*call), begin, end});
}

}  // namespace qgpu::qwen35
