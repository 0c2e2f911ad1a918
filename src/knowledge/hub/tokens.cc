#include "knowledge/hub/tokens.h"

#include <unicode/uchar.h>

#include "knowledge/hub/text.h"

namespace rampart::knowledge::hub {
namespace {

enum class RunKind { kNone, kSpace, kAsciiLetter, kOtherLetter, kDigit, kAsciiPunct };

size_t CeilDiv(size_t a, size_t b) { return (a + b - 1) / b; }

}  // namespace

size_t CountTokens(std::string_view text) {
  size_t tokens = 0;
  RunKind run = RunKind::kNone;
  size_t run_length = 0;  // characters (ASCII) or bytes (other letters)
  bool run_newline = false;
  auto close_run = [&] {
    switch (run) {
      case RunKind::kSpace:
        if (run_newline || run_length >= 2) ++tokens;
        break;
      case RunKind::kAsciiLetter: tokens += CeilDiv(run_length, 8); break;
      case RunKind::kOtherLetter: tokens += CeilDiv(run_length, 4); break;
      case RunKind::kDigit: tokens += CeilDiv(run_length, 3); break;
      case RunKind::kAsciiPunct: tokens += CeilDiv(run_length, 2); break;
      case RunKind::kNone: break;
    }
    run = RunKind::kNone;
    run_length = 0;
    run_newline = false;
  };
  auto extend = [&](RunKind kind, size_t length) {
    if (run != kind) close_run();
    run = kind;
    run_length += length;
  };

  for (size_t i = 0; i < text.size();) {
    auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {
      if (byte == ' ' || byte == '\t' || byte == '\n') {
        extend(RunKind::kSpace, 1);
        run_newline = run_newline || byte == '\n';
      } else if ((byte | 0x20) >= 'a' && (byte | 0x20) <= 'z') {
        // A letter run that follows a non-ASCII letter stays one word ("café").
        extend(run == RunKind::kOtherLetter ? RunKind::kOtherLetter : RunKind::kAsciiLetter, 1);
      } else if (byte >= '0' && byte <= '9') {
        extend(RunKind::kDigit, 1);
      } else {
        extend(RunKind::kAsciiPunct, 1);
      }
      ++i;
      continue;
    }
    size_t length = 0;
    char32_t code_point = DecodeUtf8(text, i, &length);
    i += length;
    if (IsCjk(code_point)) {
      close_run();
      ++tokens;
      continue;
    }
    int8_t type = u_charType(static_cast<UChar32>(code_point));
    bool letter = u_isalpha(static_cast<UChar32>(code_point)) || type == U_NON_SPACING_MARK ||
                  type == U_COMBINING_SPACING_MARK;
    if (letter) {
      if (run == RunKind::kAsciiLetter) run = RunKind::kOtherLetter;
      extend(RunKind::kOtherLetter, length);
    } else if (u_isspace(static_cast<UChar32>(code_point))) {
      extend(RunKind::kSpace, 1);
    } else if (u_isdigit(static_cast<UChar32>(code_point))) {
      extend(RunKind::kDigit, 1);
    } else {
      close_run();
      ++tokens;
    }
  }
  close_run();
  return tokens;
}

}  // namespace rampart::knowledge::hub
