#include "api/kserve_grpc_calls.h"

#include <deque>
#include <memory>
#include <utility>

#include "api/kserve_grpc.h"
#include "api/kserve_grpc_codec.h"
#include "core/clock.h"

namespace rampart::api::grpc_calls {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;
using inference::ModelStreamInferResponse;
using InferResult = Result<std::unique_ptr<serve::InferResponse>>;

// Decodes, turning exceptions (allocation failures) into Internal: none may reach gRPC.
Result<std::unique_ptr<serve::InferRequest>> SafeDecode(ModelInferRequest& request) {
  try {
    return DecodeInferRequest(request);
  } catch (const std::exception& error) {
    return Internal("decoding the infer request: {}", error.what());
  }
}

// Fills `out` from a completed request; the status the call or stream entry ends with.
Status SafeEncode(InferResult& result, ModelInferResponse& out) {
  if (!result.ok()) return result.status();
  try {
    EncodeInferResponse(**result, out);
    return Status::Ok();
  } catch (const std::exception& error) {
    return Internal("encoding the infer response: {}", error.what());
  }
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
// without waiting for the previous one; responses are queued and written one at a time, in
// completion order. The stream finishes once reading has ended (client half-close, cancellation
// or a drain) and every request in flight has been answered.
//
// Every gRPC operation (StartRead, StartWrite, Finish) is started under mutex_: gRPC runs the
// reactions of a bidi stream on its own threads, never inline, so this cannot deadlock, and it
// keeps "finished" and "start another operation" from racing.
class StreamCall final
    : public grpc::ServerBidiReactor<ModelInferRequest, ModelStreamInferResponse> {
 public:
  explicit StreamCall(CallShared& shared) : shared_(shared) {
    const bool registered = shared_.streams.Register(this);
    std::lock_guard lock(mutex_);
    stopping_ = !registered;
    ProgressLocked();
  }

  // The server is draining: end the stream once its requests in flight are answered.
  void Stop() {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    ProgressLocked();
  }

  void OnReadDone(bool ok) override {
    {
      std::lock_guard lock(mutex_);
      // A request that arrives as the stream finishes (a drain raced with it) is dropped: once
      // Finish is called nothing may be handed to the server, whose answer would outlive us.
      if (!ok || finished_) {
        reading_ = false;
        reads_done_ = reads_done_ || !ok;
        ProgressLocked();
        return;
      }
      // Counted from here, so the stream cannot finish (and be deleted) while Handle runs or
      // before the server's callback for this request has run.
      ++in_flight_;
    }
    Handle();
    std::lock_guard lock(mutex_);
    reading_ = false;
    ProgressLocked();
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mutex_);
    writing_ = false;
    writes_.pop_front();
    if (!ok) write_failed_ = true;
    ProgressLocked();
  }

  void OnCancel() override {
    cancelled_->store(true, std::memory_order_relaxed);
    shared_.cancelled_calls.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(mutex_);
    ProgressLocked();
  }

  void OnDone() override {
    shared_.streams.Unregister(this);
    delete this;
  }

 private:
  // Decodes request_ and hands it to the server, or answers the error in the stream. The request
  // is already counted in in_flight_; Respond uncounts it.
  void Handle() {
    const SteadyTime arrival = Clock::Real().Now();
    Result<std::unique_ptr<serve::InferRequest>> decoded = SafeDecode(request_);
    if (!decoded.ok()) {
      Respond(
          Error(decoded.status(), request_.model_name(), request_.model_version(), request_.id()));
      return;
    }
    (*decoded)->arrival = arrival;
    (*decoded)->cancelled = cancelled_;
    shared_.server.Infer(std::move(decoded).value(), [this, model = request_.model_name(),
                                                      version = request_.model_version(),
                                                      id = request_.id()](InferResult result) {
      ModelStreamInferResponse response;
      if (Status encoded = SafeEncode(result, *response.mutable_infer_response()); !encoded.ok()) {
        response = Error(encoded, model, version, id);
      }
      Respond(std::move(response));
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

  void Respond(ModelStreamInferResponse response) {
    std::lock_guard lock(mutex_);
    --in_flight_;
    if (!write_failed_ && !cancelled_->load(std::memory_order_relaxed)) {
      writes_.push_back(std::move(response));
    }
    ProgressLocked();
  }

  // REQUIRES: mutex_ held. Starts the next write, resumes reading or finishes, as the state
  // allows.
  void ProgressLocked() {
    if (finished_) return;
    const bool cancelled = cancelled_->load(std::memory_order_relaxed);
    if (cancelled || write_failed_) {
      // Nobody will read what is still queued (the write on the wire completes by itself).
      while (writes_.size() > (writing_ ? 1u : 0u)) writes_.pop_back();
    } else if (!writing_ && !writes_.empty()) {
      writing_ = true;
      StartWrite(&writes_.front());
    }
    const bool ending = reads_done_ || stopping_ || cancelled || write_failed_;
    if (!ending && !reading_ && in_flight_ + static_cast<int>(writes_.size()) < kMaxStreamPending) {
      reading_ = true;
      StartRead(&request_);
    }
    if (!ending || in_flight_ > 0 || writing_ || !writes_.empty()) return;
    finished_ = true;
    if (cancelled || write_failed_) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the stream was cancelled"));
    } else if (stopping_ && !reads_done_) {
      Finish(ToGrpcStatus(Unavailable("the server is shutting down")));
    } else {
      Finish(grpc::Status::OK);
    }
  }

  CallShared& shared_;
  const std::shared_ptr<std::atomic<bool>> cancelled_ = std::make_shared<std::atomic<bool>>(false);
  ModelInferRequest request_;  // target of the read in progress; used by the read path only

  std::mutex mutex_;
  std::deque<ModelStreamInferResponse> writes_;  // guarded; front() is on the wire if writing_
  bool writing_ = false;                         // guarded by mutex_
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

grpc::ServerUnaryReactor* StartInfer(CallShared& shared, grpc::CallbackServerContext* context,
                                     const ModelInferRequest* request,
                                     ModelInferResponse* response) {
  const SteadyTime arrival = Clock::Real().Now();
  auto* call = new InferCall(shared);
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
  Result<std::unique_ptr<serve::InferRequest>> decoded = SafeDecode(*mutable_request);
  if (!decoded.ok()) {
    call->Finish(ToGrpcStatus(decoded.status()));
    return call;
  }
  (*decoded)->arrival = arrival;
  (*decoded)->cancelled = call->cancelled();
  shared.server.Infer(std::move(decoded).value(), [call, response](InferResult result) {
    call->Finish(ToGrpcStatus(SafeEncode(result, *response)));
  });
  return call;
}

grpc::ServerBidiReactor<ModelInferRequest, ModelStreamInferResponse>* StartStream(
    CallShared& shared) {
  return new StreamCall(shared);
}

}  // namespace rampart::api::grpc_calls
