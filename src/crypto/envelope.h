#pragma once

// Envelope encryption: each object is sealed under a fresh data key, and the data key is sealed
// (wrapped) under a keyring key. The result is one self-describing byte string (docs/crypto.md
// documents the format: magic, format version, suite, key name and version, wrapped data key,
// nonce, tag, ciphertext), so any version of Rampart that knows the format can open it and
// Rewrap can move the data key to the newest key version without touching the payload.
//
// The associated data binds the object to its tenant, region (residency) and data class: a
// record copied to another tenant or region fails to open.
//
// Threads: thread-safe (the keyring is).

#include <string>
#include <string_view>

#include "core/status.h"
#include "crypto/aead.h"
#include "crypto/keyring.h"

namespace rampart::crypto {

struct EnvelopeContext {
  std::string_view tenant;
  std::string_view region;
  std::string_view data_class;  // "PUBLIC", "INTERNAL", "CONFIDENTIAL", "SECRET", or a label
};

// What an envelope's header says (no key needed; nothing authenticated yet).
struct EnvelopeHeader {
  AeadAlgorithm suite = AeadAlgorithm::kAes256Gcm;
  std::string key_name;
  int key_version = 0;
  size_t payload_bytes = 0;
};

// Limits the format enforces (docs/crypto.md, "Envelope format").
inline constexpr size_t kEnvelopeMaxKeyNameBytes = 64;
inline constexpr size_t kEnvelopeMaxPayloadBytes = size_t{16} << 30;  // 16 GiB
inline constexpr size_t kEnvelopeMaxContextFieldBytes = 1024;         // tenant, region, class

class Envelope {
 public:
  // `keyring` must outlive the envelope.
  explicit Envelope(const Keyring& keyring) : keyring_(keyring) {}

  // Seals `plaintext` with a new data key wrapped by `key_name`'s current version (a wrapping
  // key; its suite is the payload's suite too). InvalidArgument for a context field over
  // kEnvelopeMaxContextFieldBytes or a plaintext over kEnvelopeMaxPayloadBytes; NotFound /
  // FailedPrecondition from the keyring.
  Result<std::string> Seal(const std::string& key_name, std::string_view plaintext,
                           const EnvelopeContext& context) const;
  // InvalidArgument "decryption failed: ..." for a wrong context, a flipped bit, a truncated or
  // malformed envelope; FailedPrecondition for a key version below min_decryption_version;
  // NotFound for an unknown key.
  Result<std::string> Open(std::string_view envelope, const EnvelopeContext& context) const;
  // The same envelope with its data key wrapped by the key's current version (the payload and
  // its tag unchanged; the plaintext never appears). Unchanged if already current.
  Result<std::string> Rewrap(std::string_view envelope) const;

  // True when `bytes` start with the envelope magic "RPE" (a cheap test, e.g. of a model file).
  static bool HasMagic(std::string_view bytes);
  // Parses the header, checking every length; InvalidArgument "malformed envelope: ..."
  // otherwise. Never reads past `envelope`.
  static Result<EnvelopeHeader> Inspect(std::string_view envelope);

  // The keyring it seals with (for code that seals through its own format, such as snapshots).
  const Keyring& keyring() const { return keyring_; }

 private:
  const Keyring& keyring_;
};

}  // namespace rampart::crypto
