#include "api/http_status.h"

#include "json/writer.h"

namespace rampart::api {

int KServeHttpStatus(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk: return 200;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kUnavailable: return 503;
    case StatusCode::kUnimplemented: return 501;
    case StatusCode::kInternal: return 500;
    case StatusCode::kPayloadTooLarge: return 413;
    // A quota or a tenant's share of a model (docs/quotas.md); gRPC answers RESOURCE_EXHAUSTED.
    case StatusCode::kResourceExhausted: return 429;
    default: return 400;
  }
}

net::HttpResponse KServeError(const Status& status) {
  json::Writer writer;
  writer.StartObject();
  writer.Key("error");
  writer.String(status.message());
  writer.EndObject();
  net::HttpResponse response;
  response.status = KServeHttpStatus(status);
  response.body = writer.Take();
  return response;
}

net::HttpResponse JsonResponse(std::string body, int status) {
  net::HttpResponse response;
  response.status = status;
  response.body = std::move(body);
  return response;
}

net::HttpResponse EmptyResponse(int status) {
  net::HttpResponse response;
  response.status = status;
  response.content_type = "text/plain";
  return response;
}

}  // namespace rampart::api
