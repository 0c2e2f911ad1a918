#include "app/knowledge_setup.h"

#include <filesystem>

#include "core/logging.h"
#include "gateway/guard_stages.h"
#include "guard/redact.h"
#include "store/store.h"

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

namespace {

// PII redaction of the files added under the obligation redact:pii, with the gateway's guard as
// it is at each call (a reload may change it): its Detector, the tenant's keys and the guard's
// default operators. Null when the gateway has no detector, so that such files fail rather than
// being ingested unredacted.
std::function<Result<std::string>(const std::string&, std::string_view)> GuardRedaction(
    const gateway::Gateway* gateway) {
  if (gateway == nullptr || gateway->guard()->detector == nullptr) return nullptr;
  return [gateway](const std::string& tenant, std::string_view text) -> Result<std::string> {
    const std::shared_ptr<const gateway::GuardRuntime> guard = gateway->guard();
    if (guard->detector == nullptr || guard->keys == nullptr) {
      return Unavailable("the gateway's guard has no PII detector any more");
    }
    guard::RedactOptions options;
    options.tenant = tenant.empty() ? std::string(guard::kDefaultTenant) : tenant;
    ASSIGN_OR_RETURN(guard::RedactedText redacted,
                     guard::RedactText(*guard->detector, *guard->keys, text, options));
    return std::move(redacted.text);
  };
}

// The service over the Files API's files, embedding with the runtime's embedder; started.
Status StartVectorStoreService(const VectorStoresConfig& config, const DocumentsParts& parts,
                               store::Store& store, DocumentsRuntime& runtime) {
  knowledge::hub::VectorStoreServiceOptions options;
  options.workers = config.ingestion_workers;
  options.embed_batch = config.embedding_batch;
  options.language = config.language == "chinese"   ? knowledge::hub::AnalyzerLanguage::kChinese
                     : config.language == "english" ? knowledge::hub::AnalyzerLanguage::kEnglish
                                                    : knowledge::hub::AnalyzerLanguage::kAuto;
  options.chinese_terms = config.chinese_terms == "words" ? knowledge::hub::ChineseTerms::kWords
                          : config.chinese_terms == "bigrams"
                              ? knowledge::hub::ChineseTerms::kBigrams
                              : knowledge::hub::ChineseTerms::kWordsAndBigrams;
  options.fusion = config.fusion == "linear" ? knowledge::hub::Fusion::kLinear
                                             : knowledge::hub::Fusion::kReciprocalRank;
  options.vector_weight = config.vector_weight;
  options.redact = GuardRedaction(parts.gateway);
  // Each store's index snapshot, loaded at start instead of a rebuild (docs/knowledge-hub.md).
  if (config.index_snapshots && !parts.data_dir.empty()) {
    options.snapshot_directory = parts.data_dir + "/vector-stores";
  }
  if (config.seal_chunks) {
    if (parts.keyring == nullptr) {
      return FailedPrecondition(
          "knowledge.vector_stores.seal_chunks needs the keyring (--master-key-file)");
    }
    RETURN_IF_ERROR(
        parts.keyring->Ensure(config.seal_key, crypto::KeyPurpose::kWrapping, "aes-256-gcm")
            .WithContext("the chunks' sealing key"));
    if (!runtime.envelope) runtime.envelope = std::make_unique<crypto::Envelope>(*parts.keyring);
    options.envelope = runtime.envelope.get();
    options.seal_key = config.seal_key;
  }
  // The service reads the bytes the Files API keeps, sealed as it sealed them.
  runtime.file_storage = std::make_unique<knowledge::hub::FileStorage>(
      parts.data_dir + "/files", parts.files_seal_key.empty() ? nullptr : runtime.envelope.get(),
      parts.files_seal_key);
  Result<std::unique_ptr<knowledge::hub::VectorStoreService>> service =
      knowledge::hub::NewVectorStoreService(&store, runtime.file_storage.get(),
                                            runtime.embedder.get(), options);
  if (!service.ok()) return service.status();
  RETURN_IF_ERROR((*service)->Start());
  runtime.vector_stores = std::move(service).value();
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<DocumentsRuntime>> StartDocuments(const DocumentsParts& parts) {
  auto runtime = std::make_unique<DocumentsRuntime>();
  store::Store* store = parts.store;
  if (store == nullptr && parts.own_store_allowed) {
    Result<std::unique_ptr<store::Store>> opened = store::OpenSqliteStore(parts.data_dir);
    if (!opened.ok()) return opened.status().WithContext("files");
    runtime->own_store = std::move(opened).value();
    store = runtime->own_store.get();
  }
  if (store == nullptr) {
    if (parts.vector_stores != nullptr) {
      return FailedPrecondition(
          "knowledge.vector_stores needs the Files API, which needs a store: give --data-dir, "
          "an access: section or a keyring");
    }
    return runtime;  // no Files API (answered 501)
  }
  if (!parts.files_seal_key.empty()) {
    if (parts.keyring == nullptr) {
      return FailedPrecondition("files: files.seal_key needs the keyring (--master-key-file)");
    }
    RETURN_IF_ERROR(
        parts.keyring->Ensure(parts.files_seal_key, crypto::KeyPurpose::kWrapping, "aes-256-gcm")
            .WithContext("files: the sealing key"));
    runtime->envelope = std::make_unique<crypto::Envelope>(*parts.keyring);
  }

  if (const VectorStoresConfig* config = parts.vector_stores; config != nullptr) {
    if (parts.gateway == nullptr) return FailedPrecondition("vector stores need the gateway");
    Result<std::unique_ptr<gateway::GatewayEmbedder>> embedder = gateway::GatewayEmbedder::Create(
        *parts.gateway, {.target = config->embedding_target,
                         .batch_size = config->embedding_batch,
                         .deadline = std::chrono::milliseconds(config->embedding_timeout_ms)});
    if (!embedder.ok()) return embedder.status().WithContext("vector stores");
    runtime->embedder = std::move(embedder).value();
    RETURN_IF_ERROR(
        StartVectorStoreService(*config, parts, *store, *runtime).WithContext("vector stores"));
    runtime->vector_stores_http = std::make_unique<api::VectorStoresHttp>(
        *runtime->vector_stores,
        api::VectorStoresHttpOptions{.worker_threads = config->worker_threads,
                                     .max_queued_requests = config->max_queued_requests,
                                     .access = parts.access,
                                     .audit = parts.audit});
    LOG_INFO("Vector Stores API at /v1/vector_stores: embeddings from target '{}' ({} dimensions)",
             runtime->embedder->target(), runtime->embedder->dimension());
  }

  api::FilesOptions options{.dir = parts.data_dir + "/files",
                            .max_bytes = parts.files_max_bytes,
                            .envelope = runtime->envelope.get(),
                            .seal_key = parts.files_seal_key,
                            .access = parts.access,
                            .audit = parts.audit};
  if (knowledge::hub::VectorStores* service = runtime->vector_stores.get()) {
    options.on_deleted = [service](const std::string& tenant, const std::string& file_id) {
      if (Status forgotten = service->ForgetFile(tenant, file_id); !forgotten.ok()) {
        LOG_WARN("vector stores: forgetting deleted file {}: {}", file_id, forgotten.message());
      }
    };
  }
  Result<std::unique_ptr<api::FilesHttp>> files = api::FilesHttp::Create(*store, options);
  if (!files.ok()) return files.status().WithContext("files");
  runtime->files = std::move(files).value();
  LOG_INFO("Files API at /v1/files: {} (bytes under {}/files{})", store->Describe(), parts.data_dir,
           runtime->envelope ? ", sealed" : "");
  return runtime;
}

void StopDocuments(DocumentsRuntime& runtime) {
  if (runtime.files) runtime.files->Shutdown();
  if (runtime.vector_stores_http) runtime.vector_stores_http->Shutdown();
  runtime.files.reset();
  runtime.vector_stores_http.reset();
  if (runtime.vector_stores) runtime.vector_stores->Stop();  // a file mid-way is given back
  runtime.vector_stores.reset();
}

}  // namespace rampart::app
