#include "guard/starts.h"

#include <algorithm>

#include "guard/ascii.h"

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
bool IsLabelChar(char c) { return IsAlnum(c) || c == '-'; }
bool IsBearerChar(char c) { return IsTokenChar(c) && c != '='; }
bool IsJwtChar(char c) { return IsAlnum(c) || c == '_' || c == '-'; }
bool IsDigitSeparator(char c) { return c == ' ' || c == '-'; }

char At(std::string_view text, size_t i) { return i < text.size() ? text[i] : '\0'; }

size_t Back(size_t end, size_t length) { return end >= length ? end - length : kNoStart; }

// How many characters of `is` end at `p`, at most `most`.
template <typename Predicate>
size_t RunBack(std::string_view text, size_t p, size_t most, Predicate is) {
  size_t n = 0;
  while (n < most && n < p && is(text[p - 1 - n])) ++n;
  return n;
}

// \d{1,3}(\.\d{1,3}){3} ending at `end`: its leftmost start.
size_t Ipv4Start(std::string_view text, size_t end) {
  size_t p = end;
  for (int group = 0; group < 4; ++group) {
    size_t digits = RunBack(text, p, 3, IsDigit);
    if (digits == 0) return kNoStart;
    p -= digits;
    if (group == 3) break;
    if (p == 0 || text[p - 1] != '.') return kNoStart;
    --p;
  }
  return p;
}

// hex{0,4}(:hex{0,4}){min,max} ending at `end`: its leftmost start (as many groups as allowed).
size_t ColonGroupsStart(std::string_view text, size_t end, int min_colons, int max_colons) {
  size_t p = end;
  int colons = 0;
  while (true) {
    size_t hex = RunBack(text, p, 5, IsHex);
    if (hex <= 4 && colons < max_colons && p > hex && text[p - hex - 1] == ':') {
      p -= hex + 1;
      ++colons;
      continue;
    }
    p -= std::min<size_t>(hex, 4);
    break;
  }
  return colons >= min_colons ? p : kNoStart;
}

size_t Ipv6WithIpv4Start(std::string_view text, size_t end) {
  // The dotted part's first group follows the ':' directly, so it is the whole digit run.
  size_t p = Ipv4Start(text, end);
  if (p == kNoStart || p == 0 || text[p - 1] != ':') return kNoStart;
  return ColonGroupsStart(text, p - 1, 1, 6);
}

// \d(?:[ \-]?\d){12,18}: back over at most 19 digits, single separators between them.
size_t CardStart(std::string_view text, size_t end) {
  size_t p = end;
  int digits = 0;
  while (p > 0 && digits < 19) {
    char c = text[p - 1];
    if (IsDigit(c)) {
      ++digits;
      --p;
    } else if (IsDigitSeparator(c) && digits > 0 && p >= 2 && IsDigit(text[p - 2])) {
      --p;
    } else {
      break;
    }
  }
  return digits >= 13 ? p : kNoStart;
}

// (?:(?:\+|00)?86[ \-]?)?1[3-9]\d[ \-]?\d{4}[ \-]?\d{4}: the 11-digit core, then the prefix.
size_t MobileStart(std::string_view text, size_t end) {
  size_t core = end;
  int digits = 0;
  while (core > 0 && digits < 11 && end - core < 13) {
    --core;
    if (IsDigit(text[core])) ++digits;
  }
  if (digits != 11) return kNoStart;
  size_t p = core;
  if (p > 0 && IsDigitSeparator(text[p - 1])) --p;
  if (p < 2 || text[p - 2] != '8' || text[p - 1] != '6') return core;
  p -= 2;
  if (p >= 1 && text[p - 1] == '+') return p - 1;
  if (p >= 2 && text[p - 2] == '0' && text[p - 1] == '0') return p - 2;
  return p;
}

// \d{3}[ \-]?\d{2}[ \-]?\d{4}: a separator where the next character is not a digit.
size_t SsnStart(std::string_view text, size_t end) {
  size_t p = end;
  for (size_t digits : {4, 2, 3}) {
    if (RunBack(text, p, digits, IsDigit) != digits) return kNoStart;
    p -= digits;
    if (digits != 3 && p > 0 && IsDigitSeparator(text[p - 1])) --p;
  }
  return p;
}

// [A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}: the leftmost "CCdd" with 11 to 30 characters after it.
size_t IbanStart(std::string_view text, size_t end) {
  auto upper_or_digit = [](char c) { return IsUpper(c) || IsDigit(c); };
  size_t p = end;
  int characters = 0;
  while (p > 0 && characters < 34) {
    char c = text[p - 1];
    if (upper_or_digit(c)) {
      ++characters;
      --p;
    } else if (c == ' ' && p < end && text[p] != ' ' && p >= 2 && upper_or_digit(text[p - 2])) {
      --p;
    } else {
      break;
    }
  }
  // The first "CCdd" with 11 to 30 characters (not spaces) after it; `before`: characters in
  // [p, q).
  int before = 0;
  for (size_t q = p; q + 4 <= end; ++q) {
    if (text[q] == ' ') continue;
    int after = characters - before - 4;
    if (after < 11) break;
    if (after <= 30 && IsUpper(text[q]) && IsUpper(text[q + 1]) && IsDigit(text[q + 2]) &&
        IsDigit(text[q + 3])) {
      return q;
    }
    ++before;
  }
  return kNoStart;
}

// [A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+, at most 254 characters.
size_t EmailStart(std::string_view text, size_t end) {
  constexpr size_t kMost = 254;  // the validator's limit
  size_t p = end;
  while (p > 0 && (IsLabelChar(text[p - 1]) || text[p - 1] == '.')) {
    if (end - p >= kMost) return kNoStart;
    --p;
  }
  if (p == 0 || text[p - 1] != '@') return kNoStart;
  --p;
  while (p > 0 && IsEmailLocal(text[p - 1])) {
    if (end - p >= kMost) return kNoStart;
    --p;
  }
  return p;
}

// \+[1-9]\d{0,2}(...)(?:[ \-.]?\d){5,14}: the '+' within the validator's 40 characters.
size_t PhoneStart(std::string_view text, size_t end) {
  for (size_t p = end; p > 0 && end - p <= 40; --p) {
    char c = text[p - 1];
    if (c == '+') return p - 1;
    if (!(IsDigit(c) || c == ' ' || c == '-' || c == '.' || c == '(' || c == ')')) break;
  }
  return kNoStart;
}

// -----BEGIN (?:[A-Z0-9]+ ){0,3}PRIVATE KEY-----
size_t PemStart(std::string_view text, size_t end) {
  constexpr std::string_view kTail = "PRIVATE KEY-----";
  constexpr std::string_view kHead = "-----BEGIN ";
  if (end < kTail.size()) return kNoStart;
  size_t p = end - kTail.size();
  while (p > 0 && (IsUpper(text[p - 1]) || IsDigit(text[p - 1]) || text[p - 1] == ' ')) --p;
  // `p` is at "BEGIN ", after the dashes.
  if (p < 5 || text.substr(p - 5, kHead.size()) != kHead) return kNoStart;
  return p - 5;
}

// [Bb]earer[ \t]+[A-Za-z0-9\-._~+/]{8,}=*
size_t BearerStart(std::string_view text, size_t end) {
  size_t p = end;
  while (p > 0 && text[p - 1] == '=') --p;
  while (p > 0 && IsBearerChar(text[p - 1])) --p;
  size_t blanks = p;
  while (blanks > 0 && (text[blanks - 1] == ' ' || text[blanks - 1] == '\t')) --blanks;
  if (blanks == p || blanks < 6 || text.substr(blanks - 5, 5) != "earer") return kNoStart;
  if (text[blanks - 6] != 'B' && text[blanks - 6] != 'b') return kNoStart;
  return blanks - 6;
}

// eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*: the leftmost "eyJ" of the run
// before the first dot.
size_t JwtStart(std::string_view text, size_t end) {
  size_t p = end;
  for (int dot = 0; dot < 2; ++dot) {
    while (p > 0 && IsJwtChar(text[p - 1])) --p;
    if (p == 0 || text[p - 1] != '.') return kNoStart;
    --p;
  }
  size_t first_dot = p;
  while (p > 0 && IsJwtChar(text[p - 1])) --p;
  for (; p + 8 <= first_dot; ++p) {
    if (text.substr(p, 3) == "eyJ") return p;
  }
  return kNoStart;
}

bool EqualsCaseless(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (IsUpper(x)) x = static_cast<char>(x - 'A' + 'a');
    if (IsUpper(y)) y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// (?:[A-Za-z0-9\-]+\.)*domain, at most 253 characters.
size_t InternalHostStart(std::string_view text, size_t end, std::string_view domain) {
  constexpr size_t kMost = 253;  // the validator's limit
  size_t p = Back(end, domain.size());
  if (p == kNoStart || !EqualsCaseless(text.substr(p, domain.size()), domain)) return kNoStart;
  while (p >= 2 && text[p - 1] == '.' && IsLabelChar(text[p - 2])) {
    --p;
    while (p > 0 && IsLabelChar(text[p - 1])) {
      if (end - p >= kMost) return kNoStart;
      --p;
    }
  }
  return end - p > kMost ? kNoStart : p;
}

// ://(?:userinfo{1,64}@)?ipv4: the validator reads the address after the last '@', or 3
// characters after the start.
size_t InternalUrlIpv4Start(std::string_view text, size_t end) {
  size_t address = Ipv4Start(text, end);
  if (address == kNoStart || address == 0) return kNoStart;
  if (text[address - 1] == '@') return address - 1;
  return address >= 3 && text.substr(address - 3, 3) == "://" ? address - 3 : kNoStart;
}

// ://\[[0-9A-Fa-f:.]{2,45}\]
size_t InternalUrlIpv6Start(std::string_view text, size_t end) {
  if (end == 0 || text[end - 1] != ']') return kNoStart;
  size_t close = end - 1;
  size_t inside = RunBack(text, close, 46, [](char c) { return IsHex(c) || c == ':' || c == '.'; });
  size_t open = close - inside;
  if (open < 4 || text.substr(open - 4, 4) != "://[") return kNoStart;
  return open - 4;
}

// root(?:/path*)?: the run of path characters must begin with the root (the validator rejects a
// path character before the start).
size_t InternalPathStart(std::string_view text, size_t end, std::string_view root) {
  size_t p = end;
  while (p > 0 && IsPathChar(text[p - 1])) --p;
  if (text.substr(p, root.size()) != root) return kNoStart;
  size_t after = p + root.size();
  if (after > end || (after < end && text[after] != '/')) return kNoStart;
  return p;
}

}  // namespace

bool EndMayClose(Shape shape, std::string_view text, size_t end) {
  char after = At(text, end);
  switch (shape) {
    case Shape::kResidentId18:
    case Shape::kMobile: return !IsDigit(after);
    case Shape::kResidentId15:
    case Shape::kCard:
    case Shape::kUscc:
    case Shape::kPassport:
    case Shape::kIban:
    case Shape::kSsn:
    case Shape::kAwsKeyId: return !IsAlnum(after);
    case Shape::kEmail:
    case Shape::kInternalHost:
      return !(IsAlnum(after) || after == '-' || (after == '.' && IsAlnum(At(text, end + 1))));
    case Shape::kPhone:
      return !(IsAlnum(after) ||
               ((after == ' ' || after == '-' || after == '.') && IsDigit(At(text, end + 1))));
    case Shape::kIpv4:
    case Shape::kInternalUrlIpv4:
      return !(IsAlnum(after) || (after == '.' && IsDigit(At(text, end + 1))));
    case Shape::kIpv6:
    case Shape::kIpv6WithIpv4:
      return !(IsAlnum(after) || after == ':' || (after == '.' && IsDigit(At(text, end + 1))));
    case Shape::kMac:
      return !(IsAlnum(after) ||
               ((after == ':' || after == '-' || after == '.') && IsHex(At(text, end + 1))));
    case Shape::kAwsSecret:
    case Shape::kBearer:
    case Shape::kJwt: return !IsTokenChar(after);
    case Shape::kInternalPath: return !IsPathChar(after);
    case Shape::kPemBegin:
    case Shape::kKeyAssignment:
    case Shape::kInternalUrlIpv6: return true;
  }
  return true;
}

size_t LeftmostStart(const Pattern& pattern, std::string_view text, size_t end) {
  switch (pattern.shape) {
    case Shape::kResidentId18: return Back(end, 18);
    case Shape::kResidentId15: return Back(end, 15);
    case Shape::kMobile: return MobileStart(text, end);
    case Shape::kCard: return CardStart(text, end);
    case Shape::kUscc: return Back(end, 18);
    case Shape::kPassport: return Back(end, 9);
    case Shape::kEmail: return EmailStart(text, end);
    case Shape::kPhone: return PhoneStart(text, end);
    case Shape::kIpv4: return Ipv4Start(text, end);
    case Shape::kIpv6: return ColonGroupsStart(text, end, 2, 7);
    case Shape::kIpv6WithIpv4: return Ipv6WithIpv4Start(text, end);
    case Shape::kMac:
      if (end >= 17 && (text[end - 3] == ':' || text[end - 3] == '-')) return end - 17;
      return Back(end, 14);
    case Shape::kIban: return IbanStart(text, end);
    case Shape::kSsn: return SsnStart(text, end);
    case Shape::kPemBegin: return PemStart(text, end);
    case Shape::kAwsKeyId: return Back(end, 20);
    case Shape::kAwsSecret: return Back(end, 40);  // its validator reads only the last 40
    case Shape::kBearer: return BearerStart(text, end);
    case Shape::kJwt: return JwtStart(text, end);
    case Shape::kKeyAssignment: return end;  // the value after it is what counts
    case Shape::kInternalHost: return InternalHostStart(text, end, pattern.literal);
    case Shape::kInternalUrlIpv4: return InternalUrlIpv4Start(text, end);
    case Shape::kInternalUrlIpv6: return InternalUrlIpv6Start(text, end);
    case Shape::kInternalPath: return InternalPathStart(text, end, pattern.literal);
  }
  return kNoStart;
}

}  // namespace rampart::guard
