#include "api/kserve_grpc_calls.h"

#include <deque>
#include <memory>
#include <optional>
#include <utility>

#include "api/kserve_grpc.h"
#include "api/kserve_grpc_access.h"
#include "api/kserve_grpc_audit.h"
#include "api/kserve_grpc_codec.h"
#include "core/clock.h"
#include "core/exceptions.h"
#include "core/trace.h"

namespace rampart::api::grpc_calls {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;
using inference::ModelStreamInferResponse;
using InferResult = Result<std::unique_ptr<serve::InferResponse>>;

// Decodes; an exception (running out of memory) becomes a Status (core/exceptions.h): none may
// reach gRPC.
Result<std::unique_ptr<serve::InferRequest>> SafeDecode(ModelInferRequest& request) {
  return CatchAsStatus("decoding the infer request", [&] { return DecodeInferRequest(request); });
}

// Fills `out` from a completed request; the status the call or stream entry ends with.
Status SafeEncode(InferResult& result, ModelInferResponse& out) {
  if (!result.ok()) return result.status();
  return CatchAsStatus("encoding the infer response", [&] {
    EncodeInferResponse(**result, out);
    return Status::Ok();
  });
}

// One ModelInfer call; lives from the handler until gRPC calls OnDone (after Finish).
class InferCall final : public grpc::ServerUnaryReactor {
 public:
  explicit InferCall(CallShared& shared) : shared_(shared) {}

  void OnCancel() override {
    cancelled_->store(true, std::memory_order_relaxed);
    shared_.cancelled_calls.fetch_add(1, std::memory_order_relaxed);
  }
  void OnDone() override { delete this; }

  std::shared_ptr<const std::atomic<bool>> cancelled() const { return cancelled_; }

 private:
  CallShared& shared_;
  const std::shared_ptr<std::atomic<bool>> cancelled_ = std::make_shared<std::atomic<bool>>(false);
};

}  // namespace

// One ModelStreamInfer call. Reads requests one after another and hands each to the server
// without waiting for the previous one; responses are written one at a time in request order,
// as Triton writes them for models that are not decoupled (clients that send no `id` match
// answers by position): each request read gets the next slot in answers_, and a slot is written
// once it and every slot before it are filled. The stream finishes once reading has ended
// (client half-close, cancellation or a drain) and every request in flight has been answered
// and its answer written (or dropped, when the stream was cancelled or its write side broke).
//
// StartRead and StartWrite are started under mutex_ (gRPC runs the reactions of a bidi stream on
// its own threads, never inline, so this cannot deadlock), which keeps "finished" and "start
// another operation" from racing. Finish is decided under mutex_ (finished_) but called after it
// is released, as the caller's last step: once Finish is called gRPC may run OnDone, which
// deletes the call, at any time unless the caller is itself a reaction; Respond, on an instance
// thread, is not.
class StreamCall final
    : public grpc::ServerBidiReactor<ModelInferRequest, ModelStreamInferResponse> {
 public:
  // `authorization`, `api_key` and `peer`: what the caller offered when the stream opened
  // (unused when access is open). Each request is authenticated with them again, so a key
  // revoked or a token expiring while the stream is open stops working at its next request.
  StreamCall(CallShared& shared, std::string authorization, std::string api_key, Peer peer)
      : shared_(shared),
        authorization_(std::move(authorization)),
        api_key_(std::move(api_key)),
        peer_(std::move(peer)) {
    const bool registered = shared_.streams.Register(this);
    Progress([&] { stopping_ = !registered; });
  }

  // The server is draining: end the stream once its requests in flight are answered.
  void Stop() {
    Progress([&] { stopping_ = true; });
  }

  void OnReadDone(bool ok) override {
    uint64_t slot = 0;
    bool handle = false;
    Progress([&] {
      // A request that arrives as the stream finishes (a drain raced with it) is dropped: once
      // Finish is called nothing may be handed to the server, whose answer would outlive us.
      if (!ok || finished_) {
        reading_ = false;
        reads_done_ = reads_done_ || !ok;
        return;
      }
      // Counted from here, so the stream cannot finish (and be deleted) while Handle runs or
      // before the server's callback for this request has run.
      ++in_flight_;
      slot = first_slot_ + answers_.size();
      answers_.emplace_back();
      handle = true;
    });
    if (!handle) return;
    // Handle answers the slot itself (now, or from the server's callback); should it throw
    // before the request reached the server, the slot is answered here, so the stream ends.
    if (!RunLoggingExceptions("a gRPC stream", [&] { Handle(slot); })) {
      RunLoggingExceptions("a gRPC stream", [&] {
        Respond(slot, Error(Internal("the request failed (see the server's log)"),
                            request_.model_name(), request_.model_version(), request_.id()));
      });
    }
    Progress([&] { reading_ = false; });
  }

  void OnWriteDone(bool ok) override {
    Progress([&] {
      writing_ = false;
      answers_.pop_front();
      ++first_slot_;
      if (!ok) write_failed_ = true;
    });
  }

  void OnCancel() override {
    cancelled_->store(true, std::memory_order_relaxed);
    shared_.cancelled_calls.fetch_add(1, std::memory_order_relaxed);
    Progress([] {});
  }

  void OnDone() override {
    shared_.streams.Unregister(this);
    delete this;
  }

 private:
  // Decodes request_ and hands it to the server, or answers the error in the stream, into
  // answers_'s `slot`. The request is already counted in in_flight_; Respond uncounts it.
  void Handle(uint64_t slot) {
    const SteadyTime arrival = Clock::Real().Now();
    grpc_audit::GrpcRecord audit(shared_.audit, peer_.address, "ModelStreamInfer",
                                 request_.model_name(), request_.id());
    if (audit.recording()) audit.SetRequestContent(request_.SerializeAsString());
    policy::Reservation reservation;
    std::string tenant;
    if (shared_.access != nullptr && shared_.access->enforcing()) {
      const grpc_access::RpcAction& decided = grpc_access::RpcActionOf("ModelStreamInfer");
      std::optional<policy::AccessRefusal> refusal;
      Result<identity::Identity> identity = shared_.access->Authenticate(identity::Credentials{
          .authorization = authorization_, .api_key = api_key_, .peer = &peer_});
      if (!identity.ok()) refusal = policy::AccessRefusal::Unauthenticated(identity.status());
      if (!refusal) {
        const policy::Decision decision = shared_.access->Authorise(
            *identity, decided.action,
            policy::Resource{.type = decided.resource_type, .name = request_.model_name()},
            peer_.address);
        audit.Note(*identity, decision);
        if (!decision.allowed) refusal = policy::AccessRefusal::Forbidden(decision);
      }
      if (!refusal) {
        tenant = identity->tenant;
        policy::QuotaLedger::Admission admission = shared_.access->Admit(*identity, 0);
        if (!admission.admitted()) refusal = policy::AccessRefusal::Quota(*admission.refusal);
        reservation = std::move(admission.reservation);
      }
      if (refusal) {
        const std::string request_id =
            request_.id().empty() ? "req_" + TraceContext::Start().TraceId() : request_.id();
        const Status refused(refusal->ToStatus().code(), refusal->AnswerMessage(request_id));
        RespondRecorded(
            slot, std::move(audit), ToGrpcStatus(refused).error_code(),
            Error(refused, request_.model_name(), request_.model_version(), request_.id()));
        return;
      }
    }
    Result<std::unique_ptr<serve::InferRequest>> decoded = SafeDecode(request_);
    if (!decoded.ok()) {
      RespondRecorded(
          slot, std::move(audit), ToGrpcStatus(decoded.status()).error_code(),
          Error(decoded.status(), request_.model_name(), request_.model_version(), request_.id()));
      return;
    }
    (*decoded)->arrival = arrival;
    (*decoded)->cancelled = cancelled_;
    (*decoded)->tenant = std::move(tenant);
    shared_.server.Infer(
        std::move(decoded).value(),
        [this, slot, model = request_.model_name(), version = request_.model_version(),
         id = request_.id(), reservation = std::move(reservation),
         audit = std::move(audit)](InferResult result) mutable {
          if (!reservation.empty()) reservation.Settle(0);
          ModelStreamInferResponse response;
          grpc::StatusCode code = grpc::StatusCode::OK;
          // The slot is answered whatever building its answer throws: the stream counts on it.
          RunLoggingExceptions("a gRPC stream's answer", [&] {
            if (Status encoded = SafeEncode(result, *response.mutable_infer_response());
                !encoded.ok()) {
              code = ToGrpcStatus(encoded).error_code();
              response = Error(encoded, model, version, id);
            }
            // As Triton's stream writer marks each request's last response (for a model that is
            // not decoupled, its only one); a request refused before it reached the server has
            // none.
            (*response.mutable_infer_response()->mutable_parameters())["triton_final_response"]
                .set_bool_param(true);
          });
          RespondRecorded(slot, std::move(audit), code, std::move(response));
        });
  }

  // Respond, once `audit` recorded the request as answered `code` (sync: once the record is
  // durable; a refused record answers UNAVAILABLE in the stream instead). The slot stays counted
  // in in_flight_ meanwhile, so the stream lives until it is answered.
  void RespondRecorded(uint64_t slot, grpc_audit::GrpcRecord audit, grpc::StatusCode code,
                       ModelStreamInferResponse response) {
    if (!audit.recording()) {
      Respond(slot, std::move(response));
      return;
    }
    const std::string answered = response.SerializeAsString();
    grpc::Status status = code == grpc::StatusCode::OK
                              ? grpc::Status::OK
                              : grpc::Status(code, response.error_message());
    audit.Finish(std::move(status), answered,
                 [this, slot, response = std::move(response)](grpc::Status recorded) mutable {
                   if (recorded.error_code() == grpc::StatusCode::UNAVAILABLE &&
                       response.error_message().empty()) {
                     response = Error(Unavailable("{}", recorded.error_message()),
                                      response.infer_response().model_name(),
                                      response.infer_response().model_version(),
                                      response.infer_response().id());
                   }
                   Respond(slot, std::move(response));
                 });
  }

  // A failed request's answer; it names the request, so clients can match it.
  static ModelStreamInferResponse Error(const Status& status, const std::string& model,
                                        const std::string& version, const std::string& id) {
    ModelStreamInferResponse response;
    response.set_error_message(status.message());
    response.mutable_infer_response()->set_model_name(model);
    response.mutable_infer_response()->set_model_version(version);
    response.mutable_infer_response()->set_id(id);
    return response;
  }

  // On an instance thread (or in Handle): the answer for answers_'s `slot`.
  void Respond(uint64_t slot, ModelStreamInferResponse response) {
    Progress([&] {
      --in_flight_;
      // Once cancelled or broken, answers_ is cut back and nothing more is written.
      if (!write_failed_ && !cancelled_->load(std::memory_order_relaxed)) {
        answers_[slot - first_slot_] = std::move(response);
      }
    });
  }

  // Runs `change` under mutex_, then starts the next write, resumes reading or finishes, as the
  // state allows. Finish is called last, after the lock is released (see the class comment), so
  // a caller must not touch the call after Progress returns unless it is a reaction.
  template <typename Change>
  void Progress(Change change) {
    std::optional<grpc::Status> finish;
    {
      std::lock_guard lock(mutex_);
      change();
      finish = ProgressLocked();
    }
    if (finish) Finish(std::move(*finish));
  }

  // REQUIRES: mutex_ held. Starts the next write or resumes reading as the state allows; returns
  // the status to finish with once nothing is left to do (finished_ is set then).
  std::optional<grpc::Status> ProgressLocked() {
    if (finished_) return std::nullopt;
    const bool cancelled = cancelled_->load(std::memory_order_relaxed);
    if (cancelled || write_failed_) {
      // Nobody will read the answers (the write on the wire completes by itself).
      while (answers_.size() > (writing_ ? 1u : 0u)) answers_.pop_back();
    } else if (!writing_ && !answers_.empty() && answers_.front()) {
      writing_ = true;
      StartWrite(&*answers_.front());
    }
    const bool ending = reads_done_ || stopping_ || cancelled || write_failed_;
    // answers_ holds a slot for every request in flight and every answer not yet written.
    if (!ending && !reading_ && answers_.size() < static_cast<size_t>(kMaxStreamPending)) {
      reading_ = true;
      StartRead(&request_);
    }
    if (!ending || in_flight_ > 0 || writing_ || !answers_.empty()) return std::nullopt;
    finished_ = true;
    if (cancelled || write_failed_) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "the stream was cancelled");
    }
    if (stopping_ && !reads_done_) return ToGrpcStatus(Unavailable("the server is shutting down"));
    return grpc::Status::OK;
  }

  CallShared& shared_;
  const std::string authorization_;  // the caller's credentials, as the stream opened
  const std::string api_key_;
  const Peer peer_;
  const std::shared_ptr<std::atomic<bool>> cancelled_ = std::make_shared<std::atomic<bool>>(false);
  ModelInferRequest request_;  // target of the read in progress; used by the read path only

  std::mutex mutex_;
  // Guarded. One slot per request read and not yet written, in request order, filled by its
  // answer; front() is on the wire if writing_. first_slot_ numbers the front slot.
  std::deque<std::optional<ModelStreamInferResponse>> answers_;
  uint64_t first_slot_ = 0;    // guarded by mutex_
  bool writing_ = false;       // guarded by mutex_
  bool reading_ = false;       // guarded; a read is outstanding or its request being handled
  bool reads_done_ = false;    // guarded; the client half-closed (or the read side broke)
  bool write_failed_ = false;  // guarded; the write side broke: nobody reads the answers
  bool stopping_ = false;      // guarded; the server is draining
  bool finished_ = false;      // guarded; Finish was called
  int in_flight_ = 0;          // guarded; requests read and not yet answered
};

bool StreamRegistry::Register(StreamCall* stream) {
  std::lock_guard lock(mutex_);
  if (stopped_) return false;
  streams_.insert(stream);
  return true;
}

void StreamRegistry::Unregister(StreamCall* stream) {
  std::lock_guard lock(mutex_);
  streams_.erase(stream);
}

void StreamRegistry::StopAll() {
  std::lock_guard lock(mutex_);
  stopped_ = true;
  // No stream is deleted meanwhile: its OnDone waits for mutex_ to unregister. Stop may call
  // Finish, whose OnDone gRPC runs on another thread, never inline.
  for (StreamCall* stream : streams_) stream->Stop();
}

namespace {

// StartInfer's work; an exception it throws leaves no call started.
grpc::ServerUnaryReactor* StartInferCall(CallShared& shared, grpc::CallbackServerContext* context,
                                         const ModelInferRequest* request,
                                         ModelInferResponse* response) {
  const SteadyTime arrival = Clock::Real().Now();
  auto call = std::make_unique<InferCall>(shared);
  // The callback API hands the request out mutable through its allocator state, so raw tensor
  // bytes move into the InferRequest instead of being copied.
  auto* holder = static_cast<grpc::MessageHolder<ModelInferRequest, ModelInferResponse>*>(
      context->GetRpcAllocatorState());
  ModelInferRequest copy;
  ModelInferRequest* mutable_request = holder != nullptr ? holder->request() : nullptr;
  if (mutable_request != request) {
    copy = *request;
    mutable_request = &copy;
  }
  grpc_audit::GrpcRecord audit(shared.audit, *context, "ModelInfer", request->model_name(),
                               request->id());
  if (audit.recording()) audit.SetRequestContent(mutable_request->SerializeAsString());
  // A call answered before it reaches the server: recorded, then finished.
  const auto refuse = [&call, &audit](grpc::Status status) {
    InferCall* refused = call.release();  // gRPC owns a call once it is finished (OnDone)
    audit.Finish(std::move(status), "",
                 [refused](grpc::Status answer) { refused->Finish(std::move(answer)); });
    return refused;
  };
  std::string tenant;
  policy::Reservation reservation;
  if (shared.access != nullptr && shared.access->enforcing()) {
    const Peer peer = grpc_access::PeerOf(*context);
    const grpc_access::RpcAction& decided = grpc_access::RpcActionOf("ModelInfer");
    policy::AccessOutcome outcome = grpc_audit::Check(
        *shared.access, grpc_access::CredentialsOf(*context, peer), decided.action,
        policy::Resource{.type = decided.resource_type, .name = request->model_name()},
        audit.record());
    if (const auto* refusal = std::get_if<policy::AccessRefusal>(&outcome)) {
      if (refusal->retry_after_seconds > 0) {
        context->AddTrailingMetadata("retry-after", std::to_string(refusal->retry_after_seconds));
      }
      return refuse(
          grpc_access::StatusOf(*refusal, grpc_access::RequestIdOf(*context, request->id())));
    }
    auto& grant = std::get<policy::AccessGrant>(outcome);
    audit.SetFull(grant.HasObligation(policy::kObligationAuditFull));
    tenant = std::move(grant.identity.tenant);
    reservation = std::move(grant.reservation);
  }
  Result<std::unique_ptr<serve::InferRequest>> decoded = SafeDecode(*mutable_request);
  if (!decoded.ok()) return refuse(ToGrpcStatus(decoded.status()));
  (*decoded)->arrival = arrival;
  (*decoded)->cancelled = call->cancelled();
  (*decoded)->tenant = std::move(tenant);
  InferCall* started = call.get();
  serve::InferCallback finish = [started, response, reservation = std::move(reservation),
                                 audit = std::move(audit)](InferResult result) mutable {
    // KServe inference counts requests, not tokens: the concurrency slot goes back now.
    if (!reservation.empty()) reservation.Settle(0);
    grpc::Status status = ToGrpcStatus(SafeEncode(result, *response));
    const std::string answered = audit.recording() ? response->SerializeAsString() : "";
    audit.Finish(std::move(status), answered,
                 [started](grpc::Status answer) { started->Finish(std::move(answer)); });
  };
  call.release();  // from here the server answers it, and gRPC deletes it after (OnDone)
  shared.server.Infer(std::move(decoded).value(), std::move(finish));
  return started;
}

}  // namespace

grpc::ServerUnaryReactor* StartInfer(CallShared& shared, grpc::CallbackServerContext* context,
                                     const ModelInferRequest* request,
                                     ModelInferResponse* response) {
  try {
    return StartInferCall(shared, context, request, response);
  } catch (...) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(
        ToGrpcStatus(StatusFromException("starting an infer call", std::current_exception())));
    return reactor;
  }
}

namespace {

// A stream refused before it began: finishes at once with `status`.
class RefusedStream final
    : public grpc::ServerBidiReactor<ModelInferRequest, ModelStreamInferResponse> {
 public:
  explicit RefusedStream(grpc::Status status) { Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerBidiReactor<ModelInferRequest, ModelStreamInferResponse>* StartStream(
    CallShared& shared, grpc::CallbackServerContext* context) {
  if (shared.access == nullptr || !shared.access->enforcing()) {
    return new StreamCall(shared, "", "", Peer{});
  }
  Peer peer = grpc_access::PeerOf(*context);
  const identity::Credentials credentials = grpc_access::CredentialsOf(*context, peer);
  Result<identity::Identity> identity = shared.access->Authenticate(credentials);
  if (!identity.ok()) {
    return new RefusedStream(grpc_access::StatusOf(
        policy::AccessRefusal::Unauthenticated(identity.status()), /*request_id=*/""));
  }
  return new StreamCall(shared, std::string(credentials.authorization),
                        std::string(credentials.api_key), std::move(peer));
}

}  // namespace rampart::api::grpc_calls
