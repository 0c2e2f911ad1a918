// The gateway's audit stage: one record per call from the CallContext, with the answer as the
// caller got it.

#include "gateway/audit_stage.h"

#include <gtest/gtest.h>

#include "testing/capturing_sink.h"

namespace rampart::gateway {
namespace {

using ::rampart::testing::CapturingSink;

CallContext AnsweredCall() {
  CallContext call;
  call.operation = Operation::kChatCompletions;
  call.request_id = "req-7";
  call.trace_id = "0af7651916cd43dd8448eb211c80319c";
  call.received = Clock::Real().Now();
  call.http.peer = std::make_shared<Peer>(Peer{.address = "192.0.2.9"});
  call.request.body = R"({"model":"chat","messages":[{"role":"user","content":"hi"}]})";
  call.request.model = "chat";
  call.identity = {
      .method = identity::Method::kApiKey, .tenant = "acme", .principal = "alice", .key_id = "k1"};
  call.decision = {.allowed = true, .rules = {"analysts"}, .obligations = {"audit:full"}};
  call.guard_findings.input = {{"EMAIL", 2}};
  call.guard_findings.output = {{"PHONE", 1}};
  call.plan.route = "support";
  call.target = "chat-small";
  call.upstream = "openai";
  call.status = 200;
  call.usage = {.prompt_tokens = 12, .completion_tokens = 30, .total_tokens = 42};
  call.upstream_ns = 5'000'000;
  call.gateway_ns = 40'000;
  return call;
}

TEST(AuditStageTest, RecordsTheCallFromItsContext) {
  CapturingSink sink({});
  std::unique_ptr<Stage> stage = MakeAuditStage(&sink);
  CallContext call = AnsweredCall();
  std::string first = R"({"choices":[{"delta":{"content":"he"}}]})";
  std::string second = R"({"choices":[{"delta":{"content":"llo"}}]})";
  ASSERT_TRUE(stage->OnAnswer(call, first).ok());
  ASSERT_TRUE(stage->OnAnswer(call, second).ok());
  stage->OnComplete(call);

  const std::vector<CapturingSink::Captured> captured = sink.captured();
  ASSERT_EQ(captured.size(), 1u);
  const audit::AuditRecord& record = captured[0].record;
  EXPECT_EQ(record.api, "openai");
  EXPECT_EQ(record.request_id, "req-7");
  EXPECT_EQ(record.trace_id, call.trace_id);
  EXPECT_EQ(record.tenant, "acme");
  EXPECT_EQ(record.principal, "alice");
  EXPECT_EQ(record.auth_method, "api_key");
  EXPECT_EQ(record.key_id, "k1");
  EXPECT_EQ(record.source_address, "192.0.2.9");
  EXPECT_EQ(record.action, "chat:create");
  EXPECT_EQ(record.resource, "chat");
  EXPECT_TRUE(record.allowed);
  EXPECT_EQ(record.rules, std::vector<std::string>{"analysts"});
  EXPECT_EQ(record.obligations, std::vector<std::string>{"audit:full"});
  EXPECT_EQ(record.pii_input, (audit::NamedCounts<int>{{"EMAIL", 2}}));
  EXPECT_EQ(record.pii_output, (audit::NamedCounts<int>{{"PHONE", 1}}));
  EXPECT_EQ(record.route, "support");
  EXPECT_EQ(record.target, "chat-small");
  EXPECT_EQ(record.tokens_in, 12);
  EXPECT_EQ(record.tokens_out, 30);
  EXPECT_EQ(record.stages_ns.at("upstream"), 5'000'000);
  EXPECT_EQ(record.stages_ns.at("gateway"), 40'000);
  EXPECT_EQ(record.status, 200);
  EXPECT_EQ(record.outcome, "ok");
  EXPECT_EQ(captured[0].request, call.request.body);
  EXPECT_EQ(captured[0].response, first + second);
  EXPECT_TRUE(captured[0].full);  // audit:full in an allowing decision
}

TEST(AuditStageTest, ARefusedCallIsRecordedNotAllowedAndNotSealed) {
  CapturingSink sink({});
  std::unique_ptr<Stage> stage = MakeAuditStage(&sink);
  CallContext call = AnsweredCall();
  call.decision = {.allowed = false, .rules = {"no-secret"}, .obligations = {"audit:full"}};
  call.status = 403;
  call.outcome = "forbidden";
  stage->OnComplete(call);
  const std::vector<CapturingSink::Captured> captured = sink.captured();
  ASSERT_EQ(captured.size(), 1u);
  EXPECT_FALSE(captured[0].record.allowed);
  EXPECT_EQ(captured[0].record.status, 403);
  EXPECT_FALSE(captured[0].full);
}

TEST(AuditStageTest, WithoutASinkNothingIsKept) {
  std::unique_ptr<Stage> stage = MakeAuditStage(nullptr);
  CallContext call = AnsweredCall();
  std::string answer = "{}";
  ASSERT_TRUE(stage->OnAnswer(call, answer).ok());
  EXPECT_TRUE(call.audited_answer.empty());
  stage->OnComplete(call);  // nothing to record into
}

}  // namespace
}  // namespace rampart::gateway
