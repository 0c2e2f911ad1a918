#include "policy/time_window.h"

#include <array>
#include <charconv>
#include <vector>

#include <unicode/timezone.h>
#include <unicode/unistr.h>

namespace rampart::policy {

struct TimeWindow::Zone {
  std::unique_ptr<const icu::TimeZone> zone;
};

namespace {

constexpr std::array<std::string_view, 7> kDayNames = {"mon", "tue", "wed", "thu",
                                                       "fri", "sat", "sun"};

std::vector<std::string_view> SplitOn(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return parts;
}

std::optional<int> DayIndex(std::string_view name) {
  if (name.size() != 3) return std::nullopt;
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(c | 0x20);
  for (size_t i = 0; i < kDayNames.size(); ++i) {
    if (kDayNames[i] == lower) return static_cast<int>(i);
  }
  return std::nullopt;
}

Result<uint8_t> ParseDays(std::string_view text) {
  uint8_t days = 0;
  for (const std::string_view item : SplitOn(text, ',')) {
    const std::vector<std::string_view> ends = SplitOn(item, '-');
    const std::optional<int> first = DayIndex(ends.front());
    const std::optional<int> last = DayIndex(ends.back());
    if (ends.size() > 2 || !first || !last) {
      return InvalidArgument("bad days '{}': use Mon..Sun, ranges (Mon-Fri) and commas", text);
    }
    for (int day = *first;; day = (day + 1) % 7) {
      days = static_cast<uint8_t>(days | (1u << day));
      if (day == *last) break;
    }
  }
  return days;
}

// "HH:MM" -> minutes since midnight (24:00 allowed only as an end).
std::optional<int> ParseClock(std::string_view text, bool is_end) {
  if (text.size() != 5 || text[2] != ':') return std::nullopt;
  int hours = -1;
  int minutes = -1;
  if (std::from_chars(text.data(), text.data() + 2, hours).ptr != text.data() + 2 ||
      std::from_chars(text.data() + 3, text.data() + 5, minutes).ptr != text.data() + 5) {
    return std::nullopt;
  }
  if (hours == 24 && minutes == 0 && is_end) return 24 * 60;
  if (hours < 0 || hours > 23 || minutes < 0 || minutes > 59) return std::nullopt;
  return hours * 60 + minutes;
}

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

}  // namespace

Result<TimeWindow> TimeWindow::Parse(std::string_view text) {
  std::vector<std::string_view> words;
  for (const std::string_view word : SplitOn(text, ' ')) {
    if (!word.empty()) words.push_back(word);
  }
  if (words.size() < 2 || words.size() > 3) {
    return InvalidArgument(
        "bad time window '{}': expected [DAYS] HH:MM-HH:MM ZONE, as in \"Mon-Fri 09:00-18:00 "
        "Europe/Berlin\"",
        text);
  }
  TimeWindow window;
  window.text_ = std::string(text);
  if (words.size() == 3) {
    ASSIGN_OR_RETURN(window.days_, ParseDays(words[0]));
  }
  const std::string_view hours = words[words.size() - 2];
  const size_t dash = hours.find('-');
  const std::optional<int> start =
      dash == std::string_view::npos ? std::nullopt : ParseClock(hours.substr(0, dash), false);
  const std::optional<int> end =
      dash == std::string_view::npos ? std::nullopt : ParseClock(hours.substr(dash + 1), true);
  if (!start || !end) {
    return InvalidArgument("bad hours '{}' in time window '{}': expected HH:MM-HH:MM", hours, text);
  }
  if (*start == *end) {
    return InvalidArgument("empty hours '{}' in time window '{}' (00:00-24:00 is the whole day)",
                           hours, text);
  }
  window.start_minute_ = *start;
  window.end_minute_ = *end;

  const std::string zone_name(words.back());
  auto zone = std::make_shared<Zone>();
  zone->zone.reset(icu::TimeZone::createTimeZone(icu::UnicodeString::fromUTF8(zone_name)));
  icu::UnicodeString id;
  if (zone->zone == nullptr || zone->zone->getID(id) == icu::UnicodeString(UCAL_UNKNOWN_ZONE_ID)) {
    return InvalidArgument("unknown time zone '{}' in time window '{}'", zone_name, text);
  }
  window.zone_ = std::move(zone);
  return window;
}

std::optional<bool> TimeWindow::Contains(int64_t unix_seconds) const {
  int32_t raw_offset_ms = 0;
  int32_t dst_offset_ms = 0;
  UErrorCode status = U_ZERO_ERROR;
  zone_->zone->getOffset(static_cast<UDate>(unix_seconds) * 1000.0, /*local=*/false, raw_offset_ms,
                         dst_offset_ms, status);
  if (U_FAILURE(status)) return std::nullopt;
  const int64_t local = unix_seconds + (raw_offset_ms + dst_offset_ms) / 1000;
  const int64_t day = FloorDiv(local, 86400);
  const int minute = static_cast<int>((local - day * 86400) / 60);
  int weekday = static_cast<int>(((day + 3) % 7 + 7) % 7);  // 1970-01-01 was a Thursday
  if (start_minute_ < end_minute_) {
    if (minute < start_minute_ || minute >= end_minute_) return false;
  } else if (minute >= start_minute_) {
    // The evening part of a window that crosses midnight: today's.
  } else if (minute < end_minute_) {
    weekday = (weekday + 6) % 7;  // the morning part: the window began yesterday
  } else {
    return false;
  }
  return (days_ & (1u << weekday)) != 0;
}

}  // namespace rampart::policy
