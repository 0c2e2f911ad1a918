#include "json/writer.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace rampart::json {

void Writer::Float(float value) {
  if (!std::isfinite(value)) {
    writer_.Double(static_cast<double>(value));
    return;
  }
  char text[32];
  auto end = fmt::format_to_n(text, sizeof(text) - 2, "{}", value).out;
  // Keep floats recognisable as floats ("2.0", not "2"), as RapidJSON does for doubles.
  // (A plain scan: find_first_of would call memchr once per character.)
  if (std::none_of(text, end, [](char c) { return c == '.' || c == 'e'; })) {
    *end++ = '.';
    *end++ = '0';
  }
  writer_.RawValue(text, static_cast<size_t>(end - text), rapidjson::kNumberType);
}

}  // namespace rampart::json
