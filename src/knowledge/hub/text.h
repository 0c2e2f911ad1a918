#pragma once

// UTF-8 helpers shared by the knowledge hub's text side: validation, normalisation (NFC, LF line
// ends, no control characters), code point decoding and script classes.
//
// Thread safety: free functions and values; ICU's normaliser instance is shared and immutable.

#include <cstddef>
#include <string>
#include <string_view>

#include "core/status.h"

namespace rampart::knowledge::hub {

// OK when `text` is well-formed UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF);
// otherwise InvalidArgument "invalid UTF-8 at byte N".
Status ValidateUtf8(std::string_view text);

// Returns `text` (valid UTF-8) in Unicode NFC with CRLF and lone CR turned into LF, and every
// control character other than LF and TAB removed (NUL, C0, DEL, C1), as are U+FEFF byte order
// marks and U+2028/U+2029 (turned into LF). Internal on an ICU failure.
Result<std::string> NormalizeText(std::string_view text);

// Decodes the code point at `text[offset]` (valid UTF-8) and sets `*length` to its byte length.
char32_t DecodeUtf8(std::string_view text, size_t offset, size_t* length);
void AppendUtf8(char32_t code_point, std::string* out);

// Han ideographs, kana, Hangul, bopomofo and CJK punctuation-free letters: the characters that
// count one token each and are segmented by dictionary rather than by spaces.
bool IsCjk(char32_t code_point);
// True when `text` holds at least one CJK character.
bool ContainsCjk(std::string_view text);

}  // namespace rampart::knowledge::hub
