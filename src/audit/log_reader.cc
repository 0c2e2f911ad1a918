#include "audit/log_reader.h"

#include <map>
#include <optional>

#include <fmt/format.h>

#include "audit/checkpoint.h"
#include "audit/record_codec.h"
#include "audit/record_compact.h"
#include "json/reader.h"
#include "json/writer.h"
#include "store/store.h"

namespace rampart::audit {
namespace {

constexpr int64_t kPage = 4096;

Finding Problem(std::string kind, int64_t sequence, std::string message) {
  return Finding{.kind = std::move(kind), .sequence = sequence, .message = std::move(message)};
}

// A stored checkpoint as the signed note it stands for; InvalidArgument when its fields are
// malformed.
Result<SignedCheckpoint> ToSigned(const store::AuditCheckpointRow& row, DigestAlgorithm digest) {
  SignedCheckpoint signed_checkpoint;
  signed_checkpoint.checkpoint.tree_size = row.tree_size;
  ASSIGN_OR_RETURN(signed_checkpoint.checkpoint.root, ParseHashHex(row.root_hash));
  signed_checkpoint.checkpoint.time_unix_ns = row.time_unix_ns;
  signed_checkpoint.checkpoint.digest = digest;
  signed_checkpoint.key_id = row.key_id;
  ASSIGN_OR_RETURN(signed_checkpoint.signature, Base64Decode(row.signature));
  return signed_checkpoint;
}

bool VerifiesWithAny(const SignedCheckpoint& checkpoint,
                     const std::vector<crypto::VerifyingKey>& keys) {
  for (const crypto::VerifyingKey& key : keys) {
    if (VerifyCheckpoint(checkpoint, key).ok()) return true;
  }
  return false;
}

// The last record of the pruned prefix: the end of the last pruned epoch (pruning goes oldest
// first), 0 when nothing was pruned.
Result<int64_t> PrunedThrough(store::Store& store) {
  ASSIGN_OR_RETURN(const std::vector<store::AuditEpochRow> epochs, store.ListAuditEpochs());
  int64_t through = 0;
  for (const store::AuditEpochRow& epoch : epochs) {
    if (epoch.pruned) through = std::max(through, epoch.last_sequence);
  }
  return through;
}

// What a record in the wrong place most likely is, from the sequence its content carries and,
// when known, the next row's.
Finding Misplaced(int64_t row, int64_t content, std::optional<int64_t> next_content) {
  if (content == row + 1 && next_content == row) {
    return Problem("reordered", row,
                   fmt::format("records {} and {} were swapped (record {} holds record {}'s "
                               "content)",
                               row, row + 1, row, content));
  }
  if (content > row) {
    return Problem("deleted", row,
                   fmt::format("record {} was deleted: record {} holds record {}'s content, so "
                               "the records after it were renumbered",
                               row, row, content));
  }
  if (content == row - 1) {
    return Problem("inserted", row,
                   fmt::format("a record was inserted before record {}: record {} holds record "
                               "{}'s content",
                               row, row, content));
  }
  return Problem("reordered", row,
                 fmt::format("record {} holds record {}'s content (records moved)", row, content));
}

// Checks a row's copies of the record's query fields and time against the record.
std::optional<Finding> CheckColumns(const store::AuditRow& row, const AuditRecord& record) {
  const int64_t n = row.sequence;
  const std::pair<const char*, std::pair<const std::string*, const std::string*>> columns[] = {
      {"tenant", {&row.tenant, &record.tenant}},
      {"principal", {&row.principal, &record.principal}},
      {"trace_id", {&row.trace_id, &record.trace_id}},
      {"request_id", {&row.request_id, &record.request_id}},
      {"action", {&row.action, &record.action}}};
  for (const auto& [name, values] : columns) {
    if (*values.first != IndexText(*values.second)) {
      return Problem("edited", n,
                     fmt::format("record {} was edited: its {} column ('{}') differs from the "
                                 "record's ('{}')",
                                 n, name, *values.first, *values.second));
    }
  }
  if (row.time_unix_ns != record.time_unix_ns) {
    return Problem(
        "edited", n,
        fmt::format("record {} was edited: its time column differs from the record's", n));
  }
  return std::nullopt;
}

// Checks one stored row against its own content and the chain before it.
std::optional<Finding> CheckRow(const store::AuditRow& row, const AuditRecord& record,
                                const Digest& leaf, const Digest& previous_chain,
                                DigestAlgorithm digest) {
  const int64_t n = row.sequence;
  // A compact leaf row's query fields and time are the record's own, which its leaf hash covers.
  if (!row.compact_leaf) {
    if (auto problem = CheckColumns(row, record)) return problem;
  }
  if (row.leaf_hash != HashHex(leaf)) {
    return Problem(
        "edited", n,
        fmt::format("record {} was edited: its content does not match its leaf hash", n));
  }
  if (row.chain_hash != HashHex(ChainHash(digest, previous_chain, leaf))) {
    return Problem("edited", n,
                   fmt::format("record {} does not follow record {} in the hash chain (edited and "
                               "re-hashed, or a record before it was replaced)",
                               n, n - 1));
  }
  return std::nullopt;
}

}  // namespace

Result<VerifyReport> VerifyLog(store::Store& store, const VerifyOptions& options) {
  if (options.keys.empty()) return InvalidArgument("verification needs a verifying key");
  VerifyReport report;
  const auto found = [&](Finding finding) {
    report.problem = std::move(finding);
    return report;
  };

  // Every checkpoint's signature, whether or not its records are still kept.
  ASSIGN_OR_RETURN(const std::vector<store::AuditCheckpointRow> checkpoints,
                   store.ListAuditCheckpoints(0));
  std::map<int64_t, Digest> roots;  // tree size -> signed root
  for (const store::AuditCheckpointRow& row : checkpoints) {
    auto signed_checkpoint = ToSigned(row, options.digest);
    if (!signed_checkpoint.ok()) {
      return found(Problem("checkpoint", row.tree_size,
                           fmt::format("checkpoint at tree size {} is malformed: {}", row.tree_size,
                                       signed_checkpoint.status().message())));
    }
    if (!VerifiesWithAny(*signed_checkpoint, options.keys)) {
      return found(Problem("checkpoint", row.tree_size,
                           fmt::format("checkpoint at tree size {}: the signature does not verify "
                                       "(key id '{}')",
                                       row.tree_size, row.key_id)));
    }
    roots[row.tree_size] = signed_checkpoint->checkpoint.root;
    ++report.checkpoints;
    report.signed_size = row.tree_size;
  }

  // Where the kept records start: after the pruned prefix, from its signed frontier.
  ASSIGN_OR_RETURN(report.pruned_through, PrunedThrough(store));
  Frontier frontier(options.digest);
  Digest chain{};
  if (report.pruned_through > 0) {
    const int64_t base = report.pruned_through;
    const auto boundary = std::find_if(checkpoints.begin(), checkpoints.end(),
                                       [&](const auto& row) { return row.tree_size == base; });
    if (boundary == checkpoints.end()) {
      return found(Problem("checkpoint", base,
                           fmt::format("the checkpoint ending the pruned records (tree size {}) "
                                       "is missing",
                                       base)));
    }
    auto decoded = Frontier::Decode(options.digest, base, boundary->frontier);
    auto boundary_chain = ParseHashHex(boundary->chain_hash);
    if (!decoded.ok() || !boundary_chain.ok() || decoded->Root() != roots[base]) {
      return found(Problem("checkpoint", base,
                           fmt::format("the frontier kept for the pruned records 1..{} does not "
                                       "match the signed checkpoint at that size",
                                       base)));
    }
    frontier = std::move(*decoded);
    chain = *boundary_chain;
  }

  int64_t expected = report.pruned_through + 1;
  std::vector<AuditRecord> records;
  std::vector<std::string> leaf_inputs;  // compact leaf rows' rebuilt leaf inputs
  std::vector<std::string_view> inputs;  // what each row's leaf hash covers
  std::vector<std::string> undecodable;
  while (true) {
    ASSIGN_OR_RETURN(std::vector<store::AuditRow> rows, store.ReadAuditRows(expected - 1, kPage));
    if (rows.empty()) break;
    // Each row's leaf input and record, decoded ahead (a misplaced record is told by the next
    // one's content): a compact leaf row's leaf input is rebuilt from its fields and decoded
    // without any JSON; a version-2 row's canonical encoding is rebuilt from its compact form;
    // a canonical row's is parsed. One that does not decode is an edited record, reported at its
    // place below. The records and buffers are reused from page to page.
    records.resize(rows.size());
    inputs.resize(rows.size());
    leaf_inputs.resize(rows.size());
    undecodable.assign(rows.size(), std::string());
    for (size_t i = 0; i < rows.size(); ++i) {
      store::AuditRow& row = rows[i];
      if (row.compact_leaf) {
        const Status rebuilt = RebuildCompactLeaf(row, leaf_inputs[i]);
        const Status read = rebuilt.ok() ? DecodeCompactLeaf(leaf_inputs[i], records[i]) : rebuilt;
        if (!read.ok()) undecodable[i] = std::string(read.message());
        inputs[i] = leaf_inputs[i];
      } else if (row.compact) {
        if (const Status expanded = ExpandAuditRow(row, &records[i]); !expanded.ok()) {
          undecodable[i] = std::string(expanded.message());
        }
        inputs[i] = row.record;
      } else {
        Result<AuditRecord> record = DecodeRecord(row.record);
        if (!record.ok()) {
          undecodable[i] = fmt::format("it is not a valid record ({})", record.status().message());
        } else {
          records[i] = std::move(*record);
        }
        inputs[i] = row.record;
      }
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      const store::AuditRow& row = rows[i];
      if (row.sequence < expected) {
        // Two stored records carry one sequence (e.g. a per-record row added beside a batch).
        return found(Problem("inserted", row.sequence,
                             fmt::format("a second record {} was inserted", row.sequence)));
      }
      if (row.sequence != expected) {
        return found(Problem(
            "deleted", expected,
            row.sequence == expected + 1
                ? fmt::format("record {} was deleted", expected)
                : fmt::format("records {} to {} were deleted", expected, row.sequence - 1)));
      }
      if (!undecodable[i].empty()) {
        return found(
            Problem("edited", row.sequence,
                    fmt::format("record {} was edited: {}", row.sequence, undecodable[i])));
      }
      const AuditRecord& record = records[i];
      if (record.sequence != row.sequence) {
        std::optional<int64_t> next_content;
        if (i + 1 < rows.size() && undecodable[i + 1].empty()) {
          next_content = records[i + 1].sequence;
        }
        return found(Misplaced(row.sequence, record.sequence, next_content));
      }
      const Digest leaf = LeafHash(options.digest, inputs[i]);
      if (auto problem = CheckRow(row, record, leaf, chain, options.digest)) {
        return found(std::move(*problem));
      }
      chain = ChainHash(options.digest, chain, leaf);
      frontier.Append(leaf);
      ++report.records;
      report.last_sequence = row.sequence;
      ++expected;
      if (const auto root = roots.find(frontier.size());
          root != roots.end() && root->second != frontier.Root()) {
        return found(Problem("inconsistent", frontier.size(),
                             fmt::format("checkpoint at tree size {} does not match the records "
                                         "1..{}: records were changed and re-hashed",
                                         frontier.size(), frontier.size())));
      }
    }
  }
  if (report.last_sequence == 0) report.last_sequence = report.pruned_through;
  if (report.signed_size > report.last_sequence) {
    return found(Problem("truncated", report.last_sequence + 1,
                         fmt::format("the log ends at record {}, but checkpoint at tree size {} "
                                     "covers records up to {}: records {}..{} were deleted",
                                     report.last_sequence, report.signed_size, report.signed_size,
                                     report.last_sequence + 1, report.signed_size)));
  }
  return report;
}

Result<std::string> ProveInclusion(store::Store& store, DigestAlgorithm digest, int64_t sequence,
                                   std::optional<int64_t> checkpoint_size) {
  if (sequence < 1) return InvalidArgument("record {} does not exist", sequence);
  ASSIGN_OR_RETURN(const std::vector<store::AuditCheckpointRow> checkpoints,
                   store.ListAuditCheckpoints(checkpoint_size.value_or(sequence)));
  if (checkpoints.empty() ||
      (checkpoint_size.has_value() && checkpoints.front().tree_size != *checkpoint_size)) {
    return checkpoint_size.has_value()
               ? NotFound("there is no checkpoint at tree size {}", *checkpoint_size)
               : NotFound("no checkpoint covers record {} yet", sequence);
  }
  const store::AuditCheckpointRow& checkpoint = checkpoints.front();
  if (sequence > checkpoint.tree_size) {
    return InvalidArgument("record {} is not in the tree of size {}", sequence,
                           checkpoint.tree_size);
  }
  ASSIGN_OR_RETURN(const int64_t pruned_through, PrunedThrough(store));
  if (sequence <= pruned_through) {
    return InvalidArgument("record {} was pruned (records 1..{} are)", sequence, pruned_through);
  }
  Leaves leaves(digest);
  if (pruned_through > 0) {
    ASSIGN_OR_RETURN(const std::vector<store::AuditCheckpointRow> boundary,
                     store.ListAuditCheckpoints(pruned_through));
    if (boundary.empty() || boundary.front().tree_size != pruned_through) {
      return NotFound("the checkpoint ending the pruned records is missing");
    }
    ASSIGN_OR_RETURN(leaves.base,
                     Frontier::Decode(digest, pruned_through, boundary.front().frontier));
  }
  std::string record;
  std::string leaf_input;
  for (int64_t after = pruned_through; after < checkpoint.tree_size;) {
    ASSIGN_OR_RETURN(const std::vector<store::AuditRow> rows,
                     store.ReadAuditRows(after, std::min(kPage, checkpoint.tree_size - after)));
    if (rows.empty()) break;
    for (const store::AuditRow& row : rows) {
      if (row.sequence != after + 1) {
        return InvalidArgument("record {} is missing: run `rampart audit verify`", after + 1);
      }
      ASSIGN_OR_RETURN(const Digest leaf, ParseHashHex(row.leaf_hash));
      leaves.leaves.push_back(leaf);
      if (row.sequence == sequence) {
        AuditRecord decoded;
        const Result<std::string_view> input = RowLeafInput(row, leaf_input, &decoded);
        if (!input.ok()) {
          return Internal("audit record {}: {} (run `rampart audit verify`)", sequence,
                          input.status().message());
        }
        // A compact leaf holds the record; other leaf inputs are its canonical encoding.
        record = row.compact_leaf ? EncodeRecord(decoded) : std::string(*input);
        leaf_input = std::string(*input);
      }
      after = row.sequence;
    }
  }
  if (leaves.size() != checkpoint.tree_size) {
    return InvalidArgument("the log holds {} records, fewer than checkpoint {} covers",
                           leaves.size(), checkpoint.tree_size);
  }
  ASSIGN_OR_RETURN(const std::vector<Digest> path,
                   InclusionProof(leaves, sequence - 1, checkpoint.tree_size));
  ASSIGN_OR_RETURN(const SignedCheckpoint signed_checkpoint, ToSigned(checkpoint, digest));

  json::Writer writer;
  writer.StartObject();
  writer.Key("sequence");
  writer.Int64(sequence);
  writer.Key("leaf_index");
  writer.Int64(sequence - 1);
  writer.Key("tree_size");
  writer.Int64(checkpoint.tree_size);
  writer.Key("digest");
  writer.String(crypto::DigestName(digest));
  writer.Key("record");
  writer.String(record);
  writer.Key("leaf_input");
  writer.String(Base64Encode(leaf_input));
  writer.Key("leaf_hash");
  writer.String(HashHex(leaves.leaves[size_t(sequence - 1 - pruned_through)]));
  writer.Key("audit_path");
  writer.StartArray();
  for (const Digest& hash : path) writer.String(HashHex(hash));
  writer.EndArray();
  writer.Key("checkpoint");
  writer.String(CheckpointNote(signed_checkpoint));
  writer.EndObject();
  return writer.Take() + "\n";
}

Result<CheckedProof> CheckInclusionProof(std::string_view proof,
                                         const std::vector<crypto::VerifyingKey>& keys) {
  if (keys.empty()) return InvalidArgument("checking a proof needs a verifying key");
  json::Parser parser;
  ASSIGN_OR_RETURN(const json::Value root, parser.Parse(proof));
  if (!root.IsObject()) return InvalidArgument("a proof is a JSON object");
  const auto field = [&](std::string_view name) -> Result<json::Value> {
    std::optional<json::Value> value = root.Find(name);
    if (!value.has_value()) return InvalidArgument("the proof has no '{}'", name);
    return *value;
  };
  CheckedProof checked;
  ASSIGN_OR_RETURN(const json::Value sequence, field("sequence"));
  ASSIGN_OR_RETURN(checked.sequence, sequence.GetInt64("sequence"));
  ASSIGN_OR_RETURN(const json::Value index_value, field("leaf_index"));
  ASSIGN_OR_RETURN(const int64_t index, index_value.GetInt64("leaf_index"));
  ASSIGN_OR_RETURN(const json::Value size_value, field("tree_size"));
  ASSIGN_OR_RETURN(checked.tree_size, size_value.GetInt64("tree_size"));
  ASSIGN_OR_RETURN(const json::Value digest_value, field("digest"));
  ASSIGN_OR_RETURN(const std::string_view digest_name, digest_value.GetString("digest"));
  ASSIGN_OR_RETURN(const DigestAlgorithm digest, crypto::ParseDigest(digest_name));
  ASSIGN_OR_RETURN(const json::Value record_value, field("record"));
  ASSIGN_OR_RETURN(const std::string_view record, record_value.GetString("record"));
  ASSIGN_OR_RETURN(const json::Value leaf_value, field("leaf_hash"));
  ASSIGN_OR_RETURN(const std::string_view leaf_hex, leaf_value.GetString("leaf_hash"));
  ASSIGN_OR_RETURN(const Digest leaf, ParseHashHex(leaf_hex));
  ASSIGN_OR_RETURN(const json::Value note_value, field("checkpoint"));
  ASSIGN_OR_RETURN(const std::string_view note, note_value.GetString("checkpoint"));
  ASSIGN_OR_RETURN(const json::Value path_value, field("audit_path"));
  if (!path_value.IsArray()) return InvalidArgument("audit_path must be an array");
  std::vector<Digest> path;
  for (simdjson::dom::element element : path_value.Array()) {
    ASSIGN_OR_RETURN(const std::string_view hex, json::Value(element).GetString("audit_path[]"));
    ASSIGN_OR_RETURN(const Digest hash, ParseHashHex(hex));
    path.push_back(hash);
  }

  ASSIGN_OR_RETURN(const SignedCheckpoint signed_checkpoint, ParseCheckpointNote(note));
  if (!VerifiesWithAny(signed_checkpoint, keys)) {
    return PermissionDenied("the checkpoint's signature does not verify (key id '{}')",
                            signed_checkpoint.key_id);
  }
  if (signed_checkpoint.checkpoint.tree_size != checked.tree_size ||
      signed_checkpoint.checkpoint.digest != digest) {
    return InvalidArgument("the proof's tree size or digest differs from its checkpoint's");
  }
  if (index != checked.sequence - 1) {
    return InvalidArgument("leaf_index {} is not sequence {} - 1", index, checked.sequence);
  }
  // The leaf hash covers the leaf input when the proof has one (a compact leaf, or the canonical
  // encoding), which must then hold `record`; proofs made before it had none cover `record`.
  if (std::optional<json::Value> input_value = root.Find("leaf_input"); input_value.has_value()) {
    ASSIGN_OR_RETURN(const std::string_view input_base64, input_value->GetString("leaf_input"));
    ASSIGN_OR_RETURN(const std::string input, Base64Decode(input_base64));
    if (LeafHash(digest, input) != leaf) {
      return InvalidArgument("the leaf input does not match leaf_hash");
    }
    if (!input.empty() && input.front() == kCompactLeafVersion) {
      AuditRecord held;
      if (const Status decoded = DecodeCompactLeaf(input, held); !decoded.ok()) {
        return InvalidArgument("the leaf input is not a record: {}", decoded.message());
      }
      if (EncodeRecord(held) != record) {
        return InvalidArgument("the record is not the one its leaf input holds");
      }
    } else if (input != record) {
      return InvalidArgument("the record is not its leaf input");
    }
  } else if (LeafHash(digest, record) != leaf) {
    return InvalidArgument("the record does not match leaf_hash");
  }
  ASSIGN_OR_RETURN(const AuditRecord decoded, DecodeRecord(record));
  if (decoded.sequence != checked.sequence) {
    return InvalidArgument("the record is record {}, not {}", decoded.sequence, checked.sequence);
  }
  RETURN_IF_ERROR(VerifyInclusion(digest, index, checked.tree_size, leaf, path,
                                  signed_checkpoint.checkpoint.root));
  return checked;
}

Result<int> PruneExpiredEpochs(store::Store& store, int64_t now_unix_ns,
                               std::chrono::hours retention) {
  const int64_t retention_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(retention).count();
  ASSIGN_OR_RETURN(const std::vector<store::AuditEpochRow> epochs, store.ListAuditEpochs());
  int pruned = 0;
  for (const store::AuditEpochRow& epoch : epochs) {
    if (epoch.pruned) continue;
    if (epoch.end_unix_ns > now_unix_ns - retention_ns) break;  // oldest first: the rest are newer
    RETURN_IF_ERROR(store.PruneAuditEpoch(epoch.epoch));
    ++pruned;
  }
  return pruned;
}

Result<int64_t> ExportRecords(store::Store& store, int64_t from_unix_ns, int64_t to_unix_ns,
                              std::ostream& out) {
  int64_t count = 0;
  store::AuditQuery query{.from_unix_ns = from_unix_ns, .to_unix_ns = to_unix_ns, .limit = 10000};
  std::string leaf_input;
  std::string canonical;
  AuditRecord decoded;
  while (true) {
    ASSIGN_OR_RETURN(std::vector<store::AuditRow> rows, store.QueryAuditRows(query));
    for (const store::AuditRow& row : rows) {
      const Result<std::string_view> input = RowLeafInput(row, leaf_input, &decoded);
      if (!input.ok()) {
        return Internal("audit record {}: {} (run `rampart audit verify`)", row.sequence,
                        input.status().message());
      }
      // The record's canonical encoding, and one more member: its leaf input.
      std::string_view text = *input;
      if (row.compact_leaf) {
        text = EncodeRecordInto(decoded, canonical);
      } else if (!text.ends_with('}')) {
        return Internal("audit record {} is not a record (run `rampart audit verify`)",
                        row.sequence);
      }
      text.remove_suffix(1);
      out << text << ",\"leaf_input\":\"" << Base64Encode(*input) << "\"}\n";
    }
    count += static_cast<int64_t>(rows.size());
    if (rows.size() < size_t(query.limit)) break;
    query.after_sequence = rows.back().sequence;
  }
  out.flush();
  if (!out) return Unavailable("writing the export failed");
  return count;
}

}  // namespace rampart::audit
