#pragma once

// GatewayCall: the `call` stage of one request, from the routed plan to the answer.
//
// It walks the plan's chain of targets (the target, then its fallbacks). For an upstream target
// it picks an endpoint from the pool and sends the request; a retryable failure (connect error,
// timeout, 429, 408, 5xx, a garbled answer, a stream that breaks before its first token) is
// recorded against the endpoint (passive ejection, or the cool-down a Retry-After asks for) and
// retried, at once on an endpoint not yet tried or after a jittered backoff on one that was,
// up to retry.max_attempts per target; then the next target of the chain is tried. Failures the
// caller caused (400, 422 from the upstream) are answered as they are.
//
// Streams are forwarded event by event as they arrive. Events before the first token (a role-only
// first chunk) are held back, so that a stream breaking before its first token can still fail
// over; while waiting, the caller gets the head and `: keep-alive` comments every keep_alive.
// After tokens were sent, a break ends the stream with an OpenAI error event. Usage is asked of
// the upstream (stream_options.include_usage) and the usage chunk dropped again when the caller
// did not ask for it; without one, usage is estimated. A slow reader pauses the upstream read
// (backpressure through StreamWriter and HttpCall::Resume); a caller that goes away cancels the
// upstream call at once.
//
// Threads: callbacks arrive from the HTTP client, the HTTP server, the timer thread and model
// instance threads; one mutex serialises them. Client and writer calls that may call back at
// once are made outside it.

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "gateway/gateway.h"
#include "gateway/knowledge.h"
#include "gateway/local_target.h"
#include "gateway/sse.h"

namespace rampart::gateway {

class GatewayCall : public std::enable_shared_from_this<GatewayCall> {
 public:
  GatewayCall(const CallEnvironment& environment, std::shared_ptr<const Runtime> runtime,
              CallContext context, net::Responder responder);
  ~GatewayCall();

  // Runs the request stages, then calls the targets. Call once, right after construction.
  void Start();

  // What the upstream attempt's sink reports (call.cc's AttemptSink).
  void OnHead(uint64_t attempt, const net::HttpClientResponseHead& head);
  bool OnBody(uint64_t attempt, std::string_view piece);
  void OnComplete(uint64_t attempt, const Status& status, net::HttpClientError error);

 private:
  // Why an attempt failed, as retries and the final answer need it.
  struct Failure {
    int http_status = 502;  // what the caller gets if this is the last failure
    std::string message;
    std::string outcome;  // metrics label: "http_503", "connect_failed", ...
    bool retryable = true;
    bool endpoint_fault = true;                 // counts toward the endpoint's ejection
    std::chrono::milliseconds retry_after{-1};  // asked by the upstream; -1 = not asked
  };
  enum class Phase { kCalling, kStreaming, kDone };

  // Answers from a knowledge base (call_knowledge.cc, gateway/knowledge.h): the search on a
  // knowledge worker, then the targets with the sources in the prompt, or the fixed answer when
  // no passage answers.
  void SearchKnowledge(std::unique_lock<std::mutex>& lock);
  void KnowledgeFound(Result<knowledge::hub::SearchResults> found);
  void AnswerNoSource(std::unique_lock<std::mutex>& lock);
  // The chunk's data with the citations added, when it is the first to carry finish_reason.
  std::string CiteInChunk(std::string data, bool finished);
  // The closing chunk with the citations, when no chunk of the stream carried them; else empty.
  std::optional<std::string> PendingCitations();

  // REQUIRES for every method below: mutex_ held (the lock is passed where one is released).
  void NextTarget(std::unique_lock<std::mutex>& lock);
  void Attempt(std::unique_lock<std::mutex>& lock);
  void CallLocal(std::unique_lock<std::mutex>& lock, const TargetRuntime& target);
  void AttemptFailed(std::unique_lock<std::mutex>& lock, Failure failure);
  // The failure an upstream's error status (>= 300) and its body make.
  Failure HttpFailure() const;
  void OnEvent(std::string_view data, bool& keep_reading);
  void LocalDone(uint64_t attempt, Result<LocalAnswer> answer);
  void Resume(uint64_t attempt);  // after the caller's queue drained
  void CallerGone();
  // Passes one event through the stages after `call` and writes it; false when the caller's
  // queue is full or a stage refused the answer (refused_).
  bool Forward(std::string data);
  // The events the stages add at the end of a stream (Pipeline::AnswerEnd), written.
  bool ForwardEnd();
  bool WriteEvent(std::string data);
  // Ends the call because a stage after `call` refused the answer (a blocked entity type): an
  // error answer, or an error event when streaming. Not the upstream's fault: no retry.
  void RefuseAnswer(std::unique_lock<std::mutex>& lock);
  void BeginStream();
  void EndBrokenStream(const std::string& message);
  void FinishStream();
  void AnswerWhole(int status, std::string body,
                   std::vector<std::pair<std::string, std::string>> extra_headers = {});
  // A 200 with `body`, once the stages after `call` passed it (their error otherwise).
  void AnswerOk(std::string body);
  void AnswerError(int status, std::string_view message, std::string_view param = {},
                   std::string_view code = {}, std::string retry_after = {},
                   std::vector<std::pair<std::string, std::string>> headers = {});
  void Finish(std::unique_lock<std::mutex>& lock);
  void Tick();
  void ScheduleTick();
  void AddGatewayTime(SteadyTime since);
  std::vector<std::pair<std::string, std::string>> CommonHeaders() const;

  const CallEnvironment& environment_;
  const std::shared_ptr<const Runtime> runtime_;
  const Clock& clock_;

  std::mutex mutex_;
  CallContext context_;                      // guarded by mutex_
  std::optional<net::Responder> responder_;  // guarded by mutex_; until answered or streaming
  net::StreamWriter writer_;                 // guarded by mutex_; once streaming
  Phase phase_ = Phase::kCalling;            // guarded by mutex_
  size_t chain_index_ = 0;                   // guarded by mutex_
  const TargetRuntime* target_ = nullptr;    // guarded by mutex_
  int target_attempts_ = 0;                  // guarded by mutex_
  uint64_t tried_ = 0;                       // guarded by mutex_: pool members tried
  size_t member_ = 0;                        // guarded by mutex_: the current attempt's
  uint64_t attempt_ = 0;                     // guarded by mutex_: the current attempt's number
  net::HttpCall upstream_call_;              // guarded by mutex_
  std::optional<Failure> last_failure_;      // guarded by mutex_

  // The current attempt's answer. Guarded by mutex_.
  int upstream_status_ = 0;
  bool upstream_ok_ = false;  // 2xx with the expected content type
  std::chrono::milliseconds upstream_retry_after_{-1};
  std::string body_;             // a whole answer, or an error body (bounded)
  uint64_t unparsed_bytes_ = 0;  // of a whole answer or an error body, read so far
  SseReader sse_;
  std::vector<std::string> held_;  // events before the first token
  bool token_sent_ = false;        // an event with a token went to the caller
  bool done_seen_ = false;
  bool finish_seen_ = false;
  bool usage_seen_ = false;
  size_t completion_chars_ = 0;
  std::optional<std::string> stream_error_;  // an event said the upstream failed, or was garbage
  std::optional<Status> refused_;            // a stage after `call` refused the answer
  bool paused_ = false;

  // An answer from a knowledge base: its sources, and whether a chunk carried their citations.
  // Guarded by mutex_.
  std::shared_ptr<const KnowledgeSources> knowledge_;
  bool citations_sent_ = false;
  SteadyTime search_started_{};

  SteadyTime attempt_sent_{};
  SteadyTime last_write_{};
  SteadyTime last_token_{};
  Timers::Id tick_ = 0;  // the scheduled Tick, 0 when none
};

}  // namespace rampart::gateway
