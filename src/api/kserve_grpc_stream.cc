#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "api/kserve_grpc.h"
#include "api/kserve_grpc_access.h"
#include "api/kserve_grpc_audit.h"
#include "api/kserve_grpc_calls.h"
#include "api/kserve_grpc_codec.h"
#include "api/kserve_grpc_infer.h"
#include "core/clock.h"
#include "core/exceptions.h"
#include "core/trace.h"

namespace rampart::api::grpc_calls {

using inference::ModelInferRequest;
using inference::ModelStreamInferResponse;

// One ModelStreamInfer call. Reads requests one after another and hands each to the server
// without waiting for the previous one; responses are written one at a time in request order,
// as Triton writes them for models that are not decoupled (clients that send no `id` match
// answers by position): each request read gets the next slot in answers_, and a slot is written
// once it and every slot before it are filled. The stream finishes once reading has ended
// (client half-close, cancellation or a drain) and every request in flight has been answered
// and its answer written (or dropped, when the stream was cancelled or its write side broke).
//
// Read, Write and Finish are started under mutex_ (the asynchronous API never runs a tag inline,
// so this cannot deadlock), which keeps "finished" and "start another operation" from racing.
// Every tag comes back on the stream's queue, so one completion-queue thread runs them one at a
// time; the server's callbacks (Respond, maybe on an instance thread) only change the state and
// start operations under mutex_. The call deletes itself on its queue's thread once Finish and
// the done notification have completed and no read or write is outstanding (taking mutex_
// first, so that a Respond that just released it is out).
class StreamCall {
 public:
  StreamCall(CallShared& shared, grpc::ServerCompletionQueue* queue)
      : shared_(shared), queue_(queue), stream_(&context_) {
    shared_.CallCreated();
    context_.AsyncNotifyWhenDone(&done_tag_);
    shared_.service->RequestModelStreamInfer(&context_, &stream_, queue_, queue_, &arrived_tag_);
  }
  ~StreamCall() {
    if (registered_) shared_.streams.Unregister(this);
    shared_.CallDeleted();
  }
  StreamCall(const StreamCall&) = delete;
  StreamCall& operator=(const StreamCall&) = delete;

  // The server is draining: end the stream once its requests in flight are answered.
  void Stop() {
    Progress([&] { stopping_ = true; });
  }

 private:
  // The stream opened: the caller is authenticated once (UNAUTHENTICATED ends it at once); the
  // credentials are kept, and each request is authenticated with them again, so a key revoked
  // or a token expiring while the stream is open stops working at its next request.
  void Arrived(bool ok) {
    if (!ok) {  // the server is shutting down: the call never started, no other tag comes
      delete this;
      return;
    }
    AwaitStream(shared_, queue_);
    if (shared_.access != nullptr && shared_.access->enforcing()) {
      const grpc_access::ServerContextView view(context_);
      caller_.peer = view.PeerOf();
      const identity::Credentials credentials = grpc_access::CredentialsOf(view, caller_.peer);
      Result<identity::Identity> identity = shared_.access->Authenticate(credentials);
      if (!identity.ok()) {
        std::lock_guard lock(mutex_);
        finished_ = true;
        stream_.Finish(
            grpc_access::StatusOf(policy::AccessRefusal::Unauthenticated(identity.status()), ""),
            &finished_tag_);
        return;
      }
      caller_.authorization = std::string(credentials.authorization);
      caller_.api_key = std::string(credentials.api_key);
    }
    registered_ = true;
    const bool accepted = shared_.streams.Register(this);
    if (!accepted) registered_ = false;
    Progress([&] { stopping_ = stopping_ || !accepted; });
  }

  void ReadDone(bool ok) {
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
    if (handle) {
      // Handle answers the slot itself (now, or from the server's callback); should it throw
      // before the request reached the server, the slot is answered here, so the stream ends.
      if (!RunLoggingExceptions("a gRPC stream", [&] { Handle(slot); })) {
        RunLoggingExceptions("a gRPC stream", [&] {
          Respond(slot,
                  StreamError(Internal("the request failed (see the server's log)"),
                              request_.model_name(), request_.model_version(), request_.id()));
        });
      }
      Progress([&] { reading_ = false; });
    }
    MaybeDelete();
  }

  void WriteDone(bool ok) {
    Progress([&] {
      writing_ = false;
      answers_.pop_front();
      ++first_slot_;
      if (!ok) write_failed_ = true;
    });
    MaybeDelete();
  }

  void Done(bool) {
    if (context_.IsCancelled()) {
      cancelled_->store(true, std::memory_order_relaxed);
      shared_.cancelled_calls.fetch_add(1, std::memory_order_relaxed);
    }
    Progress([&] { done_ = true; });
    MaybeDelete();
  }

  void Finished(bool) {
    {
      std::lock_guard lock(mutex_);
      finish_done_ = true;
    }
    MaybeDelete();
  }

  // On the queue's thread, last in each tag: deletes the call once nothing more can happen to it.
  void MaybeDelete() {
    {
      std::lock_guard lock(mutex_);
      if (!finish_done_ || !done_ || reading_ || writing_) return;
    }
    delete this;
  }

  // Decides, decodes and hands request_ to the server, or answers the error in the stream, into
  // answers_'s `slot`. The request is already counted in in_flight_; Respond uncounts it.
  void Handle(uint64_t slot) {
    StartStreamRequest(
        shared_, caller_, request_, cancelled_,
        [this, slot](ModelStreamInferResponse response) { Respond(slot, std::move(response)); });
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
  // state allows.
  template <typename Change>
  void Progress(Change change) {
    std::lock_guard lock(mutex_);
    change();
    ProgressLocked();
  }

  // REQUIRES: mutex_ held. Starts the next write, resumes reading or starts Finish once nothing
  // is left to do (finished_ is set then).
  void ProgressLocked() {
    if (finished_) return;
    const bool cancelled = cancelled_->load(std::memory_order_relaxed);
    if (cancelled || write_failed_) {
      // Nobody will read the answers (the write on the wire completes by itself).
      while (answers_.size() > (writing_ ? 1u : 0u)) answers_.pop_back();
    } else if (!writing_ && !answers_.empty() && answers_.front()) {
      writing_ = true;
      stream_.Write(*answers_.front(), &write_tag_);
    }
    const bool ending = reads_done_ || stopping_ || cancelled || write_failed_;
    // answers_ holds a slot for every request in flight and every answer not yet written.
    if (!ending && !reading_ && answers_.size() < static_cast<size_t>(kMaxStreamPending)) {
      reading_ = true;
      stream_.Read(&request_, &read_tag_);
    }
    if (!ending || in_flight_ > 0 || writing_ || !answers_.empty()) return;
    finished_ = true;
    grpc::Status status = grpc::Status::OK;
    if (cancelled || write_failed_) {
      status = grpc::Status(grpc::StatusCode::CANCELLED, "the stream was cancelled");
    } else if (stopping_ && !reads_done_) {
      status = ToGrpcStatus(Unavailable("the server is shutting down"));
    }
    stream_.Finish(status, &finished_tag_);
  }

  CallShared& shared_;
  grpc::ServerCompletionQueue* const queue_;
  grpc::ServerContext context_;
  grpc::ServerAsyncReaderWriter<ModelStreamInferResponse, ModelInferRequest> stream_;
  MemberTag<StreamCall, &StreamCall::Arrived> arrived_tag_{this};
  MemberTag<StreamCall, &StreamCall::ReadDone> read_tag_{this};
  MemberTag<StreamCall, &StreamCall::WriteDone> write_tag_{this};
  MemberTag<StreamCall, &StreamCall::Finished> finished_tag_{this};
  MemberTag<StreamCall, &StreamCall::Done> done_tag_{this};
  // The caller's credentials, as the stream opened (set in Arrived; unused when access is open).
  StreamCaller caller_;
  bool registered_ = false;  // queue thread; in shared_.streams
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
  bool finished_ = false;      // guarded; Finish was started
  bool finish_done_ = false;   // guarded; Finish's tag came back
  bool done_ = false;          // guarded; the done notification came back
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
  // No stream is deleted meanwhile: its destructor waits for mutex_ to unregister.
  for (StreamCall* stream : streams_) stream->Stop();
}

void AwaitStream(CallShared& shared, grpc::ServerCompletionQueue* queue) {
  new StreamCall(shared, queue);  // owns itself
}

}  // namespace rampart::api::grpc_calls
