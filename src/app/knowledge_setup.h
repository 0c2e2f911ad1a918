#pragma once

// Vector indexes as the server runs them (the config's knowledge: section, knowledge_config.h):
// the index catalog, opened (and recovered) at start, and the Pinecone front end over it; and the
// documents side: the Files API and the vector stores built on its files.

#include <memory>
#include <string>

#include "api/files_http.h"
#include "api/pinecone_http.h"
#include "api/vector_stores_http.h"
#include "app/knowledge_config.h"
#include "core/status.h"
#include "crypto/envelope.h"
#include "crypto/keyring.h"
#include "gateway/embedder.h"
#include "gateway/gateway.h"
#include "knowledge/hub/vector_store_service.h"
#include "knowledge/index/backend.h"

namespace rampart::app {

// Destroyed in reverse order: the front end (its workers stopped) before the catalog.
struct KnowledgeRuntime {
  std::unique_ptr<knowledge::IndexCatalog> catalog;
  std::unique_ptr<api::PineconeHttp> pinecone;
};

// Opens every index under the config's folder (default `<data_dir>/indexes`), replaying each
// one's snapshot and log; an index that cannot be recovered is a start-up error naming it.
// `keyring` (may be null) seals snapshots when the config asks for it (an error without one).
// `access` and `audit` (may be null) must outlive the runtime.
Result<std::unique_ptr<KnowledgeRuntime>> StartKnowledge(const KnowledgeConfig& config,
                                                         const std::string& data_dir,
                                                         crypto::Keyring* keyring, bool tls,
                                                         const policy::AccessControl* access,
                                                         audit::AuditSink* audit);

// Stops the front end (queued requests answered), then closes the indexes (each writes what its
// log holds beyond its last snapshot, as the durable layer does on a clean close).
void StopKnowledge(KnowledgeRuntime& runtime);

// The Files API (/v1/files) and the Vector Stores API (/v1/vector_stores). Each member is null
// when that part is off. Destroyed in reverse order: the front ends before the service, the
// service before the embedder and the store.
struct DocumentsRuntime {
  std::unique_ptr<store::Store> own_store;  // when no other store was given
  std::unique_ptr<crypto::Envelope> envelope;
  std::unique_ptr<gateway::GatewayEmbedder> embedder;
  std::unique_ptr<knowledge::hub::FileStorage> file_storage;  // the service's reader of files
  std::unique_ptr<knowledge::hub::VectorStoreService> vector_stores;
  std::unique_ptr<api::VectorStoresHttp> vector_stores_http;
  std::unique_ptr<api::FilesHttp> files;
};

struct DocumentsParts {
  // The store for files' metadata (the access store, else the keyring's); null: a SQLite store
  // of its own under data_dir when `own_store_allowed` (--data-dir given), else no Files API.
  store::Store* store = nullptr;
  bool own_store_allowed = false;
  std::string data_dir;  // bytes under <data_dir>/files
  uint64_t files_max_bytes = 512ull << 20;
  std::string files_seal_key;          // empty: files are not sealed
  crypto::Keyring* keyring = nullptr;  // null: nothing can be sealed
  // The vector stores (null: off); they need the Files API and the gateway's embedding target.
  const VectorStoresConfig* vector_stores = nullptr;
  const gateway::Gateway* gateway = nullptr;
  const policy::AccessControl* access = nullptr;  // null: open
  audit::AuditSink* audit = nullptr;              // null: nothing recorded
};

// Errors name the part that cannot start (a sealing key without the keyring, vector stores
// without a store for files, an unknown embedding target).
Result<std::unique_ptr<DocumentsRuntime>> StartDocuments(const DocumentsParts& parts);
// Stops the front ends (queued requests answered), then the service's ingestion.
void StopDocuments(DocumentsRuntime& runtime);

}  // namespace rampart::app
