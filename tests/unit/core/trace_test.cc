#include "core/trace.h"

#include <gtest/gtest.h>

namespace rampart {
namespace {

TEST(TraceContext, ParsesAndContinuesAW3CTraceparent) {
  auto parent = TraceContext::Parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  ASSERT_TRUE(parent.has_value());
  EXPECT_EQ(parent->TraceId(), "0af7651916cd43dd8448eb211c80319c");
  EXPECT_EQ(parent->SpanId(), "b7ad6b7169203331");
  const TraceContext child = parent->Child();
  EXPECT_EQ(child.TraceId(), parent->TraceId());
  EXPECT_NE(child.SpanId(), parent->SpanId());
  EXPECT_EQ(child.Traceparent().substr(0, 36), "00-0af7651916cd43dd8448eb211c80319c-");
  EXPECT_EQ(child.Traceparent().substr(52), "-01");
}

TEST(TraceContext, RejectsMalformedHeaders) {
  for (const char* bad : {"", "00-abc", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
                          "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
                          "00-00000000000000000000000000000000-b7ad6b7169203331-01",
                          "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
                          "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                          "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
                          "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0g"}) {
    EXPECT_FALSE(TraceContext::Parse(bad).has_value()) << bad;
  }
  // A later version may carry more fields.
  EXPECT_TRUE(TraceContext::Parse("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-more"));
}

TEST(TraceContext, StartsFreshRandomTraces) {
  const TraceContext a = TraceContext::Start();
  const TraceContext b = TraceContext::Start();
  EXPECT_NE(a.TraceId(), b.TraceId());
  EXPECT_EQ(a.Traceparent().size(), 55u);
  EXPECT_TRUE(TraceContext::Parse(a.Traceparent()).has_value());
}

}  // namespace
}  // namespace rampart
