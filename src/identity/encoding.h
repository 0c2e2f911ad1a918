#pragma once

// Byte encodings and digests the identity module needs (internal to src/identity): base64url
// (RFC 4648 §5, as JWS and JWK use it), lower-case hex, SHA-256, constant-time comparison and
// random base62 text. OpenSSL underneath; every function is thread-safe.

#include <optional>
#include <string>
#include <string_view>

namespace rampart::identity {

// Unpadded base64url, strictly: nullopt on a character outside the alphabet, on padding ('='),
// on a length that no encoding has (4n+1) and on non-zero trailing bits.
std::optional<std::string> Base64UrlDecode(std::string_view text);
std::string Base64UrlEncode(std::string_view bytes);  // unpadded

std::string HexEncode(std::string_view bytes);  // lower case
// nullopt on an odd length or a character that is not a hex digit (either case).
std::optional<std::string> HexDecode(std::string_view text);

std::string Sha256(std::string_view bytes);  // the 32 raw bytes

// Whether a == b, in time that depends only on their lengths.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// `count` characters from [0-9A-Za-z], uniformly (rejection sampling over RAND_bytes), and
// `count` random bytes. Abort if the OS's random source fails (it does not on Linux).
std::string RandomBase62(size_t count);
std::string RandomBytes(size_t count);

}  // namespace rampart::identity
