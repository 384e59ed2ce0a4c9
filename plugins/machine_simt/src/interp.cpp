#include "interp.h"

#include <algorithm>
#include <array>
#include <bit>
#include <string>

namespace qgpu::simt {
namespace {

// Same values as LaneRun (interp.h), which reports it.
enum class LaneState : std::uint8_t { kAbsent, kRunning, kBarrier, kExited };

struct Lane {
  std::array<std::uint32_t, 16> r{};
  std::uint32_t pc = 0;
  LaneState state = LaneState::kAbsent;
};

struct Stats {
  std::int64_t block_executions = 0, warp_instructions = 0, lane_instructions = 0, atomics = 0, barriers = 0, loads = 0,
               stores = 0;
};

std::string mask_str(unsigned mask, int lanes) {
  std::string s = "0b";
  for (int l = lanes - 1; l >= 0; --l) s += ((mask >> l) & 1) ? '1' : '0';
  return s;
}

// "kernel 'k': misaligned global load by thread 5 of thread block 0 (warp 1, lane 1) at B2 slot 0
// `ld ...` (k.cu:7): byte address 6": the fault's words up to its address.
std::string fault_text(const Program& p, const MemoryFault& f, const Instr& in) {
  const Slot& s = p.blocks[f.block].slots[static_cast<std::size_t>(f.slot)];
  const Format format = op_info(in.op).format;
  const char* what = format == kFmtLoad ? "load" : format == kFmtStore ? "store" : "atomic";
  const std::uint32_t tid = static_cast<std::uint32_t>(f.warp * p.config.lanes + f.lane);
  std::string msg =
      "kernel '" + p.kernel_name + "': " + (f.kind == FaultKind::kMisaligned ? "misaligned " : "out-of-bounds ") +
      (f.shared ? "shared " : "global ") + what + " by thread " + std::to_string(tid) + " of thread block " +
      std::to_string(f.cta) + " (warp " + std::to_string(f.warp) + ", lane " + std::to_string(f.lane) + ") at B" +
      std::to_string(f.block) + " slot " + std::to_string(f.slot) + " `" + disassemble(in) + "`";
  const std::string where = p.slot_location(s);
  if (!where.empty()) msg += " (" + where + ")";
  return msg + ": byte address " + std::to_string(f.address);
}

class Interpreter {
 public:
  Interpreter(const Program& p, const MemoryLayout& layout, const sdk::InterpretOptions& opt, LaunchObserver* observer)
      : p_(p), layout_(layout), opt_(opt), observer_(observer), lanes_(p.config.lanes), rows_(p.rows_per_block()) {
    if (layout.red_zone > 0) {  // memcheck: which words are red
      red_.assign(static_cast<std::size_t>(layout.total_words), true);
      for (std::size_t i = 0; i < layout.base_word.size(); ++i)
        for (int j = 0; j < layout.words[i]; ++j) red_[static_cast<std::size_t>(layout.base_word[i] + j)] = false;
    }
  }

  sdk::Status load_image() {
    const std::vector<std::uint64_t> image = p_.image(layout_.param_values);
    code_.resize(image.size());
    for (std::size_t i = 0; i < image.size(); ++i)
      if (!decode(image[i], code_[i]))
        return sdk::internal_error("machine_simt: ROM row " + std::to_string(i) + " does not decode");
    nblocks_ = static_cast<std::uint32_t>(p_.blocks.size());
    return {};
  }

  sdk::Status run(std::vector<std::uint32_t>& global, sdk::LaunchResult& result) {
    global_ = &global;
    result_ = &result;
    if (opt_.racecheck) global_accesses_.assign(global.size(), WordAccesses{});
    const int block = static_cast<int>(p_.shape.block);
    const int nwarps = (block + lanes_ - 1) / lanes_;
    for (std::uint32_t cta = 0; cta < p_.shape.grid; ++cta) {
      cta_ = cta;
      shared_.assign(static_cast<std::size_t>(p_.shared_words_used), 0u);
      epoch_ = 0;
      if (opt_.racecheck) shared_accesses_.assign(shared_.size(), WordAccesses{});
      warps_.assign(static_cast<std::size_t>(nwarps), std::vector<Lane>(static_cast<std::size_t>(lanes_)));
      for (int w = 0; w < nwarps; ++w)
        for (int l = 0; l < lanes_; ++l)
          if (w * lanes_ + l < block) warps_[w][l].state = LaneState::kRunning;
      if (observer_) QGPU_RETURN_IF_ERROR(observer_->on_cta_start(cta));
      for (;;) {
        for (int w = 0; w < nwarps; ++w) QGPU_RETURN_IF_ERROR(run_warp(w));
        bool waiting = false;
        for (auto& warp : warps_)
          for (Lane& lane : warp)
            if (lane.state == LaneState::kBarrier) lane.state = LaneState::kRunning, waiting = true;
        if (!waiting) break;
        ++stats_.barriers;
        ++epoch_;
        if (observer_) QGPU_RETURN_IF_ERROR(observer_->on_barrier_release(cta));
      }
    }
    if (observer_) QGPU_RETURN_IF_ERROR(observer_->on_finish());
    result.stats = {{"thread_blocks", p_.shape.grid},
                    {"block_executions", stats_.block_executions},
                    {"warp_instructions", stats_.warp_instructions},
                    {"lane_instructions", stats_.lane_instructions},
                    {"loads", stats_.loads},
                    {"stores", stats_.stores},
                    {"atomics", stats_.atomics},
                    {"barriers", stats_.barriers}};
    return {};
  }

 private:
  sdk::Status run_warp(int w) {
    std::vector<Lane>& lanes = warps_[w];
    for (;;) {
      std::uint32_t pc = UINT32_MAX;
      for (const Lane& l : lanes)
        if (l.state == LaneState::kRunning) pc = std::min(pc, l.pc);
      if (pc == UINT32_MAX) return {};
      unsigned mask = 0;
      for (int l = 0; l < lanes_; ++l)
        if (lanes[l].state == LaneState::kRunning && lanes[l].pc == pc) mask |= 1u << l;
      if (static_cast<std::uint64_t>(stats_.block_executions) >= opt_.max_steps)
        return sdk::limit_exceeded(
            "kernel '" + p_.kernel_name + "': step limit reached: " + std::to_string(opt_.max_steps) +
            " block executions (max_steps) without finishing; next was thread block " + std::to_string(cta_) +
            " warp " + std::to_string(w) + " block B" + std::to_string(pc));
      ++stats_.block_executions;
      if (opt_.trace)
        result_->trace.push_back("warp " + std::to_string(global_warp(w)) + " block " + std::to_string(pc) + " mask " +
                                 mask_str(mask, lanes_));
      written_.clear();
      QGPU_RETURN_IF_ERROR(exec_block(w, pc, mask));
      if (observer_) QGPU_RETURN_IF_ERROR(report(w, pc, mask));
    }
  }

  sdk::Status report(int w, std::uint32_t b, unsigned mask) {
    BlockEvent e;
    e.cta = cta_;
    e.warp = w;
    e.block = b;
    e.mask = mask;
    for (int l = 0; l < lanes_; ++l) {
      const Lane& lane = warps_[w][l];
      e.regs[l] = &lane.r;
      e.pending[l] = lane.pc;
      e.run[l] = static_cast<LaneRun>(lane.state);  // same order as LaneState
    }
    e.written = written_;
    e.global = global_;
    e.shared = &shared_;
    return observer_->on_block(e);
  }

  int global_warp(int w) const { return static_cast<int>(cta_) * static_cast<int>(warps_.size()) + w; }

  std::uint32_t operand(Kind k, std::uint8_t f, std::uint32_t imm, int w, int l) const {
    switch (k) {
      case Kind::kReg: return warps_[w][l].r[f];
      case Kind::kImm: return imm;
      case Kind::kSpecial: {
        const std::uint32_t tid = static_cast<std::uint32_t>(w * lanes_ + l);
        switch (static_cast<Special>(f)) {
          case Special::kTid: return tid;
          case Special::kNtid: return p_.shape.block;
          case Special::kCtaid: return cta_;
          case Special::kNctaid: return p_.shape.grid;
          case Special::kLaneId: return tid % 32;  // CUDA's lane: the position in a 32-thread warp
          case Special::kCount: break;
        }
      }
    }
    return 0;
  }

  sdk::Status memory_error(int w, int l, std::uint32_t b, int slot, unsigned mask, std::uint32_t addr, bool shared,
                           bool misaligned) const {
    const MemoryFault f{
        cta_, w, l, b, slot, mask, addr, shared, misaligned ? FaultKind::kMisaligned : FaultKind::kOutOfBounds};
    const Instr& in = code_[b * rows_ + slot];
    if (!misaligned && !shared && layout_.red_zone > 0)  // memcheck
      return sdk::invalid_argument(fault_text(p_, f, in) + " (word " + std::to_string(addr / 4) + ") is " +
                                   red_zone_text(addr / 4));
    if (observer_) observer_->on_fault(f);
    return memory_fault_error(p_, f, in, layout_.total_words);
  }

  // Memcheck: where a word in a red zone or past all arrays lies, relative to the nearest array.
  std::string red_zone_text(std::uint32_t word) const {
    const auto at = static_cast<std::int64_t>(word);
    const auto zone = static_cast<std::int64_t>(layout_.red_zone);
    for (std::size_t i = 0; i < layout_.base_word.size(); ++i) {
      const std::int64_t base = layout_.base_word[i], end = base + layout_.words[i];
      if (layout_.words[i] == 0) continue;
      const std::string array = " of array '" + p_.params[i].name + "', which has " + std::to_string(layout_.words[i]) +
                                " words (in a red zone: memcheck)";
      if ((at >= end && at < end + zone) || (at >= base - zone && at < base))
        return "element " + std::to_string(at - base) + array;
    }
    return "outside every array and their red zones (memcheck)";
  }

  // Racecheck (InterpretOptions::racecheck). A word's last store or atomic, and up to two of its
  // loads since, by different threads; an access is ordered after another by the same thread, or by
  // a barrier released between them in the same thread block.
  struct Access {
    enum Kind : std::uint8_t { kLoad, kStore, kAtomic };
    std::uint32_t thread = UINT32_MAX;  // within its thread block; UINT32_MAX: none
    std::uint32_t cta = 0;
    std::uint64_t epoch = 0;  // barrier releases in its thread block before it
    std::uint32_t block = 0;
    int slot = 0;
    Kind kind = kLoad;
    std::uint32_t value = 0;  // a store's
  };
  struct WordAccesses {
    Access write;
    std::array<Access, 2> loads;
  };

  // True where `a` and an access by `now` may happen in either order on a GPU.
  bool concurrent(const Access& a, const Access& now) const {
    return a.thread != UINT32_MAX && (a.cta != now.cta || (a.thread != now.thread && a.epoch == now.epoch));
  }

  sdk::Status race_check(Access::Kind kind, bool shared, std::uint32_t word, std::uint32_t value, int w, int l,
                         std::uint32_t b, int slot) {
    WordAccesses& h = (shared ? shared_accesses_ : global_accesses_)[word];
    const Access now{static_cast<std::uint32_t>(w * lanes_ + l), cta_, epoch_, b, slot, kind, value};
    const Access& last = h.write;
    // A plain store and any other access (two stores only where their values differ). A load beside
    // an atomic is not a hazard: atomicCAS loops start from a plain load that the CAS then checks.
    const bool stores = last.kind == Access::kStore || kind == Access::kStore;
    if (concurrent(last, now) && stores && !(last.kind == kind && last.value == value))
      return race_error(last, now, shared, word);
    if (kind == Access::kLoad) {
      for (Access& seen : h.loads)  // keep the loads a later store could race with
        if (!concurrent(seen, now) || (seen.cta == now.cta && seen.thread == now.thread)) {
          seen = now;
          return {};
        }
      return {};
    }
    if (kind == Access::kStore)
      for (const Access& seen : h.loads)
        if (concurrent(seen, now)) return race_error(seen, now, shared, word);
    h.write = now;
    if (kind == Access::kStore) h.loads = {};
    return {};
  }

  sdk::Status race_error(const Access& before, const Access& now, bool shared, std::uint32_t word) const {
    auto verb = [](Access::Kind k, bool past) -> std::string {
      if (k == Access::kLoad) return past ? "loaded" : "loads";
      if (k == Access::kStore) return past ? "stored" : "stores";
      return past ? "updated atomically" : "updates atomically";
    };
    auto where = [&](const Access& a) {
      std::string text = "B" + std::to_string(a.block) + " slot " + std::to_string(a.slot) + " `" +
                         disassemble(code_[a.block * rows_ + a.slot]) + "`";
      const std::string loc = p_.slot_location(p_.blocks[a.block].slots[a.slot]);
      return loc.empty() ? text : text + " (" + loc + ")";
    };
    const auto lanes = static_cast<std::uint32_t>(lanes_);
    std::string msg = "kernel '" + p_.kernel_name + "': race (racecheck): thread " + std::to_string(now.thread) +
                      " of thread block " + std::to_string(now.cta) + " (warp " + std::to_string(now.thread / lanes) +
                      ", lane " + std::to_string(now.thread % lanes) + ") " + verb(now.kind, false) + " " +
                      (shared ? "shared" : "global") + " word " + std::to_string(word) + " at " + where(now) +
                      ", which thread " + std::to_string(before.thread);
    if (before.cta != now.cta) msg += " of thread block " + std::to_string(before.cta);
    msg += " " + verb(before.kind, true) + " at " + where(before);
    if (before.cta != now.cta)
      return sdk::invalid_argument(msg + ", and no barrier orders two thread blocks: give each block its own words, "
                                         "or use atomics for both");
    return sdk::invalid_argument(msg + ", with no barrier between them: order them with __syncthreads() (or "
                                       "__syncwarp() within a warp), or use atomics for both");
  }

  sdk::Status exec_block(int w, std::uint32_t b, unsigned mask) {
    std::vector<Lane>& lanes = warps_[w];
    const int active = std::popcount(mask);
    std::array<std::uint32_t, kMaxLanes> res{};
    const Instr* row = &code_[static_cast<std::size_t>(b) * rows_];
    for (int slot = 0; slot < rows_ - 1; ++slot) {
      const Instr& in = row[slot];
      if (in.op == Op::kNop) continue;
      ++stats_.warp_instructions;
      stats_.lane_instructions += active;
      const OpInfo& info = op_info(in.op);
      const bool shared = in.flags & kFlagShared;
      std::vector<std::uint32_t>& mem = shared ? shared_ : *global_;
      const std::size_t words = shared ? shared_.size() : static_cast<std::size_t>(layout_.total_words);
      auto word_of = [&](int l, std::uint32_t& word) -> sdk::Status {
        const std::uint32_t addr = lanes[l].r[in.a] + in.imm;
        if (addr % 4 != 0) return memory_error(w, l, b, slot, mask, addr, shared, true);
        if (addr / 4 >= words || (!shared && !red_.empty() && red_[addr / 4]))
          return memory_error(w, l, b, slot, mask, addr, shared, false);
        word = addr / 4;
        return {};
      };
      switch (info.format) {
        case kFmtDA:
          if (in.op == Op::kBallot) {
            std::uint32_t ballot = 0;
            for (int l = 0; l < lanes_; ++l)
              if ((mask >> l) & 1 && operand(in.ak, in.a, in.imm, w, l) != 0) ballot |= 1u << l;
            res.fill(ballot);
            break;
          }
          [[fallthrough]];
        case kFmtDAB:
        case kFmtDABC:
          for (int l = 0; l < lanes_; ++l)
            if ((mask >> l) & 1)
              res[l] =
                  eval(in.op, operand(in.ak, in.a, in.imm, w, l), operand(in.bk, in.b, in.imm, w, l), lanes[l].r[in.c]);
          break;
        case kFmtLoad:
          for (int l = 0; l < lanes_; ++l)
            if ((mask >> l) & 1) {
              std::uint32_t word = 0;
              QGPU_RETURN_IF_ERROR(word_of(l, word));
              if (opt_.racecheck) QGPU_RETURN_IF_ERROR(race_check(Access::kLoad, shared, word, 0, w, l, b, slot));
              res[l] = mem[word];
              ++stats_.loads;
            }
          break;
        case kFmtStore:
          for (int l = 0; l < lanes_; ++l)  // lane order: the highest lane's value stays
            if ((mask >> l) & 1) {
              std::uint32_t word = 0;
              QGPU_RETURN_IF_ERROR(word_of(l, word));
              if (opt_.racecheck)
                QGPU_RETURN_IF_ERROR(race_check(Access::kStore, shared, word, lanes[l].r[in.b], w, l, b, slot));
              mem[word] = lanes[l].r[in.b];
              ++stats_.stores;
              if (observer_) written_.emplace_back(shared, word);
            }
          break;
        case kFmtAtom:
        case kFmtCas:
          for (int l = 0; l < lanes_; ++l)  // lane order
            if ((mask >> l) & 1) {
              std::uint32_t word = 0;
              QGPU_RETURN_IF_ERROR(word_of(l, word));
              if (opt_.racecheck) QGPU_RETURN_IF_ERROR(race_check(Access::kAtomic, shared, word, 0, w, l, b, slot));
              res[l] = mem[word];
              mem[word] = eval(in.op, res[l], lanes[l].r[in.b], lanes[l].r[in.c]);
              ++stats_.atomics;
              if (observer_) written_.emplace_back(shared, word);
            }
          break;
        case kFmtShfl: {
          const std::int64_t width = 1ll << ((in.flags & kFlagWidthMask) >> kFlagWidthShift);
          for (int l = 0; l < lanes_; ++l) {
            if (!((mask >> l) & 1)) continue;
            const std::int64_t lane = l, bv = operand(in.bk, in.b, in.imm, w, l);
            const std::int64_t first = lane & ~(width - 1), last = lane | (width - 1);
            std::int64_t j = lane;
            bool ok = true;
            switch (in.op) {
              case Op::kShflIdx: j = first | (bv & (width - 1)); break;
              case Op::kShflUp:
                j = lane - bv;
                ok = j >= first;
                break;
              case Op::kShflDown:
                j = lane + bv;
                ok = j <= last;
                break;
              default:
                j = lane ^ bv;
                ok = j <= last;
                break;
            }
            if (!ok || j >= lanes_) j = lane;  // out of range: the lane keeps its own value
            res[l] = (in.flags & kFlagPred) ? u32(ok) : operand(in.ak, in.a, in.imm, w, static_cast<int>(j));
          }
          break;
        }
        default: break;
      }
      const bool writes =
          info.format != kFmtStore && info.format != kFmtNone && info.format != kFmtBr && info.format != kFmtBrc;
      if (writes && in.d != 0)
        for (int l = 0; l < lanes_; ++l)
          if ((mask >> l) & 1) lanes[l].r[in.d] = res[l];
    }
    const Instr& t = row[rows_ - 1];
    ++stats_.warp_instructions;
    stats_.lane_instructions += active;
    const std::uint32_t t0 = t.imm & 0xffff, t1 = t.imm >> 16;
    if ((t.op == Op::kBr || t.op == Op::kBar || t.op == Op::kBrc) && t0 >= nblocks_)
      return sdk::internal_error("machine_simt: B" + std::to_string(b) + " branches to B" + std::to_string(t0) +
                                 " of " + std::to_string(nblocks_));
    if (t.op == Op::kBrc && t1 >= nblocks_)
      return sdk::internal_error("machine_simt: B" + std::to_string(b) + " branches to B" + std::to_string(t1));
    for (int l = 0; l < lanes_; ++l) {
      if (!((mask >> l) & 1)) continue;
      Lane& lane = lanes[l];
      switch (t.op) {
        case Op::kBr: lane.pc = t0; break;
        case Op::kBrc: lane.pc = lane.r[t.a] != 0 ? t0 : t1; break;
        case Op::kBar: lane.pc = t0, lane.state = LaneState::kBarrier; break;
        case Op::kExit: lane.state = LaneState::kExited; break;
        default: return sdk::internal_error("machine_simt: B" + std::to_string(b) + " has no terminator");
      }
    }
    return {};
  }

  const Program& p_;
  const MemoryLayout& layout_;
  const sdk::InterpretOptions& opt_;
  LaunchObserver* observer_;
  std::vector<std::pair<bool, std::uint32_t>> written_;
  const int lanes_;
  const int rows_;
  std::vector<Instr> code_;
  std::uint32_t nblocks_ = 0;
  std::vector<std::uint32_t>* global_ = nullptr;
  std::vector<bool> red_;  // memcheck: the words of the red zones
  std::vector<WordAccesses> shared_accesses_, global_accesses_;  // racecheck
  std::uint64_t epoch_ = 0;                                       // barrier releases in this thread block
  std::vector<std::uint32_t> shared_;
  std::vector<std::vector<Lane>> warps_;
  std::uint32_t cta_ = 0;
  Stats stats_;
  sdk::LaunchResult* result_ = nullptr;
};

}  // namespace

sdk::Expected<MemoryLayout> layout_arguments(const Program& p, const std::vector<sdk::LaunchArg>& args, int red_zone) {
  const std::string kernel = "kernel '" + p.kernel_name + "': ";
  if (args.size() != p.params.size()) {
    std::string names;
    for (const ProgramParam& q : p.params) names += (names.empty() ? "" : ", ") + q.name;
    return sdk::invalid_argument(kernel + "takes " + std::to_string(p.params.size()) + " parameters (" + names +
                                 "), got " + std::to_string(args.size()) + " launch arguments");
  }
  MemoryLayout m;
  m.red_zone = red_zone;
  std::int64_t words = 0, zones = 0;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const ProgramParam& q = p.params[i];
    const sdk::LaunchArg& a = args[i];
    if (!a.param.empty() && a.param != q.name)
      return sdk::invalid_argument(kernel + "launch argument " + std::to_string(i) + " is for '" + a.param +
                                   "' but parameter " + std::to_string(i) + " is '" + q.name + "'");
    if (a.is_array != q.pointer)
      return sdk::invalid_argument(kernel + "parameter '" + q.name + "' is " + (q.pointer ? "a pointer" : "a scalar") +
                                   " but its launch argument is " + (a.is_array ? "an array" : "a scalar"));
    if (q.pointer) {
      zones += red_zone;
      m.base_word.push_back(static_cast<int>(words + zones));
      m.param_values.push_back(static_cast<std::uint32_t>((words + zones) * 4));
      m.words.push_back(static_cast<int>(a.array.size()));
      words += static_cast<std::int64_t>(a.array.size());
    } else {
      m.base_word.push_back(-1);
      m.words.push_back(0);
      m.param_values.push_back(static_cast<std::uint32_t>(a.scalar));
    }
  }
  if (words > p.config.global_words)
    return sdk::limit_exceeded(kernel + "the launch's arrays need " + std::to_string(words) +
                               " words of global memory, the machine has " + std::to_string(p.config.global_words) +
                               " (over by " + std::to_string(words - p.config.global_words) + ")");
  m.total_words = static_cast<int>(words + zones + (zones > 0 ? red_zone : 0));
  return m;
}

sdk::Status memory_fault_error(const Program& p, const MemoryFault& f, const Instr& in, int global_words) {
  std::string msg = fault_text(p, f, in);
  if (f.kind == FaultKind::kMisaligned) return sdk::invalid_argument(msg + " is not a multiple of 4");
  msg += " (word " + std::to_string(f.address / 4) + ") is outside ";
  if (f.shared)
    msg += "the " + std::to_string(p.shared_words_used) +
           " words of shared memory the kernel declares (the machine has " + std::to_string(p.config.shared_words) +
           ")";
  else
    msg += "the " + std::to_string(global_words) + " words holding the launch's arrays (global memory has " +
           std::to_string(p.config.global_words) + ")";
  return sdk::invalid_argument(msg);
}

sdk::Expected<sdk::LaunchResult> interpret_program(const Program& program, const std::vector<sdk::LaunchArg>& args,
                                                   const sdk::InterpretOptions& options, LaunchObserver* observer) {
  if (options.memcheck && (options.records || observer != nullptr))
    return sdk::invalid_argument("memcheck moves the arrays apart: it cannot encode the launch in the token protocol");
  auto layout = layout_arguments(program, args, options.memcheck ? kRedZoneWords : 0);
  if (!layout) return layout.error();
  std::vector<std::uint32_t> global(
      static_cast<std::size_t>(std::max(program.config.global_words, layout->total_words)), 0u);
  for (std::size_t i = 0; i < args.size(); ++i)
    if (args[i].is_array)
      for (std::size_t j = 0; j < args[i].array.size(); ++j)
        global[layout->base_word[i] + j] = static_cast<std::uint32_t>(args[i].array[j]);
  Interpreter interp(program, *layout, options, observer);
  QGPU_RETURN_IF_ERROR(interp.load_image());
  sdk::LaunchResult result;
  QGPU_RETURN_IF_ERROR(interp.run(global, result));
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (!args[i].is_array) continue;
    sdk::LaunchArg out;
    out.param = program.params[i].name;
    out.is_array = true;
    for (std::size_t j = 0; j < args[i].array.size(); ++j)
      out.array.push_back(static_cast<std::int32_t>(global[layout->base_word[i] + j]));
    result.arrays.push_back(std::move(out));
  }
  return result;
}

}  // namespace qgpu::simt
