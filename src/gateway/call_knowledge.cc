// GatewayCall's answers from a knowledge base (gateway/knowledge.h): the search, the prompt with
// the sources, the citations on the answer, and the answer when no passage answers.

#include <chrono>

#include "gateway/call.h"

namespace rampart::gateway {
namespace {

int64_t UnixSecondsNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void GatewayCall::SearchKnowledge(std::unique_lock<std::mutex>& lock) {
  const KnowledgePlan& plan = *context_.plan.knowledge;
  context_.knowledge_store = plan.vector_store;
  const auto refuse = [&](int status, std::string_view message, std::string_view param,
                          std::string_view code = {}) {
    context_.outcome = "refused";
    AnswerError(status, message, param, code);
    Finish(lock);
  };
  if (context_.operation != Operation::kChatCompletions) {
    refuse(400,
           fmt::format("the model '{}' answers from a knowledge base: call /v1/chat/completions",
                       context_.request.model),
           "model");
    return;
  }
  if (environment_.vector_stores == nullptr || environment_.knowledge_workers == nullptr) {
    refuse(404, "knowledge base is not configured", "model", "model_not_found");
    return;
  }
  if (context_.request.routed_text.empty()) {
    refuse(400, "an answer from a knowledge base needs a user message with text to search for",
           "messages");
    return;
  }
  knowledge::hub::SearchRequest search;
  search.queries = {context_.request.routed_text};
  search.max_num_results = plan.max_passages;
  search.score_threshold = plan.score_threshold;
  search.may_read = KnowledgeMayRead(
      environment_.access, context_.identity,
      context_.http.peer != nullptr ? std::string_view(context_.http.peer->address) : "");
  search_started_ = clock_.Now();
  // The task never runs before Post returns under this lock: the worker waits for it.
  const Status posted = environment_.knowledge_workers->Post(
      [self = shared_from_this(), stores = environment_.vector_stores,
       tenant = context_.identity.tenant, store = plan.vector_store, search = std::move(search)] {
        self->KnowledgeFound(stores->Search(tenant, store, search));
      });
  if (!posted.ok()) {
    context_.outcome = "search_refused";
    AnswerError(HttpStatusOf(posted), posted.message());
    Finish(lock);
  }
}

void GatewayCall::KnowledgeFound(Result<knowledge::hub::SearchResults> found) {
  const SteadyTime start = clock_.Now();
  std::unique_lock lock(mutex_);
  if (phase_ == Phase::kDone) return;  // the caller went away meanwhile
  context_.search_ns = NanosBetween(search_started_, start);
  const KnowledgePlan& plan = *context_.plan.knowledge;
  if (!found.ok()) {
    const Status& status = found.status();
    if (status.code() == StatusCode::kNotFound) {
      context_.outcome = "not_found";
      AnswerError(404, fmt::format("No vector store found with id '{}'.", plan.vector_store),
                  "model");
    } else if (status.code() == StatusCode::kInvalidArgument) {
      context_.outcome = "refused";
      AnswerError(400, status.message());
    } else {
      context_.outcome = "search_failed";
      const int code = HttpStatusOf(status);
      AnswerError(code >= 500 ? code : 500,
                  fmt::format("the knowledge base search failed: {}", status.message()));
    }
    AddGatewayTime(start);
    Finish(lock);
    return;
  }
  auto sources = std::make_shared<KnowledgeSources>();
  sources->vector_store = plan.vector_store;
  for (knowledge::hub::SearchHit& hit : found->hits) {
    if (static_cast<int>(sources->hits.size()) >= plan.max_passages) break;
    if (hit.score < plan.score_threshold) continue;
    if (std::find(context_.knowledge_files.begin(), context_.knowledge_files.end(), hit.file_id) ==
        context_.knowledge_files.end()) {
      context_.knowledge_files.push_back(hit.file_id);
    }
    sources->hits.push_back(std::move(hit));
  }
  if (sources->hits.empty()) {
    AnswerNoSource(lock);
    AddGatewayTime(start);
    return;
  }
  Result<std::string> body = KnowledgeRequestBody(context_.request.body, KnowledgePrompt(*sources));
  if (!body.ok()) {
    context_.outcome = "refused";
    AnswerError(400, body.status().message(), "messages");
    AddGatewayTime(start);
    Finish(lock);
    return;
  }
  context_.request.prompt_chars +=
      body->size() - std::min(body->size(), context_.request.body.size());
  context_.request.body = std::move(body).value();
  knowledge_ = std::move(sources);
  NextTarget(lock);
  AddGatewayTime(start);
}

void GatewayCall::AnswerNoSource(std::unique_lock<std::mutex>& lock) {
  context_.usage = Usage{};
  const std::string id = "chatcmpl-" + context_.request_id;
  const int64_t created = UnixSecondsNow();
  if (!context_.request.stream) {
    AnswerOk(NoSourceAnswer(id, context_.request.model, created));
    Finish(lock);
    return;
  }
  token_sent_ = true;
  context_.first_token_ns = NanosBetween(context_.received, clock_.Now());
  for (std::string& event :
       NoSourceStream(id, context_.request.model, created, context_.request.include_usage)) {
    Forward(std::move(event));
  }
  FinishStream();
  Finish(lock);
}

std::string GatewayCall::CiteInChunk(std::string data, bool finished) {
  if (!knowledge_ || citations_sent_ || !finished) return data;
  Result<std::string> cited = WithCitations(data, *knowledge_);
  if (!cited.ok()) return data;
  citations_sent_ = true;
  return std::move(cited).value();
}

std::optional<std::string> GatewayCall::PendingCitations() {
  if (!knowledge_ || citations_sent_) return std::nullopt;
  citations_sent_ = true;
  return CitationsChunk("chatcmpl-" + context_.request_id, context_.request.model, UnixSecondsNow(),
                        *knowledge_);
}

}  // namespace rampart::gateway
