// The token protocol between host, model and interpreter (docs/PROTOCOL.md):
// record types, their token ids (rows added on top of the base vocabulary),
// the prompt the host feeds for a launch, and the exact record stream the
// model must generate, built from the reference interpreter.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "interp.h"
#include "program.h"
#include "qgpu/sdk/machine.h"

namespace qgpu::simt {

// Protocol limits: the field widths of the token layout (docs/PROTOCOL.md "Vocabulary").
inline constexpr int kProtoBlockBits = 7;                   // a block number's bits
inline constexpr int kProtoBlocks = 1 << kProtoBlockBits;  // ROM blocks (EXEC, SCHED, ROM, LIVE)
inline constexpr int kProtoRowsPerBlock = 8;  // ROM rows per block (block_instructions + 1)
inline constexpr int kProtoWarps = 8;         // warps per thread block
inline constexpr int kProtoLanes = 4;
inline constexpr int kProtoRegisters = 16;  // r0 is never written back
inline constexpr int kProtoCtas = 128;      // thread blocks per launch
inline constexpr int kProtoGlobalWords = 1024;  // words of global memory
inline constexpr int kProtoSharedWords = 512;   // words of shared memory per thread block
inline constexpr int kProtoWordBits = 10;  // a word address's bits (either space)
inline constexpr int kProtoRunWords = 4;    // words per WMEM record
inline constexpr int kDataBits = 16;
// DATA tokens per record: the last one must still see the header through the
// Gated DeltaNet conv1d (kernel 4: the current token and the 3 before it).
inline constexpr int kMaxDataTokens = 3;
inline constexpr int kDataBitsUnused = 0;  // payload of a DATA token
// The LIVE row after the blocks' rows: `LIVE exited`, the registers some shuffle reads
// (live in a lane that exited: another lane may still read them).
inline constexpr std::uint32_t kLiveExited = kProtoBlocks;
// FAULT rows: an instruction slot of a block (the terminator never touches memory), a lane, a kind.
inline constexpr int kProtoFaultSlots = kProtoRowsPerBlock - 1;

enum class RecordKind : std::uint8_t {
  kHalt,    // generated: the launch is over
  kRun,     // fed: last prompt token; its pass chooses the first EXEC
  kSync,    // generated: barrier release (flips the barrier parity)
  kLaunch,  // fed: launch constants (threads per block, grid) + 1 DATA
  kCta,     // fed (cta 0) / generated: a thread block starts
  kExec,    // generated: run one block for one warp with a lane mask
  kSched,   // fed / generated: scheduler state of some lanes of a warp
  kWreg,    // fed / generated: register write-back + DATA by format
  kWmem,    // fed / generated: up to 4 consecutive memory words + DATA by format
  kRom,     // fed: one 32-bit half of a ROM row + 2 DATA
  kLive,    // fed: registers live at a block's entry (or in an exited lane) + 1 DATA
  kBound,   // fed: the words of one memory space an access may touch + 1 DATA
  kFault,   // generated: a lane's memory access faulted; the launch is over
  kData,    // a 16-bit payload token (part of the record before it)
  kCount
};
inline constexpr int kRecordKinds = static_cast<int>(RecordKind::kCount);

// A lane's scheduler state as stored by SCHED. A barrier entry is "waiting"
// while its parity equals the thread block's current barrier parity and
// "running at its block" once a SYNC has flipped the parity.
enum class LaneStatus : std::uint8_t { kRunning = 0, kExited = 1, kBarrierEven = 2, kBarrierOdd = 3 };

// How WREG/WMEM values travel in DATA tokens: kZero none; kByte two values per
// token (sign-extended from 8 bits, first value in the low byte); kHalf one
// per token (sign-extended from 16 bits); kWord two per value (low half first).
enum class ValueFormat : std::uint8_t { kZero = 0, kByte = 1, kHalf = 2, kWord = 3 };

struct Record {
  RecordKind kind = RecordKind::kHalt;
  std::uint32_t block = 0;                   // EXEC, SCHED (pending block), ROM, LIVE (kLiveExited: exited)
  std::uint32_t warp = 0;                    // EXEC, SCHED, WREG
  std::uint32_t lanes = 0;                   // EXEC, SCHED, WREG: bit l = lane l
  LaneStatus status = LaneStatus::kRunning;  // SCHED
  std::uint32_t reg = 0;                     // WREG: 1..15
  bool shared = false;                       // WMEM, BOUND (the space)
  std::uint32_t word = 0;                    // WMEM: first word
  std::uint32_t count = 0;                   // WMEM: 1..4 words
  ValueFormat format = ValueFormat::kZero;   // WREG, WMEM
  std::uint32_t half = 0;                    // ROM: 0 = bits 0-31, 1 = bits 32-63 (in values[0])
  std::uint32_t slot = 0;                    // ROM: row within the block; FAULT: the instruction's slot
  std::uint32_t lane = 0;                    // FAULT
  FaultKind fault = FaultKind::kMisaligned;  // FAULT
  std::uint32_t cta = 0;                     // CTA
  std::uint32_t threads = 0, grid = 0;       // LAUNCH
  std::array<std::uint32_t, 4> values{};     // WREG: per lane (0 outside `lanes`); WMEM: per word; else [0]
  std::uint32_t data = 0;                    // DATA (raw token streams only)

  bool operator==(const Record&) const = default;
};

// Constructors that leave unused fields zero (so records compare by value).
Record halt_record();
Record run_record();
Record sync_record();
Record launch_record(std::uint32_t threads, std::uint32_t grid);
Record cta_record(std::uint32_t cta);
Record exec_record(std::uint32_t block, std::uint32_t warp, std::uint32_t lanes);
Record sched_record(std::uint32_t warp, std::uint32_t lanes, LaneStatus status, std::uint32_t block);
// One record in the smallest format that holds `values` (only lanes in `lanes` for WREG); it may
// need more than kMaxDataTokens DATA tokens, which encoding refuses: the splitting forms below don't.
Record wreg_record(std::uint32_t warp, std::uint32_t reg, std::uint32_t lanes,
                   const std::array<std::uint32_t, 4>& values);
Record wmem_record(bool shared, std::uint32_t word, std::span<const std::uint32_t> values);
// The protocol's split: lanes (words) in order, each record taking as many as
// fit in kMaxDataTokens DATA tokens in its smallest format.
std::vector<Record> wreg_records(std::uint32_t warp, std::uint32_t reg, std::uint32_t lanes,
                                 const std::array<std::uint32_t, 4>& values);
std::vector<Record> wmem_records(bool shared, std::uint32_t word, std::span<const std::uint32_t> values);
// A ROM row as its two half records (low, high).
std::array<Record, 2> rom_records(std::uint32_t block, std::uint32_t slot, std::uint64_t row);
Record live_record(std::uint32_t block, std::uint32_t live_mask);
// `LIVE exited`: the registers that stay live in a lane that exited (the shuffle sources).
Record live_exited_record(std::uint32_t mask);
// The words of one space an access may touch: [0, words).
Record bound_record(bool shared, std::uint32_t words);
Record fault_record(std::uint32_t slot, std::uint32_t lane, FaultKind kind);

ValueFormat smallest_format(std::span<const std::uint32_t> values);

// Token ids: the machine's rows follow the base vocabulary (`base` = its row count).
inline constexpr std::int64_t kQwen35VocabRows = 248320;
std::int64_t vocabulary_rows();          // rows the machine adds
std::int64_t first_id(RecordKind kind);  // offset of a kind's first row from `base`
std::int64_t rows_of(RecordKind kind);   // rows of a kind
int data_tokens(const Record& record);   // DATA tokens after the header
int token_count(const Record& record);   // 1 + data_tokens
std::int64_t token_count(std::span<const Record> records);

// Appends the record's tokens (header, then DATA); a field outside the layout is an error naming it.
sdk::Status append_tokens(const Record& record, std::int64_t base, std::vector<std::int64_t>& out);
sdk::Expected<std::vector<std::int64_t>> encode_tokens(std::span<const Record> records, std::int64_t base);
// One token by itself: `offset` = id - base. Headers get their fields, DATA
// its payload in `data`; errors name rows outside the layout or reserved rows.
sdk::Expected<Record> token_record(std::int64_t offset);
// Parses a whole token stream; errors name the token index, the id and why it does not fit.
sdk::Expected<std::vector<Record>> decode_tokens(std::span<const std::int64_t> ids, std::int64_t base);

// One line per record, e.g. "EXEC B1 w0 0b0111", "WREG w0 r2 0b0111 byte [4, 10, 18]".
std::string to_text(const Record& record);
// One token by itself (token_record), its header fields only: "WREG w0 r2 0b0111 byte",
// "ROM B1.2 lo", "DATA 0x3f"; the names a tokenizer gives the record rows.
std::string token_name(const Record& record);
const char* kind_name(RecordKind kind);  // "EXEC", "WREG", ... ("?" past the last kind)
std::string lane_mask_text(std::uint32_t lanes);

// Checks that the program and its launch fit the token layout (errors name the limit and by how much).
sdk::Status check_protocol_limits(const Program& program);

// Registers live at each block's entry (bit r), plus every register a shuffle
// reads (another lane may read it at any time) in all blocks.
std::vector<std::uint16_t> live_in_masks(const Program& program);

// The host's prompt for a launch: LAUNCH, the BOUND of both spaces, CTA 0, ROM and LIVE rows
// (LIVE exited when a shuffle reads some register), memory, scheduler rows, RUN
// (docs/PROTOCOL.md "Prompt").
sdk::Expected<std::vector<Record>> encode_prompt(const Program& program, const std::vector<sdk::LaunchArg>& args);

// --check: the first generated token that differs from the expected stream.
struct StreamMismatch {
  std::size_t token = 0;   // index in the generated stream
  std::size_t record = 0;  // index of the expected record that token belongs to
  std::string expected;    // e.g. "DATA 2 of 3 of WREG w0 r1 0b0111 byte [4, 10, 18] (id 290624)"
  std::string got;         // e.g. "DATA 0x1234 (id 288078)", or "nothing (the stream ended)"
  std::string to_string() const;  // one line: "token 5 (record 4): expected ..., got ..."
};
// Compares `got` with `expected` token by token (both id streams with the
// machine's rows from `base`); nothing when they are equal.
std::optional<StreamMismatch> first_mismatch(std::span<const std::int64_t> expected,
                                             std::span<const std::int64_t> got, std::int64_t base);

struct LaunchRecords {
  sdk::LaunchResult result;       // the interpreter's result, unchanged (none after a fault)
  sdk::Status fault;              // a memory fault's error: `generated` ends with its FAULT
  std::vector<Record> prompt;     // fed by the host
  std::vector<Record> generated;  // what the model must generate, ending with HALT (or FAULT)
  std::int64_t prompt_tokens = 0;
  std::int64_t generated_tokens = 0;
};
// Runs the reference interpreter and records the exact stream the model must generate; a memory
// fault ends it with FAULT (LaunchRecords::fault), any other error is returned.
sdk::Expected<LaunchRecords> record_launch(const Program& program, const std::vector<sdk::LaunchArg>& args,
                                           const sdk::InterpretOptions& options);

}  // namespace qgpu::simt
