// The writer's canonical encoder against a straightforward one of the same rules (the encoder as
// it was before it wrote through a pointer: every key sorted at run time), on varied records:
// non-ASCII, invalid UTF-8, control characters, maps with keys that sort differently escaped,
// sealed fields, extreme numbers. And the compact form of version-2 audit batches: a round trip
// gives back the record and byte for byte its canonical encoding, and any change to one byte of
// it either does not decode or changes the canonical encoding (so the leaf hash finds it).

#include "audit/record_compact.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>

#include <fmt/format.h>

#include "audit/merkle.h"
#include "audit/record_codec.h"

namespace rampart::audit {
namespace {

// ---- The reference encoding (JCS over the record's fields, keys sorted when encoding). ----

size_t ReferenceUtf8Length(std::string_view text, size_t i) {
  const auto byte = [&](size_t at) { return static_cast<unsigned char>(text[at]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  size_t length = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return length;
}

std::string ReferenceString(std::string_view value) {
  std::string out = "\"";
  for (size_t i = 0; i < value.size();) {
    const size_t length = ReferenceUtf8Length(value, i);
    if (length == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    if (length > 1) {
      out.append(value.substr(i, length));
      i += length;
      continue;
    }
    const char c = value[i++];
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string ReferenceStrings(const std::vector<std::string>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += ReferenceString(values[i]);
  }
  return out + "]";
}

template <typename Map>
std::string ReferenceCounts(const Map& counts) {
  std::vector<std::pair<std::string, int64_t>> sorted;
  for (const auto& [key, value] : counts) sorted.emplace_back(ReferenceString(key), value);
  std::sort(sorted.begin(), sorted.end());
  std::string out = "{";
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (i > 0) out += ',';
    out += sorted[i].first + ":" + std::to_string(sorted[i].second);
  }
  return out + "}";
}

std::string ReferenceEncode(const AuditRecord& r) {
  std::vector<std::pair<std::string, std::string>> fields = {
      {"action", ReferenceString(r.action)},
      {"allowed", r.allowed ? "true" : "false"},
      {"api", ReferenceString(r.api)},
      {"auth_method", ReferenceString(r.auth_method)},
      {"instance_ns", std::to_string(r.instance_ns)},
      {"key_id", ReferenceString(r.key_id)},
      {"latency_ns", std::to_string(r.latency_ns)},
      {"model_version", ReferenceString(r.model_version)},
      {"obligations", ReferenceStrings(r.obligations)},
      {"outcome", ReferenceString(r.outcome)},
      {"pii_input", ReferenceCounts(r.pii_input)},
      {"pii_output", ReferenceCounts(r.pii_output)},
      {"principal", ReferenceString(r.principal)},
      {"request_digest", ReferenceString(r.request_digest)},
      {"request_id", ReferenceString(r.request_id)},
      {"request_sealed", ReferenceString(r.request_sealed)},
      {"resource", ReferenceString(r.resource)},
      {"resource_type", ReferenceString(r.resource_type)},
      {"response_digest", ReferenceString(r.response_digest)},
      {"response_sealed", ReferenceString(r.response_sealed)},
      {"route", ReferenceString(r.route)},
      {"rules", ReferenceStrings(r.rules)},
      {"sequence", std::to_string(r.sequence)},
      {"source_address", ReferenceString(r.source_address)},
      {"stages_ns", ReferenceCounts(r.stages_ns)},
      {"status", std::to_string(r.status)},
      {"target", ReferenceString(r.target)},
      {"tenant", ReferenceString(r.tenant)},
      {"time_unix_ns", std::to_string(r.time_unix_ns)},
      {"tokens_in", std::to_string(r.tokens_in)},
      {"tokens_out", std::to_string(r.tokens_out)},
      {"trace_id", ReferenceString(r.trace_id)},
      {"v", "1"},
  };
  if (!r.documents.empty()) fields.emplace_back("documents", ReferenceStrings(r.documents));
  std::sort(fields.begin(), fields.end());
  std::string out = "{";
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) out += ',';
    out += "\"" + fields[i].first + "\":" + fields[i].second;
  }
  return out + "}";
}

// ---- Varied records. ----

class Records {
 public:
  explicit Records(uint32_t seed) : random_(seed) {}

  AuditRecord Next() {
    AuditRecord r;
    r.sequence = Number(1, int64_t{1} << 53);
    r.time_unix_ns = Pick<int64_t>({0, 1767225600123456789, -5, kMax, kMin});
    for (std::string* text :
         {&r.trace_id, &r.request_id, &r.api, &r.tenant, &r.principal, &r.auth_method, &r.key_id,
          &r.source_address, &r.action, &r.resource_type, &r.resource, &r.route, &r.target,
          &r.model_version, &r.outcome}) {
      *text = Text();
    }
    r.allowed = Number(0, 1) == 1;
    r.rules = List();
    r.obligations = List();
    r.documents = Number(0, 2) == 0 ? List() : std::vector<std::string>{};
    for (int i = Number(0, 4); i > 0; --i) r.pii_input[Key()] = static_cast<int>(Number(-9, 99));
    for (int i = Number(0, 2); i > 0; --i) {
      r.pii_output[Key()] =
          Pick<int>({0, 1, std::numeric_limits<int>::max(), std::numeric_limits<int>::min()});
    }
    for (int i = Number(0, 5); i > 0; --i) r.stages_ns[Key()] = Pick<int64_t>({0, 7, kMax, kMin});
    r.tokens_in = Number(0, 100000);
    r.tokens_out = Pick<int64_t>({0, -1, kMax, kMin});
    r.instance_ns = Number(0, int64_t{1} << 40);
    r.latency_ns = Number(-3, int64_t{1} << 40);
    r.status = Pick<int>({0, 200, 503, -1, std::numeric_limits<int>::max()});
    r.request_digest = Digest();
    r.response_digest = Digest();
    if (Number(0, 2) == 0) {
      r.request_sealed = std::string(static_cast<size_t>(Number(0, 600)), 'Q') + "+/=";
      r.response_sealed = Text();
    }
    return r;
  }

 private:
  static constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  static constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

  int64_t Number(int64_t low, int64_t high) {
    return std::uniform_int_distribution<int64_t>(low, high)(random_);
  }
  template <typename T>
  T Pick(std::initializer_list<T> values) {
    return *(values.begin() + Number(0, static_cast<int64_t>(values.size()) - 1));
  }
  std::string Text() {
    static const char* const kPieces[] = {"a",
                                          "simple",
                                          "model:infer",
                                          " ",
                                          "!",
                                          "\"",
                                          "\\",
                                          "/",
                                          "\b",
                                          "\x01",
                                          "\x1f",
                                          "\x7f",
                                          "\n",
                                          "\t",
                                          "é",
                                          "中",
                                          "😀",
                                          "\xff",
                                          "\xc3",
                                          "\xed\xa0\x80",
                                          "\xf4\x90\x80\x80",
                                          "\xe0\x80\x80",
                                          "\x00",
                                          "0123456789abcdef"};
    std::string text;
    for (int i = static_cast<int>(Number(0, 6)); i > 0; --i) {
      const size_t piece = static_cast<size_t>(Number(0, std::size(kPieces) - 1));
      text += piece == 22 ? std::string(1, '\0') : std::string(kPieces[piece]);
    }
    return text;
  }
  std::string Key() {
    return Pick<std::string>({"queue", "compute", "EMAIL", "PHONE", "a", "a!", "a b", "a\"", "A",
                              "\xff", "é", "", "first_token", "sequence"});
  }
  std::vector<std::string> List() {
    std::vector<std::string> list;
    for (int i = static_cast<int>(Number(0, 3)); i > 0; --i) list.push_back(Text());
    return list;
  }
  std::string Digest() {
    std::string hex;
    for (int i = 0; i < 64; ++i) hex += "0123456789abcdef"[Number(0, 15)];
    switch (Number(0, 5)) {
      case 0: return "sha256:" + hex;
      case 1: return "sm3:" + hex;
      case 2: return "sha256:" + hex.substr(0, 63) + "A";  // upper case: kept as text
      case 3: return "";
      case 4: return "sha256:" + hex + "0";
      default: return Text();
    }
  }

  std::mt19937 random_;
};

// A compact row of `record` as a version-2 batch holds it at place `place`.
store::AuditRow CompactRow(const AuditRecord& record, int64_t place) {
  store::AuditRow row;
  row.sequence = place;
  row.time_unix_ns = record.time_unix_ns;
  row.tenant = ValidUtf8(record.tenant);
  row.principal = ValidUtf8(record.principal);
  row.trace_id = ValidUtf8(record.trace_id);
  row.request_id = ValidUtf8(record.request_id);
  row.action = ValidUtf8(record.action);
  AppendCompactRecord(record, place, row.record);
  row.compact = true;
  return row;
}

// A compact leaf row of `record` as a version-3 batch holds it at place `place`, and its leaf
// input as the writer hashed it.
store::AuditRow CompactLeafRow(const AuditRecord& record, int64_t place, std::string* leaf) {
  store::AuditRow row = CompactRow(record, place);
  row.record.clear();
  std::string made;
  AppendCompactLeaf(record, place, made, row.record);
  row.compact_leaf = true;
  if (leaf != nullptr) *leaf = std::move(made);
  return row;
}

TEST(RecordEncoderTest, MatchesTheReferenceEncodingOnVariedRecords) {
  Records records(7);
  std::string reused;
  for (int i = 0; i < 3000; ++i) {
    const AuditRecord record = records.Next();
    const std::string expected = ReferenceEncode(record);
    ASSERT_EQ(EncodeRecord(record), expected) << "record " << i;
    ASSERT_EQ(EncodeRecordInto(record, reused), expected) << "record " << i;
  }
}

TEST(RecordEncoderTest, MatchesTheReferenceAtEveryLengthAndPlaceOfASpecialByte) {
  // The encoder copies plain ASCII eight bytes at a time: every length around those words, and
  // a byte to escape (or a non-ASCII one) at every place in them.
  AuditRecord record;
  for (size_t length = 0; length <= 40; ++length) {
    const std::string plain(length, 'x');
    record.principal = plain;
    ASSERT_EQ(EncodeRecord(record), ReferenceEncode(record)) << length;
    for (size_t at = 0; at < length; ++at) {
      for (const char special : {'"', '\\', '\n', '\x1f', '\0', '\x7f', '\xc3', '\xff', ' '}) {
        record.principal = plain;
        record.principal[at] = special;
        ASSERT_EQ(EncodeRecord(record), ReferenceEncode(record)) << length << " " << at;
      }
    }
  }
}

TEST(RecordCompactTest, RoundTripsToTheSameCanonicalBytes) {
  Records records(11);
  for (int i = 0; i < 3000; ++i) {
    const AuditRecord record = records.Next();
    const std::string canonical = EncodeRecord(record);
    store::AuditRow row = CompactRow(record, record.sequence);
    EXPECT_LT(row.record.size(), canonical.size());
    auto decoded = DecodeCompactRow(row);
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    ASSERT_EQ(EncodeRecord(*decoded), canonical) << "record " << i;
    // The sequence's offset from the record's place (a record moved within a batch keeps its own).
    store::AuditRow moved = CompactRow(record, record.sequence - 3);
    auto decoded_moved = DecodeCompactRow(moved);
    ASSERT_TRUE(decoded_moved.ok());
    EXPECT_EQ(decoded_moved->sequence, record.sequence);
    ASSERT_TRUE(ExpandAuditRow(row).ok());
    EXPECT_FALSE(row.compact);
    EXPECT_EQ(row.record, canonical);
    EXPECT_EQ(row.tenant, IndexText(record.tenant));
    EXPECT_TRUE(ExpandAuditRow(row).ok());  // a canonical row stays as it is
    EXPECT_EQ(row.record, canonical);
  }
}

TEST(RecordCompactTest, AServedRecordTakesAFractionOfItsCanonicalSize) {
  AuditRecord r;
  r.sequence = 123456;
  r.time_unix_ns = 1767225600123456789;
  r.trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
  r.request_id = "4bf92f3577b34da6";
  r.api = "kserve_http";
  r.principal = "anonymous";
  r.auth_method = "open";
  r.source_address = "127.0.0.1";
  r.action = "model:infer";
  r.resource_type = "model";
  r.resource = "simple";
  r.route = "/v2/models/simple/infer";
  r.target = "simple";
  r.model_version = "1";
  r.stages_ns = {{"queue", 12000}, {"compute", 35000}};
  r.latency_ns = 80000;
  r.status = 200;
  r.outcome = "ok";
  r.request_digest = "sha256:" + std::string(64, 'a');
  r.response_digest = "sha256:" + std::string(64, 'b');
  const store::AuditRow row = CompactRow(r, r.sequence);
  const size_t stored = row.record.size() + row.tenant.size() + row.principal.size() +
                        row.trace_id.size() + row.request_id.size() + row.action.size();
  EXPECT_LT(stored * 3, EncodeRecord(r).size()) << stored << " vs " << EncodeRecord(r).size();
}

TEST(RecordCompactTest, EveryChangedByteIsRefusedOrChangesTheCanonicalEncoding) {
  Records records(3);
  for (int i = 0; i < 40; ++i) {
    const AuditRecord record = records.Next();
    const store::AuditRow row = CompactRow(record, record.sequence);
    const std::string canonical = EncodeRecord(record);
    for (size_t at = 0; at < row.record.size(); ++at) {
      for (const int flip : {0x01, 0x02, 0x10, 0x40, 0x80, 0xff}) {
        store::AuditRow changed = row;
        changed.record[at] = static_cast<char>(changed.record[at] ^ flip);
        const Result<AuditRecord> decoded = DecodeCompactRow(changed);
        if (decoded.ok()) {
          ASSERT_NE(EncodeRecord(*decoded), canonical)
              << "record " << i << ", byte " << at << " ^ " << flip << " went unnoticed";
        }
      }
    }
    // Cut short, or with a byte more.
    for (size_t size = 0; size < row.record.size(); ++size) {
      store::AuditRow cut = row;
      cut.record.resize(size);
      EXPECT_FALSE(DecodeCompactRow(cut).ok()) << size;
    }
    store::AuditRow longer = row;
    longer.record += '\0';
    EXPECT_FALSE(DecodeCompactRow(longer).ok());
    // Query fields that are not UTF-8 are another form of the record: refused.
    store::AuditRow invalid = row;
    invalid.principal += "\xff";
    EXPECT_FALSE(DecodeCompactRow(invalid).ok());
  }
}

TEST(CompactLeafTest, RebuildsTheWritersLeafInputAndDecodesToTheRecord) {
  Records records(17);
  std::string rebuilt;
  AuditRecord decoded;  // reused, as the verifier does
  for (int i = 0; i < 3000; ++i) {
    const AuditRecord record = records.Next();
    std::string leaf;
    const store::AuditRow row = CompactLeafRow(record, record.sequence, &leaf);
    ASSERT_EQ(leaf.front(), kCompactLeafVersion);
    ASSERT_NE(leaf.front(), '{');  // never a canonical encoding
    ASSERT_TRUE(RebuildCompactLeaf(row, rebuilt).ok());
    ASSERT_EQ(rebuilt, leaf) << "record " << i;
    ASSERT_TRUE(DecodeCompactLeaf(leaf, decoded).ok()) << "record " << i;
    ASSERT_EQ(EncodeRecord(decoded), EncodeRecord(record)) << "record " << i;
    auto from_row = DecodeCompactRow(row);
    ASSERT_TRUE(from_row.ok()) << from_row.status().ToString();
    EXPECT_EQ(EncodeRecord(*from_row), EncodeRecord(record));
    std::string buffer;
    auto input = RowLeafInput(row, buffer);
    ASSERT_TRUE(input.ok());
    EXPECT_EQ(*input, leaf);
    // A record moved within a batch keeps its own sequence (its offset from the place).
    const store::AuditRow moved = CompactLeafRow(record, record.sequence + 2, nullptr);
    ASSERT_TRUE(RebuildCompactLeaf(moved, rebuilt).ok());
    EXPECT_EQ(rebuilt, leaf);
    // Expanded, the row is canonical (for display); its leaf input was taken before.
    store::AuditRow expanded = row;
    ASSERT_TRUE(ExpandAuditRow(expanded).ok());
    EXPECT_FALSE(expanded.compact || expanded.compact_leaf);
    EXPECT_EQ(expanded.record, EncodeRecord(record));
  }
}

TEST(CompactLeafTest, EveryChangedByteChangesTheLeafInputOrIsRefused) {
  Records records(5);
  for (int i = 0; i < 40; ++i) {
    const AuditRecord record = records.Next();
    std::string leaf;
    const store::AuditRow row = CompactLeafRow(record, record.sequence, &leaf);
    std::string rebuilt;
    AuditRecord decoded;
    for (size_t at = 0; at < row.record.size(); ++at) {
      for (const int flip : {0x01, 0x02, 0x10, 0x40, 0x80, 0xff}) {
        store::AuditRow changed = row;
        changed.record[at] = static_cast<char>(changed.record[at] ^ flip);
        if (RebuildCompactLeaf(changed, rebuilt).ok()) {
          ASSERT_NE(rebuilt, leaf) << "record " << i << ", byte " << at << " ^ " << flip;
        }
      }
    }
    // The version byte: refused, whatever it becomes (a canonical '{' included).
    for (const char version : {'\0', '\1', '\3', '{', '\xff'}) {
      store::AuditRow changed = row;
      changed.record[0] = version;
      const Status rebuilt_status = RebuildCompactLeaf(changed, rebuilt);
      EXPECT_FALSE(rebuilt_status.ok()) << int(version);
      EXPECT_NE(rebuilt_status.message().find("unknown version"), std::string::npos)
          << rebuilt_status.ToString();
      std::string other = leaf;
      other[0] = version;
      EXPECT_FALSE(DecodeCompactLeaf(other, decoded).ok()) << int(version);
    }
    // Cut short or with a byte more: refused by the decoder.
    for (size_t size = 0; size < leaf.size(); ++size) {
      EXPECT_FALSE(DecodeCompactLeaf(leaf.substr(0, size), decoded).ok()) << size;
    }
    EXPECT_FALSE(DecodeCompactLeaf(leaf + '\0', decoded).ok());
    // Query fields that are not UTF-8: refused.
    store::AuditRow invalid = row;
    invalid.tenant += "\xff";
    ASSERT_TRUE(RebuildCompactLeaf(invalid, rebuilt).ok());
    EXPECT_FALSE(DecodeCompactLeaf(rebuilt, decoded).ok());
  }
}

// The log's appending threads encode a tail and its writer completes it: the same bytes as the
// record's compact leaf and version-3 body, and with raw content digests the same as with their
// text.
TEST(CompactLeafTest, ATailCompletedByTheWriterIsTheRecordsLeaf) {
  Records records(23);
  std::string tail;
  for (int i = 0; i < 3000; ++i) {
    const AuditRecord record = records.Next();
    std::string leaf;
    std::string body;
    AppendCompactLeaf(record, record.sequence - 3, leaf, body);

    tail.clear();
    AppendCompactTail(record, record.time_unix_ns, nullptr, tail);
    CompactTail parts;
    ASSERT_TRUE(ParseCompactTail(tail, parts).ok()) << "record " << i;
    EXPECT_EQ(parts.time_unix_ns, record.time_unix_ns);
    EXPECT_EQ(parts.tenant, ValidUtf8(record.tenant));
    EXPECT_EQ(parts.principal, ValidUtf8(record.principal));
    EXPECT_EQ(parts.trace_id, ValidUtf8(record.trace_id));
    EXPECT_EQ(parts.request_id, ValidUtf8(record.request_id));
    EXPECT_EQ(parts.action, ValidUtf8(record.action));
    std::string completed_leaf;
    std::string completed_body;
    CompactLeafFromTail(tail, parts, record.sequence, record.sequence - 3, completed_leaf,
                        completed_body);
    ASSERT_EQ(completed_leaf, leaf) << "record " << i;
    ASSERT_EQ(completed_body, body) << "record " << i;

    // Raw digests where the record's text has a raw form.
    const auto raw = [](std::string_view text, crypto::DigestAlgorithm& algorithm,
                        crypto::Digest& digest) {
      const size_t colon = text.find(':');
      if (colon == std::string_view::npos) return false;
      const Result<crypto::DigestAlgorithm> named = crypto::ParseDigest(text.substr(0, colon));
      const Result<crypto::Digest> parsed = ParseHashHex(text.substr(colon + 1));
      if (!named.ok() || !parsed.ok() || HashHex(*parsed) != text.substr(colon + 1) ||
          crypto::DigestName(*named) != text.substr(0, colon)) {
        return false;
      }
      algorithm = *named;
      digest = *parsed;
      return true;
    };
    ContentDigests digests;
    crypto::DigestAlgorithm response_algorithm{};
    if (!raw(record.request_digest, digests.algorithm, digests.request) ||
        !raw(record.response_digest, response_algorithm, digests.response) ||
        response_algorithm != digests.algorithm) {
      continue;
    }
    AuditRecord without_text = record;
    without_text.request_digest.clear();
    without_text.response_digest.clear();
    tail.clear();
    AppendCompactTail(without_text, record.time_unix_ns, &digests, tail);
    ASSERT_TRUE(ParseCompactTail(tail, parts).ok());
    completed_leaf.clear();
    completed_body.clear();
    CompactLeafFromTail(tail, parts, record.sequence, record.sequence - 3, completed_leaf,
                        completed_body);
    ASSERT_EQ(completed_leaf, leaf) << "record " << i;
    AuditRecord decoded;
    ASSERT_TRUE(DecodeCompactLeaf(completed_leaf, decoded).ok());
    EXPECT_EQ(decoded.request_digest, record.request_digest);
  }
  CompactTail parts;
  for (const std::string& garbage :
       {std::string(), std::string("\x80", 1),
        std::string("\x00\x05"
                    "ab",
                    4),
        std::string("\x00\x00\x00\x00\x00\x00", 6), std::string("\x00\x01\xff", 3)}) {
    EXPECT_FALSE(ParseCompactTail(garbage, parts).ok());
  }
}

TEST(RecordCompactTest, GarbageIsAnErrorNotACrash) {
  store::AuditRow row{.sequence = 5, .compact = true};
  for (const std::string& garbage :
       {std::string(), std::string("\x00", 1), std::string(64, '\xff'), std::string(300, '\x7f'),
        std::string("\x00\x01\x0a", 3) + std::string(40, 'x')}) {
    row.record = garbage;
    EXPECT_FALSE(DecodeCompactRow(row).ok());
    store::AuditRow expanded = row;
    EXPECT_FALSE(ExpandAuditRow(expanded).ok());
    EXPECT_TRUE(expanded.compact);  // left as it was
  }
  EXPECT_FALSE(DecodeCompactRow(store::AuditRow{.record = "x"}).ok());  // not a compact row
  AuditRecord decoded;
  std::string leaf;
  store::AuditRow leaf_row{.sequence = 5, .compact = true, .compact_leaf = true};
  for (const std::string& garbage :
       {std::string(), std::string("\x02", 1), std::string("\x02\xff", 2), std::string(64, '\x02'),
        std::string(300, '\x7f'), std::string("\x02\x00\x01\x0a", 4) + std::string(40, 'x')}) {
    leaf_row.record = garbage;
    EXPECT_FALSE(DecodeCompactRow(leaf_row).ok());
    EXPECT_FALSE(DecodeCompactLeaf(garbage, decoded).ok());
    if (RebuildCompactLeaf(leaf_row, leaf).ok()) {
      EXPECT_FALSE(DecodeCompactLeaf(leaf, decoded).ok());
    }
  }
}

}  // namespace
}  // namespace rampart::audit
