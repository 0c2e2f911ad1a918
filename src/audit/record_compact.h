#pragma once

// The compact form of an AuditRecord, as version-2 and 3 audit batches store it
// (store/audit_batch.h, docs/audit.md "Storage"): values only, keys implied by their place, small
// integers as varints, content digests as raw bytes. What a batch row holds besides it (time,
// tenant, principal, trace id, request id, action) is not repeated here, so a record is the
// batch's fields plus this form. A version-2 batch's leaf hash covers the canonical encoding
// (record_codec.h), rebuilt from the two when reading, byte for byte what the writer hashed; a
// version-3 batch's covers the compact leaf input (below), rebuilt likewise.
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

// Appends `record`'s compact form to `out`, for the batch place of sequence `place` (a
// version-2 batch's: record.sequence, so the offset stored is 0).
void AppendCompactRecord(const AuditRecord& record, int64_t place, std::string& out);

// The compact leaf: the bytes a new record's leaf hash covers (H(0x00 || leaf input)), as
// Certificate Transparency's leaf input is a binary structure rather than text. The whole record,
// self-describing (docs/audit.md, "The record encoding"):
//   the version byte (kCompactLeafVersion; a canonical encoding starts with '{', so the two kinds
//   of leaf input never coincide),
//   sequence, time_unix_ns (signed varints),
//   tenant, principal, trace_id, request_id, action (strings),
//   then the compact form above from its flags byte on (flags ... status).
// A version-3 batch stores per record its time and those five strings in fields of their own,
// and as its compact form the "body": the version byte, the sequence's offset from the record's
// place in the batch (signed varint; the writer writes 0), then the flags byte onwards; readers
// rebuild the leaf input from the two (RebuildCompactLeaf), byte for byte what the writer hashed.
inline constexpr char kCompactLeafVersion = 2;

// Appends `record`'s compact leaf input to `leaf` and its version-3 body for batch place
// `place` to `body`: one encoding for both, the same bytes as the log's writer makes from the
// record's tail (below).
void AppendCompactLeaf(const AuditRecord& record, int64_t place, std::string& leaf,
                       std::string& body);

// A record's compact tail: its compact leaf input without the version byte and the sequence
// (time, the five query fields, then the flags byte onwards), which an appending thread encodes
// (AuditLog::Append) where the record's memory is, before its sequence is known; the writer puts
// the two in front when it commits (CompactLeafFromTail). `time_unix_ns` stands for the record's
// own. With `digests`, the content digests stored are those (raw) instead of the record's
// `request_digest` and `response_digest` text.
void AppendCompactTail(const AuditRecord& record, int64_t time_unix_ns,
                       const ContentDigests* digests, std::string& out);

// A compact tail's parts: views into it.
struct CompactTail {
  int64_t time_unix_ns = 0;
  std::string_view tenant, principal, trace_id, request_id, action;
  std::string_view rest;  // the flags byte onwards
};
// `tail`'s parts. InvalidArgument when it does not start as a compact tail does.
Status ParseCompactTail(std::string_view tail, CompactTail& parts);

// The compact leaf input of the record whose tail is `tail` (`parts` its parts) at `sequence`,
// appended to `leaf`, and its version-3 body for batch place `place` to `body`: what
// AppendCompactLeaf makes of the record.
void CompactLeafFromTail(std::string_view tail, const CompactTail& parts, int64_t sequence,
                         int64_t place, std::string& leaf, std::string& body);

// The leaf input of a version-3 batch's row (`compact_leaf`), into `leaf` (replaced).
// InvalidArgument when its body does not start with a known version byte and an offset.
Status RebuildCompactLeaf(const store::AuditRow& row, std::string& leaf);

// The record a compact leaf input holds, into `record` (its strings' buffers reused: the
// verifier decodes every record into one). InvalidArgument, saying what is wrong, when `leaf`
// is not one (an unknown version, a damaged or edited form).
Status DecodeCompactLeaf(std::string_view leaf, AuditRecord& record);

// The bytes `row`'s leaf hash covers: a compact leaf row's rebuilt leaf input, a version-2
// compact row's canonical encoding rebuilt, or a canonical row's record as it is; into `buffer`
// unless the row holds them. When `decoded` is given, a compact row's record is left there too.
// InvalidArgument when a compact row does not decode.
Result<std::string_view> RowLeafInput(const store::AuditRow& row, std::string& buffer,
                                      AuditRecord* decoded = nullptr);

// The record a compact row (AuditRow::compact, of a version-2 or 3 batch) holds. InvalidArgument,
// saying what is wrong, when its compact form does not decode (a damaged or edited blob).
Result<AuditRecord> DecodeCompactRow(const store::AuditRow& row);

// Makes a compact row canonical: `record` the record's canonical encoding, the query fields
// their column form (IndexText), as a version-1 batch or a per-record row holds them. Does
// nothing to a canonical row. (A compact leaf row's leaf hash does not cover the canonical
// encoding: take its leaf input first, RowLeafInput.) On error (DecodeCompactRow's) the row is left
// as it was. When `decoded` is given, a compact row's record is left there too (so that a reader
// need not parse the canonical encoding back).
Status ExpandAuditRow(store::AuditRow& row, AuditRecord* decoded = nullptr);

}  // namespace rampart::audit
