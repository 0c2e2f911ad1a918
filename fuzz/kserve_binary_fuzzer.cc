// libFuzzer target: the KServe v2 HTTP infer request decoder (api/kserve_codec.h) with Triton's
// binary tensor data extension: a JSON header of Inference-Header-Content-Length bytes, then the
// inputs' raw bytes.
//
// Input layout: the first two bytes (little-endian) are the header length, the rest is the body,
// so the fuzzer moves the split point as freely as the bytes on either side of it. The header
// value is sent as the decimal text a client would send; lengths past the body's end are kept (the
// decoder must refuse them). The checks are kserve_json_fuzzer's.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "api/kserve_codec.h"
#include "kserve_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const unsigned header_length = data[0] | (unsigned{data[1]} << 8);
  const std::string header_value = std::to_string(header_length);
  const std::string_view body(reinterpret_cast<const char*>(data) + 2, size - 2);
  rampart::Result<rampart::api::DecodedInfer> decoded =
      rampart::api::DecodeInferRequest(body, header_value);
  if (!decoded.ok()) return 0;
  // Inputs the model would refuse go no further.
  if (!rampart::fuzz::InputsFitShapes(*decoded->request)) return 0;
  // Binary outputs are sent as they are; JSON ones must still encode (or refuse FP16/BF16).
  rampart::fuzz::EncodeAsResponse(std::move(decoded->request->inputs));
  return 0;
}
