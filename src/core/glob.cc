#include "core/glob.h"

namespace rampart {

bool GlobMatches(std::string_view pattern, std::string_view text, std::optional<char> separator) {
  // A '*' can only extend over characters that are not the separator. A '*' in the pattern is
  // always a wildcard, even where the text has a '*' too.
  const auto crossable = [separator](char c) { return !separator || c != *separator; };
  size_t p = 0;
  size_t t = 0;
  size_t star = std::string_view::npos;
  size_t star_text = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_text = t;
    } else if (p < pattern.size() &&
               (pattern[p] == text[t] || (pattern[p] == '?' && crossable(text[t])))) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos && crossable(text[star_text])) {
      p = star + 1;
      t = ++star_text;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace rampart
