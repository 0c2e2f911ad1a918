#include "api/http_compression.h"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <memory>

#include "core/strings.h"

namespace rampart::api {

ContentEncoding ParseContentEncoding(std::optional<std::string_view> header) {
  if (!header) return ContentEncoding::kIdentity;
  const std::string_view coding = TrimWhitespace(*header);
  if (coding.empty() || EqualsIgnoringCase(coding, "identity")) return ContentEncoding::kIdentity;
  if (EqualsIgnoringCase(coding, "gzip") || EqualsIgnoringCase(coding, "x-gzip")) {
    return ContentEncoding::kGzip;
  }
  if (EqualsIgnoringCase(coding, "deflate")) return ContentEncoding::kDeflate;
  return ContentEncoding::kUnsupported;  // including lists of codings, which Triton refuses too
}

Result<std::string> Inflate(std::string_view body, ContentEncoding encoding, uint64_t limit) {
  const bool gzip = encoding == ContentEncoding::kGzip;
  const char* name = gzip ? "gzip" : "deflate";
  z_stream stream{};
  // 15: the largest window; +16: a gzip wrapper instead of zlib's.
  if (inflateInit2(&stream, gzip ? 15 + 16 : 15) != Z_OK) {
    return Internal("cannot start inflating the {} body", name);
  }
  const std::unique_ptr<z_stream, int (*)(z_streamp)> end(&stream, &inflateEnd);
  // One byte of room past the limit tells a body that inflates to exactly `limit` bytes from one
  // that goes on.
  const uint64_t room = limit == UINT64_MAX ? limit : limit + 1;
  std::string out;
  out.resize(
      static_cast<size_t>(std::min<uint64_t>(room, std::max<uint64_t>(4096, 4 * body.size()))));
  uint64_t consumed = 0;
  uint64_t produced = 0;
  while (true) {
    if (produced == out.size()) {
      if (produced >= room) break;
      out.resize(static_cast<size_t>(std::min<uint64_t>(room, 2 * out.size())));
    }
    // zlib counts in 32 bits: feed and drain at most that much per call.
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data() + consumed));
    stream.avail_in = static_cast<uInt>(std::min<uint64_t>(body.size() - consumed, UINT_MAX));
    stream.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
    stream.avail_out = static_cast<uInt>(std::min<uint64_t>(out.size() - produced, UINT_MAX));
    const uInt offered_in = stream.avail_in;
    const uInt offered_out = stream.avail_out;
    const int result = inflate(&stream, Z_NO_FLUSH);
    consumed += offered_in - stream.avail_in;
    produced += offered_out - stream.avail_out;
    if (result == Z_STREAM_END) {
      if (produced > limit) break;
      if (consumed != body.size()) {
        return InvalidArgument("{} bytes follow the {} data in the request body",
                               body.size() - consumed, name);
      }
      out.resize(static_cast<size_t>(produced));
      return out;
    }
    if (result == Z_OK) continue;
    if (result != Z_BUF_ERROR) {
      return InvalidArgument("the request body is not valid {} data: {}", name,
                             stream.msg != nullptr ? stream.msg : "zlib error");
    }
    // No progress: for want of room (the loop grows the buffer) or of input.
    if (produced < out.size()) {
      return InvalidArgument("the request body ends before its {} data does", name);
    }
  }
  return PayloadTooLarge("the request body inflates to more than {} bytes", limit);
}

}  // namespace rampart::api
