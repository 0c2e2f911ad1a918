#include "identity/glob.h"

namespace rampart::identity {

bool GlobMatches(std::string_view pattern, std::string_view text, char separator) {
  // Iterative matching with one backtrack point (the last '*'), linear in practice; a '*' can
  // only extend over characters that are not the separator.
  size_t p = 0;
  size_t t = 0;
  size_t star = std::string_view::npos;
  size_t star_text = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_text = t;
    } else if (p < pattern.size() &&
               (pattern[p] == text[t] || (pattern[p] == '?' && text[t] != separator))) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos && text[star_text] != separator) {
      p = star + 1;
      t = ++star_text;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace rampart::identity
