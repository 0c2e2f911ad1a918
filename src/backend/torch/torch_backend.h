#pragma once

// The TorchScript backend (`backend: "pytorch"` / `platform: "pytorch_libtorch"`), built on
// LibTorch. This header is all the rest of Rampart sees; <torch/script.h> stays in the .cc.
//
// Conventions follow Triton's PyTorch backend:
// - an input named `<anything>__<i>` feeds forward() argument i; otherwise the input feeds the
//   forward() argument with the same name;
// - an output named `<anything>__<i>` is element i of the returned tuple (or list); otherwise an
//   output takes the tuple element at its position in the config;
// - BYTES inputs are passed as List[str], and a returned List[str] becomes a BYTES output.
// Model `parameters`: INTRA_OP_THREAD_COUNT (threads per instance; default: the server's budget).
// Instances run on CUDA when the instance group is KIND_GPU (or KIND_AUTO and LibTorch reports a
// CUDA device); otherwise on CPU.

#include <memory>

#include "backend/backend.h"

namespace rampart::backend {

std::unique_ptr<Backend> MakeTorchBackend();

}  // namespace rampart::backend
