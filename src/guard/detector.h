#pragma once

// PII and data-leak detection: the entities found in a text, and the Detector that finds them.
//
// A Detector runs one multi-pattern scan over the text (Hyperscan; RE2 where Hyperscan cannot
// run) and then validates each candidate (check digits, dates, region codes, IIN ranges, ...),
// so look-alikes that fail validation are never reported. Context words near a candidate raise
// its score; a span is reported once, as its most specific validated type. Offsets are byte
// offsets into the UTF-8 text as given; full-width digits and separators are read as their
// ASCII forms.
//
// Thread safety: a Detector is immutable after Create and may be used from any thread at once
// (each call uses its own scratch space).

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace rampart::guard {

// Entity type names, exactly as reported.
inline constexpr std::string_view kCnResidentId = "CN_RESIDENT_ID";
inline constexpr std::string_view kCnMobile = "CN_MOBILE";
inline constexpr std::string_view kPaymentCard = "PAYMENT_CARD";
inline constexpr std::string_view kCnUscc = "CN_USCC";
inline constexpr std::string_view kCnPassport = "CN_PASSPORT";
inline constexpr std::string_view kEmailAddress = "EMAIL_ADDRESS";
inline constexpr std::string_view kPhoneNumber = "PHONE_NUMBER";
inline constexpr std::string_view kIpAddress = "IP_ADDRESS";
inline constexpr std::string_view kMacAddress = "MAC_ADDRESS";
inline constexpr std::string_view kIbanCode = "IBAN_CODE";
inline constexpr std::string_view kUsSsn = "US_SSN";
inline constexpr std::string_view kSecret = "SECRET";
inline constexpr std::string_view kInternalEndpoint = "INTERNAL_ENDPOINT";

// Every type above, in this order.
const std::vector<std::string_view>& AllEntityTypes();

// Whether `text` is valid UTF-8 (what Detect requires).
bool IsValidUtf8(std::string_view text);

// The longest entity (in bytes) of one type; 0 for an unknown name. Detector::max_entity_bytes
// is the largest of these (the per-type table and its reasons are in src/guard/candidates.h), so
// a stream redactor that redacts only some types may hold back less.
size_t MaxEntityBytes(std::string_view type);

struct Entity {
  std::string_view type;  // one of the names above (static storage)
  size_t start = 0;       // byte offsets into the text: [start, end)
  size_t end = 0;
  double score = 0;  // 0..1; context words raise it
};

struct DetectorOptions {
  // INTERNAL_ENDPOINT: host names under these domains ("corp.example.com" matches
  // "git.corp.example.com"), and file paths under these roots ("/srv/secret").
  std::vector<std::string> internal_domains;
  std::vector<std::string> internal_path_roots;
  // The largest text Detect takes; larger ones are InvalidArgument.
  size_t max_text_bytes = 16u << 20;
  bool force_re2 = false;  // use the RE2 scanner even where Hyperscan runs (tests)
};

class Detector {
 public:
  // Compiles the patterns. Errors: InvalidArgument for bad options.
  static Result<std::unique_ptr<Detector>> Create(DetectorOptions options);
  virtual ~Detector() = default;

  // The entities of `text` (valid UTF-8) whose type is in `types` (empty = every type), sorted
  // by start, not overlapping. Errors: InvalidArgument for invalid UTF-8 or a text over
  // max_text_bytes. Time is linear in the text's length.
  virtual Result<std::vector<Entity>> Detect(
      std::string_view text, const std::vector<std::string_view>& types = {}) const = 0;

  // The longest entity (in bytes) any type can have: a stream redactor holds back at most this
  // much of a text's tail, waiting for the rest of a possible match.
  virtual size_t max_entity_bytes() const = 0;

  // "hyperscan" or "re2".
  virtual std::string_view engine() const = 0;
};

}  // namespace rampart::guard
