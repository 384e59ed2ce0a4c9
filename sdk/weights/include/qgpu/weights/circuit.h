// A circuit: named residual fields plus the operations that compute them.
//
// The residual stream is a space of named bit fields (owner/field/bit), never
// raw channel indices: a bit b lives on one channel as +u (1) or -u (0), so
// every bit contributes exactly u^2 to the sum of squares whatever its value
// (docs/CIRCUITS.md, "residual norm") and NOT is free (an affine read: 1 - b).
// A computed field starts as the placeholder 0 (-u) in every token's embedding
// and is written once, by +2y·u, by one operation. Channel indices are
// assigned only at the end, by allocate() in compile.h.
//
// Operations are MLP neuron groups (threshold logic in SwiGLU) and Gated
// DeltaNet ports (RAM reads, conv1d reads of earlier tokens). They are built
// through this explicit builder (no globals) and placed into layers by
// schedule() in compile.h; the primitives in primitives.h build them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "qgpu/sdk/status.h"

namespace qgpu::weights {

// One bit of a field, read as itself (neg = false) or as its NOT (neg = true).
struct Bit {
  int field = -1;
  int bit = 0;
  bool neg = false;
  Bit operator!() const { return Bit{field, bit, !neg}; }
  bool operator==(const Bit&) const = default;
};
using Word = std::vector<Bit>;  // bit 0 first
Word operator~(const Word& w);  // NOT of every bit (free)
// Bits [pos, pos + width) of w (a view: no op, no channels).
inline Word slice(const Word& w, int pos, int width) {
  return Word(w.begin() + pos, w.begin() + pos + width);
}
// lo's bits, then hi's.
inline Word concat(const Word& lo, Word hi) {
  hi.insert(hi.begin(), lo.begin(), lo.end());
  return hi;
}

enum class FieldKind { kInput, kComputed, kConstant };

struct Field {
  std::string owner;
  std::string name;
  int width = 0;
  FieldKind kind = FieldKind::kComputed;
  int alias_of = -1;       // an overwrite: shares the slot (channels) of this field
  int superseded_by = -1;  // a later field that overwrote this slot
  std::string full_name() const { return owner + "." + name; }
};

// A weighted bit in a linear form; the bit's normalized value is 0 or 1.
struct Term {
  Bit bit;
  double weight = 0;
};
// Σ weight·bit + bias, in normalized units (an input RMSNorm maps a 1 bit to 1).
struct Affine {
  std::vector<Term> terms;
  double bias = 0;  // carried by the constant channels at emission
};

// One SwiGLU neuron: its output silu(gate)·up is added to each `down` bit with
// the given weight (in bit units: the bit's value changes by w·output; NOT b's by w).
struct Neuron {
  Affine gate;
  Affine up;
  std::vector<Term> down;
};

struct MlpOp {
  std::vector<Neuron> neurons;
};

// A named RAM held in Gated DeltaNet state: `rows` rows of `width` bits, each
// bit stored in the state as the pair (b, 1-b) (a dual-rail row: its read magnitude
// does not depend on the data, docs/CIRCUITS.md §3); one write port, read ports anywhere (each read port is
// a replica in some layer, written by the same tokens as every other replica).
struct Ram {
  std::string owner;
  std::string name;
  int rows = 0;
  int width = 0;
  bool has_write = false;
  Word wr_addr;
  Word wr_data;
  std::optional<Bit> wr_enable;
  std::optional<Bit> clear;  // ram_clear: where 1, every row is erased before the token's write
};

struct GdnOp {
  enum class Kind { kRamRead, kPrevious } kind = Kind::kRamRead;
  int ram = -1;  // kRamRead
  Word addr;     // kRamRead: binary read address
  Word src;      // kPrevious: the field read `lag` tokens back
  int lag = 0;
  std::optional<Bit> enable;  // output surfaces only where enable is 1 (z gate)
  int out_field = -1;
  int out_offset = 0;  // kRamRead: first bit of out_field this port writes (shared read fields)
};

// One read port of a shared read field (Circuit::ram_read_shared): RAM `ram` read at
// `addr` into bits [offset, offset + width) of the field, z-gated by `enable`.
struct RamReadSpec {
  int ram = -1;
  Word addr;
  Bit enable;
  int offset = 0;
};

struct Op {
  std::string name;
  bool is_mlp = true;
  MlpOp mlp;
  GdnOp gdn;
  std::vector<Bit> reads;   // bits this op needs (deduplicated, negation ignored)
  std::vector<Bit> writes;  // bits this op writes
  int overwrites = -1;      // field whose slot this op overwrites (clear/overwrite), or -1
  // MLP: the enable in effect when it was added (Circuit::push_enable): every neuron
  // is exactly 0 on tokens where it is 0. GDN ops are gated by gdn.enable instead.
  std::optional<Bit> guard;
};

class Circuit {
 public:
  explicit Circuit(std::string name = "circuit");

  const std::string& name() const { return name_; }

  // A field set by the token embedding (owner/name, width bits).
  sdk::Expected<Word> input(const std::string& owner, const std::string& name, int width);
  // A placeholder field that exactly one operation writes.
  sdk::Expected<Word> computed(const std::string& owner, const std::string& name, int width);
  // The constant 1 (a channel fixed at +u); !one() is the constant 0.
  Bit one() const { return Bit{0, 0, false}; }
  Bit zero() const { return Bit{0, 0, true}; }

  // While a guard is active, every new MLP neuron is gated by `enable`: it is
  // exactly 0 (output untouched, slot stays as it was) on tokens where enable is 0.
  void push_enable(Bit enable) { enables_.push_back(enable); }
  void pop_enable() { enables_.pop_back(); }
  std::optional<Bit> enable() const;

  // Adds an MLP operation writing `writes`. Checks that every written bit is a
  // computed placeholder written by nobody else, and that no read names a slot
  // that was overwritten.
  sdk::Status add_mlp(const std::string& name, MlpOp op, int overwrites = -1);
  sdk::Expected<int> add_ram(const std::string& owner, const std::string& name, int rows, int width);
  sdk::Status ram_write(int ram, const Word& addr, const Word& data, std::optional<Bit> we);
  sdk::Expected<Word> ram_read(int ram, const std::string& name, const Word& addr, std::optional<Bit> enable);
  // On tokens where `clear` is 1, every row of the RAM is erased (reads 0, as never
  // written) before that token's own write: the Gated DeltaNet decay of the RAM's heads
  // is exactly 0 there and exactly 1 elsewhere (docs/CIRCUITS.md §3). Declare it before
  // the first read port; `clear` must be final in every layer holding a replica.
  sdk::Status ram_clear(int ram, Bit clear);
  // One field written by several read ports (each its own replica and heads, in
  // whatever layer the scheduler puts it). Ports whose bit ranges overlap must be
  // exclusive: their enables are distinct positive bits of one group declared
  // one-hot, so on any token at most one of them adds its row and the others add
  // exactly 0. Every bit of the field (width = the largest offset + ram width) is
  // covered by some port; a bit is final after the last port writing it.
  sdk::Expected<Word> ram_read_shared(const std::string& owner, const std::string& name,
                                      const std::vector<RamReadSpec>& ports);
  // The caller's promise that at most one bit of `bits` (positive bits of one
  // field) is 1 on any token; lookup() declares its outputs when every cube sets
  // at most one bit. Read ports of a shared field may then overlap under them.
  sdk::Status declare_one_hot(const Word& bits);
  // Whether a and b are distinct positive bits of one declared one-hot group.
  bool exclusive(Bit a, Bit b) const;
  sdk::Expected<Word> previous(const std::string& name, const Word& src, int lag, std::optional<Bit> enable);
  // A new field aliasing `old`'s slot (for clear/overwrite); `old` may no longer be read afterwards.
  sdk::Expected<Word> alias(const Word& old, const std::string& name);
  // Token modes (docs/CIRCUITS.md §4, "Token modes"): `e` splits the circuit's tokens in two. A
  // computed field that is exactly 0 on every token where e is 0 (every writer gated
  // by e, or by a bit that is itself 0 there) and whose every reader is gated the
  // same way may share channels, while both are live, with a field that is exactly 0
  // wherever e is 1 (field_modes in compile.h finds them; the allocator pairs them
  // and gates their clears). One mode bit per circuit: a positive bit of an input or
  // computed field.
  sdk::Status declare_mode_bit(Bit e);
  std::optional<Bit> mode_bit() const { return mode_bit_; }
  // Marks the fields of `w` as read back after the last layer: with channel reuse
  // (Target::reuse_channels) their channels are never given to another field.
  sdk::Status mark_output(const Word& w);
  bool is_output(int field) const;

  const std::vector<Field>& fields() const { return fields_; }
  const std::vector<Op>& ops() const { return ops_; }
  const std::vector<Ram>& rams() const { return rams_; }
  int find_field(const std::string& full_name) const;  // -1 if absent
  std::string bit_name(Bit b) const;                   // "owner.field[3]" or "!owner.field[3]"

 private:
  sdk::Status check_reads(const std::string& op, const std::vector<Bit>& reads, int allowed = -1) const;
  sdk::Status check_read_port(int ram, const Word& addr, const std::string& what) const;
  sdk::Expected<Op> read_port(int ram, const Word& addr, std::optional<Bit> enable, const std::string& name) const;
  void add_port(Op op, int out_field, int offset);
  sdk::Expected<Word> new_field(const std::string& owner, const std::string& name, int width, FieldKind kind);

  std::string name_;
  std::vector<Field> fields_;
  std::vector<Op> ops_;
  std::vector<Ram> rams_;
  std::vector<std::vector<int>> writer_;  // per field, per bit: op index or -1
  std::vector<Bit> enables_;
  std::vector<int> outputs_;     // fields marked with mark_output
  std::vector<Word> one_hot_;    // groups declared one-hot (declare_one_hot)
  std::optional<Bit> mode_bit_;  // declare_mode_bit
};

// The constant word v, bit 0 first: the constant-one bit and its NOT (no channels, no ops).
inline Word constant_word(const Circuit& c, std::uint64_t v, int width) {
  Word w;
  for (int i = 0; i < width; ++i) w.push_back(((v >> i) & 1) ? c.one() : c.zero());
  return w;
}

}  // namespace qgpu::weights
