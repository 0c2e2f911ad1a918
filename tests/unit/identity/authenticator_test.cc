#include "identity/authenticator.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "testing/jwt_signer.h"
#include "testing/memory_store.h"

namespace rampart::identity {
namespace {

using ::rampart::testing::JwksJson;
using ::rampart::testing::MemoryStore;
using ::rampart::testing::TestSigningKey;

constexpr int64_t kNow = 1'800'000'000;

const TestSigningKey& SigningKey() {
  static const TestSigningKey key = TestSigningKey::Ec("ec-1");
  return key;
}

std::string Token(std::string_view subject) {
  return SigningKey().Token(
      fmt::format(R"({{"iss":"https://idp","sub":"{}","tid":"acme","exp":{},"roles":"jwt-role",)"
                  R"("dept":"from-token"}})",
                  subject, kNow + 60));
}

Peer Loopback() { return Peer{.address = "127.0.0.1"}; }

Peer WithCertificate(std::string address, std::string common_name) {
  Peer peer{.address = std::move(address), .has_certificate = true};
  peer.certificate.common_name = std::move(common_name);
  peer.certificate.subject = "CN=" + peer.certificate.common_name;
  return peer;
}

class AuthenticatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(store_.CreateTenant({.name = "acme", .attributes = {{"region", "eu"}}}).ok());
    store::Principal alice{.tenant = "acme", .name = "alice", .roles = {"stored-role"}};
    alice.attributes = {{"dept", "from-store"}, {"clearance", "SECRET"}};
    ASSERT_TRUE(store_.PutPrincipal(alice).ok());
    ASSERT_TRUE(store_.PutPrincipal({.tenant = "acme", .name = "mallory", .disabled = true}).ok());
    NewApiKey key = GenerateApiKey("acme", "alice", "ci", {"key-role"}, kNow);
    ASSERT_TRUE(store_.CreateApiKey(key.record).ok());
    key_ = key.key;
    Result<std::unique_ptr<ApiKeyTable>> table = ApiKeyTable::Open(store_);
    ASSERT_TRUE(table.ok()) << table.status().ToString();
    table_ = std::move(*table);

    jwks_ = std::filesystem::temp_directory_path() /
            ("rampart_authenticator_test_" + std::to_string(::getpid()) + ".json");
    std::ofstream(jwks_) << JwksJson({&SigningKey()});
  }
  void TearDown() override { std::filesystem::remove(jwks_); }

  AuthenticatorOptions Options() {
    AuthenticatorOptions options;
    options.anonymous.from = {*IpNetwork::Parse("127.0.0.1/32"), *IpNetwork::Parse("::1/128")};
    options.anonymous.roles = {"admin"};
    JwtOptions jwt;
    jwt.jwks_file = jwks_.string();
    jwt.issuer = "https://idp";
    jwt.claims.tenant = "tid";
    jwt.claims.attributes = {{"dept", "dept"}};
    options.jwt = jwt;
    MtlsRule rule;
    rule.subject_cn = "*.svc.acme.internal";
    rule.tenant = "acme";
    rule.principal = "{cn}";
    rule.roles = {"service"};
    options.mtls = {rule};
    return options;
  }

  std::unique_ptr<Authenticator> Make(AuthenticatorOptions options, bool with_keys = true) {
    Result<std::unique_ptr<Authenticator>> authenticator =
        Authenticator::Make(std::move(options), with_keys ? table_.get() : nullptr);
    EXPECT_TRUE(authenticator.ok()) << authenticator.status().ToString();
    return authenticator.ok() ? std::move(*authenticator) : nullptr;
  }

  static std::string Reason(const Result<Identity>& identity) {
    if (identity.ok()) return "ok";
    EXPECT_EQ(identity.status().code(), StatusCode::kUnauthenticated);
    return identity.status().message();
  }

  MemoryStore store_;
  std::unique_ptr<ApiKeyTable> table_;
  std::string key_;
  std::filesystem::path jwks_;
};

TEST_F(AuthenticatorTest, ApiKeysComeAsBearerTokensOrKeyHeaders) {
  const auto authenticator = Make(Options());
  const std::string bearer = "Bearer " + key_;
  const std::string spaced = fmt::format("  bearer   {} ", key_);
  const Peer peer = Loopback();
  for (const Credentials& credentials : {Credentials{.authorization = bearer, .peer = &peer},
                                         Credentials{.authorization = spaced, .peer = &peer},
                                         Credentials{.api_key = key_, .peer = &peer}}) {
    const Result<Identity> identity = authenticator->Authenticate(credentials, kNow);
    ASSERT_TRUE(identity.ok()) << identity.status().ToString();
    EXPECT_EQ(identity->method, Method::kApiKey);
    EXPECT_EQ(identity->principal, "alice");
    EXPECT_EQ(identity->roles, (std::vector<std::string>{"key-role", "stored-role"}));
  }
}

TEST_F(AuthenticatorTest, OfferedButInvalidCredentialsNeverFallBackToAnonymous) {
  const auto authenticator = Make(Options());
  const Peer peer = Loopback();
  std::string wrong = "Bearer " + key_;
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  EXPECT_EQ(Reason(authenticator->Authenticate({.authorization = wrong, .peer = &peer}, kNow)),
            "invalid API key");
  EXPECT_EQ(
      Reason(authenticator->Authenticate({.api_key = "sk-openai-style", .peer = &peer}, kNow)),
      "invalid API key");
  EXPECT_EQ(Reason(authenticator->Authenticate({.authorization = "Bearer not.a.jwt", .peer = &peer},
                                               kNow)),
            "malformed token");
  EXPECT_EQ(Reason(authenticator->Authenticate(
                {.authorization = "Basic YWxpY2U6c2VjcmV0", .peer = &peer}, kNow)),
            "unsupported authorization scheme");
  EXPECT_EQ(Reason(authenticator->Authenticate({.authorization = "Bearer ", .peer = &peer}, kNow)),
            "malformed authorization header");
  const Peer unmapped = WithCertificate("127.0.0.1", "laptop.example.com");
  EXPECT_EQ(Reason(authenticator->Authenticate({.peer = &unmapped}, kNow)),
            "client certificate not mapped to a principal");
}

TEST_F(AuthenticatorTest, AnonymousOnlyFromTheConfiguredNetworks) {
  const auto authenticator = Make(Options());
  for (const char* address : {"127.0.0.1", "::1", "::ffff:127.0.0.1"}) {
    const Peer peer{.address = address};
    const Result<Identity> identity = authenticator->Authenticate({.peer = &peer}, kNow);
    ASSERT_TRUE(identity.ok()) << address;
    EXPECT_EQ(identity->method, Method::kAnonymous);
    EXPECT_EQ(identity->tenant, "default");
    EXPECT_EQ(identity->principal, "anonymous");
    EXPECT_EQ(identity->roles, (std::vector<std::string>{"admin"}));
  }
  const Peer remote{.address = "10.1.2.3"};
  EXPECT_EQ(Reason(authenticator->Authenticate({.peer = &remote}, kNow)), "no credentials");
  EXPECT_EQ(Reason(authenticator->Authenticate({}, kNow)), "no credentials");
  AuthenticatorOptions closed = Options();
  closed.anonymous.from.clear();
  const Peer loopback = Loopback();
  EXPECT_EQ(Reason(Make(closed)->Authenticate({.peer = &loopback}, kNow)), "no credentials");
}

TEST_F(AuthenticatorTest, JwtIdentitiesGainTheStoredPrincipalsRolesAndAttributes) {
  const auto authenticator = Make(Options());
  const std::string bearer = "Bearer " + Token("alice");
  const Result<Identity> alice = authenticator->Authenticate({.authorization = bearer}, kNow);
  ASSERT_TRUE(alice.ok()) << alice.status().ToString();
  EXPECT_EQ(alice->method, Method::kJwt);
  EXPECT_EQ(alice->roles, (std::vector<std::string>{"jwt-role", "stored-role"}));
  // The tenant's attributes, the principal's over them, then the token's claims over both.
  EXPECT_EQ(alice->attributes,
            (store::Attributes{{"clearance", "SECRET"}, {"dept", "from-token"}, {"region", "eu"}}));

  const std::string stranger = "Bearer " + Token("carol");  // not in the store: as the token says
  const Result<Identity> carol = authenticator->Authenticate({.authorization = stranger}, kNow);
  ASSERT_TRUE(carol.ok());
  EXPECT_EQ(carol->roles, (std::vector<std::string>{"jwt-role"}));
  EXPECT_EQ(carol->attributes, (store::Attributes{{"dept", "from-token"}, {"region", "eu"}}));

  const std::string disabled = "Bearer " + Token("mallory");
  EXPECT_EQ(Reason(authenticator->Authenticate({.authorization = disabled}, kNow)),
            "principal disabled");
}

TEST_F(AuthenticatorTest, CertificatesMapToPrincipals) {
  const auto authenticator = Make(Options());
  const Peer peer = WithCertificate("10.0.0.8", "alice.svc.acme.internal");
  const Result<Identity> identity = authenticator->Authenticate({.peer = &peer}, kNow);
  ASSERT_TRUE(identity.ok()) << identity.status().ToString();
  EXPECT_EQ(identity->method, Method::kMtls);
  EXPECT_EQ(identity->tenant, "acme");
  EXPECT_EQ(identity->principal, "alice.svc.acme.internal");
  EXPECT_EQ(identity->roles, (std::vector<std::string>{"service"}));

  // A key on a mutual-TLS connection wins over the certificate.
  const Result<Identity> keyed =
      authenticator->Authenticate({.api_key = key_, .peer = &peer}, kNow);
  ASSERT_TRUE(keyed.ok());
  EXPECT_EQ(keyed->method, Method::kApiKey);

  // Without mTLS rules a certificate is no credential: anonymous rules apply.
  AuthenticatorOptions no_mtls = Options();
  no_mtls.mtls.clear();
  const Peer local = WithCertificate("127.0.0.1", "whatever");
  EXPECT_EQ(Make(no_mtls)->Authenticate({.peer = &local}, kNow)->method, Method::kAnonymous);
}

TEST_F(AuthenticatorTest, WithoutKeysOrJwtBearerTokensAreInvalidKeys) {
  AuthenticatorOptions options = Options();
  options.jwt.reset();
  const auto authenticator = Make(options, /*with_keys=*/false);
  const std::string bearer = "Bearer " + key_;
  EXPECT_EQ(Reason(authenticator->Authenticate({.authorization = bearer}, kNow)),
            "invalid API key");
  const std::string jwt = "Bearer " + Token("alice");
  EXPECT_EQ(Reason(authenticator->Authenticate({.authorization = jwt}, kNow)), "invalid API key");
}

TEST_F(AuthenticatorTest, MakeRefusesUnusableOptions) {
  AuthenticatorOptions options = Options();
  options.anonymous.principal.clear();
  EXPECT_EQ(Authenticator::Make(options, nullptr).status().code(), StatusCode::kInvalidArgument);
  options = Options();
  options.jwt->jwks_file = "/nonexistent/jwks.json";
  EXPECT_EQ(Authenticator::Make(options, nullptr).status().code(), StatusCode::kInvalidArgument);
  options = Options();
  options.mtls.front().tenant.clear();
  EXPECT_EQ(Authenticator::Make(options, nullptr).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rampart::identity
