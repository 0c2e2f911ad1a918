#include "store/audit_batches.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <iterator>

#include "core/varint.h"
#include "crypto/digest.h"
#include "store/audit_rows.h"

namespace rampart::store {
namespace internal {
namespace {

// No field of a record comes near this; a length above it is a damaged blob.
constexpr uint64_t kMaxField = uint64_t{1} << 31;

void PutField(std::string& out, std::string_view field) {
  PutVarint(out, field.size());
  out.append(field);
}

// A record's time: 8 bytes little-endian (version 1), or the zigzag LEB128 difference from the
// previous record's (version 2). The arithmetic is modulo 2^64, so any two times round-trip.
void PutTime(std::string& out, char version, int64_t time, int64_t& previous) {
  if (version == kAuditBatchVersion1) {
    const auto bits = static_cast<uint64_t>(time);
    char bytes[8];
    for (int b = 0; b < 8; ++b) bytes[b] = static_cast<char>(bits >> (8 * b));
    out.append(bytes, 8);
    return;
  }
  const uint64_t delta = static_cast<uint64_t>(time) - static_cast<uint64_t>(previous);
  previous = time;
  PutVarint(out, ZigZag(delta));
}

bool GetLength(std::string_view& in, uint64_t& length) {
  return GetVarint(in, length) && length <= kMaxField;
}

bool GetField(std::string_view& in, std::string_view& field) {
  uint64_t length = 0;
  if (!GetLength(in, length) || length > in.size()) return false;
  field = in.substr(0, length);
  in.remove_prefix(length);
  return true;
}

bool GetTime(std::string_view& in, char version, int64_t& previous) {
  if (version == kAuditBatchVersion1) {
    if (in.size() < 8) return false;
    uint64_t time = 0;
    for (int i = 0; i < 8; ++i) {
      time |= static_cast<uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
    }
    in.remove_prefix(8);
    previous = static_cast<int64_t>(time);
    return true;
  }
  uint64_t zigzag = 0;
  if (!GetVarint(in, zigzag)) return false;
  previous = static_cast<int64_t>(static_cast<uint64_t>(previous) + UnZigZag(zigzag));
  return true;
}

// Reads one record (`time` is the previous record's on entry, this one's on return).
bool GetRow(std::string_view& in, char version, int64_t& time, AuditRow& row) {
  if (!GetTime(in, version, time)) return false;
  row.time_unix_ns = time;
  std::string_view fields[8];
  for (std::string_view& field : fields) {
    if (!GetField(in, field)) return false;
  }
  row.tenant.assign(fields[0]);
  row.principal.assign(fields[1]);
  row.trace_id.assign(fields[2]);
  row.request_id.assign(fields[3]);
  row.action.assign(fields[4]);
  row.record.assign(fields[5]);
  row.leaf_hash = crypto::ToHex(fields[6]);
  row.chain_hash = crypto::ToHex(fields[7]);
  row.compact = version != kAuditBatchVersion1;
  row.compact_leaf = version == kAuditBatchVersion3;
  return true;
}

bool SkipRow(std::string_view& in, char version, int64_t& time) {
  if (!GetTime(in, version, time)) return false;
  std::string_view field;
  for (int i = 0; i < 8; ++i) {
    if (!GetField(in, field)) return false;
  }
  return true;
}

bool KnownVersion(std::string_view records) {
  return !records.empty() &&
         (records.front() == kAuditBatchVersion1 || records.front() == kAuditBatchVersion2 ||
          records.front() == kAuditBatchVersion3);
}

// Hex digit values, -1 for any other byte.
constexpr std::array<int8_t, 256> kHexValues = [] {
  std::array<int8_t, 256> values{};
  values.fill(-1);
  for (int c = 0; c < 10; ++c) values['0' + c] = static_cast<int8_t>(c);
  for (int c = 0; c < 6; ++c) {
    values['a' + c] = static_cast<int8_t>(10 + c);
    values['A' + c] = static_cast<int8_t>(10 + c);
  }
  return values;
}();

// Appends `hex` as a field of raw bytes; false when it is not hex.
bool PutHexField(std::string& out, std::string_view hex) {
  if (hex.size() % 2 != 0) return false;
  PutVarint(out, hex.size() / 2);
  const size_t start = out.size();
  out.resize(start + hex.size() / 2);
  char* bytes = out.data() + start;
  int bad = 0;
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int high = kHexValues[static_cast<unsigned char>(hex[i])];
    const int low = kHexValues[static_cast<unsigned char>(hex[i + 1])];
    bad |= high | low;
    bytes[i / 2] = static_cast<char>(high << 4 | low);
  }
  return bad >= 0;
}

}  // namespace

Result<AuditBatch> PackAuditBatch(const AuditRow* rows, size_t count) {
  AuditBatch batch;
  if (count == 0) return InvalidArgument("no audit records to pack");
  const bool compact = rows[0].compact;
  const bool compact_leaf = compact && rows[0].compact_leaf;
  const char version = compact_leaf ? kAuditBatchVersion3
                       : compact    ? kAuditBatchVersion2
                                    : kAuditBatchVersion1;
  batch.first_sequence = rows[0].sequence;
  batch.last_sequence = rows[count - 1].sequence;
  batch.min_time_unix_ns = rows[0].time_unix_ns;
  batch.max_time_unix_ns = rows[0].time_unix_ns;
  size_t size = 1;
  for (size_t i = 0; i < count; ++i) {
    const AuditRow& row = rows[i];
    if (row.compact != compact) {
      return InvalidArgument("audit records {} and {}: compact and canonical rows in one batch",
                             rows[0].sequence, row.sequence);
    }
    if (compact && row.compact_leaf != compact_leaf) {
      return InvalidArgument(
          "audit records {} and {}: compact leaves and canonical leaves in one batch",
          rows[0].sequence, row.sequence);
    }
    size += 8 + 8 * 5 + row.tenant.size() + row.principal.size() + row.trace_id.size() +
            row.request_id.size() + row.action.size() + row.record.size() +
            (row.leaf_hash.size() + row.chain_hash.size()) / 2;
  }
  std::string& out = batch.records;
  out.reserve(size);
  out.push_back(version);
  int64_t previous_time = 0;
  for (size_t i = 0; i < count; ++i) {
    const AuditRow& row = rows[i];
    batch.min_time_unix_ns = std::min(batch.min_time_unix_ns, row.time_unix_ns);
    batch.max_time_unix_ns = std::max(batch.max_time_unix_ns, row.time_unix_ns);
    PutTime(out, version, row.time_unix_ns, previous_time);
    PutField(out, row.tenant);
    PutField(out, row.principal);
    PutField(out, row.trace_id);
    PutField(out, row.request_id);
    PutField(out, row.action);
    PutField(out, row.record);
    if (!PutHexField(out, row.leaf_hash) || !PutHexField(out, row.chain_hash)) {
      return InvalidArgument("audit record {}: a hash is not hex", row.sequence);
    }
  }
  return batch;
}

void UnpackAuditBatch(int64_t first_sequence, std::string_view records, int64_t after_sequence,
                      std::vector<AuditRow>& out, int64_t max_records) {
  if (!KnownVersion(records)) return;
  const char version = records.front();
  records.remove_prefix(1);
  int64_t time = 0;
  for (int64_t sequence = first_sequence, added = 0; !records.empty() && added < max_records;
       ++sequence) {
    if (sequence <= after_sequence) {
      if (!SkipRow(records, version, time)) return;
      continue;
    }
    AuditRow row;
    if (!GetRow(records, version, time, row)) return;
    ++added;
    row.sequence = sequence;
    out.push_back(std::move(row));
  }
}

Status ValidateAuditBatch(const AuditBatch& batch) {
  if (batch.first_sequence < 1 || batch.last_sequence < batch.first_sequence) {
    return InvalidArgument("audit batch {}..{} is not a range of positive sequences",
                           batch.first_sequence, batch.last_sequence);
  }
  std::string_view records = batch.records;
  if (!KnownVersion(records)) {
    return InvalidArgument("audit batch {}: not a version {}, {} or {} batch", batch.first_sequence,
                           int{kAuditBatchVersion1}, int{kAuditBatchVersion2},
                           int{kAuditBatchVersion3});
  }
  const char version = records.front();
  records.remove_prefix(1);
  int64_t count = 0;
  int64_t time = 0;
  while (!records.empty()) {
    if (!SkipRow(records, version, time)) {
      return InvalidArgument("audit batch {}: record {} is malformed", batch.first_sequence,
                             batch.first_sequence + count);
    }
    ++count;
  }
  if (count != batch.last_sequence - batch.first_sequence + 1) {
    return InvalidArgument("audit batch {}..{} holds {} records", batch.first_sequence,
                           batch.last_sequence, count);
  }
  if (batch.checkpoint.has_value() && batch.checkpoint->tree_size != batch.last_sequence) {
    return InvalidArgument("audit batch {}..{} carries a checkpoint at tree size {}",
                           batch.first_sequence, batch.last_sequence, batch.checkpoint->tree_size);
  }
  if (batch.closes.has_value() && !batch.checkpoint.has_value()) {
    return InvalidArgument("audit batch {}..{} closes an epoch without a checkpoint",
                           batch.first_sequence, batch.last_sequence);
  }
  return Status::Ok();
}

}  // namespace internal

using internal::PutField;
using internal::PutTime;

void AuditBatchBuilder::Start(int64_t first_sequence, char version) {
  batch_.first_sequence = first_sequence;
  batch_.last_sequence = first_sequence - 1;
  batch_.min_time_unix_ns = 0;
  batch_.max_time_unix_ns = 0;
  batch_.records.clear();
  batch_.records.push_back(version);
  batch_.checkpoint.reset();
  batch_.closes.reset();
  version_ = version;
  previous_time_ = 0;
  count_ = 0;
}

void AuditBatchBuilder::Add(int64_t time_unix_ns, std::string_view tenant,
                            std::string_view principal, std::string_view trace_id,
                            std::string_view request_id, std::string_view action,
                            std::string_view record, std::string_view leaf_hash,
                            std::string_view chain_hash) {
  batch_.min_time_unix_ns =
      count_ == 0 ? time_unix_ns : std::min(batch_.min_time_unix_ns, time_unix_ns);
  batch_.max_time_unix_ns =
      count_ == 0 ? time_unix_ns : std::max(batch_.max_time_unix_ns, time_unix_ns);
  ++count_;
  ++batch_.last_sequence;
  std::string& out = batch_.records;
  PutTime(out, version_, time_unix_ns, previous_time_);
  for (const std::string_view field :
       {tenant, principal, trace_id, request_id, action, record, leaf_hash, chain_hash}) {
    PutField(out, field);
  }
}

namespace internal {

bool MatchesAuditQuery(const AuditRow& row, const AuditQuery& query) {
  if (query.from_unix_ns != 0 && row.time_unix_ns < query.from_unix_ns) return false;
  if (query.to_unix_ns != 0 && row.time_unix_ns >= query.to_unix_ns) return false;
  if (!query.tenant.empty() && row.tenant != query.tenant) return false;
  if (!query.principal.empty() && row.principal != query.principal) return false;
  if (!query.trace_id.empty() && row.trace_id != query.trace_id) return false;
  return true;
}

std::vector<AuditRow> MergeAuditRows(std::vector<AuditRow> older, std::vector<AuditRow> batched,
                                     int64_t limit) {
  if (older.empty() && static_cast<int64_t>(batched.size()) <= limit) return batched;
  std::vector<AuditRow> merged;
  merged.reserve(older.size() + batched.size());
  std::merge(std::make_move_iterator(older.begin()), std::make_move_iterator(older.end()),
             std::make_move_iterator(batched.begin()), std::make_move_iterator(batched.end()),
             std::back_inserter(merged),
             [](const AuditRow& a, const AuditRow& b) { return a.sequence < b.sequence; });
  if (static_cast<int64_t>(merged.size()) > limit) merged.resize(static_cast<size_t>(limit));
  return merged;
}

}  // namespace internal
}  // namespace rampart::store
