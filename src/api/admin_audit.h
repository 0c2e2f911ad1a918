#pragma once

// GET /v1/admin/audit (docs/audit.md, "Querying the log"): the audit log's records, filtered by
// time, tenant, principal and trace id, as JSON. Records are answered with their digests only:
// sealed content (audit:full) is never sent, its fields answered empty.
//
//   GET /v1/admin/audit?from=T&to=T&tenant=X&principal=Y&trace_id=Z&after=SEQ&limit=N
//   -> {"records": [<record>, ...], "next_after": SEQ}   (next_after: 0 when no more)
//
// T is Unix seconds or an RFC 3339 UTC time (2026-12-01T00:00:00Z); `limit` 1..1000 (100).
// Thread-safe, pure functions (the store call blocks: run it on the admin worker).

#include <string>
#include <string_view>

#include "core/status.h"
#include "store/store.h"

namespace rampart::api {

inline constexpr int64_t kAuditQueryDefaultLimit = 100;
inline constexpr int64_t kAuditQueryMaxLimit = 1000;

// `query` (the request's query string) as an AuditQuery; InvalidArgument naming the parameter.
Result<store::AuditQuery> ParseAuditQuery(std::string_view query);

// Runs `query` on `store`: the answer's JSON body. Errors: the store's; Internal for a stored
// record that does not decode.
Result<std::string> QueryAuditRecordsJson(store::Store& store, const store::AuditQuery& query);

}  // namespace rampart::api
