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
#include <vector>

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
// for a look-alike, and for Shape::kKeyAssignment (see below).
bool ValidateMatch(Shape shape, std::string_view text, size_t start, size_t end, bool all_ends,
                   Candidate* candidate);

// Key assignments ("api_key=...", "password: '...'"): `key_ends` are the ends of the key
// pattern's matches (just after the ':' or '='), in any order, repeats allowed. The value is
// up to 4 blanks and an optional quote on: a run of at least 8 value characters
// ([A-Za-z0-9!#$%&*+\-./=?@^_|~]) that looks random (or is a JWT). Within one run only the first
// key counts (in "token=password=Xy..." the value is "password=Xy..."), and it is proposed at
// every end where the next character is not a token character, as the whole pattern's matches
// were. Values over 8192 bytes (the SECRET bound) are not proposed. Appends to `candidates`;
// time linear in the text.
void AddKeyAssignments(std::string_view text, std::vector<size_t>* key_ends,
                       std::vector<Candidate>* candidates);

// The specificity rank of a type: a span claimed by several types goes to the lowest rank.
int Specificity(std::string_view type);

}  // namespace rampart::guard
