// Signatures: RFC 8032's Ed25519 test vectors 1-3, the SM2 signature example of GM/T 0003.5-2012
// (recommended curve, ID "1234567812345678", message "message digest"), cross-verification with
// the openssl command line both ways, PEM round trips, and malformed keys and signatures.

#include <gtest/gtest.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "crypto/digest.h"
#include "crypto/signature.h"

namespace rampart::crypto {
namespace {

std::string Unhex(std::string_view hex) {
  Result<std::string> bytes = FromHex(hex);
  EXPECT_TRUE(bytes.ok()) << hex;
  return bytes.ok() ? *bytes : std::string();
}

const unsigned char* Bytes(const std::string& data) {
  return reinterpret_cast<const unsigned char*>(data.data());
}

std::string PemOf(EVP_PKEY* key, bool private_key) {
  BIO* bio = BIO_new(BIO_s_mem());
  EXPECT_EQ(private_key ? PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr)
                        : PEM_write_bio_PUBKEY(bio, key),
            1);
  char* data = nullptr;
  const long length = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<size_t>(length));
  BIO_free(bio);
  return pem;
}

// --- Ed25519 ----------------------------------------------------------------------------------

struct Ed25519Case {
  const char* secret;
  const char* public_key;
  const char* message;
  const char* signature;
};

// RFC 8032 §7.1, TEST 1-3.
constexpr Ed25519Case kEd25519Cases[] = {
    {"9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
     "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
     "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b"
     "46bd25bf5f0595bbe24655141438e7a100b"},
    {"4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
     "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
     "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11"
     "d8c387b2eaeb4302aeeb00d291612bb0c00"},
    {"c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
     "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
     "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc"
     "6594a7c15e9716ed28dc027beceea1ec40a"},
};

TEST(Ed25519, Rfc8032Vectors1To3) {
  for (const Ed25519Case& c : kEd25519Cases) {
    const std::string secret = Unhex(c.secret);
    const std::string public_bytes = Unhex(c.public_key);
    EVP_PKEY* private_key =
        EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, Bytes(secret), secret.size());
    EVP_PKEY* public_key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                                       Bytes(public_bytes), public_bytes.size());
    ASSERT_NE(private_key, nullptr);
    ASSERT_NE(public_key, nullptr);
    const std::string private_pem = PemOf(private_key, true);
    const std::string public_pem = PemOf(public_key, false);
    EVP_PKEY_free(private_key);
    EVP_PKEY_free(public_key);

    Result<SigningKey> signing = SigningKey::FromPem(SignatureAlgorithm::kEd25519, private_pem);
    ASSERT_TRUE(signing.ok()) << signing.status().ToString();
    const std::string message = Unhex(c.message);
    Result<std::string> signature = signing->Sign(message);
    ASSERT_TRUE(signature.ok());
    EXPECT_EQ(ToHex(*signature), c.signature);
    EXPECT_EQ(signing->Public().PublicPem(), public_pem);

    Result<VerifyingKey> verifying =
        VerifyingKey::FromPem(SignatureAlgorithm::kEd25519, public_pem);
    ASSERT_TRUE(verifying.ok());
    EXPECT_TRUE(verifying->Verify(message, Unhex(c.signature)));
    std::string flipped = Unhex(c.signature);
    flipped[10] = static_cast<char>(flipped[10] ^ 0x04);
    EXPECT_FALSE(verifying->Verify(message, flipped));
    EXPECT_FALSE(verifying->Verify(message + "x", Unhex(c.signature)));
    EXPECT_FALSE(verifying->Verify(message, Unhex(c.signature).substr(0, 63)));
  }
}

// --- SM2 --------------------------------------------------------------------------------------

// GM/T 0003.5-2012 (GB/T 32918.5-2017), Annex A: SM2 signature on the recommended curve.
constexpr char kSm2Private[] = "3945208f7b2144b13f36e38ac6d39f95889393692860b51a42fb81ef4df7c5b8";
constexpr char kSm2PublicX[] = "09f9df311e5421a150dd7d161e4bc5c672179fad1833fc076bb08ff356f35020";
constexpr char kSm2PublicY[] = "ccea490ce26775a52dc6ea718cc1aa600aed05fbf35e084a6632f6072da9ad13";
constexpr char kSm2R[] = "f5a03b0648d2c4630eeac513e1bb81a15944da3827d5b74143ac7eaceee720b3";
constexpr char kSm2S[] = "b1b6aa29df212fd8763182bc0d421ca1bb9038fd1f7f42d4840b69c485bbc1aa";
constexpr char kSm2Message[] = "message digest";

// The SM2 key of the example as PEM (public only, or with the private scalar).
std::string Sm2ExamplePem(bool private_key) {
  std::string point(1, '\x04');  // uncompressed: 04 || x || y
  point += Unhex(kSm2PublicX);
  point += Unhex(kSm2PublicY);
  OSSL_PARAM_BLD* build = OSSL_PARAM_BLD_new();
  BIGNUM* scalar = nullptr;
  EXPECT_EQ(OSSL_PARAM_BLD_push_utf8_string(build, OSSL_PKEY_PARAM_GROUP_NAME, "SM2", 0), 1);
  EXPECT_EQ(
      OSSL_PARAM_BLD_push_octet_string(build, OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size()),
      1);
  if (private_key) {
    EXPECT_GT(BN_hex2bn(&scalar, kSm2Private), 0);
    EXPECT_EQ(OSSL_PARAM_BLD_push_BN(build, OSSL_PKEY_PARAM_PRIV_KEY, scalar), 1);
  }
  OSSL_PARAM* params = OSSL_PARAM_BLD_to_param(build);
  EVP_PKEY_CTX* context = EVP_PKEY_CTX_new_from_name(nullptr, "SM2", nullptr);
  EVP_PKEY* key = nullptr;
  EXPECT_EQ(EVP_PKEY_fromdata_init(context), 1);
  EXPECT_EQ(EVP_PKEY_fromdata(context, &key, private_key ? EVP_PKEY_KEYPAIR : EVP_PKEY_PUBLIC_KEY,
                              params),
            1);
  std::string pem = key == nullptr ? std::string() : PemOf(key, private_key);
  EVP_PKEY_free(key);
  EVP_PKEY_CTX_free(context);
  OSSL_PARAM_free(params);
  OSSL_PARAM_BLD_free(build);
  BN_free(scalar);
  return pem;
}

// (r, s) as the DER SEQUENCE OpenSSL signs and verifies.
std::string DerSignature(const char* r_hex, const char* s_hex) {
  BIGNUM* r = nullptr;
  BIGNUM* s = nullptr;
  EXPECT_GT(BN_hex2bn(&r, r_hex), 0);
  EXPECT_GT(BN_hex2bn(&s, s_hex), 0);
  ECDSA_SIG* signature = ECDSA_SIG_new();
  EXPECT_EQ(ECDSA_SIG_set0(signature, r, s), 1);
  unsigned char* der = nullptr;
  const int length = i2d_ECDSA_SIG(signature, &der);
  std::string encoded(reinterpret_cast<const char*>(der), static_cast<size_t>(length));
  OPENSSL_free(der);
  ECDSA_SIG_free(signature);
  return encoded;
}

TEST(Sm2, VerifiesTheGmT0003Example) {
  Result<VerifyingKey> verifying =
      VerifyingKey::FromPem(SignatureAlgorithm::kSm2Sm3, Sm2ExamplePem(false));
  ASSERT_TRUE(verifying.ok()) << verifying.status().ToString();
  const std::string signature = DerSignature(kSm2R, kSm2S);
  EXPECT_TRUE(verifying->Verify(kSm2Message, signature));
  EXPECT_FALSE(verifying->Verify("message digesT", signature));
  // s off by one in its last digit.
  EXPECT_FALSE(verifying->Verify(
      kSm2Message,
      DerSignature(kSm2R, "b1b6aa29df212fd8763182bc0d421ca1bb9038fd1f7f42d4840b69c485bbc1ab")));
}

TEST(Sm2, TheDistinguishingIdIsSetForSigningAndVerifying) {
  // OpenSSL's default is an empty ID: a signature made that way must not verify here, and ours
  // must not verify that way.
  const std::string private_pem = Sm2ExamplePem(true);
  BIO* bio = BIO_new_mem_buf(private_pem.data(), static_cast<int>(private_pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  ASSERT_NE(key, nullptr);
  const std::string message = "attestation";
  EVP_MD_CTX* context = EVP_MD_CTX_new();
  ASSERT_EQ(EVP_DigestSignInit_ex(context, nullptr, "SM3", nullptr, nullptr, key, nullptr), 1);
  std::string empty_id_signature(80, '\0');
  size_t length = empty_id_signature.size();
  ASSERT_EQ(EVP_DigestSign(context, reinterpret_cast<unsigned char*>(empty_id_signature.data()),
                           &length, Bytes(message), message.size()),
            1);
  empty_id_signature.resize(length);
  EVP_MD_CTX_free(context);

  Result<SigningKey> signing = SigningKey::FromPem(SignatureAlgorithm::kSm2Sm3, private_pem);
  ASSERT_TRUE(signing.ok()) << signing.status().ToString();
  EXPECT_FALSE(signing->Public().Verify(message, empty_id_signature));
  Result<std::string> ours = signing->Sign(message);
  ASSERT_TRUE(ours.ok());
  EXPECT_TRUE(signing->Public().Verify(message, *ours));

  context = EVP_MD_CTX_new();
  ASSERT_EQ(EVP_DigestVerifyInit_ex(context, nullptr, "SM3", nullptr, nullptr, key, nullptr), 1);
  EXPECT_NE(EVP_DigestVerify(context, Bytes(*ours), ours->size(), Bytes(message), message.size()),
            1);
  EVP_MD_CTX_free(context);
  EVP_PKEY_free(key);
}

TEST(Sm2, SigningWithTheExampleKeyVerifiesUnderTheExamplePublicKey) {
  Result<SigningKey> signing =
      SigningKey::FromPem(SignatureAlgorithm::kSm2Sm3, Sm2ExamplePem(true));
  ASSERT_TRUE(signing.ok());
  EXPECT_EQ(signing->Public().PublicPem(), Sm2ExamplePem(false));
  Result<VerifyingKey> example =
      VerifyingKey::FromPem(SignatureAlgorithm::kSm2Sm3, Sm2ExamplePem(false));
  ASSERT_TRUE(example.ok());
  Result<std::string> signature = signing->Sign(kSm2Message);
  ASSERT_TRUE(signature.ok());
  EXPECT_TRUE(example->Verify(kSm2Message, *signature));
  // SM2 signing is randomised: two signatures differ, both verify.
  Result<std::string> again = signing->Sign(kSm2Message);
  ASSERT_TRUE(again.ok());
  EXPECT_NE(*signature, *again);
  EXPECT_TRUE(example->Verify(kSm2Message, *again));
}

// --- The openssl command line, both ways ------------------------------------------------------

class OpenSslCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("openssl version >/dev/null 2>&1") != 0) {
      GTEST_SKIP() << "the openssl command line is not installed (tools/install_deps.sh)";
    }
    std::string pattern = (std::filesystem::temp_directory_path() / "rampart-sm2-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  void Write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
  }
  std::string Read(const std::string& name) {
    std::ifstream in(dir_ / name, std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    return bytes.str();
  }
  // Runs `arguments` after "openssl pkeyutl" in the temporary directory; its exit status.
  int Pkeyutl(const std::string& arguments) {
    const std::string command =
        "cd '" + dir_.string() + "' && openssl pkeyutl " + arguments + " >/dev/null 2>&1";
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::filesystem::path dir_;
};

TEST_F(OpenSslCli, Sm2SignaturesCrossVerifyBothWays) {
  Result<SigningKey> signing = SigningKey::Generate(SignatureAlgorithm::kSm2Sm3);
  ASSERT_TRUE(signing.ok());
  const std::string message = "checkpoint 42: root hash and time";
  Write("key.pem", signing->PrivatePem());
  Write("public.pem", signing->Public().PublicPem());
  Write("message", message);
  const std::string sm2_options = "-rawin -digest sm3 -pkeyopt distid:1234567812345678";

  // Theirs, verified by ours.
  ASSERT_EQ(Pkeyutl("-sign -inkey key.pem " + sm2_options + " -in message -out theirs"), 0);
  EXPECT_TRUE(signing->Public().Verify(message, Read("theirs")));
  EXPECT_FALSE(signing->Public().Verify(message + ".", Read("theirs")));

  // Ours, verified by theirs; and not with the wrong ID, or a changed message.
  Result<std::string> ours = signing->Sign(message);
  ASSERT_TRUE(ours.ok());
  Write("ours", *ours);
  EXPECT_EQ(
      Pkeyutl("-verify -pubin -inkey public.pem " + sm2_options + " -in message -sigfile ours"), 0);
  EXPECT_NE(Pkeyutl("-verify -pubin -inkey public.pem -rawin -digest sm3 "
                    "-pkeyopt distid:1234567812345679 -in message -sigfile ours"),
            0);
  Write("message", message + ".");
  EXPECT_NE(
      Pkeyutl("-verify -pubin -inkey public.pem " + sm2_options + " -in message -sigfile ours"), 0);
}

TEST_F(OpenSslCli, Ed25519SignaturesCrossVerifyBothWays) {
  Result<SigningKey> signing = SigningKey::Generate(SignatureAlgorithm::kEd25519);
  ASSERT_TRUE(signing.ok());
  const std::string message = "checkpoint 7";
  Write("key.pem", signing->PrivatePem());
  Write("public.pem", signing->Public().PublicPem());
  Write("message", message);
  ASSERT_EQ(Pkeyutl("-sign -inkey key.pem -rawin -in message -out theirs"), 0);
  EXPECT_TRUE(signing->Public().Verify(message, Read("theirs")));
  Result<std::string> ours = signing->Sign(message);
  ASSERT_TRUE(ours.ok());
  // Ed25519 is deterministic: the same key and message give the same signature.
  EXPECT_EQ(*ours, Read("theirs"));
  Write("ours", *ours);
  EXPECT_EQ(Pkeyutl("-verify -pubin -inkey public.pem -rawin -in message -sigfile ours"), 0);
}

// --- Keys -------------------------------------------------------------------------------------

TEST(SigningKey, GeneratedKeysRoundTripThroughPem) {
  for (SignatureAlgorithm algorithm : {SignatureAlgorithm::kSm2Sm3, SignatureAlgorithm::kEd25519}) {
    Result<SigningKey> key = SigningKey::Generate(algorithm);
    ASSERT_TRUE(key.ok());
    EXPECT_EQ(key->algorithm(), algorithm);
    Result<SigningKey> reloaded = SigningKey::FromPem(algorithm, key->PrivatePem());
    ASSERT_TRUE(reloaded.ok()) << reloaded.status().ToString();
    Result<std::string> signature = reloaded->Sign("payload");
    ASSERT_TRUE(signature.ok());
    EXPECT_TRUE(key->Public().Verify("payload", *signature));
    Result<VerifyingKey> public_key = VerifyingKey::FromPem(algorithm, key->Public().PublicPem());
    ASSERT_TRUE(public_key.ok());
    EXPECT_TRUE(public_key->Verify("payload", *signature));
    EXPECT_EQ(public_key->algorithm(), algorithm);
    // The fingerprint: SHA-256 of the DER public key, stable across PEM round trips.
    EXPECT_EQ(public_key->Fingerprint(), key->Public().Fingerprint());
    EXPECT_EQ(public_key->Fingerprint().size(), 64u);
    Result<SigningKey> other = SigningKey::Generate(algorithm);
    ASSERT_TRUE(other.ok());
    EXPECT_NE(other->Public().Fingerprint(), key->Public().Fingerprint());
    EXPECT_FALSE(other->Public().Verify("payload", *signature));
  }
}

TEST(SigningKey, FingerprintIsTheSha256OfTheDerPublicKey) {
  Result<VerifyingKey> key =
      VerifyingKey::FromPem(SignatureAlgorithm::kSm2Sm3, Sm2ExamplePem(false));
  ASSERT_TRUE(key.ok());
  // The DER is the PEM's base64 body.
  std::string pem = key->PublicPem();
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  EVP_PKEY* parsed = PEM_read_bio_PUBKEY(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  unsigned char* der = nullptr;
  const int length = i2d_PUBKEY(parsed, &der);
  EXPECT_EQ(key->Fingerprint(),
            ToHex(Hash(DigestAlgorithm::kSha256,
                       std::string_view(reinterpret_cast<const char*>(der), length))));
  OPENSSL_free(der);
  EVP_PKEY_free(parsed);
}

TEST(SigningKey, MalformedAndMismatchedPemIsInvalidArgument) {
  Result<SigningKey> sm2 = SigningKey::Generate(SignatureAlgorithm::kSm2Sm3);
  Result<SigningKey> ed25519 = SigningKey::Generate(SignatureAlgorithm::kEd25519);
  ASSERT_TRUE(sm2.ok() && ed25519.ok());
  EVP_PKEY* p256 = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  ASSERT_NE(p256, nullptr);
  const std::string p256_private = PemOf(p256, true);
  const std::string p256_public = PemOf(p256, false);
  EVP_PKEY_free(p256);
  const std::string sm2_private = sm2->PrivatePem();

  struct Case {
    SignatureAlgorithm algorithm;
    std::string pem;
    const char* what;
  };
  const Case private_cases[] = {
      {SignatureAlgorithm::kEd25519, sm2_private, "SM2 key as Ed25519"},
      {SignatureAlgorithm::kSm2Sm3, ed25519->PrivatePem(), "Ed25519 key as SM2"},
      {SignatureAlgorithm::kSm2Sm3, p256_private, "P-256 key as SM2"},
      {SignatureAlgorithm::kSm2Sm3, sm2->Public().PublicPem(), "a public key"},
      {SignatureAlgorithm::kSm2Sm3, "", "empty"},
      {SignatureAlgorithm::kSm2Sm3, "not a pem", "garbage"},
      {SignatureAlgorithm::kSm2Sm3, sm2_private.substr(0, sm2_private.size() / 2), "truncated"},
      {SignatureAlgorithm::kSm2Sm3,
       "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "bad DER"},
  };
  for (const Case& c : private_cases) {
    Result<SigningKey> key = SigningKey::FromPem(c.algorithm, c.pem);
    ASSERT_FALSE(key.ok()) << c.what;
    EXPECT_EQ(key.status().code(), StatusCode::kInvalidArgument) << c.what;
  }
  const Case public_cases[] = {
      {SignatureAlgorithm::kEd25519, sm2->Public().PublicPem(), "SM2 key as Ed25519"},
      {SignatureAlgorithm::kSm2Sm3, p256_public, "P-256 key as SM2"},
      {SignatureAlgorithm::kSm2Sm3, sm2_private, "a private key"},
      {SignatureAlgorithm::kSm2Sm3, "", "empty"},
      {SignatureAlgorithm::kSm2Sm3,
       "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoEcz1UBgi0DQgAEAAAA\n-----END PUBLIC "
       "KEY-----\n",
       "point not on the curve"},
  };
  for (const Case& c : public_cases) {
    Result<VerifyingKey> key = VerifyingKey::FromPem(c.algorithm, c.pem);
    ASSERT_FALSE(key.ok()) << c.what;
    EXPECT_EQ(key.status().code(), StatusCode::kInvalidArgument) << c.what;
  }
}

TEST(VerifyingKey, MalformedSignaturesAreFalseNotCrashes) {
  for (SignatureAlgorithm algorithm : {SignatureAlgorithm::kSm2Sm3, SignatureAlgorithm::kEd25519}) {
    Result<SigningKey> key = SigningKey::Generate(algorithm);
    ASSERT_TRUE(key.ok());
    const VerifyingKey verifying = key->Public();
    Result<std::string> signature = key->Sign("m");
    ASSERT_TRUE(signature.ok());
    for (const std::string& bad :
         {std::string(), std::string(1, '\x30'), signature->substr(0, signature->size() - 1),
          *signature + '\0', std::string(64, '\0'), std::string(72, '\xff'), RandomBytes(70),
          std::string("\x30\x06\x02\x01\x00\x02\x01\x00", 8)}) {
      EXPECT_FALSE(verifying.Verify("m", bad)) << SignatureName(algorithm);
    }
    EXPECT_TRUE(verifying.Verify("m", *signature));
  }
  EXPECT_FALSE(VerifyingKey().Verify("m", "s"));
}

TEST(Signature, NamesParseAndPrint) {
  EXPECT_EQ(*ParseSignature("sm2-sm3"), SignatureAlgorithm::kSm2Sm3);
  EXPECT_EQ(*ParseSignature("ed25519"), SignatureAlgorithm::kEd25519);
  EXPECT_EQ(SignatureName(SignatureAlgorithm::kSm2Sm3), "sm2-sm3");
  EXPECT_EQ(ParseSignature("rsa").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rampart::crypto
