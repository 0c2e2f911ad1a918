#pragma once

// Ensembles (`platform: "ensemble"` with `ensemble_scheduling` steps, PROTOCOLS.md §1).
//
// The steps form a data-flow graph over named ensemble tensors: a step runs as soon as every
// tensor its input_map names exists, as an ordinary request to its model through the
// InferenceServer, so steps go through their models' own schedulers and batch with other
// traffic, and independent branches run concurrently. Nothing blocks: each step's completion
// launches the steps it unblocks. The response reports each step's start and end (relative to
// the request's arrival) and the alignment latency: the spread between the finish times of the
// graph's final steps (its parallel branches).

#include <memory>

#include "model/config.h"
#include "serve/request.h"

namespace rampart::serve {

class InferenceServer;
class ModelVersion;

// Checks the steps at load: each names a model and maps inputs and outputs; every tensor a step
// reads is an ensemble input or another step's output; each tensor has one producer; every
// ensemble output is produced; the graph has no cycle. Errors: InvalidArgument naming the step.
Status ValidateEnsemble(const model::ModelConfig& config);

// Runs a validated request through `ensemble`. `done` is called exactly once.
void RunEnsemble(InferenceServer& server, std::shared_ptr<ModelVersion> ensemble,
                 std::unique_ptr<InferRequest> request, InferCallback done);

}  // namespace rampart::serve
