#include "identity/api_keys.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include "core/logging.h"
#include "core/thread_name.h"
#include "identity/encoding.h"

namespace rampart::identity {
namespace {

constexpr std::string_view kKeyPrefix = "rk_live_";
constexpr size_t kIdRandomLength = 12;
constexpr size_t kSecretLength = 32;
constexpr size_t kIdLength = kKeyPrefix.size() + kIdRandomLength;
constexpr size_t kKeyLength = kIdLength + 1 + kSecretLength;
constexpr size_t kSaltBytes = 16;

bool IsBase62(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
  });
}

// Whether `text` has the exact shape of a key: prefix, 12 base62, '_', 32 base62.
bool IsWellFormedKey(std::string_view text) {
  return text.size() == kKeyLength && text.substr(0, kKeyPrefix.size()) == kKeyPrefix &&
         IsBase62(text.substr(kKeyPrefix.size(), kIdRandomLength)) && text[kIdLength] == '_' &&
         IsBase62(text.substr(kIdLength + 1));
}

std::vector<std::string> SortedUnique(std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::string PrincipalKey(std::string_view tenant, std::string_view name) {
  // Tenant names cannot hold '/', so "tenant/name" is unambiguous.
  std::string key;
  key.reserve(tenant.size() + 1 + name.size());
  key.append(tenant).append("/").append(name);
  return key;
}

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};

// One key as Verify needs it. `last_used` is shared by the snapshots that hold this key, so a
// use recorded on an old snapshot while a new one is published is not lost.
struct KeyEntry {
  store::ApiKey record;
  std::string salt;  // raw bytes
  std::string hash;  // raw bytes
  std::shared_ptr<std::atomic<int64_t>> last_used;
};

// The store's keys and principals at one generation. Immutable once published.
struct Snapshot {
  int64_t generation = 0;
  std::unordered_map<std::string, KeyEntry, StringHash, std::equal_to<>> keys;          // by id
  std::unordered_map<std::string, store::Tenant, StringHash, std::equal_to<>> tenants;  // by name
  // By PrincipalKey; attributes already merged over the tenant's.
  std::unordered_map<std::string, store::Principal, StringHash, std::equal_to<>> principals;
};

}  // namespace

NewApiKey GenerateApiKey(std::string tenant, std::string principal, std::string name,
                         std::vector<std::string> roles, int64_t now_unix, int64_t expires_unix) {
  NewApiKey result;
  std::string id = std::string(kKeyPrefix) + RandomBase62(kIdRandomLength);
  result.key = id + "_" + RandomBase62(kSecretLength);
  const std::string salt = RandomBytes(kSaltBytes);
  result.record.id = std::move(id);
  result.record.tenant = std::move(tenant);
  result.record.principal = std::move(principal);
  result.record.name = std::move(name);
  result.record.roles = SortedUnique(std::move(roles));
  result.record.salt = HexEncode(salt);
  result.record.hash = HexEncode(Sha256(salt + result.key));
  result.record.created_unix = now_unix;
  result.record.expires_unix = expires_unix;
  return result;
}

bool LooksLikeApiKey(std::string_view text) { return text.substr(0, 3) == "rk_"; }

struct ApiKeyTable::Impl {
  Impl(store::Store& store_in, ApiKeyTableOptions options_in)
      : store(store_in), options(options_in) {}

  store::Store& store;
  const ApiKeyTableOptions options;
  std::atomic<std::shared_ptr<const Snapshot>> snapshot;

  std::mutex reload_mutex;  // serialises Reload (the thread and Refresh)

  // Last-used times already in the store, by key id; only the thread (and the destructor, after
  // joining it) reads and writes it.
  std::unordered_map<std::string, int64_t> written_last_used;

  std::mutex stop_mutex;
  std::condition_variable stop_changed;
  bool stopping = false;
  std::thread thread;

  // Loads a new snapshot when the store's generation moved (always when `force`).
  Status Reload(bool force) {
    std::lock_guard lock(reload_mutex);
    const std::shared_ptr<const Snapshot> old = snapshot.load();
    // The generation is read before the lists: a change made while they are read moves it
    // again, so the next poll loads once more.
    ASSIGN_OR_RETURN(const int64_t generation, store.Generation());
    if (!force && old != nullptr && old->generation == generation) return Status::Ok();
    ASSIGN_OR_RETURN(std::vector<store::Tenant> tenants, store.ListTenants());
    ASSIGN_OR_RETURN(std::vector<store::Principal> principals, store.ListPrincipals(""));
    ASSIGN_OR_RETURN(std::vector<store::ApiKey> keys, store.ListApiKeys(""));

    auto next = std::make_shared<Snapshot>();
    next->generation = generation;
    for (store::Tenant& tenant : tenants) {
      std::string name = tenant.name;
      next->tenants.emplace(std::move(name), std::move(tenant));
    }
    for (store::Principal& principal : principals) {
      // Attributes as identities carry them: the tenant's, overridden by the principal's.
      if (const auto tenant = next->tenants.find(principal.tenant); tenant != next->tenants.end()) {
        for (const auto& [name, value] : tenant->second.attributes) {
          principal.attributes.try_emplace(name, value);
        }
      }
      std::string key = PrincipalKey(principal.tenant, principal.name);
      next->principals.emplace(std::move(key), std::move(principal));
    }
    for (store::ApiKey& key : keys) {
      KeyEntry entry;
      std::optional<std::string> salt = HexDecode(key.salt);
      std::optional<std::string> hash = HexDecode(key.hash);
      if (!salt || !hash || hash->size() != 32) {
        LOG_WARN("API key {} has a malformed salt or hash in the store; it is not accepted",
                 key.id);
        continue;
      }
      entry.salt = std::move(*salt);
      entry.hash = std::move(*hash);
      if (old != nullptr) {
        if (auto found = old->keys.find(key.id); found != old->keys.end()) {
          entry.last_used = found->second.last_used;
        }
      }
      if (entry.last_used == nullptr) {
        entry.last_used = std::make_shared<std::atomic<int64_t>>(key.last_used_unix);
      }
      std::string id = key.id;
      entry.record = std::move(key);
      next->keys.emplace(std::move(id), std::move(entry));
    }
    snapshot.store(std::move(next));
    return Status::Ok();
  }

  // Writes the last-used times recorded since the previous flush, in one store call.
  void FlushLastUsed() {
    const std::shared_ptr<const Snapshot> current = snapshot.load();
    std::map<std::string, int64_t> touches;
    for (const auto& [id, entry] : current->keys) {
      const int64_t used = entry.last_used->load(std::memory_order_relaxed);
      auto [written, inserted] = written_last_used.try_emplace(id, entry.record.last_used_unix);
      if (used > written->second) touches.emplace(id, used);
    }
    if (touches.empty()) return;
    const Status status = store.TouchApiKeys(touches);
    if (!status.ok()) {
      LOG_WARN("cannot record API keys' last use (will retry): {}", status.ToString());
      return;
    }
    for (const auto& [id, used] : touches) written_last_used[id] = used;
  }

  void Run() {
    NameThisThread("api-keys");
    std::unique_lock lock(stop_mutex);
    while (!stopping) {
      stop_changed.wait_for(lock, options.poll_period, [this] { return stopping; });
      if (stopping) break;
      lock.unlock();
      if (const Status status = Reload(/*force=*/false); !status.ok()) {
        LOG_WARN("cannot reload API keys from {} (keeping the previous ones): {}", store.Describe(),
                 status.ToString());
      }
      FlushLastUsed();
      lock.lock();
    }
  }
};

Result<std::unique_ptr<ApiKeyTable>> ApiKeyTable::Open(store::Store& store,
                                                       ApiKeyTableOptions options) {
  auto impl = std::make_unique<Impl>(store, options);
  RETURN_IF_ERROR(impl->Reload(/*force=*/true));
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Run(); });
  return std::unique_ptr<ApiKeyTable>(new ApiKeyTable(std::move(impl)));
}

ApiKeyTable::ApiKeyTable(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ApiKeyTable::~ApiKeyTable() {
  {
    std::lock_guard lock(impl_->stop_mutex);
    impl_->stopping = true;
  }
  impl_->stop_changed.notify_all();
  impl_->thread.join();
  impl_->FlushLastUsed();
}

Status ApiKeyTable::Refresh() { return impl_->Reload(/*force=*/true); }

Result<Identity> ApiKeyTable::Verify(std::string_view key_text, int64_t now_unix) const {
  if (!IsWellFormedKey(key_text)) return Unauthenticated("invalid API key");
  const std::shared_ptr<const Snapshot> snapshot = impl_->snapshot.load();
  const auto found = snapshot->keys.find(key_text.substr(0, kIdLength));
  // The same answer for an unknown id and a wrong secret: a caller learns nothing of which ids
  // exist. Every other reason is told only to someone who holds the whole key.
  if (found == snapshot->keys.end()) return Unauthenticated("invalid API key");
  const KeyEntry& entry = found->second;
  std::string salted;
  salted.reserve(entry.salt.size() + key_text.size());
  salted.append(entry.salt).append(key_text);
  if (!ConstantTimeEquals(Sha256(salted), entry.hash)) return Unauthenticated("invalid API key");

  const store::ApiKey& record = entry.record;
  if (record.revoked_unix != 0) return Unauthenticated("API key revoked");
  if (record.expires_unix != 0 && now_unix >= record.expires_unix) {
    return Unauthenticated("API key expired");
  }
  const auto principal = snapshot->principals.find(PrincipalKey(record.tenant, record.principal));
  // The store makes a key's principal with the key and revokes its keys with it, so a missing
  // one is a key that is on its way out.
  if (principal == snapshot->principals.end()) return Unauthenticated("API key revoked");
  if (principal->second.disabled) return Unauthenticated("principal disabled");

  int64_t last_used = entry.last_used->load(std::memory_order_relaxed);
  while (now_unix > last_used &&
         !entry.last_used->compare_exchange_weak(last_used, now_unix, std::memory_order_relaxed)) {
  }

  Identity identity;
  identity.method = Method::kApiKey;
  identity.tenant = record.tenant;
  identity.principal = record.principal;
  identity.roles = principal->second.roles;
  identity.roles.insert(identity.roles.end(), record.roles.begin(), record.roles.end());
  identity.roles = SortedUnique(std::move(identity.roles));
  identity.attributes = principal->second.attributes;
  identity.key_id = record.id;
  identity.expires_unix = record.expires_unix;
  return identity;
}

std::optional<store::Principal> ApiKeyTable::FindPrincipal(std::string_view tenant,
                                                           std::string_view name) const {
  const std::shared_ptr<const Snapshot> snapshot = impl_->snapshot.load();
  const auto found = snapshot->principals.find(PrincipalKey(tenant, name));
  if (found == snapshot->principals.end()) return std::nullopt;
  return found->second;
}

std::optional<store::Tenant> ApiKeyTable::FindTenant(std::string_view name) const {
  const std::shared_ptr<const Snapshot> snapshot = impl_->snapshot.load();
  const auto found = snapshot->tenants.find(name);
  if (found == snapshot->tenants.end()) return std::nullopt;
  return found->second;
}

}  // namespace rampart::identity
