// Checkpoint notes: the exact text, a round trip, signatures with Ed25519 and SM2 verified and
// refused after any change, and malformed notes refused.

#include "audit/checkpoint.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rampart::audit {
namespace {

Checkpoint Sample() {
  Checkpoint checkpoint;
  checkpoint.tree_size = 1024;
  for (size_t i = 0; i < checkpoint.root.size(); ++i) checkpoint.root[i] = uint8_t(i);
  checkpoint.time_unix_ns = 1767225600123456789;
  checkpoint.digest = DigestAlgorithm::kSm3;
  return checkpoint;
}

TEST(CheckpointTest, BodyIsTheDocumentedText) {
  EXPECT_EQ(CheckpointBody(Sample()),
            "rampart-audit/v1\n1024\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n"
            "time 1767225600123456789\ndigest sm3\n");
  auto parsed = ParseCheckpointBody(CheckpointBody(Sample()));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->tree_size, 1024);
  EXPECT_EQ(parsed->root, Sample().root);
  EXPECT_EQ(parsed->digest, DigestAlgorithm::kSm3);
}

class CheckpointSignatureTest : public ::testing::TestWithParam<crypto::SignatureAlgorithm> {};

TEST_P(CheckpointSignatureTest, SignedNotesVerifyAndAnyChangeIsRefused) {
  auto key = crypto::SigningKey::Generate(GetParam());
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  auto signed_checkpoint = SignCheckpoint(Sample(), *key, "audit-key");
  ASSERT_TRUE(signed_checkpoint.ok()) << signed_checkpoint.status().ToString();
  const std::string note = CheckpointNote(*signed_checkpoint);
  EXPECT_NE(note.find("\n\n\xE2\x80\x94 audit-key "), std::string::npos) << note;

  auto parsed = ParseCheckpointNote(note);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_TRUE(VerifyCheckpoint(*parsed, key->Public()).ok());
  EXPECT_EQ(CheckpointNote(*parsed), note);

  SignedCheckpoint changed = *parsed;
  changed.checkpoint.tree_size = 1023;
  EXPECT_EQ(VerifyCheckpoint(changed, key->Public()).code(), StatusCode::kPermissionDenied);
  changed = *parsed;
  changed.checkpoint.root[0] ^= 1;
  EXPECT_FALSE(VerifyCheckpoint(changed, key->Public()).ok());
  changed = *parsed;
  changed.signature.back() ^= 1;
  EXPECT_FALSE(VerifyCheckpoint(changed, key->Public()).ok());
  auto other = crypto::SigningKey::Generate(GetParam());
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(VerifyCheckpoint(*parsed, other->Public()).ok());
}

INSTANTIATE_TEST_SUITE_P(Algorithms, CheckpointSignatureTest,
                         ::testing::Values(crypto::SignatureAlgorithm::kEd25519,
                                           crypto::SignatureAlgorithm::kSm2Sm3));

TEST(CheckpointTest, MalformedNotesAreRefused) {
  const std::string body = CheckpointBody(Sample());
  for (const std::string& bad : std::vector<std::string>{
           std::string(),
           body,  // no signature
           body + "\n",
           body + "\n\xE2\x80\x94 key\n",
           body + "\n\xE2\x80\x94 key !!!!\n",
           body + "\n- key AAAA\n",
           body + "\n\xE2\x80\x94 key AAAA",
           "other/v1\n1\nAAAA\ntime 1\ndigest sha256\n\n\xE2\x80\x94 k AAAA\n",
           "rampart-audit/v1\n01\n" + body.substr(22) + "\n\xE2\x80\x94 k AAAA\n",
           "rampart-audit/v1\n-1\nAAAA\ntime 1\ndigest sha256\n\n\xE2\x80\x94 k AAAA\n",
           "rampart-audit/v1\n1\nAAAA\ntime 1\ndigest md5\n\n\xE2\x80\x94 k AAAA\n",
       }) {
    EXPECT_FALSE(ParseCheckpointNote(bad).ok()) << bad;
  }
}

TEST(CheckpointTest, Base64RoundTripsAndRefusesNonCanonicalText) {
  for (const std::string& bytes :
       {std::string(), std::string("f"), std::string("fo"), std::string("foo"), std::string("foob"),
        std::string("\x00\xff\x10", 3)}) {
    auto back = Base64Decode(Base64Encode(bytes));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, bytes);
  }
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  for (const char* bad : {"Zm8", "Zm9=Zm8=", "Zm==", "Z===", "Zm8*", "====", "Zm9v\n"}) {
    EXPECT_FALSE(Base64Decode(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace rampart::audit
