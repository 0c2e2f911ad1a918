#pragma once

// Signed checkpoints: the text of a tree head, in the manner of a C2SP signed note
// (c2sp.org/signed-note, c2sp.org/tlog-checkpoint) and a Certificate Transparency STH:
//
//   rampart-audit/v1                 origin: names the log and this format
//   1024                             tree size, decimal
//   3q2+7w...=                       root hash, standard base64
//   time 1767225600123456789         extension: when the checkpoint was made, Unix nanoseconds
//   digest sha256                    extension: the tree's hash, sha256 or sm3
//
// The body is those five lines, each ending in '\n'; the signature (Ed25519, or SM2 with SM3
// and the standard ID) is over exactly the body's bytes. The note adds an empty line and one
// signature line: "— <key id> <base64 signature>\n" (an em dash, U+2014).
//
// Pure functions; thread-safe. Parsing takes untrusted text: InvalidArgument, never a crash.

#include <cstdint>
#include <string>
#include <string_view>

#include "audit/merkle.h"
#include "core/status.h"
#include "crypto/signature.h"

namespace rampart::audit {

inline constexpr std::string_view kCheckpointOrigin = "rampart-audit/v1";

struct Checkpoint {
  int64_t tree_size = 0;
  Digest root{};
  int64_t time_unix_ns = 0;
  DigestAlgorithm digest = DigestAlgorithm::kSha256;
};

std::string CheckpointBody(const Checkpoint& checkpoint);
Result<Checkpoint> ParseCheckpointBody(std::string_view body);

struct SignedCheckpoint {
  Checkpoint checkpoint;
  std::string key_id;
  std::string signature;  // raw bytes
};
// The whole note: body, empty line, signature line.
std::string CheckpointNote(const SignedCheckpoint& signed_checkpoint);
Result<SignedCheckpoint> ParseCheckpointNote(std::string_view note);

Result<SignedCheckpoint> SignCheckpoint(const Checkpoint& checkpoint, const crypto::SigningKey& key,
                                        std::string key_id);
// OK when the signature is `key`'s over the body; PermissionDenied otherwise.
Status VerifyCheckpoint(const SignedCheckpoint& signed_checkpoint, const crypto::VerifyingKey& key);

// Standard base64 (RFC 4648 §4, padded); Decode: InvalidArgument on anything else.
std::string Base64Encode(std::string_view bytes);
Result<std::string> Base64Decode(std::string_view text);

}  // namespace rampart::audit
