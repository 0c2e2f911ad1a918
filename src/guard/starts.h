#pragma once

// Where a match starts, found from where it ends. Hyperscan reports only the end of a match
// unless it tracks the start (HS_FLAG_SOM_LEFTMOST), which costs three to four times the scan;
// so the detector scans without it and finds the start here, by reading back from the end. The
// start found is the one HS_FLAG_SOM_LEFTMOST would give (the leftmost start of a match of the
// pattern ending there), so the validators see exactly what they saw before.
//
// Thread safety: pure functions.

#include <cstddef>
#include <string_view>

#include "guard/patterns.h"

namespace rampart::guard {

inline constexpr size_t kNoStart = static_cast<size_t>(-1);

// Whether a match of `shape` ending at `end` can be a candidate at all, judged by the characters
// at and after `end` only: false where its validator would reject it whatever its start (the
// digit or letter after it continues the run). Cheap; Hyperscan reports a match at every end
// offset, and most of them end inside a longer run.
bool EndMayClose(Shape shape, std::string_view text, size_t end);

// The leftmost start of a match of `pattern` ending at `end` (REQUIRES: one ends there), or
// kNoStart where that start is further back than the pattern's validator accepts (an e-mail
// address over 254 characters, a host name over 253). Time: at most the match's length, and
// for the unbounded shapes (e-mail, Bearer, JWT, paths) at most the run of their characters that
// ends at `end`, which EndMayClose lets through once per run.
size_t LeftmostStart(const Pattern& pattern, std::string_view text, size_t end);

}  // namespace rampart::guard
