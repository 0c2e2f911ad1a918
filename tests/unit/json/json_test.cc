#include <gtest/gtest.h>

#include "json/reader.h"
#include "json/writer.h"

namespace rampart::json {
namespace {

TEST(Parser, MalformedJsonIsInvalidArgument) {
  Parser parser;
  for (std::string_view text : {"{", "{\"a\":}", "", "[1,2", "nul"}) {
    Result<Value> value = parser.Parse(text);
    ASSERT_FALSE(value.ok()) << text;
    EXPECT_EQ(value.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(value.status().message().find("malformed JSON"), std::string::npos);
  }
}

TEST(Value, TypedReadsNameTheFieldOnMismatch) {
  Parser parser;
  Result<Value> root = parser.Parse(R"({"name":"simple","count":3,"neg":-2,"ok":true,"x":1.5})");
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(*root->Find("name")->GetString("name"), "simple");
  EXPECT_EQ(*root->Find("count")->GetUint64("count"), 3u);
  EXPECT_EQ(*root->Find("neg")->GetInt64("neg"), -2);
  EXPECT_TRUE(*root->Find("ok")->GetBool("ok"));
  EXPECT_DOUBLE_EQ(*root->Find("x")->GetDouble("x"), 1.5);
  Result<uint64_t> negative = root->Find("neg")->GetUint64("neg");
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.status().message(), "'neg' must be a non-negative integer, got number");
  EXPECT_EQ(root->Find("name")->GetInt64("name").status().message(),
            "'name' must be an integer, got string");
  EXPECT_FALSE(root->Find("missing").has_value());
}

TEST(Writer, WritesFloatsInShortestForm) {
  Writer writer;
  writer.StartArray();
  writer.Float(0.1f);
  writer.Float(-2.5f);
  writer.Float(1e-7f);
  writer.Int64(-3);
  writer.String("q\"uote");
  writer.EndArray();
  EXPECT_EQ(writer.view(), R"([0.1,-2.5,1e-07,-3,"q\"uote"])");
}

TEST(Writer, NestsPastItsInlineStackAndHandsOverTheText) {
  // 40 levels: past the 16 the writer keeps inline, so its stack moves to the heap midway.
  constexpr int kDepth = 40;
  Writer writer;
  writer.Reserve(4);  // a hint only: the text grows past it
  for (int i = 0; i < kDepth; ++i) {
    writer.StartObject();
    writer.Key("k");
  }
  writer.String(std::string(300, 'x'));
  for (int i = 0; i < kDepth; ++i) writer.EndObject();
  std::string expected;
  for (int i = 0; i < kDepth; ++i) expected += R"({"k":)";
  expected += '"' + std::string(300, 'x') + '"' + std::string(kDepth, '}');
  EXPECT_EQ(writer.view(), expected);
  const std::string text = writer.Take();
  EXPECT_EQ(text, expected);
  ASSERT_TRUE(Parser().Parse(text).ok());
}

}  // namespace
}  // namespace rampart::json
