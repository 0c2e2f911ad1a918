#pragma once

// Pinecone's control and data planes on the HTTP(S) listener, under /pinecone
// (docs/vector-indexes.md, "The Pinecone API"):
//
//   POST   /pinecone/indexes                      create (201 with the description)  index:create
//   GET    /pinecone/indexes                      {"indexes":[...]}, those readable  index:read
//   GET    /pinecone/indexes/<name>               describe                           index:read
//   DELETE /pinecone/indexes/<name>               delete (202)                       index:delete
//   POST   /pinecone/indexes/<name>/vectors/upsert                                   vectors:write
//   POST   /pinecone/indexes/<name>/vectors/update                                   vectors:write
//   POST   /pinecone/indexes/<name>/vectors/delete                                   vectors:write
//   POST   /pinecone/indexes/<name>/query                                            vectors:read
//   GET    /pinecone/indexes/<name>/vectors/fetch?ids=..&namespace=..                vectors:read
//   GET    /pinecone/indexes/<name>/vectors/list?prefix=..&limit=..&paginationToken=..
//                                                                                    vectors:read
//   GET|POST /pinecone/indexes/<name>/describe_index_stats                           index:read
//
// Every action is on the resource {type: "index", name: <name>}. An index's description gives
// its data plane's address as `host`, with its scheme: the configured public URL, else the
// request's Host header, followed by /pinecone/indexes/<name>; Pinecone's clients send each data
// plane call to <host>/<path>.
//
// Errors use Pinecone's body {"code","message","details":[]} (pinecone_codec.h's statuses).
//
// Threads: Handle runs on an HTTP I/O thread and never blocks. Each request is handed to a small
// pool of worker threads (a bounded queue: 429 when it is full), which checks access (the caller
// is authenticated before anything else is looked at), parses the body, and then either reads
// (searches block for milliseconds) or hands a write to the index, whose callback answers once
// the write is durable. Every request yields one audit record (api "pinecone") when there is an
// audit log.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "api/audit_http.h"
#include "audit/sink.h"
#include "core/worker_pool.h"
#include "knowledge/index/backend.h"
#include "net/http_server.h"
#include "policy/access.h"

namespace rampart::api {

struct PineconeHttpOptions {
  // The server's address as clients reach it ("https://vectors.example.com"), for the `host` of
  // index descriptions; empty: the request's Host header, with https when `tls`.
  std::string public_url;
  bool tls = false;
  // Defaults of a new index's engine (its dimension and metric come from the request).
  knowledge::EngineOptions engine_defaults;
  size_t worker_threads = 4;
  size_t max_queued_requests = 256;  // more are answered 429
  // Null: open. Must outlive the front end.
  const policy::AccessControl* access = nullptr;
  // Null: nothing recorded. Must outlive the front end.
  audit::AuditSink* audit = nullptr;
};

class PineconeHttp {
 public:
  // `catalog` must outlive the front end (Shutdown first).
  PineconeHttp(knowledge::IndexCatalog& catalog, PineconeHttpOptions options);
  ~PineconeHttp() { Shutdown(); }

  // Whether `path` is this front end's (/pinecone and below).
  static bool Owns(std::string_view path);
  // Every policy action it decides (docs/access.md).
  static std::vector<std::string_view> Actions();

  void Handle(net::HttpRequest&& request, net::Responder responder);
  // Runs the requests already queued and stops the workers; writes handed to an index answer
  // from its own thread when they are durable. Later requests are answered 503.
  void Shutdown() { workers_.Stop(); }

 private:
  enum class Operation {
    kCreate,
    kList,
    kDescribe,
    kDeleteIndex,
    kConfigure,
    kUpsert,
    kUpdate,
    kDelete,
    kQuery,
    kFetch,
    kListIds,
    kStats,
  };
  struct Call {
    Operation operation;
    std::string index;  // empty for create and list
  };

  // Runs on a worker thread.
  void Run(Call call, const net::HttpRequest& request, RecordedResponder responder);
  // Checks `action` on the index; false once the refusal was answered.
  bool Allowed(const net::HttpRequest& request, RecordedResponder& responder,
               std::string_view action, std::string_view index);
  void Create(const net::HttpRequest& request, RecordedResponder responder);
  void List(const net::HttpRequest& request, RecordedResponder responder);
  void DataPlane(Call call, const net::HttpRequest& request, RecordedResponder responder);
  // The data plane's address of index `name`, as its description gives it.
  std::string HostOf(const net::HttpRequest& request, std::string_view name) const;

  knowledge::IndexCatalog& catalog_;
  const PineconeHttpOptions options_;
  WorkerPool workers_;
};

}  // namespace rampart::api
