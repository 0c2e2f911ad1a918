#pragma once

// Token counts close to OpenAI's cl100k_base, without its vocabulary (which is not available to
// the build). The text is scanned once into runs, each estimated as cl100k tends to encode it:
//   - a run of ASCII letters: one token per 8 letters begun ("the" 1, "tokenization" 2); the
//     space before a word belongs to the word (0 tokens), as in cl100k's pre-tokeniser;
//   - a run of other letters (accented Latin, Cyrillic, Greek, ...): one token per 4 UTF-8 bytes
//     begun;
//   - a run of digits: one token per 3 digits begun (cl100k splits numbers that way);
//   - CJK (Han, kana, Hangul): one token per character;
//   - ASCII punctuation: one token per 2 characters begun; other symbols (emoji, CJK
//     punctuation): one per code point;
//   - whitespace: a run holding a line break, or of two or more spaces, is one token.
// Measured against cl100k_base (the gpt-tokenizer npm package's encoder) on files of this
// machine: English Markdown docs +3..+10%, C++ source +8..+19%, mixed Chinese/English text
// (gnupg's and systemd's zh_CN texts) +3..+5%, pure Chinese phrases -16% (cl100k spends 1..2
// tokens per Han character). It mostly errs high, so chunks rarely exceed OpenAI's count; sizes
// are close to, not exactly, OpenAI's.
//
// Thread safety: pure functions.

#include <cstddef>
#include <string_view>

namespace rampart::knowledge::hub {

// REQUIRES: `text` is valid UTF-8.
size_t CountTokens(std::string_view text);

}  // namespace rampart::knowledge::hub
