// A launch in records: the protocol's limits, live registers, the host's prompt and the stream the
// model must generate, recorded from the reference interpreter (docs/PROTOCOL.md "Prompt").
#include <algorithm>

#include "lower/diagnostics.h"
#include "protocol.h"

namespace qgpu::simt {

namespace {

// Registers an instruction reads (bit r; r0 excluded).
std::uint32_t uses_of(const Instr& in) {
  std::uint32_t m = 0;
  auto reg = [&](std::uint8_t r) { m |= 1u << r; };
  switch (op_info(in.op).format) {
    case kFmtDA:
    case kFmtShfl:
    case kFmtDAB:
    case kFmtDABC:
      if (in.ak == Kind::kReg) reg(in.a);
      if (op_info(in.op).format != kFmtDA && in.bk == Kind::kReg) reg(in.b);
      if (op_info(in.op).format == kFmtDABC) reg(in.c);
      break;
    case kFmtLoad: reg(in.a); break;
    case kFmtStore:
    case kFmtAtom: reg(in.a), reg(in.b); break;
    case kFmtCas: reg(in.a), reg(in.b), reg(in.c); break;
    case kFmtBrc: reg(in.a); break;
    default: break;
  }
  return m & ~1u;
}

}  // namespace

sdk::Status check_protocol_limits(const Program& p) {
  const std::string k = "kernel '" + p.kernel_name + "': token protocol: ";
  auto over = [&](const std::string& what, std::int64_t n, std::int64_t limit, const std::string& hint = {}) {
    return sdk::limit_exceeded(k + what + " " + std::to_string(n) + " exceeds " + std::to_string(limit) + " (over by " +
                               std::to_string(n - limit) + ")" + (hint.empty() ? "" : "; " + hint));
  };
  if (p.config.lanes != kProtoLanes) return over("lanes per warp", p.config.lanes, kProtoLanes);
  if (p.config.registers > kProtoRegisters) return over("registers", p.config.registers, kProtoRegisters);
  if (static_cast<int>(p.blocks.size()) > kProtoBlocks)
    return over("ROM blocks", p.blocks.size(), kProtoBlocks, lower::kRomLimitHint);
  if (p.rows_per_block() > kProtoRowsPerBlock) return over("rows per block", p.rows_per_block(), kProtoRowsPerBlock);
  const std::int64_t warps = (p.shape.block + kProtoLanes - 1) / kProtoLanes;
  if (warps > kProtoWarps) return over("warps per thread block", warps, kProtoWarps);
  if (p.shape.grid > kProtoCtas) return over("thread blocks", p.shape.grid, kProtoCtas);
  if (p.shared_words_used > kProtoSharedWords) return over("shared words", p.shared_words_used, kProtoSharedWords);
  return {};
}

namespace {

// Registers some shuffle reads: another lane may read them at any time.
std::uint32_t shuffle_sources(const Program& p) {
  std::uint32_t m = 0;
  for (const MachineBlock& mb : p.blocks)
    for (const Slot& s : mb.slots)
      if (op_info(s.in.op).format == kFmtShfl && s.in.ak == Kind::kReg) m |= 1u << s.in.a;
  return m & 0xfffe;
}

}  // namespace

std::vector<std::uint16_t> live_in_masks(const Program& p) {
  const std::size_t n = p.blocks.size();
  std::vector<std::uint32_t> use(n, 0), def(n, 0), live(n, 0);
  std::vector<std::vector<std::uint32_t>> succ(n);
  const std::uint32_t shuffled = shuffle_sources(p);
  for (std::size_t b = 0; b < n; ++b) {
    const MachineBlock& mb = p.blocks[b];
    const Instr& t = mb.term.in;
    std::uint32_t lv = uses_of(t);
    if (t.op == Op::kBr || t.op == Op::kBar || t.op == Op::kBrc) succ[b].push_back(t.imm & 0xffff);
    if (t.op == Op::kBrc) succ[b].push_back(t.imm >> 16);
    std::uint32_t d = 0;
    for (auto it = mb.slots.rbegin(); it != mb.slots.rend(); ++it) {
      const Instr& in = it->in;
      if (writes_d(in.op) && in.d != 0) lv &= ~(1u << in.d), d |= 1u << in.d;
      lv |= uses_of(in);
    }
    use[b] = lv;
    def[b] = d;
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t b = n; b-- > 0;) {
      std::uint32_t out = 0;
      for (std::uint32_t s : succ[b])
        if (s < n) out |= live[s];
      const std::uint32_t in = use[b] | (out & ~def[b]);
      if (in != live[b]) live[b] = in, changed = true;
    }
  }
  std::vector<std::uint16_t> masks(n);
  for (std::size_t b = 0; b < n; ++b) masks[b] = static_cast<std::uint16_t>((live[b] | shuffled) & 0xfffe);
  return masks;
}

namespace {

int warps_of(const Program& p) {
  return static_cast<int>((p.shape.block + kProtoLanes - 1) / kProtoLanes);
}

// Lanes of warp w that hold a thread.
std::uint32_t existing_lanes(const Program& p, int w) {
  std::uint32_t m = 0;
  for (int l = 0; l < kProtoLanes; ++l)
    if (static_cast<std::uint32_t>(w * kProtoLanes + l) < p.shape.block) m |= 1u << l;
  return m;
}

// Memory words as WMEM records: maximal runs of consecutive words, at most 4 per record.
void memory_runs(bool shared, const std::vector<std::uint32_t>& words, const std::vector<std::uint32_t>& memory,
                 std::vector<Record>& out) {
  for (std::size_t i = 0; i < words.size();) {
    std::size_t j = i + 1;
    while (j < words.size() && j - i < kProtoRunWords && words[j] == words[j - 1] + 1) ++j;
    std::vector<std::uint32_t> v;
    for (std::size_t k = i; k < j; ++k) v.push_back(memory[words[k]]);
    for (const Record& r : wmem_records(shared, words[i], v)) out.push_back(r);
    i = j;
  }
}

struct LaneEntry {
  LaneStatus status = LaneStatus::kRunning;
  std::uint32_t block = 0;
  bool operator==(const LaneEntry&) const = default;
};

// Builds the generated stream from the interpreter's events, keeping a model
// of what the recurrent state holds (register file, memory, scheduler rows)
// so that only live and changed values are written back (docs/PROTOCOL.md).
class Recorder final : public LaunchObserver {
 public:
  Recorder(const Program& p, const std::vector<std::uint32_t>& global, std::vector<Record>& out)
      : p_(p), live_(live_in_masks(p)), shuffled_(shuffle_sources(p)), out_(out), global_ram_(global) {
    const int nw = warps_of(p);
    regs_.assign(static_cast<std::size_t>(nw), {});
    sched_.assign(static_cast<std::size_t>(nw), {});
    for (int w = 0; w < nw; ++w)
      for (int l = 0; l < kProtoLanes; ++l)
        if (!((existing_lanes(p, w) >> l) & 1)) sched_[w][l].status = LaneStatus::kExited;
    shared_ram_.assign(static_cast<std::size_t>(p.shared_words_used), 0u);
    defs_.assign(p.blocks.size(), 0u);
    for (std::size_t b = 0; b < p.blocks.size(); ++b)
      for (const Slot& s : p.blocks[b].slots)
        if (writes_d(s.in.op) && s.in.d != 0) defs_[b] |= 1u << s.in.d;
  }

  sdk::Status on_cta_start(std::uint32_t cta) override {
    if (cta == 0) return {};  // the prompt set up thread block 0
    pending_.clear();         // the finished thread block's scheduler state is dead
    out_.push_back(cta_record(cta));
    parity_ = 0;
    // The CTA token erases the register file and shared memory (the circuit clears
    // their RAMs): every row reads 0 again, so nothing is written back for them.
    std::fill(shared_ram_.begin(), shared_ram_.end(), 0u);
    for (auto& warp : regs_)
      for (auto& reg : warp) reg.fill(0u);
    for (int w = 0; w < static_cast<int>(regs_.size()); ++w)
      pending_.push_back({w, existing_lanes(p_, w), {LaneStatus::kRunning, 0}});
    return {};
  }

  sdk::Status on_block(const BlockEvent& e) override {
    const Record exec = exec_record(e.block, static_cast<std::uint32_t>(e.warp), e.mask);
    flush(&exec);
    out_.push_back(exec);
    auto& regs = regs_[e.warp];
    // Registers: written by the block, live at the lane's next block, different from the stored row.
    for (int r = 1; r < kProtoRegisters; ++r) {
      if (!((defs_[e.block] >> r) & 1)) continue;
      std::uint32_t lanes = 0;
      std::array<std::uint32_t, 4> v{};
      for (int l = 0; l < kProtoLanes; ++l) {
        if (!((e.mask >> l) & 1)) continue;
        const std::uint32_t live = e.run[l] == LaneRun::kExited ? shuffled_ : live_[e.pending[l]];
        const std::uint32_t value = (*e.regs[l])[r];
        if (((live >> r) & 1) && value != regs[r][l]) lanes |= 1u << l, v[l] = value, regs[r][l] = value;
      }
      for (const Record& rec : wreg_records(static_cast<std::uint32_t>(e.warp), r, lanes, v)) out_.push_back(rec);
    }
    // Memory: every word the block wrote, global then shared, ascending.
    for (bool shared : {false, true}) {
      std::vector<std::uint32_t> words;
      for (const auto& [s, w] : e.written)
        if (s == shared) words.push_back(w);
      std::sort(words.begin(), words.end());
      words.erase(std::unique(words.begin(), words.end()), words.end());
      const std::vector<std::uint32_t>& mem = shared ? *e.shared : *e.global;
      memory_runs(shared, words, mem, out_);
      for (std::uint32_t w : words) (shared ? shared_ram_ : global_ram_)[w] = mem[w];
    }
    // Scheduler: the masked lanes' new states, grouped; written when the next record is known.
    for (int l = 0; l < kProtoLanes; ++l) {
      if (!((e.mask >> l) & 1)) continue;
      LaneEntry s;
      if (e.run[l] == LaneRun::kExited) {
        s.status = LaneStatus::kExited;
      } else {
        s.block = e.pending[l];
        s.status = e.run[l] == LaneRun::kRunning ? LaneStatus::kRunning
                   : parity_ == 0                ? LaneStatus::kBarrierEven
                                                 : LaneStatus::kBarrierOdd;
      }
      auto it = std::find_if(pending_.begin(), pending_.end(),
                             [&](const Pending& g) { return g.warp == e.warp && g.entry == s; });
      if (it != pending_.end())
        it->lanes |= 1u << l;
      else
        pending_.push_back({e.warp, 1u << l, s});
    }
    return {};
  }

  sdk::Status on_barrier_release(std::uint32_t) override {
    flush(nullptr);
    out_.push_back(sync_record());
    parity_ ^= 1;
    return {};
  }

  sdk::Status on_finish() override {
    pending_.clear();
    out_.push_back(halt_record());
    return {};
  }

  // The faulting block's EXEC, then FAULT: its pass finds the fault and writes nothing back.
  void on_fault(const MemoryFault& f) override {
    const Record exec = exec_record(f.block, static_cast<std::uint32_t>(f.warp), f.mask);
    flush(&exec);
    out_.push_back(exec);
    out_.push_back(fault_record(static_cast<std::uint32_t>(f.slot), static_cast<std::uint32_t>(f.lane), f.kind));
    faulted_ = true;
  }
  bool faulted() const { return faulted_; }

 private:
  struct Pending {
    int warp;
    std::uint32_t lanes;
    LaneEntry entry;
  };

  // Writes the pending scheduler groups that the next EXEC does not imply and
  // that differ from the stored rows.
  void flush(const Record* next) {
    for (const Pending& g : pending_) {
      if (next && static_cast<std::uint32_t>(g.warp) == next->warp && g.entry.status == LaneStatus::kRunning &&
          g.entry.block == next->block)
        continue;
      std::uint32_t lanes = 0;
      for (int l = 0; l < kProtoLanes; ++l)
        if (((g.lanes >> l) & 1) && !(sched_[g.warp][l] == g.entry)) lanes |= 1u << l, sched_[g.warp][l] = g.entry;
      if (lanes) out_.push_back(sched_record(static_cast<std::uint32_t>(g.warp), lanes, g.entry.status, g.entry.block));
    }
    pending_.clear();
  }

  const Program& p_;
  std::vector<std::uint16_t> live_;
  std::uint32_t shuffled_;
  std::vector<Record>& out_;
  std::vector<std::uint32_t> global_ram_, shared_ram_;
  std::vector<std::array<std::array<std::uint32_t, 4>, 16>> regs_;
  std::vector<std::array<LaneEntry, 4>> sched_;
  std::vector<std::uint32_t> defs_;
  std::vector<Pending> pending_;
  int parity_ = 0;
  bool faulted_ = false;
};

std::vector<std::uint32_t> initial_global(const Program& p, const MemoryLayout& layout,
                                          const std::vector<sdk::LaunchArg>& args) {
  std::vector<std::uint32_t> g(static_cast<std::size_t>(layout.total_words), 0u);
  for (std::size_t i = 0; i < args.size() && i < p.params.size(); ++i)
    if (args[i].is_array)
      for (std::size_t j = 0; j < args[i].array.size(); ++j)
        g[layout.base_word[i] + j] = static_cast<std::uint32_t>(args[i].array[j]);
  return g;
}

}  // namespace

sdk::Expected<std::vector<Record>> encode_prompt(const Program& p, const std::vector<sdk::LaunchArg>& args) {
  QGPU_RETURN_IF_ERROR(check_protocol_limits(p));
  auto layout = layout_arguments(p, args);
  if (!layout) return layout.error();
  if (layout->total_words > kProtoGlobalWords)
    return sdk::limit_exceeded("kernel '" + p.kernel_name + "': token protocol: the launch's arrays need " +
                               std::to_string(layout->total_words) + " words, the token layout addresses " +
                               std::to_string(kProtoGlobalWords) + " (over by " +
                               std::to_string(layout->total_words - kProtoGlobalWords) + ")");
  std::vector<Record> out;
  out.push_back(launch_record(p.shape.block, p.shape.grid));
  out.push_back(bound_record(false, static_cast<std::uint32_t>(layout->total_words)));
  out.push_back(bound_record(true, static_cast<std::uint32_t>(p.shared_words_used)));
  out.push_back(cta_record(0));
  const std::vector<std::uint64_t> image = p.image(layout->param_values);
  const int rows = p.rows_per_block();
  for (std::size_t i = 0; i < image.size(); ++i)
    for (const Record& r :
         rom_records(static_cast<std::uint32_t>(i / rows), static_cast<std::uint32_t>(i % rows), image[i]))
      out.push_back(r);
  const auto live = live_in_masks(p);
  for (std::size_t b = 0; b < live.size(); ++b) out.push_back(live_record(static_cast<std::uint32_t>(b), live[b]));
  // An exited lane keeps only the shuffle sources live; an unwritten row reads 0 (none).
  if (const std::uint32_t shuffled = shuffle_sources(p); shuffled != 0) out.push_back(live_exited_record(shuffled));
  const std::vector<std::uint32_t> global = initial_global(p, *layout, args);
  std::vector<std::uint32_t> words(global.size());
  for (std::size_t i = 0; i < words.size(); ++i) words[i] = static_cast<std::uint32_t>(i);
  memory_runs(false, words, global, out);
  // Registers and shared memory need no records: CTA 0 cleared them (every row reads 0).
  const int nw = warps_of(p);
  for (int w = 0; w < nw; ++w) {
    const std::uint32_t lanes = existing_lanes(p, w);
    out.push_back(sched_record(static_cast<std::uint32_t>(w), lanes, LaneStatus::kRunning, 0));
    if (lanes != 0b1111u)
      out.push_back(sched_record(static_cast<std::uint32_t>(w), 0b1111u & ~lanes, LaneStatus::kExited, 0));
  }
  out.push_back(run_record());
  return out;
}

sdk::Expected<LaunchRecords> record_launch(const Program& p, const std::vector<sdk::LaunchArg>& args,
                                           const sdk::InterpretOptions& options) {
  LaunchRecords lr;
  auto prompt = encode_prompt(p, args);
  if (!prompt) return prompt.error();
  lr.prompt = std::move(*prompt);
  auto layout = layout_arguments(p, args);
  if (!layout) return layout.error();
  Recorder rec(p, initial_global(p, *layout, args), lr.generated);
  auto result = interpret_program(p, args, options, &rec);
  if (!result && !rec.faulted()) return result.error();
  if (result)
    lr.result = std::move(*result);
  else
    lr.fault = result.status();
  lr.prompt_tokens = token_count(lr.prompt);
  lr.generated_tokens = token_count(lr.generated);
  return lr;
}

}  // namespace qgpu::simt
