#include "testing/fake_detector.h"

#include <algorithm>

namespace rampart::testing {
namespace {

bool Digit(char c) { return c >= '0' && c <= '9'; }
bool Alnum(char c) { return Digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool Local(char c) { return Alnum(c) || c == '.' || c == '_' || c == '%' || c == '+' || c == '-'; }
bool Host(char c) { return Alnum(c) || c == '-' || c == '.'; }

// The end of an e-mail address whose '@' is at `at`, or 0.
size_t EmailEnd(std::string_view text, size_t at) {
  size_t end = at + 1;
  while (end < text.size() && Host(text[end])) ++end;
  // Back off to the last dot followed by 2+ letters that ends the host.
  while (end > at + 1) {
    const std::string_view host = text.substr(at + 1, end - at - 1);
    const size_t dot = host.rfind('.');
    if (dot != std::string_view::npos && dot > 0 && host.size() - dot - 1 >= 2 &&
        std::all_of(host.begin() + static_cast<long>(dot) + 1, host.end(),
                    [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); })) {
      return end;
    }
    --end;
  }
  return 0;
}

double Score(std::string_view text, size_t start) {
  const std::string_view before =
      text.substr(start > 16 ? start - 16 : 0, std::min<size_t>(start, 16));
  return before.find("手机") != std::string_view::npos ||
                 before.find("phone") != std::string_view::npos
             ? 0.9
             : 0.5;
}

}  // namespace

Result<std::vector<guard::Entity>> FakeDetector::Detect(
    std::string_view text, const std::vector<std::string_view>& types) const {
  ++calls_;
  if (!guard::IsValidUtf8(text)) return InvalidArgument("the text is not valid UTF-8");
  const auto wanted = [&types](std::string_view type) {
    return types.empty() || std::find(types.begin(), types.end(), type) != types.end();
  };
  std::vector<guard::Entity> found;
  size_t i = 0;
  while (i < text.size()) {
    if (Digit(text[i]) && (i == 0 || !Digit(text[i - 1]))) {
      size_t end = i;
      while (end < text.size() && Digit(text[end])) ++end;
      const size_t digits = end - i;
      if (digits == 17 && end < text.size() && text[end] == 'X') ++end;
      const size_t length = end - i;
      if (digits == 11 && text[i] == '1' && text[i + 1] >= '3' && wanted(guard::kCnMobile)) {
        found.push_back({guard::kCnMobile, i, end, Score(text, i)});
      } else if (length == 18 && wanted(guard::kCnResidentId)) {
        found.push_back({guard::kCnResidentId, i, end, Score(text, i)});
      }
      i = end;
      continue;
    }
    if (text.substr(i, 3) == "sk-" && (i == 0 || !Alnum(text[i - 1]))) {
      size_t end = i + 3;
      while (end < text.size() && Alnum(text[end])) ++end;
      if (end - i - 3 >= 16 && wanted(guard::kSecret)) {
        found.push_back({guard::kSecret, i, end, 0.9});
        i = end;
        continue;
      }
    }
    if (text[i] == '@' && i > 0 && Local(text[i - 1])) {
      size_t start = i;
      while (start > 0 && Local(text[start - 1])) --start;
      const size_t end = EmailEnd(text, i);
      const size_t last = found.empty() ? 0 : found.back().end;
      if (end != 0 && start >= last && wanted(guard::kEmailAddress)) {
        found.push_back({guard::kEmailAddress, start, end, Score(text, start)});
        i = end;
        continue;
      }
    }
    ++i;
  }
  return found;
}

}  // namespace rampart::testing
