#include "knowledge/hub/vector_store_snapshot.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "core/logging.h"
#include "knowledge/hub/vector_store_codec.h"
#include "knowledge/index/durable_files.h"
#include "knowledge/index/write_codec.h"

namespace rampart::knowledge::hub {
namespace {

// The service's section: one header entry, then each file followed by its chunks.
constexpr int kSectionVersion = 1;
constexpr uint8_t kHeaderEntry = 'H';
constexpr uint8_t kFileEntry = 'F';
constexpr uint8_t kChunkEntry = 'C';
constexpr uint8_t kTermsEntry = 'T';
constexpr size_t kTermsPerEntry = 4096;
constexpr size_t kKeep = 2;

EngineOptions EngineOptionsFor(const StoreSnapshotSettings& settings) {
  EngineOptions options;
  options.dimension = settings.dimension;
  options.metric = Metric::kCosine;
  options.ef_construction = settings.ef_construction;
  return options;
}

SnapshotSealing SealingFor(const StoreSnapshotSettings& settings, const std::string& store_id) {
  SnapshotSealing sealing;
  sealing.keyring = settings.keyring;
  sealing.index_name = "vector-store " + store_id;
  if (!settings.key_name.empty()) sealing.key_name = settings.key_name;
  return sealing;
}

void EncodeFile(const StoreIndexFile& file, std::string& out) {
  ByteWriter writer(out);
  const VectorStoreFileInfo& info = file.info;
  writer.U8(kFileEntry);
  writer.String(info.id);
  writer.String(info.vector_store_id);
  writer.String(info.filename);
  writer.U64(static_cast<uint64_t>(info.created_at));
  writer.U8(static_cast<uint8_t>(info.status));
  writer.U8(info.last_error.has_value() ? 1 : 0);
  writer.String(info.last_error.has_value() ? info.last_error->code : "");
  writer.String(info.last_error.has_value() ? info.last_error->message : "");
  writer.String(internal::EncodeFileAttributes(info.attributes));
  writer.String(internal::EncodeChunking(info.chunking));
  writer.U64(static_cast<uint64_t>(info.usage_bytes));
  writer.U8(info.redact_pii ? 1 : 0);
  writer.U64(file.chunks.size());
}

void EncodeChunk(ChunkId id, const IndexedChunk& chunk, const Bm25Chunk& terms, std::string& out) {
  ByteWriter writer(out);
  writer.U8(kChunkEntry);
  writer.U64(id);
  writer.U64(static_cast<uint64_t>(static_cast<int64_t>(chunk.chunk_index)));
  writer.String(chunk.text);
  writer.String(chunk.heading_path);
  writer.U64(static_cast<uint64_t>(static_cast<int64_t>(chunk.page)));
  writer.U64(chunk.begin);
  writer.U64(chunk.end);
  writer.U32(terms.length);
  writer.U32(static_cast<uint32_t>(terms.terms.size()));
  for (const auto& [term, frequency] : terms.terms) {
    writer.U32(term);
    writer.U32(frequency);
  }
}

// Reads the section's entries back, in order.
class SectionReader {
 public:
  Status Read(std::string_view entry) {
    ByteReader reader(entry);
    ASSIGN_OR_RETURN(const uint8_t kind, reader.U8("entry kind"));
    if (kind == kHeaderEntry) {
      if (seen_header_) return Internal("two header entries");
      seen_header_ = true;
      ASSIGN_OR_RETURN(const uint64_t version, reader.U64("section version"));
      if (version != kSectionVersion) return Internal("section version {}", version);
      ASSIGN_OR_RETURN(next_chunk, reader.U64("next chunk"));
      ASSIGN_OR_RETURN(expected_files_, reader.U64("file count"));
      ASSIGN_OR_RETURN(expected_terms_, reader.U64("term count"));
      return Status::Ok();
    }
    if (!seen_header_) return Internal("an entry before the header");
    if (kind == kTermsEntry) return ReadTerms(reader);
    if (kind == kFileEntry) return ReadFile(reader);
    if (kind == kChunkEntry) return ReadChunk(reader);
    return Internal("unknown entry kind {}", kind);
  }

  Status Finish() const {
    if (!seen_header_ || files.size() != expected_files_ || chunks_left_ != 0 ||
        bm25.terms.size() != expected_terms_) {
      return Internal("the section ends early ({} of {} files)", files.size(), expected_files_);
    }
    return Status::Ok();
  }

  std::vector<StoreIndexFile> files;
  std::unordered_map<ChunkId, std::shared_ptr<const IndexedChunk>> chunks;
  Bm25Contents bm25;
  ChunkId next_chunk = 1;

 private:
  Status ReadTerms(ByteReader& reader) {
    ASSIGN_OR_RETURN(const uint32_t count, reader.Count(4, "term count"));
    for (uint32_t i = 0; i < count; ++i) {
      ASSIGN_OR_RETURN(const std::string_view term, reader.String("term"));
      bm25.terms.emplace_back(term);
    }
    if (bm25.terms.size() > expected_terms_) return Internal("more terms than announced");
    return Status::Ok();
  }

  Status ReadFile(ByteReader& reader) {
    if (chunks_left_ != 0) return Internal("a file before the previous one's chunks");
    StoreIndexFile& file = files.emplace_back();
    VectorStoreFileInfo& info = file.info;
    ASSIGN_OR_RETURN(const std::string_view id, reader.String("file id"));
    info.id = std::string(id);
    ASSIGN_OR_RETURN(const std::string_view store, reader.String("store id"));
    info.vector_store_id = std::string(store);
    ASSIGN_OR_RETURN(const std::string_view filename, reader.String("filename"));
    info.filename = std::string(filename);
    ASSIGN_OR_RETURN(const uint64_t created, reader.U64("created_at"));
    info.created_at = static_cast<int64_t>(created);
    ASSIGN_OR_RETURN(const uint8_t status, reader.U8("status"));
    if (status > static_cast<uint8_t>(IngestStatus::kFailed)) return Internal("bad status");
    info.status = static_cast<IngestStatus>(status);
    ASSIGN_OR_RETURN(const uint8_t has_error, reader.U8("error flag"));
    ASSIGN_OR_RETURN(const std::string_view code, reader.String("error code"));
    ASSIGN_OR_RETURN(const std::string_view message, reader.String("error message"));
    if (has_error != 0) info.last_error = IngestError{std::string(code), std::string(message)};
    ASSIGN_OR_RETURN(const std::string_view attributes, reader.String("attributes"));
    ASSIGN_OR_RETURN(info.attributes, internal::DecodeFileAttributes(attributes));
    ASSIGN_OR_RETURN(const std::string_view chunking, reader.String("chunking"));
    ASSIGN_OR_RETURN(info.chunking, internal::DecodeChunking(chunking));
    ASSIGN_OR_RETURN(const uint64_t usage, reader.U64("usage bytes"));
    info.usage_bytes = static_cast<int64_t>(usage);
    ASSIGN_OR_RETURN(const uint8_t redact, reader.U8("redact flag"));
    info.redact_pii = redact != 0;
    ASSIGN_OR_RETURN(chunks_left_, reader.U64("chunk count"));
    if (chunks_left_ > (uint64_t{1} << 32)) return Internal("{} chunks", chunks_left_);
    return Status::Ok();
  }

  Status ReadChunk(ByteReader& reader) {
    if (chunks_left_ == 0 || files.empty()) return Internal("a chunk of no file");
    auto chunk = std::make_shared<IndexedChunk>();
    ASSIGN_OR_RETURN(const ChunkId id, reader.U64("chunk id"));
    ASSIGN_OR_RETURN(const uint64_t index, reader.U64("chunk index"));
    chunk->chunk_index = static_cast<int>(static_cast<int64_t>(index));
    ASSIGN_OR_RETURN(const std::string_view text, reader.String("text"));
    chunk->text = std::string(text);
    ASSIGN_OR_RETURN(const std::string_view heading, reader.String("heading path"));
    chunk->heading_path = std::string(heading);
    ASSIGN_OR_RETURN(const uint64_t page, reader.U64("page"));
    chunk->page = static_cast<int>(static_cast<int64_t>(page));
    ASSIGN_OR_RETURN(chunk->begin, reader.U64("begin"));
    ASSIGN_OR_RETURN(chunk->end, reader.U64("end"));
    Bm25Chunk terms;
    ASSIGN_OR_RETURN(terms.length, reader.U32("term length"));
    ASSIGN_OR_RETURN(const uint32_t count, reader.Count(8, "distinct terms"));
    terms.terms.resize(count);
    for (auto& [term, frequency] : terms.terms) {
      ASSIGN_OR_RETURN(term, reader.U32("term"));
      ASSIGN_OR_RETURN(frequency, reader.U32("frequency"));
    }
    if (!chunks.emplace(id, std::move(chunk)).second) return Internal("chunk {} twice", id);
    bm25.chunks.emplace(id, std::move(terms));
    files.back().chunks.push_back(id);
    --chunks_left_;
    return Status::Ok();
  }

  bool seen_header_ = false;
  uint64_t expected_files_ = 0;
  uint64_t expected_terms_ = 0;
  uint64_t chunks_left_ = 0;
};

}  // namespace

std::string StoreSnapshotTag(size_t dimension, const std::string& embedder,
                             AnalyzerLanguage language, ChineseTerms chinese_terms,
                             size_t ef_construction, bool sealed) {
  return fmt::format(
      "vector-store-index {}; dimension {}; embedder {}; language {}; chinese_terms {}; "
      "ef_construction {}; {}",
      kSectionVersion, dimension, embedder, static_cast<int>(language),
      static_cast<int>(chinese_terms), ef_construction, sealed ? "sealed" : "plain");
}

Result<SnapshotInfo> WriteStoreSnapshot(const std::string& folder, const std::string& store_id,
                                        const StoreIndexState& state, uint64_t sequence,
                                        const StoreSnapshotSettings& settings) {
  if (::mkdir(folder.c_str(), 0700) != 0 && errno != EEXIST) {
    return ErrnoStatus("cannot make", folder);
  }
  SnapshotExtra extra;
  extra.tag = settings.tag;
  extra.write = [&](const std::function<Status(std::string_view)>& add) -> Status {
    std::string entry;
    ByteWriter header(entry);
    header.U8(kHeaderEntry);
    header.U64(kSectionVersion);
    header.U64(state.next_chunk);
    header.U64(state.files.size());
    header.U64(state.bm25.terms.size());
    RETURN_IF_ERROR(add(entry));
    for (size_t first = 0; first < state.bm25.terms.size(); first += kTermsPerEntry) {
      const size_t count = std::min(kTermsPerEntry, state.bm25.terms.size() - first);
      entry.clear();
      ByteWriter terms(entry);
      terms.U8(kTermsEntry);
      terms.U32(static_cast<uint32_t>(count));
      for (size_t i = first; i < first + count; ++i) terms.String(state.bm25.terms[i]);
      RETURN_IF_ERROR(add(entry));
    }
    for (const StoreIndexFile& file : state.files) {
      entry.clear();
      EncodeFile(file, entry);
      RETURN_IF_ERROR(add(entry));
      for (const ChunkId id : file.chunks) {
        const auto chunk = state.chunks.find(id);
        const auto terms = state.bm25.chunks.find(id);
        if (chunk == state.chunks.end() || terms == state.bm25.chunks.end()) {
          return Internal("chunk {} was not captured", id);
        }
        entry.clear();
        EncodeChunk(id, *chunk->second, terms->second, entry);
        RETURN_IF_ERROR(add(entry));
      }
    }
    return Status::Ok();
  };
  ASSIGN_OR_RETURN(SnapshotInfo info,
                   WriteSnapshot(folder, *state.vectors, sequence, EngineOptionsFor(settings),
                                 SealingFor(settings, store_id), &extra));
  RETURN_IF_ERROR(PruneSnapshots(folder, kKeep));
  return info;
}

Result<LoadedStoreSnapshot> LoadStoreSnapshot(const std::string& folder,
                                              const std::string& store_id,
                                              const StoreSnapshotSettings& settings) {
  const std::vector<SnapshotInfo> snapshots = ListSnapshots(folder);
  if (snapshots.empty()) return NotFound("no snapshot in '{}'", folder);
  Status first_error;
  for (const SnapshotInfo& snapshot : snapshots) {
    SectionReader section;
    SnapshotExtra extra;
    extra.tag = settings.tag;
    extra.read = [&](std::string_view entry) { return section.Read(entry); };
    Result<LoadedStoreSnapshot> loaded = [&]() -> Result<LoadedStoreSnapshot> {
      const EngineOptions options = EngineOptionsFor(settings);
      ASSIGN_OR_RETURN(std::unique_ptr<IndexEngine> engine, NewHnswEngine(options));
      ASSIGN_OR_RETURN(
          SnapshotInfo info,
          LoadSnapshot(snapshot.path, options, SealingFor(settings, store_id), *engine, &extra));
      Status finished = section.Finish();
      if (!finished.ok())
        return Internal("corrupt snapshot '{}': {}", snapshot.path, finished.message());
      Result<std::unique_ptr<StoreIndex>> index = StoreIndex::Restore(
          settings.dimension, settings.analyzer, std::move(engine), std::move(section.files),
          std::move(section.chunks), std::move(section.bm25), section.next_chunk);
      if (!index.ok()) {
        return Internal("corrupt snapshot '{}': {}", snapshot.path, index.status().message());
      }
      return LoadedStoreSnapshot{std::move(*index), info};
    }();
    if (loaded.ok()) {
      if (!first_error.ok()) {
        LOG_WARN("vector store {}: {}; loaded the older snapshot '{}'", store_id,
                 first_error.message(), snapshot.path);
      }
      return loaded;
    }
    if (first_error.ok()) first_error = loaded.status();
  }
  return first_error;
}

}  // namespace rampart::knowledge::hub
