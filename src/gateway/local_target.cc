#include "gateway/local_target.h"

#include <cmath>
#include <cstring>
#include <mutex>

#include "json/writer.h"

namespace rampart::gateway {
namespace {

// Collects the per-text answers and writes the whole answer once the last one arrives.
class EmbeddingBatch {
 public:
  EmbeddingBatch(size_t count, const OpenAiRequest& request, std::string model,
                 UniqueFunction<void(Result<LocalAnswer>)> done)
      : vectors_(count),
        remaining_(count),
        encoding_(request.encoding_format),
        dimensions_(request.dimensions),
        prompt_chars_(request.prompt_chars),
        model_(std::move(model)),
        done_(std::move(done)) {}

  void Complete(size_t index, Result<std::unique_ptr<serve::InferResponse>> result) {
    Status status = Status::Ok();
    std::vector<float> vector;
    if (result.ok()) {
      Result<std::vector<float>> read = ReadVector(**result);
      if (read.ok()) {
        vector = std::move(read).value();
      } else {
        status = read.status();
      }
    } else {
      status = result.status();
    }
    std::unique_lock lock(mutex_);
    if (!status.ok() && error_.ok()) error_ = status;
    vectors_[index] = std::move(vector);
    if (--remaining_ > 0) return;
    lock.unlock();
    if (!error_.ok()) {
      done_(error_);
      return;
    }
    done_(Answer());
  }

 private:
  Result<std::vector<float>> ReadVector(const serve::InferResponse& response) const {
    for (const tensor::Tensor& output : response.outputs) {
      if (output.datatype != tensor::DataType::kFp32) continue;
      const size_t count = output.data.size() / sizeof(float);
      std::vector<float> vector(count);
      std::memcpy(vector.data(), output.data.data(), count * sizeof(float));
      if (dimensions_ > 0) {
        if (static_cast<size_t>(dimensions_) > count) {
          return InvalidArgument("'dimensions' is {}, but the model's embeddings have {}",
                                 dimensions_, count);
        }
        vector.resize(static_cast<size_t>(dimensions_));
        double norm = 0;
        for (float value : vector) norm += static_cast<double>(value) * value;
        norm = std::sqrt(norm);
        if (norm > 0) {
          for (float& value : vector) value = static_cast<float>(value / norm);
        }
      }
      return vector;
    }
    return Internal("the model '{}' has no FP32 output to read an embedding from", model_);
  }

  LocalAnswer Answer() const {
    json::Writer writer;
    size_t floats = 0;
    for (const auto& vector : vectors_) floats += vector.size();
    writer.Reserve(96 + floats * (encoding_ == EncodingFormat::kFloat ? 12 : 6) +
                   vectors_.size() * 48);
    writer.StartObject();
    writer.Key("object");
    writer.String("list");
    writer.Key("data");
    writer.StartArray();
    for (size_t i = 0; i < vectors_.size(); ++i) {
      writer.StartObject();
      writer.Key("object");
      writer.String("embedding");
      writer.Key("index");
      writer.Uint64(i);
      writer.Key("embedding");
      if (encoding_ == EncodingFormat::kBase64) {
        // float32 in memory is little-endian on every machine Rampart builds for (x86-64,
        // aarch64), which is the byte order OpenAI's base64 embeddings use.
        writer.String(Base64Encode(std::string_view(
            reinterpret_cast<const char*>(vectors_[i].data()), vectors_[i].size() * 4)));
      } else {
        writer.StartArray();
        for (float value : vectors_[i]) writer.Float(value);
        writer.EndArray();
      }
      writer.EndObject();
    }
    writer.EndArray();
    writer.Key("model");
    writer.String(model_);
    const int64_t tokens = EstimateTokens(prompt_chars_);
    writer.Key("usage");
    writer.StartObject();
    writer.Key("prompt_tokens");
    writer.Int64(tokens);
    writer.Key("total_tokens");
    writer.Int64(tokens);
    writer.EndObject();
    writer.EndObject();
    return LocalAnswer{
        .body = writer.Take(),
        .usage = Usage{.prompt_tokens = tokens, .total_tokens = tokens, .estimated = true}};
  }

  std::mutex mutex_;
  std::vector<std::vector<float>> vectors_;  // guarded by mutex_
  size_t remaining_;                         // guarded by mutex_
  Status error_;                             // guarded by mutex_
  const EncodingFormat encoding_;
  const int64_t dimensions_;
  const size_t prompt_chars_;
  const std::string model_;
  UniqueFunction<void(Result<LocalAnswer>)> done_;
};

}  // namespace

std::string Base64Encode(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t word = (static_cast<uint8_t>(bytes[i]) << 16) |
                          (static_cast<uint8_t>(bytes[i + 1]) << 8) |
                          static_cast<uint8_t>(bytes[i + 2]);
    out.push_back(kAlphabet[(word >> 18) & 63]);
    out.push_back(kAlphabet[(word >> 12) & 63]);
    out.push_back(kAlphabet[(word >> 6) & 63]);
    out.push_back(kAlphabet[word & 63]);
  }
  if (i < bytes.size()) {
    uint32_t word = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) word |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    out.push_back(kAlphabet[(word >> 18) & 63]);
    out.push_back(kAlphabet[(word >> 12) & 63]);
    out.push_back(i + 1 < bytes.size() ? kAlphabet[(word >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

void LocalEmbeddings(serve::InferenceServer& server, const std::string& model,
                     const OpenAiRequest& request, const std::string& response_model,
                     const std::string& tenant, UniqueFunction<void(Result<LocalAnswer>)> done) {
  if (request.input_is_tokens) {
    done(InvalidArgument("the model '{}' takes text, not token ids", response_model));
    return;
  }
  Result<serve::ModelMetadata> metadata = server.Metadata(model, serve::kLatestVersion);
  if (!metadata.ok()) {
    done(
        Unavailable("the local model '{}' is not serving: {}", model, metadata.status().message()));
    return;
  }
  if (metadata->inputs.size() != 1 || metadata->inputs[0].datatype != "BYTES") {
    done(FailedPrecondition("the local model '{}' does not take one BYTES (text) input", model));
    return;
  }
  // One text per request: every dim of the input's shape is 1 (the batch dimension included).
  const serve::TensorMetadata& input = metadata->inputs[0];
  const tensor::Shape shape(input.shape.size(), 1);
  auto batch = std::make_shared<EmbeddingBatch>(request.inputs.size(), request, response_model,
                                                std::move(done));
  const SteadyTime now = Clock::Real().Now();
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    auto infer = std::make_unique<serve::InferRequest>();
    infer->model_name = model;
    infer->arrival = now;
    infer->tenant = tenant;
    tensor::Tensor text{.name = input.name, .datatype = tensor::DataType::kBytes, .shape = shape};
    Status appended = tensor::AppendBytesElement(request.inputs[i], text.data);
    if (!appended.ok()) {
      batch->Complete(i, appended);
      continue;
    }
    infer->inputs.push_back(std::move(text));
    server.Infer(std::move(infer),
                 [batch, i](Result<std::unique_ptr<serve::InferResponse>> result) {
                   batch->Complete(i, std::move(result));
                 });
  }
}

}  // namespace rampart::gateway
