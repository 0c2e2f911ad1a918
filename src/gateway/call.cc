#include "gateway/call.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <limits>
#include <random>

#include "core/logging.h"
#include "gateway/local_target.h"

namespace rampart::gateway {
namespace {

// How often a call waiting on an upstream looks for a caller gone away and keeps a stream alive.
constexpr auto kTickInterval = std::chrono::milliseconds(200);
// An upstream's error body is read up to this much for its message.
constexpr size_t kMaxErrorBody = 64 * 1024;
// The longest cool-down a Retry-After sets on an upstream.
constexpr auto kMaxCoolDown = std::chrono::seconds(60);

class AttemptSink final : public net::HttpResponseSink {
 public:
  AttemptSink(std::shared_ptr<GatewayCall> call, uint64_t attempt)
      : call_(std::move(call)), attempt_(attempt) {}
  void OnHead(const net::HttpClientResponseHead& head) override { call_->OnHead(attempt_, head); }
  bool OnBody(std::string_view piece) override { return call_->OnBody(attempt_, piece); }
  void OnComplete(const Status& status, net::HttpClientError error) override {
    call_->OnComplete(attempt_, status, error);
    call_.reset();
  }

 private:
  std::shared_ptr<GatewayCall> call_;
  const uint64_t attempt_;
};

// Retry-After as seconds (or retry-after-ms, which OpenAI's SDKs also read); -1 when absent or an
// HTTP date (not worth trusting clocks for).
std::chrono::milliseconds ParseRetryAfter(const net::HttpHeaders& headers) {
  const auto number = [](std::string_view text) -> int64_t {
    int64_t value = -1;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    return error == std::errc() && end == text.data() + text.size() && value >= 0 ? value : -1;
  };
  if (auto ms = headers.Get("retry-after-ms")) {
    const int64_t value = number(*ms);
    if (value >= 0) return std::chrono::milliseconds(value);
  }
  if (auto seconds = headers.Get("retry-after")) {
    const int64_t value = number(*seconds);
    if (value >= 0) return std::chrono::seconds(std::min<int64_t>(value, 86400));
  }
  return std::chrono::milliseconds(-1);
}

std::chrono::milliseconds Backoff(const RetryConfig& retry, int attempt) {
  thread_local std::minstd_rand random(std::random_device{}());
  const int64_t base = retry.base_backoff.count();
  const int64_t ceiling =
      std::min<int64_t>(retry.max_backoff.count(), base << std::min(attempt - 1, 20));
  if (ceiling <= 0) return std::chrono::milliseconds(0);
  // Full jitter: spread retries of many calls so they do not arrive together.
  return std::chrono::milliseconds(
      std::uniform_int_distribution<int64_t>(ceiling / 2, ceiling)(random));
}

// What a transport failure was, for the caller's error message.
std::string_view TransportFault(net::HttpClientError error) {
  switch (error) {
    case net::HttpClientError::kConnectFailed: return "refused the connection";
    case net::HttpClientError::kConnectTimeout: return "did not accept a connection in time";
    case net::HttpClientError::kTlsFailed: return "failed the TLS handshake";
    case net::HttpClientError::kSendFailed: return "did not take the request";
    case net::HttpClientError::kFirstByteTimeout: return "did not start answering in time";
    case net::HttpClientError::kIdleTimeout: return "stalled in the middle of its answer";
    case net::HttpClientError::kDeadlineExceeded: return "took too long";
    case net::HttpClientError::kResponseTooLarge: return "answered more than the gateway takes";
    case net::HttpClientError::kMalformedResponse: return "answered something that is not HTTP";
    case net::HttpClientError::kConnectionClosed:
      return "closed the connection before its answer ended";
    case net::HttpClientError::kShutdown: return "was not reached: the gateway is stopping";
    default: return "failed";
  }
}

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() &&
         std::equal(prefix.begin(), prefix.end(), text.begin(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == b;
         });
}

}  // namespace

GatewayCall::GatewayCall(const CallEnvironment& environment, std::shared_ptr<const Runtime> runtime,
                         CallContext context, net::Responder responder)
    : environment_(environment),
      runtime_(std::move(runtime)),
      clock_(*environment.clock),
      context_(std::move(context)),
      responder_(std::move(responder)),
      sse_(runtime_->config.max_response_bytes) {}

GatewayCall::~GatewayCall() = default;

void GatewayCall::Start() {
  const SteadyTime start = clock_.Now();
  std::unique_lock lock(mutex_);
  context_.router = runtime_->router.get();
  context_.guard = &runtime_->guard;
  context_.limits.max_n = runtime_->config.max_n;
  last_write_ = context_.received;
  const Status admitted = environment_.pipeline->Request(context_);
  if (!admitted.ok()) {
    const int status = HttpStatusOf(admitted);
    if (context_.outcome == "ok") context_.outcome = "refused";  // else the stage's own
    AnswerError(status, admitted.message(), context_.error_param,
                status == 404 ? "model_not_found" : "", {}, std::move(context_.refusal_headers));
    AddGatewayTime(start);
    Finish(lock);
    return;
  }
  context_.streamed = context_.request.stream;
  if (context_.plan.knowledge) {
    SearchKnowledge(lock);
  } else {
    NextTarget(lock);
  }
  AddGatewayTime(start);
  if (phase_ != Phase::kDone) ScheduleTick();
}

void GatewayCall::NextTarget(std::unique_lock<std::mutex>& lock) {
  if (environment_.stopping->load(std::memory_order_relaxed)) {
    AnswerError(503, "the gateway is shutting down");
    context_.outcome = "shutdown";
    Finish(lock);
    return;
  }
  const std::vector<std::string>& chain = context_.plan.chain;
  if (chain_index_ < chain.size()) {
    target_ = runtime_->FindTarget(chain[chain_index_]);
    context_.target = chain[chain_index_];
    if (chain_index_ > 0) ++context_.fallbacks;
    target_attempts_ = 0;
    tried_ = 0;
    if (!target_->config->local_model.empty()) {
      CallLocal(lock, *target_);
    } else {
      Attempt(lock);
    }
    return;
  }
  const Failure failure = last_failure_.value_or(
      Failure{.http_status = 503, .message = "no model could answer", .outcome = "no_target"});
  context_.outcome = failure.outcome;
  std::string retry_after;
  if (failure.http_status == 429 && failure.retry_after.count() >= 0) {
    retry_after = std::to_string((failure.retry_after.count() + 999) / 1000);
  }
  AnswerError(failure.http_status, failure.message, "", "", std::move(retry_after));
  Finish(lock);
}

void GatewayCall::Attempt(std::unique_lock<std::mutex>& lock) {
  if (environment_.stopping->load(std::memory_order_relaxed)) {
    AnswerError(503, "the gateway is shutting down");
    context_.outcome = "shutdown";
    Finish(lock);
    return;
  }
  const SteadyTime now = clock_.Now();
  Pool& pool = *target_->pool;
  const Pool::Pick pick = pool.Choose(tried_, now);
  member_ = pick.index;
  tried_ |= uint64_t{1} << member_;
  ++target_attempts_;
  ++context_.attempts;
  context_.failover = context_.failover || pick.failover;
  const Pool::Member& member = pool.members()[member_];
  const UpstreamRuntime& upstream = *target_->members[member_];
  context_.upstream = upstream.state->config().name;

  upstream_status_ = 0;
  upstream_ok_ = false;
  upstream_retry_after_ = std::chrono::milliseconds(-1);
  body_.clear();
  unparsed_bytes_ = 0;
  sse_ = SseReader(runtime_->config.max_response_bytes);
  held_.clear();
  done_seen_ = finish_seen_ = usage_seen_ = false;
  completion_chars_ = 0;
  stream_error_.reset();
  paused_ = false;

  const OpenAiRequest& request = context_.request;
  const std::string& upstream_model = member.model.empty() ? target_->config->name : member.model;
  Result<std::string> body = UpstreamBody(
      request, upstream_model, request.stream && upstream.state->config().ask_stream_usage);
  if (!body.ok()) {
    AnswerError(500, body.status().message());
    context_.outcome = "internal";
    Finish(lock);
    return;
  }
  net::HttpClientRequest call;
  call.method = "POST";
  call.target = std::string(OperationPath(request.operation));
  call.headers = upstream.headers;
  call.headers.Add("content-type", "application/json");
  call.headers.Add("accept", request.stream ? "text/event-stream" : "application/json");
  call.headers.Add("x-request-id", context_.request_id);
  call.body = std::move(body).value();
  const UpstreamConfig& config = upstream.state->config();
  call.timeouts.connect = config.connect_timeout;
  call.timeouts.first_byte = config.first_byte_timeout;
  call.timeouts.idle = config.idle_timeout;
  // A stream is bounded event by event (the SseReader), however long it runs; a whole answer,
  // or a stream's error body (OnBody), as a whole.
  call.max_response_bytes =
      request.stream ? std::numeric_limits<uint64_t>::max() : runtime_->config.max_response_bytes;

  const uint64_t attempt = ++attempt_;
  attempt_sent_ = now;
  // Send never calls the sink before it returns (the client calls it on its own thread).
  upstream_call_ =
      upstream.client->Send(upstream.endpoint, std::move(call),
                            std::make_shared<AttemptSink>(shared_from_this(), attempt));
}

void GatewayCall::OnHead(uint64_t attempt, const net::HttpClientResponseHead& head) {
  const SteadyTime start = clock_.Now();
  std::lock_guard lock(mutex_);
  if (attempt != attempt_ || phase_ == Phase::kDone) return;
  upstream_status_ = head.status;
  if (head.status >= 200 && head.status < 300) {
    const std::string_view type = head.headers.Get("content-type").value_or("");
    const std::string_view expected =
        context_.request.stream ? "text/event-stream" : "application/json";
    upstream_ok_ = StartsWith(type, expected);
    if (!upstream_ok_) {
      stream_error_ = fmt::format("the upstream answered {} with content type '{}', not {}",
                                  head.status, type, expected);
    }
  } else {
    upstream_retry_after_ = ParseRetryAfter(head.headers);
  }
  AddGatewayTime(start);
}

bool GatewayCall::OnBody(uint64_t attempt, std::string_view piece) {
  const SteadyTime start = clock_.Now();
  std::unique_lock lock(mutex_);
  if (attempt != attempt_ || phase_ == Phase::kDone) return true;
  bool keep_reading = true;
  if (!upstream_ok_ || !context_.request.stream) {
    // A whole answer (bounded by the client's max_response_bytes), or an error body, of which
    // the first kMaxErrorBody bytes are enough.
    if (upstream_ok_ || body_.size() < kMaxErrorBody) {
      body_.append(piece.substr(0, upstream_ok_ ? piece.size() : kMaxErrorBody - body_.size()));
    }
    unparsed_bytes_ += piece.size();
    if (context_.request.stream && unparsed_bytes_ > runtime_->config.max_response_bytes &&
        !stream_error_) {
      stream_error_ = fmt::format("the upstream's answer is over {} bytes",
                                  runtime_->config.max_response_bytes);
    }
  } else {
    const Status fed = sse_.Feed(
        piece, [this, &keep_reading](std::string_view data) { OnEvent(data, keep_reading); });
    if (!fed.ok() && !stream_error_) stream_error_ = fed.message();
  }
  AddGatewayTime(start);
  if (refused_) {
    context_.upstream_ns += NanosBetween(attempt_sent_, start);
    RefuseAnswer(lock);
    return false;
  }
  // A garbled or failed answer (or an error body read as far as its message needs) ends the
  // attempt now rather than being read on.
  const bool error_read = !upstream_ok_ && !stream_error_ && body_.size() >= kMaxErrorBody;
  if (stream_error_ || error_read) {
    net::HttpCall abandoned = upstream_call_;
    ++attempt_;
    context_.upstream_ns += NanosBetween(attempt_sent_, start);
    AttemptFailed(lock, error_read
                            ? HttpFailure()
                            : Failure{.http_status = 502,
                                      .message = *stream_error_,
                                      .outcome = token_sent_ ? "stream_error" : "malformed"});
    lock.unlock();
    abandoned.Cancel();
    return false;
  }
  if (!keep_reading) {
    // The caller's queue is full: pause the upstream until it drains (on the timer thread, so the
    // writer's callback never runs under this call's lock).
    paused_ = true;
    auto self = shared_from_this();
    net::StreamWriter* writer = &writer_;  // stable once streaming
    lock.unlock();
    writer->OnDrained([self, attempt] {
      self->environment_.timers->Schedule(std::chrono::nanoseconds(0),
                                          [self, attempt] { self->Resume(attempt); });
    });
    return false;
  }
  return true;
}

void GatewayCall::OnComplete(uint64_t attempt, const Status& status, net::HttpClientError error) {
  const SteadyTime start = clock_.Now();
  std::unique_lock lock(mutex_);
  if (attempt != attempt_ || phase_ == Phase::kDone) return;
  upstream_call_ = net::HttpCall();
  context_.upstream_ns += NanosBetween(attempt_sent_, start);
  const UpstreamRuntime& upstream = *target_->members[member_];
  const bool stream = context_.request.stream;

  if (status.ok() && upstream_ok_ && !stream_error_) {
    Status valid = Status::Ok();
    if (stream) {
      if (!done_seen_ && !finish_seen_) {
        valid = Unavailable("the upstream's stream ended before it finished");
      }
    } else {
      Result<Usage> usage = InspectAnswer(body_, context_.operation);
      if (usage.ok()) {
        context_.usage = *usage;
        usage_seen_ = !usage->estimated;
      } else {
        valid = InvalidArgument("the upstream's answer is malformed: {}", usage.status().message());
      }
    }
    if (valid.ok()) {
      upstream.state->RecordSuccess();
      environment_.metrics->upstream_calls.WithLabels({context_.upstream, "ok"}).Increment();
      if (!usage_seen_ && stream) {
        context_.usage = Usage{.prompt_tokens = EstimateTokens(context_.request.prompt_chars),
                               .completion_tokens = EstimateTokens(completion_chars_),
                               .estimated = true};
        context_.usage.total_tokens =
            context_.usage.prompt_tokens + context_.usage.completion_tokens;
      }
      if (stream) {
        FinishStream();
      } else {
        AnswerOk(std::move(body_));
      }
      AddGatewayTime(start);
      Finish(lock);
      return;
    }
    AttemptFailed(lock, Failure{.http_status = 502,
                                .message = valid.message(),
                                .outcome = stream ? "stream_cut" : "malformed"});
    AddGatewayTime(start);
    return;
  }

  Failure failure;
  if (status.ok() && upstream_status_ >= 300) {
    failure = HttpFailure();
  } else if (status.ok() || stream_error_) {
    failure.message = stream_error_.value_or("the upstream's answer is malformed");
    failure.outcome = "malformed";
  } else {
    failure.outcome = std::string(net::HttpClientErrorName(error));
    // The caller learns what went wrong, not where: the client's own message names the
    // upstream's address, which stays in the log.
    failure.message = fmt::format("the upstream '{}' {}", context_.upstream, TransportFault(error));
    LOG_DEBUG("gateway: {} (request {}): upstream '{}': {}", failure.outcome, context_.request_id,
              context_.upstream, status.message());
    switch (error) {
      case net::HttpClientError::kConnectTimeout:
      case net::HttpClientError::kFirstByteTimeout:
      case net::HttpClientError::kIdleTimeout:
      case net::HttpClientError::kDeadlineExceeded: failure.http_status = 504; break;
      case net::HttpClientError::kShutdown:
      case net::HttpClientError::kCancelled:
        failure.http_status = 503;
        failure.retryable = false;
        failure.endpoint_fault = false;
        break;
      case net::HttpClientError::kInvalidRequest:
      case net::HttpClientError::kSinkFailed:
        failure.http_status = 500;
        failure.retryable = false;
        failure.endpoint_fault = false;
        break;
      default: failure.http_status = 502; break;
    }
  }
  AttemptFailed(lock, std::move(failure));
  AddGatewayTime(start);
}

GatewayCall::Failure GatewayCall::HttpFailure() const {
  Failure failure;
  const int code = upstream_status_;
  failure.outcome = fmt::format("http_{}", code);
  const std::string reported = UpstreamErrorMessage(body_).value_or("");
  failure.message = reported.empty()
                        ? fmt::format("the upstream '{}' answered {}", context_.upstream, code)
                        : reported;
  if (code == 429) {
    failure.http_status = 429;
    failure.endpoint_fault = false;
    failure.retry_after = upstream_retry_after_;
  } else if (code == 408 || code >= 500) {
    failure.http_status = code == 503 || code == 504 ? code : 502;
  } else if (code == 401 || code == 403 || code == 404) {
    // The gateway's own credentials or routing are wrong for that endpoint, not the caller's.
    failure.http_status = 502;
    failure.message =
        fmt::format("the upstream '{}' answered {}: {}", context_.upstream, code, failure.message);
  } else {
    failure.http_status = code >= 400 && code < 500 ? code : 502;
    failure.retryable = false;
    failure.endpoint_fault = false;
  }
  return failure;
}

void GatewayCall::AttemptFailed(std::unique_lock<std::mutex>& lock, Failure failure) {
  const SteadyTime now = clock_.Now();
  const UpstreamRuntime& upstream = *target_->members[member_];
  GatewayMetrics& metrics = *environment_.metrics;
  metrics.upstream_calls.WithLabels({context_.upstream, failure.outcome}).Increment();
  if (failure.endpoint_fault && upstream.state->RecordFailure(now)) {
    metrics.ejections.WithLabels({context_.upstream}).Increment();
    LOG_WARN("gateway: upstream '{}' ejected after {} failures in a row (last: {})",
             context_.upstream, runtime_->config.ejection.consecutive_failures, failure.message);
  }
  if (failure.retry_after.count() >= 0) {
    upstream.state->CoolDown(
        now + std::min<std::chrono::milliseconds>(failure.retry_after, kMaxCoolDown));
  }
  context_.outcome = failure.outcome;
  last_failure_ = failure;
  if (token_sent_) {
    // Tokens reached the caller: no other answer can follow them.
    EndBrokenStream(failure.message);
    Finish(lock);
    return;
  }
  if (!failure.retryable) {
    AnswerError(failure.http_status, failure.message);
    Finish(lock);
    return;
  }
  const RetryConfig& retry = runtime_->config.retry;
  if (target_attempts_ < retry.max_attempts &&
      !environment_.stopping->load(std::memory_order_relaxed)) {
    const bool untried =
        static_cast<size_t>(std::popcount(tried_)) < target_->pool->members().size();
    std::chrono::milliseconds delay(0);
    bool retry_here = true;
    if (!untried) {
      if (failure.retry_after > retry.max_retry_after) {
        retry_here = false;  // too long to wait: a fallback answers sooner
      } else {
        delay = failure.retry_after.count() >= 0 ? failure.retry_after
                                                 : Backoff(retry, target_attempts_);
      }
    }
    if (retry_here) {
      ++context_.retries;
      if (delay.count() == 0) {
        Attempt(lock);
        return;
      }
      const uint64_t waiting = ++attempt_;  // nothing in flight answers meanwhile
      auto self = shared_from_this();
      environment_.timers->Schedule(delay, [self, waiting] {
        std::unique_lock relock(self->mutex_);
        if (self->attempt_ != waiting || self->phase_ == Phase::kDone) return;
        self->Attempt(relock);
      });
      return;
    }
  }
  ++chain_index_;
  NextTarget(lock);
}

void GatewayCall::CallerGone() {
  std::unique_lock lock(mutex_);
  if (phase_ == Phase::kDone) return;
  net::HttpCall abandoned = upstream_call_;
  ++attempt_;
  context_.outcome = "client_gone";
  context_.status = 499;
  if (phase_ == Phase::kStreaming) writer_.Abort();
  responder_.reset();  // a Responder dropped unanswered answers 500 to nobody
  Finish(lock);
  lock.unlock();
  abandoned.Cancel();
}

void GatewayCall::ScheduleTick() {
  if (tick_ != 0) return;
  auto self = shared_from_this();
  tick_ = environment_.timers->Schedule(kTickInterval, [self] { self->Tick(); });
}

void GatewayCall::Tick() {
  std::unique_lock lock(mutex_);
  tick_ = 0;
  if (phase_ == Phase::kDone) return;
  const auto& gone = context_.http.client_gone;
  if (gone && gone->load(std::memory_order_relaxed)) {
    lock.unlock();
    CallerGone();
    return;
  }
  const SteadyTime now = clock_.Now();
  if (context_.request.stream && !token_sent_ && now - last_write_ >= runtime_->config.keep_alive) {
    if (phase_ == Phase::kCalling) BeginStream();
    writer_.Write(": keep-alive\n\n");
    last_write_ = now;
  }
  ScheduleTick();
}

std::vector<std::pair<std::string, std::string>> GatewayCall::CommonHeaders() const {
  return {{"x-request-id", context_.request_id}};
}

void GatewayCall::AnswerWhole(int status, std::string body,
                              std::vector<std::pair<std::string, std::string>> extra_headers) {
  if (!responder_) return;
  net::HttpResponse response;
  response.status = status;
  response.headers = CommonHeaders();
  for (auto& header : extra_headers) response.headers.push_back(std::move(header));
  response.headers.emplace_back("server-timing",
                                fmt::format("gateway;dur={:.3f}, upstream;dur={:.3f}",
                                            static_cast<double>(context_.gateway_ns) / 1e6,
                                            static_cast<double>(context_.upstream_ns) / 1e6));
  response.body = std::move(body);
  responder_->Send(std::move(response));
  responder_.reset();
  context_.status = status;
}

void GatewayCall::AnswerOk(std::string body) {
  if (knowledge_) {
    Result<std::string> cited = WithCitations(body, *knowledge_);
    if (cited.ok()) body = std::move(cited).value();
  }
  const Status passed = environment_.pipeline->Answer(context_, body);
  if (passed.ok()) {
    AnswerWhole(200, std::move(body));
  } else {
    context_.outcome = "refused";
    AnswerError(HttpStatusOf(passed), passed.message(), "", "guard_blocked");
  }
}

void GatewayCall::AnswerError(int status, std::string_view message, std::string_view param,
                              std::string_view code, std::string retry_after,
                              std::vector<std::pair<std::string, std::string>> headers) {
  if (phase_ == Phase::kStreaming) {
    EndBrokenStream(std::string(message));
    return;
  }
  if (!retry_after.empty()) headers.emplace_back("retry-after", std::move(retry_after));
  AnswerWhole(status, ErrorJson(message, ErrorType(status), param, code), std::move(headers));
}

void GatewayCall::Finish(std::unique_lock<std::mutex>& lock) {
  (void)lock;
  if (phase_ == Phase::kDone) return;
  const bool streaming = phase_ == Phase::kStreaming;
  phase_ = Phase::kDone;
  // The tick holds this call: let it go now rather than when it would have fired.
  if (tick_ != 0) environment_.timers->Cancel(std::exchange(tick_, 0));
  if (streaming && !writer_.closed()) writer_.Finish();
  if (context_.status == 0) context_.status = 500;
  if (context_.plan.canary != nullptr) {
    const bool success = context_.status < 500 && chain_index_ == 0 && !context_.broken_stream;
    context_.plan.canary->Record(context_.plan.canary_arm, success,
                                 NanosBetween(context_.received, clock_.Now()));
  }
  environment_.pipeline->Complete(context_);
}

void GatewayCall::AddGatewayTime(SteadyTime since) {
  context_.gateway_ns += NanosBetween(since, clock_.Now());
}

}  // namespace rampart::gateway
