// libFuzzer target: the PII detector (guard/detector.h) on untrusted text, whole and through the
// streaming redactor in pieces.
//
// Input layout: byte 0 picks the piece size for the stream redactor (1 to 256); the rest is the
// text.
//
// Checks: invalid UTF-8 is refused and only it; entities are sorted, do not overlap, lie inside
// the text, name a known type and are no longer than that type's bound; the stream redactor's
// output equals the whole-text redaction whatever the pieces.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "guard/detector.h"
#include "guard/keys.h"
#include "guard/operators.h"
#include "guard/redact.h"
#include "guard/stream_redactor.h"

using rampart::fuzz::Check;
namespace guard = rampart::guard;

namespace {

const guard::Detector& TheDetector() {
  static const std::unique_ptr<guard::Detector> detector = [] {
    guard::DetectorOptions options;
    options.internal_domains = {"corp.example.com"};
    options.internal_path_roots = {"/srv/secret"};
    options.max_text_bytes = 1 << 20;
    auto created = guard::Detector::Create(options);
    Check(created.ok(), "the detector does not build");
    return std::move(created).value();
  }();
  return *detector;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t piece = 1 + data[0];
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const guard::Detector& detector = TheDetector();

  auto entities = detector.Detect(text);
  if (!entities.ok()) return 0;  // invalid UTF-8
  size_t previous_end = 0;
  for (const guard::Entity& entity : *entities) {
    Check(entity.start < entity.end && entity.end <= text.size(), "an entity outside the text");
    Check(entity.start >= previous_end, "entities overlap or are not sorted");
    Check(entity.end - entity.start <= detector.max_entity_bytes(), "an entity over the bound");
    previous_end = entity.end;
  }

  static const guard::TenantKeys keys = guard::GuardKeys::Generate().ForTenant("default");
  const guard::OperatorChoice operators;  // each type's default operator
  const std::string whole = guard::Redact(text, *entities, operators, keys).text;
  guard::StreamRedactor redactor(detector, operators, keys);
  std::string streamed;
  for (size_t at = 0; at < text.size(); at += piece) {
    auto released = redactor.Push(text.substr(at, piece));
    Check(released.ok(), "a piece of valid text refused");
    streamed += *released;
  }
  auto rest = redactor.Finish();
  Check(rest.ok(), "the end of valid text refused");
  streamed += *rest;
  Check(streamed == whole, "the streamed redaction differs from the whole-text one");
  return 0;
}
