// libFuzzer target: the KServe v2 HTTP infer request decoder (api/kserve_codec.h) on a JSON body
// sent without Inference-Header-Content-Length, as POST /v2/models/{m}/infer hands it over.
//
// Beyond "no crash": a request whose inputs hold the bytes their shapes need (the model refuses
// the others) encodes back as an identity model's answer, in JSON (refused only for FP16 and
// BF16) and binary, and the JSON answer decodes, as a request, to the same tensors.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "api/kserve_codec.h"
#include "kserve_checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  rampart::Result<rampart::api::DecodedInfer> decoded =
      rampart::api::DecodeInferRequest(body, std::nullopt);
  if (!decoded.ok()) return 0;
  // Inputs the model would refuse go no further.
  if (!rampart::fuzz::InputsFitShapes(*decoded->request)) return 0;
  rampart::fuzz::EncodeAsResponse(std::move(decoded->request->inputs));
  return 0;
}
