#include "guard/candidates.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "guard/ascii.h"
#include "guard/detector.h"
#include "guard/validators.h"

namespace rampart::guard {
namespace {

using ascii::IsAlnum;
using ascii::IsDigit;
using ascii::IsEmailLocal;
using ascii::IsHex;
using ascii::IsLower;
using ascii::IsPathChar;
using ascii::IsTokenChar;
using ascii::IsUpper;

// The character at i, or '\0' outside the text.
char At(std::string_view text, size_t i) { return i < text.size() ? text[i] : '\0'; }
char Before(std::string_view text, size_t i) { return i > 0 ? text[i - 1] : '\0'; }

// A digit run [start, end) is whole: no digit right before or after it, and where it is grouped
// by `separator`, no "separator digit" continuing it on either side.
bool DigitRunIsWhole(std::string_view text, size_t start, size_t end, char separator) {
  if (IsDigit(Before(text, start)) || IsDigit(At(text, end))) return false;
  if (separator != '\0') {
    if (Before(text, start) == separator && start >= 2 && IsDigit(text[start - 2])) return false;
    if (At(text, end) == separator && IsDigit(At(text, end + 1))) return false;
  }
  return true;
}

// The digits of [start, end), separators dropped; false when a separator is not `separator`
// (the first one found sets it) or two separators touch.
bool CollectDigits(std::string_view text, size_t start, size_t end, std::string* digits,
                   char* separator, std::vector<int>* groups = nullptr) {
  digits->clear();
  *separator = '\0';
  int group = 0;
  for (size_t i = start; i < end; ++i) {
    char c = text[i];
    if (IsDigit(c)) {
      digits->push_back(c);
      ++group;
      continue;
    }
    if (group == 0) return false;
    if (*separator == '\0') *separator = c;
    if (c != *separator) return false;
    if (groups != nullptr) groups->push_back(group);
    group = 0;
  }
  if (groups != nullptr && group > 0) groups->push_back(group);
  return group > 0;
}

// At least two of lower case, upper case, digits, and Shannon entropy >= 2.5 bits per
// character (a random 8-character alphanumeric string has ~2.8-3.0; "changeme" has 2.75 but one
// class; "password" 2.75 and one class; "Summer2024" 3.1 and three classes).
bool LooksRandom(std::string_view value) {
  if (value.size() < 8) return false;
  bool lower = false, upper = false, digit = false;
  for (char c : value) {
    lower |= IsLower(c);
    upper |= IsUpper(c);
    digit |= IsDigit(c);
  }
  if (static_cast<int>(lower) + static_cast<int>(upper) + static_cast<int>(digit) < 2) return false;
  return ShannonEntropy(value) >= 2.5;
}

bool Accept(Candidate* c, std::string_view type, size_t start, size_t end, double score,
            bool requires_context = false) {
  c->type = type;
  c->start = start;
  c->end = end;
  c->score = score;
  c->requires_context = requires_context;
  return true;
}

bool ResidentId(std::string_view text, size_t s, size_t e, Candidate* c) {
  if (!DigitRunIsWhole(text, s, e, '\0')) return false;
  if (e - s == 15 && IsAlnum(At(text, e))) return false;
  std::string_view id = text.substr(s, e - s);
  bool valid = id.size() == 18 ? IsValidResidentId18(id) : IsValidResidentId15(id);
  return valid && Accept(c, kCnResidentId, s, e, 0.9);
}

bool Mobile(std::string_view text, size_t s, size_t e, Candidate* c) {
  // The core: the last 11 digits, grouped 3-4-4 by one separator or not at all.
  size_t core = e;
  int digits = 0;
  while (core > s && digits < 11) {
    --core;
    if (IsDigit(text[core])) ++digits;
  }
  if (digits != 11) return false;
  std::string number;
  char separator = '\0';
  std::vector<int> groups;
  if (!CollectDigits(text, core, e, &number, &separator, &groups)) return false;
  if (separator != '\0' && groups != std::vector<int>{3, 4, 4}) return false;
  if (!IsMobilePrefix(std::string_view(number).substr(0, 3))) return false;
  if (IsDigit(At(text, e)) ||
      (separator != '\0' && At(text, e) == separator && IsDigit(At(text, e + 1)))) {
    return false;
  }
  // The prefix: none, or +86 / 0086 / 86 and at most one separator.
  std::string_view prefix = text.substr(s, core - s);
  if (!prefix.empty() && (prefix.back() == ' ' || prefix.back() == '-')) prefix.remove_suffix(1);
  size_t start = s;
  if (prefix == "+86" || prefix == "0086" || prefix == "86") {
    char before = Before(text, s);
    if (IsDigit(before) || (prefix != "+86" && before == '+')) start = core;  // not a prefix
  } else if (!prefix.empty()) {
    return false;
  }
  if (start == core && (IsDigit(Before(text, core)) || Before(text, core) == '+')) return false;
  return Accept(c, kCnMobile, start, e, 0.8);
}

// Whether the space-grouped run at `start` continues groups of 4 upper-case letters and digits
// that begin with an IBAN's "CCdd" (country and check digits): part of an IBAN, not a card.
bool AfterIbanGroups(std::string_view text, size_t start) {
  size_t p = start;
  for (int groups = 0; groups < 8 && p >= 5 && text[p - 1] == ' '; ++groups) {
    std::string_view group = text.substr(p - 5, 4);
    bool upper_or_digit = true;
    for (char ch : group) upper_or_digit &= IsUpper(ch) || IsDigit(ch);
    if (!upper_or_digit) return false;
    if (IsUpper(group[0]) && IsUpper(group[1]) && IsDigit(group[2]) && IsDigit(group[3])) {
      return true;
    }
    p -= 5;
  }
  return false;
}

bool PaymentCard(std::string_view text, size_t s, size_t e, Candidate* c) {
  std::string digits;
  std::vector<int> groups;
  // The leftmost start may include digits of an earlier number: try each group start.
  for (size_t start = s; start < e; ++start) {
    if (start != s && IsDigit(text[start - 1])) continue;
    if (!IsDigit(text[start])) continue;
    char separator = '\0';
    groups.clear();
    if (!CollectDigits(text, start, e, &digits, &separator, &groups)) continue;
    if (digits.size() < 13) break;
    if (digits.size() > 19 || groups.size() > 6) continue;
    bool grouped_well = true;
    for (size_t g = 0; g + 1 < groups.size(); ++g) grouped_well &= groups[g] >= 3;
    if (!grouped_well || !DigitRunIsWhole(text, start, e, separator)) continue;
    if (separator == ' ' && AfterIbanGroups(text, start)) continue;
    if (IsAlnum(At(text, e))) continue;  // "...579X": an ID's digits, not a card
    if (LuhnValid(digits) && IsKnownCardRange(digits)) {
      return Accept(c, kPaymentCard, start, e, 0.85);
    }
  }
  return false;
}

bool Uscc(std::string_view text, size_t s, size_t e, Candidate* c) {
  if (IsAlnum(Before(text, s)) || IsAlnum(At(text, e))) return false;
  std::string_view code = text.substr(s, e - s);
  if (!IsValidUscc(code)) return false;
  bool all_digits = true;
  for (char ch : code) all_digits &= IsDigit(ch);
  // An all-digit code could be any 18-digit number: only with a context word.
  return Accept(c, kCnUscc, s, e, all_digits ? 0.6 : 0.85, all_digits);
}

bool Passport(std::string_view text, size_t s, size_t e, Candidate* c) {
  if (IsAlnum(Before(text, s)) || IsAlnum(At(text, e))) return false;
  return Accept(c, kCnPassport, s, e, 0.6, /*requires_context=*/true);
}

bool Email(std::string_view text, size_t s, size_t e, Candidate* c) {
  if (e - s > 254 || IsEmailLocal(Before(text, s))) return false;  // RFC 5321's limit
  char after = At(text, e);
  if (IsAlnum(after) || after == '-' || (after == '.' && IsAlnum(At(text, e + 1)))) return false;
  std::string_view address = text.substr(s, e - s);
  size_t at = address.find('@');
  std::string_view local = address.substr(0, at);
  if (local.front() == '.' || local.back() == '.' || local.find("..") != std::string_view::npos) {
    return false;
  }
  std::string_view domain = address.substr(at + 1);
  if (local.size() > 64 || domain.size() > 253) return false;
  // The top-level domain: 2 to 24 letters.
  std::string_view top = domain.substr(domain.rfind('.') + 1);
  if (top.size() < 2 || top.size() > 24) return false;
  for (char ch : top) {
    if (!IsUpper(ch) && !IsLower(ch)) return false;
  }
  if (domain.front() == '-' || domain.find("-.") != std::string_view::npos ||
      domain.find(".-") != std::string_view::npos) {
    return false;
  }
  return Accept(c, kEmailAddress, s, e, 0.9);
}

bool Phone(std::string_view text, size_t s, size_t e, Candidate* c) {
  char before = Before(text, s);
  if (IsAlnum(before) || before == '+' || before == ')') return false;
  char after = At(text, e);
  if (IsDigit(after) || IsAlnum(after)) return false;
  if ((after == ' ' || after == '-' || after == '.') && IsDigit(At(text, e + 1))) return false;
  int digits = 0;
  for (size_t i = s; i < e; ++i) digits += IsDigit(text[i]) ? 1 : 0;
  if (digits < 7 || digits > 15 || e - s > 40) return false;
  return Accept(c, kPhoneNumber, s, e, 0.6);
}

bool Ipv4(std::string_view text, size_t s, size_t e, Candidate* c) {
  char before = Before(text, s);
  if (IsAlnum(before) || before == '.' || (before == '-' && IsDigit(Before(text, s - 1)))) {
    return false;
  }
  char after = At(text, e);
  if (IsAlnum(after) || (after == '.' && IsDigit(At(text, e + 1)))) return false;
  if (!ParseIpv4(text.substr(s, e - s))) return false;
  return Accept(c, kIpAddress, s, e, 0.75);
}

bool Ipv6(std::string_view text, size_t s, size_t e, Candidate* c) {
  char before = Before(text, s);
  if (IsAlnum(before) || before == ':' || before == '.') return false;
  char after = At(text, e);
  if (IsAlnum(after) || after == ':' || (after == '.' && IsDigit(At(text, e + 1)))) return false;
  std::string_view address = text.substr(s, e - s);
  int groups = 0;
  bool in_group = false;
  for (char ch : address) {
    bool hex = IsHex(ch);
    if (hex && !in_group) ++groups;
    in_group = hex;
  }
  if (groups < 2 && address != "::1") return false;
  unsigned char bytes[16];
  if (!ParseIpv6(address, bytes)) return false;
  return Accept(c, kIpAddress, s, e, 0.75);
}

bool Mac(std::string_view text, size_t s, size_t e, Candidate* c) {
  char before = Before(text, s);
  if (IsAlnum(before) || before == ':' || before == '-' || before == '.') return false;
  char after = At(text, e);
  if (IsAlnum(after) ||
      ((after == ':' || after == '-' || after == '.') && IsHex(At(text, e + 1)))) {
    return false;
  }
  return Accept(c, kMacAddress, s, e, 0.8);
}

bool Iban(std::string_view text, size_t s, size_t e, bool all_ends, Candidate* c) {
  if (IsAlnum(Before(text, s))) return false;
  int length = IbanLength(text.substr(s, 2));
  if (length == 0) return false;
  // `length` characters from the start, either ungrouped or with a space after every 4.
  std::string iban;
  size_t i = s;
  bool grouped = At(text, s + 4) == ' ';
  while (i < e && static_cast<int>(iban.size()) < length) {
    if (text[i] == ' ') {
      if (!grouped || iban.size() % 4 != 0) return false;
      ++i;
      continue;
    }
    iban.push_back(text[i]);
    ++i;
  }
  if (static_cast<int>(iban.size()) != length || (all_ends && i != e)) return false;
  if (IsAlnum(At(text, i))) return false;
  if (!IsValidIban(iban)) return false;
  return Accept(c, kIbanCode, s, i, 0.9);
}

bool Ssn(std::string_view text, size_t s, size_t e, Candidate* c) {
  std::string digits;
  char separator = '\0';
  std::vector<int> groups;
  if (!CollectDigits(text, s, e, &digits, &separator, &groups)) return false;
  if (separator != '\0' && groups != std::vector<int>{3, 2, 4}) return false;
  if (!DigitRunIsWhole(text, s, e, separator) || !IsValidSsn(digits)) return false;
  // Hyphens mark an SSN; a bare or space-grouped 9-digit number needs a context word.
  if (IsAlnum(Before(text, s)) || IsAlnum(At(text, e))) return false;
  return Accept(c, kUsSsn, s, e, 0.6, separator != '-');
}

bool PemBlock(std::string_view text, size_t s, size_t e, Candidate* c) {
  constexpr size_t kMaxBlock = 8192;
  size_t limit = std::min(text.size(), s + kMaxBlock);
  // The next "-----" marker: an END line closes the block; anything else (another BEGIN) means
  // the block was cut, and the base64 body up to there is reported.
  size_t marker = text.find("-----", e);
  if (marker != std::string_view::npos && marker < limit && text.substr(marker, 9) == "-----END ") {
    size_t close = text.find("-----", marker + 9);
    if (close != std::string_view::npos && close + 5 <= limit) {
      return Accept(c, kSecret, s, close + 5, 1.0);
    }
  }
  size_t end = e;
  while (end < limit) {
    char ch = text[end];
    if (!(IsAlnum(ch) || ch == '+' || ch == '/' || ch == '=' || ch == '\n' || ch == '\r' ||
          ch == ' ' || ch == '\t')) {
      break;
    }
    ++end;
  }
  while (end > e && (text[end - 1] == '\n' || text[end - 1] == '\r' || text[end - 1] == ' ' ||
                     text[end - 1] == '\t')) {
    --end;
  }
  return Accept(c, kSecret, s, end, 1.0);
}

bool Token(std::string_view text, size_t value_start, size_t e, Candidate* c, bool jwt_ok) {
  if (IsTokenChar(At(text, e))) return false;
  std::string_view value = text.substr(value_start, e - value_start);
  if (!LooksRandom(value) && !(jwt_ok && value.substr(0, 3) == "eyJ")) return false;
  return Accept(c, kSecret, value_start, e, 0.9);
}

bool Jwt(std::string_view text, size_t s, size_t e, Candidate* c) {
  char before = Before(text, s);
  if (IsAlnum(before) || before == '-' || before == '_') return false;
  if (IsTokenChar(At(text, e))) return false;
  std::string_view token = text.substr(s, e - s);
  if (!IsJwtHeader(token.substr(0, token.find('.')))) return false;
  return Accept(c, kSecret, s, e, 0.95);
}

bool InternalHost(std::string_view text, size_t s, size_t e, Candidate* c) {
  if (e - s > 253) return false;
  char before = Before(text, s);
  if (IsAlnum(before) || before == '-' || before == '.') return false;
  char after = At(text, e);
  if (IsAlnum(after) || after == '-' || (after == '.' && IsAlnum(At(text, e + 1)))) return false;
  return Accept(c, kInternalEndpoint, s, e, 0.9);
}

bool InternalUrlIpv4(std::string_view text, size_t s, size_t e, Candidate* c) {
  std::string_view match = text.substr(s, e - s);
  size_t at = match.rfind('@');
  size_t start = at == std::string_view::npos ? s + 3 : s + at + 1;
  char after = At(text, e);
  if (IsAlnum(after) || (after == '.' && IsDigit(At(text, e + 1)))) return false;
  auto address = ParseIpv4(text.substr(start, e - start));
  if (!address || !IsInternalIpv4(*address)) return false;
  return Accept(c, kInternalEndpoint, start, e, 0.9);
}

bool InternalUrlIpv6(std::string_view text, size_t s, size_t e, Candidate* c) {
  size_t start = s + 4;  // after "://["
  unsigned char bytes[16];
  if (!ParseIpv6(text.substr(start, e - 1 - start), bytes) || !IsInternalIpv6(bytes)) {
    return false;
  }
  return Accept(c, kInternalEndpoint, start, e - 1, 0.9);
}

bool InternalPath(std::string_view text, size_t s, size_t e, Candidate* c) {
  if (IsPathChar(Before(text, s)) || IsPathChar(At(text, e))) return false;
  size_t end = e;
  while (end > s && (text[end - 1] == '.' || text[end - 1] == ',')) --end;
  if (end - s > 1024) return false;
  return Accept(c, kInternalEndpoint, s, end, 0.9);
}

}  // namespace

bool ValidateMatch(Shape shape, std::string_view text, size_t s, size_t e, bool all_ends,
                   Candidate* c) {
  switch (shape) {
    case Shape::kResidentId18:
    case Shape::kResidentId15: return ResidentId(text, s, e, c);
    case Shape::kMobile: return Mobile(text, s, e, c);
    case Shape::kCard: return PaymentCard(text, s, e, c);
    case Shape::kUscc: return Uscc(text, s, e, c);
    case Shape::kPassport: return Passport(text, s, e, c);
    case Shape::kEmail: return Email(text, s, e, c);
    case Shape::kPhone: return Phone(text, s, e, c);
    case Shape::kIpv4: return Ipv4(text, s, e, c);
    case Shape::kIpv6:
    case Shape::kIpv6WithIpv4: return Ipv6(text, s, e, c);
    case Shape::kMac: return Mac(text, s, e, c);
    case Shape::kIban: return Iban(text, s, e, all_ends, c);
    case Shape::kSsn: return Ssn(text, s, e, c);
    case Shape::kPemBegin: return PemBlock(text, s, e, c);
    case Shape::kAwsKeyId:
      if (IsAlnum(Before(text, s)) || IsAlnum(At(text, e))) return false;
      return Accept(c, kSecret, s, e, 0.95);
    case Shape::kAwsSecret:
      if (e - s < 40 || IsTokenChar(At(text, e))) return false;
      return Accept(c, kSecret, e - 40, e, 0.95);
    case Shape::kBearer: {
      size_t value = s + 6;
      while (value < e && (text[value] == ' ' || text[value] == '\t')) ++value;
      return Token(text, value, e, c, /*jwt_ok=*/true);
    }
    case Shape::kJwt: return Jwt(text, s, e, c);
    case Shape::kKeyAssignment: return false;  // AddKeyAssignments
    case Shape::kInternalHost: return InternalHost(text, s, e, c);
    case Shape::kInternalUrlIpv4: return InternalUrlIpv4(text, s, e, c);
    case Shape::kInternalUrlIpv6: return InternalUrlIpv6(text, s, e, c);
    case Shape::kInternalPath: return InternalPath(text, s, e, c);
  }
  return false;
}

void AddKeyAssignments(std::string_view text, std::vector<size_t>* key_ends,
                       std::vector<Candidate>* candidates) {
  constexpr size_t kMostValue = 8192;  // MaxEntityBytes(SECRET); normalised bytes are fewer
  auto is_value = [](char ch) {
    return IsAlnum(ch) || (ch != '\0' && std::strchr("!#$%&*+-./=?@^_|~", ch) != nullptr);
  };
  std::sort(key_ends->begin(), key_ends->end());
  size_t run_end = 0;  // the end of the value run of the last key read
  for (size_t key_end : *key_ends) {
    size_t value = key_end;
    for (int blanks = 0; blanks < 4 && (At(text, value) == ' ' || At(text, value) == '\t');
         ++blanks) {
      ++value;
    }
    if (At(text, value) == '"' || At(text, value) == '\'') ++value;
    if (value < run_end) continue;  // in the value of an earlier key: that key's match
    size_t end = value;
    while (end < text.size() && is_value(text[end])) ++end;
    run_end = end;
    size_t last = std::min(end, value + kMostValue);
    Candidate candidate;
    for (size_t e = value + 8; e <= last; ++e) {
      if (e < end && IsTokenChar(text[e])) continue;
      if (Token(text, value, e, &candidate, /*jwt_ok=*/true)) candidates->push_back(candidate);
    }
  }
}

int Specificity(std::string_view type) {
  // Most specific first: a private key block or token holds anything; a checksum-validated
  // 18-character ID beats the card a Luhn check might also accept; a mobile beats a phone.
  static constexpr std::string_view kOrder[] = {
      kSecret,     kCnResidentId, kCnUscc,           kIbanCode, kPaymentCard,
      kCnPassport, kEmailAddress, kInternalEndpoint, kCnMobile, kUsSsn,
      kMacAddress, kIpAddress,    kPhoneNumber};
  // The detector passes the type constants themselves: compare their addresses first.
  for (int i = 0; i < static_cast<int>(std::size(kOrder)); ++i) {
    if (kOrder[i].data() == type.data() && kOrder[i].size() == type.size()) return i;
  }
  for (int i = 0; i < static_cast<int>(std::size(kOrder)); ++i) {
    if (kOrder[i] == type) return i;
  }
  return 100;
}

}  // namespace rampart::guard
