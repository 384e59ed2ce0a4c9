#include "chat_script.h"

#include <fstream>

namespace qgpu::host {

sdk::Expected<ChatScript> load_chat_script(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return sdk::not_found("chat script '" + file + "' cannot be read");
  ChatScript script;
  script.file = file;
  std::string line;
  bool in_turn = false;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line == "--- assistant") {
      script.turns.emplace_back();
      in_turn = true;
      continue;
    }
    if (!in_turn) {
      if (!line.empty() && line.front() != '#')
        return sdk::invalid_argument("chat script '" + file +
                                     "': text before the first '--- assistant' line (only # comments may come first)");
      continue;
    }
    script.turns.back() += line + "\n";
  }
  if (script.turns.empty())
    return sdk::invalid_argument("chat script '" + file + "' has no '--- assistant' line: no turn to force");
  for (std::size_t i = 0; i < script.turns.size(); ++i) {
    std::string& turn = script.turns[i];
    while (!turn.empty() && (turn.back() == '\n' || turn.back() == ' ')) turn.pop_back();
    if (turn.empty())
      return sdk::invalid_argument("chat script '" + file + "': assistant turn " + std::to_string(i + 1) + " is empty");
  }
  return script;
}

}  // namespace qgpu::host
