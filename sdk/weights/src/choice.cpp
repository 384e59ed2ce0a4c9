#include "qgpu/weights/choice.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace qgpu::weights {

sdk::Expected<Choice> choose(std::span<const float> logits, std::int64_t text_rows) {
  if (text_rows < 0 || static_cast<std::size_t>(text_rows) >= logits.size())
    return sdk::invalid_argument("choose: " + std::to_string(logits.size()) + " logits for " +
                                 std::to_string(text_rows) + " text rows and at least one machine row");
  auto name = [&](std::int64_t t) {
    return t < text_rows ? "text row " + std::to_string(t) : "machine row " + std::to_string(t - text_rows);
  };
  Choice c;
  double second = -INFINITY;
  for (std::size_t t = 0; t < logits.size(); ++t) {
    const double v = logits[t];
    if (std::isnan(v)) return sdk::internal_error("choose: logit of " + name(static_cast<std::int64_t>(t)) + " is NaN");
    if (c.offset < 0 || v > c.logit) {
      if (c.offset >= 0) second = c.logit;
      c.offset = static_cast<std::int64_t>(t);
      c.logit = v;
    } else if (v > second) {
      second = v;
    }
  }
  c.margin = c.logit - second;
  if (!(c.margin > 0))
    return sdk::internal_error("choose: no single best row (" + name(c.offset) + " and another tie at " +
                               std::to_string(c.logit) + ")");
  if (c.offset < text_rows) {
    double best = -INFINITY;
    for (std::size_t t = static_cast<std::size_t>(text_rows); t < logits.size(); ++t)
      best = std::max(best, static_cast<double>(logits[t]));
    return sdk::internal_error("choose: the model chose " + name(c.offset) + " (logit " + std::to_string(c.logit) +
                               ") where a record was due; the best machine row scores " + std::to_string(best));
  }
  c.offset -= text_rows;
  return c;
}

}  // namespace qgpu::weights
