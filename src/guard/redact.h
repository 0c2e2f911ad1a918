#pragma once

// Redaction of whole texts: the entities a Detector found, each replaced as its operator says.
// RedactText is the one-call form for any caller with a text to clean (the gateway's stages, the
// HTTP API, and the knowledge base's ingestion later).
//
// Thread safety: free functions; any thread.

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "guard/detector.h"
#include "guard/keys.h"
#include "guard/operators.h"

namespace rampart::guard {

// One entity as it was redacted.
struct Redaction {
  std::string_view type;  // static storage (detector.h's names)
  size_t start = 0;       // byte offsets into the original text: [start, end)
  size_t end = 0;
  double score = 0;
  OperatorKind op = OperatorKind::kReplace;
  std::string replacement;
};

struct RedactedText {
  std::string text;
  std::vector<Redaction> entities;  // by start
};

// `text` with each of `entities` replaced by `operators.For(type)` applied to it (kBlock reads as
// replace: callers refuse blocked types before redacting). Offsets are bytes of UTF-8, and the
// operators count characters, never bytes. Entities out of bounds, overlapping an earlier one or
// not on character boundaries are skipped (a Detector never reports them).
RedactedText Redact(std::string_view text, const std::vector<Entity>& entities,
                    const OperatorChoice& operators, const TenantKeys& keys);

struct RedactOptions {
  OperatorChoice operators;             // which operator each type gets
  std::vector<std::string_view> types;  // detect only these (empty = every type)
  std::string tenant = std::string(kDefaultTenant);
};

// Detects and redacts `text` in one call. Errors: the Detector's (InvalidArgument for invalid
// UTF-8 or an oversized text), and InvalidArgument naming the types (never the values) when an
// entity's operator is block.
Result<RedactedText> RedactText(const Detector& detector, const GuardKeys& keys,
                                std::string_view text, const RedactOptions& options);

// "the text contains data the guard blocks: CN_RESIDENT_ID, SECRET" for the distinct `types`.
std::string BlockedMessage(const std::vector<std::string_view>& types);

}  // namespace rampart::guard
