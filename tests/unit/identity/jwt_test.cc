#include "identity/jwt.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "identity/jwks.h"
#include "testing/eventually.h"
#include "testing/jwt_signer.h"

namespace rampart::identity {
namespace {

using ::rampart::testing::Base64Url;
using ::rampart::testing::Eventually;
using ::rampart::testing::JwksJson;
using ::rampart::testing::TestSigningKey;

constexpr int64_t kNow = 1'800'000'000;

// Keys are made once per test binary: RSA generation takes a while.
const TestSigningKey& RsaKey() {
  static const TestSigningKey key = TestSigningKey::Rsa("rsa-1");
  return key;
}
const TestSigningKey& EcKey() {
  static const TestSigningKey key = TestSigningKey::Ec("ec-1");
  return key;
}
const TestSigningKey& HmacKey() {
  static const TestSigningKey key =
      TestSigningKey::Hmac("hs-1", "0123456789abcdef0123456789abcdef-hmac");
  return key;
}

std::string Claims(std::string_view extra = "", int64_t exp = kNow + 300) {
  return fmt::format(
      R"({{"iss":"https://idp.example.com","aud":["other","rampart"],"sub":"alice",)"
      R"("tid":"acme","exp":{},"iat":{},"roles":["analyst","viewer"],"dept":"research",)"
      R"("groups":["gpu-team","ml"],"level":3{}}})",
      exp, kNow - 10, extra);
}

class JwtVerifierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() /
                 ("rampart_jwt_test_" + std::to_string(::getpid()) + "_" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(directory_);
    WriteJwks(JwksJson({&RsaKey(), &EcKey(), &HmacKey()}));
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  // Replaces the file the way deployment tools do: write aside, rename over.
  void WriteJwks(const std::string& json) {
    const auto temporary = directory_ / "jwks.json.tmp";
    std::ofstream(temporary) << json;
    std::filesystem::rename(temporary, directory_ / "jwks.json");
  }

  JwtOptions Options() {
    JwtOptions options;
    options.jwks_file = (directory_ / "jwks.json").string();
    options.issuer = "https://idp.example.com";
    options.audiences = {"rampart"};
    options.algorithms = {"RS256", "ES256", "HS256"};
    options.claims.tenant = "tid";
    options.claims.attributes = {{"department", "dept"}, {"groups", "groups"}, {"level", "level"}};
    options.jwks_check_period = std::chrono::milliseconds(0);
    return options;
  }

  std::unique_ptr<JwtVerifier> Open(JwtOptions options) {
    Result<std::unique_ptr<JwtVerifier>> verifier = JwtVerifier::Open(std::move(options));
    EXPECT_TRUE(verifier.ok()) << verifier.status().ToString();
    return verifier.ok() ? std::move(*verifier) : nullptr;
  }

  std::string Reason(const JwtVerifier& verifier, const std::string& token, int64_t now = kNow) {
    const Result<Identity> identity = verifier.Verify(token, now);
    if (identity.ok()) return "ok";
    EXPECT_EQ(identity.status().code(), StatusCode::kUnauthenticated);
    return identity.status().message();
  }

  std::filesystem::path directory_;
};

TEST_F(JwtVerifierTest, EachAlgorithmVerifiesAndMapsClaims) {
  const auto verifier = Open(Options());
  for (const TestSigningKey* key : {&RsaKey(), &EcKey(), &HmacKey()}) {
    const Result<Identity> identity = verifier->Verify(key->Token(Claims()), kNow);
    ASSERT_TRUE(identity.ok()) << key->algorithm() << ": " << identity.status().ToString();
    EXPECT_EQ(identity->method, Method::kJwt);
    EXPECT_EQ(identity->tenant, "acme");
    EXPECT_EQ(identity->principal, "alice");
    EXPECT_EQ(identity->roles, (std::vector<std::string>{"analyst", "viewer"}));
    EXPECT_EQ(
        identity->attributes,
        (store::Attributes{{"department", "research"}, {"groups", "gpu-team,ml"}, {"level", "3"}}));
    EXPECT_EQ(identity->expires_unix, kNow + 300);
    EXPECT_TRUE(identity->key_id.empty());
  }
}

TEST_F(JwtVerifierTest, TimesAreCheckedWithTheClockSkew) {
  const auto verifier = Open(Options());  // 60 s of skew
  const std::string token = RsaKey().Token(Claims("", kNow));
  EXPECT_EQ(Reason(*verifier, token, kNow + 59), "ok");
  EXPECT_EQ(Reason(*verifier, token, kNow + 60), "token expired");
  const std::string later = EcKey().Token(Claims(fmt::format(R"(,"nbf":{})", kNow + 100)));
  EXPECT_EQ(Reason(*verifier, later, kNow + 39), "token not yet valid");
  EXPECT_EQ(Reason(*verifier, later, kNow + 40), "ok");
  const std::string issued_later = EcKey().Token(
      R"({"iss":"https://idp.example.com","aud":"rampart","sub":"a","tid":"t","exp":1800000300,)"
      R"("iat":1800000100})");
  EXPECT_EQ(Reason(*verifier, issued_later, kNow), "token not yet valid");
  const std::string no_expiry =
      EcKey().Token(R"({"iss":"https://idp.example.com","aud":"rampart","sub":"a","tid":"t"})");
  EXPECT_EQ(Reason(*verifier, no_expiry), "token claims incomplete");
}

TEST_F(JwtVerifierTest, IssuerAndAudienceMustBeAccepted) {
  const auto verifier = Open(Options());
  const auto token = [](std::string_view iss_and_aud) {
    return RsaKey().Token(
        fmt::format(R"({{{}"sub":"a","tid":"t","exp":{}}})", iss_and_aud, kNow + 60));
  };
  EXPECT_EQ(Reason(*verifier, token(R"("iss":"https://idp.example.com","aud":"rampart",)")), "ok");
  EXPECT_EQ(Reason(*verifier, token(R"("iss":"https://evil.example.com","aud":"rampart",)")),
            "token issuer not accepted");
  EXPECT_EQ(Reason(*verifier, token(R"("aud":"rampart",)")), "token issuer not accepted");
  EXPECT_EQ(Reason(*verifier, token(R"("iss":"https://idp.example.com","aud":"other",)")),
            "token audience not accepted");
  EXPECT_EQ(Reason(*verifier, token(R"("iss":"https://idp.example.com",)")),
            "token audience not accepted");
  JwtOptions any_audience = Options();
  any_audience.audiences.clear();
  const auto lenient = Open(any_audience);
  EXPECT_EQ(Reason(*lenient, token(R"("iss":"https://idp.example.com",)")), "ok");
}

TEST_F(JwtVerifierTest, ForgedAndConfusedSignaturesAreRefused) {
  const auto verifier = Open(Options());
  // A payload swapped under a valid signature.
  const std::string token = RsaKey().Token(Claims());
  const std::string admin = Base64Url(Claims(R"(,"x":1)"));  // any other payload
  const size_t first = token.find('.');
  const size_t second = token.find('.', first + 1);
  const std::string swapped = token.substr(0, first + 1) + admin + token.substr(second);
  EXPECT_EQ(Reason(*verifier, swapped), "token signature invalid");

  // Signed by a key that is not in the JWKS, with a kid that is.
  const TestSigningKey stranger = TestSigningKey::Ec("ec-1");
  EXPECT_EQ(Reason(*verifier, stranger.Token(Claims())), "token signature invalid");

  // alg "none", in any spelling, with or without a signature.
  for (const char* none : {"none", "None", "NONE"}) {
    const std::string header = fmt::format(R"({{"alg":"{}","typ":"JWT"}})", none);
    EXPECT_EQ(Reason(*verifier, Base64Url(header) + "." + Base64Url(Claims()) + "."),
              "unsupported token algorithm");
  }

  // HS256 "signed" with the RSA key's public modulus, naming the RSA key: the classic
  // confusion. The RSA key's type does not serve HS256, so it is refused before any HMAC.
  const std::string confused_header = R"({"alg":"HS256","kid":"rsa-1"})";
  const TestSigningKey with_public_bytes = TestSigningKey::Hmac("rsa-1", RsaKey().JwkJson());
  EXPECT_EQ(Reason(*verifier, with_public_bytes.Sign(confused_header, Claims())),
            "unsupported token algorithm");

  // An algorithm the deployment does not accept.
  JwtOptions rsa_only = Options();
  rsa_only.algorithms = {"RS256"};
  const auto strict = Open(rsa_only);
  EXPECT_EQ(Reason(*strict, HmacKey().Token(Claims())), "unsupported token algorithm");
  EXPECT_EQ(Reason(*strict, RsaKey().Sign(R"({"alg":"RS512","kid":"rsa-1"})", Claims())),
            "unsupported token algorithm");

  // A kid nobody published; no kid at all tries the keys of the algorithm.
  EXPECT_EQ(Reason(*verifier, RsaKey().Sign(R"({"alg":"RS256","kid":"rsa-9"})", Claims())),
            "unknown signing key");
  EXPECT_EQ(Reason(*verifier, RsaKey().Sign(R"({"alg":"RS256"})", Claims())), "ok");

  // Without a kid the one key of the algorithm is used; with two, the token names neither.
  const TestSigningKey second_ec = TestSigningKey::Ec("ec-2");
  WriteJwks(JwksJson({&EcKey(), &second_ec}));
  EXPECT_TRUE(verifier->CheckNow().ok());
  EXPECT_EQ(Reason(*verifier, second_ec.Token(Claims())), "ok");
  EXPECT_EQ(Reason(*verifier, second_ec.Sign(R"({"alg":"ES256"})", Claims())),
            "unknown signing key");
}

TEST_F(JwtVerifierTest, MalformedTokensAreRefusedWithoutDetail) {
  const auto verifier = Open(Options());
  const std::string good = EcKey().Token(Claims());
  const auto signed_header = [&](std::string_view header) {
    return EcKey().Sign(header, Claims());
  };
  for (const std::string& token : {
           std::string(""),
           std::string("abc"),
           good.substr(0, good.rfind('.')),      // two parts
           good + ".x",                          // four parts
           "!!!" + good.substr(good.find('.')),  // not base64url
           Base64Url("not json") + good.substr(good.find('.')),
           Base64Url("[1,2]") + good.substr(good.find('.')),  // not an object
           signed_header(R"({"alg":"ES256","alg":"none"})"),  // repeated member
           signed_header(R"({"alg":"ES256","crit":["exp"]})"),
           signed_header(R"({"typ":"JWT"})"),  // no alg
           EcKey().Sign(R"({"alg":"ES256"})", R"({"sub":"a","sub":"b"})"),
           EcKey().Sign(R"({"alg":"ES256"})", "[]"),
           std::string(9000, 'a'),
       }) {
    EXPECT_EQ(Reason(*verifier, token), "malformed token") << token;
  }
}

TEST_F(JwtVerifierTest, ClaimMappingFallsBackAndRefusesIncompleteIdentities) {
  JwtOptions options = Options();
  options.claims.default_tenant = "default";
  const auto verifier = Open(options);
  const auto token = [](std::string_view claims) {
    return RsaKey().Token(fmt::format(
        R"({{"iss":"https://idp.example.com","aud":"rampart","exp":{}{}}})", kNow + 60, claims));
  };
  const Result<Identity> defaulted = verifier->Verify(token(R"(,"sub":"bob")"), kNow);
  ASSERT_TRUE(defaulted.ok()) << defaulted.status().ToString();
  EXPECT_EQ(defaulted->tenant, "default");
  EXPECT_TRUE(defaulted->roles.empty());
  EXPECT_TRUE(defaulted->attributes.empty());

  const Result<Identity> spaced =
      verifier->Verify(token(R"(,"sub":"bob","tid":"acme","roles":"b a,c  a")"), kNow);
  ASSERT_TRUE(spaced.ok());
  EXPECT_EQ(spaced->roles, (std::vector<std::string>{"a", "b", "c"}));

  EXPECT_EQ(Reason(*verifier, token(R"(,"tid":"acme")")), "token claims incomplete");
  EXPECT_EQ(Reason(*verifier, token(R"(,"sub":"")")), "token claims incomplete");
  EXPECT_EQ(Reason(*verifier, token(R"(,"sub":42)")), "token claims incomplete");
  EXPECT_EQ(Reason(*verifier, token(R"(,"sub":"bob","tid":7)")), "token claims incomplete");
  EXPECT_EQ(Reason(*verifier, token(R"(,"sub":"bob","roles":{"a":1})")), "token claims incomplete");

  JwtOptions no_default = Options();
  const auto strict = Open(no_default);
  EXPECT_EQ(Reason(*strict, token(R"(,"sub":"bob")")), "token claims incomplete");
}

TEST_F(JwtVerifierTest, AChangedJwksFileIsReloadedAndABrokenOneIgnored) {
  const auto verifier = Open(Options());
  const TestSigningKey rotated = TestSigningKey::Ec("ec-2");
  EXPECT_EQ(Reason(*verifier, rotated.Token(Claims())), "unknown signing key");
  EXPECT_TRUE(verifier->CheckNow().ok());  // unchanged

  WriteJwks(JwksJson({&rotated}));
  EXPECT_TRUE(verifier->CheckNow().ok());
  EXPECT_EQ(Reason(*verifier, rotated.Token(Claims())), "ok");
  EXPECT_EQ(Reason(*verifier, EcKey().Token(Claims())), "unknown signing key");

  WriteJwks("{\"keys\": [");  // a half-written file: the keys in use stay
  const Status broken = verifier->CheckNow();
  EXPECT_EQ(broken.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(broken.message().find("keeping the previous keys"), std::string::npos);
  EXPECT_EQ(Reason(*verifier, rotated.Token(Claims())), "ok");
  std::filesystem::remove(directory_ / "jwks.json");
  EXPECT_FALSE(verifier->CheckNow().ok());
  EXPECT_EQ(Reason(*verifier, rotated.Token(Claims())), "ok");
}

// Verify reads only the keys in force: a request thread never stats or reads the file (without
// the watching thread, a rotation takes effect at CheckNow and not before).
TEST_F(JwtVerifierTest, VerifyNeverTouchesTheFile) {
  const auto verifier = Open(Options());  // jwks_check_period 0: no thread
  const TestSigningKey rotated = TestSigningKey::Ec("ec-2");
  WriteJwks(JwksJson({&rotated}));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Reason(*verifier, rotated.Token(Claims())), "unknown signing key");
  }
  std::filesystem::remove(directory_ / "jwks.json");
  EXPECT_EQ(Reason(*verifier, EcKey().Token(Claims())), "ok");
}

TEST_F(JwtVerifierTest, TheThreadReloadsAChangedFile) {
  JwtOptions options = Options();
  options.jwks_check_period = std::chrono::hours(1);
  const auto idle = Open(options);  // its thread waits an hour, and stops at once when closed
  const TestSigningKey rotated = TestSigningKey::Ec("ec-2");
  WriteJwks(JwksJson({&rotated}));
  EXPECT_EQ(Reason(*idle, rotated.Token(Claims())), "unknown signing key");

  options.jwks_check_period = std::chrono::milliseconds(20);
  const auto polling = Open(options);
  WriteJwks(JwksJson({&EcKey()}));
  EXPECT_TRUE(Eventually([&] { return Reason(*polling, EcKey().Token(Claims())) == "ok"; }));
  WriteJwks("not json");  // the thread keeps the keys in force
  EXPECT_EQ(Reason(*polling, EcKey().Token(Claims())), "ok");
}

TEST_F(JwtVerifierTest, OpenRefusesUnusableOptionsAndFiles) {
  JwtOptions options = Options();
  options.issuer.clear();
  EXPECT_EQ(JwtVerifier::Open(options).status().code(), StatusCode::kInvalidArgument);
  options = Options();
  options.algorithms = {"RS256", "none"};
  EXPECT_EQ(JwtVerifier::Open(options).status().code(), StatusCode::kInvalidArgument);
  options = Options();
  options.jwks_file = (directory_ / "missing.json").string();
  const Status missing = JwtVerifier::Open(options).status();
  EXPECT_EQ(missing.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(missing.message().rfind(options.jwks_file + ": ", 0), 0u) << missing.message();
  WriteJwks("not json");
  EXPECT_EQ(JwtVerifier::Open(Options()).status().code(), StatusCode::kInvalidArgument);
}

TEST(JwksTest, RefusesWeakOrBrokenKeysAndSkipsForeignOnes) {
  const auto error = [](const std::string& json) {
    const Result<JwkSet> set = ParseJwks(json);
    return set.ok() ? std::string("ok") : set.status().message();
  };
  const TestSigningKey short_secret = TestSigningKey::Hmac("h", "too short");
  EXPECT_NE(error(JwksJson({&short_secret})).find("HMAC secret of 9 bytes"), std::string::npos);

  const TestSigningKey ec = TestSigningKey::Ec("e");
  std::string off_curve = ec.JwkJson();
  const size_t y = off_curve.find("\"y\":\"") + 5;
  off_curve[y + 3] = off_curve[y + 3] == 'A' ? 'B' : 'A';
  EXPECT_NE(error(R"({"keys":[)" + off_curve + "]}"), "ok");

  EXPECT_NE(error(R"({"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]})").find("RSA key of"),
            std::string::npos);
  const TestSigningKey hmac = TestSigningKey::Hmac("same", std::string(32, 'k'));
  const TestSigningKey hmac2 = TestSigningKey::Hmac("same", std::string(40, 'k'));
  EXPECT_NE(error(JwksJson({&hmac, &hmac2})).find("duplicate kid"), std::string::npos);
  EXPECT_NE(error(R"({"keys":[]})").find("no usable key"), std::string::npos);
  EXPECT_NE(error(R"({"nope":1})"), "ok");

  const Result<JwkSet> mixed = ParseJwks(R"({"keys":[{"kty":"OKP","crv":"Ed25519","x":"abc"},)"
                                         R"({"kty":"RSA","use":"enc","n":"AQAB","e":"AQAB"},)" +
                                         hmac.JwkJson() + "]}");
  ASSERT_TRUE(mixed.ok()) << mixed.status().ToString();
  EXPECT_EQ(mixed->keys.size(), 1u);
  EXPECT_EQ(mixed->skipped, 2u);
  EXPECT_NE(error(R"({"keys":[{"kty":"oct","alg":"RS256","k":")" + Base64Url(std::string(32, 'k')) +
                  R"("}]})")
                .find("does not fit"),
            std::string::npos);
}

}  // namespace
}  // namespace rampart::identity
