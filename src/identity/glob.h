#pragma once

// Glob matching for identity selectors (internal to src/identity): '*' matches any run of
// characters and '?' one character, neither of them crossing `separator` (so "*.svc.acme" does
// not match "a.b.svc.acme" with separator '.', and "spiffe://td/ns/*" does not match
// "spiffe://td/ns/a/b" with separator '/'). Every other character matches itself.

#include <string_view>

namespace rampart::identity {

bool GlobMatches(std::string_view pattern, std::string_view text, char separator);

}  // namespace rampart::identity
