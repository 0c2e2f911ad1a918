#pragma once

// IndexBackend: one index as the front ends see it (the Pinecone data plane in api/, later the
// knowledge hub), whatever holds it: the embedded engine made durable here (DurableIndex), or an
// external engine reached over its API (docs/vector-indexes.md, "Scaling out").
// IndexCatalog: the indexes a server holds, created, opened and deleted by name.
//
// Writes are asynchronous: `done` runs once, after the write is durable and visible to every
// later read, or with the reason it was refused; it runs on the backend's own thread and must
// not block. Reads block for as long as a search takes (milliseconds): front ends call them
// from a worker pool, never from an I/O thread. Every method is thread-safe.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/unique_function.h"
#include "crypto/keyring.h"
#include "knowledge/index/engine.h"
#include "knowledge/index/vector_types.h"

namespace rampart::knowledge {

struct IndexSpec {
  std::string name;  // kMaxIndexNameBytes, [a-z0-9-], not starting or ending with '-'
  EngineOptions engine;
  bool deletion_protection = false;
};

using WriteDone = UniqueFunction<void(Status)>;

class IndexBackend {
 public:
  virtual ~IndexBackend() = default;
  virtual const IndexSpec& spec() const = 0;
  // Whether writes are refused (a read-only replica serving a shared snapshot).
  virtual bool read_only() const = 0;

  // done(Ok) once durable; errors: as IndexEngine's Resolve*, FailedPrecondition on a read-only
  // replica, Unavailable when the log cannot be written (the write did not happen).
  virtual void Upsert(std::string name_space, std::vector<VectorRecord> records,
                      WriteDone done) = 0;
  virtual void Update(UpdateRequest request, WriteDone done) = 0;
  virtual void Delete(DeleteRequest request, WriteDone done) = 0;

  virtual Result<QueryResult> Query(const QueryRequest& request) const = 0;
  virtual std::vector<VectorRecord> Fetch(std::string_view name_space,
                                          std::span<const std::string> ids) const = 0;
  virtual Result<ListPage> List(std::string_view name_space, std::string_view prefix, size_t limit,
                                std::string_view token) const = 0;
  virtual Result<IndexStats> Stats(const FilterNode* filter) const = 0;
};

// How an embedded index keeps its writes (knowledge/index/durable_index.h).
struct DurabilityOptions {
  // A new log segment is started once the current one reaches this size.
  size_t segment_bytes = size_t{64} << 20;
  // A snapshot is written in the background once this many records, or this many bytes of log,
  // were written since the last one (and at a clean shutdown).
  uint64_t snapshot_every_records = 200000;
  uint64_t snapshot_every_bytes = uint64_t{512} << 20;
  // Writes waiting for the log beyond this are refused (ResourceExhausted); 0: no bound.
  size_t max_pending_writes = 100000;
  // How often a read-only replica looks for a newer snapshot.
  uint32_t replica_poll_milliseconds = 2000;
};

struct CatalogOptions {
  std::string directory;  // <data-dir>/indexes: one folder per index
  // Serve every index found there read-only, reloading the newest snapshot as it appears;
  // create and delete are refused (FailedPrecondition).
  bool read_only = false;
  // Defaults for a new index's engine (its dimension and metric come from the request).
  EngineOptions defaults;
  // When given, snapshots are sealed with the envelope under this keyring's "knowledge:index"
  // key (created on first use), with the index's name as associated data. Must outlive the
  // catalog.
  crypto::Keyring* keyring = nullptr;
  DurabilityOptions durability;
};

class IndexCatalog {
 public:
  virtual ~IndexCatalog() = default;
  // AlreadyExists, InvalidArgument (name, dimension, metric), FailedPrecondition (read-only).
  virtual Result<std::shared_ptr<IndexBackend>> Create(const IndexSpec& spec) = 0;
  // NotFound; FailedPrecondition when deletion_protection is on or read-only.
  virtual Status Delete(std::string_view name) = 0;
  virtual Result<std::shared_ptr<IndexBackend>> Get(std::string_view name) const = 0;
  virtual std::vector<IndexSpec> List() const = 0;  // by name
};

// Opens (and recovers: the last snapshot, then the log after it) every index under
// options.directory, creating the directory when absent. Errors name the index and the file.
Result<std::unique_ptr<IndexCatalog>> OpenIndexCatalog(const CatalogOptions& options);

}  // namespace rampart::knowledge
