#pragma once

// What kserve_json_fuzzer and kserve_binary_fuzzer check after a request decodes.

#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <simdjson.h>

#include "api/kserve_codec.h"
#include "fuzz_check.h"

namespace rampart::fuzz {

// Whether JSON carries `tensor` exactly: not NaN or infinite floats (written as NaN and Infinity,
// which JSON lacks), not BYTES elements that are not UTF-8 (written as they are, as Triton does).
inline bool JsonCarriesExactly(const tensor::Tensor& tensor) {
  const auto all_finite = [&]<typename T>(T) {
    for (size_t i = 0; i + sizeof(T) <= tensor.data.size(); i += sizeof(T)) {
      T value;
      std::memcpy(&value, tensor.data.data() + i, sizeof(T));
      if (!std::isfinite(value)) return false;
    }
    return true;
  };
  switch (tensor.datatype) {
    case tensor::DataType::kFp32: return all_finite(float{});
    case tensor::DataType::kFp64: return all_finite(double{});
    case tensor::DataType::kBytes: {
      Result<std::vector<std::string_view>> elements = tensor::SplitBytesElements(tensor.data);
      if (!elements.ok()) return false;
      for (std::string_view element : *elements) {
        if (!simdjson::validate_utf8(element.data(), element.size())) return false;
      }
      return true;
    }
    default: return true;
  }
}

// An answer's "outputs" are written as a request's "inputs" are read: decoding the JSON answer as
// a request gives back `tensors` (BOOL bytes other than 0 read back as 1).
inline void CheckJsonReadsBack(const std::vector<tensor::Tensor>& tensors, std::string answer) {
  for (const tensor::Tensor& tensor : tensors) {
    if (!JsonCarriesExactly(tensor)) return;
  }
  constexpr std::string_view kOutputs = "\"outputs\":";
  const size_t at = answer.find(kOutputs);
  Check(at != std::string::npos, "a JSON answer without outputs");
  answer.replace(at, kOutputs.size(), "\"inputs\":");
  Result<api::DecodedInfer> decoded = api::DecodeInferRequest(answer, std::nullopt);
  Check(decoded.ok(), "a JSON answer does not read back as a request");
  const std::vector<tensor::Tensor>& read = decoded->request->inputs;
  Check(read.size() == tensors.size(), "a JSON answer reads back with another number of tensors");
  for (size_t i = 0; i < read.size(); ++i) {
    Check(read[i].name == tensors[i].name && read[i].datatype == tensors[i].datatype &&
              read[i].shape == tensors[i].shape,
          "a JSON answer reads back with another name, datatype or shape");
    std::string expected = tensors[i].data;
    if (tensors[i].datatype == tensor::DataType::kBool) {
      for (char& byte : expected) byte = byte != 0 ? 1 : 0;
    }
    Check(read[i].data == expected, "a JSON answer reads back with other values");
  }
}

// Encodes the decoded inputs as a response's outputs (what an identity model would answer), once
// all as JSON and once all binary: JSON refuses only FP16 and BF16 and reads back as written;
// binary always succeeds and appends each output's bytes after the JSON header.
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
  if (as_json.ok()) {
    Check(!as_json->header_length, "JSON answer with a binary header length");
    CheckJsonReadsBack(response.outputs, std::move(as_json->body));
  }

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
