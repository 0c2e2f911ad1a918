#include "app/audit_setup.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/logging.h"

namespace rampart::app {
namespace {

// The refusal reasons audit::Recorder reports.
std::vector<std::string> AuditRefusalReasons() { return {"unavailable", "seal"}; }

// Writes `text` to `path` (replacing it through a temporary file), mode 0644: public keys.
Status WritePublicFile(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    if (!file) return Unavailable("cannot write '{}': {}", temporary, std::strerror(errno));
    file << text;
    file.close();
    if (!file) return Unavailable("cannot write '{}'", temporary);
  }
  ::chmod(temporary.c_str(), 0644);
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) return Unavailable("cannot write '{}': {}", path, error.message());
  return Status::Ok();
}

}  // namespace

std::string AuditPublicKeyPath(const std::string& data_dir) {
  return (std::filesystem::path(data_dir) / kAuditPublicKeyFile).string();
}

Result<std::string> AuditPublicKeysPem(const crypto::Keyring& keyring, const std::string& name) {
  ASSIGN_OR_RETURN(const crypto::KeyStatus status, keyring.StatusOf(name));
  if (status.purpose != crypto::KeyPurpose::kSigning) {
    return FailedPrecondition("key '{}' is not a signing key", name);
  }
  std::string pem;
  for (int version = status.min_decryption_version; version <= status.current_version; ++version) {
    ASSIGN_OR_RETURN(const crypto::VerifyingKey key, keyring.VerifyingKeyVersion(name, version));
    pem += key.PublicPem();
  }
  return pem;
}

Result<std::unique_ptr<AuditRuntime>> StartAudit(const AuditConfig& config,
                                                 crypto::Keyring& keyring, store::Store& store,
                                                 const std::string& data_dir,
                                                 metrics::Registry* registry) {
  const std::string signing_algorithm(crypto::SignatureName(config.signing_algorithm));
  if (Status ensured =
          keyring.Ensure(config.signing_key, crypto::KeyPurpose::kSigning, signing_algorithm);
      !ensured.ok()) {
    return ensured.WithContext(fmt::format("audit.signing_key '{}'", config.signing_key));
  }
  // audit:full seals content under this key; ensured up front so the first sealed record does
  // not find it missing.
  if (Status ensured =
          keyring.Ensure(config.envelope_key, crypto::KeyPurpose::kWrapping, "aes-256-gcm");
      !ensured.ok()) {
    return ensured.WithContext(fmt::format("audit.envelope_key '{}'", config.envelope_key));
  }
  Result<std::pair<int, crypto::SigningKey>> signing =
      keyring.CurrentSigningKey(config.signing_key);
  if (!signing.ok()) {
    return signing.status().WithContext(fmt::format("audit.signing_key '{}'", config.signing_key));
  }
  const auto& [version, signing_key] = *signing;
  const std::string key_id = fmt::format("{}@v{}", config.signing_key, version);

  ASSIGN_OR_RETURN(const std::string public_pem, AuditPublicKeysPem(keyring, config.signing_key));
  std::error_code directory_error;
  std::filesystem::create_directories(data_dir, directory_error);
  const std::string public_path = AuditPublicKeyPath(data_dir);
  RETURN_IF_ERROR(WritePublicFile(public_path, public_pem));

  auto runtime = std::make_unique<AuditRuntime>();
  runtime->envelope = std::make_unique<crypto::Envelope>(keyring);
  Result<std::unique_ptr<audit::AuditLog>> log =
      audit::AuditLog::Open(store, config.log, signing_key, key_id);
  if (!log.ok()) return log.status().WithContext("audit log");
  runtime->log = std::move(log).value();
  if (registry != nullptr) {
    runtime->refused = std::make_unique<metrics::ReasonCounter>(
        *registry, "rampart_audit_refused_total",
        "Audit records the log refused (unavailable) or whose content could not be sealed "
        "(seal), by reason",
        AuditRefusalReasons());
  }
  audit::AuditLog* log_pointer = runtime->log.get();
  const crypto::Envelope* envelope = runtime->envelope.get();
  metrics::ReasonCounter* refused = runtime->refused.get();
  runtime->recorder = std::make_unique<audit::Recorder>(
      [log_pointer](const audit::AuditRecord& record, const audit::ContentDigests& digests,
                    UniqueFunction<void(Status)> done) {
        log_pointer->Append(record, std::move(done), &digests);
      },
      [envelope, key = config.envelope_key](
          std::string_view plaintext,
          const audit::Recorder::SealContext& context) -> Result<std::string> {
        return envelope->Seal(
            key, plaintext,
            {.tenant = context.tenant, .region = context.region, .data_class = context.data_class});
      },
      audit::RecorderOptions{
          .sync = config.log.sync, .digest = config.log.digest, .region = config.region},
      [refused](std::string_view reason) {
        if (refused != nullptr) refused->Count(reason);
      });
  LOG_INFO("audit: log on {} ({}, {} digest); checkpoints signed by '{}' ({}), public key in {}",
           store.Describe(),
           config.log.sync ? "sync: answers wait for their record"
                           : fmt::format("batched, within {} ms", config.log.max_delay.count()),
           crypto::DigestName(config.log.digest), key_id, signing_algorithm, public_path);
  return runtime;
}

Status StopAudit(AuditRuntime& runtime) {
  Status flushed = Status::Ok();
  if (runtime.log) flushed = runtime.log->Flush(/*checkpoint=*/true);
  runtime.recorder.reset();
  runtime.log.reset();
  return flushed;
}

}  // namespace rampart::app
