#pragma once

// The canonical encoding of an AuditRecord: what exports, proofs and the admin query print, and
// the bytes the leaf hash covers for records written before compact leaves (per-record rows,
// version-1 and 2 batches; newer records' leaves cover their compact leaf, record_compact.h), so
// that anyone can recompute the hash (docs/audit.md).
//
// It is JSON in the manner of RFC 8785 (JCS) for the values records hold: one object with every
// field present, keys sorted by their bytes, no whitespace, integers only (no floats), strings
// with only '"', '\\' and control characters escaped (\b \f \n \r \t as such, the others as
// \u00xx in lower case), everything else as UTF-8. Strings are UTF-8: a byte that is not part
// of valid UTF-8 is replaced by U+FFFD before encoding (so what is stored is always valid). The
// field "v" is the encoding's version, 1.
//
// Thread-safe, pure functions.

#include <cstdint>
#include <string>
#include <string_view>

#include "audit/record.h"
#include "core/status.h"

namespace rampart::audit {

inline constexpr int kRecordEncodingVersion = 1;

std::string EncodeRecord(const AuditRecord& record);

// The same into `buffer`, reused from record to record (the log's writer encodes every record
// into one): the encoding is the returned view of its start, valid until `buffer` changes. The
// buffer only grows (to the worst case's size), so that no byte of it is cleared twice.
std::string_view EncodeRecordInto(const AuditRecord& record, std::string& buffer);

// Reads an encoded record back (export, queries, verification). InvalidArgument naming the field
// for text that is not an encoded record; unknown fields are errors too (a record is exactly
// what was hashed).
Result<AuditRecord> DecodeRecord(std::string_view text);

// The copy of a field kept in a query column (tenant, principal, trace id, request id, action):
// valid UTF-8 without NUL (PostgreSQL's TEXT holds none), a NUL becoming U+FFFD. Verification
// checks each column against the record through this function.
std::string IndexText(std::string_view text);
// Whether IndexText(text) == text without making it (printable ASCII; other text may be too).
bool IsIndexText(std::string_view text);

// `text` with every byte that is not part of valid UTF-8 replaced by U+FFFD.
std::string ValidUtf8(std::string_view text);
// Whether ValidUtf8(text) == text, without making it.
bool IsValidUtf8(std::string_view text);

}  // namespace rampart::audit
