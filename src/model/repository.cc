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

// A version folder's name: digits without leading zeros ("0" itself is a version). Triton skips
// "01" and the like, whose version would name another folder.
bool ParseVersion(const std::string& name, int64_t& version) {
  if (name.empty() || name[0] < '0' || name[0] > '9' || (name.size() > 1 && name[0] == '0')) {
    return false;  // "-0" and "+1" would name another folder too
  }
  const char* end = name.data() + name.size();
  auto [ptr, error] = std::from_chars(name.data(), end, version);
  return error == std::errc() && ptr == end && version >= 0;
}

// A config naming neither platform nor backend is completed from the model's files, as Triton
// completes it (AutoCompleteBackendFields): `default_model_filename: "model.pt"`, or no
// default_model_filename and a file model.pt (or model.pt.rpe) in the first version folder, make it
// a PyTorch model. Triton looks in the first sub-folder by name, whatever its name; so does this.
void CompleteBackendFromFiles(const std::filesystem::path& model_directory, ModelConfig& config) {
  if (!config.platform().empty() || !config.backend().empty()) return;
  constexpr std::string_view kTorchFile = "model.pt";
  if (config.default_model_filename() == kTorchFile) {
    config.set_backend(std::string(kPytorchBackend));
    return;
  }
  if (!config.default_model_filename().empty()) return;
  std::error_code error;
  std::vector<std::string> folders;
  for (const auto& entry : std::filesystem::directory_iterator(model_directory, error)) {
    if (entry.is_directory(error)) folders.push_back(entry.path().filename().string());
  }
  if (folders.empty()) return;
  const std::string first = *std::min_element(folders.begin(), folders.end());
  // model.pt.rpe: the same model, sealed in an envelope (backend/model_decryptor.h).
  if (std::filesystem::is_regular_file(model_directory / first / kTorchFile, error) ||
      std::filesystem::is_regular_file(model_directory / first / "model.pt.rpe", error)) {
    config.set_backend(std::string(kPytorchBackend));
  }
}

}  // namespace

namespace {

Result<ModelSource> Select(const std::filesystem::path& model_directory, ModelConfig config,
                           std::string_view file) {
  CompleteBackendFromFiles(model_directory, config);
  RETURN_IF_ERROR(CompleteAndValidate(config, model_directory.filename().string(), file));
  ModelSource source;
  source.name = model_directory.filename().string();
  source.directory = model_directory;
  source.config = std::move(config);
  std::vector<std::string> leading_zeros;
  const std::vector<int64_t> available = ListVersions(model_directory, &leading_zeros);
  for (const std::string& name : leading_zeros) {
    LOG_WARN("{}: ignoring version folder '{}': version folders are numbers without leading zeros",
             model_directory.string(), name);
  }
  if (available.empty()) {
    return NotFound("{}: no version folders (e.g. {}/1/) found", model_directory.string(),
                    model_directory.string());
  }
  source.versions = SelectVersions(source.config.version_policy(), available);
  if (source.config.version_policy().has_specific()) {
    for (int64_t wanted : source.config.version_policy().specific().versions()) {
      if (!std::binary_search(available.begin(), available.end(), wanted)) {
        LOG_WARN("{}: version_policy.specific names version {}, but {}/{}/ is not present", file,
                 wanted, model_directory.string(), wanted);
      }
    }
  }
  if (source.versions.empty()) {
    return NotFound("{}: version_policy selects none of the versions present", file);
  }
  return source;
}

// Calls `visit` with each entry of `directory`. Iterates with error codes: the range-for form
// throws std::filesystem::error when an entry cannot be read (a directory removed meanwhile, no
// permission), and a repository scan must not throw. Returns the first error; entries before it
// were visited.
template <typename Visit>
std::error_code ForEachEntry(const std::filesystem::path& directory, Visit visit) {
  std::error_code error;
  for (std::filesystem::directory_iterator it(directory, error), end; !error && it != end;
       it.increment(error)) {
    visit(*it);
  }
  return error;
}

}  // namespace

std::vector<int64_t> ListVersions(const std::filesystem::path& model_directory,
                                  std::vector<std::string>* leading_zeros) {
  std::vector<int64_t> versions;
  // An unreadable folder has the versions read so far (none): the load then says so.
  (void)ForEachEntry(model_directory, [&](const std::filesystem::directory_entry& entry) {
    int64_t version = 0;
    std::error_code error;
    if (!entry.is_directory(error)) return;
    const std::string name = entry.path().filename().string();
    if (ParseVersion(name, version)) {
      versions.push_back(version);
    } else if (leading_zeros && name.size() > 1 &&
               name.find_first_not_of("0123456789") == std::string::npos) {
      leading_zeros->push_back(name);
    }
  });
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
  return Select(model_directory, std::move(parsed.config), file);
}

Result<ModelSource> ReadModelWithConfig(const std::filesystem::path& model_directory,
                                        ModelConfig config) {
  return Select(model_directory, std::move(config), "config override");
}

std::string VersionFingerprint(const std::filesystem::path& model_directory, int64_t version) {
  const auto folder = model_directory / std::to_string(version);
  std::vector<std::string> files;
  std::error_code error;
  for (auto it = std::filesystem::recursive_directory_iterator(folder, error);
       !error && it != std::filesystem::recursive_directory_iterator(); it.increment(error)) {
    std::error_code stat_error;
    if (!it->is_regular_file(stat_error)) continue;
    const auto size = it->file_size(stat_error);
    const auto time = it->last_write_time(stat_error).time_since_epoch().count();
    files.push_back(fmt::format("{}:{}:{}", it->path().lexically_relative(model_directory).string(),
                                size, time));
  }
  std::sort(files.begin(), files.end());
  std::string digest;
  for (const std::string& file : files) {
    digest += '|';
    digest += file;
  }
  return digest;
}

std::string Fingerprint(const std::filesystem::path& model_directory) {
  std::string digest;
  std::ifstream config(model_directory / kConfigFile, std::ios::binary);
  if (config) {
    std::ostringstream bytes;
    bytes << config.rdbuf();
    digest = std::to_string(std::hash<std::string>{}(bytes.str()));
  }
  for (int64_t version : ListVersions(model_directory)) {
    // (fmt, not operator+: GCC 12 warns falsely about string concatenation here.)
    digest += fmt::format("#{}{}", version, VersionFingerprint(model_directory, version));
  }
  return digest;
}

Result<std::vector<std::string>> ListModels(const std::filesystem::path& repository) {
  std::vector<std::string> names;
  const std::error_code error =
      ForEachEntry(repository, [&](const std::filesystem::directory_entry& entry) {
        const std::string name = entry.path().filename().string();
        std::error_code type_error;
        if (name.empty() || name[0] == '.' || !entry.is_directory(type_error)) return;
        names.push_back(name);
      });
  if (error) {
    return NotFound("model repository '{}' cannot be read: {}", repository.string(),
                    error.message());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace rampart::model
