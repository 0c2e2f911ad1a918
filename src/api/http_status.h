#pragma once

// The one place a Status becomes a KServe HTTP error (docs/triton-compatibility.md):
// NotFound 404, Unavailable 503, Unimplemented 501, Internal 500, PayloadTooLarge 413,
// ResourceExhausted 429, everything else 400; the body is {"error":"<message>"}.

#include <string>

#include "core/status.h"
#include "net/http.h"

namespace rampart::api {

int KServeHttpStatus(const Status& status);
net::HttpResponse KServeError(const Status& status);

// A JSON body (already serialized) with `status`.
net::HttpResponse JsonResponse(std::string body, int status = 200);
// An empty body (health and ready answers, load/unload success).
net::HttpResponse EmptyResponse(int status);

}  // namespace rampart::api
