// Answers with citations (gateway/knowledge.h) end to end inside one process: a `kb:` model or a
// route with `knowledge` searches a fake VectorStores, the fake upstream answers from the prompt
// with the numbered sources, and the caller gets the answer with `citations` and
// `search_results`, whole or streamed; with no passage, the fixed answer without a model call;
// with per-document access, a refused file in nothing.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gateway/knowledge.h"
#include "json/reader.h"
#include "testing/access_fixture.h"
#include "testing/capturing_sink.h"
#include "testing/fake_upstream.h"
#include "testing/fake_vector_stores.h"
#include "testing/gateway_harness.h"

namespace rampart::gateway {
namespace {

using knowledge::hub::SearchHit;
using testing::FakeUpstream;
using testing::FakeVectorStores;
using testing::UpstreamFault;

constexpr std::string_view kAsk =
    R"({"model":"kb:vs_docs","messages":[{"role":"user","content":"How do I install it?"}]})";
constexpr std::string_view kAskStream =
    R"({"model":"kb:vs_docs","stream":true,)"
    R"("messages":[{"role":"user","content":"How do I install it?"}]})";

std::vector<SearchHit> Passages() {
  SearchHit install{.file_id = "file-a",
                    .filename = "guide.md",
                    .score = 0.9,
                    .text = "Run apt install rampart.",
                    .chunk_index = 3,
                    .heading_path = "Install > Debian"};
  install.attributes["classification"] = std::string("public");
  SearchHit faq{.file_id = "file-b",
                .filename = "faq.txt",
                .score = 0.7,
                .text = "Rampart runs on Debian 12.",
                .chunk_index = 0};
  faq.attributes["classification"] = std::string("secret");
  SearchHit weak{.file_id = "file-c", .filename = "other.txt", .score = 0.1, .text = "Unrelated."};
  return {install, faq, weak};
}

// The data of each event of a streamed answer.
std::vector<std::string> Events(const std::string& body) {
  std::vector<std::string> events;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    events.push_back(body.substr(at + 6, end - at - 6));
    at = end;
  }
  return events;
}

class KnowledgeAnswerTest : public ::testing::Test, protected GatewayHarness {
 protected:
  GatewayConfig Config() {
    GatewayConfig config;
    config.upstreams.push_back({.name = "a", .url = upstream_.url() + "/v1"});
    config.targets.push_back(
        {.name = "chat", .endpoints = {{.upstream = "a", .model = "fake-model"}}});
    config.knowledge.target = "chat";
    config.knowledge.score_threshold = 0.3;
    config.keep_alive = std::chrono::milliseconds(100);
    return config;
  }
  GatewayOptions Options() {
    stores_.Put("default", "vs_docs", Passages());
    return GatewayOptions{.vector_stores = &stores_};
  }

  void TearDown() override {
    stores_.Release();  // a search held by a failed test would keep the gateway from stopping
    Stop();
  }

  json::Value Parse(std::string_view text) {
    auto parsed = parser_.Parse(text);
    EXPECT_TRUE(parsed.ok()) << text;
    return parsed.ok() ? *parsed : json::Value();
  }

  // The citations and search_results urls of `object`.
  void ExpectCited(const json::Value& object, std::vector<std::string> urls) {
    const auto citations = object.Find("citations");
    const auto results = object.Find("search_results");
    ASSERT_TRUE(citations && results);
    std::vector<std::string> cited, found;
    for (auto element : citations->Array()) cited.emplace_back(element.get_string().value());
    for (auto element : results->Array()) {
      found.emplace_back(json::Value(element).Find("url")->GetString("url").value());
    }
    EXPECT_EQ(cited, urls);
    EXPECT_EQ(found, urls);
  }

  FakeUpstream upstream_;
  FakeVectorStores stores_;
  json::Parser parser_;
};

TEST(KnowledgePromptTest, NumbersTheSourcesWithFileAndHeading) {
  const KnowledgeSources sources{.vector_store = "vs_docs", .hits = {Passages()[0], Passages()[1]}};
  const std::string prompt = KnowledgePrompt(sources);
  EXPECT_NE(prompt.find("[1] guide.md > Install > Debian: Run apt install rampart.\n"
                        "[2] faq.txt: Rampart runs on Debian 12.\n"),
            std::string::npos)
      << prompt;
  EXPECT_NE(prompt.find("like [1]"), std::string::npos);
  EXPECT_NE(prompt.find("say that you do not know"), std::string::npos);
  EXPECT_EQ(KnowledgeSourceUrl("vs_docs", sources.hits[0]),
            "rampart://vector_stores/vs_docs/files/file-a#chunk-3");
}

TEST(KnowledgePromptTest, PutsTheSystemMessageFirstAndKeepsTheRest) {
  auto body = KnowledgeRequestBody(
      R"({"model":"kb:vs_x","temperature":0.2,"messages":[{"role":"user","content":"q"}]})",
      "SOURCES \"quoted\"");
  ASSERT_TRUE(body.ok()) << body.status().ToString();
  EXPECT_EQ(*body, R"({"model":"kb:vs_x","temperature":0.2,"messages":[{"role":"system","content":)"
                   R"("SOURCES \"quoted\""},{"role":"user","content":"q"}]})");
  EXPECT_FALSE(KnowledgeRequestBody(R"({"messages":3})", "x").ok());
  EXPECT_FALSE(KnowledgeRequestBody("[]", "x").ok());
}

TEST(KnowledgePromptTest, CitationsReplaceAnyTheAnswerHad) {
  const KnowledgeSources sources{.vector_store = "vs_docs", .hits = {Passages()[0]}};
  auto cited = WithCitations(R"({"id":"x","citations":["old"],"choices":[]})", sources);
  ASSERT_TRUE(cited.ok());
  EXPECT_EQ(*cited,
            R"({"id":"x","choices":[],"citations":["rampart://vector_stores/vs_docs/files/)"
            R"(file-a#chunk-3"],"search_results":[{"title":"guide.md > Install > Debian","url":)"
            R"("rampart://vector_stores/vs_docs/files/file-a#chunk-3","date":null,"snippet":)"
            R"("Run apt install rampart."}]})");
  EXPECT_FALSE(WithCitations("not json", sources).ok());
}

TEST_F(KnowledgeAnswerTest, AnswersFromTheNumberedSourcesWithCitations) {
  Start(Config(), Options());
  const Answer answer = Post("/v1/chat/completions", kAsk);
  ASSERT_EQ(answer.status, 200) << answer.body;
  // The store was searched for the last user message, as the caller's tenant.
  const auto searched = stores_.last_search();
  ASSERT_TRUE(searched);
  EXPECT_EQ(searched->tenant, "default");
  EXPECT_EQ(searched->store, "vs_docs");
  EXPECT_EQ(searched->queries, std::vector<std::string>{"How do I install it?"});
  EXPECT_EQ(searched->max_num_results, 5);
  EXPECT_DOUBLE_EQ(searched->score_threshold, 0.3);
  EXPECT_FALSE(searched->had_may_read);  // open access: every file
  // The target got the sources in a system message before the question.
  const std::string sent = upstream_.last_body();
  EXPECT_NE(sent.find(R"("model":"fake-model")"), std::string::npos);
  EXPECT_NE(sent.find("[1] guide.md > Install > Debian: Run apt install rampart.\\n"
                      "[2] faq.txt: Rampart runs on Debian 12.\\n"),
            std::string::npos)
      << sent;
  EXPECT_EQ(sent.find("Unrelated"), std::string::npos);  // under the threshold
  EXPECT_LT(sent.find(R"("role":"system")"), sent.find("How do I install it?"));
  // The answer is the target's with the citations.
  const json::Value root = Parse(answer.body);
  EXPECT_NE(answer.body.find("Hello from the fake"), std::string::npos);
  ExpectCited(root, {"rampart://vector_stores/vs_docs/files/file-a#chunk-3",
                     "rampart://vector_stores/vs_docs/files/file-b#chunk-0"});
  const auto first = json::Value(*root.Find("search_results")->Array().begin());
  EXPECT_EQ(first.Find("title")->GetString("title").value(), "guide.md > Install > Debian");
  EXPECT_EQ(first.Find("snippet")->GetString("snippet").value(), "Run apt install rampart.");
}

TEST_F(KnowledgeAnswerTest, StreamedAnswerCarriesTheCitationsOnItsFinishChunk) {
  Start(Config(), Options());
  const std::string stream =
      "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\","
      "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Run it [1].\"},\"finish_reason\":null}"
      "]}\n\n"
      "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\","
      "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
      "data: [DONE]\n\n";
  upstream_.SetBehaviour(
      {.fault = UpstreamFault::kRaw,
       .raw = fmt::format("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                          "Content-Length: {}\r\nConnection: close\r\n\r\n{}",
                          stream.size(), stream)});
  const Answer answer = Post("/v1/chat/completions", kAskStream);
  ASSERT_EQ(answer.status, 200) << answer.body;
  const std::vector<std::string> events = Events(answer.body);
  ASSERT_EQ(events.size(), 3u) << answer.body;
  EXPECT_EQ(events[0].find("citations"), std::string::npos);
  EXPECT_NE(events[1].find(R"("finish_reason":"stop")"), std::string::npos);
  ExpectCited(Parse(events[1]), {"rampart://vector_stores/vs_docs/files/file-a#chunk-3",
                                 "rampart://vector_stores/vs_docs/files/file-b#chunk-0"});
  EXPECT_EQ(events[2], "[DONE]");
}

TEST_F(KnowledgeAnswerTest, StreamWithoutAFinishChunkEndsWithACitationsChunk) {
  Start(Config(), Options());
  const Answer answer = Post("/v1/chat/completions", kAskStream);
  ASSERT_EQ(answer.status, 200) << answer.body;
  const std::vector<std::string> events = Events(answer.body);
  ASSERT_GE(events.size(), 3u) << answer.body;
  EXPECT_EQ(events.back(), "[DONE]");
  const std::string& closing = events[events.size() - 2];
  EXPECT_NE(closing.find(R"("choices":[])"), std::string::npos) << closing;
  ExpectCited(Parse(closing), {"rampart://vector_stores/vs_docs/files/file-a#chunk-3",
                               "rampart://vector_stores/vs_docs/files/file-b#chunk-0"});
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    EXPECT_EQ(events[i].find("citations"), std::string::npos) << events[i];
  }
}

TEST_F(KnowledgeAnswerTest, NoPassageAnswersWithoutCallingTheModel) {
  GatewayConfig config = Config();
  config.knowledge.score_threshold = 0.95;
  Start(std::move(config), Options());
  const Answer whole = Post("/v1/chat/completions", kAsk);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json::Value root = Parse(whole.body);
  EXPECT_NE(whole.body.find(kNoSourceAnswer), std::string::npos) << whole.body;
  EXPECT_EQ(root.Find("object")->GetString("object").value(), "chat.completion");
  ExpectCited(root, {});

  const Answer streamed = Post("/v1/chat/completions", kAskStream);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  const std::vector<std::string> events = Events(streamed.body);
  ASSERT_EQ(events.size(), 3u) << streamed.body;
  EXPECT_NE(events[0].find(kNoSourceAnswer), std::string::npos);
  EXPECT_NE(events[1].find(R"("finish_reason":"stop")"), std::string::npos);
  ExpectCited(Parse(events[1]), {});
  EXPECT_EQ(events[2], "[DONE]");

  const Answer with_usage =
      Post("/v1/chat/completions",
           R"({"model":"kb:vs_docs","stream":true,"stream_options":{"include_usage":true},)"
           R"("messages":[{"role":"user","content":"How do I install it?"}]})");
  const std::vector<std::string> usage_events = Events(with_usage.body);
  ASSERT_EQ(usage_events.size(), 4u) << with_usage.body;
  EXPECT_NE(usage_events[2].find(R"("usage":{"prompt_tokens":0)"), std::string::npos);
  EXPECT_EQ(upstream_.requests("/v1/chat/completions"), 0);
  EXPECT_EQ(stores_.searches(), 3);
}

TEST_F(KnowledgeAnswerTest, UnknownStoreIsNotFoundInOpenAisShape) {
  Start(Config(), Options());
  const Answer answer =
      Post("/v1/chat/completions",
           R"({"model":"kb:vs_nope","messages":[{"role":"user","content":"anything"}]})");
  EXPECT_EQ(answer.status, 404) << answer.body;
  const json::Value error = *Parse(answer.body).Find("error");
  EXPECT_EQ(error.Find("message")->GetString("message").value(),
            "No vector store found with id 'vs_nope'.");
  EXPECT_EQ(error.Find("type")->GetString("type").value(), ErrorType(404));
  EXPECT_EQ(upstream_.requests("/v1/chat/completions"), 0);
}

TEST_F(KnowledgeAnswerTest, AFailedSearchIsAServerErrorWithoutAModelCall) {
  Start(Config(), Options());
  stores_.FailWith(Unavailable("the embedder is down"));
  const Answer answer = Post("/v1/chat/completions", kAsk);
  EXPECT_EQ(answer.status, 503) << answer.body;
  EXPECT_NE(answer.body.find("the knowledge base search failed: the embedder is down"),
            std::string::npos);
  stores_.FailWith(InvalidArgument("query too long"));
  EXPECT_EQ(Post("/v1/chat/completions", kAsk).status, 400);
  EXPECT_EQ(upstream_.requests("/v1/chat/completions"), 0);
}

TEST_F(KnowledgeAnswerTest, OnlyChatCompletionsWithAUserMessageAreAnswered) {
  Start(Config(), Options());
  EXPECT_EQ(Post("/v1/completions", R"({"model":"kb:vs_docs","prompt":"install?"})").status, 400);
  EXPECT_EQ(Post("/v1/chat/completions",
                 R"({"model":"kb:vs_docs","messages":[{"role":"system","content":"hi"}]})")
                .status,
            400);
  EXPECT_EQ(stores_.searches(), 0);
}

TEST_F(KnowledgeAnswerTest, ACallerGoneDuringTheSearchEndsTheCallWithoutAModelCall) {
  GatewayOptions options = Options();
  options.knowledge_threads = 1;  // the next search runs only once this one's call went on
  Start(Config(), options);
  stores_.Hold();
  {
    boost::asio::io_context context;
    boost::asio::ip::tcp::socket socket(context);
    socket.connect({boost::asio::ip::make_address("127.0.0.1"), server_->port()});
    const std::string request = fmt::format(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: {}\r\n\r\n{}",
        kAsk.size(), kAsk);
    boost::asio::write(socket, boost::asio::buffer(request));
    EXPECT_TRUE(testing::Eventually([&] { return stores_.searches() == 1; }));
  }  // the caller goes away while the search runs
  const bool ended = MetricsShow(R"(code="499"} 1)");
  stores_.Release();  // before any assertion can end the test: the gateway waits for its search
  ASSERT_TRUE(ended);
  ASSERT_TRUE(testing::Eventually([&] { return stores_.finished() == 1; }));
  EXPECT_EQ(Post("/v1/chat/completions", kAsk).status, 200);
  EXPECT_EQ(upstream_.requests("/v1/chat/completions"), 1);  // the second call's only
}

TEST_F(KnowledgeAnswerTest, WithoutVectorStoresKnowledgeIsNotConfigured) {
  Start(Config());
  const Answer answer = Post("/v1/chat/completions", kAsk);
  EXPECT_EQ(answer.status, 404) << answer.body;
  EXPECT_NE(answer.body.find("knowledge base is not configured"), std::string::npos);
  EXPECT_EQ(upstream_.requests("/v1/chat/completions"), 0);
}

TEST_F(KnowledgeAnswerTest, VectorStoresAttachedAfterCreationAnswer) {
  // The app's order: the gateway first, then the vector stores that embed through it.
  Start(Config());
  stores_.Put("default", "vs_docs", Passages());
  gateway_->AttachVectorStores(&stores_);
  const Answer answer = Post("/v1/chat/completions", kAsk);
  ASSERT_EQ(answer.status, 200) << answer.body;
  ExpectCited(Parse(answer.body), {"rampart://vector_stores/vs_docs/files/file-a#chunk-3",
                                   "rampart://vector_stores/vs_docs/files/file-b#chunk-0"});
}

TEST_F(KnowledgeAnswerTest, WithoutAKnowledgeTargetKbModelsDoNotExist) {
  GatewayConfig config = Config();
  config.knowledge.target.clear();
  Start(std::move(config), Options());
  const Answer answer = Post("/v1/chat/completions", kAsk);
  EXPECT_EQ(answer.status, 404) << answer.body;
  EXPECT_NE(answer.body.find("gateway.knowledge.target"), std::string::npos);
  EXPECT_EQ(stores_.searches(), 0);
}

TEST_F(KnowledgeAnswerTest, ARouteWithKnowledgeAnswersFromItsStore) {
  GatewayConfig config = Config();
  RouteConfig route{.name = "handbook", .target = "chat"};
  route.match.models = {"handbook"};
  route.knowledge = KnowledgeRouteConfig{.vector_store = "vs_docs", .max_passages = 1};
  config.routes.push_back(route);
  Start(std::move(config), Options());
  const Answer answer =
      Post("/v1/chat/completions",
           R"({"model":"handbook","messages":[{"role":"user","content":"install?"}]})");
  ASSERT_EQ(answer.status, 200) << answer.body;
  EXPECT_EQ(stores_.last_search()->max_num_results, 1);
  ExpectCited(Parse(answer.body), {"rampart://vector_stores/vs_docs/files/file-a#chunk-3"});
  EXPECT_EQ(upstream_.last_body().find("faq.txt"), std::string::npos);
}

TEST(KnowledgeConfigTest, ValidatesTargetsStoresAndBounds) {
  GatewayConfig config;
  config.upstreams.push_back({.name = "a", .url = "http://127.0.0.1:1/v1"});
  config.targets.push_back({.name = "chat", .endpoints = {{.upstream = "a"}}});
  EXPECT_TRUE(Validate(config).ok());
  config.knowledge.target = "nope";
  EXPECT_FALSE(Validate(config).ok());
  config.knowledge.target = "chat";
  config.knowledge.max_passages = 0;
  EXPECT_FALSE(Validate(config).ok());
  config.knowledge.max_passages = 5;
  RouteConfig route{.name = "r", .target = "chat"};
  route.match.models = {"handbook"};
  route.knowledge = KnowledgeRouteConfig{.vector_store = "docs"};
  config.routes.push_back(route);
  EXPECT_FALSE(Validate(config).ok());  // not a vector store id
  config.routes[0].knowledge->vector_store = "vs_docs";
  EXPECT_TRUE(Validate(config).ok()) << Validate(config).ToString();
  config.routes[0].knowledge->target = "nope";
  EXPECT_FALSE(Validate(config).ok());
  config.routes[0].knowledge->target.clear();
  config.targets.push_back({.name = "kb:vs_docs", .endpoints = {{.upstream = "a"}}});
  EXPECT_FALSE(Validate(config).ok());  // kb: names are knowledge bases
}

constexpr std::string_view kFilePolicy = R"(
roles:
  - name: viewer
  - name: analyst
rules:
  - id: kb-chat
    effect: permit
    principal: {role: analyst}
    action: chat:create
    resource: {type: model, name: ["kb:*"]}
  - id: public-files
    effect: permit
    principal: {role: analyst}
    action: files:read
    resource: {type: file}
    when:
      - resource.classification == "public"
)";

TEST_F(KnowledgeAnswerTest, AFileTheCallerMayNotReadIsInNothing) {
  testing::AccessFixture access(kFilePolicy);
  testing::CapturingSink sink({});
  audit_ = &sink;
  GatewayOptions options = Options();
  options.access = &access.control();
  stores_.Put("acme", "vs_docs", Passages());
  Start(Config(), options);
  const std::vector<std::pair<std::string, std::string>> analyst = {
      {"authorization", "Bearer " + access.analyst_key()}};
  const Answer whole = Post("/v1/chat/completions", kAsk, analyst);
  ASSERT_EQ(whole.status, 200) << whole.body;
  EXPECT_TRUE(stores_.last_search()->had_may_read);
  EXPECT_EQ(stores_.last_search()->tenant, "acme");
  const std::string sent = upstream_.last_body();
  EXPECT_NE(sent.find("Run apt install rampart."), std::string::npos);
  EXPECT_EQ(sent.find("Rampart runs on Debian 12."), std::string::npos) << sent;
  EXPECT_EQ(sent.find("faq.txt"), std::string::npos);
  EXPECT_EQ(whole.body.find("file-b"), std::string::npos) << whole.body;
  ExpectCited(Parse(whole.body), {"rampart://vector_stores/vs_docs/files/file-a#chunk-3"});

  const Answer streamed = Post("/v1/chat/completions", kAskStream, analyst);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  EXPECT_EQ(streamed.body.find("file-b"), std::string::npos) << streamed.body;
  EXPECT_EQ(streamed.body.find("Debian 12"), std::string::npos);

  // The audit record notes the store and the file drawn on, never the refused one.
  ASSERT_TRUE(testing::Eventually([&] { return sink.captured().size() == 2; }));
  const audit::AuditRecord record = sink.captured()[0].record;
  EXPECT_EQ(record.resource_type, "vector_store");
  EXPECT_EQ(record.resource, "vs_docs");
  EXPECT_EQ(record.documents, std::vector<std::string>{"file-a"});
  EXPECT_TRUE(record.stages_ns.contains("search"));
  audit_ = nullptr;
}

}  // namespace
}  // namespace rampart::gateway
