#include "identity/jwt.h"

#include <openssl/err.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "core/logging.h"
#include "core/thread_name.h"
#include "identity/encoding.h"
#include "identity/jwks.h"
#include "json/reader.h"

namespace rampart::identity {
namespace {

// What identifies one version of the JWKS file (a rename over it changes the inode).
struct FileVersion {
  dev_t device = 0;
  ino_t inode = 0;
  off_t size = 0;
  int64_t modified_ns = 0;
  bool operator==(const FileVersion&) const = default;
};

Result<FileVersion> StatFile(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return Unavailable("cannot stat");
  return FileVersion{
      info.st_dev, info.st_ino, info.st_size,
      static_cast<int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec};
}

Result<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return InvalidArgument("cannot open");
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad()) return InvalidArgument("cannot read");
  return std::move(text).str();
}

// Whether an object has a member name twice (JSON allows it; JWS consumers must not guess).
bool HasRepeatedMember(const json::Value& object) {
  std::set<std::string_view> names;
  for (const auto field : object.Object()) {
    if (!names.insert(field.key).second) return true;
  }
  return false;
}

// A NumericDate claim (seconds, possibly fractional); nullopt when absent; error when not a
// number.
Result<std::optional<int64_t>> NumericDate(const json::Value& claims, std::string_view name) {
  const std::optional<json::Value> member = claims.Find(name);
  if (!member) return std::optional<int64_t>();
  ASSIGN_OR_RETURN(const double seconds, member->GetDouble(name));
  if (!std::isfinite(seconds) || std::abs(seconds) > 1e15) return InvalidArgument("range");
  return std::optional<int64_t>(static_cast<int64_t>(std::floor(seconds)));
}

// A claim as attribute text: strings as they are, numbers and booleans written out, arrays of
// those joined by ','; nullopt for anything else (objects, null).
std::optional<std::string> ClaimText(const json::Value& value) {
  switch (value.kind()) {
    case json::Kind::kString: return std::string(*value.GetString(""));
    case json::Kind::kBool: return std::string(*value.GetBool("") ? "true" : "false");
    case json::Kind::kNumber: {
      if (const Result<int64_t> integer = value.GetInt64(""); integer.ok()) {
        return std::to_string(*integer);
      }
      return fmt::format("{}", *value.GetDouble(""));
    }
    case json::Kind::kArray: {
      std::string joined;
      for (const simdjson::dom::element item : value.Array()) {
        std::optional<std::string> text = ClaimText(json::Value(item));
        if (!text || json::Value(item).IsArray()) return std::nullopt;
        if (!joined.empty()) joined.push_back(',');
        joined.append(*text);
      }
      return joined;
    }
    default: return std::nullopt;
  }
}

// Roles: an array of strings, or one string of names separated by spaces or commas.
std::optional<std::vector<std::string>> ClaimRoles(const json::Value& value) {
  std::vector<std::string> roles;
  if (value.kind() == json::Kind::kArray) {
    for (const simdjson::dom::element item : value.Array()) {
      const Result<std::string_view> role = json::Value(item).GetString("");
      if (!role.ok()) return std::nullopt;
      if (!role->empty()) roles.emplace_back(*role);
    }
  } else if (value.kind() == json::Kind::kString) {
    const std::string_view text = *value.GetString("");
    size_t position = 0;
    while (position < text.size()) {
      const size_t end = std::min(text.find_first_of(" ,", position), text.size());
      if (end > position) roles.emplace_back(text.substr(position, end - position));
      position = end + 1;
    }
  } else {
    return std::nullopt;
  }
  std::sort(roles.begin(), roles.end());
  roles.erase(std::unique(roles.begin(), roles.end()), roles.end());
  return roles;
}

Status Malformed() { return Unauthenticated("malformed token"); }
Status Incomplete() { return Unauthenticated("token claims incomplete"); }

}  // namespace

struct JwtVerifier::Impl {
  JwtOptions options;
  std::vector<JwsAlgorithm> algorithms;
  std::atomic<std::shared_ptr<const JwkSet>> keys;  // what Verify uses; swapped by CheckNow

  std::mutex check_mutex;    // serialises CheckNow (the thread and callers)
  FileVersion seen_version;  // guarded by check_mutex: the version last read

  std::mutex stop_mutex;
  std::condition_variable stop_changed;
  bool stopping = false;  // guarded by stop_mutex
  std::thread thread;     // not started when options.jwks_check_period is 0

  Result<std::shared_ptr<const JwkSet>> Load() const {
    ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(options.jwks_file));
    ASSIGN_OR_RETURN(JwkSet set, ParseJwks(text));
    return std::shared_ptr<const JwkSet>(std::make_shared<JwkSet>(std::move(set)));
  }

  Status CheckNow() {
    std::lock_guard lock(check_mutex);
    const Result<FileVersion> version = StatFile(options.jwks_file);
    if (!version.ok()) {
      return Unavailable("JWKS file {} cannot be read (keeping the previous keys)",
                         options.jwks_file);
    }
    if (*version == seen_version) return Status::Ok();
    seen_version = *version;
    Result<std::shared_ptr<const JwkSet>> loaded = Load();
    if (!loaded.ok()) {
      return InvalidArgument(
          "JWKS file {} changed but cannot be used (keeping the previous keys): {}",
          options.jwks_file, loaded.status().message());
    }
    LOG_INFO("JWKS file {} reloaded: {} keys", options.jwks_file, (*loaded)->keys.size());
    keys.store(std::move(*loaded));
    return Status::Ok();
  }

  void Run() {
    NameThisThread("jwks");
    std::unique_lock lock(stop_mutex);
    Status last = Status::Ok();  // warn once per new problem, not once per period
    while (!stopping) {
      stop_changed.wait_for(lock, options.jwks_check_period, [this] { return stopping; });
      if (stopping) break;
      lock.unlock();
      Status checked = CheckNow();
      if (!checked.ok() && checked.message() != last.message()) LOG_WARN("{}", checked.message());
      last = std::move(checked);
      lock.lock();
    }
  }

  Result<Identity> Verify(std::string_view token, int64_t now_unix) const;
};

Result<std::unique_ptr<JwtVerifier>> JwtVerifier::Open(JwtOptions options) {
  if (options.jwks_file.empty()) return InvalidArgument("jwt: jwks_file is required");
  if (options.issuer.empty()) return InvalidArgument("jwt: issuer is required");
  if (options.algorithms.empty()) return InvalidArgument("jwt: algorithms must not be empty");
  if (options.claims.principal.empty()) {
    return InvalidArgument("jwt: the principal claim must be named");
  }
  if (options.claims.tenant.empty() && options.claims.default_tenant.empty()) {
    return InvalidArgument("jwt: a tenant claim or a default tenant is required");
  }
  if (options.clock_skew_seconds < 0) {
    return InvalidArgument("jwt: clock_skew_seconds must not be negative");
  }
  auto impl = std::make_unique<Impl>();
  for (const std::string& name : options.algorithms) {
    const Result<JwsAlgorithm> algorithm = ParseJwsAlgorithm(name);
    if (!algorithm.ok()) return algorithm.status().WithContext("jwt");
    impl->algorithms.push_back(*algorithm);
  }
  impl->options = std::move(options);
  const Result<FileVersion> version = StatFile(impl->options.jwks_file);
  if (version.ok()) impl->seen_version = *version;
  Result<std::shared_ptr<const JwkSet>> loaded = impl->Load();
  if (!loaded.ok()) {
    return InvalidArgument("{}: {}", impl->options.jwks_file, loaded.status().message());
  }
  impl->keys.store(std::move(*loaded));
  if (impl->options.jwks_check_period.count() > 0) {
    Impl* raw = impl.get();
    impl->thread = std::thread([raw] { raw->Run(); });
  }
  return std::unique_ptr<JwtVerifier>(new JwtVerifier(std::move(impl)));
}

JwtVerifier::JwtVerifier(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

JwtVerifier::~JwtVerifier() {
  if (!impl_->thread.joinable()) return;
  {
    std::lock_guard lock(impl_->stop_mutex);
    impl_->stopping = true;
  }
  impl_->stop_changed.notify_all();
  impl_->thread.join();
}

Status JwtVerifier::CheckNow() { return impl_->CheckNow(); }

Result<Identity> JwtVerifier::Verify(std::string_view token, int64_t now_unix) const {
  return impl_->Verify(token, now_unix);
}

Result<Identity> JwtVerifier::Impl::Verify(std::string_view token, int64_t now_unix) const {
  if (token.size() > options.max_token_bytes) return Malformed();
  const size_t first_dot = token.find('.');
  const size_t second_dot =
      first_dot == std::string_view::npos ? first_dot : token.find('.', first_dot + 1);
  if (second_dot == std::string_view::npos ||
      token.find('.', second_dot + 1) != std::string_view::npos) {
    return Malformed();
  }
  const std::optional<std::string> header_text = Base64UrlDecode(token.substr(0, first_dot));
  const std::optional<std::string> payload_text =
      Base64UrlDecode(token.substr(first_dot + 1, second_dot - first_dot - 1));
  const std::optional<std::string> signature = Base64UrlDecode(token.substr(second_dot + 1));
  if (!header_text || !payload_text || !signature) return Malformed();

  // One parser per thread: Verify runs on every front end's threads at once.
  thread_local json::Parser header_parser;
  thread_local json::Parser payload_parser;
  const Result<json::Value> header = header_parser.Parse(*header_text);
  if (!header.ok() || !header->IsObject() || HasRepeatedMember(*header)) return Malformed();
  if (header->Find("crit")) return Malformed();
  const std::optional<json::Value> algorithm_member = header->Find("alg");
  if (!algorithm_member) return Malformed();
  const Result<std::string_view> algorithm_name = algorithm_member->GetString("alg");
  if (!algorithm_name.ok()) return Malformed();
  const Result<JwsAlgorithm> algorithm = ParseJwsAlgorithm(*algorithm_name);
  if (!algorithm.ok() ||
      std::find(algorithms.begin(), algorithms.end(), *algorithm) == algorithms.end()) {
    return Unauthenticated("unsupported token algorithm");
  }
  std::optional<std::string_view> kid;
  if (const std::optional<json::Value> kid_member = header->Find("kid")) {
    const Result<std::string_view> kid_text = kid_member->GetString("kid");
    if (!kid_text.ok()) return Malformed();
    kid = *kid_text;
  }

  // The signature, before anything in the payload is believed.
  const std::string_view signing_input = token.substr(0, second_dot);
  const std::shared_ptr<const JwkSet> key_set = keys.load();
  const Jwk* chosen = nullptr;
  for (const Jwk& key : key_set->keys) {
    if (kid ? key.kid != *kid : key.algorithm != *algorithm) continue;
    if (chosen != nullptr) return Unauthenticated("unknown signing key");  // ambiguous
    chosen = &key;
  }
  if (chosen == nullptr) return Unauthenticated("unknown signing key");
  // The key named by `kid` is of another type: HS256 over an RSA key's public bytes and the like
  // are refused, never tried.
  if (chosen->algorithm != *algorithm) return Unauthenticated("unsupported token algorithm");
  if (!VerifyJwsSignature(*chosen, signing_input, *signature)) {
    ERR_clear_error();  // a failed verification leaves reasons on this thread's OpenSSL queue
    return Unauthenticated("token signature invalid");
  }

  const Result<json::Value> claims = payload_parser.Parse(*payload_text);
  if (!claims.ok() || !claims->IsObject() || HasRepeatedMember(*claims)) return Malformed();

  const std::optional<json::Value> issuer = claims->Find("iss");
  if (!issuer || !issuer->GetString("iss").ok() || *issuer->GetString("iss") != options.issuer) {
    return Unauthenticated("token issuer not accepted");
  }
  if (!options.audiences.empty()) {
    const std::optional<json::Value> audience = claims->Find("aud");
    bool accepted = false;
    const auto accepts = [this](const json::Value& value) {
      const Result<std::string_view> text = value.GetString("aud");
      return text.ok() && std::find(options.audiences.begin(), options.audiences.end(), *text) !=
                              options.audiences.end();
    };
    if (audience && audience->IsArray()) {
      for (const simdjson::dom::element item : audience->Array()) {
        accepted = accepted || accepts(json::Value(item));
      }
    } else if (audience) {
      accepted = accepts(*audience);
    }
    if (!accepted) return Unauthenticated("token audience not accepted");
  }
  const Result<std::optional<int64_t>> expires = NumericDate(*claims, "exp");
  const Result<std::optional<int64_t>> not_before = NumericDate(*claims, "nbf");
  const Result<std::optional<int64_t>> issued = NumericDate(*claims, "iat");
  if (!expires.ok() || !not_before.ok() || !issued.ok()) return Malformed();
  if (!expires->has_value()) return Incomplete();
  const int64_t skew = options.clock_skew_seconds;
  if (now_unix >= **expires + skew) return Unauthenticated("token expired");
  if ((not_before->has_value() && now_unix + skew < **not_before) ||
      (issued->has_value() && now_unix + skew < **issued)) {
    return Unauthenticated("token not yet valid");
  }

  Identity identity;
  identity.method = Method::kJwt;
  identity.expires_unix = **expires;
  const JwtClaimMapping& mapping = options.claims;
  const auto string_claim = [&](const std::string& name) -> std::optional<std::string> {
    if (name.empty()) return std::nullopt;
    const std::optional<json::Value> member = claims->Find(name);
    if (!member) return std::nullopt;
    const Result<std::string_view> text = member->GetString(name);
    if (!text.ok() || text->empty()) return std::nullopt;
    return std::string(*text);
  };
  if (std::optional<std::string> tenant = string_claim(mapping.tenant)) {
    identity.tenant = std::move(*tenant);
  } else if (!mapping.default_tenant.empty() &&
             (mapping.tenant.empty() || !claims->Find(mapping.tenant))) {
    identity.tenant = mapping.default_tenant;
  } else {
    return Incomplete();
  }
  std::optional<std::string> principal = string_claim(mapping.principal);
  if (!principal) return Incomplete();
  identity.principal = std::move(*principal);
  if (!mapping.roles.empty()) {
    if (const std::optional<json::Value> roles = claims->Find(mapping.roles)) {
      std::optional<std::vector<std::string>> names = ClaimRoles(*roles);
      if (!names) return Incomplete();
      identity.roles = std::move(*names);
    }
  }
  for (const auto& [attribute, claim] : mapping.attributes) {
    const std::optional<json::Value> member = claims->Find(claim);
    if (!member) continue;
    std::optional<std::string> text = ClaimText(*member);
    if (text) identity.attributes[attribute] = std::move(*text);
  }
  return identity;
}

}  // namespace rampart::identity
