// Choosing the next record token: the unembedding rows of the machine's
// vocabulary read the sequencer's NextToken fields (docs/MACHINE_CIRCUIT.md §5).
//
// For a generated token t with n_t field bits:
//   logit(t) = α · (W·[kind bit of t] + Σ_i [bit i matches t_i] − n_t)
// (each [·] read as (1 ± x)/2 from the bit's channel, the constants through
// NextToken::one, which is 1 wherever a next token is chosen), W = max n_t + 1.
// Reading the constants from `one` rather than the constant channel keeps the whole
// row in the fields' scale when the successor amplifies them (build_successor's
// choice_gain): every logit is then scaled by the same factor. The token whose
// fields are in the residual scores α·W; a token of the same kind with k wrong
// bits α·(W − k); a token of another kind at most 0. FAULT's kind bit weighs 2W: on an EXEC
// that faults, both FAULT's bit and the kind bit of the token the write-back would start with
// are 1, and FAULT scores α·2W against α·W. Rows the model never
// generates (RUN, LAUNCH, ROM, LIVE, reserved rows) score −α·W·2 whatever the
// residual holds.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "qgpu/sdk/status.h"
#include "qgpu/weights/choice.h"
#include "qgpu/weights/compile.h"
#include "qgpu/weights/model.h"
#include "writeback.h"

namespace qgpu::simt::circuit {

// NextToken's bit values for a token (offset from the machine's first row);
// false for rows the model never generates.
struct TokenBits {
  std::vector<std::pair<weights::Bit, bool>> bits;  // kind bit (true) and every field bit of the kind
  int kind_weight = 1;  // × W: FAULT's 2, so that a fault outscores the token the EXEC would choose else
};
bool generated_token_bits(const NextToken& next, std::int64_t offset, TokenBits& out);

inline constexpr int kChoiceKindWeight = 17;  // W: one more than the widest kind's field bits (DATA: 16)

// Marks the NextToken fields as read back after the last layer (the unembedding reads
// them): with channel reuse they keep their channels, and they never share them by mode.
sdk::Status mark_choice_outputs(weights::Circuit& c, const NextToken& next);

// The machine's unembedding rows: vocabulary_rows() × hidden, in units where
// the residual is normalized (a bit's channel reads +1 for 1 and -1 for 0). `alpha`
// must be a power of two.
sdk::Expected<weights::SparseMatrix> record_unembedding(const NextToken& next, const weights::Allocation& a,
                                                        double alpha);

// The best row of the logits (weights::choose): `text_rows` text rows, then one per machine row;
// the winner's offset is its machine row.
using weights::Choice;
using weights::choose;

}  // namespace qgpu::simt::circuit
