#include "policy/glob.h"

#include "core/glob.h"

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

bool Glob::Matches(std::string_view name) const {
  return literal_ ? name == text_ : GlobMatches(text_, name);
}

}  // namespace rampart::policy
