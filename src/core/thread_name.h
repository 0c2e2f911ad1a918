#pragma once

// Names the calling thread for `top -H`, `ps -L`, perf and debuggers, e.g. "http-io-0" or
// "inst-mlp_classi". Linux keeps at most 15 characters; longer names are cut there.

#include <string_view>

namespace rampart {

void NameThisThread(std::string_view name);

}  // namespace rampart
