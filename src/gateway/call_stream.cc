// GatewayCall's streaming half: each event of an upstream's stream on its way to the caller.

#include "gateway/call.h"

namespace rampart::gateway {
namespace {

// Events held back before the first token (a role-only first chunk is one); past this many the
// stream is committed anyway.
constexpr size_t kMaxHeldEvents = 16;

}  // namespace

void GatewayCall::Resume(uint64_t attempt) {
  std::unique_lock lock(mutex_);
  if (attempt != attempt_ || !paused_ || phase_ == Phase::kDone) return;
  paused_ = false;
  net::HttpCall call = upstream_call_;
  lock.unlock();
  call.Resume();
}

void GatewayCall::OnEvent(std::string_view data, bool& keep_reading) {
  if (stream_error_ || refused_ || done_seen_ || phase_ == Phase::kDone) return;
  Result<StreamEvent> event = InspectStreamEvent(data, context_.operation);
  if (!event.ok()) {
    stream_error_ =
        fmt::format("the upstream sent a malformed event: {}", event.status().message());
    return;
  }
  if (event->error) {
    stream_error_ = *event->error;
    return;
  }
  const SteadyTime now = clock_.Now();
  if (event->done) {
    done_seen_ = true;
    token_sent_ = true;  // a stream with no tokens at all is still a whole answer
    for (std::string& held : held_) keep_reading = Forward(std::move(held)) && keep_reading;
    held_.clear();
    keep_reading = ForwardEnd() && keep_reading;
    if (refused_) return;
    keep_reading = Forward(std::string(data)) && keep_reading;
    return;
  }
  if (event->usage) {
    context_.usage = *event->usage;
    usage_seen_ = true;
  }
  finish_seen_ = finish_seen_ || event->finished;
  completion_chars_ += event->content_chars;
  if (event->usage_only && !context_.request.include_usage) return;  // asked for by the gateway
  if (!token_sent_) {
    if (!event->token && held_.size() < kMaxHeldEvents) {
      held_.emplace_back(data);
      return;
    }
    token_sent_ = true;
    context_.first_token_ns = NanosBetween(context_.received, now);
    last_token_ = now;
    for (std::string& held : held_) keep_reading = Forward(std::move(held)) && keep_reading;
    held_.clear();
  } else if (event->token) {
    environment_.metrics->inter_token_latency.WithLabels({context_.target})
        .Observe(static_cast<double>(NanosBetween(last_token_, now)) / 1e9);
    last_token_ = now;
  }
  keep_reading = Forward(CiteInChunk(std::string(data), event->finished)) && keep_reading;
}

bool GatewayCall::Forward(std::string data) {
  if (refused_) return false;
  if (phase_ == Phase::kCalling) BeginStream();
  if (phase_ != Phase::kStreaming) return true;
  const Status passed = environment_.pipeline->Answer(context_, data);
  if (!passed.ok()) {
    refused_ = passed;
    return false;
  }
  return WriteEvent(std::move(data));
}

bool GatewayCall::ForwardEnd() {
  if (refused_) return false;
  if (phase_ == Phase::kCalling) BeginStream();
  if (phase_ != Phase::kStreaming) return true;
  bool keep_reading = true;
  if (std::optional<std::string> citations = PendingCitations()) {
    keep_reading = Forward(std::move(*citations));
    if (refused_) return false;
  }
  Result<std::vector<std::string>> events = environment_.pipeline->AnswerEnd(context_);
  if (!events.ok()) {
    refused_ = events.status();
    return false;
  }
  for (std::string& event : *events) keep_reading = WriteEvent(std::move(event)) && keep_reading;
  return keep_reading;
}

void GatewayCall::RefuseAnswer(std::unique_lock<std::mutex>& lock) {
  net::HttpCall abandoned = upstream_call_;
  ++attempt_;
  context_.outcome = "refused";
  if (phase_ == Phase::kStreaming) {
    writer_.Write(
        "data: " +
        ErrorJson(refused_->message(), ErrorType(HttpStatusOf(*refused_)), "", "guard_blocked") +
        "\n\n");
    writer_.Finish();
  } else {
    AnswerError(HttpStatusOf(*refused_), refused_->message(), "", "guard_blocked");
  }
  Finish(lock);
  lock.unlock();
  abandoned.Cancel();
}

bool GatewayCall::WriteEvent(std::string data) {
  std::string event;
  event.reserve(data.size() + 8);
  event.append("data: ").append(data).append("\n\n");
  last_write_ = clock_.Now();
  return writer_.Write(std::move(event)) != net::StreamWriter::kFull;
}

void GatewayCall::BeginStream() {
  net::HttpResponseHead head;
  head.status = 200;
  head.content_type = "text/event-stream";
  head.headers = CommonHeaders();
  head.headers.emplace_back("cache-control", "no-cache");
  head.headers.emplace_back(
      "server-timing",
      fmt::format("gateway;dur={:.3f}", static_cast<double>(context_.gateway_ns) / 1e6));
  head.max_queued_bytes = runtime_->config.max_stream_queue_bytes;
  writer_ = responder_->StartStream(std::move(head));
  responder_.reset();
  phase_ = Phase::kStreaming;
  context_.status = 200;
  // A caller gone mid-stream ends the call at once (on the timer thread: never under the lock).
  std::weak_ptr<GatewayCall> weak = weak_from_this();
  Timers* timers = environment_.timers;
  writer_.OnClosed([weak, timers] {
    timers->Schedule(std::chrono::nanoseconds(0), [weak] {
      if (auto self = weak.lock()) self->CallerGone();
    });
  });
}

void GatewayCall::EndBrokenStream(const std::string& message) {
  if (phase_ != Phase::kStreaming) return;
  writer_.Write("data: " + ErrorJson(message, "server_error", "", "upstream_error") + "\n\n");
  writer_.Finish();
  context_.broken_stream = token_sent_;
}

void GatewayCall::FinishStream() {
  for (std::string& held : held_) Forward(std::move(held));
  held_.clear();
  if (!done_seen_) ForwardEnd();
  if (phase_ == Phase::kCalling) BeginStream();
  if (refused_) {
    context_.outcome = "refused";
    writer_.Write(
        "data: " +
        ErrorJson(refused_->message(), ErrorType(HttpStatusOf(*refused_)), "", "guard_blocked") +
        "\n\n");
  } else if (!done_seen_) {
    writer_.Write("data: [DONE]\n\n");
  }
  writer_.Finish();
}

}  // namespace rampart::gateway
