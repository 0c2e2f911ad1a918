#include "gateway/sse.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rampart::gateway {
namespace {

std::vector<std::string> FeedInPieces(const std::string& stream, size_t piece) {
  SseReader reader;
  std::vector<std::string> events;
  for (size_t i = 0; i < stream.size(); i += piece) {
    EXPECT_TRUE(reader
                    .Feed(std::string_view(stream).substr(i, piece),
                          [&](std::string_view data) { events.emplace_back(data); })
                    .ok());
  }
  return events;
}

TEST(SseReaderTest, ReadsEventsWhateverTheSplit) {
  const std::string stream =
      ": keep-alive\n\ndata: {\"a\":1}\n\nevent: x\r\ndata: line1\r\ndata:line2\r\n\r\n"
      "id: 4\rdata: [DONE]\r\r";
  for (size_t piece : {1, 2, 3, 7, 100}) {
    const auto events = FeedInPieces(stream, piece);
    ASSERT_EQ(events.size(), 3u) << "piece " << piece;
    EXPECT_EQ(events[0], "{\"a\":1}");
    EXPECT_EQ(events[1], "line1\nline2");
    EXPECT_EQ(events[2], "[DONE]");
  }
}

TEST(SseReaderTest, KnowsAnEventWasCut) {
  SseReader reader;
  int events = 0;
  ASSERT_TRUE(reader.Feed("data: {\"a\"", [&](std::string_view) { ++events; }).ok());
  EXPECT_TRUE(reader.InEvent());
  EXPECT_EQ(events, 0);
}

TEST(SseReaderTest, BoundsAnEvent) {
  SseReader reader(16);
  Status fed = reader.Feed("data: 0123456789abcdefghij", [](std::string_view) {});
  EXPECT_EQ(fed.code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace rampart::gateway
