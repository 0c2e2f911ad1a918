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
// An encrypted model file (`model.pt.rpe`) is decrypted in memory and loaded from a stream.

#include <memory>

#include "backend/backend.h"
#include "backend/model_decryptor.h"

namespace rampart::backend {

// `decryptor` opens `model.pt.rpe` when a version folder has no `model.pt`
// (backend/model_decryptor.h); without one, an encrypted model fails to load, saying that no
// master key is configured. Shared by every instance; may be null.
std::unique_ptr<Backend> MakeTorchBackend(
    std::shared_ptr<const ModelDecryptor> decryptor = nullptr);

}  // namespace rampart::backend
