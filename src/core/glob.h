#pragma once

// Glob matching, the one matcher of Rampart's patterns (the policy files' names, identity
// selectors): '*' matches any run of characters (none included) and '?' exactly one; every other
// character matches itself (no classes, no escapes). With a `separator`, neither wildcard
// crosses it (so "*.svc.acme" does not match "a.b.svc.acme" with separator '.', and
// "spiffe://td/ns/*" does not match "spiffe://td/ns/a/b" with separator '/').
//
// Iterative, with one backtrack point (the last '*'): O(pattern x text) at worst, no recursion.

#include <optional>
#include <string_view>

namespace rampart {

bool GlobMatches(std::string_view pattern, std::string_view text,
                 std::optional<char> separator = std::nullopt);

}  // namespace rampart
