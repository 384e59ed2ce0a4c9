#include "qgpu/weights/circuit.h"

#include <algorithm>
#include <set>
#include <utility>

#include "qgpu/weights/numerics.h"

namespace qgpu::weights {

Word operator~(const Word& w) {
  Word out = w;
  for (Bit& b : out) b = !b;
  return out;
}

Circuit::Circuit(std::string name) : name_(std::move(name)) {
  fields_.push_back(Field{"const", "one", 1, FieldKind::kConstant});
  writer_.push_back({-1});
}

std::optional<Bit> Circuit::enable() const {
  if (enables_.empty()) return std::nullopt;
  return enables_.back();
}

sdk::Expected<Word> Circuit::new_field(const std::string& owner, const std::string& name, int width, FieldKind kind) {
  if (width <= 0) return sdk::invalid_argument("field " + owner + "." + name + ": width must be positive");
  if (owner.empty() || name.empty()) return sdk::invalid_argument("field needs an owner and a name");
  if (find_field(owner + "." + name) >= 0)
    return sdk::invalid_argument("field " + owner + "." + name + " declared twice");
  fields_.push_back(Field{owner, name, width, kind});
  writer_.emplace_back(width, -1);
  int id = static_cast<int>(fields_.size()) - 1;
  Word w;
  for (int i = 0; i < width; ++i) w.push_back(Bit{id, i, false});
  return w;
}

sdk::Expected<Word> Circuit::input(const std::string& owner, const std::string& name, int width) {
  return new_field(owner, name, width, FieldKind::kInput);
}

sdk::Expected<Word> Circuit::computed(const std::string& owner, const std::string& name, int width) {
  return new_field(owner, name, width, FieldKind::kComputed);
}

int Circuit::find_field(const std::string& full_name) const {
  for (std::size_t i = 0; i < fields_.size(); ++i)
    if (fields_[i].full_name() == full_name) return static_cast<int>(i);
  return -1;
}

std::string Circuit::bit_name(Bit b) const {
  if (b.field < 0 || b.field >= static_cast<int>(fields_.size())) return "<invalid bit>";
  return std::string(b.neg ? "!" : "") + fields_[b.field].full_name() + "[" + std::to_string(b.bit) + "]";
}

sdk::Status Circuit::check_reads(const std::string& op, const std::vector<Bit>& reads, int allowed) const {
  for (const Bit& b : reads) {
    if (b.field < 0 || b.field >= static_cast<int>(fields_.size()) || b.bit < 0 || b.bit >= fields_[b.field].width)
      return sdk::invalid_argument("op " + op + ": reads an invalid bit");
    if (fields_[b.field].superseded_by >= 0 && b.field != allowed)
      return sdk::invalid_argument("op " + op + ": reads " + bit_name(b) + ", whose slot was overwritten by " +
                                   fields_[fields_[b.field].superseded_by].full_name());
  }
  return sdk::Status::ok();
}

namespace {
void add_unique(std::vector<Bit>& v, Bit b) {
  b.neg = false;
  if (std::find(v.begin(), v.end(), b) == v.end()) v.push_back(b);
}
}  // namespace

sdk::Status Circuit::add_mlp(const std::string& name, MlpOp op, int overwrites) {
  Op o;
  o.name = name;
  o.is_mlp = true;
  o.overwrites = overwrites;
  o.guard = enable();
  for (Neuron& n : op.neurons) {
    if (auto en = enable()) {
      // Off-token guard: gate gets -2^17 on !enable; a constant up (bias 1) becomes `enable`.
      n.gate.terms.push_back(Term{!*en, -kEnableGain});
      if (n.up.terms.empty() && n.up.bias == 1) n.up = Affine{{Term{*en, 1}}, 0};
    }
    for (const Term& t : n.gate.terms) add_unique(o.reads, t.bit);
    for (const Term& t : n.up.terms) add_unique(o.reads, t.bit);
    for (const Term& t : n.down) add_unique(o.writes, t.bit);
  }
  QGPU_RETURN_IF_ERROR(check_reads(name, o.reads, overwrites));
  int index = static_cast<int>(ops_.size());
  for (const Bit& b : o.writes) {
    const Field& f = fields_[b.field];
    if (f.kind != FieldKind::kComputed)
      return sdk::invalid_argument("op " + name + ": writes " + bit_name(b) + ", which is not a computed field");
    int w = writer_[b.field][b.bit];
    if (w >= 0 && w != index)
      return sdk::invalid_argument("op " + name + ": " + bit_name(b) + " is already written by op " + ops_[w].name);
  }
  for (const Bit& b : o.writes) writer_[b.field][b.bit] = index;
  o.mlp = std::move(op);
  ops_.push_back(std::move(o));
  return sdk::Status::ok();
}

sdk::Expected<int> Circuit::add_ram(const std::string& owner, const std::string& name, int rows, int width) {
  if (rows <= 0 || width <= 0)
    return sdk::invalid_argument("ram " + owner + "." + name + ": rows and width must be positive");
  for (const Ram& r : rams_)
    if (r.owner == owner && r.name == name)
      return sdk::invalid_argument("ram " + owner + "." + name + " declared twice");
  Ram r;
  r.owner = owner;
  r.name = name;
  r.rows = rows;
  r.width = width;
  rams_.push_back(std::move(r));
  return static_cast<int>(rams_.size()) - 1;
}

sdk::Status Circuit::ram_clear(int ram, Bit clear) {
  if (ram < 0 || ram >= static_cast<int>(rams_.size())) return sdk::invalid_argument("ram_clear: unknown ram");
  Ram& r = rams_[ram];
  const std::string rn = r.owner + "." + r.name;
  if (r.clear) return sdk::unsupported("ram " + rn + ": one clear bit per ram");
  for (const Op& o : ops_)
    if (!o.is_mlp && o.gdn.kind == GdnOp::Kind::kRamRead && o.gdn.ram == ram)
      return sdk::invalid_argument("ram " + rn + ": declare the clear bit before the first read port");
  QGPU_RETURN_IF_ERROR(check_reads("ram " + rn + " clear", {clear}));
  r.clear = clear;
  return sdk::Status::ok();
}

sdk::Status Circuit::ram_write(int ram, const Word& addr, const Word& data, std::optional<Bit> we) {
  if (ram < 0 || ram >= static_cast<int>(rams_.size())) return sdk::invalid_argument("ram_write: unknown ram");
  Ram& r = rams_[ram];
  std::string rn = r.owner + "." + r.name;
  if (r.has_write) return sdk::unsupported("ram " + rn + ": one write port per ram (a head takes one key per token)");
  if (static_cast<int>(data.size()) != r.width)
    return sdk::invalid_argument("ram " + rn + ": write data has " + std::to_string(data.size()) + " bits, width is " +
                                 std::to_string(r.width));
  if (addr.empty() || addr.size() > 30 || (1LL << addr.size()) < r.rows)
    return sdk::invalid_argument("ram " + rn + ": write address of " + std::to_string(addr.size()) +
                                 " bits cannot reach " + std::to_string(r.rows) + " rows");
  for (const Op& o : ops_)
    if (!o.is_mlp && o.gdn.kind == GdnOp::Kind::kRamRead && o.gdn.ram == ram)
      return sdk::invalid_argument("ram " + rn + ": declare the write port before the first read port");
  std::vector<Bit> reads;
  for (Bit b : addr) reads.push_back(b);
  for (Bit b : data) reads.push_back(b);
  if (we) reads.push_back(*we);
  QGPU_RETURN_IF_ERROR(check_reads("ram " + rn + " write port", reads));
  r.has_write = true;
  r.wr_addr = addr;
  r.wr_data = data;
  r.wr_enable = we;
  return sdk::Status::ok();
}

sdk::Status Circuit::check_read_port(int ram, const Word& addr, const std::string& what) const {
  if (ram < 0 || ram >= static_cast<int>(rams_.size())) return sdk::invalid_argument(what + ": unknown ram");
  const Ram& r = rams_[ram];
  std::string rn = r.owner + "." + r.name;
  if (!r.has_write) return sdk::invalid_argument("ram " + rn + ": read port before any write port");
  if (addr.empty() || addr.size() > 30 || (1LL << addr.size()) < r.rows)
    return sdk::invalid_argument("ram " + rn + ": read address of " + std::to_string(addr.size()) +
                                 " bits cannot reach " + std::to_string(r.rows) + " rows");
  return sdk::Status::ok();
}

sdk::Expected<Op> Circuit::read_port(int ram, const Word& addr, std::optional<Bit> enable,
                                     const std::string& name) const {
  const Ram& r = rams_[ram];
  Op o;
  o.name = r.owner + "." + r.name + ".read." + name;
  o.is_mlp = false;
  o.gdn.kind = GdnOp::Kind::kRamRead;
  o.gdn.ram = ram;
  o.gdn.addr = addr;
  o.gdn.enable = enable;
  for (Bit b : addr) add_unique(o.reads, b);
  if (enable) add_unique(o.reads, *enable);
  // The replica's write port is part of this op: its inputs must be ready in the same layer.
  for (Bit b : r.wr_addr) add_unique(o.reads, b);
  for (Bit b : r.wr_data) add_unique(o.reads, b);
  if (r.wr_enable) add_unique(o.reads, *r.wr_enable);
  if (r.clear) add_unique(o.reads, *r.clear);
  QGPU_RETURN_IF_ERROR(check_reads(o.name, o.reads));
  return o;
}

void Circuit::add_port(Op o, int out_field, int offset) {
  const int width = rams_[o.gdn.ram].width;
  o.gdn.out_field = out_field;
  o.gdn.out_offset = offset;
  const int index = static_cast<int>(ops_.size());
  for (int b = offset; b < offset + width; ++b) {
    o.writes.push_back(Bit{out_field, b, false});
    if (writer_[out_field][b] < 0) writer_[out_field][b] = index;  // shared bits: the first port
  }
  ops_.push_back(std::move(o));
}

sdk::Expected<Word> Circuit::ram_read(int ram, const std::string& name, const Word& addr, std::optional<Bit> enable) {
  QGPU_RETURN_IF_ERROR(check_read_port(ram, addr, "ram_read"));
  auto o = read_port(ram, addr, enable, name);
  if (!o) return o.status();
  const Ram& r = rams_[ram];
  auto out = computed(r.owner, name, r.width);
  if (!out) return out.status();
  add_port(std::move(*o), out->front().field, 0);
  return out;
}

sdk::Status Circuit::declare_one_hot(const Word& bits) {
  if (bits.empty()) return sdk::invalid_argument("declare_one_hot: no bits");
  for (std::size_t i = 0; i < bits.size(); ++i) {
    const Bit& b = bits[i];
    if (b.field < 0 || b.field >= static_cast<int>(fields_.size()) || b.bit < 0 || b.bit >= fields_[b.field].width)
      return sdk::invalid_argument("declare_one_hot: an invalid bit");
    if (b.neg || b.field != bits.front().field)
      return sdk::invalid_argument("declare_one_hot: " + bit_name(b) +
                                   ": the bits must be positive bits of one field (" +
                                   fields_[bits.front().field].full_name() + ")");
    if (std::find(bits.begin(), bits.begin() + static_cast<std::ptrdiff_t>(i), b) !=
        bits.begin() + static_cast<std::ptrdiff_t>(i))
      return sdk::invalid_argument("declare_one_hot: " + bit_name(b) + " named twice");
  }
  one_hot_.push_back(bits);
  return sdk::Status::ok();
}

bool Circuit::exclusive(Bit a, Bit b) const {
  if (a.neg || b.neg || a == b) return false;
  for (const Word& g : one_hot_)
    if (std::find(g.begin(), g.end(), a) != g.end() && std::find(g.begin(), g.end(), b) != g.end()) return true;
  return false;
}

sdk::Expected<Word> Circuit::ram_read_shared(const std::string& owner, const std::string& name,
                                             const std::vector<RamReadSpec>& ports) {
  const std::string what = "ram_read_shared " + owner + "." + name;
  if (ports.empty()) return sdk::invalid_argument(what + ": no read ports");
  int width = 0;
  std::vector<Op> ops;
  for (std::size_t k = 0; k < ports.size(); ++k) {
    const RamReadSpec& p = ports[k];
    const std::string pw = what + ": port " + std::to_string(k);
    QGPU_RETURN_IF_ERROR(check_read_port(p.ram, p.addr, pw));
    if (p.offset < 0) return sdk::invalid_argument(pw + ": negative offset " + std::to_string(p.offset));
    auto o = read_port(p.ram, p.addr, p.enable, name + ".port" + std::to_string(k));
    if (!o) return o.status();
    ops.push_back(std::move(*o));
    width = std::max(width, p.offset + rams_[p.ram].width);
  }
  std::vector<int> cover(static_cast<std::size_t>(width), 0);
  for (const RamReadSpec& p : ports)
    for (int b = p.offset; b < p.offset + rams_[p.ram].width; ++b) ++cover[b];
  for (int b = 0; b < width; ++b)
    if (cover[b] == 0) return sdk::invalid_argument(what + ": bit " + std::to_string(b) + " is written by no port");
  // Overlapping ports must never be enabled together: a second row would add to the first.
  auto describe = [&](std::size_t k) {
    const Ram& r = rams_[ports[k].ram];
    return "port " + std::to_string(k) + " (ram " + r.owner + "." + r.name + ", enable " + bit_name(ports[k].enable) +
           ")";
  };
  for (std::size_t i = 0; i < ports.size(); ++i)
    for (std::size_t j = i + 1; j < ports.size(); ++j) {
      const int lo = std::max(ports[i].offset, ports[j].offset);
      const int hi = std::min(ports[i].offset + rams_[ports[i].ram].width, ports[j].offset + rams_[ports[j].ram].width);
      if (lo >= hi || exclusive(ports[i].enable, ports[j].enable)) continue;
      return sdk::invalid_argument(what + ": " + describe(i) + " and " + describe(j) + " both write bits " +
                                   std::to_string(lo) + ".." + std::to_string(hi - 1) +
                                   " but their enables are not distinct bits of one group declared one-hot "
                                   "(Circuit::declare_one_hot, or a lookup whose cubes set at most one bit)");
    }
  auto out = computed(owner, name, width);
  if (!out) return out.status();
  for (std::size_t k = 0; k < ports.size(); ++k) add_port(std::move(ops[k]), out->front().field, ports[k].offset);
  return out;
}

sdk::Expected<Word> Circuit::previous(const std::string& name, const Word& src, int lag, std::optional<Bit> enable) {
  if (lag < 1 || lag > 3)
    return sdk::invalid_argument("previous " + name + ": lag " + std::to_string(lag) +
                                 " outside the conv1d window (1..3)");
  if (src.empty()) return sdk::invalid_argument("previous " + name + ": empty source");
  // A copy: computed() adds a field, which may move fields_ (a reference would dangle).
  const std::string owner = fields_[src.front().field].owner;
  auto out = computed(owner, name, static_cast<int>(src.size()));
  if (!out) return out.status();
  Op o;
  o.name = owner + "." + name;
  o.is_mlp = false;
  o.gdn.kind = GdnOp::Kind::kPrevious;
  o.gdn.src = src;
  o.gdn.lag = lag;
  o.gdn.enable = enable;
  o.gdn.out_field = out->front().field;
  for (Bit b : src) add_unique(o.reads, b);
  if (enable) add_unique(o.reads, *enable);
  QGPU_RETURN_IF_ERROR(check_reads(o.name, o.reads));
  for (Bit b : *out) o.writes.push_back(b);
  int index = static_cast<int>(ops_.size());
  for (Bit b : *out) writer_[b.field][b.bit] = index;
  ops_.push_back(std::move(o));
  return out;
}

sdk::Expected<Word> Circuit::alias(const Word& old, const std::string& name) {
  if (old.empty()) return sdk::invalid_argument("alias " + name + ": empty word");
  int fid = old.front().field;
  for (std::size_t i = 0; i < old.size(); ++i)
    if (old[i].field != fid || old[i].bit != static_cast<int>(i) || old[i].neg)
      return sdk::invalid_argument("alias " + name + ": must name a whole field, bit 0 first, positive rails");
  Field& f = fields_[fid];
  if (static_cast<int>(old.size()) != f.width)
    return sdk::invalid_argument("alias " + name + ": must name a whole field");
  if (f.kind != FieldKind::kComputed && f.kind != FieldKind::kInput)
    return sdk::invalid_argument("alias " + name + ": cannot overwrite a constant");
  if (f.superseded_by >= 0)
    return sdk::invalid_argument("alias " + name + ": " + f.full_name() + " was already overwritten");
  std::string owner = f.owner;
  auto out = computed(owner, name, f.width);
  if (!out) return out.status();
  int root = fields_[fid].alias_of >= 0 ? fields_[fid].alias_of : fid;
  fields_.back().alias_of = root;
  fields_[fid].superseded_by = out->front().field;
  return out;
}

sdk::Status Circuit::declare_mode_bit(Bit e) {
  if (mode_bit_) return sdk::invalid_argument("declare_mode_bit: the circuit has a mode bit, " + bit_name(*mode_bit_));
  if (e.field <= 0 || e.field >= static_cast<int>(fields_.size()) || e.bit < 0 || e.bit >= fields_[e.field].width)
    return sdk::invalid_argument("declare_mode_bit: an invalid bit");
  if (e.neg) return sdk::invalid_argument("declare_mode_bit: " + bit_name(e) + " must be a positive bit");
  if (fields_[e.field].superseded_by >= 0 || fields_[e.field].alias_of >= 0)
    return sdk::invalid_argument("declare_mode_bit: " + bit_name(e) + " is an overwritten or overwriting field");
  mode_bit_ = e;
  return sdk::Status::ok();
}

sdk::Status Circuit::mark_output(const Word& w) {
  for (const Bit& b : w) {
    if (b.field < 0 || b.field >= static_cast<int>(fields_.size()) || b.bit < 0 || b.bit >= fields_[b.field].width)
      return sdk::invalid_argument("mark_output: an invalid bit");
    if (!is_output(b.field)) outputs_.push_back(b.field);
  }
  return sdk::Status::ok();
}

bool Circuit::is_output(int field) const {
  return std::find(outputs_.begin(), outputs_.end(), field) != outputs_.end();
}

}  // namespace qgpu::weights
