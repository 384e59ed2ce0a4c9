// Greedy choice over logit rows with its margin: how a circuit's next token is chosen, alone
// (record rows only) or merged (the base's text rows first, then the record rows).
#pragma once

#include <cstdint>
#include <span>

#include "qgpu/sdk/status.h"

namespace qgpu::weights {

struct Choice {
  std::int64_t offset = -1;  // the winning row, counted from the first row after the text rows
  double logit = 0;
  double margin = 0;  // winner minus runner-up of all rows
};

// The best row of `logits`: `text_rows` text rows (a merged model's base vocabulary; 0 for a
// circuit alone), then the machine's rows. Ties are an error (they mean the circuit chose nothing),
// and so are a NaN and a text row winning; the errors name the row ("text row N", "machine row N").
sdk::Expected<Choice> choose(std::span<const float> logits, std::int64_t text_rows = 0);

}  // namespace qgpu::weights
