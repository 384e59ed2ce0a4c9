// schedule.yaml / allocation.yaml: written by hand (stable, diffable), read with yaml-cpp.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "compile_internal.h"
#include "qgpu/weights/compile.h"

namespace qgpu::weights {

namespace {

constexpr const char* kScheduleFormat = "qgpu-weights-schedule/1";
// /3: one channel per bit (+u / -u); /1 and /2 described dual-rail pairs and no longer load.
constexpr const char* kAllocationFormat = "qgpu-weights-allocation/3";

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

sdk::Expected<YAML::Node> read_yaml(const std::filesystem::path& file, const char* format,
                                    const char* older = nullptr) {
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
  const std::string got = root.IsMap() && root["format"] ? root["format"].as<std::string>("") : "";
  if (got != format && (older == nullptr || got != older))
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
      << ", key_heads: " << cc.schedule.use[l].key_heads
      << ", clear_neurons: " << clear_neurons(circuit, cc.allocation, l) << "}\n";
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
  a << "live_peak: " << al.live_peak << "  # most bits (channels) live at once\n";
  const bool have_schedule = cc.schedule.op_layer.size() == circuit.ops().size();
  std::vector<LiveRange> live;
  if (have_schedule) live = live_ranges(circuit, cc.target, cc.schedule);
  a << "fields:  # bit b on channel base + b, +u for 1 and -u for 0;"
       " live: sub-layers (-1 embedding, 2L Gated DeltaNet, 2L+1 MLP of layer L) holding the slot\n";
  for (std::size_t f = 0; f < circuit.fields().size(); ++f) {
    const Field& fd = circuit.fields()[f];
    const char* kind = fd.kind == FieldKind::kInput      ? "input"
                       : fd.kind == FieldKind::kConstant ? "constant"
                                                         : "computed";
    a << "  - {name: " << quote(fd.full_name()) << ", width: " << fd.width << ", kind: " << kind
      << ", base: " << al.field_base[f];
    if (fd.alias_of >= 0) a << ", alias_of: " << quote(circuit.fields()[fd.alias_of].full_name());
    if (f < al.bit_channel.size() && !al.bit_channel[f].empty() && fd.alias_of < 0) {
      a << ", channels: [";  // scattered by channel reuse: bit b's channel
      for (std::size_t b = 0; b < al.bit_channel[f].size(); ++b) a << (b ? ", " : "") << al.bit_channel[f][b];
      a << "]";
    }
    if (have_schedule && fd.alias_of < 0) {
      const LiveRange& r = live[f];
      a << ", live: [" << r.start << ", ";
      if (r.forever)
        a << "end";
      else
        a << r.free_from() - 1;
      a << "]";
    }
    a << "}\n";
  }
  a << "pads:\n";
  for (std::size_t i = 0; i < al.pad_channel.size(); ++i)
    a << "  - {channel: " << al.pad_channel[i] << ", value: " << al.pad_value[i] << "}\n";
  a << "clears:  # channel reuse: the slot of `field` back to (0, 1) in the MLP of `layer`, 1 neuron per bit\n";
  for (const ChannelClear& cl : al.clears)
    a << "  - {field: " << quote(circuit.fields()[cl.field].full_name()) << ", layer: " << cl.layer << "}\n";
  return write_file(dir / "allocation.yaml", a.str());
}

sdk::Expected<Schedule> load_schedule(const Circuit& circuit, const std::filesystem::path& file) {
  QGPU_ASSIGN_OR_RETURN(auto root, read_yaml(file, kScheduleFormat));
  Schedule s;
  QGPU_ASSIGN_OR_RETURN(auto nl, get<int>(file, root, "num_layers"));
  s.num_layers = nl;
  YAML::Node layers = root["layers"], ops = root["ops"];
  if (!layers || !layers.IsSequence() || static_cast<int>(layers.size()) != nl)
    return sdk::error_at(at(file, root), sdk::ErrorCode::kParseError, "'layers' must list num_layers entries");
  for (const YAML::Node& l : layers) {
    QGPU_ASSIGN_OR_RETURN(auto n, get<std::int64_t>(file, l, "mlp_neurons"));
    QGPU_ASSIGN_OR_RETURN(auto h, get<std::int64_t>(file, l, "key_heads"));
    s.use.push_back(LayerUse{n, h});
  }
  if (!ops || !ops.IsSequence() || ops.size() != circuit.ops().size())
    return sdk::error_at(at(file, ops ? ops : root), sdk::ErrorCode::kParseError,
                         "'ops' must list the circuit's " + std::to_string(circuit.ops().size()) + " ops");
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const YAML::Node& o = ops[i];
    QGPU_ASSIGN_OR_RETURN(auto name, get<std::string>(file, o, "name"));
    if (name != circuit.ops()[i].name)
      return sdk::error_at(
          at(file, o), sdk::ErrorCode::kParseError,
          "op " + std::to_string(i) + " is '" + name + "', the circuit has '" + circuit.ops()[i].name + "'");
    QGPU_ASSIGN_OR_RETURN(auto layer, get<int>(file, o, "layer"));
    if (layer < 0 || layer >= nl)
      return sdk::error_at(at(file, o), sdk::ErrorCode::kParseError, "op " + name + ": layer out of range");
    s.op_layer.push_back(layer);
    int first = -1;
    if (!circuit.ops()[i].is_mlp) {
      QGPU_ASSIGN_OR_RETURN(first, get<int>(file, o, "first_head"));
    }
    s.op_first_head.push_back(first);
  }
  return s;
}

sdk::Expected<Allocation> load_allocation(const Circuit& circuit, const std::filesystem::path& file) {
  QGPU_ASSIGN_OR_RETURN(auto root, read_yaml(file, kAllocationFormat));
  Allocation a;
  QGPU_ASSIGN_OR_RETURN(auto hs, get<std::int64_t>(file, root, "hidden_size"));
  a.hidden_size = hs;
  YAML::Node ch = root["const_hi"];
  if (!ch) return sdk::error_at(at(file, root), sdk::ErrorCode::kParseError, "missing key 'const_hi'");
  QGPU_ASSIGN_OR_RETURN(a.const_hi, get<int>(file, ch, "channel"));
  QGPU_ASSIGN_OR_RETURN(a.mute, get<int>(file, root, "mute"));
  QGPU_ASSIGN_OR_RETURN(a.channels_used, get<int>(file, root, "channels_used"));
  YAML::Node fields = root["fields"];
  if (!fields || !fields.IsSequence() || fields.size() != circuit.fields().size())
    return sdk::error_at(at(file, fields ? fields : root), sdk::ErrorCode::kParseError,
                         "'fields' must list the circuit's " + std::to_string(circuit.fields().size()) + " fields");
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const YAML::Node& f = fields[i];
    QGPU_ASSIGN_OR_RETURN(auto name, get<std::string>(file, f, "name"));
    QGPU_ASSIGN_OR_RETURN(auto width, get<int>(file, f, "width"));
    QGPU_ASSIGN_OR_RETURN(auto base, get<int>(file, f, "base"));
    const Field& cf = circuit.fields()[i];
    if (name != cf.full_name() || width != cf.width)
      return sdk::error_at(at(file, f), sdk::ErrorCode::kParseError,
                           "field " + std::to_string(i) + " is '" + name + "' (" + std::to_string(width) +
                               " bits), the circuit has '" + cf.full_name() + "' (" + std::to_string(cf.width) +
                               " bits)");
    if (base < 0 || base + width > hs)
      return sdk::error_at(at(file, f), sdk::ErrorCode::kParseError, "field " + name + ": base outside the residual");
    a.field_base.push_back(base);
    std::vector<int> bits;
    if (YAML::Node chn = f["channels"]) {
      QGPU_ASSIGN_OR_RETURN(auto v, get<std::vector<int>>(file, f, "channels"));
      if (static_cast<int>(v.size()) != width)
        return sdk::error_at(
            at(file, chn), sdk::ErrorCode::kParseError,
            "field " + name + ": " + std::to_string(v.size()) + " channels for " + std::to_string(width) + " bits");
      for (int ch : v)
        if (ch < 0 || ch >= hs)
          return sdk::error_at(at(file, chn), sdk::ErrorCode::kParseError,
                               "field " + name + ": channel " + std::to_string(ch) + " outside the residual");
      bits = std::move(v);
    }
    a.bit_channel.push_back(std::move(bits));
  }
  // Aliases use their root's channels.
  for (std::size_t i = 0; i < circuit.fields().size(); ++i)
    if (circuit.fields()[i].alias_of >= 0) a.bit_channel[i] = a.bit_channel[circuit.fields()[i].alias_of];
  if (std::all_of(a.bit_channel.begin(), a.bit_channel.end(), [](const std::vector<int>& v) { return v.empty(); }))
    a.bit_channel.clear();
  YAML::Node pads = root["pads"];
  if (pads && pads.IsSequence())
    for (const YAML::Node& p : pads) {
      QGPU_ASSIGN_OR_RETURN(auto pc, get<int>(file, p, "channel"));
      QGPU_ASSIGN_OR_RETURN(auto pv, get<double>(file, p, "value"));
      a.pad_channel.push_back(pc);
      a.pad_value.push_back(pv);
    }
  if (root["live_peak"]) {
    QGPU_ASSIGN_OR_RETURN(a.live_peak, get<int>(file, root, "live_peak"));
  }
  YAML::Node clears = root["clears"];
  if (clears && !clears.IsNull()) {
    if (!clears.IsSequence())
      return sdk::error_at(at(file, clears), sdk::ErrorCode::kParseError, "'clears' must be a list");
    for (const YAML::Node& cn : clears) {
      QGPU_ASSIGN_OR_RETURN(auto name, get<std::string>(file, cn, "field"));
      QGPU_ASSIGN_OR_RETURN(auto layer, get<int>(file, cn, "layer"));
      const int f = circuit.find_field(name);
      if (f < 0)
        return sdk::error_at(at(file, cn), sdk::ErrorCode::kParseError,
                             "clear of '" + name + "': the circuit has no such field");
      if (layer < 0)
        return sdk::error_at(at(file, cn), sdk::ErrorCode::kParseError, "clear of " + name + ": negative layer");
      a.clears.push_back(ChannelClear{f, layer});
    }
  }
  mark_free_channels(circuit, a);
  return a;
}

sdk::Expected<Allocation> load_allocation(const Circuit& circuit, const Target& target, const Schedule& schedule,
                                          const std::filesystem::path& file) {
  auto a = load_allocation(circuit, file);
  if (!a) return a.status();
  QGPU_RETURN_IF_ERROR(check_schedule(circuit, target, schedule));
  sdk::Status st = check_allocation(circuit, target, schedule, *a);
  if (!st.is_ok()) return sdk::error_at(file.string(), st.code(), st.message());
  return a;
}

}  // namespace qgpu::weights
