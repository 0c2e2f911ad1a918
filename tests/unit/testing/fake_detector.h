#pragma once

// FakeDetector: a small Detector (guard/detector.h) with a few simple rules, for testing what is
// built on the detector without the real one:
//   CN_MOBILE       11 ASCII digits 1[3-9]xxxxxxxxx, no digit right before or after
//   EMAIL_ADDRESS   [A-Za-z0-9._%+-]+ @ [A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}
//   SECRET          "sk-" and 16 or more ASCII letters or digits
//   CN_RESIDENT_ID  17 ASCII digits and a digit or X (no check digit), no digit around
// Score 0.5, or 0.9 with "手机" or "phone" in the 16 bytes before. Invalid UTF-8 is
// InvalidArgument, as the real detector's.

#include <atomic>
#include <string>
#include <string_view>
#include <vector>

#include "guard/detector.h"

namespace rampart::testing {

class FakeDetector final : public guard::Detector {
 public:
  Result<std::vector<guard::Entity>> Detect(
      std::string_view text, const std::vector<std::string_view>& types = {}) const override;
  size_t max_entity_bytes() const override { return 256; }
  std::string_view engine() const override { return "fake"; }
  // Detect calls so far (from any thread).
  int calls() const { return calls_; }

 private:
  mutable std::atomic<int> calls_{0};
};

}  // namespace rampart::testing
