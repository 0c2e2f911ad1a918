// Envelopes: round trips on both suites, the context binding (tenant, region, data class, with
// unambiguous framing), rewrap without the payload changing, the minimum decryption version,
// every failure's error, and a malformed-input sweep (every truncation and single-bit flip of a
// small envelope fails cleanly).

#include "crypto/envelope.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "crypto/digest.h"
#include "store/keyring_storage.h"
#include "testing/memory_store.h"

namespace rampart::crypto {
namespace {

constexpr EnvelopeContext kContext{.tenant = "acme", .region = "eu-west", .data_class = "SECRET"};

bool Contains(const Status& status, std::string_view text) {
  return status.message().find(text) != std::string::npos;
}

class EnvelopeTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/rampart-envelope-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    const std::string path = dir_ + "/master.key";
    std::ofstream(path) << std::string(64, '7');
    std::filesystem::permissions(path, std::filesystem::perms::owner_read);
    auto master = MasterKeyFromFile(path);
    ASSERT_TRUE(master.ok()) << master.status().ToString();
    auto keyring = Keyring::Open(storage_, std::move(*master));
    ASSERT_TRUE(keyring.ok()) << keyring.status().ToString();
    keyring_ = std::move(*keyring);
    const Status ensured = keyring_->Ensure("data", KeyPurpose::kWrapping, GetParam());
    ASSERT_TRUE(ensured.ok()) << ensured.ToString();
    envelope_ = std::make_unique<Envelope>(*keyring_);
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::string SealOrDie(std::string_view plaintext, const EnvelopeContext& context = kContext) {
    auto sealed = envelope_->Seal("data", plaintext, context);
    EXPECT_TRUE(sealed.ok()) << sealed.status().ToString();
    return sealed.ok() ? *sealed : std::string();
  }

  std::string dir_;
  testing::MemoryStore store_;
  store::StoreKeyringStorage storage_{store_};
  std::unique_ptr<Keyring> keyring_;
  std::unique_ptr<Envelope> envelope_;
};

INSTANTIATE_TEST_SUITE_P(Suites, EnvelopeTest, ::testing::Values("aes-256-gcm", "sm4-ctr-hmac-sm3"),
                         [](const ::testing::TestParamInfo<std::string>& suite) {
                           return suite.param == "aes-256-gcm" ? std::string("Aes256Gcm")
                                                               : std::string("Sm4CtrHmacSm3");
                         });

TEST_P(EnvelopeTest, RoundTripsAndDescribesItself) {
  for (const std::string& plaintext :
       {std::string(), std::string("hello"), RandomBytes(1024), RandomBytes(1 << 20)}) {
    const std::string sealed = SealOrDie(plaintext);
    EXPECT_TRUE(Envelope::HasMagic(sealed));
    auto header = Envelope::Inspect(sealed);
    ASSERT_TRUE(header.ok()) << header.status().ToString();
    EXPECT_EQ(AeadName(header->suite), GetParam());
    EXPECT_EQ(header->key_name, "data");
    EXPECT_EQ(header->key_version, 1);
    EXPECT_EQ(header->payload_bytes, plaintext.size());
    auto opened = envelope_->Open(sealed, kContext);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    EXPECT_EQ(*opened, plaintext);
  }
  // Two seals of the same plaintext differ (fresh data key and nonce).
  EXPECT_NE(SealOrDie("same"), SealOrDie("same"));
}

TEST_P(EnvelopeTest, AnotherTenantRegionOrDataClassCannotOpenIt) {
  const std::string sealed = SealOrDie("record");
  for (const EnvelopeContext& wrong :
       {EnvelopeContext{"other", "eu-west", "SECRET"}, EnvelopeContext{"acme", "us-east", "SECRET"},
        EnvelopeContext{"acme", "eu-west", "PUBLIC"}}) {
    auto opened = envelope_->Open(sealed, wrong);
    ASSERT_FALSE(opened.ok());
    EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(opened.status(), "decryption failed")) << opened.status().ToString();
    EXPECT_TRUE(Contains(opened.status(), "tenant, region or data class"));
  }
  // The fields are framed: moving a byte from one field to the next is a different context.
  const std::string framed = SealOrDie("x", {.tenant = "ab", .region = "c", .data_class = ""});
  EXPECT_FALSE(envelope_->Open(framed, {.tenant = "a", .region = "bc", .data_class = ""}).ok());
  EXPECT_TRUE(envelope_->Open(framed, {.tenant = "ab", .region = "c", .data_class = ""}).ok());
}

TEST_P(EnvelopeTest, RewrapMovesTheDataKeyAndLeavesThePayloadAlone) {
  const std::string plaintext = RandomBytes(4096);
  const std::string sealed = SealOrDie(plaintext);
  auto unchanged = envelope_->Rewrap(sealed);
  ASSERT_TRUE(unchanged.ok());
  EXPECT_EQ(*unchanged, sealed);  // already current

  ASSERT_EQ(*keyring_->Rotate("data"), 2);
  auto rewrapped = envelope_->Rewrap(sealed);
  ASSERT_TRUE(rewrapped.ok()) << rewrapped.status().ToString();
  EXPECT_EQ(Envelope::Inspect(*rewrapped)->key_version, 2);
  EXPECT_EQ(rewrapped->size(), sealed.size());
  // Nonce, tag and ciphertext: the same last bytes.
  const size_t tail = plaintext.size() + 8 + AeadTagBytes(Envelope::Inspect(sealed)->suite);
  EXPECT_EQ(rewrapped->substr(rewrapped->size() - tail), sealed.substr(sealed.size() - tail));
  EXPECT_EQ(*envelope_->Open(*rewrapped, kContext), plaintext);
  EXPECT_EQ(*envelope_->Open(sealed, kContext), plaintext);  // v1 still decrypts

  ASSERT_TRUE(keyring_->SetMinDecryptionVersion("data", 2).ok());
  auto retired = envelope_->Open(sealed, kContext);
  ASSERT_FALSE(retired.ok());
  EXPECT_EQ(retired.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(retired.status(), "minimum decryption version"))
      << retired.status().ToString();
  EXPECT_EQ(envelope_->Rewrap(sealed).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(*envelope_->Open(*rewrapped, kContext), plaintext);
}

TEST_P(EnvelopeTest, EachKindOfDamageFailsWithAClearError) {
  const std::string sealed = SealOrDie("payload bytes");
  const auto header = Envelope::Inspect(sealed);
  ASSERT_TRUE(header.ok());

  // Truncated.
  auto truncated = envelope_->Open(sealed.substr(0, sealed.size() - 1), kContext);
  EXPECT_EQ(truncated.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(truncated.status(), "decryption failed: malformed envelope"))
      << truncated.status().ToString();

  // A flipped tag bit: the tag sits before the 8-byte length and the payload.
  std::string flipped = sealed;
  flipped[sealed.size() - 13 - 8 - 1] ^= 0x01;
  auto tag = envelope_->Open(flipped, kContext);
  EXPECT_EQ(tag.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(tag.status(), "payload does not authenticate")) << tag.status().ToString();

  // Another key version than the one the data key was wrapped under (the version field is bytes
  // 10..13: "RPE", format, suite, name length 4, "data").
  ASSERT_EQ(*keyring_->Rotate("data"), 2);
  std::string other_version = sealed;
  other_version[13] = 2;
  auto version = envelope_->Open(other_version, kContext);
  EXPECT_EQ(version.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(version.status(), "data key does not unwrap under key 'data' version 2"))
      << version.status().ToString();
  other_version[13] = 9;
  EXPECT_EQ(envelope_->Open(other_version, kContext).status().code(), StatusCode::kNotFound);

  // An unknown key.
  std::string unknown = sealed;
  unknown[6] = 'D';
  auto missing = envelope_->Open(unknown, kContext);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(missing.status(), "key 'Data' is not in the keyring"))
      << missing.status().ToString();
  EXPECT_EQ(envelope_->Seal("nothing", "x", kContext).status().code(), StatusCode::kNotFound);

  // Not an envelope at all; a future format version.
  EXPECT_TRUE(Contains(envelope_->Open("plain text", kContext).status(), "\"RPE\""));
  std::string future = sealed;
  future[3] = 2;
  EXPECT_TRUE(Contains(envelope_->Open(future, kContext).status(), "format version 2"));
}

TEST_P(EnvelopeTest, EveryTruncationAndEveryBitFlipOfASmallEnvelopeFailsCleanly) {
  ASSERT_TRUE(keyring_->Rotate("data").ok());  // so a flipped version bit can find version 1 or 3
  const std::string sealed = SealOrDie("tiny");
  for (size_t length = 0; length < sealed.size(); ++length) {
    const std::string_view cut = std::string_view(sealed).substr(0, length);
    EXPECT_FALSE(envelope_->Open(cut, kContext).ok()) << length;
    EXPECT_FALSE(Envelope::Inspect(cut).ok()) << length;
    EXPECT_FALSE(envelope_->Rewrap(cut).ok()) << length;
  }
  for (size_t bit = 0; bit < sealed.size() * 8; ++bit) {
    std::string flipped = sealed;
    flipped[bit / 8] ^= static_cast<char>(1 << (bit % 8));
    const auto opened = envelope_->Open(flipped, kContext);
    EXPECT_FALSE(opened.ok()) << "bit " << bit;
    (void)envelope_->Rewrap(flipped);  // may succeed on a flipped payload bit: it never reads it
    (void)Envelope::Inspect(flipped);
  }
  // Appended bytes, and a length field that claims more than is there.
  EXPECT_FALSE(envelope_->Open(sealed + "x", kContext).ok());
  std::string huge = sealed;
  for (size_t i = sealed.size() - 4 - 8; i < sealed.size() - 4; ++i) huge[i] = '\xff';
  EXPECT_FALSE(envelope_->Open(huge, kContext).ok());
}

}  // namespace
}  // namespace rampart::crypto
