#include "api/access_http.h"

#include "api/http_status.h"
#include "api/pinecone_codec.h"
#include "core/trace.h"
#include "gateway/access_stages.h"
#include "gateway/gateway.h"
#include "gateway/openai_response.h"

namespace rampart::api {

policy::AccessOutcome CheckRequest(const policy::AccessControl& access,
                                   const net::HttpRequest& request, std::string_view action,
                                   const policy::Resource& resource, int64_t tokens) {
  return access.Check(gateway::CredentialsOf(request), action, resource, tokens);
}

net::HttpResponse RefusalResponse(const policy::AccessRefusal& refusal,
                                  const net::HttpRequest& request, ErrorShape shape) {
  const std::string request_id = gateway::RequestId(request, TraceContext::Start());
  const int status = refusal.http_status();
  const std::string message = refusal.AnswerMessage(request_id);
  net::HttpResponse response;
  if (shape == ErrorShape::kKServe) {
    response = KServeError(Status(StatusCode::kPermissionDenied, message));
  } else if (shape == ErrorShape::kPinecone) {
    response.body = pinecone::ErrorJson(status, message);
  } else {
    response.body = gateway::ErrorJson(message, gateway::ErrorType(status), "", "");
  }
  response.status = status;
  response.headers = refusal.HttpHeaders();
  response.headers.emplace_back("x-request-id", request_id);
  return response;
}

}  // namespace rampart::api
