// Random EXEC results for the write-back tests (circuit_writeback_test.cpp,
// circuit_sequencer_test.cpp): slot results of every value class, memory writes
// with runs and 16-word boundary crossings, scheduler groups, every kind of
// control record, and the records the protocol emits for them (the oracle:
// protocol.h's wreg_records / wmem_records over maximal runs, SCHED, control).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <random>
#include <vector>

#include "protocol.h"
#include "writeback.h"

namespace qgpu::simt::test {

using circuit::kWbSlots;

// One EXEC's results, and the records the protocol emits for them.
struct Pending {
  std::uint32_t warp = 0;
  std::array<std::uint32_t, kWbSlots> dest{}, emit{};
  std::array<std::array<std::uint32_t, 4>, kWbSlots> value{};
  bool shared = false;
  std::uint32_t writes = 0;
  std::array<std::uint32_t, 4> word{}, mvalue{};
  std::vector<Record> groups;  // SCHED records
  Record control;
};

inline std::uint32_t random_value(std::mt19937_64& rng) {
  static const std::uint32_t kEdge[] = {0,           1,           0xffffffffu, 127,         0xffffff80u,
                                        128,         0xffffff7fu, 32767,       0xffff8000u, 32768,
                                        0xffff7fffu, 0x80000000u, 0x7fffffffu, 0x10000};
  switch (rng() % 5) {
    case 0: return kEdge[rng() % (sizeof(kEdge) / sizeof(kEdge[0]))];
    case 1: return static_cast<std::uint32_t>(static_cast<std::int32_t>(rng() % 256) - 128);
    case 2: return static_cast<std::uint32_t>(static_cast<std::int32_t>(rng() % 65536) - 32768);
    case 3: return 0;
    default: return static_cast<std::uint32_t>(rng());
  }
}

inline Pending random_pending(std::mt19937_64& rng) {
  Pending p;
  p.warp = static_cast<std::uint32_t>(rng() % 8);
  std::vector<std::uint32_t> regs;
  for (std::uint32_t r = 1; r < 16; ++r) regs.push_back(r);
  std::shuffle(regs.begin(), regs.end(), rng);
  for (int s = 0; s < kWbSlots; ++s) {
    const bool emits = rng() % 10 < 6;
    p.emit[s] = emits ? static_cast<std::uint32_t>(1 + rng() % 15) : 0;
    p.dest[s] = emits ? regs[s] : static_cast<std::uint32_t>(rng() % 16);  // non-emitting: anything
    for (int l = 0; l < 4; ++l) p.value[s][l] = random_value(rng);
  }
  // Memory: distinct words, often adjacent (runs), sometimes across a 16-word boundary (and, in
  // global memory, across word 512).
  p.shared = rng() % 2;
  const std::uint32_t space = p.shared ? kProtoSharedWords : kProtoGlobalWords;
  std::vector<std::uint32_t> words;
  const std::uint32_t base = (rng() % 3 == 0) ? 12 + static_cast<std::uint32_t>(rng() % (space / 16 - 1)) * 16
                                              : static_cast<std::uint32_t>(rng() % (space - 7));
  for (std::uint32_t w = base; w < base + 7 && w < space; ++w) words.push_back(w);
  if (rng() % 4 == 0)
    words = {static_cast<std::uint32_t>(rng() % space), 0u, space - 1, static_cast<std::uint32_t>(rng() % space)};
  std::shuffle(words.begin(), words.end(), rng);
  for (int l = 0; l < 4; ++l) {
    const bool taken = std::find(words.begin(), words.begin() + l, words[l]) != words.begin() + l;
    if (rng() % 10 < 5 && !taken) p.writes |= 1u << l;
    p.word[l] = words[l];
    p.mvalue[l] = random_value(rng);
  }
  // Scheduler groups: disjoint lane masks.
  std::uint32_t left = static_cast<std::uint32_t>(rng() % 16);
  while (left && p.groups.size() < 4) {
    std::uint32_t m = left & static_cast<std::uint32_t>(rng() % 16);
    if (m == 0) m = left & (~left + 1);
    left &= ~m;
    p.groups.push_back(
        sched_record(p.warp, m, static_cast<LaneStatus>(rng() % 4), static_cast<std::uint32_t>(rng() % 32)));
  }
  switch (rng() % 4) {
    case 0:
      p.control = exec_record(static_cast<std::uint32_t>(rng() % 32), static_cast<std::uint32_t>(rng() % 8),
                              static_cast<std::uint32_t>(1 + rng() % 15));
      break;
    case 1: p.control = sync_record(); break;
    case 2: p.control = cta_record(static_cast<std::uint32_t>(rng() % 128)); break;
    default: p.control = halt_record();
  }
  return p;
}

inline std::vector<Record> expected_records(const Pending& p) {
  std::vector<Record> out;
  std::vector<int> order;
  for (int s = 0; s < kWbSlots; ++s)
    if (p.emit[s]) order.push_back(s);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return p.dest[a] < p.dest[b]; });
  for (int s : order)
    for (const Record& r : wreg_records(p.warp, p.dest[s], p.emit[s], p.value[s])) out.push_back(r);
  std::vector<std::pair<std::uint32_t, std::uint32_t>> mem;
  for (int l = 0; l < 4; ++l)
    if ((p.writes >> l) & 1) mem.emplace_back(p.word[l], p.mvalue[l]);
  std::sort(mem.begin(), mem.end());
  for (std::size_t i = 0; i < mem.size();) {
    std::size_t e = i + 1;
    while (e < mem.size() && e - i < 4 && mem[e].first == mem[e - 1].first + 1) ++e;
    std::vector<std::uint32_t> v;
    for (std::size_t k = i; k < e; ++k) v.push_back(mem[k].second);
    for (const Record& r : wmem_records(p.shared, mem[i].first, v)) out.push_back(r);
    i = e;
  }
  for (const Record& g : p.groups) out.push_back(g);
  out.push_back(p.control);
  return out;
}

}  // namespace qgpu::simt::test
