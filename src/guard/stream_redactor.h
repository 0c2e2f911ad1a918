#pragma once

// StreamRedactor: redaction of a text that arrives in pieces (the content deltas of a streamed
// answer), releasing each piece as soon as it can.
//
// Each Push detects over the text not yet released (plus a little released text before it, for
// context words) and releases everything up to the start of the tail that could still be, or
// begin, an entity once more text comes; Finish releases the rest. What comes out, concatenated,
// is the whole text's redaction (Redact over Detect of the whole text), for detectors whose
// entities are decided by their own characters and context words before them.
//
// The tail held back (docs/guard.md, "Streaming"): scanning back from the end of what arrived,
//   - characters entities are made of: ASCII letters and digits, . _ % + - @ : / \ = ~ # ? & [ ]
//     $ ! * ^ and every full-width ASCII form (U+FF01..U+FF5E);
//   - a single space, tab, no-break or ideographic space joins the tail only after a digit
//     (digit groups of cards, phones, IBANs), after a word of one to four upper-case letters or
//     digits (an IBAN's letter groups: "GB80 VFLL"), after '=' or ':' (api_key= / password:
//     values), or after a word that introduces a secret (Bearer, Basic, token, password, ...);
//   - anything else (other whitespace, line breaks, CJK and other letters, other punctuation)
//     ends the tail, so a piece ending in one holds nothing;
//   - an entity the detector found that reaches into the tail is held whole, and an unclosed PEM
//     block ("-----BEGIN" without its "-----END ...-----" line) is held from its start;
//   - a UTF-8 sequence cut by the piece's end is held until its last byte arrives;
// and the tail never exceeds the detector's max_entity_bytes() (anything further back cannot be
// part of a later entity).
//
// Thread safety: one stream's; not synchronised. The Detector must outlive it.

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "guard/detector.h"
#include "guard/keys.h"
#include "guard/operators.h"
#include "guard/redact.h"

namespace rampart::guard {

class StreamRedactor {
 public:
  // Released text kept (not re-released) so that context words before an entity are seen.
  static constexpr size_t kLeftContextBytes = 64;
  // A context word counts up to this far after a candidate (guard/context.h), and the longest
  // candidate of a type that needs one: with digits this near the end, the end waits.
  static constexpr size_t kRightContextBytes = 24;
  static constexpr size_t kLongestContextCandidate = 32;

  // `types`: detect only these (empty = every type); entities of a type whose operator is block
  // are replaced like `replace` (the caller refuses them: see TakeReleased).
  StreamRedactor(const Detector& detector, OperatorChoice operators, TenantKeys keys,
                 std::vector<std::string_view> types = {});

  // Takes the next piece; returns the redacted text that can go out now (often all of it).
  // Errors: the Detector's (InvalidArgument for invalid UTF-8).
  Result<std::string> Push(std::string_view piece);
  // The end of the text: everything held, redacted.
  Result<std::string> Finish();

  // The entities released since the last call, with offsets into the whole text pushed.
  std::vector<Redaction> TakeReleased();
  size_t held_bytes() const { return held_.size(); }

 private:
  Result<std::string> Release(bool final);

  const Detector& detector_;
  const OperatorChoice operators_;
  const TenantKeys keys_;
  const std::vector<std::string_view> types_;
  std::string context_;     // the last released input (not redacted), for the detector only
  std::string held_;        // input not yet released
  size_t held_offset_ = 0;  // held_[0]'s offset in the whole input
  std::vector<Redaction> released_;
};

// Where the tail that could still be, or begin, an entity starts in text[from, end) (the rules
// above, without the detector's entities and the max_entity_bytes bound). For tests and benches.
size_t HeldTailStart(std::string_view text, size_t from, size_t end);

}  // namespace rampart::guard
