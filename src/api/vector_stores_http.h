#pragma once

// OpenAI's Vector Stores API under /v1/vector_stores on the HTTP listener
// (docs/knowledge-hub.md, "Vector Stores API"), over the hub's VectorStores service:
//
//   POST   /v1/vector_stores                               create vector_stores:create GET
//   /v1/vector_stores                               list                 vector_stores:read GET
//   /v1/vector_stores/{id}                          retrieve             vector_stores:read POST
//   /v1/vector_stores/{id}                          modify               vector_stores:update
//   DELETE /v1/vector_stores/{id}                          delete vector_stores:delete POST
//   /v1/vector_stores/{id}/files                    add a file           vector_stores:update GET
//   /v1/vector_stores/{id}/files                    list (?filter=)      vector_stores:read GET
//   /v1/vector_stores/{id}/files/{file_id}          retrieve             vector_stores:read POST
//   /v1/vector_stores/{id}/files/{file_id}          update attributes    vector_stores:update
//   DELETE /v1/vector_stores/{id}/files/{file_id}          remove vector_stores:update GET
//   /v1/vector_stores/{id}/files/{file_id}/content  its chunks           vector_stores:read POST
//   /v1/vector_stores/{id}/file_batches             create a batch       vector_stores:update GET
//   /v1/vector_stores/{id}/file_batches/{batch_id}  retrieve             vector_stores:read POST
//   .../file_batches/{batch_id}/cancel              cancel               vector_stores:update GET
//   .../file_batches/{batch_id}/files               its files            vector_stores:read POST
//   /v1/vector_stores/{id}/search                   search               vector_stores:search
//
// Every action is on the resource {type: "vector_store", name: <id>} ("*" for create and list).
// A search also applies per-document access: a file of the store takes part only when the
// caller may `files:read` the resource {type: "file", name: <file id>, attributes: the file's
// attributes as strings}, decided once per file per search, inside the service's indexes, so a
// refused file yields no hit, score or count. The same decision hides a file from the store's
// file list, and answers 404 for its retrieval and content. Stores belong to the caller's tenant
// (anonymous callers: "default"); another tenant's store is 404 like an unknown id. When the grant
// for adding files (create with file_ids, add a file, create a batch) carries the obligation
// `redact:pii`, those files are added with redact_pii: their text is redacted by the guard at
// ingestion, before chunking and embedding.
//
// Answers are OpenAI's objects and errors ({"error":{message,type,param,code}}, `param` naming
// the offending field of a bad body), each with x-request-id.
//
// Threads: Handle runs on an HTTP I/O thread and never blocks. Each request goes to a pool of
// worker threads (a bounded queue: 429 when full), which checks access first (a bad body from an
// unknown caller is 401), parses the body and calls the service. One audit record per request
// (api "vector_stores") when there is an audit log.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "api/audit_http.h"
#include "audit/sink.h"
#include "core/worker_pool.h"
#include "knowledge/hub/vector_stores.h"
#include "net/http_server.h"
#include "policy/access.h"

namespace rampart::api {

struct VectorStoresHttpOptions {
  size_t worker_threads = 4;
  size_t max_queued_requests = 256;  // more are answered 429
  // Null: open. Must outlive the front end.
  const policy::AccessControl* access = nullptr;
  // Null: nothing recorded. Must outlive the front end.
  audit::AuditSink* audit = nullptr;
};

class VectorStoresHttp {
 public:
  // `service` must outlive the front end (Shutdown first).
  VectorStoresHttp(knowledge::hub::VectorStores& service, VectorStoresHttpOptions options);
  ~VectorStoresHttp() { Shutdown(); }

  static bool Owns(std::string_view path) {
    return path == "/v1/vector_stores" || path.starts_with("/v1/vector_stores/");
  }
  // Every policy action it decides (docs/access.md), files:read included (per document).
  static std::vector<std::string_view> Actions();

  void Handle(net::HttpRequest&& request, net::Responder responder);
  // Runs the requests already queued and stops the workers; later requests are answered 503.
  void Shutdown() { workers_.Stop(); }

 private:
  enum class Operation {
    kCreateStore,
    kListStores,
    kGetStore,
    kModifyStore,
    kDeleteStore,
    kAddFile,
    kListFiles,
    kGetFile,
    kUpdateFile,
    kRemoveFile,
    kFileContent,
    kCreateBatch,
    kGetBatch,
    kCancelBatch,
    kListBatchFiles,
    kSearch,
  };
  struct Call {
    Operation operation;
    std::string_view action;
    std::string store;  // empty for create and list
    std::string item;   // the file or batch id
  };
  // The caller once allowed: its tenant, its identity when access is enforced, and whether its
  // grant carries redact:pii (the files it adds are then redacted at ingestion).
  struct Caller {
    std::string tenant;
    std::optional<identity::Identity> identity;
    bool redact_pii = false;
  };

  // Runs on a worker thread.
  void Run(const Call& call, const net::HttpRequest& request, RecordedResponder& responder,
           const std::string& request_id);
  std::optional<Caller> Check(const net::HttpRequest& request, RecordedResponder& responder,
                              const Call& call, const std::string& request_id);
  void Search(const Call& call, const Caller& caller, const net::HttpRequest& request,
              RecordedResponder& responder, const std::string& request_id);

  knowledge::hub::VectorStores& service_;
  const VectorStoresHttpOptions options_;
  WorkerPool workers_;
};

}  // namespace rampart::api
