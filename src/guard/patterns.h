#pragma once

// The scan's patterns: one regular expression per candidate shape, the same text for Hyperscan,
// RE2 and the benchmark's naive std::regex baseline. A pattern only proposes candidates; the
// validators in candidates.cc decide (check digits, ranges, context, where a candidate ends).
//
// Every pattern is bounded except those marked `unbounded` (e-mail, Bearer, JWT, internal hosts
// and paths), whose validators cap the length; none uses look-around or back-references
// (Hyperscan has neither). Hyperscan reports only where a match ends: starts.h finds the
// leftmost start of each shape from there. A key assignment's pattern stops at its ':' or '=';
// the detector reads the value that follows (candidates.h).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "guard/detector.h"

namespace rampart::guard {

// What a match is a candidate for: candidates.cc has one validator per shape.
enum class Shape : uint8_t {
  kResidentId18,
  kResidentId15,
  kMobile,
  kCard,
  kUscc,
  kPassport,
  kEmail,
  kPhone,
  kIpv4,
  kIpv6,
  kIpv6WithIpv4,  // an IPv6 address ending in dotted IPv4 ("::ffff:192.0.2.1")
  kMac,
  kIban,
  kSsn,
  kPemBegin,
  kAwsKeyId,
  kAwsSecret,
  kBearer,
  kJwt,
  kKeyAssignment,  // the key and its ':' or '=' only
  kInternalHost,
  kInternalUrlIpv4,
  kInternalUrlIpv6,
  kInternalPath,
};

struct Pattern {
  Shape shape;
  std::string regex;       // Hyperscan/RE2/ECMAScript-compatible syntax
  bool caseless = false;   // ASCII case-insensitive
  bool unbounded = false;  // the match may be arbitrarily long (a validator caps it)
  std::string literal;     // kInternalHost: the domain; kInternalPath: the root (no final '/')
};

// The patterns for these options (the internal domains and path roots add their own).
// Errors: InvalidArgument for an empty or malformed domain or root.
Result<std::vector<Pattern>> BuildPatterns(const DetectorOptions& options);

}  // namespace rampart::guard
