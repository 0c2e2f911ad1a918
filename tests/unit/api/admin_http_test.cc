#include "api/admin_http.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "audit/record_codec.h"
#include "crypto/keyring.h"
#include "json/reader.h"
#include "net/http_connection.h"
#include "store/keyring_storage.h"
#include "testing/access_fixture.h"
#include "testing/recording_connection.h"

namespace rampart::api {
namespace {

using testing::RecordingConnection;

class AdminHttpTest : public ::testing::Test {
 protected:
  explicit AdminHttpTest(std::string_view policy = testing::kAccessPolicy)
      : fixture_(policy), admin_(fixture_.store(), &fixture_.keys(), fixture_.control()) {}
  ~AdminHttpTest() override { admin_.Shutdown(); }

  net::HttpResponse Send(std::string method, std::string target, std::string body = "",
                         std::string key = "") {
    return SendTo(admin_, std::move(method), std::move(target), std::move(body), std::move(key));
  }

  // From loopback without credentials (the anonymous admin), or with `key` from elsewhere.
  static net::HttpResponse SendTo(AdminHttp& admin, std::string method, std::string target,
                                  std::string body = "", std::string key = "") {
    std::string address = key.empty() ? "127.0.0.1" : "10.1.1.1";
    return Deliver(admin, std::move(address), std::move(method), std::move(target), std::move(body),
                   std::move(key));
  }
  net::HttpResponse SendFrom(std::string address, std::string method, std::string target,
                             std::string body = "", std::string key = "") {
    return Deliver(admin_, std::move(address), std::move(method), std::move(target),
                   std::move(body), std::move(key));
  }
  static net::HttpResponse Deliver(AdminHttp& admin, std::string address, std::string method,
                                   std::string target, std::string body, std::string key) {
    net::HttpRequest request;
    request.method = std::move(method);
    request.target = std::move(target);
    request.body = std::move(body);
    request.peer = std::make_shared<Peer>(Peer{.address = std::move(address)});
    if (!key.empty()) request.headers.emplace_back("x-api-key", key);
    request.headers.emplace_back("x-request-id", "req-admin-test");
    auto connection = std::make_shared<RecordingConnection>();
    std::future<net::HttpResponse> answer = connection->answer();
    admin.Handle(std::move(request), net::Responder(connection));
    EXPECT_EQ(answer.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    return answer.get();
  }

  static std::string Field(const std::string& body, std::string_view key) {
    json::Parser parser;
    Result<json::Value> root = parser.Parse(body);
    if (!root.ok()) return "<not JSON>";
    auto value = root->Find(key);
    if (!value) return "<absent>";
    Result<std::string_view> text = value->GetString(key);
    return text.ok() ? std::string(*text) : "<not a string>";
  }

  testing::AccessFixture fixture_;
  AdminHttp admin_;
};

TEST_F(AdminHttpTest, OwnsOnlyItsCollections) {
  EXPECT_TRUE(AdminHttp::Owns("/v1/admin/tenants"));
  EXPECT_TRUE(AdminHttp::Owns("/v1/admin/keys/rk_live_x"));
  EXPECT_TRUE(AdminHttp::Owns("/v1/admin/principals/acme/alice"));
  EXPECT_FALSE(AdminHttp::Owns("/v1/admin/reload"));
  EXPECT_FALSE(AdminHttp::Owns("/v1/admin/keysmith"));
}

TEST_F(AdminHttpTest, AuditRecordsAreQueriedWithDigestsOnly) {
  EXPECT_TRUE(AdminHttp::Owns("/v1/admin/audit"));
  std::vector<store::AuditRow> rows;
  for (int64_t sequence = 1; sequence <= 5; ++sequence) {
    audit::AuditRecord record;
    record.sequence = sequence;
    record.time_unix_ns = sequence * 1'000'000'000;
    record.tenant = sequence % 2 == 1 ? "acme" : "globex";
    record.principal = "alice";
    record.trace_id = fmt::format("trace-{}", sequence);
    record.request_id = fmt::format("req-{}", sequence);
    record.action = "model:infer";
    record.request_digest = "sha256:00";
    record.request_sealed = "U0VBTEVE";  // must never be answered
    rows.push_back(store::AuditRow{.sequence = sequence,
                                   .time_unix_ns = record.time_unix_ns,
                                   .tenant = record.tenant,
                                   .principal = record.principal,
                                   .trace_id = record.trace_id,
                                   .request_id = record.request_id,
                                   .action = record.action,
                                   .record = audit::EncodeRecord(record),
                                   .leaf_hash = "x",
                                   .chain_hash = "y"});
  }
  ASSERT_TRUE(fixture_.store().AppendAuditRows(rows).ok());

  net::HttpResponse acme = Send("GET", "/v1/admin/audit?tenant=acme&from=2&to=6");
  ASSERT_EQ(acme.status, 200) << acme.body;
  json::Parser parser;
  Result<json::Value> root = parser.Parse(acme.body);
  ASSERT_TRUE(root.ok()) << acme.body;
  auto records = root->Find("records");
  ASSERT_TRUE(records.has_value());
  std::vector<std::string> ids;
  for (simdjson::dom::element element : records->Array()) {
    const json::Value record(element);
    ids.emplace_back(*record.Find("request_id")->GetString("request_id"));
    EXPECT_EQ(*record.Find("request_sealed")->GetString("request_sealed"), "");
    EXPECT_EQ(*record.Find("request_digest")->GetString("request_digest"), "sha256:00");
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"req-3", "req-5"}));
  EXPECT_EQ(acme.body.find("U0VBTEVE"), std::string::npos) << acme.body;

  // Paging: limit 2 answers where to go on; the last page says 0.
  net::HttpResponse first = Send("GET", "/v1/admin/audit?limit=2");
  EXPECT_NE(first.body.find(R"("next_after":2)"), std::string::npos) << first.body;
  net::HttpResponse last = Send("GET", "/v1/admin/audit?after=4&limit=2");
  EXPECT_NE(last.body.find("req-5"), std::string::npos) << last.body;
  EXPECT_NE(last.body.find(R"("next_after":0)"), std::string::npos) << last.body;
  EXPECT_NE(Send("GET", "/v1/admin/audit?trace_id=trace-4").body.find("req-4"), std::string::npos);

  net::HttpResponse bad = Send("GET", "/v1/admin/audit?limit=0");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("limit"), std::string::npos) << bad.body;
  EXPECT_EQ(Send("GET", "/v1/admin/audit?from=yesterday").status, 400);
  EXPECT_EQ(Send("POST", "/v1/admin/audit").status, 404);
}

TEST_F(AdminHttpTest, TenantsAreCreatedListedAndDeleted) {
  net::HttpResponse created =
      Send("POST", "/v1/admin/tenants", R"({"name":"globex","attributes":{"region":"eu"}})");
  EXPECT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(Send("POST", "/v1/admin/tenants", R"({"name":"globex"})").status, 409);
  net::HttpResponse listed = Send("GET", "/v1/admin/tenants");
  EXPECT_EQ(listed.status, 200);
  EXPECT_NE(listed.body.find(R"("name":"globex","attributes":{"region":"eu"})"), std::string::npos)
      << listed.body;
  EXPECT_EQ(Send("DELETE", "/v1/admin/tenants/globex").status, 200);
  EXPECT_EQ(Send("DELETE", "/v1/admin/tenants/globex").status, 404);
}

TEST_F(AdminHttpTest, BadBodiesAre400NamingTheField) {
  net::HttpResponse missing = Send("POST", "/v1/admin/tenants", R"({"attributes":{}})");
  EXPECT_EQ(missing.status, 400);
  EXPECT_NE(missing.body.find("'name' is required"), std::string::npos) << missing.body;
  net::HttpResponse wrong = Send("PUT", "/v1/admin/principals/acme/bob", R"({"roles":"admin"})");
  EXPECT_EQ(wrong.status, 400);
  EXPECT_NE(wrong.body.find("'roles'"), std::string::npos) << wrong.body;
  EXPECT_EQ(Send("POST", "/v1/admin/keys", "not json").status, 400);
  net::HttpResponse expiry =
      Send("POST", "/v1/admin/keys", R"({"tenant":"acme","name":"x","expires_in":"soon"})");
  EXPECT_EQ(expiry.status, 400);
  EXPECT_NE(expiry.body.find("soon"), std::string::npos) << expiry.body;
  EXPECT_EQ(Send("PATCH", "/v1/admin/tenants").status, 404);
}

// The caller is authenticated before anything else is read: without credentials (or with a bad
// key) every request is 401, never a 400 naming a field nor a 404 for an unknown route; a caller
// who may not write gets 403 for a path-only write whatever it sends.
TEST_F(AdminHttpTest, AuthenticatesBeforeReadingTheRequest) {
  const std::pair<std::string, std::string> requests[] = {
      {"POST /v1/admin/keys", "not json"},
      {"POST /v1/admin/keys", R"({"tenant":"acme","name":"x","expires_in":"soon"})"},
      {"POST /v1/admin/tenants", R"({"attributes":{}})"},
      {"PUT /v1/admin/principals/acme/bob", R"({"roles":"admin"})"},
      {"PATCH /v1/admin/tenants", ""},
      {"GET /v1/admin/keys/too/deep", ""},
      {"DELETE /v1/admin/tenants/acme", ""},
  };
  for (const auto& [line, body] : requests) {
    const size_t space = line.find(' ');
    const std::string method = line.substr(0, space), target = line.substr(space + 1);
    for (const std::string& key : {std::string(), std::string("rk_live_000000000000_bogus")}) {
      net::HttpResponse answer = SendFrom("10.1.1.1", method, target, body, key);
      EXPECT_EQ(answer.status, 401) << line << " key '" << key << "': " << answer.body;
      EXPECT_EQ(answer.body.find("required"), std::string::npos) << answer.body;
    }
  }
  EXPECT_EQ(Send("DELETE", "/v1/admin/tenants/acme", "", fixture_.viewer_key()).status, 403);
  EXPECT_TRUE(fixture_.store().GetTenant("acme").value().has_value());
}

TEST_F(AdminHttpTest, AKeyIsShownOnceWorksAtOnceAndRevokesAtOnce) {
  net::HttpResponse created = Send(
      "POST", "/v1/admin/keys",
      R"({"tenant":"acme","name":"ci","principal":"ci-bot","roles":["viewer"],"expires_in":"30d"})");
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string key = Field(created.body, "key");
  const std::string id = Field(created.body, "id");
  ASSERT_TRUE(identity::LooksLikeApiKey(key)) << created.body;
  EXPECT_EQ(key.substr(0, id.size()), id);
  EXPECT_EQ(created.body.find("salt"), std::string::npos);

  // The table was refreshed: the new key reads the key list (viewers may) at once.
  net::HttpResponse listed = Send("GET", "/v1/admin/keys?tenant=acme", "", key);
  EXPECT_EQ(listed.status, 200) << listed.body;
  EXPECT_NE(listed.body.find(id), std::string::npos);
  EXPECT_EQ(listed.body.find(key), std::string::npos) << "a list never shows a key's secret";
  EXPECT_EQ(listed.body.find("hash"), std::string::npos);

  // ... but may not write.
  net::HttpResponse refused = Send("POST", "/v1/admin/tenants", R"({"name":"x"})", key);
  EXPECT_EQ(refused.status, 403);
  EXPECT_NE(refused.body.find("req-admin-test"), std::string::npos) << refused.body;

  EXPECT_EQ(Send("DELETE", "/v1/admin/keys/" + id).status, 200);
  EXPECT_EQ(Send("GET", "/v1/admin/keys", "", key).status, 401);
  EXPECT_EQ(Send("DELETE", "/v1/admin/keys/rk_live_000000000000").status, 404);
}

TEST_F(AdminHttpTest, PrincipalsArePutListedAndDeleted) {
  net::HttpResponse put = Send("PUT", "/v1/admin/principals/acme/bob",
                               R"({"roles":["analyst"],"attributes":{"groups":["a","b"]}})");
  EXPECT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(Send("PUT", "/v1/admin/principals/nowhere/bob", "{}").status, 404);
  net::HttpResponse listed = Send("GET", "/v1/admin/principals?tenant=acme");
  EXPECT_NE(listed.body.find(R"("name":"bob","roles":["analyst"],"attributes":{"groups":"a,b"})"),
            std::string::npos)
      << listed.body;
  EXPECT_EQ(Send("DELETE", "/v1/admin/principals/acme/bob").status, 200);
  EXPECT_EQ(Send("DELETE", "/v1/admin/principals/acme/bob").status, 404);
}

// A tenant admin: may manage keys and principals of its own tenant (the rule's condition on
// resource.tenant), grant the roles it holds, and `auditor`, which a rule lets it grant.
constexpr std::string_view kTenantAdminPolicy = R"(
roles:
  - name: viewer
  - name: analyst
    inherits: [viewer]
  - name: tenant-admin
    inherits: [analyst]
  - name: admin
    inherits: [tenant-admin]
  - name: auditor
rules:
  - id: admins-all
    effect: permit
    principal: {role: admin}
    action: "*"
  - id: tenant-admins-own-tenant
    effect: permit
    principal: {role: tenant-admin}
    action: [admin:keys:read, admin:keys:write, admin:principals:read, admin:principals:write]
    when:
      - resource.tenant == principal.tenant
  - id: tenant-admins-grant-auditor
    effect: permit
    principal: {role: tenant-admin}
    action: admin:roles:grant
    resource: {type: role, name: auditor}
    when:
      - resource.tenant == principal.tenant
)";

class TenantAdminTest : public AdminHttpTest {
 protected:
  TenantAdminTest() : AdminHttpTest(kTenantAdminPolicy) {
    // Made by the anonymous (loopback) admin, who may grant anything.
    net::HttpResponse created =
        Send("POST", "/v1/admin/keys", R"({"tenant":"acme","name":"ta","roles":["tenant-admin"]})");
    EXPECT_EQ(created.status, 201) << created.body;
    tenant_admin_ = Field(created.body, "key");
  }

  net::HttpResponse AsTenantAdmin(std::string method, std::string target, std::string body = "") {
    return Send(std::move(method), std::move(target), std::move(body), tenant_admin_);
  }

  static std::string IdOf(const std::string& key) { return key.substr(0, 20); }

  std::string tenant_admin_;
};

TEST_F(TenantAdminTest, StaysInItsTenant) {
  net::HttpResponse own = AsTenantAdmin("POST", "/v1/admin/keys",
                                        R"({"tenant":"acme","name":"a2","roles":["analyst"]})");
  ASSERT_EQ(own.status, 201) << own.body;
  net::HttpResponse other = AsTenantAdmin(
      "POST", "/v1/admin/keys", R"({"tenant":"thrifty","name":"t2","roles":["analyst"]})");
  EXPECT_EQ(other.status, 403) << other.body;
  EXPECT_NE(other.body.find("req-admin-test"), std::string::npos) << other.body;
  EXPECT_EQ(AsTenantAdmin("PUT", "/v1/admin/principals/thrifty/tom", R"({"roles":[]})").status,
            403);
  EXPECT_EQ(AsTenantAdmin("DELETE", "/v1/admin/principals/thrifty/tom").status, 403);
  EXPECT_EQ(AsTenantAdmin("GET", "/v1/admin/keys?tenant=thrifty").status, 403);
  EXPECT_EQ(AsTenantAdmin("GET", "/v1/admin/keys?tenant=acme").status, 200);

  // Revocation is decided on the key's own tenant, looked up in the store.
  const std::string thrifty = fixture_.thrifty_key();
  EXPECT_EQ(AsTenantAdmin("DELETE", "/v1/admin/keys/" + IdOf(thrifty)).status, 403);
  EXPECT_TRUE(fixture_.control().Authenticate({.api_key = thrifty}).ok());
  EXPECT_EQ(AsTenantAdmin("DELETE", "/v1/admin/keys/" + Field(own.body, "id")).status, 200);
  // An unknown id has no tenant: the rule does not apply (403, nothing learnt), while an admin
  // gets 404.
  EXPECT_EQ(AsTenantAdmin("DELETE", "/v1/admin/keys/rk_live_000000000000").status, 403);
  EXPECT_EQ(Send("DELETE", "/v1/admin/keys/rk_live_000000000000").status, 404);
}

TEST_F(TenantAdminTest, GrantsOnlyRolesItHoldsOrMayGrant) {
  net::HttpResponse admin =
      AsTenantAdmin("POST", "/v1/admin/keys", R"({"tenant":"acme","name":"x","roles":["admin"]})");
  EXPECT_EQ(admin.status, 403) << admin.body;
  EXPECT_NE(admin.body.find("role 'admin' may not be granted"), std::string::npos) << admin.body;
  EXPECT_EQ(AsTenantAdmin("PUT", "/v1/admin/principals/acme/eve", R"({"roles":["admin"]})").status,
            403);
  EXPECT_FALSE(fixture_.store().GetPrincipal("acme", "eve").value().has_value());

  // A key for a principal that is already an admin would be an admin key.
  ASSERT_EQ(Send("PUT", "/v1/admin/principals/acme/root", R"({"roles":["admin"]})").status, 200);
  EXPECT_EQ(
      AsTenantAdmin("POST", "/v1/admin/keys", R"({"tenant":"acme","name":"r","principal":"root"})")
          .status,
      403);

  // Roles it holds (inherited ones too), and the one a rule lets it grant.
  EXPECT_EQ(AsTenantAdmin("PUT", "/v1/admin/principals/acme/eve", R"({"roles":["viewer"]})").status,
            200);
  EXPECT_EQ(AsTenantAdmin("POST", "/v1/admin/keys",
                          R"({"tenant":"acme","name":"y","roles":["tenant-admin","auditor"]})")
                .status,
            201);
  // The loopback admin holds `admin`, and admins-all permits admin:roles:grant.
  EXPECT_EQ(Send("POST", "/v1/admin/keys", R"({"tenant":"thrifty","name":"z","roles":["auditor"]})")
                .status,
            201);
}

// The keyring routes, over a keyring kept in the fixture's store.
class AdminKeyringTest : public AdminHttpTest {
 protected:
  void SetUp() override {
    const std::filesystem::path key_file = std::filesystem::path(::testing::TempDir()) /
                                           ("rampart-admin-master-" + std::to_string(::getpid()));
    std::ofstream(key_file) << std::string(64, 'c');
    std::filesystem::permissions(
        key_file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    auto master = crypto::MasterKeyFromFile(key_file.string());
    std::filesystem::remove(key_file);
    ASSERT_TRUE(master.ok()) << master.status().ToString();
    auto keyring = crypto::Keyring::Open(storage_, std::move(*master));
    ASSERT_TRUE(keyring.ok()) << keyring.status().ToString();
    keyring_ = std::move(*keyring);
    ASSERT_TRUE(keyring_->Ensure("models", crypto::KeyPurpose::kWrapping, "aes-256-gcm").ok());
    with_keyring_ = std::make_unique<AdminHttp>(fixture_.store(), &fixture_.keys(),
                                                fixture_.control(), keyring_.get());
  }
  void TearDown() override {
    if (with_keyring_) with_keyring_->Shutdown();
  }

  store::StoreKeyringStorage storage_{fixture_.store()};
  std::unique_ptr<crypto::Keyring> keyring_;
  std::unique_ptr<AdminHttp> with_keyring_;
};

TEST_F(AdminKeyringTest, TheKeyringIsListedAndRotatedBehindPolicy) {
  EXPECT_TRUE(AdminHttp::Owns("/v1/admin/keyring"));
  EXPECT_TRUE(AdminHttp::Owns("/v1/admin/keyring/models/rotate"));
  net::HttpResponse listed = SendTo(*with_keyring_, "GET", "/v1/admin/keyring");
  ASSERT_EQ(listed.status, 200) << listed.body;
  EXPECT_NE(listed.body.find(R"("name":"models","purpose":"wrapping","algorithm":"aes-256-gcm",)"
                             R"("current_version":1,"min_decryption_version":1)"),
            std::string::npos)
      << listed.body;

  net::HttpResponse rotated = SendTo(*with_keyring_, "POST", "/v1/admin/keyring/models/rotate");
  ASSERT_EQ(rotated.status, 200) << rotated.body;
  EXPECT_EQ(rotated.body, R"({"name":"models","version":2})");
  EXPECT_EQ(keyring_->StatusOf("models")->current_version, 2);
  EXPECT_EQ(SendTo(*with_keyring_, "POST", "/v1/admin/keyring/nothing/rotate").status, 404);

  // A viewer may read the key list but not the keyring; nobody without a key from elsewhere.
  EXPECT_EQ(SendTo(*with_keyring_, "GET", "/v1/admin/keyring", "", fixture_.viewer_key()).status,
            403);
  EXPECT_EQ(
      SendTo(*with_keyring_, "POST", "/v1/admin/keyring/models/rotate", "", fixture_.analyst_key())
          .status,
      403);
  EXPECT_EQ(keyring_->StatusOf("models")->current_version, 2);
}

TEST_F(AdminKeyringTest, WithoutAMasterKeyTheKeyringRoutesAre503) {
  net::HttpResponse listed = Send("GET", "/v1/admin/keyring");  // admin_ has no keyring
  EXPECT_EQ(listed.status, 503);
  EXPECT_NE(listed.body.find("--master-key-file"), std::string::npos) << listed.body;
  EXPECT_EQ(Send("POST", "/v1/admin/keyring/models/rotate").status, 503);
}

TEST(ParseDuration, ReadsUnitsAndRefusesTheRest) {
  EXPECT_EQ(*ParseDuration("30d"), 30 * 86400);
  EXPECT_EQ(*ParseDuration("12h"), 12 * 3600);
  EXPECT_EQ(*ParseDuration("15m"), 900);
  EXPECT_EQ(*ParseDuration("90s"), 90);
  EXPECT_EQ(*ParseDuration("3600"), 3600);
  for (std::string_view bad : {"", "d", "0d", "-1h", "1w", "1.5h", "99999999999999d"}) {
    EXPECT_FALSE(ParseDuration(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace rampart::api
