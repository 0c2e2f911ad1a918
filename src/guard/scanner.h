#pragma once

// The multi-pattern scan: every match of every pattern, handed to a callback as it is found.
//
// HyperscanScanner reports, for every pattern, every end offset at which a match ends, without
// its start (the callback's start is 0: tracking starts would cost three to four times the
// scan; starts.h finds them from the end). Re2Scanner (CPUs without SSSE3,
// or DetectorOptions::force_re2) runs each pattern in turn and reports leftmost-longest matches,
// restarting after each at the next token boundary; validators that pick their own end make the
// two agree on what is reported (see candidates.h).
//
// Thread safety: a Scanner is immutable after Create; Scan may run on many threads at once.

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "guard/patterns.h"

namespace rampart::guard {

// Called for each match: the pattern's index in the list given to Create, and [start, end).
using MatchCallback = void (*)(void* context, uint32_t pattern, size_t start, size_t end);

class Scanner {
 public:
  virtual ~Scanner() = default;
  // Errors: Internal when the engine fails (out of memory for scratch space).
  virtual Status Scan(std::string_view text, MatchCallback callback, void* context) const = 0;
  virtual std::string_view engine() const = 0;
  // Whether every end offset of a match is reported, without its start (Hyperscan), or the
  // leftmost-longest match with its start (RE2).
  virtual bool reports_all_ends() const = 0;
};

// Whether Hyperscan runs on this CPU (it needs SSSE3).
bool HyperscanSupported();

// Errors: InvalidArgument when a pattern does not compile (the engine's message).
Result<std::unique_ptr<Scanner>> CreateHyperscanScanner(const std::vector<Pattern>& patterns);
Result<std::unique_ptr<Scanner>> CreateRe2Scanner(const std::vector<Pattern>& patterns);

}  // namespace rampart::guard
