// The validators with real-world-format examples: the GB 11643 worked example, known test card
// numbers, the IBAN registry's examples.
#include "guard/validators.h"

#include <gtest/gtest.h>

namespace rampart::guard {
namespace {

TEST(ResidentIdTest, WorkedExampleAndLookAlikes) {
  EXPECT_TRUE(IsValidResidentId18("11010519491231002X"));  // GB 11643's example
  EXPECT_TRUE(IsValidResidentId18("11010519491231002x"));
  EXPECT_EQ(ResidentIdCheckCharacter("11010519491231002"), 'X');
  EXPECT_FALSE(IsValidResidentId18("110105194912310021"));  // wrong check character
  EXPECT_FALSE(IsValidResidentId18("990105194912310028"));  // no province 99
  EXPECT_FALSE(IsValidResidentId18("110105194902300020"));  // 30 February
  EXPECT_FALSE(IsValidResidentId18("110105189912310020"));  // before 1900
  EXPECT_TRUE(IsValidResidentId15("110105491231002"));
  EXPECT_FALSE(IsValidResidentId15("110105491331002"));  // month 13
  EXPECT_TRUE(IsProvinceCode(82));
  EXPECT_FALSE(IsProvinceCode(16));
  EXPECT_FALSE(IsProvinceCode(72));
}

TEST(MobileTest, Prefixes) {
  EXPECT_TRUE(IsMobilePrefix("138"));
  EXPECT_TRUE(IsMobilePrefix("199"));
  EXPECT_TRUE(IsMobilePrefix("166"));
  EXPECT_FALSE(IsMobilePrefix("154"));
  EXPECT_FALSE(IsMobilePrefix("120"));
  EXPECT_FALSE(IsMobilePrefix("194"));
}

TEST(CardTest, KnownTestNumbers) {
  for (const char* number :
       {"4111111111111111", "4012888888881881", "5555555555554444", "5105105105105100",
        "2221000000000009", "378282246310005", "371449635398431", "6011111111111117",
        "3530111333300000", "30569309025904", "6200000000000005", "6222021234567890128"}) {
    EXPECT_TRUE(LuhnValid(number)) << number;
    EXPECT_TRUE(IsKnownCardRange(number)) << number;
  }
  EXPECT_FALSE(LuhnValid("4111111111111112"));
  EXPECT_FALSE(IsKnownCardRange("9111111111111111"));
  EXPECT_FALSE(IsKnownCardRange("378282246310005000"));  // Amex is 15 digits
}

TEST(UsccTest, CheckCharacter) {
  EXPECT_TRUE(IsValidUscc("91350100M000100Y43"));
  EXPECT_TRUE(IsValidUscc("914403001922038216"));
  EXPECT_FALSE(IsValidUscc("91350100M000100Y44"));
  EXPECT_FALSE(IsValidUscc("91350100M000100I43"));  // I is not in the alphabet
  EXPECT_FALSE(IsValidUscc("81990100M000100Y43"));  // no province 99
}

TEST(IbanTest, RegistryExamples) {
  EXPECT_TRUE(IsValidIban("GB82WEST12345698765432"));
  EXPECT_TRUE(IsValidIban("DE89370400440532013000"));
  EXPECT_TRUE(IsValidIban("FR1420041010050500013M02606"));
  EXPECT_TRUE(IsValidIban("NL91ABNA0417164300"));
  EXPECT_FALSE(IsValidIban("GB82WEST12345698765433"));  // checksum
  EXPECT_FALSE(IsValidIban("GB82WEST1234569876543"));   // length
  EXPECT_FALSE(IsValidIban("QQ82WEST12345698765432"));  // no such country
}

TEST(SsnTest, Areas) {
  EXPECT_TRUE(IsValidSsn("123456789"));
  EXPECT_FALSE(IsValidSsn("000456789"));
  EXPECT_FALSE(IsValidSsn("666456789"));
  EXPECT_FALSE(IsValidSsn("912456789"));
  EXPECT_FALSE(IsValidSsn("123006789"));
  EXPECT_FALSE(IsValidSsn("123450000"));
}

TEST(IpTest, Forms) {
  EXPECT_TRUE(ParseIpv4("192.168.1.1"));
  EXPECT_FALSE(ParseIpv4("256.1.1.1"));
  EXPECT_FALSE(ParseIpv4("01.1.1.1"));
  EXPECT_FALSE(ParseIpv4("1.2.3"));
  unsigned char bytes[16];
  EXPECT_TRUE(ParseIpv6("2001:db8::1", bytes));
  EXPECT_TRUE(ParseIpv6("::ffff:192.0.2.1", bytes));
  EXPECT_TRUE(ParseIpv6("fe80::1", bytes));
  EXPECT_TRUE(IsInternalIpv6(bytes));
  EXPECT_FALSE(ParseIpv6("12:30:45", bytes));
  EXPECT_TRUE(IsInternalIpv4(*ParseIpv4("172.20.0.1")));
  EXPECT_FALSE(IsInternalIpv4(*ParseIpv4("172.32.0.1")));
}

TEST(SecretTest, EntropyAndJwt) {
  EXPECT_NEAR(ShannonEntropy("aaaa"), 0.0, 1e-9);
  EXPECT_NEAR(ShannonEntropy("abcd"), 2.0, 1e-9);
  EXPECT_TRUE(IsJwtHeader("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"));
  EXPECT_FALSE(IsJwtHeader("eyJzdWIiOiIxMjM0NTY3ODkwIn0"));  // {"sub":"1234567890"}
}

}  // namespace
}  // namespace rampart::guard
