#pragma once

// Where front ends hand their requests' AuditRecords: the one interface the KServe HTTP and gRPC
// front ends, the gateway's audit stage, the guard API and the admin API see. The server's
// implementation is audit::Recorder (recorder.h: digests, sealing under `audit:full`, the
// AuditLog); tests give their own. Front ends hold a `AuditSink*` that is null when the audit
// log is off, and then record nothing.
//
// The contract front ends keep (docs/audit.md, "What each API records"):
//   - every request they answer yields exactly one Record call, refusals (401, 403, 429) and
//     errors included; health probes and metrics scrapes are not requests of a principal and
//     are not recorded;
//   - with sync() true, the answer is released only from `done` with OK (the record is durable);
//     `done` with an error answers 503 instead, so no answer ever goes out without its record;
//   - with sync() false the answer goes at once, and `done` only tells whether the record was
//     queued (a refusal is counted by the sink).
//
// Threads: Record is thread-safe, never blocks, and may be called from I/O threads; `done` runs
// once, on whichever thread the sink chooses (the log's writer in sync mode): it must not block.

#include <string>
#include <string_view>

#include "audit/record.h"
#include "core/status.h"
#include "core/unique_function.h"

namespace rampart::audit {

// What a request carried and what it was answered, for the record's digests (always) and, when
// `full` (the policy's `audit:full` obligation), its sealed copies. Views, read only during
// Record (the sink digests and seals before it returns).
struct AuditContent {
  std::string_view request;
  std::string_view response;
  bool full = false;
};

class AuditSink {
 public:
  virtual ~AuditSink() = default;
  // Whether answers wait for their record to be durable (`audit: sync`).
  virtual bool sync() const = 0;
  // Completes `record` from `content` (digests, sealed content) and appends it. `done` (may be
  // empty) gets OK once the record is durable (sync) or queued (batched), or the error
  // (Unavailable: the log's queue is full or its store is down).
  // `record` is taken (moved from): a record is about 1 KiB, and passing it by value through each
  // layer cost a move and a destructor per layer on the request's thread.
  virtual void Record(AuditRecord&& record, AuditContent content,
                      UniqueFunction<void(Status)> done) = 0;
};

}  // namespace rampart::audit
