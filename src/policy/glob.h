#pragma once

// Glob patterns for the policy files' names (actions, resource names, resources' attribute
// entries): `*` matches any run of characters (none included), `?` exactly one; every other
// character matches itself. No character classes, no escapes. Values; thread-safe to read.

#include <string>
#include <string_view>

#include "core/status.h"

namespace rampart::policy {

class Glob {
 public:
  // InvalidArgument "bad glob '<text>': <why>" for an empty pattern, white space or control
  // characters, or the brackets and braces other glob dialects give a meaning ([ ] { }).
  static Result<Glob> Parse(std::string_view text);

  bool Matches(std::string_view name) const;

  const std::string& text() const { return text_; }
  bool is_literal() const { return literal_; }  // no `*` or `?`: matches only itself
  // How many characters are not wildcards: the more, the more specific the pattern.
  size_t literal_characters() const { return literal_characters_; }

 private:
  std::string text_;
  bool literal_ = true;
  size_t literal_characters_ = 0;
};

}  // namespace rampart::policy
