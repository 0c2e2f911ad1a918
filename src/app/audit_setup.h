#pragma once

// The audit log as the server runs it (docs/audit.md, "Running it"): the signing and envelope
// keys ensured in the keyring, the AuditLog on the server's store, the Recorder that front ends
// record through, and the rampart_audit_refused_total{reason} counter. The signing key's public
// half (every version) is written to <data-dir>/audit-signing-key.pem, where
// `rampart audit verify` finds it by default.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "app/audit_config.h"
#include "audit/audit_log.h"
#include "audit/recorder.h"
#include "core/status.h"
#include "crypto/envelope.h"
#include "crypto/keyring.h"
#include "metrics/reason_counter.h"
#include "store/store.h"

namespace rampart::app {

inline constexpr std::string_view kAuditPublicKeyFile = "audit-signing-key.pem";

// <data_dir>/audit-signing-key.pem.
std::string AuditPublicKeyPath(const std::string& data_dir);

// Every version of the audit signing key `name` the keyring can still verify with, as
// concatenated PEM public keys (oldest first).
Result<std::string> AuditPublicKeysPem(const crypto::Keyring& keyring, const std::string& name);

// Everything the running log needs, owned together. Destroy with StopAudit (flushes and signs a
// final checkpoint) once no front end records any more.
struct AuditRuntime {
  std::unique_ptr<crypto::Envelope> envelope;
  std::unique_ptr<audit::AuditLog> log;
  std::unique_ptr<metrics::ReasonCounter> refused;  // null without metrics
  std::unique_ptr<audit::Recorder> recorder;
};

// Ensures the keys (creating version 1 on first start), writes the public key file, opens the
// log on `store` and makes the recorder. `keyring`, `store` and `registry` (may be null: no
// metrics) must outlive the runtime. Errors name what failed.
Result<std::unique_ptr<AuditRuntime>> StartAudit(const AuditConfig& config,
                                                 crypto::Keyring& keyring, store::Store& store,
                                                 const std::string& data_dir,
                                                 metrics::Registry* registry);

// Writes what is queued and a final checkpoint, then closes the log. Call after the front ends
// stopped.
Status StopAudit(AuditRuntime& runtime);

}  // namespace rampart::app
