// TLS and mutual TLS on the gRPC front end, with certificates made at test time.

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include <grpcpp/grpcpp.h>

#include "api/grpc_service.grpc.pb.h"
#include "api/kserve_grpc.h"
#include "grpc_test_support.h"
#include "testing/test_certs.h"

namespace rampart::api {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using inference::GRPCInferenceService;
using testing::KeyAndCert;

// Both engines (KServeGrpcOptions::engine) serve TLS.
class GrpcTlsTest : public ::testing::TestWithParam<GrpcEngine> {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    directory_ =
        fs::path(::testing::TempDir()) / fmt::format("rampart_tls_{}_{}", getpid(), info->name());
    testing::WriteFakeRepository(directory_ / "models");
    backends_.Register(testing::MakeFakeBackend(gate_));
    serve::ServerOptions options;
    options.repository = directory_ / "models";
    server_ = std::make_unique<serve::InferenceServer>(options, backends_);
    ASSERT_TRUE(server_->LoadStartupModels().ok());

    ca_ = testing::MakeCertificateAuthority("rampart test CA");
    server_cert_ = testing::MakeLeafCertificate(ca_, "rampart test server");
    client_cert_ = testing::MakeLeafCertificate(ca_, "rampart test client");
    Write("ca.pem", ca_.cert_pem);
    Write("server.pem", server_cert_.cert_pem);
    Write("server.key", server_cert_.key_pem);
  }

  void TearDown() override {
    grpc_.reset();
    server_.reset();
    fs::remove_all(directory_);
  }

  std::string Write(const std::string& name, const std::string& text) {
    const fs::path path = directory_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

  GrpcTlsOptions Tls(bool mutual) const {
    GrpcTlsOptions tls;
    tls.server_cert = (directory_ / "server.pem").string();
    tls.server_key = (directory_ / "server.key").string();
    tls.root_cert = (directory_ / "ca.pem").string();
    tls.mutual = mutual;
    return tls;
  }

  Status StartTls(GrpcTlsOptions tls) {
    KServeGrpcOptions options;
    options.engine = GetParam();
    options.address = "127.0.0.1";
    options.port = 0;
    options.tls = std::move(tls);
    auto started = KServeGrpc::Start(*server_, options);
    if (!started.ok()) return started.status();
    grpc_ = std::move(started).value();
    return Status::Ok();
  }

  // ServerLive over a fresh channel with these credentials; the status code.
  grpc::StatusCode Live(const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
    grpc::ChannelArguments arguments;
    arguments.SetSslTargetNameOverride("localhost");
    auto stub = GRPCInferenceService::NewStub(grpc::CreateCustomChannel(
        "127.0.0.1:" + std::to_string(grpc_->port()), credentials, arguments));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 10s);
    inference::ServerLiveResponse response;
    grpc::Status status = stub->ServerLive(&context, {}, &response);
    if (status.ok() && !response.live()) return grpc::StatusCode::UNKNOWN;
    return status.error_code();
  }

  static std::shared_ptr<grpc::ChannelCredentials> TlsClient(const std::string& root,
                                                             const KeyAndCert* identity) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = root;
    if (identity != nullptr) {
      ssl.pem_private_key = identity->key_pem;
      ssl.pem_cert_chain = identity->cert_pem;
    }
    return grpc::SslCredentials(ssl);
  }

  testing::Gate gate_;
  backend::BackendRegistry backends_;
  fs::path directory_;
  std::unique_ptr<serve::InferenceServer> server_;
  std::unique_ptr<KServeGrpc> grpc_;
  KeyAndCert ca_;
  KeyAndCert server_cert_;
  KeyAndCert client_cert_;
};

TEST_P(GrpcTlsTest, TlsServesOnlyClientsThatTrustTheServer) {
  ASSERT_TRUE(StartTls(Tls(/*mutual=*/false)).ok());
  EXPECT_EQ(Live(TlsClient(ca_.cert_pem, nullptr)), grpc::StatusCode::OK);
  EXPECT_EQ(Live(grpc::InsecureChannelCredentials()), grpc::StatusCode::UNAVAILABLE);
  const KeyAndCert other_ca = testing::MakeCertificateAuthority("another CA");
  EXPECT_EQ(Live(TlsClient(other_ca.cert_pem, nullptr)), grpc::StatusCode::UNAVAILABLE);
}

TEST_P(GrpcTlsTest, MutualTlsRequiresAClientCertificateFromTheRootCa) {
  ASSERT_TRUE(StartTls(Tls(/*mutual=*/true)).ok());
  EXPECT_EQ(Live(TlsClient(ca_.cert_pem, &client_cert_)), grpc::StatusCode::OK);
  EXPECT_EQ(Live(TlsClient(ca_.cert_pem, nullptr)), grpc::StatusCode::UNAVAILABLE);
  const KeyAndCert other_ca = testing::MakeCertificateAuthority("another CA");
  const KeyAndCert stranger = testing::MakeLeafCertificate(other_ca, "stranger");
  EXPECT_EQ(Live(TlsClient(ca_.cert_pem, &stranger)), grpc::StatusCode::UNAVAILABLE);
}

TEST_P(GrpcTlsTest, UnreadableOrMissingFilesFailAtStart) {
  GrpcTlsOptions missing_key = Tls(false);
  missing_key.server_key = (directory_ / "absent.key").string();
  Status status = StartTls(missing_key);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--grpc-server-key: cannot read"), std::string::npos)
      << status.message();

  GrpcTlsOptions mutual_without_root = Tls(true);
  mutual_without_root.root_cert.clear();
  status = StartTls(mutual_without_root);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--grpc-root-cert is required"), std::string::npos)
      << status.message();

  GrpcTlsOptions garbage = Tls(false);
  garbage.server_key = Write("garbage.key", "not a key");
  status = StartTls(garbage);
  EXPECT_FALSE(status.ok());
}

INSTANTIATE_TEST_SUITE_P(Engines, GrpcTlsTest,
                         ::testing::Values(GrpcEngine::kCore, GrpcEngine::kNative),
                         [](const ::testing::TestParamInfo<GrpcEngine>& engine) {
                           return std::string(GrpcEngineName(engine.param));
                         });

}  // namespace
}  // namespace rampart::api
