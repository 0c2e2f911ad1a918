#include "backend/model_decryptor.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace rampart::backend {

Result<std::string> ReadModelFile(const std::string& path) {
  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(path, error);
  if (error) return NotFound("model file '{}' cannot be read: {}", path, error.message());
  if (size > crypto::kEnvelopeMaxPayloadBytes + 4096) {
    return InvalidArgument("model file '{}' is larger than an envelope may be", path);
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) return NotFound("model file '{}' cannot be read: {}", path, std::strerror(errno));
  std::string bytes(static_cast<size_t>(size), '\0');
  file.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (static_cast<uintmax_t>(file.gcount()) != size) {
    return Unavailable("model file '{}' changed while it was read", path);
  }
  return bytes;
}

}  // namespace rampart::backend
