#pragma once

// What kserve_json_fuzzer and kserve_binary_fuzzer check after a request decodes.

#include <utility>
#include <vector>

#include "api/kserve_codec.h"
#include "fuzz_check.h"

namespace rampart::fuzz {

// Encodes the decoded inputs as a response's outputs (what an identity model would answer), once
// all as JSON and once all binary: JSON refuses only FP16 and BF16; binary always succeeds and
// appends each output's bytes after the JSON header.
inline void EncodeAsResponse(std::vector<tensor::Tensor> tensors) {
  serve::InferResponse response;
  response.model_name = "identity";
  response.outputs = std::move(tensors);
  bool json_capable = true;
  size_t binary_bytes = 0;
  for (const tensor::Tensor& output : response.outputs) {
    json_capable = json_capable && output.datatype != tensor::DataType::kFp16 &&
                   output.datatype != tensor::DataType::kBf16;
    binary_bytes += output.data.size();
  }
  Result<api::EncodedInfer> as_json = api::EncodeInferResponse(response, api::OutputEncoding{});
  Check(as_json.ok() == json_capable, "JSON encoding of decoded inputs");
  if (as_json.ok()) Check(!as_json->header_length, "JSON answer with a binary header length");

  api::OutputEncoding binary;
  binary.all_binary = true;
  Result<api::EncodedInfer> as_binary = api::EncodeInferResponse(response, binary);
  Check(as_binary.ok(), "binary encoding of decoded inputs");
  if (!response.outputs.empty()) {
    Check(as_binary->header_length.has_value() &&
              *as_binary->header_length + binary_bytes == as_binary->body.size(),
          "binary answer's header length and body size");
  }
}

}  // namespace rampart::fuzz
