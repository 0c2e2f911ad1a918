#include "identity/encoding.h"

#include <gtest/gtest.h>

#include <set>

namespace rampart::identity {
namespace {

TEST(Base64UrlTest, RoundTripsEveryLength) {
  std::string bytes;
  for (int length = 0; length < 40; ++length) {
    const std::string encoded = Base64UrlEncode(bytes);
    EXPECT_EQ(encoded.find_first_of("+/="), std::string::npos) << encoded;
    EXPECT_EQ(Base64UrlDecode(encoded), bytes) << encoded;
    bytes.push_back(static_cast<char>(length * 37 + 251));
  }
  EXPECT_EQ(Base64UrlEncode("\xfb\xff"), "-_8");
}

TEST(Base64UrlTest, RefusesWhatIsNotStrictUnpaddedBase64Url) {
  EXPECT_FALSE(Base64UrlDecode("YQ=="));   // padding
  EXPECT_FALSE(Base64UrlDecode("a+b/"));   // the other alphabet
  EXPECT_FALSE(Base64UrlDecode("abcde"));  // 4n+1 characters encode nothing
  EXPECT_FALSE(Base64UrlDecode("YR"));     // "a" is "YQ": non-zero trailing bits
  EXPECT_FALSE(Base64UrlDecode("Y Q"));
  EXPECT_EQ(Base64UrlDecode("YQ"), "a");
  EXPECT_EQ(Base64UrlDecode(""), "");
}

TEST(HexTest, EncodesLowerCaseAndDecodesEitherCase) {
  EXPECT_EQ(HexEncode(std::string("\x00\xab\x10", 3)), "00ab10");
  EXPECT_EQ(HexDecode("00AB10"), std::string("\x00\xab\x10", 3));
  EXPECT_FALSE(HexDecode("abc"));
  EXPECT_FALSE(HexDecode("zz"));
}

TEST(Sha256Test, MatchesTheStandardVector) {
  EXPECT_EQ(HexEncode(Sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(ConstantTimeEqualsTest, ComparesContentAndLength) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
}

TEST(RandomBase62Test, UsesTheWholeAlphabetAndNothingElse) {
  std::set<char> seen;
  for (int i = 0; i < 200; ++i) {
    const std::string text = RandomBase62(32);
    ASSERT_EQ(text.size(), 32u);
    for (const char c : text) {
      ASSERT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << text;
      seen.insert(c);
    }
  }
  // 6400 draws over 62 symbols: each is missed with probability ~e^-103.
  EXPECT_EQ(seen.size(), 62u);
}

}  // namespace
}  // namespace rampart::identity
