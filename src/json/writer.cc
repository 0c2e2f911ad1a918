#include "json/writer.h"

#include <cmath>
#include <string_view>

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
  if (std::string_view(text, static_cast<size_t>(end - text)).find_first_of(".e") ==
      std::string_view::npos) {
    *end++ = '.';
    *end++ = '0';
  }
  writer_.RawValue(text, static_cast<size_t>(end - text), rapidjson::kNumberType);
}

}  // namespace rampart::json
