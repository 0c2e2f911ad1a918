#include "app/knowledge_setup.h"

#include <filesystem>

#include "core/logging.h"

namespace rampart::app {

Result<std::unique_ptr<KnowledgeRuntime>> StartKnowledge(const KnowledgeConfig& config,
                                                         const std::string& data_dir,
                                                         crypto::Keyring* keyring, bool tls,
                                                         const policy::AccessControl* access,
                                                         audit::AuditSink* audit) {
  if (config.seal_snapshots && keyring == nullptr) {
    return InvalidArgument(
        "knowledge.seal_snapshots needs the keyring: give a master key (--master-key-file, "
        "RAMPART_MASTER_KEY or the keyring: section)");
  }
  knowledge::CatalogOptions options;
  options.directory = config.indexes_dir.empty()
                          ? (std::filesystem::path(data_dir) / "indexes").string()
                          : config.indexes_dir;
  options.read_only = config.read_only;
  options.defaults = config.engine;
  options.durability = config.durability;
  options.keyring = config.seal_snapshots ? keyring : nullptr;
  Result<std::unique_ptr<knowledge::IndexCatalog>> catalog = knowledge::OpenIndexCatalog(options);
  if (!catalog.ok()) {
    return catalog.status().WithContext(
        fmt::format("opening the indexes in '{}'", options.directory));
  }
  auto runtime = std::make_unique<KnowledgeRuntime>();
  runtime->catalog = std::move(catalog).value();
  runtime->pinecone = std::make_unique<api::PineconeHttp>(
      *runtime->catalog, api::PineconeHttpOptions{.public_url = config.public_url,
                                                  .tls = tls,
                                                  .engine_defaults = config.engine,
                                                  .worker_threads = config.worker_threads,
                                                  .max_queued_requests = config.max_queued_requests,
                                                  .access = access,
                                                  .audit = audit});
  LOG_INFO("knowledge: {} index(es) in '{}'{}, Pinecone API at /pinecone",
           runtime->catalog->List().size(), options.directory,
           config.read_only ? " (read-only)" : "");
  return runtime;
}

void StopKnowledge(KnowledgeRuntime& runtime) {
  if (runtime.pinecone) runtime.pinecone->Shutdown();
  runtime.pinecone.reset();
  runtime.catalog.reset();
}

}  // namespace rampart::app
