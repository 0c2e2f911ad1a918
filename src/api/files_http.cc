#include "api/files_http.h"

#include <algorithm>
#include <charconv>

#include "api/access_http.h"
#include "core/logging.h"
#include "core/trace.h"
#include "crypto/digest.h"
#include "gateway/gateway.h"
#include "gateway/openai_response.h"
#include "json/writer.h"
#include "net/multipart.h"

namespace rampart::api {
namespace {

constexpr std::string_view kCreate = "files:create";
constexpr std::string_view kRead = "files:read";
constexpr std::string_view kDelete = "files:delete";
constexpr std::string_view kAnonymousTenant = "default";
// Room for the multipart framing around the file's content (boundaries, part heads, purpose).
constexpr uint64_t kFramingAllowance = 64 * 1024;
constexpr size_t kMaxPurposeBytes = 64;

// The purposes OpenAI's Files API accepts.
bool KnownPurpose(std::string_view purpose) {
  for (std::string_view known :
       {"assistants", "batch", "fine-tune", "vision", "user_data", "evals"}) {
    if (purpose == known) return true;
  }
  return false;
}

net::HttpResponse Answer(const std::string& request_id, int status, std::string body) {
  net::HttpResponse response;
  response.status = status;
  response.headers.emplace_back("x-request-id", request_id);
  response.body = std::move(body);
  return response;
}

net::HttpResponse Error(const std::string& request_id, int status, std::string_view message,
                        std::string_view param = {}) {
  return Answer(request_id, status,
                gateway::ErrorJson(message, gateway::ErrorType(status), param, {}));
}

net::HttpResponse ErrorOf(const std::string& request_id, const Status& status,
                          std::string_view param = {}) {
  return Error(request_id, gateway::HttpStatusOf(status), status.message(), param);
}

net::HttpResponse NoSuchFile(const std::string& request_id, std::string_view id) {
  return Error(request_id, 404, fmt::format("No such File object: {}", id), "id");
}

void WriteFile(json::Writer& writer, const store::StoredFile& file) {
  writer.StartObject();
  writer.Key("id");
  writer.String(file.id);
  writer.Key("object");
  writer.String("file");
  writer.Key("bytes");
  writer.Int64(file.bytes);
  writer.Key("created_at");
  writer.Int64(file.created_unix);
  writer.Key("filename");
  writer.String(file.filename);
  writer.Key("purpose");
  writer.String(file.purpose);
  writer.Key("status");
  writer.String("processed");
  writer.Key("status_details");
  writer.Null();
  writer.EndObject();
}

std::string FileJson(const store::StoredFile& file) {
  json::Writer writer;
  WriteFile(writer, file);
  return writer.Take();
}

// "file-" and 24 of [0-9a-z], uniformly.
std::string NewFileId() {
  static constexpr std::string_view kAlphabet = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string id = "file-";
  while (id.size() < 29) {
    for (unsigned char byte : crypto::RandomBytes(32)) {
      if (byte >= 252) continue;  // 252 = 7 * 36: keeps the draw uniform
      id += kAlphabet[byte % 36];
      if (id.size() == 29) break;
    }
  }
  return id;
}

// The value of `name` in a query string (no percent-decoding: the values this API takes are
// ids, purposes, numbers and orders), or nullopt.
std::optional<std::string_view> QueryValue(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    const size_t end = query.find('&');
    const std::string_view pair = query.substr(0, end);
    const size_t equals = pair.find('=');
    if (pair.substr(0, equals) == name) {
      return equals == std::string_view::npos ? std::string_view() : pair.substr(equals + 1);
    }
    if (end == std::string_view::npos) break;
    query.remove_prefix(end + 1);
  }
  return std::nullopt;
}

// A whole body handed over as one piece (requests the server read whole: HTTPS).
class WholeBodyReader final : public net::BodyReader {
 public:
  explicit WholeBodyReader(std::string body) : body_(std::move(body)) {}
  void Next(Callback callback) override {
    if (step_ == 0 && !body_.empty()) {
      step_ = 1;
      callback(std::move(body_));
    } else if (step_ <= 1) {
      step_ = 2;
      callback(std::string());
    } else {
      callback(FailedPrecondition("the request body has ended"));
    }
  }

 private:
  std::string body_;
  int step_ = 0;
};

}  // namespace

// One upload: the body's pieces go to the multipart parser on a worker, the file's content to
// FileStorage; the next piece is asked for once this one is written.
class FilesHttp::Upload final : public net::MultipartSink,
                                public std::enable_shared_from_this<Upload> {
 public:
  Upload(FilesHttp& files, SerialWorker& worker, std::string tenant, std::string request_id,
         std::shared_ptr<RecordedResponder> responder, std::shared_ptr<net::BodyReader> reader,
         std::string_view boundary)
      : files_(files),
        worker_(worker),
        tenant_(std::move(tenant)),
        request_id_(std::move(request_id)),
        id_(NewFileId()),
        responder_(std::move(responder)),
        reader_(std::move(reader)),
        parser_(boundary, *this) {}

  void Ask() {
    reader_->Next([self = shared_from_this()](Result<std::string> piece) mutable {
      // On the connection's I/O thread: the disk is the worker's.
      SerialWorker& worker = self->worker_;
      auto held = std::make_shared<Result<std::string>>(std::move(piece));
      const Status posted = worker.Post([self, held] { self->Take(std::move(*held)); });
      if (!posted.ok()) self->Fail(Unavailable("the server is busy; retry later"));
    });
  }

  Status OnPart(const net::MultipartPartHead& head) override {
    if (head.name == "file") {
      if (writer_) return InvalidArgument("more than one 'file' part");
      if (!head.has_filename || head.filename.empty()) {
        param_ = "file";
        return InvalidArgument("the 'file' part has no filename");
      }
      filename_ = head.filename;
      ASSIGN_OR_RETURN(writer_, files_.storage_.Create(tenant_, id_));
      part_ = Part::kFile;
    } else if (head.name == "purpose") {
      purpose_.clear();
      has_purpose_ = true;
      part_ = Part::kPurpose;
    } else {
      part_ = Part::kOther;  // read and dropped
    }
    return Status::Ok();
  }

  Status OnData(std::string_view bytes) override {
    if (part_ == Part::kFile) {
      if (bytes.size() > files_.options_.max_bytes - writer_->bytes()) {
        return PayloadTooLarge("the file is over the {} byte limit (--files-max-bytes)",
                               files_.options_.max_bytes);
      }
      return writer_->Write(bytes);
    }
    if (part_ == Part::kPurpose) {
      if (purpose_.size() + bytes.size() > kMaxPurposeBytes) {
        param_ = "purpose";
        return InvalidArgument("'purpose' is over {} bytes", kMaxPurposeBytes);
      }
      purpose_.append(bytes);
    }
    return Status::Ok();
  }

  Status OnPartEnd() override {
    part_ = Part::kNone;
    return Status::Ok();
  }

 private:
  enum class Part { kNone, kFile, kPurpose, kOther };

  void Take(Result<std::string> piece) {
    if (!piece.ok()) {
      Fail(piece.status());
      return;
    }
    if (piece->empty()) {
      Finish();
      return;
    }
    if (Status fed = parser_.Feed(*piece); !fed.ok()) {
      Fail(fed);
      return;
    }
    Ask();
  }

  void Finish() {
    if (Status finished = parser_.Finish(); !finished.ok()) {
      Fail(finished);
      return;
    }
    if (!writer_) {
      param_ = "file";
      Fail(InvalidArgument("missing required parameter: 'file'"));
      return;
    }
    if (!has_purpose_ || purpose_.empty()) {
      param_ = "purpose";
      Fail(InvalidArgument("missing required parameter: 'purpose'"));
      return;
    }
    if (!KnownPurpose(purpose_)) {
      param_ = "purpose";
      Fail(
          InvalidArgument("'{}' is not a valid purpose: use assistants, batch, fine-tune, "
                          "vision, user_data or evals",
                          purpose_));
      return;
    }
    const store::StoredFile file{.tenant = tenant_,
                                 .id = id_,
                                 .filename = filename_,
                                 .purpose = purpose_,
                                 .bytes = static_cast<int64_t>(writer_->bytes()),
                                 .created_unix = 0,
                                 .sealing = files_.storage_.sealing()};
    if (Status committed = writer_->Commit(); !committed.ok()) {
      Fail(committed);
      return;
    }
    writer_.reset();
    if (Status created = files_.store_.CreateFile(file); !created.ok()) {
      (void)files_.storage_.Remove(id_);
      Fail(created);
      return;
    }
    Result<std::optional<store::StoredFile>> stored = files_.store_.GetFile(tenant_, id_);
    responder_->Send(
        Answer(request_id_, 200, FileJson(stored.ok() && stored->has_value() ? **stored : file)));
  }

  void Fail(const Status& error) {
    writer_.reset();  // removes the part file
    if (error.code() == StatusCode::kInternal)
      LOG_WARN("files: upload failed: {}", error.message());
    responder_->Send(ErrorOf(request_id_, error, param_));
  }

  FilesHttp& files_;
  SerialWorker& worker_;
  const std::string tenant_;
  const std::string request_id_;
  const std::string id_;
  std::shared_ptr<RecordedResponder> responder_;
  std::shared_ptr<net::BodyReader> reader_;
  net::MultipartParser parser_;
  std::unique_ptr<FileWriter> writer_;
  Part part_ = Part::kNone;
  std::string filename_;
  std::string purpose_;
  bool has_purpose_ = false;
  std::string param_;  // the request parameter an error names
};

Result<std::unique_ptr<FilesHttp>> FilesHttp::Create(store::Store& store, FilesOptions options) {
  if (options.envelope != nullptr && options.seal_key.empty()) {
    return InvalidArgument("sealing files needs a keyring key name");
  }
  std::unique_ptr<FilesHttp> files(new FilesHttp(store, std::move(options)));
  RETURN_IF_ERROR(files->storage_.Prepare());
  return files;
}

FilesHttp::FilesHttp(store::Store& store, FilesOptions options)
    : store_(store),
      options_(std::move(options)),
      storage_(options_.dir, options_.envelope, options_.seal_key) {
  for (size_t i = 0; i < std::max<size_t>(1, options_.workers); ++i) {
    workers_.push_back(std::make_unique<SerialWorker>("files", /*max_queued=*/1024));
  }
}

void FilesHttp::Shutdown() {
  for (auto& worker : workers_) worker->Stop();
}

std::vector<std::string_view> FilesHttp::Actions() { return {kCreate, kRead, kDelete}; }

uint64_t FilesHttp::StreamedBodyLimit(const net::HttpRequest& head) const {
  if (head.method != "POST" || head.path() != "/v1/files") return 0;
  return options_.max_bytes + kFramingAllowance;
}

SerialWorker& FilesHttp::Worker() {
  return *workers_[next_worker_.fetch_add(1, std::memory_order_relaxed) % workers_.size()];
}

RecordedResponder FilesHttp::Recorded(const net::HttpRequest& request, net::Responder responder,
                                      std::string_view action, std::string_view resource,
                                      std::string& request_id) {
  const TraceContext trace = TraceContext::Start();
  request_id = gateway::RequestId(request, trace);
  if (options_.audit == nullptr) return RecordedResponder(std::move(responder));
  return RecordedResponder(
      std::move(responder), options_.audit,
      StartRecord(request, "files", trace.TraceId(), request_id, action, "file", resource),
      request.received);
}

std::optional<std::string> FilesHttp::Check(const net::HttpRequest& request,
                                            RecordedResponder& responder, std::string_view action,
                                            std::string_view resource) {
  if (!Enforcing(options_.access)) return std::string(kAnonymousTenant);
  const policy::Resource target{.type = "file", .name = resource};
  audit::AuditRecord* record = responder.record();
  policy::AccessOutcome outcome =
      record != nullptr ? CheckRecorded(*options_.access, request, action, target, 0, *record)
                        : CheckRequest(*options_.access, request, action, target);
  if (auto* refusal = std::get_if<policy::AccessRefusal>(&outcome)) {
    responder.Send(RefusalResponse(*refusal, request, ErrorShape::kOpenAi));
    return std::nullopt;
  }
  auto& grant = std::get<policy::AccessGrant>(outcome);
  responder.SetFull(grant.HasObligation(policy::kObligationAuditFull));
  return grant.identity.tenant.empty() ? std::string(kAnonymousTenant) : grant.identity.tenant;
}

void FilesHttp::OnWorker(std::shared_ptr<RecordedResponder> responder,
                         const net::HttpRequest& request, UniqueFunction<void()> task) {
  if (!Worker().Post(std::move(task)).ok()) {
    responder->Send(Error(gateway::RequestId(request, TraceContext::Start()), 503,
                          "the server is busy; retry later"));
  }
}

void FilesHttp::Handle(net::HttpRequest&& request, net::Responder responder) {
  const std::string_view path = request.path();
  if (path == "/v1/files") {
    if (request.method == "POST") {
      Create(std::move(request), std::move(responder));
    } else if (request.method == "GET") {
      List(std::move(request), std::move(responder));
    } else {
      responder.Send(Error(gateway::RequestId(request, TraceContext::Start()), 405,
                           "use GET or POST /v1/files"));
    }
    return;
  }
  std::string_view rest = path.substr(std::string_view("/v1/files/").size());
  const bool content = rest.size() > 8 && rest.substr(rest.size() - 8) == "/content";
  if (content) rest.remove_suffix(8);
  std::string id(rest);
  if (id.empty() || id.find('/') != std::string::npos) {
    responder.Send(Error(gateway::RequestId(request, TraceContext::Start()), 404,
                         fmt::format("no route for {} {}", request.method, path)));
    return;
  }
  if (content && request.method == "GET") {
    Content(std::move(request), std::move(responder), std::move(id));
  } else if (!content && request.method == "GET") {
    Retrieve(std::move(request), std::move(responder), std::move(id));
  } else if (!content && request.method == "DELETE") {
    Delete(std::move(request), std::move(responder), std::move(id));
  } else {
    responder.Send(
        Error(gateway::RequestId(request, TraceContext::Start()), 405,
              content ? "use GET /v1/files/{id}/content" : "use GET or DELETE /v1/files/{id}"));
  }
}

void FilesHttp::Create(net::HttpRequest&& request, net::Responder responder) {
  std::string request_id;
  auto recorded = std::make_shared<RecordedResponder>(
      Recorded(request, std::move(responder), kCreate, "*", request_id));
  std::optional<std::string> tenant = Check(request, *recorded, kCreate, "*");
  if (!tenant) return;
  Result<std::string> boundary =
      net::MultipartParser::BoundaryOf(request.Header("content-type").value_or(""));
  if (!boundary.ok()) {
    recorded->Send(Error(request_id, 400, boundary.status().message()));
    return;
  }
  std::shared_ptr<net::BodyReader> reader = request.body_reader;
  if (!reader) {
    if (request.body.size() > options_.max_bytes + kFramingAllowance) {
      recorded->Send(Error(request_id, 413,
                           fmt::format("the file is over the {} byte limit (--files-max-bytes)",
                                       options_.max_bytes)));
      return;
    }
    reader = std::make_shared<WholeBodyReader>(std::move(request.body));
  }
  auto upload = std::make_shared<Upload>(*this, Worker(), std::move(*tenant), request_id,
                                         std::move(recorded), std::move(reader), *boundary);
  upload->Ask();
}

void FilesHttp::List(net::HttpRequest&& request, net::Responder responder) {
  std::string request_id;
  auto recorded = std::make_shared<RecordedResponder>(
      Recorded(request, std::move(responder), kRead, "*", request_id));
  std::optional<std::string> tenant = Check(request, *recorded, kRead, "*");
  if (!tenant) return;
  store::FileQuery query{.tenant = std::move(*tenant), .limit = 10000};
  const std::string_view parameters = request.query();
  if (auto limit = QueryValue(parameters, "limit")) {
    int64_t value = 0;
    const auto [end, error] = std::from_chars(limit->data(), limit->data() + limit->size(), value);
    if (error != std::errc() || end != limit->data() + limit->size() || value < 1 ||
        value > 10000) {
      recorded->Send(Error(request_id, 400, "'limit' must be an integer from 1 to 10000", "limit"));
      return;
    }
    query.limit = value;
  }
  if (auto order = QueryValue(parameters, "order")) {
    if (*order != "asc" && *order != "desc") {
      recorded->Send(Error(request_id, 400, "'order' must be asc or desc", "order"));
      return;
    }
    query.descending = *order == "desc";
  }
  if (auto after = QueryValue(parameters, "after")) query.after = std::string(*after);
  if (auto purpose = QueryValue(parameters, "purpose")) query.purpose = std::string(*purpose);
  OnWorker(recorded, request, [this, recorded, request_id, query]() mutable {
    const int64_t limit = query.limit;
    query.limit = std::min<int64_t>(limit + 1, 10000);
    Result<std::vector<store::StoredFile>> files = store_.ListFiles(query);
    if (!files.ok()) {
      recorded->Send(ErrorOf(request_id, files.status()));
      return;
    }
    const bool has_more = static_cast<int64_t>(files->size()) > limit;
    if (has_more) files->resize(static_cast<size_t>(limit));
    json::Writer writer;
    writer.StartObject();
    writer.Key("object");
    writer.String("list");
    writer.Key("data");
    writer.StartArray();
    for (const store::StoredFile& file : *files) WriteFile(writer, file);
    writer.EndArray();
    writer.Key("first_id");
    if (files->empty()) {
      writer.Null();
    } else {
      writer.String(files->front().id);
    }
    writer.Key("last_id");
    if (files->empty()) {
      writer.Null();
    } else {
      writer.String(files->back().id);
    }
    writer.Key("has_more");
    writer.Bool(has_more);
    writer.EndObject();
    recorded->Send(Answer(request_id, 200, writer.Take()));
  });
}

void FilesHttp::Retrieve(net::HttpRequest&& request, net::Responder responder, std::string id) {
  std::string request_id;
  auto recorded = std::make_shared<RecordedResponder>(
      Recorded(request, std::move(responder), kRead, id, request_id));
  std::optional<std::string> tenant = Check(request, *recorded, kRead, id);
  if (!tenant) return;
  OnWorker(recorded, request, [this, recorded, request_id, tenant = *tenant, id] {
    Result<std::optional<store::StoredFile>> file = store_.GetFile(tenant, id);
    if (!file.ok()) {
      recorded->Send(ErrorOf(request_id, file.status()));
    } else if (!file->has_value()) {
      recorded->Send(NoSuchFile(request_id, id));
    } else {
      recorded->Send(Answer(request_id, 200, FileJson(**file)));
    }
  });
}

namespace {

// A file's content on its way out: a piece read on the worker, written to the stream; when the
// stream is full, the next read waits for it to drain.
struct Download : std::enable_shared_from_this<Download> {
  SerialWorker* worker = nullptr;
  std::unique_ptr<FileReader> reader;
  net::StreamWriter writer;

  void Pump() {
    while (true) {
      Result<std::string> piece = reader->Next();
      if (!piece.ok()) {
        LOG_WARN("files: reading content failed: {}", piece.status().message());
        writer.Abort();
        return;
      }
      if (piece->empty()) {
        writer.Finish();
        return;
      }
      const net::StreamWriter::WriteResult written = writer.Write(std::move(*piece));
      if (written == net::StreamWriter::kClosed) return;
      if (written == net::StreamWriter::kFull) {
        writer.OnDrained([self = shared_from_this()] {
          if (!self->worker->Post([self] { self->Pump(); }).ok()) self->writer.Abort();
        });
        return;
      }
    }
  }
};

}  // namespace

void FilesHttp::Content(net::HttpRequest&& request, net::Responder responder, std::string id) {
  std::string request_id;
  auto recorded = std::make_shared<RecordedResponder>(
      Recorded(request, std::move(responder), kRead, id, request_id));
  std::optional<std::string> tenant = Check(request, *recorded, kRead, id);
  if (!tenant) return;
  SerialWorker& worker = Worker();
  const Status posted = worker.Post([this, &worker, recorded, request_id, tenant = *tenant, id] {
    Result<std::optional<store::StoredFile>> file = store_.GetFile(tenant, id);
    if (!file.ok()) {
      recorded->Send(ErrorOf(request_id, file.status()));
      return;
    }
    if (!file->has_value()) {
      recorded->Send(NoSuchFile(request_id, id));
      return;
    }
    Result<std::unique_ptr<FileReader>> reader = storage_.Open(tenant, id, (*file)->sealing);
    if (!reader.ok()) {
      LOG_WARN("files: {}", reader.status().message());
      recorded->Send(ErrorOf(request_id, reader.status()));
      return;
    }
    auto download = std::make_shared<Download>();
    download->worker = &worker;
    download->reader = std::move(reader).value();
    net::HttpResponseHead head;
    head.status = 200;
    head.content_type = "application/octet-stream";
    head.headers.emplace_back("x-request-id", request_id);
    download->writer = recorded->StartStream(std::move(head));
    download->Pump();
  });
  if (!posted.ok()) recorded->Send(Error(request_id, 503, "the server is busy; retry later"));
}

void FilesHttp::Delete(net::HttpRequest&& request, net::Responder responder, std::string id) {
  std::string request_id;
  auto recorded = std::make_shared<RecordedResponder>(
      Recorded(request, std::move(responder), kDelete, id, request_id));
  std::optional<std::string> tenant = Check(request, *recorded, kDelete, id);
  if (!tenant) return;
  OnWorker(recorded, request, [this, recorded, request_id, tenant = *tenant, id] {
    const Status deleted = store_.DeleteFile(tenant, id);
    if (deleted.code() == StatusCode::kNotFound) {
      recorded->Send(NoSuchFile(request_id, id));
      return;
    }
    if (!deleted.ok()) {
      recorded->Send(ErrorOf(request_id, deleted));
      return;
    }
    // The metadata went first: a crash here leaves bytes no one can name, never a file
    // listed without its bytes.
    if (Status removed = storage_.Remove(id); !removed.ok()) {
      LOG_WARN("files: {}", removed.message());
    }
    if (options_.on_deleted) options_.on_deleted(tenant, id);
    json::Writer writer;
    writer.StartObject();
    writer.Key("id");
    writer.String(id);
    writer.Key("object");
    writer.String("file");
    writer.Key("deleted");
    writer.Bool(true);
    writer.EndObject();
    recorded->Send(Answer(request_id, 200, writer.Take()));
  });
}

}  // namespace rampart::api
