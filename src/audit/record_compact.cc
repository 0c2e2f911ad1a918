#include "audit/record_compact.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "audit/record_codec.h"
#include "core/varint.h"

namespace rampart::audit {
namespace {

constexpr char kDigestText = 0;
constexpr char kDigestSha256 = 1;
constexpr char kDigestSm3 = 2;
constexpr size_t kDigestBytes = 32;
constexpr char kAllowed = 1;

void PutSigned(std::string& out, int64_t value) {
  PutVarint(out, ZigZag(static_cast<uint64_t>(value)));
}

// Strings are stored as valid UTF-8 (what the canonical encoding makes of them anyway), so that
// each canonical record has exactly one compact form: a changed byte always changes the record
// read back, or makes the form invalid.
void PutString(std::string& out, std::string_view text) {
  if (!IsValidUtf8(text)) {
    const std::string valid = ValidUtf8(text);
    PutVarint(out, valid.size());
    out.append(valid);
    return;
  }
  PutVarint(out, text.size());
  out.append(text);
}

constexpr std::array<int8_t, 256> kLowerHex = [] {
  std::array<int8_t, 256> values{};
  values.fill(-1);
  for (int c = 0; c < 10; ++c) values['0' + c] = static_cast<int8_t>(c);
  for (int c = 0; c < 6; ++c) values['a' + c] = static_cast<int8_t>(10 + c);
  return values;
}();

void PutDigest(std::string& out, std::string_view digest) {
  const auto raw = [&](char tag, std::string_view prefix) {
    if (digest.size() != prefix.size() + 2 * kDigestBytes || !digest.starts_with(prefix)) {
      return false;
    }
    const std::string_view hex = digest.substr(prefix.size());
    char bytes[kDigestBytes];
    int bad = 0;
    for (size_t i = 0; i < kDigestBytes; ++i) {
      const int high = kLowerHex[static_cast<unsigned char>(hex[2 * i])];
      const int low = kLowerHex[static_cast<unsigned char>(hex[2 * i + 1])];
      bad |= high | low;
      bytes[i] = static_cast<char>(high << 4 | low);
    }
    if (bad < 0) return false;
    out.push_back(tag);
    out.append(bytes, kDigestBytes);
    return true;
  };
  if (raw(kDigestSha256, "sha256:") || raw(kDigestSm3, "sm3:")) return;
  out.push_back(kDigestText);
  PutString(out, digest);
}

void PutRawDigest(std::string& out, crypto::DigestAlgorithm algorithm,
                  const crypto::Digest& digest) {
  out.push_back(algorithm == crypto::DigestAlgorithm::kSm3 ? kDigestSm3 : kDigestSha256);
  out.append(reinterpret_cast<const char*>(digest.data()), digest.size());
}

void PutStrings(std::string& out, const std::vector<std::string>& values) {
  PutVarint(out, values.size());
  for (const std::string& value : values) PutString(out, value);
}

template <typename Map>
void PutCounts(std::string& out, const Map& counts) {
  PutVarint(out, counts.size());
  const bool valid = std::all_of(counts.begin(), counts.end(),
                                 [](const auto& entry) { return IsValidUtf8(entry.first); });
  if (valid) {
    for (const auto& [key, value] : counts) {
      PutString(out, key);
      PutSigned(out, value);
    }
    return;
  }
  // Keys made valid UTF-8 may sort differently (and two may become one: such a record's map
  // cannot be read back whole, in this form or the canonical one; keys are names Rampart gives).
  std::vector<std::pair<std::string, int64_t>> sorted;
  for (const auto& [key, value] : counts) sorted.emplace_back(ValidUtf8(key), value);
  std::sort(sorted.begin(), sorted.end());
  for (const auto& [key, value] : sorted) {
    PutString(out, key);
    PutSigned(out, value);
  }
}

// Reads the compact form; every Get fails (false) when the bytes end first or are malformed.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool done() const { return in_.empty(); }
  std::string_view rest() const { return in_; }

  bool Varint(uint64_t& value) { return GetVarint(in_, value); }
  bool Signed(int64_t& value) {
    uint64_t zigzag = 0;
    if (!Varint(zigzag)) return false;
    value = static_cast<int64_t>(UnZigZag(zigzag));
    return true;
  }
  bool Byte(char& value) {
    if (in_.empty()) return false;
    value = in_.front();
    in_.remove_prefix(1);
    return true;
  }
  bool View(std::string_view& value) {
    uint64_t length = 0;
    if (!Varint(length) || length > in_.size()) return false;
    value = in_.substr(0, length);
    in_.remove_prefix(length);
    return IsValidUtf8(value);
  }
  bool String(std::string& value) {
    std::string_view text;
    if (!View(text)) return false;
    value.assign(text);
    return true;
  }
  bool Digest(std::string& value) {
    static constexpr char kDigits[] = "0123456789abcdef";
    char tag = 0;
    if (!Byte(tag)) return false;
    if (tag == kDigestText) {
      // Only text that has no raw form (one form per record).
      if (!String(value)) return false;
      std::string raw;
      PutDigest(raw, value);
      return raw.front() == kDigestText;
    }
    if ((tag != kDigestSha256 && tag != kDigestSm3) || in_.size() < kDigestBytes) return false;
    value = tag == kDigestSha256 ? "sha256:" : "sm3:";
    for (size_t i = 0; i < kDigestBytes; ++i) {
      const auto byte = static_cast<unsigned char>(in_[i]);
      value += kDigits[byte >> 4];
      value += kDigits[byte & 0xf];
    }
    in_.remove_prefix(kDigestBytes);
    return true;
  }
  // A count of items each taking at least one byte (so a damaged count cannot ask for more).
  bool Count(uint64_t& count) { return Varint(count) && count <= in_.size(); }
  bool Strings(std::vector<std::string>& values) {
    uint64_t count = 0;
    if (!Count(count)) return false;
    values.resize(count);
    for (std::string& value : values) {
      if (!String(value)) return false;
    }
    return true;
  }
  template <typename Number, typename Map>
  bool Counts(Map& counts) {
    uint64_t count = 0;
    if (!Count(count)) return false;
    counts.clear();
    std::string key;
    for (uint64_t i = 0; i < count; ++i) {
      int64_t value = 0;
      if (!String(key) || !Signed(value)) return false;
      if (value < std::numeric_limits<Number>::min() || value > std::numeric_limits<Number>::max())
        return false;
      // Keys in increasing order, as the map wrote them (one form per record).
      if (!counts.empty() && !(std::prev(counts.end())->first < key)) return false;
      counts[key] = static_cast<Number>(value);
    }
    return true;
  }

 private:
  std::string_view in_;
};

// The compact form from its flags byte on: what follows the sequence's offset in a batch's
// compact form, and the query fields in a compact leaf. With `digests`, the content digests are
// those rather than the record's text.
void AppendBody(const AuditRecord& r, const ContentDigests* digests, std::string& out) {
  out.push_back(r.allowed ? kAllowed : 0);
  for (const std::string* text :
       {&r.api, &r.auth_method, &r.key_id, &r.source_address, &r.resource_type, &r.resource,
        &r.route, &r.target, &r.model_version, &r.outcome, &r.request_sealed, &r.response_sealed}) {
    PutString(out, *text);
  }
  if (digests != nullptr) {
    PutRawDigest(out, digests->algorithm, digests->request);
    PutRawDigest(out, digests->algorithm, digests->response);
  } else {
    PutDigest(out, r.request_digest);
    PutDigest(out, r.response_digest);
  }
  PutStrings(out, r.rules);
  PutStrings(out, r.obligations);
  PutStrings(out, r.documents);
  PutCounts(out, r.pii_input);
  PutCounts(out, r.pii_output);
  PutCounts(out, r.stages_ns);
  for (const int64_t number :
       {r.tokens_in, r.tokens_out, r.instance_ns, r.latency_ns, static_cast<int64_t>(r.status)}) {
    PutSigned(out, number);
  }
}

// A compact tail (record_compact.h) appended to `out`; where its flags byte is in `out`.
size_t AppendTail(const AuditRecord& r, int64_t time_unix_ns, const ContentDigests* digests,
                  std::string& out) {
  PutSigned(out, time_unix_ns);
  for (const std::string* text : {&r.tenant, &r.principal, &r.trace_id, &r.request_id, &r.action}) {
    PutString(out, *text);
  }
  const size_t rest = out.size();
  AppendBody(r, digests, out);
  return rest;
}

// A record's sequence as its offset from its place in a batch, and back (wrapping, never
// overflowing, on edited values).
int64_t Offset(int64_t sequence, int64_t place) {
  return static_cast<int64_t>(static_cast<uint64_t>(sequence) - static_cast<uint64_t>(place));
}
int64_t SequenceAt(int64_t place, int64_t offset) {
  return static_cast<int64_t>(static_cast<uint64_t>(place) + static_cast<uint64_t>(offset));
}

Status Bad(std::string_view what) {
  return InvalidArgument("its compact form does not decode ({})", what);
}

Status UnknownVersion(char version) {
  return InvalidArgument("its compact form has an unknown version ({})",
                         static_cast<int>(static_cast<unsigned char>(version)));
}

// Reads what AppendBody wrote into `r`, to the end of `in`.
Status DecodeBody(Reader& in, AuditRecord& r) {
  char flags = 0;
  if (!in.Byte(flags)) return Bad("flags");
  if ((flags & ~kAllowed) != 0) return Bad("unknown flags");
  r.allowed = (flags & kAllowed) != 0;
  for (std::string* text :
       {&r.api, &r.auth_method, &r.key_id, &r.source_address, &r.resource_type, &r.resource,
        &r.route, &r.target, &r.model_version, &r.outcome, &r.request_sealed, &r.response_sealed}) {
    if (!in.String(*text)) return Bad("a text field");
  }
  if (!in.Digest(r.request_digest) || !in.Digest(r.response_digest)) return Bad("a digest");
  if (!in.Strings(r.rules) || !in.Strings(r.obligations) || !in.Strings(r.documents)) {
    return Bad("a list");
  }
  if (!in.Counts<int>(r.pii_input) || !in.Counts<int>(r.pii_output) ||
      !in.Counts<int64_t>(r.stages_ns)) {
    return Bad("a map");
  }
  int64_t status = 0;
  if (!in.Signed(r.tokens_in) || !in.Signed(r.tokens_out) || !in.Signed(r.instance_ns) ||
      !in.Signed(r.latency_ns) || !in.Signed(status)) {
    return Bad("a number");
  }
  if (status < std::numeric_limits<int>::min() || status > std::numeric_limits<int>::max()) {
    return Bad("status out of range");
  }
  r.status = static_cast<int>(status);
  if (!in.done()) return Bad("bytes after its end");
  return Status::Ok();
}

}  // namespace

void AppendCompactRecord(const AuditRecord& r, int64_t place, std::string& out) {
  PutSigned(out, Offset(r.sequence, place));
  AppendBody(r, nullptr, out);
}

void AppendCompactTail(const AuditRecord& r, int64_t time_unix_ns, const ContentDigests* digests,
                       std::string& out) {
  AppendTail(r, time_unix_ns, digests, out);
}

Status ParseCompactTail(std::string_view tail, CompactTail& parts) {
  Reader in(tail);
  if (!in.Signed(parts.time_unix_ns)) return Bad("time");
  for (std::string_view* text :
       {&parts.tenant, &parts.principal, &parts.trace_id, &parts.request_id, &parts.action}) {
    if (!in.View(*text)) return Bad("a query field");
  }
  parts.rest = in.rest();
  if (parts.rest.empty()) return Bad("flags");
  return Status::Ok();
}

void CompactLeafFromTail(std::string_view tail, const CompactTail& parts, int64_t sequence,
                         int64_t place, std::string& leaf, std::string& body) {
  leaf.push_back(kCompactLeafVersion);
  PutSigned(leaf, sequence);
  leaf.append(tail);
  body.push_back(kCompactLeafVersion);
  PutSigned(body, Offset(sequence, place));
  body.append(parts.rest);
}

void AppendCompactLeaf(const AuditRecord& r, int64_t place, std::string& leaf, std::string& body) {
  // The writer's path (a tail, then its leaf and body), so that the two make the same bytes.
  std::string tail;
  CompactTail parts;
  const size_t rest = AppendTail(r, r.time_unix_ns, nullptr, tail);
  parts.rest = std::string_view(tail).substr(rest);
  CompactLeafFromTail(tail, parts, r.sequence, place, leaf, body);
}

Status RebuildCompactLeaf(const store::AuditRow& row, std::string& leaf) {
  if (!row.compact_leaf)
    return InvalidArgument("audit record {} is not a compact leaf", row.sequence);
  const std::string_view body = row.record;
  if (body.empty()) return Bad("it is empty");
  if (body.front() != kCompactLeafVersion) return UnknownVersion(body.front());
  Reader in(body.substr(1));
  int64_t offset = 0;
  if (!in.Signed(offset)) return Bad("sequence");
  leaf.clear();
  leaf.push_back(body.front());
  PutSigned(leaf, SequenceAt(row.sequence, offset));
  PutSigned(leaf, row.time_unix_ns);
  // The fields as stored (not made valid here: the decoder refuses what is not).
  for (const std::string* text :
       {&row.tenant, &row.principal, &row.trace_id, &row.request_id, &row.action}) {
    PutVarint(leaf, text->size());
    leaf.append(*text);
  }
  leaf.append(in.rest());
  return Status::Ok();
}

Status DecodeCompactLeaf(std::string_view leaf, AuditRecord& r) {
  Reader in(leaf);
  char version = 0;
  if (!in.Byte(version)) return Bad("it is empty");
  if (version != kCompactLeafVersion) return UnknownVersion(version);
  if (!in.Signed(r.sequence) || !in.Signed(r.time_unix_ns)) return Bad("sequence or time");
  for (std::string* text : {&r.tenant, &r.principal, &r.trace_id, &r.request_id, &r.action}) {
    if (!in.String(*text)) return Bad("a query field");
  }
  return DecodeBody(in, r);
}

Result<std::string_view> RowLeafInput(const store::AuditRow& row, std::string& buffer,
                                      AuditRecord* decoded) {
  if (row.compact_leaf) {
    RETURN_IF_ERROR(RebuildCompactLeaf(row, buffer));
    if (decoded != nullptr) RETURN_IF_ERROR(DecodeCompactLeaf(buffer, *decoded));
    return std::string_view(buffer);
  }
  if (!row.compact) return std::string_view(row.record);
  ASSIGN_OR_RETURN(AuditRecord record, DecodeCompactRow(row));
  const std::string_view canonical = EncodeRecordInto(record, buffer);
  if (decoded != nullptr) *decoded = std::move(record);
  return canonical;
}

Result<AuditRecord> DecodeCompactRow(const store::AuditRow& row) {
  if (!row.compact) return InvalidArgument("audit record {} is not compact", row.sequence);
  if (row.compact_leaf) {
    std::string leaf;
    RETURN_IF_ERROR(RebuildCompactLeaf(row, leaf));
    AuditRecord record;
    RETURN_IF_ERROR(DecodeCompactLeaf(leaf, record));
    return record;
  }
  AuditRecord r;
  r.time_unix_ns = row.time_unix_ns;
  r.tenant = row.tenant;
  r.principal = row.principal;
  r.trace_id = row.trace_id;
  r.request_id = row.request_id;
  r.action = row.action;
  for (const std::string* field :
       {&r.tenant, &r.principal, &r.trace_id, &r.request_id, &r.action}) {
    if (!IsValidUtf8(*field)) {
      return InvalidArgument("its compact form does not decode (a query field is not UTF-8)");
    }
  }
  Reader in(row.record);
  int64_t offset = 0;
  if (!in.Signed(offset)) return Bad("sequence or flags");
  r.sequence = SequenceAt(row.sequence, offset);
  RETURN_IF_ERROR(DecodeBody(in, r));
  return r;
}

Status ExpandAuditRow(store::AuditRow& row, AuditRecord* decoded) {
  if (!row.compact) return Status::Ok();
  ASSIGN_OR_RETURN(AuditRecord record, DecodeCompactRow(row));
  row.record = EncodeRecord(record);
  row.tenant = IndexText(record.tenant);
  row.principal = IndexText(record.principal);
  row.trace_id = IndexText(record.trace_id);
  row.request_id = IndexText(record.request_id);
  row.action = IndexText(record.action);
  row.compact = false;
  row.compact_leaf = false;
  if (decoded != nullptr) *decoded = std::move(record);
  return Status::Ok();
}

}  // namespace rampart::audit
