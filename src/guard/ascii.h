#pragma once

// ASCII character classes the candidates' validators and the match-start rules share.

namespace rampart::guard::ascii {

inline bool IsDigit(char c) { return c >= '0' && c <= '9'; }
inline bool IsUpper(char c) { return c >= 'A' && c <= 'Z'; }
inline bool IsLower(char c) { return c >= 'a' && c <= 'z'; }
inline bool IsAlnum(char c) { return IsDigit(c) || IsUpper(c) || IsLower(c); }
inline bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
inline bool IsEmailLocal(char c) {
  return IsAlnum(c) || c == '.' || c == '_' || c == '%' || c == '+' || c == '-';
}
inline bool IsTokenChar(char c) {
  return IsAlnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' ||
         c == '=';
}
inline bool IsPathChar(char c) {
  return IsAlnum(c) || c == '.' || c == '_' || c == '~' || c == '%' || c == '+' || c == '@' ||
         c == '=' || c == '-' || c == '/';
}

}  // namespace rampart::guard::ascii
