// GatewayCall's local targets: models of Rampart's own repository (embeddings).

#include "gateway/call.h"

namespace rampart::gateway {

void GatewayCall::CallLocal(std::unique_lock<std::mutex>& lock, const TargetRuntime& target) {
  const OpenAiRequest& request = context_.request;
  context_.upstream = "local";
  ++context_.attempts;
  if (request.operation != Operation::kEmbeddings) {
    AnswerError(400,
                fmt::format("the model '{}' is a local embedding model; call /v1/embeddings",
                            request.model),
                "model");
    context_.outcome = "refused";
    Finish(lock);
    return;
  }
  for (const std::string& field : request.fields) {
    if (field != "model" && field != "input" && field != "encoding_format" &&
        field != "dimensions" && field != "user") {
      AnswerError(
          400, fmt::format("'{}' is not supported by the local model '{}'", field, request.model),
          field);
      context_.outcome = "refused";
      Finish(lock);
      return;
    }
  }
  if (environment_.local == nullptr) {
    last_failure_ = Failure{.http_status = 503,
                            .message = "local models are not served (no model repository)",
                            .outcome = "local_unavailable"};
    ++chain_index_;
    NextTarget(lock);
    return;
  }
  attempt_sent_ = clock_.Now();
  auto self = shared_from_this();
  const uint64_t attempt = ++attempt_;
  lock.unlock();
  LocalEmbeddings(*environment_.local, target.config->local_model, request, request.model,
                  context_.identity.tenant, [self, attempt](Result<LocalAnswer> answer) {
                    self->LocalDone(attempt, std::move(answer));
                  });
  lock.lock();
}

void GatewayCall::LocalDone(uint64_t attempt, Result<LocalAnswer> answer) {
  const SteadyTime start = clock_.Now();
  std::unique_lock lock(mutex_);
  if (attempt != attempt_ || phase_ == Phase::kDone) return;
  context_.upstream_ns += NanosBetween(attempt_sent_, start);
  if (answer.ok()) {
    context_.usage = answer->usage;
    AnswerOk(std::move(answer->body));
    AddGatewayTime(start);
    Finish(lock);
    return;
  }
  const Status& status = answer.status();
  if (status.code() == StatusCode::kInvalidArgument ||
      status.code() == StatusCode::kFailedPrecondition) {
    AnswerError(400, status.message());
    context_.outcome = "refused";
    AddGatewayTime(start);
    Finish(lock);
    return;
  }
  last_failure_ = Failure{.http_status = HttpStatusOf(status) == 404 ? 503 : HttpStatusOf(status),
                          .message = status.message(),
                          .outcome = "local_error"};
  ++chain_index_;
  NextTarget(lock);
  AddGatewayTime(start);
}

}  // namespace rampart::gateway
