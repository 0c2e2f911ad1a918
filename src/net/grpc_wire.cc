// gRPC's message-level wire details for the native transport (see grpc_wire.h and
// grpc_server.h).

#include "net/grpc_wire.h"

#include <zlib.h>

#include <algorithm>

#include "net/grpc_server.h"

namespace rampart::net {

Result<std::string> Inflate(std::string_view encoding, const std::string& compressed,
                            uint64_t limit) {
  z_stream stream{};
  const int window_bits = encoding == "gzip" ? 16 + MAX_WBITS : MAX_WBITS;
  if (inflateInit2(&stream, window_bits) != Z_OK) return Internal("zlib: cannot inflate");
  std::string out;
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  stream.avail_in = static_cast<uInt>(compressed.size());
  int result = Z_OK;
  while (result == Z_OK) {
    if (out.size() >= limit) {
      inflateEnd(&stream);
      return ResourceExhausted("received message larger than max (more than {} bytes inflated)",
                               limit);
    }
    const size_t chunk = std::min<uint64_t>(limit - out.size(), 64 * 1024);
    const size_t before = out.size();
    out.resize(before + chunk);
    stream.next_out = reinterpret_cast<Bytef*>(out.data() + before);
    stream.avail_out = static_cast<uInt>(chunk);
    result = inflate(&stream, Z_NO_FLUSH);
    out.resize(before + chunk - stream.avail_out);
    if (result == Z_BUF_ERROR && stream.avail_in == 0) break;  // truncated
  }
  inflateEnd(&stream);
  if (result != Z_STREAM_END) {
    return InvalidArgument("the {} message does not inflate", encoding);
  }
  return out;
}

std::optional<std::chrono::nanoseconds> ParseGrpcTimeout(std::string_view value) {
  if (value.size() < 2 || value.size() > 9) return std::nullopt;
  int64_t amount = 0;
  for (char digit : value.substr(0, value.size() - 1)) {
    if (digit < '0' || digit > '9') return std::nullopt;
    amount = amount * 10 + (digit - '0');
  }
  using namespace std::chrono;
  switch (value.back()) {
    case 'H': return duration_cast<nanoseconds>(hours(amount));
    case 'M': return duration_cast<nanoseconds>(minutes(amount));
    case 'S': return duration_cast<nanoseconds>(seconds(amount));
    case 'm': return duration_cast<nanoseconds>(milliseconds(amount));
    case 'u': return duration_cast<nanoseconds>(microseconds(amount));
    case 'n': return nanoseconds(amount);
    default: return std::nullopt;
  }
}

std::string PercentEncodeGrpcMessage(std::string_view message) {
  std::string out;
  out.reserve(message.size());
  for (const char c : message) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte <= 0x7e && byte != '%') {
      out.push_back(c);
    } else {
      out += fmt::format("%{:02X}", byte);
    }
  }
  return out;
}

}  // namespace rampart::net
