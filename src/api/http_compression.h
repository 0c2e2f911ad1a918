#pragma once

// Compressed request bodies (`Content-Encoding`), as Triton's HTTP front end takes them for infer
// requests: gzip and deflate (zlib-wrapped, as HTTP means it), which tritonclient's
// `request_compression_algorithm` sends. Any other coding is refused (415, with the codings
// taken in `Accept-Encoding`).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace rampart::api {

enum class ContentEncoding { kIdentity, kGzip, kDeflate, kUnsupported };

// The coding a Content-Encoding header names (absent, empty or "identity": kIdentity; compared
// without regard to case).
ContentEncoding ParseContentEncoding(std::optional<std::string_view> header);

// What Accept-Encoding lists when a coding is refused.
inline constexpr std::string_view kAcceptedEncodings = "identity, gzip, deflate";

// The body decompressed, at most `limit` bytes of it. REQUIRES: kGzip or kDeflate.
// Errors: InvalidArgument for data that is not whole, valid gzip/deflate data (naming zlib's
// reason) or is followed by other bytes; PayloadTooLarge when it would inflate past `limit`.
Result<std::string> Inflate(std::string_view body, ContentEncoding encoding, uint64_t limit);

}  // namespace rampart::api
