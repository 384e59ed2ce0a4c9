#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "qgpu/sdk/sdk.h"

namespace qgpu::sdk {

Plugin::~Plugin() = default;
Frontend::~Frontend() = default;
Machine::~Machine() = default;
MachineCircuit::~MachineCircuit() = default;
LaunchCodec::~LaunchCodec() = default;
Expected<std::shared_ptr<const MachineCircuit>> Machine::circuit(const CircuitRequest& request) {
  return not_available(std::string("--engine ") + engine_name(request.engine) + " (the machine's compiled circuit)");
}
Expected<std::unique_ptr<LaunchCodec>> Machine::encode_launch(const MachineProgram&, const std::vector<LaunchArg>&,
                                                              const MachineCircuit&) {
  return not_available("launches in the machine's token protocol");
}
Expected<CircuitReport> Machine::describe_circuit(const CircuitRequest&) {
  return not_available("a description of the machine's circuit");
}
Expected<std::vector<std::string>> Machine::record_token_names() {
  return not_available("names of the record tokens");
}
MachineProgram::~MachineProgram() = default;
BaseModel::~BaseModel() = default;
TensorBackend::~TensorBackend() = default;

bool Options::has(std::string_view key) const {
  return values_.find(std::string(key)) != values_.end();
}

Expected<std::string> Options::get_string(std::string_view key) const {
  auto it = values_.find(std::string(key));
  if (it == values_.end()) return not_found("option '" + std::string(key) + "' is not set");
  return it->second;
}

Expected<std::int64_t> Options::get_int(std::string_view key) const {
  auto text = get_string(key);
  if (!text) return text.error();
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text->c_str(), &end, 0);
  if (text->empty() || *end != '\0' || errno == ERANGE) {
    return invalid_argument("option '" + std::string(key) + "': '" + *text + "' is not an integer");
  }
  return static_cast<std::int64_t>(v);
}

Expected<double> Options::get_float(std::string_view key) const {
  auto text = get_string(key);
  if (!text) return text.error();
  char* end = nullptr;
  double v = std::strtod(text->c_str(), &end);
  if (text->empty() || *end != '\0') {
    return invalid_argument("option '" + std::string(key) + "': '" + *text + "' is not a number");
  }
  return v;
}

Expected<bool> Options::get_bool(std::string_view key) const {
  auto text = get_string(key);
  if (!text) return text.error();
  if (*text == "true") return true;
  if (*text == "false") return false;
  return invalid_argument("option '" + std::string(key) + "': '" + *text + "' is not true or false");
}

void Logger::log(LogLevel level, std::string_view message) const {
  if (sink_ == nullptr) return;
  std::string line(message);
  sink_(user_, static_cast<int>(level), line.c_str());
}

namespace detail {
void copy_error(char* buffer, std::size_t size, std::string_view message) {
  if (buffer == nullptr || size == 0) return;
  std::size_t n = std::min(size - 1, message.size());
  std::copy_n(message.data(), n, buffer);
  buffer[n] = '\0';
}
}  // namespace detail

}  // namespace qgpu::sdk
