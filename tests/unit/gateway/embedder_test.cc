// The hub's Embedder over a gateway target: an upstream's /v1/embeddings in batches, failing
// over by priority, the dimension learnt at creation, the deadline, and the answer's parsing.

#include "gateway/embedder.h"

#include <gtest/gtest.h>

#include "metrics/registry.h"
#include "testing/fake_upstream.h"

namespace rampart::gateway {
namespace {

using std::chrono::milliseconds;
using testing::FakeUpstream;
using testing::UpstreamBehaviour;
using testing::UpstreamFault;

class EmbedderTest : public ::testing::Test {
 protected:
  // Target "embed" on upstreams a (priority 100) and b (90), as "fake-embedder".
  std::unique_ptr<Gateway> Start() {
    GatewayConfig config;
    for (auto* fake : {&a_, &b_}) {
      UpstreamConfig upstream{.name = fake == &a_ ? "a" : "b", .url = fake->url() + "/v1"};
      upstream.first_byte_timeout = milliseconds(1500);
      config.upstreams.push_back(upstream);
    }
    config.targets.push_back(
        {.name = "embed",
         .endpoints = {{.upstream = "a", .model = "fake-embedder", .priority = 100},
                       {.upstream = "b", .model = "fake-embedder", .priority = 90}}});
    RouteConfig route{.name = "embeddings", .target = "embed"};
    route.match.models = {"embeddings"};
    config.routes.push_back(route);
    auto gateway = Gateway::Create(std::move(config), {}, registry_);
    EXPECT_TRUE(gateway.ok()) << gateway.status().ToString();
    return gateway.ok() ? std::move(gateway).value() : nullptr;
  }

  metrics::Registry registry_;
  FakeUpstream a_, b_;
};

TEST_F(EmbedderTest, EmbedsInBatchesThroughTheTargetsUpstream) {
  std::unique_ptr<Gateway> gateway = Start();
  ASSERT_NE(gateway, nullptr);
  // The fake answers one vector per call: batches of one.
  auto embedder = GatewayEmbedder::Create(*gateway, {.target = "embed", .batch_size = 1});
  ASSERT_TRUE(embedder.ok()) << embedder.status().ToString();
  EXPECT_EQ((*embedder)->dimension(), 3u);
  EXPECT_EQ((*embedder)->name(), "embed/3");
  EXPECT_NE(a_.last_body().find(R"("model":"fake-embedder","input":["dimension probe"])"),
            std::string::npos)
      << a_.last_body();
  EXPECT_NE(a_.last_body().find(R"("encoding_format":"float")"), std::string::npos);

  Result<std::vector<std::vector<float>>> vectors = (*embedder)->Embed({"one", "two", "three"});
  ASSERT_TRUE(vectors.ok()) << vectors.status().ToString();
  ASSERT_EQ(vectors->size(), 3u);
  EXPECT_FLOAT_EQ((*vectors)[2][1], 0.2f);
  EXPECT_EQ(a_.requests("/v1/embeddings"), 4);

  // The first endpoint failing, the next by priority answers.
  a_.SetBehaviour({.fault = UpstreamFault::kStatus, .status = 500});
  vectors = (*embedder)->Embed({"four"});
  ASSERT_TRUE(vectors.ok()) << vectors.status().ToString();
  EXPECT_EQ(b_.requests("/v1/embeddings"), 1);

  // Both failing: the error names the last upstream tried.
  b_.SetBehaviour({.fault = UpstreamFault::kStatus, .status = 503});
  vectors = (*embedder)->Embed({"five"});
  ASSERT_FALSE(vectors.ok());
  EXPECT_NE(vectors.status().message().find("upstream 'b'"), std::string::npos)
      << vectors.status().ToString();
}

TEST_F(EmbedderTest, DeadlineAndTargets) {
  std::unique_ptr<Gateway> gateway = Start();
  ASSERT_NE(gateway, nullptr);
  EXPECT_EQ(GatewayEmbedder::Create(*gateway, {.target = "nope"}).status().code(),
            StatusCode::kNotFound);
  // No target named and none local.
  EXPECT_EQ(GatewayEmbedder::Create(*gateway, {}).status().code(), StatusCode::kNotFound);

  auto embedder = GatewayEmbedder::Create(
      *gateway, {.target = "embed", .batch_size = 1, .deadline = milliseconds(300)});
  ASSERT_TRUE(embedder.ok()) << embedder.status().ToString();
  a_.SetBehaviour({.fault = UpstreamFault::kHang});
  Result<std::vector<std::vector<float>>> late = (*embedder)->Embed({"slow"});
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::kUnavailable) << late.status().ToString();
  a_.Stop();
}

TEST(ParseEmbeddingsAnswerTest, VectorsInIndexOrder) {
  Result<std::vector<std::vector<float>>> vectors = ParseEmbeddingsAnswer(
      R"({"data":[{"index":1,"embedding":[3,4]},{"index":0,"embedding":[1,2]}]})", 2);
  ASSERT_TRUE(vectors.ok()) << vectors.status().ToString();
  EXPECT_EQ((*vectors)[0], (std::vector<float>{1, 2}));
  EXPECT_EQ((*vectors)[1], (std::vector<float>{3, 4}));
  EXPECT_FALSE(ParseEmbeddingsAnswer(R"({"data":[{"index":0,"embedding":[1]}]})", 2).ok());
  EXPECT_FALSE(ParseEmbeddingsAnswer(R"({"data":[{"index":5,"embedding":[1]}]})", 1).ok());
  EXPECT_FALSE(ParseEmbeddingsAnswer(R"({"data":[{"index":0,"embedding":["x"]}]})", 1).ok());
  EXPECT_FALSE(ParseEmbeddingsAnswer("nope", 1).ok());
  EXPECT_FALSE(ParseEmbeddingsAnswer(R"({"data":{}})", 1).ok());
}

}  // namespace
}  // namespace rampart::gateway
