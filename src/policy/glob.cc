#include "policy/glob.h"

namespace rampart::policy {

Result<Glob> Glob::Parse(std::string_view text) {
  if (text.empty()) return InvalidArgument("bad glob '': empty");
  Glob glob;
  for (const char c : text) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) {
      return InvalidArgument("bad glob '{}': white space or a control character", text);
    }
    if (c == '[' || c == ']' || c == '{' || c == '}') {
      return InvalidArgument("bad glob '{}': only * and ? are wildcards ('{}' is not allowed)",
                             text, c);
    }
    if (c == '*' || c == '?') {
      glob.literal_ = false;
    } else {
      ++glob.literal_characters_;
    }
  }
  glob.text_ = std::string(text);
  return glob;
}

// The classic linear-time match: on a mismatch after a `*`, retry with the star taking one more
// character. Only the last star needs remembering, so the cost is O(pattern x name) at worst.
bool Glob::Matches(std::string_view name) const {
  if (literal_) return name == text_;
  const std::string_view pattern = text_;
  size_t p = 0;
  size_t n = 0;
  size_t star = std::string_view::npos;
  size_t star_n = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_n = n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++star_n;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace rampart::policy
