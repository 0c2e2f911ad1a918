#pragma once

// The OpenAI Files API under /v1/files on the HTTP listener (docs/knowledge-hub.md, "Files API"):
//
//   POST   /v1/files                multipart/form-data: `file` (with its filename), `purpose`
//   GET    /v1/files                ?limit (1-10000, default 10000)&after&order (asc|desc)&purpose
//   GET    /v1/files/{id}           the file object
//   GET    /v1/files/{id}/content   its bytes (application/octet-stream)
//   DELETE /v1/files/{id}           {id, object:"file", deleted:true}
//
// A file is {id:"file-...", object:"file", bytes, created_at, filename, purpose,
// status:"processed"}. Errors use OpenAI's body; unknown ids (and other tenants' files) are 404.
//
// Uploads stream: POST /v1/files takes its body in pieces (StreamedBodyLimit, for
// net::HttpServerOptions::streamed_body), parses the multipart body as it comes and writes the
// file's content to disk on a worker thread (FileStorage), never holding the file in memory;
// the connection reads the next piece only after the last was written. Over max_bytes is 413,
// and a client that goes away mid-upload leaves no file behind. (Over HTTPS the server reads
// bodies whole, so uploads there are bounded by the server's max_body_bytes.)
//
// Deleting a file calls FilesOptions::on_deleted (the vector stores forget it).
//
// Files belong to the caller's tenant (anonymous callers: "default"). Access control actions
// files:create, files:read (list, retrieve, content) and files:delete on resource type "file"
// named by the id ("*" for create and list); one audit record per request (api "files").
//
// Threads: Handle runs on an I/O thread and never blocks: the store and the disk are used on
// the front end's workers.

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "api/audit_http.h"
#include "audit/sink.h"
#include "core/serial_worker.h"
#include "knowledge/hub/file_storage.h"
#include "net/http_server.h"
#include "policy/access.h"
#include "store/store.h"

namespace rampart::api {

using knowledge::hub::FileReader;
using knowledge::hub::FileStorage;
using knowledge::hub::FileWriter;

struct FilesOptions {
  std::string dir;                                // where the bytes go: <data-dir>/files
  uint64_t max_bytes = uint64_t{512} << 20;       // a file's content, at most
  const crypto::Envelope* envelope = nullptr;     // seal the bytes at rest when set ...
  std::string seal_key;                           // ... under this keyring key
  const policy::AccessControl* access = nullptr;  // null: open
  audit::AuditSink* audit = nullptr;              // null: nothing recorded
  size_t workers = 4;                             // threads for the disk and the store
  // Told (on a worker thread, after the answer is decided) that a file was deleted, so that
  // what was built from it goes too (the vector stores' ForgetFile). Unset: nothing.
  std::function<void(const std::string& tenant, const std::string& file_id)> on_deleted;
};

class FilesHttp {
 public:
  // Prepares the directory (FileStorage::Prepare). `store` must outlive the front end.
  static Result<std::unique_ptr<FilesHttp>> Create(store::Store& store, FilesOptions options);
  ~FilesHttp() { Shutdown(); }

  static bool Owns(std::string_view path) {
    return path == "/v1/files" || path.substr(0, 10) == "/v1/files/";
  }
  static std::vector<std::string_view> Actions();
  // The body limit for net::HttpServerOptions::streamed_body: POST /v1/files streams (its
  // content's limit plus room for the multipart framing); every other request 0.
  uint64_t StreamedBodyLimit(const net::HttpRequest& head) const;

  void Handle(net::HttpRequest&& request, net::Responder responder);
  // Finishes the work queued and stops the workers.
  void Shutdown();

 private:
  FilesHttp(store::Store& store, FilesOptions options);
  class Upload;

  // `responder`, recording the request (api "files") when there is an audit log; sets
  // `request_id` to the request's id (x-request-id, or a new one), for answers and the record.
  RecordedResponder Recorded(const net::HttpRequest& request, net::Responder responder,
                             std::string_view action, std::string_view resource,
                             std::string& request_id);
  // The caller's tenant once allowed `action`, or nullopt once the refusal was answered.
  std::optional<std::string> Check(const net::HttpRequest& request, RecordedResponder& responder,
                                   std::string_view action, std::string_view resource);
  SerialWorker& Worker();
  // Runs `task` on a worker; answers 503 through `responder` when the workers are full.
  void OnWorker(std::shared_ptr<RecordedResponder> responder, const net::HttpRequest& request,
                UniqueFunction<void()> task);

  void Create(net::HttpRequest&& request, net::Responder responder);
  void List(net::HttpRequest&& request, net::Responder responder);
  void Retrieve(net::HttpRequest&& request, net::Responder responder, std::string id);
  void Content(net::HttpRequest&& request, net::Responder responder, std::string id);
  void Delete(net::HttpRequest&& request, net::Responder responder, std::string id);

  store::Store& store_;
  const FilesOptions options_;
  FileStorage storage_;
  std::vector<std::unique_ptr<SerialWorker>> workers_;
  std::atomic<size_t> next_worker_{0};
};

}  // namespace rampart::api
