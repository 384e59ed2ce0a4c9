// The silence certificate and the choice placement as JSON (qgpu-host, qgpu-silence).
#pragma once

#include <nlohmann/json.hpp>

#include "qgpu/core/channel_plan.h"
#include "qgpu/core/silence.h"

namespace qgpu::core {

inline nlohmann::ordered_json to_json(const SilenceCertificate& c) {
  nlohmann::ordered_json worst = nlohmann::ordered_json::array();
  for (const LeakingRow& r : c.worst) worst.push_back({{"row", r.row}, {"margin", r.margin}});
  return {{"case", c.exact() ? "exact" : "approximate"},
          {"summary", c.to_string()},
          {"rows", c.rows},
          {"zero_rows", c.zero_rows},
          {"leaking", c.leaking},
          {"worst_leaking", worst},
          {"min_margin", c.min_margin},
          {"min_margin_row", c.min_margin_row},
          {"needed_margin", c.needed_margin},
          {"channels", c.direction.channels},
          {"weights", c.direction.weights},
          {"gain", c.direction.gain},
          {"channels_available", c.channels_available},
          {"search_seconds", c.search_seconds}};
}

inline nlohmann::ordered_json to_json(const ChoicePlacement& p) {
  return {{"channels", p.channels},
          {"massive_channels", p.massive},
          {"final_scale_min", p.scale_min},
          {"final_scale_max", p.scale_max},
          {"perturbation_max", p.perturbation_max},
          {"perturbation_median", p.perturbation_median}};
}

}  // namespace qgpu::core
