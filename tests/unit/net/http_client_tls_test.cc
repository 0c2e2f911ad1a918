// HttpClient over HTTPS, with certificates made at test time: trust, host names, mutual TLS.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "http_client_test_support.h"
#include "testing/test_certs.h"

namespace rampart::net {
namespace {

TEST(HttpClientCreateTest, RefusesUnusableTlsFiles) {
  auto created = HttpClient::Create({.tls = {.ca_file = "/nonexistent/ca.pem"}});
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), StatusCode::kInvalidArgument);
  created = HttpClient::Create({.tls = {.cert_file = "/tmp/cert.pem"}});
  EXPECT_FALSE(created.ok());
  EXPECT_FALSE(HttpClient::Create({.threads = 0}).ok());
}

class HttpClientTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::path(::testing::TempDir()) /
                 ("rampart_client_tls_" + std::to_string(getpid()) + "_" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(directory_);
    ca_ = testing::MakeCertificateAuthority("rampart test CA");
    server_ = testing::MakeLeafCertificate(ca_, "rampart test upstream");
    client_identity_ = testing::MakeLeafCertificate(ca_, "rampart test gateway");
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(directory_ / name) << text;
    return (directory_ / name).string();
  }

  HttpFetchResult FetchWith(HttpClientTlsOptions tls, const std::string& url) {
    auto client = HttpClient::Create({.tls = std::move(tls)});
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    auto endpoint = ParseEndpoint(url);
    EXPECT_TRUE(endpoint.ok());
    std::promise<HttpFetchResult> done;
    (*client)->Fetch(*endpoint, Get("/v1/models"),
                     [&](HttpFetchResult result) { done.set_value(std::move(result)); });
    auto future = done.get_future();
    EXPECT_EQ(future.wait_for(kWait), std::future_status::ready);
    return future.get();
  }

  std::filesystem::path directory_;
  testing::KeyAndCert ca_, server_, client_identity_;
};

TEST_F(HttpClientTlsTest, FetchesOverHttpsTrustingTheGivenCa) {
  FakeUpstream fake({.tls_cert_pem = server_.cert_pem, .tls_key_pem = server_.key_pem});
  const std::string ca = Write("ca.pem", ca_.cert_pem);
  HttpFetchResult result = FetchWith({.ca_file = ca}, fake.url());  // by IP address
  ASSERT_TRUE(result.status.ok()) << result.status.ToString();
  EXPECT_EQ(result.response.status, 200);
  // By name: resolved, sent as SNI and checked against the certificate.
  result = FetchWith({.ca_file = ca}, "https://localhost:" + std::to_string(fake.port()));
  ASSERT_TRUE(result.status.ok()) << result.status.ToString();
  EXPECT_EQ(fake.requests("/v1/models"), 2);
}

TEST_F(HttpClientTlsTest, ReusesTlsConnections) {
  FakeUpstream fake({.tls_cert_pem = server_.cert_pem, .tls_key_pem = server_.key_pem});
  auto client = HttpClient::Create({.tls = {.ca_file = Write("ca.pem", ca_.cert_pem)}});
  ASSERT_TRUE(client.ok());
  auto endpoint = ParseEndpoint(fake.url());
  for (int i = 0; i < 3; ++i) {
    auto sink = std::make_shared<RecordingSink>();
    (*client)->Send(*endpoint, Chat(/*stream=*/true), sink);
    ASSERT_TRUE(sink->WaitDone());
    ASSERT_TRUE(sink->status().ok()) << sink->status().ToString();
    EXPECT_NE(sink->body().find("[DONE]"), std::string::npos);
  }
  EXPECT_EQ(fake.connections_accepted(), 1);
  EXPECT_EQ((*client)->stats().connections_reused, 2u);
}

TEST_F(HttpClientTlsTest, AnUntrustedServerFails) {
  FakeUpstream fake({.tls_cert_pem = server_.cert_pem, .tls_key_pem = server_.key_pem});
  const testing::KeyAndCert other = testing::MakeCertificateAuthority("some other CA");
  HttpFetchResult result = FetchWith({.ca_file = Write("other.pem", other.cert_pem)}, fake.url());
  EXPECT_EQ(result.error, HttpClientError::kTlsFailed);
  EXPECT_NE(result.status.message().find("certificate verify failed"), std::string::npos)
      << result.status.message();
  EXPECT_EQ(fake.total_requests(), 0);
}

TEST_F(HttpClientTlsTest, MutualTls) {
  FakeUpstream fake({.tls_cert_pem = server_.cert_pem,
                     .tls_key_pem = server_.key_pem,
                     .client_ca_pem = ca_.cert_pem});
  const std::string ca = Write("ca.pem", ca_.cert_pem);
  HttpFetchResult result = FetchWith({.ca_file = ca,
                                      .cert_file = Write("client.pem", client_identity_.cert_pem),
                                      .key_file = Write("client.key", client_identity_.key_pem)},
                                     fake.url());
  ASSERT_TRUE(result.status.ok()) << result.status.ToString();
  // Without a certificate the server refuses (TLS 1.3 says so after the client's handshake).
  result = FetchWith({.ca_file = ca}, fake.url());
  EXPECT_FALSE(result.status.ok());
  EXPECT_TRUE(result.error == HttpClientError::kTlsFailed ||
              result.error == HttpClientError::kConnectionClosed ||
              result.error == HttpClientError::kSendFailed)
      << HttpClientErrorName(result.error);
  EXPECT_EQ(fake.requests("/v1/models"), 1);
}

}  // namespace
}  // namespace rampart::net
