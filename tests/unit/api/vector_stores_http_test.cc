// The Vector Stores front end over a fake service: routes and methods, OpenAI's shapes and
// errors (400 naming the field, 404 for unknown ids), the worker queue's bound, access control
// (authenticated first; per-document files:read decided once per file per search, so two
// callers see different hits of one store) and one audit record per request.

#include "api/vector_stores_http.h"

#include <gtest/gtest.h>

#include <future>

#include "api/vector_stores_fake.h"
#include "identity/api_keys.h"
#include "net/http_connection.h"
#include "testing/access_fixture.h"
#include "testing/capturing_sink.h"
#include "testing/eventually.h"
#include "testing/recording_connection.h"

namespace rampart::api {
namespace {

using testing::FakeVectorStores;
using testing::RecordingConnection;

net::HttpRequest Request(std::string method, std::string target, std::string body = "",
                         std::string api_key = "") {
  net::HttpRequest request;
  request.method = std::move(method);
  request.target = std::move(target);
  request.body = std::move(body);
  if (!api_key.empty()) request.headers.emplace_back("authorization", "Bearer " + api_key);
  return request;
}

std::future<net::HttpResponse> Send(VectorStoresHttp& front, net::HttpRequest request) {
  auto connection = std::make_shared<RecordingConnection>();
  std::future<net::HttpResponse> answer = connection->answer();
  front.Handle(std::move(request), net::Responder(connection));
  return answer;
}

net::HttpResponse Call(VectorStoresHttp& front, std::string method, std::string target,
                       std::string body = "", std::string api_key = "") {
  return Send(front,
              Request(std::move(method), std::move(target), std::move(body), std::move(api_key)))
      .get();
}

bool Has(const net::HttpResponse& response, std::string_view text) {
  return response.body.find(text) != std::string::npos;
}

class VectorStoresHttpTest : public ::testing::Test {
 protected:
  net::HttpResponse Call(std::string method, std::string target, std::string body = "") {
    return api::Call(front_, std::move(method), std::move(target), std::move(body));
  }

  FakeVectorStores service_;
  VectorStoresHttp front_{service_, {}};
};

TEST_F(VectorStoresHttpTest, StoresCreateRetrieveListModifyDelete) {
  net::HttpResponse created =
      Call("POST", "/v1/vector_stores", R"({"name":"Support","file_ids":["file-a"]})");
  ASSERT_EQ(created.status, 200) << created.body;
  EXPECT_EQ(created.content_type, "application/json");
  EXPECT_TRUE(Has(created, R"({"id":"vs_1","object":"vector_store")")) << created.body;
  EXPECT_TRUE(Has(created, R"("name":"Support")"));
  EXPECT_TRUE(Has(created, R"("completed":1,"failed":0,"cancelled":0,"total":1})"));
  bool has_request_id = false;
  for (const auto& [name, value] : created.headers) has_request_id |= name == "x-request-id";
  EXPECT_TRUE(has_request_id);

  EXPECT_EQ(Call("GET", "/v1/vector_stores/vs_1").status, 200);
  net::HttpResponse listed = Call("GET", "/v1/vector_stores?limit=10&order=desc");
  EXPECT_EQ(listed.status, 200);
  EXPECT_TRUE(Has(listed, R"({"object":"list","data":[{"id":"vs_1")")) << listed.body;
  EXPECT_TRUE(Has(listed, R"("first_id":"vs_1","last_id":"vs_1","has_more":false})"));

  net::HttpResponse modified =
      Call("POST", "/v1/vector_stores/vs_1", R"({"name":"Help","metadata":{"team":"support"}})");
  EXPECT_EQ(modified.status, 200);
  EXPECT_TRUE(Has(modified, R"("name":"Help")"));
  EXPECT_TRUE(Has(modified, R"("metadata":{"team":"support"})"));

  net::HttpResponse deleted = Call("DELETE", "/v1/vector_stores/vs_1");
  EXPECT_EQ(deleted.status, 200);
  EXPECT_EQ(deleted.body, R"({"id":"vs_1","object":"vector_store.deleted","deleted":true})");
  net::HttpResponse missing = Call("GET", "/v1/vector_stores/vs_1");
  EXPECT_EQ(missing.status, 404);
  EXPECT_TRUE(Has(missing, R"({"error":{"message":"No vector store found with id 'vs_1'.",)"
                           R"("type":"invalid_request_error")"))
      << missing.body;
}

TEST_F(VectorStoresHttpTest, FilesAndBatches) {
  ASSERT_EQ(Call("POST", "/v1/vector_stores", "{}").status, 200);
  net::HttpResponse added = Call("POST", "/v1/vector_stores/vs_1/files",
                                 R"({"file_id":"file-a","attributes":{"department":"sales"}})");
  ASSERT_EQ(added.status, 200) << added.body;
  EXPECT_TRUE(Has(added, R"("object":"vector_store.file")"));
  EXPECT_TRUE(Has(added, R"("attributes":{"department":"sales"})"));
  EXPECT_TRUE(Has(added, R"("chunking_strategy":{"type":"static","static":)"
                         R"({"max_chunk_size_tokens":800,"chunk_overlap_tokens":400}})"));

  // A file id the Files API does not hold is the request's fault.
  net::HttpResponse unknown =
      Call("POST", "/v1/vector_stores/vs_1/files", R"({"file_id":"file-zzz"})");
  EXPECT_EQ(unknown.status, 400) << unknown.body;

  EXPECT_EQ(Call("GET", "/v1/vector_stores/vs_1/files/file-a").status, 200);
  EXPECT_EQ(Call("GET", "/v1/vector_stores/vs_1/files/file-zzz").status, 404);
  net::HttpResponse updated = Call("POST", "/v1/vector_stores/vs_1/files/file-a",
                                   R"({"attributes":{"department":"legal","year":2024}})");
  EXPECT_TRUE(Has(updated, R"("attributes":{"department":"legal","year":2024})")) << updated.body;
  net::HttpResponse content = Call("GET", "/v1/vector_stores/vs_1/files/file-a/content");
  EXPECT_EQ(content.status, 200);
  EXPECT_TRUE(Has(content, R"("object":"vector_store.file_content.page")"));
  EXPECT_TRUE(Has(content, R"("data":[{"type":"text","text":"chunk one of a.txt"},)"))
      << content.body;

  net::HttpResponse batch = Call("POST", "/v1/vector_stores/vs_1/file_batches",
                                 R"({"files":[{"file_id":"file-b"},{"file_id":"file-c"}]})");
  ASSERT_EQ(batch.status, 200) << batch.body;
  EXPECT_TRUE(Has(batch, R"("object":"vector_store.files_batch")"));
  EXPECT_TRUE(Has(batch, R"("id":"vsfb_2")")) << batch.body;
  EXPECT_EQ(Call("GET", "/v1/vector_stores/vs_1/file_batches/vsfb_2").status, 200);
  EXPECT_EQ(Call("GET", "/v1/vector_stores/vs_1/file_batches/vsfb_9").status, 404);
  EXPECT_TRUE(Has(Call("POST", "/v1/vector_stores/vs_1/file_batches/vsfb_2/cancel"),
                  R"("status":"cancelled")"));
  net::HttpResponse batch_files =
      Call("GET", "/v1/vector_stores/vs_1/file_batches/vsfb_2/files?filter=completed");
  EXPECT_EQ(batch_files.status, 200) << batch_files.body;

  net::HttpResponse files = Call("GET", "/v1/vector_stores/vs_1/files?limit=2");
  EXPECT_TRUE(Has(files, R"("first_id":"file-a","last_id":"file-b","has_more":true})"))
      << files.body;
  EXPECT_EQ(Call("GET", "/v1/vector_stores/vs_1/files?filter=done").status, 400);

  net::HttpResponse removed = Call("DELETE", "/v1/vector_stores/vs_1/files/file-a");
  EXPECT_EQ(removed.body, R"({"id":"file-a","object":"vector_store.file.deleted","deleted":true})");
  EXPECT_EQ(Call("DELETE", "/v1/vector_stores/vs_1/files/file-a").status, 404);
}

TEST_F(VectorStoresHttpTest, SearchAnswersAResultsPage) {
  ASSERT_EQ(Call("POST", "/v1/vector_stores", R"({"file_ids":["file-a","file-b"]})").status, 200);
  net::HttpResponse found =
      Call("POST", "/v1/vector_stores/vs_1/search",
           R"({"query":"refunds","max_num_results":1,"filters":{"type":"eq","key":"d","value":1},)"
           R"("ranking_options":{"score_threshold":0.2},"rewrite_query":false})");
  ASSERT_EQ(found.status, 200) << found.body;
  EXPECT_EQ(found.body,
            R"({"object":"vector_store.search_results.page","search_query":"refunds","data":[)"
            R"({"file_id":"file-a","filename":"a.txt","score":0.9,"attributes":{},)"
            R"("content":[{"type":"text","text":"about a.txt"}]}],"has_more":false,)"
            R"("next_page":null})");
  std::optional<knowledge::hub::SearchRequest> asked = service_.last_search();
  ASSERT_TRUE(asked.has_value());
  EXPECT_EQ(asked->max_num_results, 1);
  EXPECT_DOUBLE_EQ(asked->score_threshold, 0.2);
  ASSERT_TRUE(asked->filter.has_value());
  EXPECT_EQ(asked->filter->key, "d");
  EXPECT_FALSE(asked->may_read) << "open access reads every file";

  net::HttpResponse bad = Call("POST", "/v1/vector_stores/vs_1/search",
                               R"({"query":"q","filters":{"type":"eq","key":"d","value":[1]}})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_TRUE(Has(bad, R"("type":"invalid_request_error","param":"filters.value")")) << bad.body;
  EXPECT_EQ(Call("POST", "/v1/vector_stores/vs_9/search", R"({"query":"q"})").status, 404);
  EXPECT_EQ(Call("POST", "/v1/vector_stores/vs_1/search", "not json").status, 400);
}

TEST_F(VectorStoresHttpTest, RoutesAndMethods) {
  EXPECT_EQ(Call("PUT", "/v1/vector_stores").status, 405);
  EXPECT_EQ(Call("PATCH", "/v1/vector_stores/vs_1").status, 405);
  EXPECT_EQ(Call("GET", "/v1/vector_stores/vs_1/search").status, 405);
  EXPECT_EQ(Call("DELETE", "/v1/vector_stores/vs_1/file_batches/b/cancel").status, 405);
  EXPECT_EQ(Call("GET", "/v1/vector_stores/vs_1/other").status, 404);
  EXPECT_EQ(Call("GET", "/v1/vector_stores//files").status, 404);
  EXPECT_EQ(Call("GET", "/v1/vector_stores/vs_1/files/f/content/x").status, 404);
  EXPECT_TRUE(VectorStoresHttp::Owns("/v1/vector_stores"));
  EXPECT_TRUE(VectorStoresHttp::Owns("/v1/vector_stores/vs_1/search"));
  EXPECT_FALSE(VectorStoresHttp::Owns("/v1/vector_storesx"));
  EXPECT_FALSE(VectorStoresHttp::Owns("/v1/files"));
}

TEST_F(VectorStoresHttpTest, AFullQueueAnswers429) {
  VectorStoresHttp front(service_, {.worker_threads = 1, .max_queued_requests = 1});
  service_.Close();
  std::future<net::HttpResponse> running = Send(front, Request("GET", "/v1/vector_stores"));
  ASSERT_TRUE(testing::Eventually([&] { return service_.waiting() == 1; }));
  std::future<net::HttpResponse> queued = Send(front, Request("GET", "/v1/vector_stores"));
  net::HttpResponse refused = api::Call(front, "GET", "/v1/vector_stores");
  EXPECT_EQ(refused.status, 429);
  EXPECT_TRUE(Has(refused, R"("type":"rate_limit_error")")) << refused.body;
  service_.Open();
  EXPECT_EQ(running.get().status, 200);
  EXPECT_EQ(queued.get().status, 200);
}

constexpr std::string_view kDepartmentPolicy = R"(
roles:
  - name: reader
  - name: contractor
rules:
  - id: contractors-redacted
    effect: permit
    principal: {role: contractor}
    action: ["vector_stores:*"]
    obligations: [redact:pii]
  - id: stores
    effect: permit
    principal: {role: reader}
    action: ["vector_stores:*"]
  - id: own-department
    effect: permit
    principal: {role: reader}
    action: files:read
    resource: {type: file}
    when:
      - resource.department == principal.department
)";

class VectorStoresAccessTest : public ::testing::Test {
 protected:
  VectorStoresAccessTest() {
    sales_key_ = AddReader("sam", "sales");
    legal_key_ = AddReader("lee", "legal");
    contractor_key_ = AddReader("cat", "sales", "contractor");
    EXPECT_TRUE(access_.keys().Refresh().ok());
  }
  std::string AddReader(const std::string& name, const std::string& department,
                        const std::string& role = "reader") {
    EXPECT_TRUE(access_.store()
                    .PutPrincipal({.tenant = "acme",
                                   .name = name,
                                   .roles = {role},
                                   .attributes = {{"department", department}}})
                    .ok());
    identity::NewApiKey made = identity::GenerateApiKey("acme", name, name, {}, 1);
    EXPECT_TRUE(access_.store().CreateApiKey(made.record).ok());
    return made.key;
  }
  // The file ids a search by `key` finds, in order.
  std::string Found(const std::string& key) {
    net::HttpResponse found =
        api::Call(front_, "POST", "/v1/vector_stores/vs_1/search", R"({"query":"q"})", key);
    EXPECT_EQ(found.status, 200) << found.body;
    std::string ids;
    for (size_t at = found.body.find("\"file_id\":\""); at != std::string::npos;
         at = found.body.find("\"file_id\":\"", at + 1)) {
      const size_t begin = at + 11;
      ids += found.body.substr(begin, found.body.find('"', begin) - begin) + " ";
    }
    return ids;
  }

  testing::AccessFixture access_{kDepartmentPolicy};
  testing::CapturingSink sink_{{}};
  FakeVectorStores service_;
  VectorStoresHttp front_{service_, {.access = &access_.control(), .audit = &sink_}};
  std::string sales_key_;
  std::string legal_key_;
  std::string contractor_key_;
};

TEST_F(VectorStoresAccessTest, EachCallerSeesOnlyTheDocumentsItMayRead) {
  ASSERT_EQ(api::Call(front_, "POST", "/v1/vector_stores", "{}", sales_key_).status, 200);
  ASSERT_EQ(api::Call(front_, "POST", "/v1/vector_stores/vs_1/file_batches",
                      R"({"files":[{"file_id":"file-a","attributes":{"department":"sales"}},)"
                      R"({"file_id":"file-b","attributes":{"department":"legal"}},)"
                      R"({"file_id":"file-c","attributes":{"department":"sales"}}]})",
                      sales_key_)
                .status,
            200);
  EXPECT_EQ(Found(sales_key_), "file-a file-c ");
  EXPECT_EQ(Found(legal_key_), "file-b ");
  // The fake asks twice per file (as both indexes would); policy decided once per file.
  EXPECT_EQ(service_.may_read_calls(), 6);
  // Same tenant: both see the store itself, but only their own documents in it.
  EXPECT_EQ(api::Call(front_, "GET", "/v1/vector_stores/vs_1", "", legal_key_).status, 200);
  net::HttpResponse listed =
      api::Call(front_, "GET", "/v1/vector_stores/vs_1/files", "", legal_key_);
  EXPECT_TRUE(Has(listed, R"("first_id":"file-b","last_id":"file-b")")) << listed.body;
  EXPECT_EQ(api::Call(front_, "GET", "/v1/vector_stores/vs_1/files/file-a", "", legal_key_).status,
            404);
  EXPECT_EQ(api::Call(front_, "GET", "/v1/vector_stores/vs_1/files/file-a/content", "", legal_key_)
                .status,
            404);
  EXPECT_EQ(api::Call(front_, "GET", "/v1/vector_stores/vs_1/files/file-a/content", "", sales_key_)
                .status,
            200);
}

TEST_F(VectorStoresAccessTest, FilesAddedUnderRedactPiiAreRedactedAtIngestion) {
  const auto redacted = [&](const std::string& store, const std::string& file) {
    auto info = service_.GetFile("acme", store, file);
    EXPECT_TRUE(info.ok()) << store << " " << file;
    return info.ok() && info->redact_pii;
  };
  ASSERT_EQ(api::Call(front_, "POST", "/v1/vector_stores", R"({"file_ids":["file-a"]})", sales_key_)
                .status,
            200);
  EXPECT_FALSE(redacted("vs_1", "file-a"));
  // The contractor's grant carries redact:pii: whatever it adds, and however, is redacted.
  ASSERT_EQ(api::Call(front_, "POST", "/v1/vector_stores/vs_1/files", R"({"file_id":"file-b"})",
                      contractor_key_)
                .status,
            200);
  EXPECT_TRUE(redacted("vs_1", "file-b"));
  ASSERT_EQ(api::Call(front_, "POST", "/v1/vector_stores/vs_1/file_batches",
                      R"({"files":[{"file_id":"file-c"}]})", contractor_key_)
                .status,
            200);
  EXPECT_TRUE(redacted("vs_1", "file-c"));
  net::HttpResponse created =
      api::Call(front_, "POST", "/v1/vector_stores", R"({"file_ids":["file-a"]})", contractor_key_);
  ASSERT_EQ(created.status, 200) << created.body;
  const size_t id_at = created.body.find(R"("id":")");
  ASSERT_NE(id_at, std::string::npos) << created.body;
  const std::string id =
      created.body.substr(id_at + 6, created.body.find('"', id_at + 6) - id_at - 6);
  EXPECT_TRUE(redacted(id, "file-a")) << created.body;
  EXPECT_FALSE(redacted("vs_1", "file-a"));
}

TEST_F(VectorStoresAccessTest, CallersAreAuthenticatedBeforeTheirBodiesAreRead) {
  net::HttpResponse anonymous = api::Call(front_, "POST", "/v1/vector_stores", "not json");
  EXPECT_EQ(anonymous.status, 401) << anonymous.body;
  EXPECT_TRUE(Has(anonymous, R"("type":"authentication_error")")) << anonymous.body;
  // A caller with no vector_stores rule is refused.
  net::HttpResponse refused =
      api::Call(front_, "GET", "/v1/vector_stores", "", access_.viewer_key());
  EXPECT_EQ(refused.status, 403) << refused.body;

  ASSERT_EQ(api::Call(front_, "POST", "/v1/vector_stores", "{}", sales_key_).status, 200);
  // Another tenant's store is as unknown as a missing one.
  net::HttpResponse other =
      api::Call(front_, "GET", "/v1/vector_stores/vs_1", "", access_.thrifty_key());
  EXPECT_NE(other.status, 200);

  ASSERT_TRUE(testing::Eventually([&] { return sink_.captured().size() >= 4; }));
  const std::vector<testing::CapturingSink::Captured> records = sink_.captured();
  EXPECT_EQ(records[0].record.api, "vector_stores");
  EXPECT_EQ(records[0].record.action, "vector_stores:create");
  EXPECT_FALSE(records[0].record.allowed);
  EXPECT_EQ(records[2].record.resource, "vs_1") << "a created store's record names it";
  EXPECT_EQ(records[2].record.resource_type, "vector_store");
}

}  // namespace
}  // namespace rampart::api
