#include "guard/validators.h"

#include <arpa/inet.h>

#include <array>
#include <cmath>
#include <ctime>
#include <string>

namespace rampart::guard {
namespace {

int Digit(char c) { return c - '0'; }
bool AllDigits(std::string_view s) {
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return !s.empty();
}
int Number(std::string_view digits) {
  int value = 0;
  for (char c : digits) value = value * 10 + Digit(c);
  return value;
}

int CurrentYear() {
  static const int year = [] {
    std::time_t now = std::time(nullptr);
    std::tm parts{};
    gmtime_r(&now, &parts);
    return parts.tm_year + 1900;
  }();
  return year;
}

bool IsLeap(int year) { return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0; }

bool IsDate(int year, int month, int day) {
  static constexpr std::array<int, 12> kDays = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (month < 1 || month > 12 || day < 1) return false;
  int days = kDays[month - 1] + (month == 2 && IsLeap(year) ? 1 : 0);
  return day <= days;
}

bool InRange(std::string_view digits, size_t prefix_length, int low, int high) {
  if (digits.size() < prefix_length) return false;
  int prefix = Number(digits.substr(0, prefix_length));
  return prefix >= low && prefix <= high;
}

// The GB 32100 alphabet: 31 characters, a character's value is its index.
constexpr std::string_view kUsccAlphabet = "0123456789ABCDEFGHJKLMNPQRTUWXY";
int UsccValue(char c) {
  size_t at = kUsccAlphabet.find(c);
  return at == std::string_view::npos ? -1 : static_cast<int>(at);
}

struct IbanCountry {
  char code[3];
  int length;
};
// The SWIFT IBAN registry's countries and lengths.
constexpr IbanCountry kIbanCountries[] = {
    {"AD", 24}, {"AE", 23}, {"AL", 28}, {"AT", 20}, {"AZ", 28}, {"BA", 20}, {"BE", 16}, {"BG", 22},
    {"BH", 22}, {"BI", 27}, {"BR", 29}, {"BY", 28}, {"CH", 21}, {"CR", 22}, {"CY", 28}, {"CZ", 24},
    {"DE", 22}, {"DJ", 27}, {"DK", 18}, {"DO", 28}, {"EE", 20}, {"EG", 29}, {"ES", 24}, {"FI", 18},
    {"FK", 18}, {"FO", 18}, {"FR", 27}, {"GB", 22}, {"GE", 22}, {"GI", 23}, {"GL", 18}, {"GR", 27},
    {"GT", 28}, {"HR", 21}, {"HU", 28}, {"IE", 22}, {"IL", 23}, {"IQ", 23}, {"IS", 26}, {"IT", 27},
    {"JO", 30}, {"KW", 30}, {"KZ", 20}, {"LB", 28}, {"LC", 32}, {"LI", 21}, {"LT", 20}, {"LU", 20},
    {"LV", 21}, {"LY", 25}, {"MC", 27}, {"MD", 24}, {"ME", 22}, {"MK", 19}, {"MN", 20}, {"MR", 27},
    {"MT", 31}, {"MU", 30}, {"NI", 28}, {"NL", 18}, {"NO", 15}, {"OM", 23}, {"PK", 24}, {"PL", 28},
    {"PS", 29}, {"PT", 25}, {"QA", 29}, {"RO", 24}, {"RS", 22}, {"RU", 33}, {"SA", 24}, {"SC", 31},
    {"SD", 18}, {"SE", 24}, {"SI", 19}, {"SK", 24}, {"SM", 27}, {"SO", 23}, {"ST", 25}, {"SV", 28},
    {"TL", 23}, {"TN", 24}, {"TR", 26}, {"UA", 29}, {"VA", 22}, {"VG", 24}, {"XK", 20}, {"YE", 30},
};

int Base64UrlValue(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-' || c == '+') return 62;
  if (c == '_' || c == '/') return 63;
  return -1;
}

}  // namespace

bool IsProvinceCode(int code) {
  return (code >= 11 && code <= 15) || (code >= 21 && code <= 23) || (code >= 31 && code <= 37) ||
         (code >= 41 && code <= 46) || (code >= 50 && code <= 54) || (code >= 61 && code <= 65) ||
         code == 71 || code == 81 || code == 82;
}

char ResidentIdCheckCharacter(std::string_view first17) {
  static constexpr int kWeights[17] = {7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2};
  int sum = 0;
  for (size_t i = 0; i < 17; ++i) sum += Digit(first17[i]) * kWeights[i];
  return "10X98765432"[sum % 11];
}

bool IsValidResidentId18(std::string_view id) {
  if (id.size() != 18 || !AllDigits(id.substr(0, 17))) return false;
  if (!IsProvinceCode(Number(id.substr(0, 2)))) return false;
  int year = Number(id.substr(6, 4));
  if (year < 1900 || year > CurrentYear()) return false;
  if (!IsDate(year, Number(id.substr(10, 2)), Number(id.substr(12, 2)))) return false;
  char check = id[17] == 'x' ? 'X' : id[17];
  return check == ResidentIdCheckCharacter(id);
}

bool IsValidResidentId15(std::string_view id) {
  if (id.size() != 15 || !AllDigits(id)) return false;
  if (!IsProvinceCode(Number(id.substr(0, 2)))) return false;
  return IsDate(1900 + Number(id.substr(6, 2)), Number(id.substr(8, 2)), Number(id.substr(10, 2)));
}

bool IsMobilePrefix(std::string_view first3) {
  if (first3.size() != 3 || !AllDigits(first3) || first3[0] != '1') return false;
  char second = first3[1];
  char third = first3[2];
  switch (second) {
    case '3':
    case '8': return true;  // 130-139, 180-189
    case '4':
      return third >= '5' && third <= '9';  // 145-149 (140, 141, 144: IoT data-only, 13 digits)
    case '5': return third != '4';          // 150-153, 155-159
    case '6': return third == '2' || (third >= '5' && third <= '7');  // 162, 165-167
    case '7': return third != '9';                                    // 170-178
    case '9': return third != '4';                                    // 190-193, 195-199
    default: return false;
  }
}

bool LuhnValid(std::string_view digits) {
  if (!AllDigits(digits)) return false;
  int sum = 0;
  bool twice = false;
  for (size_t i = digits.size(); i-- > 0;) {
    int d = Digit(digits[i]);
    if (twice) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    twice = !twice;
  }
  return sum % 10 == 0;
}

bool IsKnownCardRange(std::string_view digits) {
  const size_t n = digits.size();
  if (n < 13 || n > 19 || !AllDigits(digits)) return false;
  auto len_in = [n](size_t low, size_t high) { return n >= low && n <= high; };
  if (digits[0] == '4') return n == 13 || n == 16 || n == 19;                        // Visa
  if (InRange(digits, 2, 51, 55) || InRange(digits, 4, 2221, 2720)) return n == 16;  // Mastercard
  if (InRange(digits, 2, 34, 34) || InRange(digits, 2, 37, 37)) return n == 15;      // Amex
  if (InRange(digits, 2, 62, 62)) return len_in(16, 19);                             // UnionPay
  if (InRange(digits, 4, 3528, 3589)) return len_in(16, 19);                         // JCB
  if (InRange(digits, 4, 6011, 6011) || InRange(digits, 3, 644, 649) ||
      InRange(digits, 2, 65, 65)) {
    return len_in(16, 19);  // Discover
  }
  if (InRange(digits, 3, 300, 305) || InRange(digits, 2, 36, 36) || InRange(digits, 2, 38, 39)) {
    return len_in(14, 19);  // Diners Club
  }
  if (InRange(digits, 2, 50, 50) || InRange(digits, 2, 56, 58) || InRange(digits, 4, 6304, 6304) ||
      InRange(digits, 4, 6759, 6759) || InRange(digits, 4, 6761, 6763)) {
    return len_in(13, 19);  // Maestro
  }
  return false;
}

char UsccCheckCharacter(std::string_view first17) {
  static constexpr int kWeights[17] = {1,  3,  9,  27, 19, 26, 16, 17, 20,
                                       29, 25, 13, 8,  24, 10, 30, 28};
  int sum = 0;
  for (size_t i = 0; i < 17; ++i) sum += UsccValue(first17[i]) * kWeights[i];
  int check = 31 - sum % 31;
  return kUsccAlphabet[check == 31 ? 0 : check];
}

bool IsValidUscc(std::string_view code) {
  if (code.size() != 18) return false;
  for (char c : code) {
    if (UsccValue(c) < 0) return false;
  }
  // Registration authority (1 organs, 5 social organisations, 9 industry and commerce, Y other,
  // and the less common 2-8 A N) and its type codes.
  char authority = code[0];
  char type = code[1];
  bool pair_ok = false;
  switch (authority) {
    case '1':
    case '5': pair_ok = type == '1' || type == '2' || type == '3' || type == '9'; break;
    case '9': pair_ok = type == '1' || type == '2' || type == '3'; break;
    case 'Y': pair_ok = type == '1'; break;
    case '2':
    case '3':
    case '4':
    case '6':
    case '7':
    case '8':
    case 'A':
    case 'N': pair_ok = type == '1' || type == '2' || type == '3' || type == '9'; break;
    default: pair_ok = false;
  }
  if (!pair_ok || !AllDigits(code.substr(2, 6))) return false;
  if (!IsProvinceCode(Number(code.substr(2, 2)))) return false;
  return code[17] == UsccCheckCharacter(code);
}

int IbanLength(std::string_view country) {
  for (const auto& entry : kIbanCountries) {
    if (country == entry.code) return entry.length;
  }
  return 0;
}

bool IsValidIban(std::string_view iban) {
  if (iban.size() < 15 || iban.size() > 34) return false;
  if (IbanLength(iban.substr(0, 2)) != static_cast<int>(iban.size())) return false;
  if (!AllDigits(iban.substr(2, 2))) return false;
  int remainder = 0;
  auto feed = [&remainder](char c) {
    if (c >= '0' && c <= '9') {
      remainder = (remainder * 10 + (c - '0')) % 97;
      return true;
    }
    if (c >= 'A' && c <= 'Z') {
      remainder = (remainder * 100 + (c - 'A' + 10)) % 97;
      return true;
    }
    return false;
  };
  for (size_t i = 4; i < iban.size(); ++i) {
    if (!feed(iban[i])) return false;
  }
  for (size_t i = 0; i < 4; ++i) {
    if (!feed(iban[i])) return false;
  }
  return remainder == 1;
}

bool IsValidSsn(std::string_view digits) {
  if (digits.size() != 9 || !AllDigits(digits)) return false;
  int area = Number(digits.substr(0, 3));
  if (area == 0 || area == 666 || area >= 900) return false;
  return Number(digits.substr(3, 2)) != 0 && Number(digits.substr(5, 4)) != 0;
}

std::optional<uint32_t> ParseIpv4(std::string_view text) {
  uint32_t address = 0;
  int parts = 0;
  size_t i = 0;
  while (parts < 4) {
    size_t begin = i;
    int value = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9' && i - begin < 3) {
      value = value * 10 + Digit(text[i]);
      ++i;
    }
    size_t length = i - begin;
    if (length == 0 || value > 255 || (length > 1 && text[begin] == '0')) return std::nullopt;
    address = (address << 8) | static_cast<uint32_t>(value);
    ++parts;
    if (parts < 4) {
      if (i >= text.size() || text[i] != '.') return std::nullopt;
      ++i;
    }
  }
  if (i != text.size()) return std::nullopt;
  return address;
}

bool ParseIpv6(std::string_view text, unsigned char out[16]) {
  if (text.size() < 2 || text.size() > 45) return false;
  char buffer[46];
  text.copy(buffer, text.size());
  buffer[text.size()] = '\0';
  return inet_pton(AF_INET6, buffer, out) == 1;
}

bool IsInternalIpv4(uint32_t address) {
  uint32_t a = address >> 24;
  uint32_t b = (address >> 16) & 0xFF;
  return a == 10 || a == 127 || (a == 172 && b >= 16 && b <= 31) || (a == 192 && b == 168) ||
         (a == 169 && b == 254);
}

bool IsInternalIpv6(const unsigned char address[16]) {
  bool loopback = address[15] == 1;
  for (int i = 0; i < 15 && loopback; ++i) loopback = address[i] == 0;
  return loopback || (address[0] == 0xFE && (address[1] & 0xC0) == 0x80) ||
         (address[0] & 0xFE) == 0xFC;
}

double ShannonEntropy(std::string_view text) {
  if (text.empty()) return 0;
  std::array<int, 256> counts{};
  for (unsigned char c : text) ++counts[c];
  double entropy = 0;
  const double n = static_cast<double>(text.size());
  for (int count : counts) {
    if (count == 0) continue;
    double p = count / n;
    entropy -= p * std::log2(p);
  }
  return entropy;
}

bool IsJwtHeader(std::string_view base64url) {
  // A header is small; 1 KiB of base64 decodes to 768 bytes.
  if (base64url.size() < 8 || base64url.size() > 1024) return false;
  std::string decoded;
  decoded.reserve(base64url.size() * 3 / 4);
  uint32_t bits = 0;
  int bit_count = 0;
  for (char c : base64url) {
    if (c == '=') break;
    int value = Base64UrlValue(c);
    if (value < 0) return false;
    bits = (bits << 6) | static_cast<uint32_t>(value);
    bit_count += 6;
    if (bit_count >= 8) {
      bit_count -= 8;
      decoded.push_back(static_cast<char>((bits >> bit_count) & 0xFF));
    }
  }
  size_t first = decoded.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || decoded[first] != '{') return false;
  return decoded.find("\"alg\"") != std::string::npos;
}

}  // namespace rampart::guard
