// The guard stages on their own: a call's request and answer through guard_input and
// guard_output under a policy, with the fake detector (testing/fake_detector.h).

#include "gateway/guard_stages.h"

#include <gtest/gtest.h>

#include "gateway/guard_json.h"
#include "guard/redact.h"
#include "metrics/registry.h"
#include "testing/fake_detector.h"

namespace rampart::gateway {
namespace {

class GuardStagesTest : public ::testing::Test {
 protected:
  GuardStagesTest()
      : metrics_(registry_),
        input_(MakeGuardInputStage(metrics_)),
        output_(MakeGuardOutputStage(metrics_)) {
    keys_ = std::make_shared<guard::GuardKeys>(
        guard::GuardKeys::FromBytes(std::string(32, 'g')).value());
    runtime_.detector = std::make_shared<testing::FakeDetector>();
    runtime_.keys = keys_;
    runtime_.tenant_keys = keys_->ForTenant(guard::kDefaultTenant);
    runtime_.config = &config_;
  }

  CallContext Call(Operation operation, std::string body, bool stream = false) {
    CallContext call;
    call.operation = operation;
    call.request.operation = operation;
    call.request.body = std::move(body);
    call.request.stream = stream;
    call.plan.route = "direct";
    call.guard = &runtime_;
    return call;
  }

  bool MetricsShow(std::string_view line) {
    return registry_.Exposition().find(line) != std::string::npos;
  }

  GatewayConfig config_;
  metrics::Registry registry_;
  GatewayMetrics metrics_;
  std::unique_ptr<Stage> input_;
  std::unique_ptr<Stage> output_;
  std::shared_ptr<guard::GuardKeys> keys_;
  GuardRuntime runtime_;
};

TEST_F(GuardStagesTest, RedactsEveryTextOfAChatRequestAndNothingElse) {
  config_.guard.defaults.input = GuardMode::kRedact;
  config_.guard.defaults.operators["EMAIL_ADDRESS"] = {.kind = guard::OperatorKind::kReplace};
  CallContext call =
      Call(Operation::kChatCompletions,
           R"({"model":"m","temperature":0.5,"messages":[)"
           R"({"role":"system","content":"客服电话13800138000"},)"
           R"({"role":"user","content":[{"type":"text","text":"我是 a@b.com"},)"
           R"({"type":"image_url","image_url":{"url":"http://x/13800138000.png"}}]},)"
           R"({"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",)"
           R"("function":{"name":"call","arguments":"{\"phone\":\"13912345678\"}"}}]},)"
           R"({"role":"tool","tool_call_id":"c1","content":"reached 13912345678"}]})");
  ASSERT_TRUE(input_->OnRequest(call).ok());
  const std::string& body = call.request.body;
  EXPECT_NE(body.find(R"("content":"客服电话138****8000")"), std::string::npos) << body;
  EXPECT_NE(body.find(R"("text":"我是 [EMAIL_ADDRESS]")"), std::string::npos) << body;
  EXPECT_NE(body.find(R"(\"phone\":\"139****5678\")"), std::string::npos) << body;
  EXPECT_NE(body.find(R"("content":"reached 139****5678")"), std::string::npos) << body;
  // Not a text a model reads as such: left alone.
  EXPECT_NE(body.find("http://x/13800138000.png"), std::string::npos) << body;
  EXPECT_NE(body.find(R"("temperature":0.5)"), std::string::npos) << body;
  EXPECT_EQ(call.guard_findings.input.at(guard::kCnMobile), 3);
  EXPECT_EQ(call.guard_findings.input.at(guard::kEmailAddress), 1);
  EXPECT_TRUE(MetricsShow(
      R"(rampart_guard_entities_total{type="CN_MOBILE",direction="input",action="redacted"} 3)"));
}

TEST_F(GuardStagesTest, GuardsEmbeddingInputsForLocalModelsToo) {
  config_.guard.defaults.input = GuardMode::kReplace;
  CallContext call =
      Call(Operation::kEmbeddings, R"({"model":"e","input":["fine","call 13800138000"]})");
  call.request.inputs = {"fine", "call 13800138000"};
  ASSERT_TRUE(input_->OnRequest(call).ok());
  EXPECT_EQ(call.request.inputs, (std::vector<std::string>{"fine", "call [CN_MOBILE]"}));
  EXPECT_EQ(call.request.body, R"({"model":"e","input":["fine","call [CN_MOBILE]"]})");
}

TEST_F(GuardStagesTest, BlockedTypesRefuseWithTheirNamesNotTheirValues) {
  config_.guard.defaults.input = GuardMode::kRedact;
  config_.guard.defaults.block = {"SECRET"};
  RouteConfig route{.name = "open", .target = "m"};
  route.guard = GuardPolicy{.input = GuardMode::kOff};
  config_.routes.push_back(route);
  const std::string body =
      R"({"model":"m","messages":[{"role":"user","content":"sk-abcdefghijklmnopqrst and 13800138000"}]})";
  CallContext call = Call(Operation::kChatCompletions, body);
  const Status refused = input_->OnRequest(call);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(), "the text contains data the guard blocks: SECRET");
  EXPECT_TRUE(call.guard_findings.blocked);
  EXPECT_TRUE(MetricsShow(R"(rampart_guard_blocked_requests_total{route="direct"} 1)"));
  EXPECT_TRUE(MetricsShow(
      R"(rampart_guard_entities_total{type="SECRET",direction="input",action="blocked"} 1)"));
  // The route's own policy is off.
  CallContext open = Call(Operation::kChatCompletions, body);
  open.plan.route = "open";
  EXPECT_TRUE(input_->OnRequest(open).ok());
  EXPECT_EQ(open.request.body, body);
}

TEST_F(GuardStagesTest, DetectModeCountsAndChangesNothing) {
  config_.guard.defaults.input = GuardMode::kDetect;
  const std::string body = R"({"model":"m","prompt":["13800138000","x"]})";
  CallContext call = Call(Operation::kCompletions, body);
  ASSERT_TRUE(input_->OnRequest(call).ok());
  EXPECT_EQ(call.request.body, body);
  EXPECT_TRUE(MetricsShow(
      R"(rampart_guard_entities_total{type="CN_MOBILE",direction="input",action="detected"} 1)"));
}

TEST_F(GuardStagesTest, MasksAWholeAnswer) {
  config_.guard.defaults.output = GuardMode::kMask;
  CallContext call = Call(Operation::kChatCompletions, "{}");
  std::string answer =
      R"({"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"拨打13800138000"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1}})";
  ASSERT_TRUE(output_->OnAnswer(call, answer).ok());
  EXPECT_EQ(
      answer,
      R"({"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"拨打138****8000"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1}})");
  EXPECT_EQ(call.guard_findings.output.at(guard::kCnMobile), 1);
}

// The content of each event of a stream whose text is split as `pieces`, through guard_output;
// the events added at the end included.
std::string StreamedContent(Stage& output, CallContext& call,
                            const std::vector<std::string>& pieces, Status* ended = nullptr) {
  std::string content;
  const auto take = [&content](std::string_view event) {
    const std::string_view marker = R"("content":")";
    const size_t start = event.find(marker);
    if (start == std::string_view::npos) return;
    const size_t end = event.find('"', start + marker.size());
    content.append(event.substr(start + marker.size(), end - start - marker.size()));
  };
  for (const std::string& piece : pieces) {
    std::string event =
        R"({"id":"s","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"content":")" +
        piece + R"("},"finish_reason":null}]})";
    EXPECT_TRUE(output.OnAnswer(call, event).ok());
    take(event);
  }
  std::vector<std::string> added;
  const Status end = output.OnAnswerEnd(call, added);
  if (ended) *ended = end;
  for (const std::string& event : added) {
    EXPECT_NE(event.find(R"("id":"s","object":"chat.completion.chunk","created":7,"model":"m")"),
              std::string::npos);
    take(event);
  }
  return content;
}

TEST_F(GuardStagesTest, AStreamedEntitySplitAnywhereIsStillCaught) {
  config_.guard.defaults.output = GuardMode::kRedact;
  const std::string text = "我的手机13800138000，邮箱zs@example.com 谢谢";
  const std::string whole =
      guard::Redact(text, runtime_.detector->Detect(text).value(),
                    OperatorsFor(config_.guard.defaults, GuardMode::kRedact), runtime_.tenant_keys)
          .text;
  EXPECT_EQ(whole.find("13800138000"), std::string::npos);
  for (size_t split = 0; split <= text.size(); ++split) {
    CallContext call = Call(Operation::kChatCompletions, "{}", true);
    // Splits inside a character are not possible in JSON strings: keep them whole.
    if (split < text.size() && (static_cast<uint8_t>(text[split]) & 0xC0) == 0x80) continue;
    EXPECT_EQ(StreamedContent(*output_, call, {text.substr(0, split), text.substr(split)}), whole)
        << "split at " << split;
  }
}

TEST_F(GuardStagesTest, ABlockedTypeInAStreamEndsIt) {
  config_.guard.defaults.output = GuardMode::kRedact;
  config_.guard.defaults.block = {"SECRET"};
  CallContext call = Call(Operation::kChatCompletions, "{}", true);
  std::string first =
      R"({"id":"s","choices":[{"index":0,"delta":{"content":"key sk-abcdefgh"},"finish_reason":null}]})";
  ASSERT_TRUE(output_->OnAnswer(call, first).ok());
  EXPECT_EQ(first.find("sk-"), std::string::npos) << first;  // held back
  std::string second =
      R"({"id":"s","choices":[{"index":0,"delta":{"content":"ijklmnopqrst. "},"finish_reason":null}]})";
  const Status refused = output_->OnAnswer(call, second);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message().find("sk-"), std::string::npos);
}

// The caller's tenant's keys make the tokens: tenant acme's restore with acme's keys only.
TEST_F(GuardStagesTest, TokensAreMadeWithTheCallersTenantsKeys) {
  config_.guard.defaults.input = GuardMode::kRedact;
  config_.guard.defaults.operators["CN_MOBILE"] = {.kind = guard::OperatorKind::kTokenize};
  CallContext call = Call(Operation::kChatCompletions,
                          R"({"model":"m","messages":[{"role":"user","content":"13800138000"}]})");
  call.identity.tenant = "acme";
  ASSERT_TRUE(input_->OnRequest(call).ok());
  const std::string& body = call.request.body;
  const size_t open = body.find("<<PII:CN_MOBILE:");
  ASSERT_NE(open, std::string::npos) << body;
  const std::string token = body.substr(open, body.find(">>", open) + 2 - open);
  EXPECT_EQ(guard::RestoreTokens(token, keys_->ForTenant("acme")), "13800138000");
  EXPECT_EQ(guard::RestoreTokens(token, runtime_.tenant_keys), token);
  EXPECT_EQ(guard::RestoreTokens(token, keys_->ForTenant("other")), token);
}

TEST(GuardJsonTest, RewritesOnlyGuardedTextsKeepingEverythingElse) {
  const std::string body =
      R"({"choices":[{"index":1,"delta":{"content":"a","role":"assistant","tool_calls":[{"index":2,"function":{"arguments":"b"}}]}}],"x":[1,2.5,"c"]})";
  std::vector<std::string> seen;
  Result<std::optional<std::string>> rewritten = RewriteTexts(
      body, GuardedShape::kChatChunk,
      [&seen](const GuardedText& text) -> Result<std::optional<std::string>> {
        seen.push_back(fmt::format("{}|{}|{}|{}", text.path, text.choice, text.tool, text.field));
        return std::optional<std::string>(std::string(text.text) + "!");
      });
  ASSERT_TRUE(rewritten.ok());
  EXPECT_EQ(seen, (std::vector<std::string>{
                      "choices.1.delta.content|1|-1|content",
                      "choices.1.delta.tool_calls.2.function.arguments|1|2|arguments"}));
  EXPECT_EQ(
      **rewritten,
      R"({"choices":[{"index":1,"delta":{"content":"a!","role":"assistant","tool_calls":[{"index":2,"function":{"arguments":"b!"}}]}}],"x":[1,2.5,"c"]})");
  Result<std::optional<std::string>> untouched = RewriteTexts(
      body, GuardedShape::kChatChunk, [](const GuardedText&) -> Result<std::optional<std::string>> {
        return std::optional<std::string>();
      });
  ASSERT_TRUE(untouched.ok());
  EXPECT_FALSE(untouched->has_value());
  EXPECT_FALSE(RewriteTexts("{nope", GuardedShape::kChatChunk, {}).ok());
}

}  // namespace
}  // namespace rampart::gateway
