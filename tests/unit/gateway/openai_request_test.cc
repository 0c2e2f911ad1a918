#include "gateway/openai_request.h"

#include <gtest/gtest.h>

#include "gateway/openai_response.h"

namespace rampart::gateway {
namespace {

Result<OpenAiRequest> Parse(Operation operation, std::string body, RequestError& error) {
  return ParseOpenAiRequest(operation, std::move(body), ParseLimits{.max_n = 4}, error);
}

TEST(OpenAiRequestTest, ReadsChatFields) {
  RequestError error;
  auto request = Parse(Operation::kChatCompletions, R"({"model":"m","stream":true,
      "stream_options":{"include_usage":true},"n":2,"messages":[
      {"role":"system","content":"be brief"},
      {"role":"user","content":[{"type":"text","text":"Invoice"},{"type":"image_url",
        "image_url":{"url":"x"}},{"type":"text","text":"total?"}]},
      {"role":"assistant","content":null,"tool_calls":[]}],"vendor_field":{"a":1}})",
                       error);
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  EXPECT_EQ(request->model, "m");
  EXPECT_TRUE(request->stream);
  EXPECT_TRUE(request->include_usage);
  EXPECT_EQ(request->n, 2);
  EXPECT_EQ(request->routed_text, "Invoice\ntotal?");
  EXPECT_EQ(request->prompt_chars, std::string("be brief").size() + request->routed_text.size());
  EXPECT_NE(std::find(request->fields.begin(), request->fields.end(), "vendor_field"),
            request->fields.end());
}

TEST(OpenAiRequestTest, NamesTheFieldAtFault) {
  const struct {
    Operation operation;
    std::string body;
    std::string param;
  } cases[] = {
      {Operation::kChatCompletions, R"({"messages":[{"role":"user","content":"x"}]})", "model"},
      {Operation::kChatCompletions, R"({"model":"m"})", "messages"},
      {Operation::kChatCompletions, R"({"model":"m","messages":[]})", "messages"},
      {Operation::kChatCompletions, R"({"model":7,"messages":[]})", "model"},
      {Operation::kChatCompletions, R"({"model":"m","messages":[{"content":"x"}]})",
       "messages[0].role"},
      {Operation::kChatCompletions, R"({"model":"m","messages":[{"role":"user","content":5}]})",
       "messages[0].content"},
      {Operation::kChatCompletions,
       R"({"model":"m","stream":"yes","messages":[{"role":"user","content":"x"}]})", "stream"},
      {Operation::kChatCompletions,
       R"({"model":"m","n":5,"messages":[{"role":"user","content":"x"}]})", "n"},
      {Operation::kCompletions, R"({"model":"m","prompt":{}})", "prompt"},
      {Operation::kEmbeddings, R"({"model":"m","input":[]})", "input"},
      {Operation::kEmbeddings, R"({"model":"m","input":"x","encoding_format":"hex"})",
       "encoding_format"},
      {Operation::kEmbeddings, R"({"model":"m","input":"x","dimensions":0})", "dimensions"},
      {Operation::kEmbeddings, R"({"model":"m","input":["a",[1,2]]})", "input"},
  };
  for (const auto& test : cases) {
    RequestError error;
    auto request = Parse(test.operation, test.body, error);
    ASSERT_FALSE(request.ok()) << test.body;
    EXPECT_EQ(request.status().code(), StatusCode::kInvalidArgument) << test.body;
    EXPECT_EQ(error.param, test.param) << test.body << ": " << request.status().message();
  }
}

TEST(OpenAiRequestTest, RefusesWhatIsNotAnObject) {
  for (std::string body : {"", "{", "[]", "\"x\"", "{\"model\":\"m\",}"}) {
    RequestError error;
    auto request = Parse(Operation::kChatCompletions, body, error);
    ASSERT_FALSE(request.ok()) << body;
    EXPECT_EQ(request.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(HttpStatusOf(request.status()), 400);
  }
}

TEST(OpenAiRequestTest, ReadsEmbeddingInputs) {
  RequestError error;
  auto texts = Parse(Operation::kEmbeddings,
                     R"({"model":"m","input":["a","bc"],"encoding_format":"base64"})", error);
  ASSERT_TRUE(texts.ok());
  EXPECT_EQ(texts->inputs, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(texts->encoding_format, EncodingFormat::kBase64);
  auto tokens = Parse(Operation::kEmbeddings, R"({"model":"m","input":[[1,2],[3]]})", error);
  ASSERT_TRUE(tokens.ok());
  EXPECT_TRUE(tokens->input_is_tokens);
  EXPECT_TRUE(tokens->inputs.empty());
  auto streamed =
      Parse(Operation::kEmbeddings, R"({"model":"m","input":"a","stream":true})", error);
  EXPECT_FALSE(streamed.ok());
}

TEST(OpenAiRequestTest, UpstreamBodyRewritesOnlyModelAndUsage) {
  RequestError error;
  auto request = Parse(Operation::kChatCompletions,
                       R"({"model":"alias","stream":true,"stream_options":{"x":1},)"
                       R"("messages":[{"role":"user","content":"hi \"there\""}],"seed":7})",
                       error);
  ASSERT_TRUE(request.ok());
  auto same = UpstreamBody(*request, "alias", false);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, request->body);  // untouched

  auto rewritten = UpstreamBody(*request, "org/model-7b", true);
  ASSERT_TRUE(rewritten.ok());
  EXPECT_EQ(
      *rewritten,
      R"({"model":"org/model-7b","stream":true,"stream_options":{"x":1,"include_usage":true},)"
      R"("messages":[{"role":"user","content":"hi \"there\""}],"seed":7})");

  auto plain =
      Parse(Operation::kChatCompletions,
            R"({"model":"a","stream":true,"messages":[{"role":"user","content":"x"}]})", error);
  ASSERT_TRUE(plain.ok());
  auto asked = UpstreamBody(*plain, "a", true);
  ASSERT_TRUE(asked.ok());
  EXPECT_EQ(*asked, R"({"model":"a","stream":true,"messages":[{"role":"user","content":"x"}],)"
                    R"("stream_options":{"include_usage":true}})");
}

TEST(OpenAiResponseTest, InspectsStreamEvents) {
  auto role =
      InspectStreamEvent(R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})",
                         Operation::kChatCompletions);
  ASSERT_TRUE(role.ok());
  EXPECT_FALSE(role->token);
  auto token = InspectStreamEvent(R"({"choices":[{"index":0,"delta":{"content":"Hel"}}]})",
                                  Operation::kChatCompletions);
  ASSERT_TRUE(token.ok());
  EXPECT_TRUE(token->token);
  EXPECT_EQ(token->content_chars, 3u);
  auto finish = InspectStreamEvent(R"({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})",
                                   Operation::kChatCompletions);
  ASSERT_TRUE(finish.ok());
  EXPECT_TRUE(finish->finished);
  auto usage = InspectStreamEvent(
      R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}})",
      Operation::kChatCompletions);
  ASSERT_TRUE(usage.ok());
  EXPECT_TRUE(usage->usage_only);
  EXPECT_EQ(usage->usage->completion_tokens, 5);
  auto error =
      InspectStreamEvent(R"({"error":{"message":"overloaded"}})", Operation::kChatCompletions);
  ASSERT_TRUE(error.ok());
  EXPECT_EQ(error->error.value_or(""), "overloaded");
  EXPECT_TRUE(InspectStreamEvent("[DONE]", Operation::kChatCompletions)->done);
  EXPECT_FALSE(InspectStreamEvent("{oops", Operation::kChatCompletions).ok());
  EXPECT_FALSE(InspectStreamEvent("[1]", Operation::kChatCompletions).ok());
}

TEST(OpenAiResponseTest, NormalisesUpstreamErrors) {
  EXPECT_EQ(UpstreamErrorMessage(R"({"error":{"message":"bad","type":"x"}})").value_or(""), "bad");
  EXPECT_EQ(
      UpstreamErrorMessage(R"({"object":"error","message":"vllm says","code":400})").value_or(""),
      "vllm says");
  EXPECT_EQ(UpstreamErrorMessage(R"({"error":"tgi says","error_type":"validation"})").value_or(""),
            "tgi says");
  EXPECT_FALSE(UpstreamErrorMessage("<html>").has_value());
  EXPECT_EQ(ErrorJson("m", "invalid_request_error", "", "c"),
            R"({"error":{"message":"m","type":"invalid_request_error","param":null,"code":"c"}})");
}

TEST(OpenAiResponseTest, EstimatesUsageOfAnAnswerWithout) {
  auto usage =
      InspectAnswer(R"({"choices":[{"message":{"role":"assistant","content":"12345678"}}]})",
                    Operation::kChatCompletions);
  ASSERT_TRUE(usage.ok());
  EXPECT_TRUE(usage->estimated);
  EXPECT_EQ(usage->completion_tokens, 2);
  EXPECT_FALSE(InspectAnswer(R"({"data":[]})", Operation::kChatCompletions).ok());
  EXPECT_TRUE(InspectAnswer(R"({"data":[],"usage":{"prompt_tokens":1}})", Operation::kEmbeddings)
                  ->prompt_tokens == 1);
}

}  // namespace
}  // namespace rampart::gateway
