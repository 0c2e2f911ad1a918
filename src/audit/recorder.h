#pragma once

// The server's AuditSink (sink.h): completes each front end's record with the content's digests
// (SHA-256 or SM3; the log stores them raw, and they read back as "sha256:<hex>" / "sm3:<hex>"),
// and, when the policy said `audit:full`, with
// the request and answer sealed by the envelope AEAD (base64; the context binds the record's
// tenant, the configured region and the data class "CONFIDENTIAL"), then appends it to the log.
//
// Sealing failures never drop a record: the record is appended with its digests, without the
// sealed copies, and the failure counted as a refusal of reason "seal" (the key is missing or
// retired: an operator's error the metric shows).
//
// Threads: thread-safe; Record never blocks (digests and sealing run on the calling thread,
// the append is the log's bounded queue). Content is never logged.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "audit/sink.h"
#include "crypto/digest.h"

namespace rampart::audit {

struct RecorderOptions {
  bool sync = false;
  crypto::DigestAlgorithm digest = crypto::DigestAlgorithm::kSha256;
  // audit:full: the region bound into every envelope (with the record's tenant and
  // kSealedDataClass).
  std::string region;
};

// The data class sealed content is bound to.
inline constexpr std::string_view kSealedDataClass = "CONFIDENTIAL";

class Recorder final : public AuditSink {
 public:
  // Appends one record with its content's digests (raw: the record's own digest text is left
  // empty); the AuditLog's Append in the server. The record is read during the call only.
  using Append =
      std::function<void(const AuditRecord&, const ContentDigests&, UniqueFunction<void(Status)>)>;
  // Told of every record the log refused ("unavailable": queue full or store down) or whose
  // content could not be sealed ("seal"); must be cheap and thread-safe (a counter).
  using OnRefused = std::function<void(std::string_view reason)>;

  // What sealed content is bound to: crypto::EnvelopeContext's fields (the associated data).
  struct SealContext {
    std::string_view tenant;
    std::string_view region;
    std::string_view data_class;
  };
  // Seals content under the configured envelope key (crypto::Envelope::Seal in the server, with
  // the context as its EnvelopeContext): the envelope's bytes, or the error. Thread-safe.
  using Seal =
      std::function<Result<std::string>(std::string_view plaintext, const SealContext& context)>;

  // `seal` may be empty: audit:full records then keep their digests only (counted as "seal").
  Recorder(Append append, Seal seal, RecorderOptions options, OnRefused on_refused = nullptr);

  bool sync() const override { return options_.sync; }
  void Record(AuditRecord&& record, AuditContent content,
              UniqueFunction<void(Status)> done) override;

 private:
  // `plaintext` sealed for `tenant`, base64; empty on failure (counted).
  std::string SealContent(std::string_view plaintext, std::string_view tenant) const;

  Append append_;
  Seal seal_;
  const RecorderOptions options_;
  OnRefused on_refused_;
};

}  // namespace rampart::audit
