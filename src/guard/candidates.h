#pragma once

// From a pattern match to a candidate entity: where it really starts and ends (the validators
// look at the characters around a match, so a candidate inside a longer digit run, domain or
// token is rejected), whether it is valid, and its base score.
//
// Longest entity per type, in bytes of the original text (a full-width character is 3 bytes and
// reads as one ASCII character, hence the factor 3 where full-width forms are plausible). The
// detector drops anything longer, so Detector::max_entity_bytes is a real bound:
//   CN_RESIDENT_ID     54   18 characters
//   CN_MOBILE          54   "0086 138 0013 8000": 18 characters
//   PAYMENT_CARD      111   19 digits and 18 separators
//   CN_USCC            54   18 characters
//   CN_PASSPORT        27   9 characters
//   EMAIL_ADDRESS     762   254 characters (RFC 5321's path limit)
//   PHONE_NUMBER      120   '+', 15 digits, separators and one "(...)": at most 40 characters
//   IP_ADDRESS        135   45 characters (the longest IPv6 text form)
//   MAC_ADDRESS        51   17 characters
//   IBAN_CODE         126   34 characters and 8 group spaces
//   US_SSN             33   11 characters
//   SECRET           8192   a PEM private key block (an 8192-bit RSA key is ~6.5 KB); tokens
//   INTERNAL_ENDPOINT 1024  a host name (253), or a path under a root (1024)
//
// Thread safety: pure functions.

#include <cstddef>
#include <string_view>

#include "guard/patterns.h"

namespace rampart::guard {

struct Candidate {
  std::string_view type;
  size_t start = 0;  // offsets into the normalised text
  size_t end = 0;
  double score = 0;
  bool requires_context = false;  // reported only with one of the type's context words nearby
};

// Validates the match [start, end) of a pattern of `shape` in the normalised `text`.
// `all_ends`: the scanner reports every end offset (Hyperscan), so a validator that finds the
// entity's own end accepts only the match that ends there (each entity once). Returns false
// for a look-alike.
bool ValidateMatch(Shape shape, std::string_view text, size_t start, size_t end, bool all_ends,
                   Candidate* candidate);

// The specificity rank of a type: a span claimed by several types goes to the lowest rank.
int Specificity(std::string_view type);

}  // namespace rampart::guard
