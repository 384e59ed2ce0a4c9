// schedule.yaml / allocation.yaml: written by hand (stable, diffable), read with yaml-cpp.
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

#include "qgpu/weights/compile.h"

namespace qgpu::weights {

namespace {

constexpr const char* kScheduleFormat = "qgpu-weights-schedule/1";
constexpr const char* kAllocationFormat = "qgpu-weights-allocation/1";

std::string quote(const std::string& s) {
  std::string r = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') r += '\\';
    r += ch;
  }
  return r + "\"";
}

sdk::Status write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  if (!f) return sdk::io_error("cannot write " + p.string());
  f << text;
  if (!f) return sdk::io_error("cannot write " + p.string());
  return sdk::Status::ok();
}

std::string at(const std::filesystem::path& file, const YAML::Node& n) {
  return file.string() + ":" + std::to_string(n.Mark().line + 1) + ":" + std::to_string(n.Mark().column + 1);
}

sdk::Expected<YAML::Node> read_yaml(const std::filesystem::path& file, const char* format) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(file.string());
  } catch (const YAML::BadFile&) {
    return sdk::io_error("cannot read " + file.string());
  } catch (const YAML::Exception& e) {
    return sdk::error_at(
        file.string() + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1),
        sdk::ErrorCode::kParseError, e.msg);
  }
  if (!root.IsMap() || !root["format"] || root["format"].as<std::string>("") != format)
    return sdk::error_at(at(file, root), sdk::ErrorCode::kParseError,
                         std::string("not a ") + format + " file (format: " + format + " expected)");
  return root;
}

template <typename T>
sdk::Expected<T> get(const std::filesystem::path& file, const YAML::Node& parent, const char* key) {
  YAML::Node n = parent[key];
  if (!n) return sdk::error_at(at(file, parent), sdk::ErrorCode::kParseError, std::string("missing key '") + key + "'");
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    return sdk::error_at(at(file, n), sdk::ErrorCode::kParseError, std::string("bad value for '") + key + "'");
  }
}

#define QGPU_WEIGHTS_ASSIGN(var, expr)   \
  auto var##_e = (expr);                 \
  if (!var##_e) return var##_e.status(); \
  auto var = *var##_e

}  // namespace

sdk::Status dump(const Circuit& circuit, const CompiledCircuit& cc, const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return sdk::not_found("dump directory " + dir.string() + " does not exist");
  std::ostringstream s;
  const auto& sh = cc.target.shapes;
  s << "format: " << kScheduleFormat << "\n";
  s << "circuit: " << quote(circuit.name()) << "\n";
  s << "shapes: {hidden_size: " << sh.hidden_size << ", intermediate_size: " << sh.intermediate_size
    << ", linear_num_key_heads: " << sh.linear_num_key_heads
    << ", linear_num_value_heads: " << sh.linear_num_value_heads << ", linear_key_head_dim: " << sh.linear_key_head_dim
    << ", linear_value_head_dim: " << sh.linear_value_head_dim << ", linear_conv_kernel: " << sh.linear_conv_kernel
    << "}\n";
  s << "num_layers: " << cc.schedule.num_layers << "\n";
  s << "layers:\n";
  for (int l = 0; l < cc.schedule.num_layers; ++l)
    s << "  - {index: " << l << ", mlp_neurons: " << cc.schedule.use[l].mlp_neurons
      << ", key_heads: " << cc.schedule.use[l].key_heads << "}\n";
  s << "ops:\n";
  for (std::size_t i = 0; i < circuit.ops().size(); ++i) {
    const Op& op = circuit.ops()[i];
    s << "  - {name: " << quote(op.name) << ", kind: " << (op.is_mlp ? "mlp" : "gdn")
      << ", layer: " << cc.schedule.op_layer[i];
    if (op.is_mlp)
      s << ", neurons: " << unique_neuron_count(op.mlp);
    else
      s << ", first_head: " << cc.schedule.op_first_head[i];
    s << "}\n";
  }
  QGPU_RETURN_IF_ERROR(write_file(dir / "schedule.yaml", s.str()));

  std::ostringstream a;
  const Allocation& al = cc.allocation;
  a << "format: " << kAllocationFormat << "\n";
  a << "circuit: " << quote(circuit.name()) << "\n";
  a << "hidden_size: " << al.hidden_size << "\n";
  a << "residual_unit: " << kResidualUnit << "\n";
  a << "const_hi: {channel: " << al.const_hi << ", value: " << kConstHi << "}\n";
  a << "mute: " << al.mute << "\n";
  a << "channels_used: " << al.channels_used << "\n";
  a << "fields:  # bit b: positive rail at base + 2b, negative rail at base + 2b + 1\n";
  for (std::size_t f = 0; f < circuit.fields().size(); ++f) {
    const Field& fd = circuit.fields()[f];
    const char* kind = fd.kind == FieldKind::kInput      ? "input"
                       : fd.kind == FieldKind::kConstant ? "constant"
                                                         : "computed";
    a << "  - {name: " << quote(fd.full_name()) << ", width: " << fd.width << ", kind: " << kind
      << ", base: " << al.field_base[f];
    if (fd.alias_of >= 0) a << ", alias_of: " << quote(circuit.fields()[fd.alias_of].full_name());
    a << "}\n";
  }
  a << "pads:\n";
  for (std::size_t i = 0; i < al.pad_channel.size(); ++i)
    a << "  - {channel: " << al.pad_channel[i] << ", value: " << al.pad_value[i] << "}\n";
  return write_file(dir / "allocation.yaml", a.str());
}

sdk::Expected<Schedule> load_schedule(const Circuit& circuit, const std::filesystem::path& file) {
  QGPU_WEIGHTS_ASSIGN(root, read_yaml(file, kScheduleFormat));
  Schedule s;
  QGPU_WEIGHTS_ASSIGN(nl, get<int>(file, root, "num_layers"));
  s.num_layers = nl;
  YAML::Node layers = root["layers"], ops = root["ops"];
  if (!layers || !layers.IsSequence() || static_cast<int>(layers.size()) != nl)
    return sdk::error_at(at(file, root), sdk::ErrorCode::kParseError, "'layers' must list num_layers entries");
  for (const YAML::Node& l : layers) {
    QGPU_WEIGHTS_ASSIGN(n, get<std::int64_t>(file, l, "mlp_neurons"));
    QGPU_WEIGHTS_ASSIGN(h, get<std::int64_t>(file, l, "key_heads"));
    s.use.push_back(LayerUse{n, h});
  }
  if (!ops || !ops.IsSequence() || ops.size() != circuit.ops().size())
    return sdk::error_at(at(file, ops ? ops : root), sdk::ErrorCode::kParseError,
                         "'ops' must list the circuit's " + std::to_string(circuit.ops().size()) + " ops");
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const YAML::Node& o = ops[i];
    QGPU_WEIGHTS_ASSIGN(name, get<std::string>(file, o, "name"));
    if (name != circuit.ops()[i].name)
      return sdk::error_at(
          at(file, o), sdk::ErrorCode::kParseError,
          "op " + std::to_string(i) + " is '" + name + "', the circuit has '" + circuit.ops()[i].name + "'");
    QGPU_WEIGHTS_ASSIGN(layer, get<int>(file, o, "layer"));
    if (layer < 0 || layer >= nl)
      return sdk::error_at(at(file, o), sdk::ErrorCode::kParseError, "op " + name + ": layer out of range");
    s.op_layer.push_back(layer);
    int first = -1;
    if (!circuit.ops()[i].is_mlp) {
      QGPU_WEIGHTS_ASSIGN(fh, get<int>(file, o, "first_head"));
      first = fh;
    }
    s.op_first_head.push_back(first);
  }
  return s;
}

sdk::Expected<Allocation> load_allocation(const Circuit& circuit, const std::filesystem::path& file) {
  QGPU_WEIGHTS_ASSIGN(root, read_yaml(file, kAllocationFormat));
  Allocation a;
  QGPU_WEIGHTS_ASSIGN(hs, get<std::int64_t>(file, root, "hidden_size"));
  a.hidden_size = hs;
  YAML::Node ch = root["const_hi"];
  if (!ch) return sdk::error_at(at(file, root), sdk::ErrorCode::kParseError, "missing key 'const_hi'");
  QGPU_WEIGHTS_ASSIGN(c, get<int>(file, ch, "channel"));
  a.const_hi = c;
  QGPU_WEIGHTS_ASSIGN(m, get<int>(file, root, "mute"));
  a.mute = m;
  QGPU_WEIGHTS_ASSIGN(cu, get<int>(file, root, "channels_used"));
  a.channels_used = cu;
  YAML::Node fields = root["fields"];
  if (!fields || !fields.IsSequence() || fields.size() != circuit.fields().size())
    return sdk::error_at(at(file, fields ? fields : root), sdk::ErrorCode::kParseError,
                         "'fields' must list the circuit's " + std::to_string(circuit.fields().size()) + " fields");
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const YAML::Node& f = fields[i];
    QGPU_WEIGHTS_ASSIGN(name, get<std::string>(file, f, "name"));
    QGPU_WEIGHTS_ASSIGN(width, get<int>(file, f, "width"));
    QGPU_WEIGHTS_ASSIGN(base, get<int>(file, f, "base"));
    const Field& cf = circuit.fields()[i];
    if (name != cf.full_name() || width != cf.width)
      return sdk::error_at(at(file, f), sdk::ErrorCode::kParseError,
                           "field " + std::to_string(i) + " is '" + name + "' (" + std::to_string(width) +
                               " bits), the circuit has '" + cf.full_name() + "' (" + std::to_string(cf.width) +
                               " bits)");
    if (base < 0 || base + 2 * width > hs)
      return sdk::error_at(at(file, f), sdk::ErrorCode::kParseError, "field " + name + ": base outside the residual");
    a.field_base.push_back(base);
  }
  YAML::Node pads = root["pads"];
  if (pads && pads.IsSequence())
    for (const YAML::Node& p : pads) {
      QGPU_WEIGHTS_ASSIGN(pc, get<int>(file, p, "channel"));
      QGPU_WEIGHTS_ASSIGN(pv, get<double>(file, p, "value"));
      a.pad_channel.push_back(pc);
      a.pad_value.push_back(pv);
    }
  return a;
}

}  // namespace qgpu::weights
