// The cl100k approximation (tokens.h); the cl100k counts in the comments were taken with the
// gpt-tokenizer npm package's cl100k_base encoder.
#include "knowledge/hub/tokens.h"

#include <gtest/gtest.h>

namespace rampart::knowledge::hub {
namespace {

TEST(TokensTest, Latin) {
  EXPECT_EQ(CountTokens(""), 0u);
  EXPECT_EQ(CountTokens("hello world"), 2u);         // cl100k: 2
  EXPECT_EQ(CountTokens("Hello, world!"), 4u);       // cl100k: 4
  EXPECT_EQ(CountTokens("tokenization"), 2u);        // cl100k: 2
  EXPECT_EQ(CountTokens("1234567"), 3u);             // cl100k: 123 456 7
  EXPECT_EQ(CountTokens("line one\nline two"), 5u);  // cl100k: 5
  EXPECT_EQ(CountTokens("    indented"), 2u);        // cl100k: 3
  EXPECT_EQ(CountTokens("caf\xc3\xa9"), 2u);         // cl100k: 2
}

TEST(TokensTest, CjkOnePerCharacter) {
  EXPECT_EQ(CountTokens("中文分词"), 4u);       // cl100k: 5
  EXPECT_EQ(CountTokens("我爱Rampart。"), 4u);  // 我 爱 Rampart 。; cl100k: 7
  EXPECT_EQ(CountTokens("カタカナ"), 4u);       // cl100k: 4
}

TEST(TokensTest, EnglishProseIsClose) {
  // 43 cl100k tokens (counted with the gpt-tokenizer npm package's cl100k_base).
  const char* prose =
      "Rampart is a model server written in C++20. It speaks Triton's KServe v2 protocols over "
      "HTTP and gRPC, batches requests dynamically, and exports Prometheus metrics for every "
      "model it serves.";
  size_t tokens = CountTokens(prose);
  EXPECT_GE(tokens, 39u);
  EXPECT_LE(tokens, 47u);
}

}  // namespace
}  // namespace rampart::knowledge::hub
