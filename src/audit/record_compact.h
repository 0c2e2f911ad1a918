#pragma once

// The compact form of an AuditRecord, as version-2 audit batches store it (store/audit_batch.h,
// docs/audit.md "Storage"): values only, keys implied by their place, small integers as
// varints, content digests as raw bytes. What a batch row holds besides it (time, tenant,
// principal, trace id, request id, action) is not repeated here, so a record is the batch's
// fields plus this form; the canonical encoding (record_codec.h), which the leaf hash covers, is
// rebuilt from the two when reading and is byte for byte what the writer hashed.
//
// Layout, in order (varint: LEB128; signed numbers zigzag-encoded first; string: varint length
// and its bytes, as the record held them):
//   the sequence's offset from its place in the batch (signed varint; the writer writes 0),
//   flags (one byte: bit 0 `allowed`; the others 0),
//   api, auth_method, key_id, source_address, resource_type, resource, route, target,
//   model_version, outcome, request_sealed, response_sealed (strings),
//   request_digest, response_digest (one byte: 1 "sha256:" and 2 "sm3:" followed by the 32 raw
//   bytes of a digest written in lower-case hex, 0 a string of any other text),
//   rules, obligations, documents (a varint count, then strings),
//   pii_input, pii_output, stages_ns (a varint count, then per entry a string and a signed varint),
//   tokens_in, tokens_out, instance_ns, latency_ns, status (signed varints).
// Nothing may follow. Each record has exactly one compact form, so that any change to its bytes
// either changes the record read back (and so its canonical encoding and leaf hash) or does not
// decode: strings are valid UTF-8 (the writer stores what the canonical encoding makes of them),
// varints are in their shortest form, map keys strictly increase, and a digest is text only when
// it has no raw form.
//
// Thread-safe, pure functions.

#include <cstdint>
#include <string>
#include <string_view>

#include "audit/record.h"
#include "core/status.h"
#include "store/store.h"

namespace rampart::audit {

// Appends `record`'s compact form to `out`, for the batch place of sequence `place` (the log's
// writer: record.sequence, so the offset stored is 0).
void AppendCompactRecord(const AuditRecord& record, int64_t place, std::string& out);

// The record a compact row (AuditRow::compact) holds. InvalidArgument, saying what is wrong, when
// its compact form does not decode (a damaged or edited blob).
Result<AuditRecord> DecodeCompactRow(const store::AuditRow& row);

// Makes a compact row canonical: `record` the record's canonical encoding, the query fields
// their column form (IndexText), as a version-1 batch or a per-record row holds them. Does
// nothing to a canonical row. On error (DecodeCompactRow's) the row is left as it was. When
// `decoded` is given, a compact row's record is left there too (so that a reader need not parse
// the canonical encoding back).
Status ExpandAuditRow(store::AuditRow& row, AuditRecord* decoded = nullptr);

}  // namespace rampart::audit
