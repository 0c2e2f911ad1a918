// MultipartParser: parts split at every point, one and two splits, and malformed bodies.

#include "net/multipart.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rampart::net {
namespace {

struct Part {
  MultipartPartHead head;
  std::string content;
  bool ended = false;
};

class Collect final : public MultipartSink {
 public:
  Status OnPart(const MultipartPartHead& head) override {
    parts.push_back({head, "", false});
    return Status::Ok();
  }
  Status OnData(std::string_view bytes) override {
    EXPECT_FALSE(bytes.empty());
    parts.back().content.append(bytes);
    return Status::Ok();
  }
  Status OnPartEnd() override {
    parts.back().ended = true;
    return Status::Ok();
  }
  std::vector<Part> parts;
};

constexpr std::string_view kBoundary = "----formdata-undici-0123";

// The body the Node SDK sends: `purpose`, then `file` with a filename and a content that holds
// near-delimiters (a CRLF and dashes, the boundary without its CRLF).
std::string SdkBody() {
  return "------formdata-undici-0123\r\n"
         "Content-Disposition: form-data; name=\"purpose\"\r\n\r\n"
         "assistants\r\n"
         "------formdata-undici-0123\r\n"
         "Content-Disposition: form-data; name=\"file\"; filename=\"notes \\\"v2\\\".txt\"\r\n"
         "Content-Type: text/plain\r\n\r\n"
         "line one\r\n--not the boundary\r\n------formdata-undici-012 nearly\r\n"
         "\r\n------formdata-undici-0123--\r\n"
         "epilogue ignored";
}

void ExpectSdkParts(const std::vector<Part>& parts) {
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].head.name, "purpose");
  EXPECT_FALSE(parts[0].head.has_filename);
  EXPECT_EQ(parts[0].content, "assistants");
  EXPECT_TRUE(parts[0].ended);
  EXPECT_EQ(parts[1].head.name, "file");
  EXPECT_TRUE(parts[1].head.has_filename);
  EXPECT_EQ(parts[1].head.filename, "notes \"v2\".txt");
  EXPECT_EQ(parts[1].head.content_type, "text/plain");
  EXPECT_EQ(parts[1].content,
            "line one\r\n--not the boundary\r\n------formdata-undici-012 nearly\r\n");
  EXPECT_TRUE(parts[1].ended);
}

TEST(MultipartParser, ParsesAWholeBody) {
  Collect sink;
  MultipartParser parser(kBoundary, sink);
  ASSERT_TRUE(parser.Feed(SdkBody()).ok());
  ASSERT_TRUE(parser.Finish().ok());
  ExpectSdkParts(sink.parts);
}

TEST(MultipartParser, ParsesTheSameWhereverTheBodyIsSplit) {
  const std::string body = SdkBody();
  for (size_t i = 0; i <= body.size(); ++i) {
    Collect sink;
    MultipartParser parser(kBoundary, sink);
    ASSERT_TRUE(parser.Feed(std::string_view(body).substr(0, i)).ok()) << i;
    ASSERT_TRUE(parser.Feed(std::string_view(body).substr(i)).ok()) << i;
    ASSERT_TRUE(parser.Finish().ok()) << i;
    ExpectSdkParts(sink.parts);
  }
  for (size_t i = 0; i <= body.size(); i += 3) {
    for (size_t j = i; j <= body.size(); j += 5) {
      Collect sink;
      MultipartParser parser(kBoundary, sink);
      ASSERT_TRUE(parser.Feed(std::string_view(body).substr(0, i)).ok());
      ASSERT_TRUE(parser.Feed(std::string_view(body).substr(i, j - i)).ok());
      ASSERT_TRUE(parser.Feed(std::string_view(body).substr(j)).ok());
      ASSERT_TRUE(parser.Finish().ok()) << i << " " << j;
      ExpectSdkParts(sink.parts);
    }
  }
  // A byte at a time.
  Collect sink;
  MultipartParser parser(kBoundary, sink);
  for (char c : body) ASSERT_TRUE(parser.Feed(std::string_view(&c, 1)).ok());
  ASSERT_TRUE(parser.Finish().ok());
  ExpectSdkParts(sink.parts);
}

TEST(MultipartParser, EmptyPartsAndAPreamble) {
  Collect sink;
  MultipartParser parser("b", sink);
  ASSERT_TRUE(parser
                  .Feed("preamble\r\n--b\r\nContent-Disposition: form-data; name=a\r\n\r\n"
                        "\r\n--b  \r\nContent-Disposition: form-data; name=\"f\"; filename=\"\"\r\n"
                        "\r\n\r\n--b--")
                  .ok());
  ASSERT_TRUE(parser.Finish().ok());
  ASSERT_EQ(sink.parts.size(), 2u);
  EXPECT_EQ(sink.parts[0].head.name, "a");
  EXPECT_EQ(sink.parts[0].content, "");
  EXPECT_TRUE(sink.parts[1].head.has_filename);
  EXPECT_EQ(sink.parts[1].head.filename, "");
  EXPECT_EQ(sink.parts[1].content, "");
}

TEST(MultipartParser, BoundaryOfAContentType) {
  EXPECT_EQ(*MultipartParser::BoundaryOf("multipart/form-data; boundary=abc"), "abc");
  EXPECT_EQ(*MultipartParser::BoundaryOf("Multipart/Form-Data;boundary=\"a b;c\""), "a b;c");
  EXPECT_FALSE(MultipartParser::BoundaryOf("application/json").ok());
  EXPECT_FALSE(MultipartParser::BoundaryOf("multipart/form-data").ok());
  EXPECT_FALSE(MultipartParser::BoundaryOf("multipart/form-data; boundary=").ok());
  EXPECT_FALSE(MultipartParser::BoundaryOf("multipart/form-data; boundary=\"abc").ok());
  EXPECT_FALSE(
      MultipartParser::BoundaryOf("multipart/form-data; boundary=" + std::string(71, 'x')).ok());
}

Status ParseAll(std::string_view boundary, std::string_view body) {
  Collect sink;
  MultipartParser parser(boundary, sink);
  if (Status status = parser.Feed(body); !status.ok()) return status;
  return parser.Finish();
}

TEST(MultipartParser, MalformedBodiesAreErrors) {
  // No closing delimiter; none at all.
  EXPECT_FALSE(ParseAll("b", "--b\r\nContent-Disposition: form-data; name=a\r\n\r\nxyz").ok());
  EXPECT_FALSE(ParseAll("b", "just text").ok());
  EXPECT_FALSE(ParseAll("b", "").ok());
  // A part without a form-data disposition or a name; a header line without a colon.
  EXPECT_FALSE(ParseAll("b", "--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--").ok());
  EXPECT_FALSE(
      ParseAll("b", "--b\r\nContent-Disposition: attachment; name=a\r\n\r\nx\r\n--b--").ok());
  EXPECT_FALSE(ParseAll("b", "--b\r\nContent-Disposition: form-data\r\n\r\nx\r\n--b--").ok());
  EXPECT_FALSE(ParseAll("b", "--b\r\nno colon\r\n\r\nx\r\n--b--").ok());
  // Junk after a delimiter; an unterminated quoted filename.
  EXPECT_FALSE(ParseAll("b", "--bjunk\r\n").ok());
  EXPECT_FALSE(
      ParseAll("b", "--b\r\nContent-Disposition: form-data; name=\"a\r\n\r\nx\r\n--b--").ok());
  // A head that never ends is refused at the limit, not held.
  const Status huge =
      ParseAll("b", "--b\r\nX: " + std::string(MultipartParser::kMaxHeadBytes + 10, 'h'));
  EXPECT_EQ(huge.code(), StatusCode::kInvalidArgument);
  // An error sticks.
  Collect sink;
  MultipartParser parser("b", sink);
  EXPECT_FALSE(parser.Feed("--bjunk").ok());
  EXPECT_FALSE(parser.Feed("\r\n--b--").ok());
  EXPECT_FALSE(parser.Finish().ok());
}

class Refuse final : public MultipartSink {
 public:
  Status OnPart(const MultipartPartHead&) override { return Status::Ok(); }
  Status OnData(std::string_view) override { return PayloadTooLarge("too much"); }
  Status OnPartEnd() override { return Status::Ok(); }
};

TEST(MultipartParser, ASinksErrorStopsParsing) {
  Refuse sink;
  MultipartParser parser("b", sink);
  const Status status =
      parser.Feed("--b\r\nContent-Disposition: form-data; name=a\r\n\r\nxyz\r\n--b--");
  EXPECT_EQ(status.code(), StatusCode::kPayloadTooLarge);
}

}  // namespace
}  // namespace rampart::net
