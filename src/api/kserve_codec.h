#pragma once

// KServe v2 infer bodies over HTTP: JSON tensors (flat or nested `data`) and Triton's binary
// tensor extension, in both directions (docs/triton-compatibility.md).
//
// Pure functions of their arguments; safe from any thread (each thread keeps its own JSON parser).

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "serve/request.h"

namespace rampart::api {

// How the caller wants outputs encoded. As in Triton, an output the request lists is binary only
// when its own `binary_data` says so; `binary_data_output` applies to the outputs it does not list.
struct OutputEncoding {
  bool all_binary = false;  // request parameter binary_data_output
  // Every listed output, with its outputs[].parameters.binary_data (false when absent).
  std::vector<std::pair<std::string, bool>> per_output;
  bool Binary(std::string_view output) const;
};

struct DecodedInfer {
  std::unique_ptr<serve::InferRequest> request;
  OutputEncoding encoding;
};

// Decodes an infer request body. `header_length` is the Inference-Header-Content-Length value
// when the header was sent (the JSON part's size; the rest of the body is binary tensor data).
// Errors: InvalidArgument naming the field or tensor.
Result<DecodedInfer> DecodeInferRequest(std::string_view body,
                                        std::optional<std::string_view> header_length);

struct EncodedInfer {
  std::string body;
  // Set when binary outputs follow the JSON: the JSON part's size, for
  // Inference-Header-Content-Length.
  std::optional<size_t> header_length;
};

// Encodes a response. Errors: InvalidArgument for an output that cannot travel as JSON (FP16,
// BF16: ask for binary_data).
Result<EncodedInfer> EncodeInferResponse(const serve::InferResponse& response,
                                         const OutputEncoding& encoding);

}  // namespace rampart::api
