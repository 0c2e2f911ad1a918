#pragma once

// Checks shared by the fuzz targets: a failed check aborts, which libFuzzer reports as a crash
// with its input.

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "serve/request.h"
#include "tensor/tensor.h"

namespace rampart::fuzz {

// Aborts with `what` when `condition` is false.
inline void Check(bool condition, std::string_view what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz check failed: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

// Whether every decoded input has the bytes its shape needs; the datatype must be known. The
// decoders count JSON `data` and typed gRPC contents themselves but leave the size of binary and
// raw data to the model's check (ModelVersion::Validate refuses the request, as Triton does).
inline bool InputsFitShapes(const serve::InferRequest& request) {
  for (const tensor::Tensor& input : request.inputs) {
    Check(input.datatype != tensor::DataType::kInvalid, "decoded input without a datatype");
    if (!tensor::HasExpectedByteSize(input.datatype, input.shape, input.data)) return false;
  }
  return true;
}

}  // namespace rampart::fuzz
