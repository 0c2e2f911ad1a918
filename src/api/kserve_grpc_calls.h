#pragma once

// The infer calls of the gRPC front end (internal to api/kserve_grpc): ModelInfer and
// ModelStreamInfer on gRPC's asynchronous API, served by Rampart's own completion-queue threads
// (CallPollers). Each thread polls its own completion queue: the thread that reads a request off
// the connection is the thread that decodes it, hands it to the server and, when the model runs
// directly (serve's direct execution), executes it and writes the answer, with no hand-off to
// another thread. An answer that completes on an instance thread is written from there.
//
// Why not gRPC's callback API: its reactions run on gRPC's own threads, and each unary call cost
// about seven context switches (docs/benchmarks.md, "gRPC vs HTTP infer"), against one for the
// same request over HTTP. The front end registers no callback service at all: one would make
// gRPC start its own polling threads, which read the infer calls' bytes and wake the queue
// thread. Likewise one queue thread by default: with gRPC 1.51's epoll engine every polling
// thread polls every connection, so two of them hand each request from one to the other.
//
// Memory: every infer request held by the front end (read and not yet answered) is charged its
// size against CallShared's byte budget (max_inflight_bytes); one that does not fit is refused
// RESOURCE_EXHAUSTED at once, for unary calls and for each request of a stream alike.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include "api/grpc_service.grpc.pb.h"
#include "api/kserve_grpc_cork.h"
#include "audit/sink.h"
#include "core/byte_budget.h"
#include "policy/access.h"
#include "serve/server.h"

namespace rampart::api::grpc_calls {

// The service: its infer methods are asynchronous (here), the others synchronous (gRPC's
// synchronous-server threads run them; they are not on the hot path, and may wait for a worker).
using InferService = inference::GRPCInferenceService::WithAsyncMethod_ModelInfer<
    inference::GRPCInferenceService::WithAsyncMethod_ModelStreamInfer<
        inference::GRPCInferenceService::Service>>;

// What a completion-queue thread runs for a tag it takes off its queue. Every tag the calls pass
// to gRPC is one of these, owned by its call.
class Tag {
 public:
  virtual void Proceed(bool ok) = 0;

 protected:
  ~Tag() = default;
};

// A Tag that runs one member function of its call.
template <typename Call, void (Call::*Method)(bool)>
class MemberTag final : public Tag {
 public:
  explicit MemberTag(Call* call) : call_(call) {}
  void Proceed(bool ok) override { (call_->*Method)(ok); }

 private:
  Call* const call_;
};

class StreamCall;

// The open streams, so that a drain can end them. Thread-safe.
class StreamRegistry {
 public:
  // False once StopAll has run: the stream should end at once.
  bool Register(StreamCall* stream);
  void Unregister(StreamCall* stream);
  // Asks every open stream to finish once its requests in flight are answered; later streams
  // are refused. Idempotent.
  void StopAll();

 private:
  std::mutex mutex_;
  std::set<StreamCall*> streams_;  // guarded by mutex_
  bool stopped_ = false;           // guarded by mutex_
};

// What the calls share with the service; outlives every call.
struct CallShared {
  CallShared(serve::InferenceServer& server_in, const policy::AccessControl* access_in,
             audit::AuditSink* audit_in, size_t max_inflight_bytes)
      : server(server_in), access(access_in), audit(audit_in), budget(max_inflight_bytes) {}
  serve::InferenceServer& server;
  const policy::AccessControl* access;                   // null: open
  audit::AuditSink* audit;                               // null: nothing recorded
  InferService* service = nullptr;                       // set before the first call is awaited
  grpc::AsyncGenericService* unknown_methods = nullptr;  // every other method; may stay null
  std::atomic<uint64_t> cancelled_calls{0};  // calls whose client cancelled or timed out
  StreamRegistry streams;
  ByteBudget budget;

  // Call objects alive (started or waiting for a call); the pollers stop once it is zero.
  void CallCreated();
  void CallDeleted();
  void WaitNoCalls();

 private:
  std::mutex calls_mutex_;
  std::condition_variable no_calls_;
  int64_t live_calls_ = 0;  // guarded by calls_mutex_
};

// Rampart's completion-queue threads (`grpc-cq-<i>`), one queue each; each keeps one ModelInfer
// and one ModelStreamInfer call waiting on its queue (a call that arrives posts its successor).
// Each thread works in rounds, the events it can take without waiting; once a round holds more
// than one call's events, the connections accepted on `cork_port` are corked until the queue is
// empty, and flushed every few calls' answers meanwhile, so that those answers leave in one
// write (api/kserve_grpc_cork.h; 0: never corked). No answer stays corked much over a
// millisecond, even while the thread that corked is not running.
class CallPollers {
 public:
  // `queues` come from ServerBuilder::AddCompletionQueue; call after BuildAndStart.
  // `after_cork` (tests): runs on a queue thread right after it corks the connections.
  CallPollers(CallShared& shared, std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues,
              int cork_port, std::function<void()> after_cork = {});
  // REQUIRES: Stop has run.
  ~CallPollers();
  CallPollers(const CallPollers&) = delete;
  CallPollers& operator=(const CallPollers&) = delete;

  // After grpc::Server::Shutdown: waits until every call is done, then shuts the queues down and
  // joins the threads. Idempotent.
  void Stop();

 private:
  CallShared& shared_;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues_;
  const std::unique_ptr<SocketCork> cork_;  // null: never corked
  const std::function<void()> after_cork_;
  std::vector<std::thread> threads_;
  bool stopped_ = false;
};

// Posts a ModelInfer and a ModelStreamInfer call waiting on `queue` (internal: CallPollers and the
// calls themselves use it).
void AwaitInfer(CallShared& shared, grpc::ServerCompletionQueue* queue);
void AwaitStream(CallShared& shared, grpc::ServerCompletionQueue* queue);
void AwaitUnknownMethod(CallShared& shared, grpc::ServerCompletionQueue* queue);

}  // namespace rampart::api::grpc_calls
