#pragma once

// The admin API under /v1/admin (docs/access.md), behind policy like every other API:
//
//   GET    /v1/admin/tenants                      admin:tenants:read     -> {"tenants":[...]}
//   POST   /v1/admin/tenants  {"name","attributes"?}           admin:tenants:write   -> 201
//   DELETE /v1/admin/tenants/{name}                            admin:tenants:write
//   GET    /v1/admin/principals[?tenant=T]        admin:principals:read  -> {"principals":[...]}
//   PUT    /v1/admin/principals/{tenant}/{name}  {"roles"?,"attributes"?,"disabled"?}
//                                                              admin:principals:write
//   DELETE /v1/admin/principals/{tenant}/{name}                admin:principals:write
//   POST   /v1/admin/keys  {"tenant","name","principal"?,"roles"?,"expires_in"?}
//                                     admin:keys:write  -> 201 {"key", "id", ...}: the key, once
//   GET    /v1/admin/keys[?tenant=T]             admin:keys:read  -> {"keys":[...]}, no secrets
//   DELETE /v1/admin/keys/{id}                   admin:keys:write  (revokes)
//   GET    /v1/admin/keyring                     admin:keyring:read  -> {"master_key", "keys":
//          [{"name","purpose","algorithm","current_version","min_decryption_version",
//            "versions":[{"version","created"}]}]}  (reloaded first; never key material)
//   POST   /v1/admin/keyring/{name}/rotate       admin:keyring:write -> {"name","version"};
//          409 when another process rotated at the same moment (the keyring is reloaded)
//   (the keyring routes answer 503 when the server runs without a master key)
//
// Resources: {type: tenant, name}, {type: principal, name, attributes {tenant, roles}}, {type:
// key, name: the key id or "*", attributes {tenant, roles}}, {type: keyring, name: the key's or
// "*"}; listing every tenant's is name "*".
// `roles` (writes, comma-joined) are those the write grants (a new key's with its principal's,
// a principal's new ones) or the target holds (deletions); a revoked key's tenant and roles are
// looked up first. A caller may grant only roles it holds (PolicySet::Holds) unless a policy
// permits admin:roles:grant on {type: role, name: <role>, attributes {tenant}}: 403 otherwise.
// The caller is authenticated before anything else (401 for every request without valid
// credentials, whatever its route or body), then the request is read and decided (403).
// Bodies are read with src/json and checked field by field (400 naming the field); store errors
// map to 404 (NotFound), 409 (AlreadyExists), 400 (InvalidArgument, FailedPrecondition), 503
// (Unavailable). Store calls block, so they run on this API's own thread (a SerialWorker, at
// most kMaxQueuedAdminRequests waiting; 429 past that), and so do the lookups, the decision
// and the quota admission (its reservation held until the answer); after a write that concerns keys
// or principals the key table is refreshed, so the change holds for the next request at once.
// Handle runs on an HTTP I/O thread and never blocks. Errors in OpenAI's shape, with
// x-request-id on every answer.

#include <cstdint>
#include <string_view>

#include "audit/sink.h"
#include "core/serial_worker.h"
#include "core/status.h"
#include "crypto/keyring.h"
#include "identity/api_keys.h"
#include "net/http_server.h"
#include "policy/access.h"
#include "store/store.h"

namespace rampart::api {

inline constexpr size_t kMaxQueuedAdminRequests = 64;

// "30d", "12h", "15m", "3600s" or a number of seconds -> seconds. InvalidArgument otherwise
// (also for 0 and negative durations).
Result<int64_t> ParseDuration(std::string_view text);

class AdminHttp {
 public:
  // All must outlive the API; `keys` may be null (no table to refresh); `keyring` too (no master
  // key: the keyring routes answer 503); `audit` may be null (nothing recorded; otherwise every
  // request yields one record, api "admin").
  AdminHttp(store::Store& store, identity::ApiKeyTable* keys, const policy::AccessControl& access,
            crypto::Keyring* keyring = nullptr, audit::AuditSink* audit = nullptr);
  ~AdminHttp();

  // Whether `path` is this API's (/v1/admin/tenants, principals, keys, keyring and below).
  static bool Owns(std::string_view path);
  // Every policy action this API decides.
  static std::vector<std::string_view> Actions();
  void Handle(net::HttpRequest&& request, net::Responder responder);
  // Finishes queued requests and stops the thread.
  void Shutdown() { worker_.Stop(); }

 private:
  store::Store& store_;
  identity::ApiKeyTable* keys_;
  const policy::AccessControl& access_;
  crypto::Keyring* keyring_;
  audit::AuditSink* const audit_;
  SerialWorker worker_{"admin", kMaxQueuedAdminRequests};
};

}  // namespace rampart::api
