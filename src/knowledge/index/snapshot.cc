#include "knowledge/index/snapshot.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>

#include "core/logging.h"
#include "crypto/digest.h"
#include "crypto/envelope.h"
#include "knowledge/index/durable_files.h"
#include "knowledge/index/write_codec.h"

namespace rampart::knowledge {
namespace {

constexpr std::string_view kSnapshotMagic = "RPVSNAP1";
constexpr uint32_t kSnapshotVersion = 2;  // 1: records only (still read)
constexpr uint32_t kRecordsOnlyVersion = 1;
constexpr uint32_t kExtraVersion = 3;  // 2 with a tag and the user's section (SnapshotExtra)
constexpr size_t kMaxTagBytes = 4096;
constexpr size_t kHeaderBytes = 8 + 4 + 1 + 4 + 1 + 8 + 8;
constexpr size_t kChunkTargetBytes = size_t{4} << 20;
// A chunk holds whole records, so at most the target plus one record (and an envelope's
// overhead); a longer length field is damage.
constexpr size_t kMaxChunkBytes = size_t{64} << 20;

std::string SnapshotName(uint64_t sequence) {
  char name[48];
  std::snprintf(name, sizeof(name), "snapshot-%020" PRIu64 ".snap", sequence);
  return name;
}

// The associated data of a sealed chunk (see snapshot.h).
std::string ChunkDataClass(const crypto::Digest& header_digest, uint64_t chunk) {
  return "knowledge-index-snapshot " + crypto::ToHex(header_digest) + " chunk " +
         std::to_string(chunk);
}

class FileCloser {
 public:
  explicit FileCloser(int fd) : fd_(fd) {}
  ~FileCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// Reads exactly `count` bytes; false at the end of the file.
Result<bool> ReadExactly(int fd, char* out, size_t count, const std::string& path) {
  while (count > 0) {
    const ssize_t got = ::read(fd, out, count);
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("cannot read", path);
    }
    if (got == 0) return false;
    out += got;
    count -= static_cast<size_t>(got);
  }
  return true;
}

// Hashes all of the file but its last 32 bytes and compares them with the digest.
Status VerifyDigest(int fd, const std::string& path) {
  const off_t size = ::lseek(fd, 0, SEEK_END);
  if (size < 0) return ErrnoStatus("cannot seek in", path);
  if (static_cast<size_t>(size) < kHeaderBytes + 4 + 32) {
    return Internal("corrupt snapshot '{}': {} bytes is too short", path, size);
  }
  if (::lseek(fd, 0, SEEK_SET) < 0) return ErrnoStatus("cannot seek in", path);
  crypto::Hasher hasher(crypto::DigestAlgorithm::kSha256);
  std::string buffer(1 << 20, '\0');
  size_t left = static_cast<size_t>(size) - 32;
  while (left > 0) {
    const size_t count = std::min(left, buffer.size());
    ASSIGN_OR_RETURN(bool complete, ReadExactly(fd, buffer.data(), count, path));
    if (!complete) return Internal("corrupt snapshot '{}': shorter than it was", path);
    hasher.Update(std::string_view(buffer.data(), count));
    left -= count;
  }
  const crypto::Digest digest = hasher.Finish();
  char stored[32];
  ASSIGN_OR_RETURN(bool complete, ReadExactly(fd, stored, 32, path));
  if (!complete || std::memcmp(stored, digest.data(), 32) != 0) {
    return Internal("corrupt snapshot '{}': its SHA-256 does not match its contents", path);
  }
  if (::lseek(fd, 0, SEEK_SET) < 0) return ErrnoStatus("cannot seek in", path);
  return Status::Ok();
}

// The graph section's entries (see WriteSnapshot).
Status ParseGraphSection(std::string_view section,
                         std::map<std::string, NamespaceGraph, std::less<>>& graphs) {
  ByteReader reader(section);
  while (reader.remaining() > 0) {
    NamespaceGraph graph;
    ASSIGN_OR_RETURN(std::string_view name_space, reader.String("graph namespace"));
    graph.name_space = std::string(name_space);
    ASSIGN_OR_RETURN(uint64_t count, reader.U64("graph label count"));
    if (count > reader.remaining() / 8) return Internal("graph of {} labels is cut short", count);
    graph.labels.resize(count);
    for (uint64_t& label : graph.labels) {
      ASSIGN_OR_RETURN(label, reader.U64("graph label"));
    }
    ASSIGN_OR_RETURN(uint64_t size, reader.U64("graph size"));
    if (size > reader.remaining()) return Internal("graph of {} bytes is cut short", size);
    ASSIGN_OR_RETURN(std::string_view bytes, reader.Bytes(size, "graph"));
    graph.graph = std::string(bytes);
    const std::string key = graph.name_space;
    if (!graphs.emplace(key, std::move(graph)).second) {
      return Internal("two graphs for namespace '{}'", key);
    }
  }
  return Status::Ok();
}

}  // namespace

Result<SnapshotInfo> WriteSnapshot(const std::string& directory, const EngineView& view,
                                   uint64_t sequence, const EngineOptions& options,
                                   const SnapshotSealing& sealing, const SnapshotExtra* extra) {
  SnapshotInfo info;
  info.path = directory + "/" + SnapshotName(sequence);
  info.sequence = sequence;
  info.record_count = view.record_count();
  const std::string temporary = info.path + ".tmp";

  std::string header;
  ByteWriter header_writer(header);
  header_writer.Bytes(kSnapshotMagic);
  header_writer.U32(extra != nullptr ? kExtraVersion : kSnapshotVersion);
  header_writer.U8(sealing.keyring != nullptr ? 1 : 0);
  header_writer.U32(static_cast<uint32_t>(options.dimension));
  header_writer.U8(static_cast<uint8_t>(options.metric));
  header_writer.U64(sequence);
  header_writer.U64(info.record_count);
  if (extra != nullptr) {
    if (extra->tag.size() > kMaxTagBytes) return InvalidArgument("snapshot tag over 4096 bytes");
    header_writer.String(extra->tag);
  }
  const crypto::Digest header_digest = crypto::Hash(crypto::DigestAlgorithm::kSha256, header);

  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus("cannot create", temporary);
  FileCloser closer(fd);
  crypto::Hasher hasher(crypto::DigestAlgorithm::kSha256);
  const auto emit = [&](std::string_view bytes) -> Status {
    hasher.Update(bytes);
    return WriteAll(fd, bytes, temporary);
  };
  std::optional<crypto::Envelope> envelope;
  if (sealing.keyring != nullptr) envelope.emplace(*sealing.keyring);
  uint64_t chunk_number = 0;
  const auto emit_chunk = [&](std::string& plaintext) -> Status {
    std::string sealed;
    std::string_view body = plaintext;
    if (envelope) {
      const std::string data_class = ChunkDataClass(header_digest, chunk_number);
      ASSIGN_OR_RETURN(sealed, envelope->Seal(sealing.key_name, plaintext,
                                              {sealing.index_name, "", data_class}));
      body = sealed;
    }
    std::string length;
    ByteWriter(length).U32(static_cast<uint32_t>(body.size()));
    RETURN_IF_ERROR(emit(length));
    RETURN_IF_ERROR(emit(body));
    ++chunk_number;
    plaintext.clear();
    return Status::Ok();
  };

  Status status = emit(header);
  std::string chunk;
  // The graph section: each namespace's graph as its name, the graph label of each of its
  // records (in the order the records follow), then the graph's bytes; cut into chunks anywhere.
  const auto append = [&](std::string_view bytes) -> Status {
    while (!bytes.empty()) {
      const size_t take = std::min(bytes.size(), kChunkTargetBytes - chunk.size());
      chunk.append(bytes.substr(0, take));
      bytes.remove_prefix(take);
      if (chunk.size() >= kChunkTargetBytes) RETURN_IF_ERROR(emit_chunk(chunk));
    }
    return Status::Ok();
  };
  for (const NamespaceGraph& graph : view.graphs()) {
    if (!status.ok()) break;
    std::string entry;
    ByteWriter writer(entry);
    writer.String(graph.name_space);
    writer.U64(graph.labels.size());
    for (uint64_t label : graph.labels) writer.U64(label);
    writer.U64(graph.graph.size());
    status = append(entry);
    if (status.ok()) status = append(graph.graph);
  }
  if (status.ok() && !chunk.empty()) status = emit_chunk(chunk);
  if (status.ok()) status = emit(std::string(4, '\0'));  // the end of the graph section
  uint64_t written = 0;
  if (status.ok()) {
    status = view.ForEach([&](std::string_view name_space, const VectorRecord& record) -> Status {
      ByteWriter writer(chunk);
      writer.String(name_space);
      EncodeRecord(record, writer);
      ++written;
      return chunk.size() >= kChunkTargetBytes ? emit_chunk(chunk) : Status::Ok();
    });
  }
  if (status.ok() && !chunk.empty()) status = emit_chunk(chunk);
  if (status.ok() && written != info.record_count) {
    status =
        Internal("the engine's view listed {} records but counted {}", written, info.record_count);
  }
  if (status.ok()) status = emit(std::string(4, '\0'));  // the end of the chunks
  if (status.ok() && extra != nullptr) {
    if (extra->write) {
      status = extra->write([&](std::string_view entry) -> Status {
        ByteWriter(chunk).String(entry);
        return chunk.size() >= kChunkTargetBytes ? emit_chunk(chunk) : Status::Ok();
      });
    }
    if (status.ok() && !chunk.empty()) status = emit_chunk(chunk);
    if (status.ok()) status = emit(std::string(4, '\0'));  // the end of the user's section
  }
  if (status.ok()) {
    const crypto::Digest digest = hasher.Finish();
    status =
        WriteAll(fd, std::string_view(reinterpret_cast<const char*>(digest.data()), 32), temporary);
  }
  if (status.ok() && ::fsync(fd) != 0) status = ErrnoStatus("cannot fsync", temporary);
  if (status.ok() && ::rename(temporary.c_str(), info.path.c_str()) != 0) {
    status = ErrnoStatus("cannot rename into", info.path);
  }
  if (!status.ok()) {
    ::unlink(temporary.c_str());
    return status;
  }
  RETURN_IF_ERROR(SyncDirectory(directory));
  return info;
}

std::vector<SnapshotInfo> ListSnapshots(const std::string& directory) {
  std::vector<SnapshotInfo> snapshots;
  DIR* folder = ::opendir(directory.c_str());
  if (folder == nullptr) return snapshots;
  while (const dirent* entry = ::readdir(folder)) {
    uint64_t sequence = 0;
    if (std::sscanf(entry->d_name, "snapshot-%20" SCNu64, &sequence) == 1 &&
        entry->d_name == SnapshotName(sequence)) {
      snapshots.push_back({directory + "/" + entry->d_name, sequence, 0});
    }
  }
  ::closedir(folder);
  std::sort(snapshots.begin(), snapshots.end(),
            [](const SnapshotInfo& a, const SnapshotInfo& b) { return a.sequence > b.sequence; });
  return snapshots;
}

Result<SnapshotInfo> LoadSnapshot(const std::string& path, const EngineOptions& options,
                                  const SnapshotSealing& sealing, IndexEngine& engine,
                                  const SnapshotExtra* extra) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open snapshot", path);
  FileCloser closer(fd);
  RETURN_IF_ERROR(VerifyDigest(fd, path));
  const auto corrupt = [&](std::string_view why) {
    return Internal("corrupt snapshot '{}': {}", path, why);
  };

  std::string header(kHeaderBytes, '\0');
  ASSIGN_OR_RETURN(bool complete, ReadExactly(fd, header.data(), kHeaderBytes, path));
  if (!complete) return corrupt("truncated header");
  ByteReader reader(std::string_view(header).substr(0, kHeaderBytes));
  ASSIGN_OR_RETURN(std::string_view magic, reader.Bytes(kSnapshotMagic.size(), "magic"));
  if (magic != kSnapshotMagic) return corrupt("not a snapshot (wrong magic)");
  ASSIGN_OR_RETURN(uint32_t version, reader.U32("version"));
  if (version != kSnapshotVersion && version != kRecordsOnlyVersion && version != kExtraVersion) {
    return corrupt(fmt::format("format version {} is not {} to {}", version, kRecordsOnlyVersion,
                               kExtraVersion));
  }
  ASSIGN_OR_RETURN(uint8_t sealed, reader.U8("sealed"));
  ASSIGN_OR_RETURN(uint32_t dimension, reader.U32("dimension"));
  ASSIGN_OR_RETURN(uint8_t metric, reader.U8("metric"));
  SnapshotInfo info;
  info.path = path;
  ASSIGN_OR_RETURN(info.sequence, reader.U64("sequence"));
  ASSIGN_OR_RETURN(info.record_count, reader.U64("record count"));
  if (version == kExtraVersion) {  // the tag follows the fixed header, inside its digest
    char length_bytes[4];
    ASSIGN_OR_RETURN(complete, ReadExactly(fd, length_bytes, 4, path));
    uint32_t length = 0;
    std::memcpy(&length, length_bytes, 4);
    if (!complete || length > kMaxTagBytes) return corrupt("bad tag length");
    std::string tag(length, '\0');
    ASSIGN_OR_RETURN(complete, ReadExactly(fd, tag.data(), length, path));
    if (!complete) return corrupt("truncated tag");
    header.append(length_bytes, 4);
    header.append(tag);
    if (extra != nullptr && tag != extra->tag) {
      return FailedPrecondition("snapshot '{}' was built with {}, not {}", path, tag, extra->tag);
    }
  } else if (extra != nullptr) {
    return FailedPrecondition("snapshot '{}' carries no tag (format {})", path, version);
  }
  if (dimension != options.dimension || metric != static_cast<uint8_t>(options.metric)) {
    return InvalidArgument(
        "snapshot '{}' is of dimension {} and metric {}, the index of dimension {} and metric {}",
        path, dimension, metric, options.dimension, MetricName(options.metric));
  }
  const crypto::Digest header_digest = crypto::Hash(crypto::DigestAlgorithm::kSha256, header);
  if (sealed > 1) return corrupt("bad sealed flag");
  if (sealed == 1 && sealing.keyring == nullptr) {
    return FailedPrecondition("snapshot '{}' is sealed and no keyring is configured", path);
  }
  std::optional<crypto::Envelope> envelope;
  if (sealed == 1) envelope.emplace(*sealing.keyring);

  // Reads the next chunk into `chunk` (opened when sealed): false at the end of a section.
  uint64_t chunk_number = 0;
  std::string chunk;
  Status opening;  // the last chunk's envelope error
  const auto next_chunk = [&]() -> Result<bool> {
    char length_bytes[4];
    ASSIGN_OR_RETURN(bool whole, ReadExactly(fd, length_bytes, 4, path));
    if (!whole) return corrupt("truncated chunk length");
    uint32_t length;
    std::memcpy(&length, length_bytes, 4);
    if (length == 0) return false;
    if (length > kMaxChunkBytes) return corrupt(fmt::format("chunk of {} bytes", length));
    chunk.resize(length);
    ASSIGN_OR_RETURN(whole, ReadExactly(fd, chunk.data(), length, path));
    if (!whole) return corrupt("truncated chunk");
    opening = Status::Ok();
    if (envelope) {
      Result<std::string> opened = envelope->Open(
          chunk, {sealing.index_name, "", ChunkDataClass(header_digest, chunk_number)});
      if (opened.ok()) {
        chunk = std::move(*opened);
      } else {
        opening = Status(opened.status().code(),
                         fmt::format("snapshot '{}' of index '{}' does not open: {}", path,
                                     sealing.index_name, opened.status().message()));
      }
    }
    ++chunk_number;
    return true;
  };

  // The graph section (format 2): kept whole, then parsed; any failure only costs the graphs.
  std::map<std::string, NamespaceGraph, std::less<>> graphs;
  if (version >= kSnapshotVersion) {
    std::string section;
    Status usable;
    while (true) {
      ASSIGN_OR_RETURN(bool more, next_chunk());
      if (!more) break;
      if (!opening.ok() && usable.ok()) usable = opening;
      if (usable.ok()) section.append(chunk);
    }
    if (usable.ok()) usable = ParseGraphSection(section, graphs);
    if (!usable.ok()) {
      graphs.clear();
      LOG_WARN("snapshot '{}': its graphs are not usable, rebuilding them from the records: {}",
               path, usable.ToString());
    }
  }

  // The records. A namespace with a graph is gathered whole and handed to the engine with it;
  // the others (and one whose graph the engine refuses) are applied as upserts.
  uint64_t loaded = 0;
  std::string current;
  std::optional<NamespaceGraph> current_graph;
  std::vector<VectorRecord> gathered;
  const auto apply = [&](std::vector<VectorRecord>& records) {
    if (records.empty()) return;
    engine.Apply(WriteOp{current, UpsertOp{std::move(records)}});
    records.clear();
  };
  const auto finish_namespace = [&] {
    if (!current_graph) return apply(gathered);
    const Status imported = engine.ImportNamespace(gathered, *current_graph);
    if (imported.ok()) {
      ++info.graphs_loaded;
      return;
    }
    ++info.graphs_rebuilt;
    LOG_WARN("snapshot '{}': rebuilding the graph of namespace '{}': {}", path, current,
             imported.ToString());
    apply(gathered);
  };
  while (true) {
    ASSIGN_OR_RETURN(bool more, next_chunk());
    if (!more) break;
    RETURN_IF_ERROR(opening);
    ByteReader entries(chunk);
    while (entries.remaining() > 0) {
      Result<std::string_view> name_space = entries.String("namespace");
      if (!name_space.ok()) return corrupt(name_space.status().message());
      Result<VectorRecord> record = DecodeRecord(entries);
      if (!record.ok()) return corrupt(record.status().message());
      if (record->values.size() != options.dimension) {
        return corrupt(fmt::format("record '{}' has {} values", record->id, record->values.size()));
      }
      if (*name_space != current || loaded == 0) {
        finish_namespace();
        current = std::string(*name_space);
        auto found = graphs.extract(current);  // used once at most
        current_graph.reset();
        if (!found.empty()) current_graph = std::move(found.mapped());
      }
      gathered.push_back(std::move(*record));
      ++loaded;
    }
    if (!current_graph) apply(gathered);
  }
  finish_namespace();
  if (loaded != info.record_count) {
    return corrupt(fmt::format("{} records where the header says {}", loaded, info.record_count));
  }
  if (version == kExtraVersion) {
    while (true) {
      ASSIGN_OR_RETURN(bool more, next_chunk());
      if (!more) break;
      RETURN_IF_ERROR(opening);
      if (extra == nullptr || !extra->read) continue;
      ByteReader entries(chunk);
      while (entries.remaining() > 0) {
        Result<std::string_view> entry = entries.String("entry");
        if (!entry.ok()) return corrupt(entry.status().message());
        RETURN_IF_ERROR(extra->read(*entry));
      }
    }
  }
  return info;
}

Status PruneSnapshots(const std::string& directory, size_t keep) {
  const std::vector<SnapshotInfo> snapshots = ListSnapshots(directory);
  for (size_t i = keep; i < snapshots.size(); ++i) {
    if (::unlink(snapshots[i].path.c_str()) != 0 && errno != ENOENT) {
      return ErrnoStatus("cannot delete", snapshots[i].path);
    }
  }
  DIR* folder = ::opendir(directory.c_str());
  if (folder == nullptr) return ErrnoStatus("cannot open", directory);
  std::vector<std::string> leftovers;
  while (const dirent* entry = ::readdir(folder)) {
    const std::string_view name = entry->d_name;
    if (name.starts_with("snapshot-") && name.ends_with(".tmp")) {
      leftovers.push_back(directory + "/" + std::string(name));
    }
  }
  ::closedir(folder);
  for (const std::string& path : leftovers) ::unlink(path.c_str());
  return Status::Ok();
}

}  // namespace rampart::knowledge
