#include "api/kserve_grpc_calls.h"

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include <google/protobuf/arena.h>

#include "api/kserve_grpc_access.h"
#include "api/kserve_grpc_audit.h"
#include "api/kserve_grpc_codec.h"
#include "api/kserve_grpc_cork.h"
#include "api/kserve_grpc_infer.h"
#include "core/clock.h"
#include "core/exceptions.h"
#include "core/thread_name.h"

namespace rampart::api::grpc_calls {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;

// Corking (api/kserve_grpc_cork.h) starts once a queue thread has taken this many events in a
// row without waiting for one: more than one call's (a unary call brings three: arrived,
// finished, done; a stream's request two: read, written). From then on the thread only polls
// its queue without waiting, and uncorks the connections once it finds it empty, before it
// waits. A call alone in its round (one in flight) is answered uncorked, and costs no
// non-blocking poll either.
constexpr int kCorkFromEvent = 4;
// A Next that took longer than this waited for its event (or read from a connection): the
// events before it were another round. Waiting takes a client's turnaround and two wake-ups,
// tens of µs; taking a queued event, under one.
constexpr std::chrono::microseconds kWaited{5};
// While corked, the answers written so far go out every this many events (four unary calls'),
// so that the client gets them in batches it can work on while this thread goes on: holding a
// whole round's answers back would have the client and the server take turns instead of
// working at once (half the throughput with 64 calls in flight and a core each).
constexpr int kFlushEvery = 12;

// One ModelInfer call, from the moment it waits on a queue for a call to arrive until gRPC has
// delivered both its finish and its done tags; it deletes itself then. Its tags all come back on
// its own queue, so one completion-queue thread runs them, one at a time; the server's callback
// (maybe on an instance thread) only encodes the answer and starts Finish.
class InferCall {
 public:
  InferCall(CallShared& shared, grpc::ServerCompletionQueue* queue)
      : shared_(shared), queue_(queue), responder_(&context_) {
    shared_.CallCreated();
    context_.AsyncNotifyWhenDone(&done_tag_);
    shared_.service->RequestModelInfer(&context_, &request_, &responder_, queue_, queue_,
                                       &arrived_tag_);
  }
  ~InferCall() { shared_.CallDeleted(); }
  InferCall(const InferCall&) = delete;
  InferCall& operator=(const InferCall&) = delete;

 private:
  void Arrived(bool ok) {
    // Not ok: the server is shutting down. The call never started, so no other tag comes.
    if (!ok) {
      delete this;
      return;
    }
    AwaitInfer(shared_, queue_);
    try {
      Start();
    } catch (...) {
      Answer(ToGrpcStatus(StatusFromException("starting an infer call", std::current_exception())));
    }
  }

  void Finished(bool) {
    finished_ = true;
    if (done_) delete this;
  }

  void Done(bool) {
    done_ = true;
    if (context_.IsCancelled()) {
      cancelled_->store(true, std::memory_order_relaxed);
      shared_.cancelled_calls.fetch_add(1, std::memory_order_relaxed);
    }
    if (finished_) delete this;
  }

  // Decides, decodes and hands the request to the server; or answers at once.
  void Start() {
    grpc_access::ServerContextView view(context_);
    StartInfer(shared_, view, request_, response_, cancelled_,
               [this](grpc::Status status) { Answer(std::move(status)); });
  }

  // Starts Finish: the last thing done to the call outside its own tags. Once: an answer that
  // comes after a failure was answered is dropped.
  void Answer(grpc::Status status) {
    if (answered_.exchange(true)) return;
    if (status.ok()) {
      responder_.Finish(response_, status, &finished_tag_);
    } else {
      responder_.FinishWithError(status, &finished_tag_);
    }
  }

  CallShared& shared_;
  grpc::ServerCompletionQueue* const queue_;
  grpc::ServerContext context_;
  // The request and the response live on the call's arena, whose first block is part of the call
  // object: parsing the request and filling the response take no heap allocation of their own for
  // a small request (`simple`'s: ~40 fewer per call), and they go with the call in one piece.
  // Tensor bytes stay in std::strings (moved in and out, never copied).
  alignas(std::max_align_t) char arena_block_[kArenaBlockBytes];
  google::protobuf::Arena arena_{ArenaOn(arena_block_, sizeof(arena_block_))};
  ModelInferRequest& request_ = *google::protobuf::Arena::CreateMessage<ModelInferRequest>(&arena_);
  ModelInferResponse& response_ =
      *google::protobuf::Arena::CreateMessage<ModelInferResponse>(&arena_);
  grpc::ServerAsyncResponseWriter<ModelInferResponse> responder_;
  MemberTag<InferCall, &InferCall::Arrived> arrived_tag_{this};
  MemberTag<InferCall, &InferCall::Finished> finished_tag_{this};
  MemberTag<InferCall, &InferCall::Done> done_tag_{this};
  const std::shared_ptr<std::atomic<bool>> cancelled_ = std::make_shared<std::atomic<bool>>(false);
  std::atomic<bool> answered_{false};  // Answer has run
  bool finished_ = false;              // queue thread only
  bool done_ = false;                  // queue thread only
};

// A call of a method no service implements (Triton's shared-memory, trace and log settings
// RPCs, a typo): UNIMPLEMENTED naming it. gRPC's own answer carries no message at all.
class UnknownMethodCall {
 public:
  UnknownMethodCall(CallShared& shared, grpc::ServerCompletionQueue* queue)
      : shared_(shared), queue_(queue), stream_(&context_) {
    shared_.CallCreated();
    shared_.unknown_methods->RequestCall(&context_, &stream_, queue_, queue_, &arrived_tag_);
  }
  ~UnknownMethodCall() { shared_.CallDeleted(); }
  UnknownMethodCall(const UnknownMethodCall&) = delete;
  UnknownMethodCall& operator=(const UnknownMethodCall&) = delete;

 private:
  void Arrived(bool ok) {
    if (!ok) {
      delete this;
      return;
    }
    AwaitUnknownMethod(shared_, queue_);
    stream_.Finish(ToGrpcStatus(Unimplemented("method '{}' is not implemented by this server",
                                              context_.method())),
                   &finished_tag_);
  }
  void Finished(bool) { delete this; }

  CallShared& shared_;
  grpc::ServerCompletionQueue* const queue_;
  grpc::GenericServerContext context_;
  grpc::GenericServerAsyncReaderWriter stream_;
  MemberTag<UnknownMethodCall, &UnknownMethodCall::Arrived> arrived_tag_{this};
  MemberTag<UnknownMethodCall, &UnknownMethodCall::Finished> finished_tag_{this};
};

void RunTag(void* tag, bool ok) {
  RunLoggingExceptions("a gRPC call", [&] { static_cast<Tag*>(tag)->Proceed(ok); });
}

// Runs `queue`'s events until it shuts down.
void Poll(grpc::ServerCompletionQueue& queue) {
  void* tag = nullptr;
  bool ok = false;
  while (queue.Next(&tag, &ok)) RunTag(tag, ok);
}

// The same, corking the connections (`cork`, shared by the queue threads) while a round of
// events holds more than one call's (api/kserve_grpc_cork.h). `after_cork` (tests) runs once the
// thread has corked them.
void PollCorked(grpc::ServerCompletionQueue& queue, SocketCork& cork,
                const std::function<void()>& after_cork) {
  void* tag = nullptr;
  bool ok = false;
  bool corked = false;    // this thread is in a corked round
  int quick_events = 0;   // events taken in a row without waiting, as far as the clock tells
  int corked_events = 0;  // events taken since the last flush
  while (true) {
    if (corked) {
      const grpc::CompletionQueue::NextStatus status =
          queue.AsyncNext(&tag, &ok, gpr_time_0(GPR_CLOCK_MONOTONIC));
      if (status == grpc::CompletionQueue::SHUTDOWN) break;
      if (status == grpc::CompletionQueue::TIMEOUT) {
        // The round is over: what it wrote goes out now, before the thread waits.
        cork.Uncork();
        corked = false;
        quick_events = 0;
        continue;
      }
      if (++corked_events == kFlushEvery) {
        cork.Flush();  // sends what the last events wrote
        corked_events = 0;
      }
    } else {
      const auto asked = std::chrono::steady_clock::now();
      if (!queue.Next(&tag, &ok)) break;
      if (std::chrono::steady_clock::now() - asked > kWaited) quick_events = 0;
      if (quick_events < kCorkFromEvent) ++quick_events;
      if (quick_events == kCorkFromEvent) {
        if (cork.Cork()) {
          corked = true;
          corked_events = 0;
          if (after_cork) after_cork();
        } else {
          quick_events = 0;  // too many connections to cork: asked again a few events on
        }
      }
    }
    RunTag(tag, ok);
  }
  if (corked) cork.Uncork();
}

}  // namespace

void AwaitUnknownMethod(CallShared& shared, grpc::ServerCompletionQueue* queue) {
  new UnknownMethodCall(shared, queue);  // owns itself
}

void AwaitInfer(CallShared& shared, grpc::ServerCompletionQueue* queue) {
  new InferCall(shared, queue);  // owns itself
}

void CallShared::CallCreated() {
  std::lock_guard lock(calls_mutex_);
  ++live_calls_;
}

void CallShared::CallDeleted() {
  std::lock_guard lock(calls_mutex_);
  if (--live_calls_ == 0) no_calls_.notify_all();
}

void CallShared::WaitNoCalls() {
  std::unique_lock lock(calls_mutex_);
  no_calls_.wait(lock, [&] { return live_calls_ == 0; });
}

CallPollers::CallPollers(CallShared& shared,
                         std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues,
                         int cork_port, std::function<void()> after_cork)
    : shared_(shared),
      queues_(std::move(queues)),
      cork_(cork_port != 0 ? std::make_unique<SocketCork>(cork_port) : nullptr),
      after_cork_(std::move(after_cork)) {
  for (size_t i = 0; i < queues_.size(); ++i) {
    grpc::ServerCompletionQueue* queue = queues_[i].get();
    AwaitInfer(shared_, queue);
    AwaitStream(shared_, queue);
    if (shared_.unknown_methods != nullptr) AwaitUnknownMethod(shared_, queue);
    threads_.emplace_back([this, queue, i] {
      NameThisThread(fmt::format("grpc-cq-{}", i));
      if (cork_ != nullptr) {
        PollCorked(*queue, *cork_, after_cork_);
      } else {
        Poll(*queue);
      }
    });
  }
}

CallPollers::~CallPollers() { Stop(); }

void CallPollers::Stop() {
  if (stopped_) return;
  stopped_ = true;
  // The server is shut down: waiting calls were given back (not ok) and started ones cancelled;
  // those still in the server's hands finish when it answers them.
  shared_.WaitNoCalls();
  for (auto& queue : queues_) queue->Shutdown();
  for (std::thread& thread : threads_) thread.join();
}

}  // namespace rampart::api::grpc_calls
