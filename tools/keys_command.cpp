// `tinylm keys`: every config key with its default, what it accepts and what it means, as
// the Markdown table of docs/CONFIG.md (a test holds the two equal).

#include <cstdio>

#include "tools/commands.h"
#include "train/run/run_config.h"

namespace tinylm {

Command add_keys_command(CLI::App& app) {
  app.add_subcommand("keys", "List every config key: default, accepted values, meaning");
  return [] {
    std::fputs(config_key_table().c_str(), stdout);
    return 0;
  };
}

}  // namespace tinylm
