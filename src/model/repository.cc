#include "model/repository.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

#include "core/logging.h"

namespace rampart::model {
namespace {

constexpr std::string_view kConfigFile = "config.pbtxt";
// A config file larger than this is not a model config; refuse instead of reading it all.
constexpr uintmax_t kMaxConfigBytes = 4 << 20;

bool ParseVersion(const std::string& name, int64_t& version) {
  if (name.empty()) return false;
  const char* end = name.data() + name.size();
  auto [ptr, error] = std::from_chars(name.data(), end, version);
  return error == std::errc() && ptr == end && version >= 0;
}

}  // namespace

std::vector<int64_t> ListVersions(const std::filesystem::path& model_directory) {
  std::vector<int64_t> versions;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(model_directory, error)) {
    int64_t version = 0;
    if (entry.is_directory(error) && ParseVersion(entry.path().filename().string(), version)) {
      versions.push_back(version);
    }
  }
  std::sort(versions.begin(), versions.end());
  return versions;
}

std::vector<int64_t> SelectVersions(const inference::ModelVersionPolicy& policy,
                                    const std::vector<int64_t>& available) {
  if (policy.has_all()) return available;
  if (policy.has_specific()) {
    std::vector<int64_t> selected;
    for (int64_t version : available) {
      const auto& wanted = policy.specific().versions();
      if (std::find(wanted.begin(), wanted.end(), version) != wanted.end()) {
        selected.push_back(version);
      }
    }
    return selected;
  }
  const size_t count =
      policy.has_latest() ? std::max<uint32_t>(1, policy.latest().num_versions()) : 1;
  const size_t skip = available.size() > count ? available.size() - count : 0;
  return std::vector<int64_t>(available.begin() + static_cast<std::ptrdiff_t>(skip),
                              available.end());
}

Result<ModelSource> ReadModel(const std::filesystem::path& model_directory) {
  const std::string folder_name = model_directory.filename().string();
  const std::filesystem::path config_path = model_directory / kConfigFile;
  const std::string file = config_path.string();

  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(config_path, error);
  if (error) return NotFound("{}: cannot read the model configuration: {}", file, error.message());
  if (size > kMaxConfigBytes) {
    return InvalidArgument("{}: {} bytes is too large for a model configuration", file, size);
  }
  std::ifstream in(config_path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) return Internal("{}: read failed", file);

  ASSIGN_OR_RETURN(ParsedConfig parsed, ParseConfigText(text.str(), file));
  for (const std::string& warning : parsed.warnings) LOG_WARN("{}", warning);
  RETURN_IF_ERROR(CompleteAndValidate(parsed.config, folder_name, file));

  ModelSource source;
  source.name = folder_name;
  source.directory = model_directory;
  source.config = std::move(parsed.config);
  const std::vector<int64_t> available = ListVersions(model_directory);
  if (available.empty()) {
    return NotFound("{}: no version folders (e.g. {}/1/) found", model_directory.string(),
                    model_directory.string());
  }
  source.versions = SelectVersions(source.config.version_policy(), available);
  if (source.versions.empty()) {
    return NotFound("{}: version_policy selects none of the versions present", file);
  }
  return source;
}

Result<std::vector<std::string>> ListModels(const std::filesystem::path& repository) {
  std::error_code error;
  std::filesystem::directory_iterator it(repository, error);
  if (error) {
    return NotFound("model repository '{}' cannot be read: {}", repository.string(),
                    error.message());
  }
  std::vector<std::string> names;
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    if (entry.is_directory(error)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace rampart::model
