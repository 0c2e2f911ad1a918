#pragma once

// Internal to src/net: message-level details of gRPC's wire protocol for the native transport
// (grpc_server.h; its ParseGrpcTimeout and PercentEncodeGrpcMessage are here too).

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace rampart::net {

// The message encodings read (grpc-encoding); answers go uncompressed, which every client reads.
inline constexpr char kAcceptEncoding[] = "identity,deflate,gzip";

// Inflates a compressed message (`gzip`: RFC 1952, `deflate`: RFC 1950 as gRPC means it), at
// most `limit` bytes of it. Errors: ResourceExhausted past the limit, InvalidArgument for data
// that does not inflate.
Result<std::string> Inflate(std::string_view encoding, const std::string& compressed,
                            uint64_t limit);

}  // namespace rampart::net
