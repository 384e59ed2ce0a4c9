#include "launch_codec.h"

#include "interp.h"
#include "protocol.h"
#include "qgpu/weights/state.h"
#include "records.h"
#include "writeback.h"

namespace qgpu::simt {
namespace {

// Kinds only the host feeds: a model that generates one has gone wrong.
bool never_generated(RecordKind k) {
  return k == RecordKind::kRun || k == RecordKind::kLaunch || k == RecordKind::kRom || k == RecordKind::kLive;
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
    token.complete = true;
    token.halt = complete.kind == RecordKind::kHalt;
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
    e.arrays = std::move(lr->result.arrays);
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
  const Program& program_;
  std::vector<sdk::LaunchArg> args_;
  const SimtCircuit& circuit_;
  MemoryLayout layout_;
  std::vector<sdk::PromptRecord> prompt_;
  std::vector<std::int64_t> current_;  // the record being generated: header + DATA so far
  int need_ = 0;                       // DATA tokens it still needs
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
