#pragma once

// BatchAssembly: what a model's backend receives for a batch of requests, and how its outputs
// go back to the requests.
//
// The rules (Triton's dynamic batcher, and Triton's ragged batching for the PyTorch backend):
// 1. Each config input of the batch's requests is concatenated along dim 0; the requests share
//    every other dim (the BatchQueue batches them together only then).
// 2. An input with `allow_ragged_batch` is flattened instead: the requests' elements one after
//    another in a tensor of one dimension, whatever their shapes (the BatchQueue does not
//    compare them). The model finds each request's part through a batch input.
// 3. Then one tensor per `batch_input` target name, in config order, made from each request's
//    `source_input`. With R requests and n_r the element count of request r's source input (all
//    of its dims):
//      BATCH_ELEMENT_COUNT                        [R]      n_r
//      BATCH_ACCUMULATED_ELEMENT_COUNT            [R]      n_0 + ... + n_r
//      BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO  [R + 1]  0, then the same
//      BATCH_MAX_ELEMENT_COUNT_AS_SHAPE           [max n_r]  zeros: only the shape tells
//      BATCH_ITEM_SHAPE                           [items, rank - 1]  each batch item's dims
//      BATCH_ITEM_SHAPE_FLATTEN                   [items * (rank - 1)]  the same, flat
//    as INT32 or FP32, as the config says (model::BackendInputs gives the order).
// 4. A batch of one request goes to the backend, and its outputs back, as they are when none of
//    2, 3 and 6 applies.
// 5. Each output is split along dim 0 by the requests' batch items (SplitOutput),
// 6. except a `batch_output` target (BATCH_SCATTER_WITH_INPUT_SHAPE): request r's part has the
//    output's config shape (dim 0 the batch) with each -1 taken from the same dim of r's
//    `source_input`, and the parts follow one another in the model's output, as in Triton.
// 7. Then each request's outputs are answered in their config shapes (Finish): an output with a
//    `reshape` gets its dims in place of the reshape's, as Triton reshapes outputs; the outputs
//    of rule 4's lone request must have its batch items as dim 0, as rule 5 requires of a batch
//    (a model answering a scalar or a reduced batch fails either way); and every output's bytes
//    must be what its shape holds (for BYTES, that many well-formed elements).
//
// Thread safety: const after construction.

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/config.h"
#include "tensor/tensor.h"

namespace rampart::serve {

class BatchAssembly {
 public:
  // Plain concatenation (rules 1, 4, 5).
  BatchAssembly() = default;
  // From a validated config: its ragged inputs, batch inputs and batch outputs.
  static BatchAssembly FromConfig(const model::ModelConfig& config);

  bool IsRagged(std::string_view input) const;
  // True when a lone request's inputs and outputs need no change (rule 4).
  bool PassThrough() const {
    return ragged_.empty() && batch_inputs_.empty() && batch_outputs_.empty();
  }

  // The backend's inputs for a batch: `requests` holds each request's inputs (config order, the
  // same names in each; the tensors may be moved from), `items` each request's batch items.
  std::vector<tensor::Tensor> Assemble(const std::vector<std::vector<tensor::Tensor>*>& requests,
                                       const std::vector<int64_t>& items) const;

  // Rule 7 for one request's outputs, `items` its batch items; `passed_through`: rule 4 applied.
  // Errors: Internal naming the output.
  Status Finish(std::vector<tensor::Tensor>& outputs, int64_t items, bool passed_through) const;

  // Each request's part of each output, parts[r][o] (rules 5 and 6; the caller handles rule 4's
  // lone request). `requests` as for
  // Assemble, afterwards (their shapes are read). Errors: Internal when an output does not hold
  // what the requests' shapes need.
  Result<std::vector<std::vector<tensor::Tensor>>> Scatter(
      std::vector<tensor::Tensor>& outputs,
      const std::vector<std::vector<tensor::Tensor>*>& requests,
      const std::vector<int64_t>& items) const;

 private:
  struct BatchInput {
    inference::BatchInput::Kind kind;
    std::vector<std::string> targets;
    tensor::DataType datatype;  // kInt32 or kFp32
    std::string source;
  };
  // Rule 3 for one batch input (unnamed: each target gets a copy), from the requests' source
  // tensors.
  static tensor::Tensor Make(const BatchInput& spec,
                             const std::vector<const tensor::Tensor*>& sources);

  struct BatchOutput {
    std::string target;
    std::string source;
    tensor::Shape shape;  // the output's config dims, after -1 for the batch when it batches
  };
  const BatchOutput* FindBatchOutput(std::string_view output) const;

  std::vector<std::string> ragged_;
  std::vector<BatchInput> batch_inputs_;
  std::vector<BatchOutput> batch_outputs_;
  std::vector<inference::ModelOutput> reshaped_outputs_;  // config outputs with a reshape
  bool batching_ = false;                                 // max_batch_size > 0
};

// Splits one batched output into one tensor per request, by each request's batch items (`total`
// their sum). Errors: Internal when the output's dim 0 is not `total`.
Result<std::vector<tensor::Tensor>> SplitOutput(const tensor::Tensor& output,
                                                const std::vector<int64_t>& items, int64_t total);

}  // namespace rampart::serve
