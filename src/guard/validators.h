#pragma once

// The validators behind the entity types: check characters, dates, region and range tables.
// Each takes the candidate's characters with separators already removed (digits, letters) unless
// it says otherwise, and returns whether the candidate is real. Pure functions; thread-safe.

#include <cstdint>
#include <optional>
#include <string_view>

namespace rampart::guard {

// GB 11643-1999: 17 digits, a province-level region (11-15, 21-23, 31-37, 41-46, 50-54, 61-65,
// 71, 81, 82), a calendar date YYYYMMDD with 1900 <= YYYY <= the current year, and the MOD 11-2
// check character ('X' or 'x' for 10).
bool IsValidResidentId18(std::string_view id);
// The 15-digit legacy form: region, YYMMDD read as 19YY, a 3-digit sequence; no check digit.
bool IsValidResidentId15(std::string_view id);
bool IsProvinceCode(int code);
// The MOD 11-2 check character of 17 digits ('0'..'9' or 'X').
char ResidentIdCheckCharacter(std::string_view first17);

// A mainland mobile number's first three digits: the assigned 13x-19x blocks for
// person-to-person service (see candidates.cc's table comment for the list).
bool IsMobilePrefix(std::string_view first3);

// Luhn (ISO/IEC 7812-1) over all digits.
bool LuhnValid(std::string_view digits);
// Whether the digits start in a known issuer range whose lengths include this one: UnionPay 62
// (16-19), Visa 4 (13, 16, 19), Mastercard 51-55 and 2221-2720 (16), Amex 34/37 (15), JCB
// 3528-3589 (16-19), Discover 6011/644-649/65 (16-19), Diners 300-305/36/38-39 (14-19),
// Maestro 50, 56-58, 6304, 6759, 6761-6763 (12-19, here 13-19).
bool IsKnownCardRange(std::string_view digits);

// GB 32100-2015: 18 characters over 0-9 A-Z without I O S V Z, a registration authority and type
// code pair, a 6-digit region whose first two digits are a province, and the mod-31 check.
bool IsValidUscc(std::string_view code);
char UsccCheckCharacter(std::string_view first17);

// ISO 13616: the country's length (from the registry's table), the check digits and mod 97 = 1.
// `iban` is upper case without spaces.
bool IsValidIban(std::string_view iban);
int IbanLength(std::string_view country);  // 0 for an unknown country

// US SSN AAA GG SSSS (9 digits): area not 000, 666 or 900-999; group not 00; serial not 0000.
bool IsValidSsn(std::string_view digits);

// Dotted-quad IPv4 (decimal octets 0-255, no leading zeros); the address in host order.
std::optional<uint32_t> ParseIpv4(std::string_view text);
// IPv6 in any textual form (RFC 4291 2.2: full, :: compressed, embedded IPv4); the 16 bytes.
bool ParseIpv6(std::string_view text, unsigned char out[16]);
// 10/8, 172.16/12, 192.168/16, 127/8, 169.254/16.
bool IsInternalIpv4(uint32_t address);
// ::1, fe80::/10, fc00::/7.
bool IsInternalIpv6(const unsigned char address[16]);

// Shannon entropy in bits per character of the byte string.
double ShannonEntropy(std::string_view text);
// A JWT's first part: base64url that decodes to a JSON object with an "alg" member.
bool IsJwtHeader(std::string_view base64url);

}  // namespace rampart::guard
