#pragma once

// Embeddings from a model of Rampart's own repository: each input text becomes one inference
// request (a BYTES tensor holding the text), so the model's dynamic batcher groups them, and the
// first FP32 output of each is one embedding. The answer is OpenAI's embeddings list, as floats
// or as base64 of little-endian float32 (what the official SDKs ask for by default).
// `dimensions` shortens each vector to its first n values, renormalised to unit length, as
// OpenAI's text-embedding-3 models do.

#include <string>

#include "core/status.h"
#include "core/unique_function.h"
#include "gateway/openai_request.h"
#include "gateway/openai_response.h"
#include "serve/server.h"

namespace rampart::gateway {

struct LocalAnswer {
  std::string body;  // the JSON answer
  Usage usage;       // prompt tokens estimated from the text
};

// Runs `request` (an embeddings request) on `model`; `done` is called once, on a server thread
// or at once. Errors: InvalidArgument for inputs a local model cannot take (token ids, a larger
// `dimensions` than the model's), NotFound/Unavailable when the model is not serving (a
// fallback may answer), or the inference's own error.
// `tenant` is the caller's (its share of the model's instance time; empty when access is open).
void LocalEmbeddings(serve::InferenceServer& server, const std::string& model,
                     const OpenAiRequest& request, const std::string& response_model,
                     const std::string& tenant, UniqueFunction<void(Result<LocalAnswer>)> done);

// Base64 (RFC 4648, with padding) of `bytes`.
std::string Base64Encode(std::string_view bytes);

}  // namespace rampart::gateway
