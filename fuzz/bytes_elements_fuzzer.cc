// libFuzzer target: splitting a serialized BYTES tensor (tensor/tensor.h) into its elements, as
// every front end does with a client's BYTES data (binary HTTP data, gRPC raw contents).
//
// Checks: a split that succeeds gives elements that serialize back to exactly the input; the
// size checks (ValidateByteSize, HasExpectedByteSize) agree with the split for the element count
// it found and refuse any other count, and refuse every count when the split fails.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "tensor/tensor.h"

namespace {

using rampart::fuzz::Check;
using rampart::tensor::DataType;

bool Accepts(const std::string_view data, int64_t count) {
  const rampart::tensor::Shape shape{count};
  const bool has = rampart::tensor::HasExpectedByteSize(DataType::kBytes, shape, data);
  const bool valid = rampart::tensor::ValidateByteSize("fuzz", DataType::kBytes, shape, data).ok();
  Check(has == valid, "HasExpectedByteSize and ValidateByteSize disagree");
  return has;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view buffer(reinterpret_cast<const char*>(data), size);
  rampart::Result<std::vector<std::string_view>> elements =
      rampart::tensor::SplitBytesElements(buffer);
  if (!elements.ok()) {
    Check(!Accepts(buffer, 0) && !Accepts(buffer, 1), "a malformed buffer passed the size check");
    return 0;
  }
  std::string serialized;
  serialized.reserve(size);
  for (std::string_view element : *elements) {
    Check(element.data() >= buffer.data() &&
              element.data() + element.size() <= buffer.data() + buffer.size(),
          "an element points outside the buffer");
    Check(rampart::tensor::AppendBytesElement(element, serialized).ok(),
          "an element of a split buffer does not serialize");
  }
  Check(serialized == buffer, "the elements do not serialize back to the buffer");
  const auto count = static_cast<int64_t>(elements->size());
  Check(Accepts(buffer, count), "the size check refuses the split's own count");
  Check(!Accepts(buffer, count + 1), "the size check accepts one element too many");
  if (count > 0) Check(!Accepts(buffer, count - 1), "the size check accepts one element too few");
  return 0;
}
