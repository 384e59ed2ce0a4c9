#include "launch_codec.h"

#include <optional>

#include "interp.h"
#include "protocol.h"
#include "qgpu/weights/state.h"
#include "records.h"
#include "writeback.h"

namespace qgpu::simt {
namespace {

// Kinds only the host feeds: a model that generates one has gone wrong.
bool never_generated(RecordKind k) {
  return k == RecordKind::kRun || k == RecordKind::kLaunch || k == RecordKind::kRom || k == RecordKind::kLive ||
         k == RecordKind::kBound;
}

class SimtLaunchCodec final : public sdk::LaunchCodec {
 public:
  SimtLaunchCodec(const Program& program, std::vector<sdk::LaunchArg> args, const SimtCircuit& circuit,
                  MemoryLayout layout)
      : program_(program), args_(std::move(args)), circuit_(circuit), layout_(std::move(layout)) {}

  sdk::Status encode_prompt() {
    auto records = simt::encode_prompt(program_, args_);
    if (!records) return records.status();
    for (std::size_t i = 0; i < records->size(); ++i) {
      const Record& r = (*records)[i];
      auto ids = circuit::record_token_ids(circuit_.machine().fd.records, r);
      if (!ids) return ids.status().with_context("prompt record " + std::to_string(i) + " (" + to_text(r) + ")");
      sdk::PromptRecord p{to_text(r), std::move(*ids)};
      for (std::int64_t& id : p.rows) id -= circuit_.first_id();
      prompt_.push_back(std::move(p));
    }
    return sdk::Status::ok();
  }

  const std::vector<sdk::PromptRecord>& prompt() const override { return prompt_; }

  sdk::Expected<sdk::GeneratedToken> accept(std::int64_t row) override {
    auto rec = token_record(row);
    if (!rec || never_generated(rec->kind))
      return sdk::internal_error("the model chose machine row " + std::to_string(row) + " (" +
                                 (rec ? to_text(*rec) : rec.status().message()) + "), which the machine never generates");
    const std::int64_t id = circuit_.first_id() + row;
    if (rec->kind == RecordKind::kData) {
      if (need_ == 0) return sdk::internal_error("a DATA token where a record header was due");
      current_.push_back(id);
      --need_;
    } else {
      if (need_ > 0)
        return sdk::internal_error("header " + to_text(*rec) + " while the record before still needs " +
                                   std::to_string(need_) + " DATA tokens");
      current_.assign(1, id);
      need_ = data_tokens(*rec);
    }
    sdk::GeneratedToken token;
    if (need_ > 0) return token;
    auto done = decode_tokens(current_, circuit_.first_id());
    if (!done || done->size() != 1)
      return sdk::internal_error("the generated record does not decode" +
                                 (done ? std::string() : ": " + done.status().message()));
    const Record& complete = done->front();
    if (complete.kind == RecordKind::kCta) cta_ = complete.cta;
    if (complete.kind == RecordKind::kExec) exec_ = complete;
    if (complete.kind == RecordKind::kFault) fault_ = complete;
    token.complete = true;
    token.halt = complete.kind == RecordKind::kHalt || complete.kind == RecordKind::kFault;
    token.record = to_text(complete);
    token.kind = static_cast<int>(complete.kind);
    token.kind_name = kind_name(complete.kind);
    if (complete.kind == RecordKind::kExec && static_cast<std::size_t>(complete.block) < program_.blocks.size())
      token.warp_instructions =
          static_cast<std::int64_t>(program_.blocks[static_cast<std::size_t>(complete.block)].slots.size());
    return token;
  }

  sdk::Expected<sdk::ExpectedLaunch> expected() override {
    auto lr = record_launch(program_, args_, {});
    if (!lr) return lr.status().with_context("the interpreter's run");
    auto ids = encode_tokens(lr->generated, circuit_.first_id());
    if (!ids) return ids.status().with_context("the expected stream");
    sdk::ExpectedLaunch e;
    e.rows = std::move(*ids);
    for (std::int64_t& id : e.rows) id -= circuit_.first_id();
    e.arrays = std::move(lr->result.arrays);  // none after a fault: read_arrays gives its error
    return e;
  }

  std::string mismatch(std::span<const std::int64_t> expected, std::span<const std::int64_t> generated,
                       std::string_view got) const override {
    std::vector<std::int64_t> want(expected.begin(), expected.end()), have(generated.begin(), generated.end());
    for (auto* v : {&want, &have})
      for (std::int64_t& id : *v) id += circuit_.first_id();
    auto mm = first_mismatch(want, have, circuit_.first_id());
    if (!mm) return "";
    if (!got.empty()) mm->got = std::string(got);
    return mm->to_string();
  }

  sdk::Expected<std::vector<sdk::LaunchArg>> read_arrays(const weights::StateView& state) const override {
    if (fault_) return fault_error(state);
    const circuit::MemoryRams& mem = circuit_.machine().memory;
    // Global memory: word w at the bank RAM and row of the circuit's memory layout.
    std::vector<std::vector<std::uint64_t>> banks(mem.rams.size());
    std::vector<std::int32_t> global(static_cast<std::size_t>(layout_.total_words), 0);
    for (int w = 0; w < layout_.total_words; ++w) {
      const circuit::BankRow at = circuit::bank_row(mem.layout, false, w);
      const std::size_t bank = static_cast<std::size_t>(at.ram);
      if (bank >= mem.rams.size())
        return sdk::internal_error("reading global memory: the machine has " + std::to_string(mem.rams.size()) +
                                   " memory RAMs, bank " + std::to_string(bank) + " is missing");
      if (banks[bank].empty()) {
        auto rows = weights::read_ram(circuit_.compiled(), mem.rams[bank], state);
        if (!rows) return rows.status().with_context("reading global memory bank " + std::to_string(bank));
        banks[bank] = std::move(*rows);
      }
      const auto& rows = banks[bank];
      const std::size_t row = static_cast<std::size_t>(at.row);
      if (row >= rows.size())
        return sdk::internal_error("reading global memory: word " + std::to_string(w) + " is past bank " +
                                   std::to_string(bank) + "'s " + std::to_string(rows.size()) + " rows");
      global[static_cast<std::size_t>(w)] = static_cast<std::int32_t>(static_cast<std::uint32_t>(rows[row]));
    }
    std::vector<sdk::LaunchArg> out;
    for (std::size_t i = 0; i < args_.size(); ++i) {
      if (!args_[i].is_array) continue;
      sdk::LaunchArg a;
      a.param = program_.params[i].name;
      a.is_array = true;
      const int b = layout_.base_word[i];
      a.array.assign(global.begin() + b, global.begin() + b + static_cast<std::ptrdiff_t>(args_[i].array.size()));
      out.push_back(std::move(a));
    }
    return out;
  }

  sdk::Expected<std::vector<std::vector<sdk::WordLocation>>> readout() const override {
    // Word w at the bank RAM and row of the memory layout, as read_arrays reads it.
    const circuit::MemoryRams& mem = circuit_.machine().memory;
    std::vector<std::vector<sdk::WordLocation>> out;
    for (std::size_t i = 0; i < args_.size(); ++i) {
      if (!args_[i].is_array) continue;
      std::vector<sdk::WordLocation> words;
      for (std::size_t j = 0; j < args_[i].array.size(); ++j) {
        const int w = layout_.base_word[i] + static_cast<int>(j);
        const circuit::BankRow at = circuit::bank_row(mem.layout, false, w);
        const weights::RamPlacement& p =
            circuit_.compiled().rams.at(static_cast<std::size_t>(mem.rams.at(static_cast<std::size_t>(at.ram))));
        if (p.replicas.empty())
          return sdk::internal_error("global memory bank " + std::to_string(at.ram) + " is in no layer");
        const weights::RamReplica& rep = p.replicas.front();
        words.push_back({rep.layer, rep.first_value_head, rep.value_heads, p.bits_per_head, at.row});
      }
      out.push_back(std::move(words));
    }
    return out;
  }

 private:
  // The error of the launch's FAULT, as the interpreter words it (memory_fault_error). The record
  // names the slot, the lane and the kind; the address is the faulting lane's address register as
  // the slot read it, out of the state the EXEC's pass left: the result of the block's last
  // earlier slot writing it (the sequencer's pending values, which the write-back would have
  // sent), else the register file's row — plus the instruction's offset.
  sdk::Status fault_error(const weights::StateView& state) const {
    const Record& f = *fault_;
    if (!exec_) return sdk::internal_error("the model generated " + to_text(f) + " before any EXEC");
    const Record& e = *exec_;
    const std::string at = to_text(f) + " after " + to_text(e);
    const int rows = program_.rows_per_block();
    if (e.block >= program_.blocks.size() || f.slot >= program_.blocks[e.block].slots.size())
      return sdk::internal_error("the model generated " + at + ", which names no instruction of the program");
    const std::vector<std::uint64_t> image = program_.image(layout_.param_values);
    auto instr = [&](std::uint32_t slot) {
      Instr in;
      decode(image[static_cast<std::size_t>(e.block) * rows + slot], in);
      return in;
    };
    const Instr in = instr(f.slot);
    const Format format = op_info(in.op).format;
    if (format != kFmtLoad && format != kFmtStore && format != kFmtAtom && format != kFmtCas)
      return sdk::internal_error("the model generated " + at + ", but `" + disassemble(in) +
                                 "` does not access memory");
    if (!((e.lanes >> f.lane) & 1))
      return sdk::internal_error("the model generated " + at + ", but the lane does not run the block");
    int writer = -1;
    for (std::uint32_t j = 0; j < f.slot; ++j)
      if (const Instr w = instr(j); writes_d(w.op) && w.d == in.a) writer = static_cast<int>(j);
    std::uint32_t a = 0;
    if (in.a != 0) {
      const circuit::Machine& m = circuit_.machine();
      weights::RamReadOptions o;
      int ram = 0;
      if (writer >= 0) {
        ram = m.sequencer.slot_values.at(static_cast<std::size_t>(writer));
        o.row = 0;
        o.first_bit = 32 * static_cast<int>(f.lane);
      } else {
        ram = m.regs.rams.at(f.lane);
        o.row = static_cast<int>(e.warp * kProtoRegisters + in.a);
      }
      auto v = weights::read_ram(circuit_.compiled(), ram, state, o);
      if (!v) return v.status().with_context("reading the faulting lane's address register");
      a = static_cast<std::uint32_t>(v->front());
    }
    const bool shared = in.flags & kFlagShared;
    const MemoryFault mf{cta_,
                         static_cast<int>(e.warp),
                         static_cast<int>(f.lane),
                         e.block,
                         static_cast<int>(f.slot),
                         e.lanes,
                         a + in.imm,
                         shared,
                         f.fault};
    // The record must agree with the address it names.
    const std::uint32_t bound = shared ? static_cast<std::uint32_t>(program_.shared_words_used)
                                       : static_cast<std::uint32_t>(layout_.total_words);
    const bool misaligned = mf.address % 4 != 0, out = !misaligned && mf.address / 4 >= bound;
    if (misaligned != (f.fault == FaultKind::kMisaligned) || (!misaligned && !out))
      return sdk::internal_error("the model generated " + at + ", but the lane's byte address " +
                                 std::to_string(mf.address) + " " +
                                 (misaligned ? "is misaligned"
                                  : out      ? "is out of bounds"
                                             : "is valid"));
    return memory_fault_error(program_, mf, in, layout_.total_words);
  }

  const Program& program_;
  std::vector<sdk::LaunchArg> args_;
  const SimtCircuit& circuit_;
  MemoryLayout layout_;
  std::vector<sdk::PromptRecord> prompt_;
  std::vector<std::int64_t> current_;  // the record being generated: header + DATA so far
  int need_ = 0;                       // DATA tokens it still needs
  std::uint32_t cta_ = 0;              // the thread block running (CTA records)
  std::optional<Record> exec_;         // the last EXEC
  std::optional<Record> fault_;        // the FAULT that ended the launch
};

}  // namespace

sdk::Expected<std::unique_ptr<sdk::LaunchCodec>> encode_launch(const Program& program,
                                                               const std::vector<sdk::LaunchArg>& args,
                                                               const SimtCircuit& circuit) {
  const std::string engine = std::string("--engine ") + sdk::engine_name(circuit.request().engine);
  // What the circuit was built for (the machine's default options).
  if (program.config.block_instructions != circuit::kMachineSlots)
    return sdk::unsupported(engine + ": the circuit runs blocks of " + std::to_string(circuit::kMachineSlots) +
                            " instructions, the program was lowered with block_instructions " +
                            std::to_string(program.config.block_instructions));
  // The one multiplier and the one writing memory unit (docs/ISA.md §6).
  for (std::size_t b = 0; b < program.blocks.size(); ++b)
    for (std::size_t i = 0; i < program.blocks[b].slots.size(); ++i) {
      const Unit u = op_info(program.blocks[b].slots[i].in.op).unit;
      const bool mul = u == kUnitMul, write = u == kUnitStore || u == kUnitAtomic;
      const int want = mul ? circuit::kMulSlot : circuit::kMemWriteSlot;
      if ((mul || write) && static_cast<int>(i) != want)
        return sdk::unsupported(engine + ": block B" + std::to_string(b) + " (" + program.blocks[b].label + ") has " +
                                std::string(op_info(program.blocks[b].slots[i].in.op).mnemonic) + " in slot " +
                                std::to_string(i) + ", the circuit " + (mul ? "multiplies" : "writes memory") +
                                " only in slot " + std::to_string(want) + " (docs/ISA.md §6)");
    }
  auto layout = layout_arguments(program, args);
  if (!layout) return layout.status();
  const int words = circuit::memory_words(circuit.machine().memory.layout);
  if (layout->total_words > words)
    return sdk::limit_exceeded(engine + ": the launch's arrays need " + std::to_string(layout->total_words) +
                               " words of global memory, the circuit's memory holds " + std::to_string(words) +
                               " (over by " + std::to_string(layout->total_words - words) + ")");
  auto codec = std::make_unique<SimtLaunchCodec>(program, args, circuit, std::move(*layout));
  QGPU_RETURN_IF_ERROR(codec->encode_prompt());
  return std::unique_ptr<sdk::LaunchCodec>(std::move(codec));
}

}  // namespace qgpu::simt
