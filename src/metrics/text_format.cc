#include "metrics/text_format.h"

#include <charconv>
#include <cmath>
#include <cstdint>

namespace rampart::metrics {
namespace {

constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

// Length of the well-formed UTF-8 sequence at the start of `text`, or 0 when it is malformed
// (overlong forms, surrogates and code points above U+10FFFF count as malformed).
size_t Utf8SequenceLength(std::string_view text) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  auto continuation = [&](size_t i) { return i < text.size() && (byte(i) & 0xC0) == 0x80; };
  unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return continuation(1) ? 2 : 0;
  if (lead >= 0xE0 && lead <= 0xEF) {
    if (!continuation(1) || !continuation(2)) return 0;
    if (lead == 0xE0 && byte(1) < 0xA0) return 0;   // overlong
    if (lead == 0xED && byte(1) >= 0xA0) return 0;  // UTF-16 surrogate
    return 3;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    if (!continuation(1) || !continuation(2) || !continuation(3)) return 0;
    if (lead == 0xF0 && byte(1) < 0x90) return 0;   // overlong
    if (lead == 0xF4 && byte(1) >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

// Copies `text` into `out`, escaping backslash and newline (and the double quote when asked),
// and replacing each malformed UTF-8 byte with U+FFFD.
void AppendEscaped(std::string& out, std::string_view text, bool escape_quote) {
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && escape_quote) {
      out += "\\\"";
    } else {
      size_t length = Utf8SequenceLength(text.substr(i));
      if (length == 0) {
        out += kReplacementCharacter;
        ++i;
        continue;
      }
      out.append(text.substr(i, length));
      i += length;
      continue;
    }
    ++i;
  }
}

bool IsNameStart(char c, bool allow_colon) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':');
}

bool IsNameRest(char c, bool allow_colon) {
  return IsNameStart(c, allow_colon) || (c >= '0' && c <= '9');
}

bool IsValidName(std::string_view name, bool allow_colon) {
  if (name.empty() || !IsNameStart(name[0], allow_colon)) return false;
  for (char c : name.substr(1)) {
    if (!IsNameRest(c, allow_colon)) return false;
  }
  return true;
}

}  // namespace

void AppendValue(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
    return;
  }
  if (std::isinf(value)) {
    out += value > 0 ? "+Inf" : "-Inf";
    return;
  }
  char buffer[64];
  constexpr double kExactIntegerLimit = 9007199254740992.0;  // 2^53
  std::to_chars_result result;
  if (value == std::trunc(value) && std::fabs(value) < kExactIntegerLimit) {
    result = std::to_chars(buffer, buffer + sizeof(buffer), static_cast<int64_t>(value));
  } else {
    result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  }
  out.append(buffer, result.ptr);
}

std::string FormatValue(double value) {
  std::string out;
  AppendValue(out, value);
  return out;
}

void AppendEscapedLabelValue(std::string& out, std::string_view value) {
  AppendEscaped(out, value, /*escape_quote=*/true);
}

void AppendEscapedHelp(std::string& out, std::string_view help) {
  AppendEscaped(out, help, /*escape_quote=*/false);
}

bool IsValidMetricName(std::string_view name) { return IsValidName(name, /*allow_colon=*/true); }

bool IsValidLabelName(std::string_view name) {
  return IsValidName(name, /*allow_colon=*/false) && !name.starts_with("__");
}

}  // namespace rampart::metrics
