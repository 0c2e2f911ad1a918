// Digests, HMAC, HKDF and helpers: published known answers (GB/T 32905 for SM3, FIPS 180-2 for
// SHA-256, RFC 4231 for HMAC-SHA256, RFC 5869 for HKDF-SHA256), HMAC-SM3 and HKDF-SM3 against
// RFC 2104 / RFC 5869 computed here from the bare hash, and GB/T 32907's SM4 block through
// OpenSSL's "SM4-ECB" (the check that OpenSSL's SM4 is the standard one).

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <string>

#include "crypto/digest.h"

namespace rampart::crypto {
namespace {

std::string Unhex(std::string_view hex) {
  Result<std::string> bytes = FromHex(hex);
  EXPECT_TRUE(bytes.ok()) << hex;
  return bytes.ok() ? *bytes : std::string();
}

std::string AsString(const Digest& digest) {
  return std::string(reinterpret_cast<const char*>(digest.data()), digest.size());
}

TEST(Sm3, GbT32905Vectors) {
  EXPECT_EQ(ToHex(Hash(DigestAlgorithm::kSm3, "abc")),
            "66c7f0f462eeedd9d1f2d46bdc10e4e24167c4875cf2f7a2297da02b8f4ba8e0");
  std::string abcd16;
  for (int i = 0; i < 16; ++i) abcd16 += "abcd";
  EXPECT_EQ(ToHex(Hash(DigestAlgorithm::kSm3, abcd16)),
            "debe9ff92275b8a138604889c18e5a4d6fdb70e5387e5765293dcba39c0c5732");
}

TEST(Sha256, Fips180Vectors) {
  EXPECT_EQ(ToHex(Hash(DigestAlgorithm::kSha256, "abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(ToHex(Hash(DigestAlgorithm::kSha256, "")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Hasher, IncrementalEqualsOneShotAndSurvivesMoves) {
  std::string data;
  for (int i = 0; i < 1000; ++i) data += static_cast<char>(i * 7);
  for (DigestAlgorithm algorithm : {DigestAlgorithm::kSha256, DigestAlgorithm::kSm3}) {
    Hasher hasher(algorithm);
    hasher.Update(std::string_view(data).substr(0, 3));
    Hasher moved(std::move(hasher));
    moved.Update(std::string_view(data).substr(3, 500));
    Hasher assigned(DigestAlgorithm::kSha256);
    assigned = std::move(moved);
    assigned.Update("");
    assigned.Update(std::string_view(data).substr(503));
    EXPECT_EQ(assigned.Finish(), Hash(algorithm, data)) << DigestName(algorithm);
  }
}

TEST(Sm4, GbT32907BlockThroughOpenSsl) {
  const std::string key = Unhex("0123456789abcdeffedcba9876543210");
  const std::string plaintext = key;
  EVP_CIPHER* cipher = EVP_CIPHER_fetch(nullptr, "SM4-ECB", nullptr);
  ASSERT_NE(cipher, nullptr);
  EVP_CIPHER_CTX* context = EVP_CIPHER_CTX_new();
  unsigned char out[32];
  int written = 0;
  int final_written = 0;
  ASSERT_EQ(EVP_EncryptInit_ex2(context, cipher, reinterpret_cast<const unsigned char*>(key.data()),
                                nullptr, nullptr),
            1);
  EVP_CIPHER_CTX_set_padding(context, 0);
  ASSERT_EQ(EVP_EncryptUpdate(context, out, &written,
                              reinterpret_cast<const unsigned char*>(plaintext.data()), 16),
            1);
  ASSERT_EQ(EVP_EncryptFinal_ex(context, out + written, &final_written), 1);
  EVP_CIPHER_CTX_free(context);
  EVP_CIPHER_free(cipher);
  ASSERT_EQ(written + final_written, 16);
  EXPECT_EQ(ToHex(std::string_view(reinterpret_cast<const char*>(out), 16)),
            "681edf34d206965e86b3e94f536e4246");
}

TEST(Hmac, Rfc4231Sha256) {
  // Test case 2.
  EXPECT_EQ(ToHex(Hmac(DigestAlgorithm::kSha256, "Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Test case 6: a 131-byte key, longer than the block, is hashed first.
  EXPECT_EQ(ToHex(Hmac(DigestAlgorithm::kSha256, std::string(131, '\xaa'),
                       "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

// RFC 2104 from the bare hash: H((K0 ^ opad) || H((K0 ^ ipad) || m)), 64-byte blocks.
Digest ReferenceHmac(DigestAlgorithm algorithm, std::string key, std::string_view message) {
  if (key.size() > 64) key = AsString(Hash(algorithm, key));
  key.resize(64, '\0');
  std::string inner = key;
  std::string outer = key;
  for (size_t i = 0; i < 64; ++i) {
    inner[i] = static_cast<char>(inner[i] ^ 0x36);
    outer[i] = static_cast<char>(outer[i] ^ 0x5c);
  }
  return Hash(algorithm, outer + AsString(Hash(algorithm, inner + std::string(message))));
}

TEST(Hmac, Sm3MatchesRfc2104ComputedFromSm3) {
  // A key of every interesting length: empty, short, a whole block, longer than a block.
  for (size_t key_length : {0, 4, 32, 64, 65, 131}) {
    std::string key;
    for (size_t i = 0; i < key_length; ++i) key += static_cast<char>(i + 1);
    for (std::string_view message : {"", "abc", "what do ya want for nothing?"}) {
      EXPECT_EQ(Hmac(DigestAlgorithm::kSm3, key, message),
                ReferenceHmac(DigestAlgorithm::kSm3, key, message))
          << key_length << " " << message;
    }
  }
  // The reference itself is right: it reproduces RFC 4231 for SHA-256.
  EXPECT_EQ(ToHex(ReferenceHmac(DigestAlgorithm::kSha256, "Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(Hkdf, Rfc5869Sha256) {
  // Test case 1.
  EXPECT_EQ(ToHex(Hkdf(DigestAlgorithm::kSha256, std::string(22, '\x0b'),
                       Unhex("000102030405060708090a0b0c"), Unhex("f0f1f2f3f4f5f6f7f8f9"), 42)),
            "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865");
  // Test case 3: no salt, no info.
  EXPECT_EQ(ToHex(Hkdf(DigestAlgorithm::kSha256, std::string(22, '\x0b'), "", "", 42)),
            "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8");
}

TEST(Hkdf, Sm3MatchesRfc5869ComputedFromHmacSm3) {
  const std::string key = "input keying material";
  const std::string salt = "salt";
  const std::string info = "rampart aead sm4-ctr-hmac-sm3 v1 key split";
  const std::string prk = AsString(Hmac(DigestAlgorithm::kSm3, salt, key));
  std::string okm;
  std::string previous;
  for (char counter = 1; okm.size() < 80; ++counter) {
    previous = AsString(Hmac(DigestAlgorithm::kSm3, prk, previous + info + counter));
    okm += previous;
  }
  EXPECT_EQ(ToHex(Hkdf(DigestAlgorithm::kSm3, key, salt, info, 80)), ToHex(okm.substr(0, 80)));
  // An absent salt is 32 zero bytes (RFC 5869 §2.2), and an empty key is allowed.
  const std::string zero_salt_prk =
      AsString(Hmac(DigestAlgorithm::kSm3, std::string(32, '\0'), ""));
  EXPECT_EQ(Hkdf(DigestAlgorithm::kSm3, "", "", "x", 32),
            AsString(Hmac(DigestAlgorithm::kSm3, zero_salt_prk, std::string("x") + '\x01')));
}

TEST(ConstantTimeEquals, ComparesBytesAndLengths) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "ab"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
  EXPECT_TRUE(ConstantTimeEquals(std::string("a\0b", 3), std::string("a\0b", 3)));
  EXPECT_FALSE(ConstantTimeEquals(std::string("a\0b", 3), std::string("a\0c", 3)));
}

TEST(Hex, RoundTripsAndRejectsMalformedInput) {
  const std::string bytes("\x00\x01\x7f\x80\xfe\xff", 6);
  EXPECT_EQ(ToHex(bytes), "00017f80feff");
  EXPECT_EQ(*FromHex("00017f80feff"), bytes);
  EXPECT_EQ(*FromHex("00017F80FEFF"), bytes);
  EXPECT_EQ(*FromHex(""), "");
  for (std::string_view bad : {"0", "abc", "0g", "zz", " 00", "0x00"}) {
    Result<std::string> decoded = FromHex(bad);
    ASSERT_FALSE(decoded.ok()) << bad;
    EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(RandomBytes, HasTheLengthAskedForAndDiffers) {
  EXPECT_EQ(RandomBytes(0), "");
  const std::string a = RandomBytes(32);
  const std::string b = RandomBytes(32);
  EXPECT_EQ(a.size(), 32u);
  EXPECT_NE(a, b);  // equal with probability 2^-256
}

TEST(DigestNames, ParseAndPrint) {
  EXPECT_EQ(*ParseDigest("SM3"), DigestAlgorithm::kSm3);
  EXPECT_EQ(*ParseDigest("sha256"), DigestAlgorithm::kSha256);
  EXPECT_EQ(DigestName(DigestAlgorithm::kSm3), "sm3");
  EXPECT_EQ(DigestName(DigestAlgorithm::kSha256), "sha256");
  EXPECT_EQ(ParseDigest("md5").status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParseDigest("sha2566").ok());
}

}  // namespace
}  // namespace rampart::crypto
