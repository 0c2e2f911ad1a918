#include "api/http_compression.h"

#include <gtest/gtest.h>
#include <zlib.h>

namespace rampart::api {
namespace {

// `text` compressed as gzip (window bits 15 + 16) or zlib-wrapped deflate (15), as tritonclient's
// gzip.compress and zlib.compress write them.
std::string Compress(std::string_view text, bool gzip) {
  z_stream stream{};
  EXPECT_EQ(deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, gzip ? 15 + 16 : 15, 8,
                         Z_DEFAULT_STRATEGY),
            Z_OK);
  std::string out(deflateBound(&stream, text.size()) + 32, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  stream.avail_in = static_cast<uInt>(text.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&stream, Z_FINISH), Z_STREAM_END);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

TEST(ContentEncoding, NamesWhatTritonTakes) {
  EXPECT_EQ(ParseContentEncoding(std::nullopt), ContentEncoding::kIdentity);
  EXPECT_EQ(ParseContentEncoding(""), ContentEncoding::kIdentity);
  EXPECT_EQ(ParseContentEncoding("identity"), ContentEncoding::kIdentity);
  EXPECT_EQ(ParseContentEncoding("gzip"), ContentEncoding::kGzip);
  EXPECT_EQ(ParseContentEncoding(" GZip "), ContentEncoding::kGzip);
  EXPECT_EQ(ParseContentEncoding("x-gzip"), ContentEncoding::kGzip);
  EXPECT_EQ(ParseContentEncoding("deflate"), ContentEncoding::kDeflate);
  EXPECT_EQ(ParseContentEncoding("br"), ContentEncoding::kUnsupported);
  EXPECT_EQ(ParseContentEncoding("gzip, deflate"), ContentEncoding::kUnsupported);
}

TEST(Inflate, ReadsGzipAndDeflateBodies) {
  const std::string json(100000, '7');  // inflates past the first guess (4 x the body)
  for (bool gzip : {true, false}) {
    auto inflated = Inflate(Compress(json, gzip),
                            gzip ? ContentEncoding::kGzip : ContentEncoding::kDeflate, 1 << 20);
    ASSERT_TRUE(inflated.ok()) << inflated.status().ToString();
    EXPECT_EQ(*inflated, json);
  }
}

TEST(Inflate, StopsAtTheLimit) {
  const std::string json(4096, 'x');
  auto exact = Inflate(Compress(json, true), ContentEncoding::kGzip, 4096);
  ASSERT_TRUE(exact.ok()) << exact.status().ToString();
  EXPECT_EQ(exact->size(), 4096u);
  auto over = Inflate(Compress(json, true), ContentEncoding::kGzip, 4095);
  EXPECT_EQ(over.status().code(), StatusCode::kPayloadTooLarge);
  EXPECT_EQ(over.status().message(), "the request body inflates to more than 4095 bytes");
  // A bomb: 64 MiB of zeros in ~64 KiB, refused at 1 MiB without inflating the rest.
  auto bomb =
      Inflate(Compress(std::string(64 << 20, '\0'), false), ContentEncoding::kDeflate, 1 << 20);
  EXPECT_EQ(bomb.status().code(), StatusCode::kPayloadTooLarge);
}

TEST(Inflate, RefusesBrokenData) {
  const std::string gzip = Compress(R"({"inputs":[]})", true);
  auto truncated = Inflate(gzip.substr(0, gzip.size() - 4), ContentEncoding::kGzip, 1 << 20);
  EXPECT_EQ(truncated.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(truncated.status().message(), "the request body ends before its gzip data does");
  auto trailing = Inflate(gzip + "junk", ContentEncoding::kGzip, 1 << 20);
  EXPECT_EQ(trailing.status().message(), "4 bytes follow the gzip data in the request body");
  auto plain = Inflate(R"({"inputs":[]})", ContentEncoding::kGzip, 1 << 20);
  EXPECT_EQ(plain.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(plain.status().message().find("is not valid gzip data"), std::string::npos)
      << plain.status().message();
  auto wrong_wrapper = Inflate(gzip, ContentEncoding::kDeflate, 1 << 20);
  EXPECT_EQ(wrong_wrapper.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rampart::api
