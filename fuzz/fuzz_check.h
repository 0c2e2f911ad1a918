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

// Every decoded input has a known datatype and exactly the bytes its shape needs.
inline void CheckDecodedInputs(const serve::InferRequest& request) {
  for (const tensor::Tensor& input : request.inputs) {
    Check(input.datatype != tensor::DataType::kInvalid, "decoded input without a datatype");
    Check(tensor::HasExpectedByteSize(input.datatype, input.shape, input.data),
          "decoded input's bytes do not match its shape");
  }
}

}  // namespace rampart::fuzz
