// The Pinecone front end over a fake catalog: routes, statuses and error bodies, the host its
// descriptions give, writes answered only once durable, the worker queue's bound, access
// control (authenticate first) and the audit record of each request.

#include "api/pinecone_http.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <mutex>

#include "api/pinecone_fake_catalog.h"
#include "net/http_connection.h"
#include "testing/access_fixture.h"
#include "testing/capturing_sink.h"
#include "testing/eventually.h"
#include "testing/recording_connection.h"

namespace rampart::api {
namespace {

using testing::FakeCatalog;
using testing::RecordingConnection;

constexpr std::string_view kCreateDocs =
    R"({"name":"docs","deployment":{"deployment_type":"managed","cloud":"aws","region":"r"},)"
    R"("schema":{"fields":{"_values":{"type":"dense_vector","dimension":3,"metric":"cosine"}}}})";

net::HttpRequest Request(std::string method, std::string target, std::string body = "",
                         std::string api_key = "") {
  net::HttpRequest request;
  request.method = std::move(method);
  request.target = std::move(target);
  request.body = std::move(body);
  request.headers.emplace_back("host", "vectors.test:8000");
  if (!api_key.empty()) request.headers.emplace_back("api-key", std::move(api_key));
  return request;
}

// Handles `request` and returns the future of its answer.
std::future<net::HttpResponse> Send(PineconeHttp& pinecone, net::HttpRequest request) {
  auto connection = std::make_shared<RecordingConnection>();
  std::future<net::HttpResponse> answer = connection->answer();
  pinecone.Handle(std::move(request), net::Responder(connection));
  return answer;
}

net::HttpResponse Call(PineconeHttp& pinecone, net::HttpRequest request) {
  return Send(pinecone, std::move(request)).get();
}

class PineconeHttpTest : public ::testing::Test {
 protected:
  net::HttpResponse Call(std::string method, std::string target, std::string body = "") {
    return api::Call(pinecone_, Request(std::move(method), std::move(target), std::move(body)));
  }
  void CreateDocs() {
    ASSERT_EQ(Call("POST", "/pinecone/indexes", std::string(kCreateDocs)).status, 201);
  }

  FakeCatalog catalog_;
  PineconeHttp pinecone_{catalog_, {}};
};

TEST_F(PineconeHttpTest, ControlPlaneCreatesDescribesListsAndDeletes) {
  net::HttpResponse created = Call("POST", "/pinecone/indexes", std::string(kCreateDocs));
  EXPECT_EQ(created.status, 201) << created.body;
  EXPECT_NE(created.body.find(R"("host":"http://vectors.test:8000/pinecone/indexes/docs")"),
            std::string::npos)
      << created.body;
  EXPECT_NE(created.body.find(R"("deployment_type":"managed")"), std::string::npos);
  EXPECT_NE(created.body.find(R"("_values":{"type":"dense_vector","dimension":3)"),
            std::string::npos);

  net::HttpResponse again = Call("POST", "/pinecone/indexes", std::string(kCreateDocs));
  EXPECT_EQ(again.status, 409);
  EXPECT_NE(again.body.find(R"("code":6)"), std::string::npos) << again.body;
  EXPECT_NE(again.body.find(R"("details":[])"), std::string::npos);

  EXPECT_EQ(
      Call("POST", "/pinecone/indexes", R"({"name":"old","dimension":2,"metric":"euclidean"})")
          .status,
      201);
  net::HttpResponse listed = Call("GET", "/pinecone/indexes");
  EXPECT_EQ(listed.status, 200);
  EXPECT_EQ(listed.body.find(R"({"indexes":[{"name":"docs")"), 0u) << listed.body;
  EXPECT_NE(listed.body.find(R"("name":"old")"), std::string::npos);

  EXPECT_EQ(Call("GET", "/pinecone/indexes/docs").status, 200);
  net::HttpResponse missing = Call("GET", "/pinecone/indexes/nope");
  EXPECT_EQ(missing.status, 404);
  EXPECT_NE(missing.body.find(R"("code":5)"), std::string::npos);
  EXPECT_EQ(Call("DELETE", "/pinecone/indexes/docs").status, 202);
  EXPECT_EQ(Call("DELETE", "/pinecone/indexes/docs").status, 404);
  EXPECT_EQ(Call("PATCH", "/pinecone/indexes/old", "{}").status, 501);
  EXPECT_EQ(Call("PUT", "/pinecone/indexes").status, 405);
  EXPECT_EQ(Call("GET", "/pinecone/other").status, 404);
  EXPECT_EQ(Call("POST", "/pinecone/indexes", "{").status, 400);
}

TEST_F(PineconeHttpTest, PublicUrlReplacesTheHostHeader) {
  PineconeHttp pinecone(catalog_, {.public_url = "https://vectors.example.com/"});
  net::HttpResponse created =
      api::Call(pinecone, Request("POST", "/pinecone/indexes", std::string(kCreateDocs)));
  EXPECT_NE(created.body.find(R"("host":"https://vectors.example.com/pinecone/indexes/docs")"),
            std::string::npos)
      << created.body;
}

TEST_F(PineconeHttpTest, DataPlaneRoundTrip) {
  CreateDocs();
  net::HttpResponse upserted =
      Call("POST", "/pinecone/indexes/docs/vectors/upsert",
           R"({"vectors":[{"id":"a","values":[1,0,0],"metadata":{"genre":"drama"}},)"
           R"({"id":"b","values":[0,1,0]}],"namespace":"__default__"})");
  EXPECT_EQ(upserted.status, 200) << upserted.body;
  EXPECT_EQ(upserted.body, R"({"upsertedCount":2})");

  net::HttpResponse queried =
      Call("POST", "/pinecone/indexes/docs/query",
           R"({"topK":1,"vector":[1,0,0],"includeMetadata":true,"filter":{"genre":"drama"}})");
  EXPECT_EQ(queried.status, 200) << queried.body;
  EXPECT_EQ(queried.body, R"({"matches":[{"id":"a","score":1.0,"metadata":{"genre":"drama"}}],)"
                          R"("namespace":"__default__","usage":{"readUnits":1}})");
  EXPECT_TRUE(catalog_.index("docs")->last_query().filter.has_value());
  EXPECT_EQ(Call("POST", "/pinecone/indexes/docs/query", R"({"topK":1,"id":"zz"})").status, 400);

  net::HttpResponse fetched = Call("GET", "/pinecone/indexes/docs/vectors/fetch?ids=b&ids=none");
  EXPECT_EQ(fetched.body, R"({"vectors":{"b":{"id":"b","values":[0.0,1.0,0.0]}},)"
                          R"("namespace":"__default__","usage":{"readUnits":1}})");

  EXPECT_EQ(Call("POST", "/pinecone/indexes/docs/vectors/update",
                 R"({"id":"b","setMetadata":{"genre":"comedy"}})")
                .body,
            "{}");
  net::HttpResponse listed = Call("GET", "/pinecone/indexes/docs/vectors/list?limit=1");
  EXPECT_EQ(listed.body, R"({"vectors":[{"id":"a"}],"pagination":{"next":"a"},)"
                         R"("namespace":"__default__","usage":{"readUnits":1}})");

  net::HttpResponse stats = Call("GET", "/pinecone/indexes/docs/describe_index_stats");
  EXPECT_NE(stats.body.find(R"("namespaces":{"__default__":{"vectorCount":2}})"), std::string::npos)
      << stats.body;
  EXPECT_FALSE(catalog_.index("docs")->stats_filtered());
  EXPECT_EQ(
      Call("POST", "/pinecone/indexes/docs/describe_index_stats", R"({"filter":{"g":1}})").status,
      200);
  EXPECT_TRUE(catalog_.index("docs")->stats_filtered());

  EXPECT_EQ(Call("POST", "/pinecone/indexes/docs/vectors/delete", R"({"ids":["a"]})").body, "{}");
  EXPECT_EQ(Call("POST", "/pinecone/indexes/docs/vectors/delete", R"({"deleteAll":true})").status,
            200);
  EXPECT_NE(Call("GET", "/pinecone/indexes/docs/describe_index_stats")
                .body.find(R"("totalVectorCount":0)"),
            std::string::npos);
}

TEST_F(PineconeHttpTest, BadRequestsAre400sInPineconesShape) {
  CreateDocs();
  const std::string upsert = "/pinecone/indexes/docs/vectors/upsert";
  for (const std::string& body :
       {std::string("{not json"), std::string(R"({"vectors":[{"id":"a","values":[1,2]}]})"),
        std::string(R"({"vectors":[{"id":"a","values":[1,1e39,2]}]})"),
        std::string(R"({"vectors":[{"id":"a","values":[1,2,3],"metadata":{"x":{"y":1}}}]})")}) {
    net::HttpResponse answer = Call("POST", upsert, body);
    EXPECT_EQ(answer.status, 400) << body;
    EXPECT_EQ(answer.body.find(R"({"code":3,"message":")"), 0u) << answer.body;
  }
  EXPECT_EQ(Call("POST", "/pinecone/indexes/docs/query", R"({"topK":0,"vector":[1,0,0]})").status,
            400);
  EXPECT_EQ(Call("POST", "/pinecone/indexes/docs/query",
                 R"({"topK":1,"vector":[1,0,0],"filter":{"a":{"$like":1}}})")
                .status,
            400);
  EXPECT_EQ(Call("POST", "/pinecone/indexes/docs/vectors/update", R"({"filter":{"a":1}})").status,
            501);
  EXPECT_EQ(Call("GET", "/pinecone/indexes/docs/vectors/fetch").status, 400);
  EXPECT_EQ(Call("GET", "/pinecone/indexes/docs/vectors/upsert").status, 405);
  EXPECT_EQ(Call("POST", "/pinecone/indexes/docs/vectors/nothing", "{}").status, 404);
  net::HttpResponse unknown = Call("POST", "/pinecone/indexes/nope/vectors/upsert",
                                   R"({"vectors":[{"id":"a","values":[1,2,3]}]})");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(unknown.body.find("nope"), std::string::npos);
}

TEST_F(PineconeHttpTest, AWriteIsAnsweredOnlyOnceItIsDurable) {
  CreateDocs();
  catalog_.index("docs")->HoldWrites();
  std::future<net::HttpResponse> answer =
      Send(pinecone_, Request("POST", "/pinecone/indexes/docs/vectors/upsert",
                              R"({"vectors":[{"id":"a","values":[1,0,0]}]})"));
  // The write reaches the index (on a worker thread) ...
  ASSERT_TRUE(testing::Eventually([&] { return catalog_.index("docs")->held_writes() == 1; }));
  // ... and is not answered until the index says it is durable.
  EXPECT_EQ(answer.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  catalog_.index("docs")->ReleaseWrites();
  EXPECT_EQ(answer.get().body, R"({"upsertedCount":1})");
}

// An index whose queries block until released, to fill the worker queue.
class BlockingCatalog final : public knowledge::IndexCatalog {
 public:
  class Index final : public testing::FakeIndex {
   public:
    Index(knowledge::IndexSpec spec, BlockingCatalog& owner)
        : FakeIndex(std::move(spec)), owner_(owner) {}
    Result<knowledge::QueryResult> Query(const knowledge::QueryRequest& request) const override {
      std::unique_lock lock(owner_.mutex_);
      ++owner_.blocked_;
      owner_.changed_.notify_all();
      owner_.changed_.wait(lock, [this] { return owner_.released_; });
      lock.unlock();
      return FakeIndex::Query(request);
    }

   private:
    BlockingCatalog& owner_;
  };
  Result<std::shared_ptr<knowledge::IndexBackend>> Create(const knowledge::IndexSpec&) override {
    return Unimplemented("fixed");
  }
  Status Delete(std::string_view) override { return Unimplemented("fixed"); }
  Result<std::shared_ptr<knowledge::IndexBackend>> Get(std::string_view) const override {
    return std::shared_ptr<knowledge::IndexBackend>(index_);
  }
  std::vector<knowledge::IndexSpec> List() const override { return {index_->spec()}; }
  void WaitBlocked(int count) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return blocked_ >= count; });
  }
  void Release() {
    std::lock_guard lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int blocked_ = 0;
  bool released_ = false;
  std::shared_ptr<Index> index_ = std::make_shared<Index>(
      knowledge::IndexSpec{.name = "docs", .engine = {.dimension = 3}}, *this);
};

TEST(PineconeHttpQueueTest, AFullWorkerQueueAnswers429) {
  BlockingCatalog catalog;
  PineconeHttp pinecone(catalog, {.worker_threads = 1, .max_queued_requests = 1});
  const auto query = [] {
    return Request("POST", "/pinecone/indexes/docs/query", R"({"topK":1,"vector":[1,0,0]})");
  };
  std::future<net::HttpResponse> running = Send(pinecone, query());
  catalog.WaitBlocked(1);  // the one worker is busy
  std::future<net::HttpResponse> queued = Send(pinecone, query());
  net::HttpResponse refused = Call(pinecone, query());
  EXPECT_EQ(refused.status, 429);
  EXPECT_EQ(refused.body.find(R"({"code":8,)"), 0u) << refused.body;
  catalog.Release();
  EXPECT_EQ(running.get().status, 200);
  EXPECT_EQ(queued.get().status, 200);
}

constexpr std::string_view kIndexPolicy = R"(
roles:
  - name: viewer
  - name: analyst
    inherits: [viewer]
  - name: admin
    inherits: [analyst]
rules:
  - id: viewers-read-docs
    effect: permit
    principal: {role: viewer}
    action: [index:read, vectors:read]
    resource: {type: index, name: docs}
  - id: analysts-write
    effect: permit
    principal: {role: analyst}
    action: [index:create, vectors:write]
)";

TEST(PineconeHttpAccessTest, AuthenticatesFirstThenDecidesPerIndex) {
  testing::AccessFixture access(kIndexPolicy);
  testing::CapturingSink audit({});
  FakeCatalog catalog;
  PineconeHttp pinecone(catalog, {.access = &access.control(), .audit = &audit});
  const std::string analyst = access.analyst_key();
  const std::string viewer = access.viewer_key();

  // No key: 401 before the body is even looked at.
  net::HttpResponse anonymous = Call(pinecone, Request("POST", "/pinecone/indexes", "{"));
  EXPECT_EQ(anonymous.status, 401);
  EXPECT_EQ(anonymous.body.find(R"({"code":16,)"), 0u) << anonymous.body;
  EXPECT_EQ(Call(pinecone, Request("GET", "/pinecone/indexes")).status, 401);
  EXPECT_EQ(Call(pinecone, Request("POST", "/pinecone/indexes", std::string(kCreateDocs), "rk_bad"))
                .status,
            401);
  // The viewer may not create; the analyst may.
  net::HttpResponse forbidden =
      Call(pinecone, Request("POST", "/pinecone/indexes", std::string(kCreateDocs), viewer));
  EXPECT_EQ(forbidden.status, 403);
  EXPECT_EQ(forbidden.body.find(R"({"code":7,)"), 0u) << forbidden.body;
  EXPECT_EQ(Call(pinecone, Request("POST", "/pinecone/indexes", std::string(kCreateDocs), analyst))
                .status,
            201);
  EXPECT_EQ(Call(pinecone, Request("POST", "/pinecone/indexes",
                                   R"({"name":"secret","dimension":3})", analyst))
                .status,
            201);
  // The viewer lists and reads only `docs`, and may not write to it.
  net::HttpResponse listed = Call(pinecone, Request("GET", "/pinecone/indexes", "", viewer));
  EXPECT_EQ(listed.status, 200);
  EXPECT_NE(listed.body.find(R"("name":"docs")"), std::string::npos);
  EXPECT_EQ(listed.body.find("secret"), std::string::npos) << listed.body;
  EXPECT_EQ(Call(pinecone, Request("GET", "/pinecone/indexes/secret", "", viewer)).status, 403);
  EXPECT_EQ(Call(pinecone, Request("POST", "/pinecone/indexes/docs/query",
                                   R"({"topK":1,"vector":[1,0,0]})", viewer))
                .status,
            200);
  EXPECT_EQ(Call(pinecone, Request("POST", "/pinecone/indexes/docs/vectors/upsert",
                                   R"({"vectors":[{"id":"a","values":[1,0,0]}]})", viewer))
                .status,
            403);

  // One record per request, on api "pinecone", with the action and the index.
  std::vector<audit::AuditRecord> records;
  for (const auto& captured : audit.captured()) records.push_back(captured.record);
  ASSERT_EQ(records.size(), 10u);
  EXPECT_EQ(records[0].api, "pinecone");
  EXPECT_EQ(records[0].action, "index:create");
  EXPECT_EQ(records[0].status, 401);
  EXPECT_EQ(records[4].resource_type, "index");
  EXPECT_EQ(records[4].resource, "docs");
  EXPECT_EQ(records[4].principal, "alice");
  EXPECT_EQ(records[9].action, "vectors:write");
  EXPECT_FALSE(records[9].allowed);
}

}  // namespace
}  // namespace rampart::api
