#include "qgpu/core/launch_args.h"

#include <array>
#include <cctype>
#include <charconv>
#include <limits>

#include "qgpu/core/text.h"

namespace qgpu::core {
using sdk::Expected;

namespace {

constexpr std::size_t kMaxArrayWords = 1u << 24;  // far above any machine; guards zeros(huge)

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

Expected<std::int32_t> parse_scalar(std::string_view text) {
  std::string_view s = trim(text);
  if (s.empty()) return sdk::invalid_argument("expected an int32 value, got nothing");
  bool negative = false;
  std::string_view digits = s;
  if (digits.front() == '-' || digits.front() == '+') {
    negative = digits.front() == '-';
    digits.remove_prefix(1);
  }
  int base = 10;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    base = 16;
    digits.remove_prefix(2);
  }
  std::uint64_t magnitude = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude, base);
  if (digits.empty() || ec == std::errc::invalid_argument || ptr != digits.data() + digits.size()) {
    return sdk::invalid_argument("'" + std::string(s) + "' is not an int32 value (decimal or 0x-hex)");
  }
  const std::uint64_t limit = base == 16 && !negative ? 0xffffffffull : (negative ? 0x80000000ull : 0x7fffffffull);
  if (ec == std::errc::result_out_of_range || magnitude > limit) {
    return sdk::invalid_argument("'" + std::string(s) + "' is out of the int32 range");
  }
  const auto bits = static_cast<std::uint32_t>(negative ? (0 - magnitude) : magnitude);
  return static_cast<std::int32_t>(bits);
}

struct ElementInfo {
  ElementType type;
  std::string_view name;
  int bits;
  bool is_signed;
};
constexpr ElementInfo kElements[] = {{ElementType::kI32, "i32", 32, true},
                                     {ElementType::kU8, "u8", 8, false},
                                     {ElementType::kI8, "i8", 8, true},
                                     {ElementType::kU16, "u16", 16, false},
                                     {ElementType::kI16, "i16", 16, true},
                                     {ElementType::kU32, "u32", 32, false}};
constexpr std::string_view kElementNames = "u8, i8, u16, i16, i32, u32";

const ElementInfo& info(ElementType type) {
  for (const ElementInfo& e : kElements)
    if (e.type == type) return e;
  return kElements[0];
}

// The element type spelled `name` (u8, i8, ...), or null.
const ElementInfo* element_named(std::string_view name) {
  for (const ElementInfo& e : kElements)
    if (e.name == name) return &e;
  return nullptr;
}

// An element of a typed array: in the type's range, or 0x-hex up to its width as a bit pattern.
Expected<std::int32_t> parse_element(std::string_view text, const ElementInfo& type) {
  std::string_view s = trim(text);
  if (type.type == ElementType::kU32 && !s.empty() && std::isdigit(static_cast<unsigned char>(s.front())) &&
      s.rfind("0x", 0) != 0 && s.rfind("0X", 0) != 0) {  // decimal up to 2^32 - 1
    std::uint64_t u = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), u);
    if (ec == std::errc() && ptr == s.data() + s.size() && u <= 0xffffffffull)
      return static_cast<std::int32_t>(static_cast<std::uint32_t>(u));
    if (ec != std::errc::invalid_argument && ptr == s.data() + s.size())
      return sdk::invalid_argument("'" + std::string(s) + "' is out of the u32 range 0..4294967295");
  }
  QGPU_ASSIGN_OR_RETURN(const std::int32_t v, parse_scalar(text));
  if (type.type == ElementType::kU32 && v < 0 && s.front() == '-')
    return sdk::invalid_argument("'" + std::string(s) + "' is out of the u32 range 0..4294967295");
  if (type.bits == 32) return v;
  const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  const std::int64_t low = type.is_signed && !hex ? -(std::int64_t{1} << (type.bits - 1)) : 0;
  const std::int64_t high = type.is_signed && !hex ? (std::int64_t{1} << (type.bits - 1)) - 1
                                                   : (std::int64_t{1} << type.bits) - 1;
  if (v < low || v > high)
    return sdk::invalid_argument("'" + std::string(s) + "' is out of the " + std::string(type.name) + " range " +
                                 std::to_string(low) + ".." + std::to_string(high));
  return v;
}

// Elements packed into words, little-endian: element i at bits (i % per_word) * bits of word i / per_word.
std::vector<std::int32_t> pack(const std::vector<std::int32_t>& elements, const ElementInfo& type) {
  if (type.bits == 32) return elements;
  const std::size_t per_word = 32 / static_cast<std::size_t>(type.bits);
  const std::uint32_t mask = (1u << type.bits) - 1u;
  std::vector<std::uint32_t> words((elements.size() + per_word - 1) / per_word, 0);
  for (std::size_t i = 0; i < elements.size(); ++i)
    words[i / per_word] |= (static_cast<std::uint32_t>(elements[i]) & mask) << (i % per_word * type.bits);
  return {words.begin(), words.end()};
}

bool is_identifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s.front()))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

}  // namespace

Expected<ArgValue> parse_arg_value(std::string_view text) {
  std::string_view s = trim(text);
  ArgValue value;
  // A typed array: its element type right before the '['.
  const ElementInfo* type = &kElements[0];
  if (const std::size_t bracket = s.find('['); bracket != std::string_view::npos && bracket > 0) {
    const std::string_view name = trim(s.substr(0, bracket));
    type = element_named(name);
    if (type == nullptr)
      return sdk::invalid_argument("'" + std::string(name) + "' is not an element type (" +
                                   std::string(kElementNames) + ")");
    s = trim(s.substr(bracket));
  }
  if (!s.empty() && s.front() == '[') {
    if (s.back() != ']') return sdk::invalid_argument("array '" + std::string(s) + "' lacks its closing ']'");
    value.is_array = true;
    std::string_view body = trim(s.substr(1, s.size() - 2));
    std::vector<std::int32_t> elements;
    while (!body.empty()) {
      auto comma = body.find(',');
      auto element = parse_element(body.substr(0, comma), *type);
      if (!element) {
        return sdk::invalid_argument("array element " + std::to_string(elements.size()) + ": " +
                                     element.error().message());
      }
      elements.push_back(*element);
      if (comma == std::string_view::npos) break;
      body.remove_prefix(comma + 1);
      if (trim(body).empty()) return sdk::invalid_argument("array '" + std::string(s) + "' ends with ','");
    }
    value.layout = {type->type, elements.size()};
    value.array = pack(elements, *type);
    return value;
  }
  if (s.rfind("zeros(", 0) == 0) {
    if (s.back() != ')') return sdk::invalid_argument("'" + std::string(s) + "' lacks its closing ')'");
    std::string_view inside = trim(s.substr(6, s.size() - 7));
    std::string_view n_text = inside;
    if (const std::size_t comma = inside.find(','); comma != std::string_view::npos) {
      n_text = trim(inside.substr(0, comma));
      const std::string_view name = trim(inside.substr(comma + 1));
      type = element_named(name);
      if (type == nullptr)
        return sdk::invalid_argument("zeros(N, TYPE): '" + std::string(name) + "' is not an element type (" +
                                     std::string(kElementNames) + ")");
    }
    std::size_t n = 0;
    auto [ptr, ec] = std::from_chars(n_text.data(), n_text.data() + n_text.size(), n);
    if (n_text.empty() || ec != std::errc() || ptr != n_text.data() + n_text.size()) {
      return sdk::invalid_argument("zeros(N) needs a non-negative integer N, got '" + std::string(n_text) + "'");
    }
    const std::size_t per_word = 32 / static_cast<std::size_t>(type->bits);
    if (n / per_word > kMaxArrayWords) {
      return sdk::invalid_argument("zeros(" + std::string(inside) + ") is larger than " +
                                   std::to_string(kMaxArrayWords) + " words");
    }
    value.is_array = true;
    value.array.assign((n + per_word - 1) / per_word, 0);
    value.layout = {type->type, n};
    return value;
  }
  auto scalar = parse_scalar(s);
  if (!scalar) return scalar.error();
  value.scalar = *scalar;
  return value;
}

Expected<ArgSpec> parse_arg(std::string_view text) {
  ArgSpec spec;
  spec.text = std::string(text);
  std::string_view value_text = text;
  if (auto eq = text.find('='); eq != std::string_view::npos) {
    std::string_view name = trim(text.substr(0, eq));
    if (!is_identifier(name)) {
      return sdk::invalid_argument("--arg '" + std::string(text) + "': '" + std::string(name) +
                                   "' is not a parameter name");
    }
    spec.name = std::string(name);
    value_text = text.substr(eq + 1);
  }
  auto value = parse_arg_value(value_text);
  if (!value) return sdk::invalid_argument("--arg '" + std::string(text) + "': " + value.error().message());
  spec.value = std::move(*value);
  return spec;
}

Expected<std::vector<sdk::LaunchArg>> bind_args(const sdk::KernelIR& kernel, const std::vector<ArgSpec>& args,
                                                std::vector<ArrayLayout>* layouts) {
  const std::size_t n = kernel.params.size();
  std::vector<const ArgSpec*> bound(n, nullptr);
  std::vector<std::string> names;
  for (const auto& p : kernel.params) names.push_back(p.name);

  if (args.size() > n) {
    return sdk::invalid_argument(std::to_string(args.size()) + " arguments given, but kernel '" + kernel.name +
                                 "' takes " + std::to_string(n) + " (" + join(names) + ")");
  }
  for (const ArgSpec& arg : args) {
    if (!arg.name) continue;
    std::size_t i = 0;
    while (i < n && kernel.params[i].name != *arg.name) ++i;
    if (i == n) {
      std::string message = "kernel '" + kernel.name + "' has no parameter '" + *arg.name + "'";
      std::string hint = closest_match(*arg.name, names);
      if (!hint.empty()) message += " (did you mean '" + hint + "'?)";
      return sdk::invalid_argument(message + "; parameters: " + join(names));
    }
    if (bound[i] != nullptr) return sdk::invalid_argument("parameter '" + *arg.name + "' is given twice");
    bound[i] = &arg;
  }
  std::size_t next = 0;
  for (const ArgSpec& arg : args) {
    if (arg.name) continue;
    while (next < n && bound[next] != nullptr) ++next;
    if (next == n) return sdk::invalid_argument("--arg '" + arg.text + "' has no parameter left to bind to");
    bound[next] = &arg;
  }

  std::vector<sdk::LaunchArg> out;
  for (std::size_t i = 0; i < n; ++i) {
    const sdk::KernelParam& param = kernel.params[i];
    const std::string label = "parameter '" + param.name + "' (#" + std::to_string(i + 1) + ")";
    if (bound[i] == nullptr) {
      return sdk::invalid_argument("missing --arg for " + label + " of kernel '" + kernel.name + "'");
    }
    const ArgValue& v = bound[i]->value;
    const bool pointer = param.kind == sdk::KernelParam::Kind::kPointer;
    if (pointer && !v.is_array) {
      return sdk::invalid_argument(label + " is a pointer: give an array such as [1,2,3] or zeros(N), got '" +
                                   bound[i]->text + "'");
    }
    if (!pointer && v.is_array) {
      return sdk::invalid_argument(label + " is a scalar, got the array '" + bound[i]->text + "'");
    }
    if (!pointer && param.type != sdk::IrType::kI32) {
      return sdk::unsupported(label + " is not a 32-bit integer; only int32 scalars can be passed");
    }
    sdk::LaunchArg launch;
    launch.param = param.name;
    launch.is_array = v.is_array;
    launch.scalar = v.scalar;
    launch.array = v.array;
    out.push_back(std::move(launch));
  }
  if (layouts != nullptr) {
    layouts->clear();
    for (std::size_t i = 0; i < n; ++i) layouts->push_back(bound[i]->value.layout);
  }
  return out;
}

namespace {

// "X[,Y[,Z]]" -> {x, y, z}.
Expected<std::array<std::uint32_t, 3>> parse_extents(std::string_view option, std::string_view text) {
  std::array<std::uint32_t, 3> extents{1, 1, 1};
  std::size_t count = 0;
  std::string_view rest = trim(text);
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view part = trim(rest.substr(0, comma));
    if (count == 3)
      return sdk::invalid_argument(std::string(option) + " '" + std::string(text) +
                                   "' has more than 3 extents (X, X,Y or X,Y,Z)");
    std::uint32_t value = 0;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (part.empty() || ec != std::errc{} || ptr != part.data() + part.size() || value == 0)
      return sdk::invalid_argument(std::string(option) + " '" + std::string(text) +
                                   "': every extent must be an integer of at least 1 (X, X,Y or X,Y,Z)");
    extents[count++] = value;
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  const std::uint64_t total = std::uint64_t{extents[0]} * extents[1] * extents[2];
  if (total > std::numeric_limits<std::uint32_t>::max())
    return sdk::invalid_argument(std::string(option) + " '" + std::string(text) + "' has " + std::to_string(total) +
                                 " in all, more than 2^32 - 1");
  return extents;
}

std::string format_extents(std::uint32_t total, std::uint32_t y, std::uint32_t z) {
  std::string s = std::to_string(total / (std::uint64_t{y} * z));
  if (y != 1 || z != 1) s += "," + std::to_string(y);
  if (z != 1) s += "," + std::to_string(z);
  return s;
}

}  // namespace

Expected<sdk::LaunchShape> parse_launch_shape(std::string_view grid, std::string_view block) {
  QGPU_ASSIGN_OR_RETURN(const auto g, parse_extents("--grid", grid));
  QGPU_ASSIGN_OR_RETURN(const auto b, parse_extents("--block", block));
  sdk::LaunchShape shape;
  shape.grid = g[0] * g[1] * g[2];
  shape.grid_y = g[1];
  shape.grid_z = g[2];
  shape.block = b[0] * b[1] * b[2];
  shape.block_y = b[1];
  shape.block_z = b[2];
  return shape;
}

std::string format_grid(const sdk::LaunchShape& shape) {
  return format_extents(shape.grid, shape.grid_y, shape.grid_z);
}

std::string format_block(const sdk::LaunchShape& shape) {
  return format_extents(shape.block, shape.block_y, shape.block_z);
}

std::string_view element_type_name(ElementType type) {
  return info(type).name;
}

std::vector<std::int64_t> unpack_elements(const std::vector<std::int32_t>& words, const ArrayLayout& layout) {
  const ElementInfo& type = info(layout.element);
  std::vector<std::int64_t> out;
  if (type.bits == 32) {
    for (std::int32_t w : words) out.push_back(type.is_signed ? w : std::int64_t{static_cast<std::uint32_t>(w)});
    return out;
  }
  const std::size_t per_word = 32 / static_cast<std::size_t>(type.bits);
  for (std::size_t i = 0; i < layout.elements && i / per_word < words.size(); ++i) {
    const std::uint32_t bits =
        static_cast<std::uint32_t>(words[i / per_word]) >> (i % per_word * type.bits) & ((1u << type.bits) - 1u);
    const std::uint32_t sign = 1u << (type.bits - 1);
    out.push_back(type.is_signed ? static_cast<std::int32_t>(bits ^ sign) - static_cast<std::int32_t>(sign)
                                 : static_cast<std::int32_t>(bits));
  }
  return out;
}

ArrayLayout layout_of(const sdk::KernelIR& kernel, const std::vector<ArrayLayout>& layouts, std::string_view param) {
  for (std::size_t i = 0; i < kernel.params.size() && i < layouts.size(); ++i)
    if (kernel.params[i].name == param) return layouts[i];
  return {};
}

std::string format_array(const std::vector<std::int32_t>& values) {
  return format_array(std::vector<std::int64_t>(values.begin(), values.end()));
}

std::string format_array(const std::vector<std::int64_t>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(values[i]);
  }
  return out + "]";
}

}  // namespace qgpu::core
