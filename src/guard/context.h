#pragma once

// Context words: words near a candidate that say what it is ("身份证号", "card", "passport").
// A context word within 64 bytes before or 24 bytes after a candidate (in the original text)
// raises its score; some candidates (CN_PASSPORT, an all-digit CN_USCC, an SSN without hyphens)
// are reported only with one. ASCII words match case-insensitively.
//
// Thread safety: pure functions over static tables.

#include <cstddef>
#include <string_view>
#include <vector>

namespace rampart::guard {

// The context words of a type (empty for types without any).
const std::vector<std::string_view>& ContextWords(std::string_view type);

// Whether one of the type's context words is near [start, end) of `text`.
bool HasContextWord(std::string_view type, std::string_view text, size_t start, size_t end);

}  // namespace rampart::guard
