#pragma once

// Vector indexes as the server runs them (the config's knowledge: section, knowledge_config.h):
// the index catalog, opened (and recovered) at start, and the Pinecone front end over it.

#include <memory>
#include <string>

#include "api/pinecone_http.h"
#include "app/knowledge_config.h"
#include "core/status.h"
#include "crypto/keyring.h"
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

}  // namespace rampart::app
