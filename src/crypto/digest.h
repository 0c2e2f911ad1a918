#pragma once

// Digests, MACs and key derivation over OpenSSL 3: SHA-256 and SM3 (GB/T 32905), HMAC over
// either, HKDF (RFC 5869) over either. Pure functions; thread-safe.

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "core/status.h"

namespace rampart::crypto {

enum class DigestAlgorithm { kSha256, kSm3 };
std::string_view DigestName(DigestAlgorithm algorithm);  // "sha256", "sm3"
// "sha256" / "sm3" (case-insensitive); InvalidArgument otherwise.
Result<DigestAlgorithm> ParseDigest(std::string_view name);

// Both digests are 32 bytes.
using Digest = std::array<uint8_t, 32>;

Digest Hash(DigestAlgorithm algorithm, std::string_view data);
// The digest of `parts` concatenated (as a Hasher fed each in turn). Like Hash, it runs on a
// context kept per thread and algorithm, so it allocates nothing per call: the form for many
// small hashes (the audit log's leaves, nodes and chain).
Digest HashParts(DigestAlgorithm algorithm, std::initializer_list<std::string_view> parts);
// Incremental hashing (large objects, records hashed in parts). Move-only.
class Hasher {
 public:
  explicit Hasher(DigestAlgorithm algorithm);
  Hasher(Hasher&&) noexcept;
  Hasher& operator=(Hasher&&) noexcept;
  ~Hasher();
  void Update(std::string_view data);
  Digest Finish();  // once

 private:
  void* context_ = nullptr;  // EVP_MD_CTX
};

Digest Hmac(DigestAlgorithm algorithm, std::string_view key, std::string_view data);
// HKDF-Extract-and-Expand (RFC 5869). An empty salt means "no salt" (32 zero bytes); an empty
// key is allowed. 1 <= `length` <= 255 * 32, else it aborts (a caller's bug, never input).
std::string Hkdf(DigestAlgorithm algorithm, std::string_view key, std::string_view salt,
                 std::string_view info, size_t length);

// Constant-time comparison of equal-length byte strings (false when lengths differ).
bool ConstantTimeEquals(std::string_view a, std::string_view b);

std::string ToHex(std::string_view bytes);
std::string ToHex(const Digest& digest);
// InvalidArgument on odd length or a non-hex character.
Result<std::string> FromHex(std::string_view hex);
// Cryptographically random bytes (RAND_bytes); aborts if the generator fails.
std::string RandomBytes(size_t count);

}  // namespace rampart::crypto
