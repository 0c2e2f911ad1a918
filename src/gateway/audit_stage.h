#pragma once

// The gateway's audit stage (docs/audit.md, "What each API records"): one AuditRecord per call,
// however it ended, from what the earlier stages left on the CallContext: who called
// (authenticate), the decision with its rules and obligations (authorise), the PII found by type
// (guard_input, guard_output: counts, never values), the route and the logical model that
// answered, the upstream or local target, tokens in and out, the time spent upstream and in the
// gateway, and the status. The request's body as forwarded (after the input guard's redaction,
// so what the policy says to redact never reaches the log, even sealed) and the answer as the
// caller got it (after the output guard; a stream's events concatenated) are digested, and
// sealed too under the `audit:full` obligation. A request that failed to parse has no body left
// to digest: its digest is that of the empty string.
//
// The record is handed to the sink when the call completes (OnComplete), after its answer went
// out: the gateway does not hold answers for a sync audit log (a streamed answer cannot be held
// back without defeating streaming); sync mode gates the KServe front ends.
//
// Thread-safe and never blocks, as every stage; the answer is kept on the CallContext only while
// a sink is set.

#include <memory>

#include "audit/sink.h"
#include "gateway/stage.h"

namespace rampart::gateway {

// `sink` may be null (nothing recorded: the stage passes everything through); it must outlive
// the stage.
std::unique_ptr<Stage> MakeAuditStage(audit::AuditSink* sink);

}  // namespace rampart::gateway
