#pragma once

// Time windows for policy conditions (`context.time within "Mon-Fri 09:00-18:00 Asia/Shanghai"`):
//
//   [DAYS] HH:MM-HH:MM ZONE
//
// DAYS is optional (every day when absent): a day (Mon ... Sun) or a range of days ("Mon-Fri",
// "Fri-Mon" wraps the week), several joined by commas ("Mon,Wed,Fri", "Mon-Tue,Thu"). The hours
// include the start and exclude the end; 24:00 ends at midnight; a window whose end is before its
// start crosses midnight ("22:00-06:00"), and its hours after midnight belong to the day it
// started (a "Fri 22:00-06:00" window holds Saturday 03:00). ZONE is an IANA zone ("UTC",
// "Europe/Berlin"), validated at parse time; the offset is the zone's at the instant asked about,
// daylight saving time included (ICU's time zone data).
//
// Values; Contains is thread-safe and does not allocate.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace rampart::policy {

class TimeWindow {
 public:
  // InvalidArgument with the reason ("unknown time zone 'Mars/Base'", "bad hours '9-18': ...").
  static Result<TimeWindow> Parse(std::string_view text);

  // Whether the instant `unix_seconds` falls in the window; nullopt if the time zone data cannot
  // give the offset (an ICU failure: the caller treats it as an evaluation error).
  std::optional<bool> Contains(int64_t unix_seconds) const;

  const std::string& text() const { return text_; }

 private:
  struct Zone;
  std::string text_;
  uint8_t days_ = 0x7f;  // bit 0 = Monday ... bit 6 = Sunday
  int start_minute_ = 0;
  int end_minute_ = 0;  // 1..1440; before start_minute_ when the window crosses midnight
  std::shared_ptr<const Zone> zone_;
};

}  // namespace rampart::policy
