#pragma once

// Ensembles (`platform: "ensemble"` with `ensemble_scheduling` steps,
// docs/triton-compatibility.md).
//
// The steps form a data-flow graph over named ensemble tensors: a step runs as soon as every
// tensor its input_map names exists, as an ordinary request to its model through the
// InferenceServer, so steps go through their models' own schedulers and batch with other
// traffic, and independent branches run concurrently. Nothing blocks: each step's completion
// launches the steps it unblocks. As in Triton: the steps' models are resolved when the request
// starts and held until it is answered (an unload or reload meanwhile does not fail the steps
// still to run); each step's request carries the ensemble request's priority and timeout; an
// intermediate tensor is freed once the last step reading it has started; and the ensemble's
// statistics count the request as one execution of its batch, with the steps' queue and compute
// times added up. The response reports each step's start and end (relative to the request's
// arrival) and the alignment latency: the spread between the finish times of the graph's final
// steps (its parallel branches).

#include <memory>
#include <vector>

#include "model/config.h"
#include "serve/request.h"

namespace rampart::serve {

class InferenceServer;
class ModelVersion;

// Checks the steps at load: each names a model and maps inputs and outputs; every tensor a step
// reads is an ensemble input or another step's output; each tensor has one producer; every
// ensemble output is produced; the graph has no cycle. Errors: InvalidArgument naming the step.
Status ValidateEnsemble(const model::ModelConfig& config);

// Checks an ensemble against its step models' configs (`step_configs[i]` for step i), as Triton
// does when it loads one: every input_map key is an input of the step's model and every
// output_map key an output, and each ensemble tensor has one data type wherever it appears (an
// ensemble input or output, and each step input or output mapped to it). Errors:
// InvalidArgument naming the step and tensor.
Status CheckEnsembleTensors(const model::ModelConfig& config,
                            const std::vector<const model::ModelConfig*>& step_configs);

// Runs a validated request through `ensemble`. `done` is called exactly once.
void RunEnsemble(InferenceServer& server, std::shared_ptr<ModelVersion> ensemble,
                 std::unique_ptr<InferRequest> request, InferCallback done);

}  // namespace rampart::serve
