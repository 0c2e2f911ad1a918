// Access control on the gRPC front end: refusals answer as HTTP's do, PERMISSION_DENIED naming
// the request id (the request's own, the x-request-id metadata's, or a generated one).

#include <gtest/gtest.h>

#include "grpc_test_fixture.h"
#include "testing/access_fixture.h"

namespace rampart::api {
namespace {

// Analysts may read and infer `simple` only; the fake repository's `add` is refused to them.
constexpr std::string_view kSimpleOnly = R"(
roles:
  - name: analyst
rules:
  - id: analysts-simple
    effect: permit
    principal: {role: analyst}
    action: [model:read, model:infer]
    resource: {type: model, name: simple}
)";

class GrpcAccessTest : public GrpcTest {
 protected:
  GrpcAccessTest() : access_fixture_(kSimpleOnly) { access_ = &access_fixture_.control(); }

  // A client context with the analyst's key and a deadline.
  std::unique_ptr<grpc::ClientContext> AsAnalyst() {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(Deadline());
    context->AddMetadata("authorization", "Bearer " + access_fixture_.analyst_key());
    return context;
  }

  testing::AccessFixture access_fixture_;
};

bool EndsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

TEST_P(GrpcAccessTest, PermissionDeniedNamesTheRequestsId) {
  ModelInferRequest request = AddRequest({1}, {2}, true);  // id "add-1"
  ModelInferResponse response;
  grpc::Status status = stub_->ModelInfer(AsAnalyst().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(EndsWith(status.error_message(), "(request id add-1)")) << status.error_message();

  // Without an id in the request: the x-request-id metadata's, else a generated one.
  request.clear_id();
  std::unique_ptr<grpc::ClientContext> context = AsAnalyst();
  context->AddMetadata("x-request-id", "trace-me-7");
  status = stub_->ModelInfer(context.get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(EndsWith(status.error_message(), "(request id trace-me-7)"))
      << status.error_message();
  status = stub_->ModelInfer(AsAnalyst().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(status.error_message().find("(request id req_"), std::string::npos)
      << status.error_message();
}

TEST_P(GrpcAccessTest, PermissionDeniedOnOtherRpcsNamesARequestIdToo) {
  inference::ModelMetadataRequest request;
  request.set_name("add");
  inference::ModelMetadataResponse response;
  grpc::Status status = stub_->ModelMetadata(AsAnalyst().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(status.error_message().find("(request id req_"), std::string::npos)
      << status.error_message();
  std::unique_ptr<grpc::ClientContext> context = AsAnalyst();
  context->AddMetadata("x-request-id", "meta-9");
  status = stub_->ModelMetadata(context.get(), request, &response);
  EXPECT_TRUE(EndsWith(status.error_message(), "(request id meta-9)")) << status.error_message();

  // A refusal that is not a denial names none (nothing to quote to an operator).
  grpc::ClientContext wrong_key;
  wrong_key.set_deadline(Deadline());
  wrong_key.AddMetadata("authorization", "Bearer rk_live_nope");
  status = stub_->ModelMetadata(&wrong_key, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(status.error_message(), "invalid API key");
}

TEST_P(GrpcAccessTest, AStreamsDeniedRequestNamesItsId) {
  std::unique_ptr<grpc::ClientContext> context = AsAnalyst();
  auto stream = stub_->ModelStreamInfer(context.get());
  ModelInferRequest request = AddRequest({1}, {2}, true);
  request.set_id("stream-3");
  ASSERT_TRUE(stream->Write(request));
  inference::ModelStreamInferResponse answer;
  ASSERT_TRUE(stream->Read(&answer));
  EXPECT_TRUE(EndsWith(answer.error_message(), "(request id stream-3)")) << answer.error_message();
  EXPECT_EQ(answer.infer_response().id(), "stream-3");
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

// Analysts may infer on `add` (the fake repository's) too.
constexpr std::string_view kAnalystsAdd = R"(
roles:
  - name: analyst
rules:
  - id: analysts-add
    effect: permit
    principal: {role: analyst}
    action: model:infer
    resource: {type: model, name: add}
)";

class GrpcStreamAccessTest : public GrpcAccessTest {
 protected:
  GrpcStreamAccessTest() { access_fixture_.WritePolicy(kAnalystsAdd); }
  void SetUp() override {
    ASSERT_TRUE(access_fixture_.control().Reload(std::nullopt).ok());
    GrpcAccessTest::SetUp();
  }
};

// Each request in a stream is authenticated again: a key revoked while the stream is open is
// refused at its next request, in the stream, as UNAUTHENTICATED's reason.
TEST_P(GrpcStreamAccessTest, AKeyRevokedMidStreamIsRefusedAtItsNextRequest) {
  std::unique_ptr<grpc::ClientContext> context = AsAnalyst();
  auto stream = stub_->ModelStreamInfer(context.get());
  ModelInferRequest request = AddRequest({1}, {2}, true);
  request.set_id("before");
  ASSERT_TRUE(stream->Write(request));
  inference::ModelStreamInferResponse answer;
  ASSERT_TRUE(stream->Read(&answer));
  EXPECT_EQ(answer.error_message(), "");
  EXPECT_EQ(answer.infer_response().id(), "before");

  const std::string id = access_fixture_.analyst_key().substr(0, 20);
  ASSERT_TRUE(access_fixture_.store().RevokeApiKey(id, 1).ok());
  ASSERT_TRUE(access_fixture_.keys().Refresh().ok());

  request.set_id("after");
  ASSERT_TRUE(stream->Write(request));
  ASSERT_TRUE(stream->Read(&answer));
  EXPECT_EQ(answer.error_message(), "API key revoked");
  EXPECT_EQ(answer.infer_response().id(), "after");
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

INSTANTIATE_TEST_SUITE_P(Engines, GrpcAccessTest,
                         ::testing::Values(GrpcEngine::kCore, GrpcEngine::kNative), EngineName);
INSTANTIATE_TEST_SUITE_P(Engines, GrpcStreamAccessTest,
                         ::testing::Values(GrpcEngine::kCore, GrpcEngine::kNative), EngineName);

}  // namespace
}  // namespace rampart::api
