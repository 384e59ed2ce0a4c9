#include "config.h"

#include <string>

namespace qgpu::simt {

sdk::Expected<MachineConfig> MachineConfig::from_options(const sdk::Options& options) {
  MachineConfig c;
  struct Field {
    const char* name;
    int* target;
  };
  const Field fields[] = {
      {"lanes", &c.lanes},
      {"registers", &c.registers},
      {"rom_blocks", &c.rom_blocks},
      {"block_instructions", &c.block_instructions},
      {"global_words", &c.global_words},
      {"shared_words", &c.shared_words},
      {"max_threads", &c.max_threads},
      {"max_block_threads", &c.max_block_threads},
  };
  for (const Field& f : fields) {
    auto value = options.get_int(f.name);
    if (!value) return value.error();
    *f.target = static_cast<int>(*value);
  }
  if (c.lanes < 1 || c.lanes > kMaxLanes)
    return sdk::invalid_argument("lanes: " + std::to_string(c.lanes) + " is outside 1.." + std::to_string(kMaxLanes));
  if (c.registers < 2 || c.registers > 16)
    return sdk::invalid_argument("registers: " + std::to_string(c.registers) + " is outside 2..16 (4-bit fields)");
  if (c.rom_blocks < 1 || c.rom_blocks > 65536)
    return sdk::invalid_argument("rom_blocks: " + std::to_string(c.rom_blocks) +
                                 " is outside 1..65536 (16-bit targets)");
  return c;
}

}  // namespace qgpu::simt
