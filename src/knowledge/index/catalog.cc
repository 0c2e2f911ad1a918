// OpenIndexCatalog (knowledge/index/backend.h): one folder per index under the catalog's
// directory, holding `index.json` (the spec, written atomically), the log and the snapshots
// (knowledge/index/durable_index.h). A folder is created under a temporary name and renamed into
// place once its spec is written, and deleted by renaming it to a tombstone name first, so a
// crash never leaves a half-made or half-deleted index that opens; leftovers are removed at the
// next start.

#include <dirent.h>
#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <map>
#include <mutex>

#include "core/logging.h"
#include "crypto/digest.h"
#include "json/reader.h"
#include "json/writer.h"
#include "knowledge/index/backend.h"
#include "knowledge/index/durable_files.h"
#include "knowledge/index/durable_index.h"

namespace rampart::knowledge {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kSpecFile = "index.json";
constexpr std::string_view kCreatingPrefix = ".creating-";
constexpr std::string_view kDeletedPrefix = ".deleted-";

Status ValidateName(std::string_view name) {
  if (name.empty() || name.size() > kMaxIndexNameBytes) {
    return InvalidArgument("index name must be 1 to {} characters (got {})", kMaxIndexNameBytes,
                           name.size());
  }
  for (const char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
      return InvalidArgument("index name '{}' may hold only lower-case letters, digits and '-'",
                             name);
    }
  }
  if (name.front() == '-' || name.back() == '-') {
    return InvalidArgument("index name '{}' must not start or end with '-'", name);
  }
  return Status::Ok();
}

std::string EncodeSpec(const IndexSpec& spec) {
  json::Writer writer;
  writer.StartObject();
  writer.Key("format");
  writer.Uint64(1);
  writer.Key("name");
  writer.String(spec.name);
  writer.Key("dimension");
  writer.Uint64(spec.engine.dimension);
  writer.Key("metric");
  writer.String(MetricName(spec.engine.metric));
  writer.Key("deletion_protection");
  writer.Bool(spec.deletion_protection);
  writer.Key("max_memory_bytes");
  writer.Uint64(spec.engine.max_memory_bytes);
  writer.Key("hnsw_m");
  writer.Uint64(spec.engine.hnsw_m);
  writer.Key("ef_construction");
  writer.Uint64(spec.engine.ef_construction);
  writer.Key("default_ef");
  writer.Uint64(spec.engine.default_ef);
  writer.Key("compaction_ratio");
  writer.Double(spec.engine.compaction_ratio);
  writer.EndObject();
  return writer.Take();
}

Result<IndexSpec> DecodeSpec(std::string_view text) {
  json::Parser parser;
  ASSIGN_OR_RETURN(json::Value root, parser.Parse(text));
  if (!root.IsObject()) return InvalidArgument("the spec is not a JSON object");
  const auto field = [&](std::string_view key) -> Result<json::Value> {
    std::optional<json::Value> value = root.Find(key);
    if (!value) return InvalidArgument("the spec lacks '{}'", key);
    return *value;
  };
  IndexSpec spec;
  ASSIGN_OR_RETURN(json::Value format, field("format"));
  ASSIGN_OR_RETURN(uint64_t format_version, format.GetUint64("format"));
  if (format_version != 1) return InvalidArgument("spec format {} is not 1", format_version);
  ASSIGN_OR_RETURN(json::Value name, field("name"));
  ASSIGN_OR_RETURN(std::string_view name_text, name.GetString("name"));
  spec.name = std::string(name_text);
  ASSIGN_OR_RETURN(json::Value metric, field("metric"));
  ASSIGN_OR_RETURN(std::string_view metric_text, metric.GetString("metric"));
  ASSIGN_OR_RETURN(spec.engine.metric, ParseMetric(metric_text));
  ASSIGN_OR_RETURN(json::Value protection, field("deletion_protection"));
  ASSIGN_OR_RETURN(spec.deletion_protection, protection.GetBool("deletion_protection"));
  const std::pair<std::string_view, size_t*> sizes[] = {
      {"dimension", &spec.engine.dimension},
      {"max_memory_bytes", &spec.engine.max_memory_bytes},
      {"hnsw_m", &spec.engine.hnsw_m},
      {"ef_construction", &spec.engine.ef_construction},
      {"default_ef", &spec.engine.default_ef}};
  for (const auto& [key, target] : sizes) {
    ASSIGN_OR_RETURN(json::Value value, field(key));
    ASSIGN_OR_RETURN(uint64_t number, value.GetUint64(key));
    *target = static_cast<size_t>(number);
  }
  ASSIGN_OR_RETURN(json::Value ratio, field("compaction_ratio"));
  ASSIGN_OR_RETURN(spec.engine.compaction_ratio, ratio.GetDouble("compaction_ratio"));
  RETURN_IF_ERROR(ValidateName(spec.name));
  if (spec.engine.dimension < 1 || spec.engine.dimension > kMaxDimension) {
    return InvalidArgument("dimension {} is not within 1..{}", spec.engine.dimension,
                           kMaxDimension);
  }
  return spec;
}

class DurableCatalog final : public IndexCatalog {
 public:
  explicit DurableCatalog(const CatalogOptions& options) : options_(options) {}
  Status Start() {
    std::lock_guard lock(mutex_);
    return Scan();
  }
  ~DurableCatalog() override {
    std::lock_guard lock(mutex_);
    for (auto& [name, index] : indexes_) {
      const Status closed = index->Close();
      if (!closed.ok()) LOG_ERROR("index '{}': {}", name, closed.ToString());
    }
  }

  // Opens every index folder not yet open; in a writable catalog, removes the leftovers of a
  // create or delete that a crash interrupted. REQUIRES: mutex_ held. (const: a read-only
  // catalog's Get discovers indexes the writer made since.)
  Status Scan() const {
    std::vector<std::string> names;
    DIR* folder = ::opendir(options_.directory.c_str());
    if (folder == nullptr) return ErrnoStatus("cannot open the index folder", options_.directory);
    while (const dirent* entry = ::readdir(folder)) names.emplace_back(entry->d_name);
    ::closedir(folder);
    for (const std::string& name : names) {
      if (name == "." || name == "..") continue;
      const std::string path = options_.directory + "/" + name;
      if (name.starts_with(kCreatingPrefix) || name.starts_with(kDeletedPrefix)) {
        if (!options_.read_only) {
          LOG_WARN("index catalog: removing '{}', left by an interrupted create or delete", path);
          std::error_code error;
          fs::remove_all(path, error);
        }
        continue;
      }
      if (indexes_.contains(name) || !ValidateName(name).ok()) continue;
      Result<std::string> text = ReadWholeFile(path + "/" + std::string(kSpecFile));
      if (!text.ok()) {
        if (text.status().code() == StatusCode::kNotFound) continue;  // not an index folder
        return text.status();
      }
      Result<IndexSpec> spec = DecodeSpec(*text);
      if (!spec.ok()) {
        return InvalidArgument("index '{}': '{}/{}': {}", name, path, kSpecFile,
                               spec.status().message());
      }
      if (spec->name != name) {
        return InvalidArgument("index folder '{}' holds the spec of index '{}'", path, spec->name);
      }
      Result<std::shared_ptr<DurableIndex>> index = OpenFolder(path, *spec);
      if (!index.ok()) return index.status().WithContext(fmt::format("index '{}'", name));
      indexes_.emplace(name, std::move(*index));
    }
    return Status::Ok();
  }

  Result<std::shared_ptr<IndexBackend>> Create(const IndexSpec& requested) override {
    if (options_.read_only) {
      return FailedPrecondition(
          "this replica serves its indexes read-only; create '{}' on the "
          "writer",
          requested.name);
    }
    RETURN_IF_ERROR(ValidateName(requested.name));
    if (requested.engine.dimension < 1 || requested.engine.dimension > kMaxDimension) {
      return InvalidArgument("dimension must be within 1..{} (got {})", kMaxDimension,
                             requested.engine.dimension);
    }
    IndexSpec spec = requested;
    spec.engine = options_.defaults;
    spec.engine.dimension = requested.engine.dimension;
    spec.engine.metric = requested.engine.metric;
    std::lock_guard lock(mutex_);
    const std::string path = options_.directory + "/" + spec.name;
    struct stat info {};
    if (indexes_.contains(spec.name) || ::stat(path.c_str(), &info) == 0) {
      return AlreadyExists("index '{}' already exists", spec.name);
    }
    const std::string staging = options_.directory + "/" + std::string(kCreatingPrefix) +
                                spec.name + "-" + crypto::ToHex(crypto::RandomBytes(4));
    if (::mkdir(staging.c_str(), 0700) != 0) return ErrnoStatus("cannot create", staging);
    Status status = WriteFileAtomically(staging + "/" + std::string(kSpecFile), EncodeSpec(spec));
    if (status.ok() && ::rename(staging.c_str(), path.c_str()) != 0) {
      status = ErrnoStatus("cannot rename into", path);
    }
    if (status.ok()) status = SyncDirectory(options_.directory);
    if (!status.ok()) {
      std::error_code error;
      fs::remove_all(staging, error);
      return status;
    }
    ASSIGN_OR_RETURN(std::shared_ptr<DurableIndex> index, OpenFolder(path, spec));
    indexes_.emplace(spec.name, index);
    LOG_INFO("index '{}' created (dimension {}, {})", spec.name, spec.engine.dimension,
             MetricName(spec.engine.metric));
    return std::shared_ptr<IndexBackend>(index);
  }

  Status Delete(std::string_view name) override {
    if (options_.read_only) {
      return FailedPrecondition(
          "this replica serves its indexes read-only; delete '{}' on the "
          "writer",
          name);
    }
    std::lock_guard lock(mutex_);
    const auto found = indexes_.find(name);
    if (found == indexes_.end()) return NotFound("index '{}' does not exist", name);
    if (found->second->spec().deletion_protection) {
      return FailedPrecondition("index '{}' has deletion protection on", name);
    }
    std::shared_ptr<DurableIndex> index = found->second;
    indexes_.erase(found);
    const Status closed = index->Close();
    if (!closed.ok()) LOG_WARN("index '{}' (being deleted): {}", name, closed.ToString());
    const std::string path = options_.directory + "/" + std::string(name);
    const std::string tombstone = options_.directory + "/" + std::string(kDeletedPrefix) +
                                  std::string(name) + "-" + crypto::ToHex(crypto::RandomBytes(4));
    if (::rename(path.c_str(), tombstone.c_str()) != 0) {
      return ErrnoStatus("cannot delete the index folder", path);
    }
    RETURN_IF_ERROR(SyncDirectory(options_.directory));
    std::error_code error;
    fs::remove_all(tombstone, error);
    if (error) LOG_WARN("index '{}': cannot remove '{}': {}", name, tombstone, error.message());
    LOG_INFO("index '{}' deleted", name);
    return Status::Ok();
  }

  Result<std::shared_ptr<IndexBackend>> Get(std::string_view name) const override {
    std::lock_guard lock(mutex_);
    auto found = indexes_.find(name);
    if (found == indexes_.end() && options_.read_only && ValidateName(name).ok()) {
      // A replica learns of an index the writer created since it started.
      const Status scanned = Scan();
      if (!scanned.ok()) LOG_WARN("index catalog: {}", scanned.ToString());
      found = indexes_.find(name);
    }
    if (found != indexes_.end() && options_.read_only) {
      // A replica drops an index the writer deleted (one stat per request).
      struct stat info {};
      const std::string spec_path =
          options_.directory + "/" + std::string(name) + "/" + std::string(kSpecFile);
      if (::stat(spec_path.c_str(), &info) != 0 && errno == ENOENT) {
        const Status closed = found->second->Close();
        if (!closed.ok()) LOG_WARN("index '{}': {}", name, closed.ToString());
        indexes_.erase(found);
        found = indexes_.end();
      }
    }
    if (found == indexes_.end()) return NotFound("index '{}' does not exist", name);
    return std::shared_ptr<IndexBackend>(found->second);
  }

  std::vector<IndexSpec> List() const override {
    std::lock_guard lock(mutex_);
    std::vector<IndexSpec> specs;
    for (const auto& [name, index] : indexes_) specs.push_back(index->spec());
    return specs;
  }

 private:
  Result<std::shared_ptr<DurableIndex>> OpenFolder(const std::string& path,
                                                   const IndexSpec& spec) const {
    DurableIndexOptions index_options;
    index_options.directory = path;
    index_options.spec = spec;
    index_options.durability = options_.durability;
    index_options.sealing = {options_.keyring, spec.name};
    index_options.read_only = options_.read_only;
    index_options.engine_factory = NewHnswEngine;
    return DurableIndex::Open(std::move(index_options));
  }

  const CatalogOptions options_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::shared_ptr<DurableIndex>, std::less<>> indexes_;
};

}  // namespace

Result<std::unique_ptr<IndexCatalog>> OpenIndexCatalog(const CatalogOptions& options) {
  if (options.directory.empty()) return InvalidArgument("the index catalog needs a directory");
  if (!options.read_only) {
    std::error_code error;
    fs::create_directories(options.directory, error);
    if (error) {
      return Unavailable("cannot create the index folder '{}': {}", options.directory,
                         error.message());
    }
    if (options.keyring != nullptr) {
      RETURN_IF_ERROR(
          options.keyring->Ensure(kSnapshotKeyName, crypto::KeyPurpose::kWrapping, "aes-256-gcm"));
    }
  }
  auto catalog = std::make_unique<DurableCatalog>(options);
  RETURN_IF_ERROR(catalog->Start());
  return std::unique_ptr<IndexCatalog>(std::move(catalog));
}

}  // namespace rampart::knowledge
