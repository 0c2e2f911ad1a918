#pragma once

// Character helpers the operators and the stream redactor share: UTF-8 decoding that never fails
// (an invalid byte reads as one character U+FFFD), and the classes entity text is made of.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rampart::guard::text {

// The code point at `pos` (REQUIRES: pos < text.size()); sets `length` to its byte count (1 for
// an invalid or truncated sequence, which reads as U+FFFD).
inline char32_t Decode(std::string_view text, size_t pos, size_t& length) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(pos);
  length = 1;
  if (lead < 0x80) return lead;
  size_t count = 0;
  char32_t value = 0;
  if ((lead & 0xE0) == 0xC0) {
    count = 2;
    value = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    count = 3;
    value = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    count = 4;
    value = lead & 0x07;
  } else {
    return 0xFFFD;
  }
  if (pos + count > text.size()) return 0xFFFD;
  for (size_t i = 1; i < count; ++i) {
    if ((byte(pos + i) & 0xC0) != 0x80) return 0xFFFD;
    value = (value << 6) | (byte(pos + i) & 0x3F);
  }
  length = count;
  return value;
}

// Whether `byte` continues a UTF-8 sequence (10xxxxxx).
inline bool IsContinuation(char byte) { return (static_cast<uint8_t>(byte) & 0xC0) == 0x80; }

// The ASCII form of a full-width digit or letter (U+FF10..U+FF5A), else the character itself.
inline char32_t FoldWidth(char32_t c) {
  if ((c >= 0xFF10 && c <= 0xFF19) || (c >= 0xFF21 && c <= 0xFF3A) ||
      (c >= 0xFF41 && c <= 0xFF5A)) {
    return c - 0xFF10 + U'0';
  }
  return c;
}

inline bool IsAsciiAlnum(char32_t c) {
  return (c >= U'0' && c <= U'9') || (c >= U'a' && c <= U'z') || (c >= U'A' && c <= U'Z');
}

inline bool IsDigit(char32_t c) {
  const char32_t folded = FoldWidth(c);
  return folded >= U'0' && folded <= U'9';
}

// Separators inside entities, kept by the mask operator: space, tab, '-', '.', '+', '(', ')',
// '/', ':', '_', no-break space, the dashes U+2010..U+2015 and the full-width space, '+', '-',
// '.', '(' and ')'.
inline bool IsSeparator(char32_t c) {
  switch (c) {
    case U' ':
    case U'\t':
    case U'-':
    case U'.':
    case U'+':
    case U'(':
    case U')':
    case U'/':
    case U':':
    case U'_':
    case 0x00A0:
    case 0x3000:
    case 0xFF0B:
    case 0xFF0D:
    case 0xFF0E:
    case 0xFF08:
    case 0xFF09: return true;
    default: return c >= 0x2010 && c <= 0x2015;
  }
}

// Characters the mask operator counts and hides: everything but separators and line breaks.
inline bool IsSignificant(char32_t c) { return !IsSeparator(c) && c != U'\n' && c != U'\r'; }

}  // namespace rampart::guard::text
