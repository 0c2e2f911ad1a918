#include "backend/backend.h"

#include "core/check.h"

namespace rampart::backend {

void BackendRegistry::Register(std::unique_ptr<Backend> backend) {
  CHECK(backend != nullptr);
  std::string name(backend->name());
  backends_[std::move(name)] = std::move(backend);
}

Backend* BackendRegistry::Find(std::string_view name) const {
  auto it = backends_.find(name);
  return it == backends_.end() ? nullptr : it->second.get();
}

std::vector<std::string> BackendRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, backend] : backends_) names.push_back(name);
  return names;
}

}  // namespace rampart::backend
