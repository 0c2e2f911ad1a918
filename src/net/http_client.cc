// HttpClient: its I/O threads, the endpoints' connection pools, and the request's formatting.

#include "net/http_client.h"

#include <functional>
#include <future>
#include <iterator>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "core/exceptions.h"
#include "core/logging.h"
#include "core/thread_name.h"
#include "net/http_client_call.h"

namespace rampart::net {
namespace client {
namespace {

std::string HostHeader(const Endpoint& endpoint) {
  const bool ipv6 = endpoint.host.find(':') != std::string::npos;
  std::string host = ipv6 ? "[" + endpoint.host + "]" : endpoint.host;
  if (endpoint.port != (endpoint.tls ? 443 : 80)) host += fmt::format(":{}", endpoint.port);
  return host;
}

}  // namespace

Pool::Pool(Endpoint endpoint, asio::io_context& context, const HttpClientOptions& options,
           ssl::context* tls, ClientShared& stats)
    : endpoint_(std::move(endpoint)),
      key_(endpoint_.Key()),
      host_header_(HostHeader(endpoint_)),
      executor_(context.get_executor()),
      options_(options),
      tls_(endpoint_.tls ? tls : nullptr),
      stats_(stats),
      sweep_(context.get_executor()) {}

void Pool::Start(const std::shared_ptr<Call>& call) {
  call->self = call;
  call->next = active_;
  if (active_ != nullptr) active_->previous = call.get();
  active_ = call.get();
  if (!call->invalid().ok()) {
    call->Fail(call->invalid(), HttpClientError::kInvalidRequest);
    return;
  }
  if (shutting_down_ || stats_.closing.load(std::memory_order_relaxed)) {
    call->Fail(Cancelled("the HTTP client is shutting down"), HttpClientError::kShutdown);
    return;
  }
  call->Begin();
  while (!idle_.empty()) {
    std::shared_ptr<ClientConnection> connection = std::move(idle_.back());
    idle_.pop_back();
    if (connection->LooksAlive()) {
      call->Use(std::move(connection), /*fresh=*/false);
      return;
    }
    connection->Close();  // the server closed it while it was idle
    --open_;
  }
  if (open_ < options_.max_connections_per_endpoint) {
    OpenFor(call);
    return;
  }
  waiting_.push_back(call);
}

void Pool::OpenFor(const std::shared_ptr<Call>& call) {
  ++open_;
  call->Use(std::make_shared<ClientConnection>(executor_), /*fresh=*/true);
}

void Pool::Release(std::shared_ptr<ClientConnection> connection, bool reusable) {
  if (reusable && !shutting_down_) {
    if (!waiting_.empty()) {
      std::shared_ptr<Call> next = std::move(waiting_.front());
      waiting_.pop_front();
      next->Use(std::move(connection), /*fresh=*/false);
      return;
    }
    if (idle_.size() < options_.max_idle_per_endpoint) {
      connection->idle_since = std::chrono::steady_clock::now();
      idle_.push_back(std::move(connection));
      ArmSweep();
      return;
    }
  }
  connection->Close();
  --open_;
  if (!shutting_down_ && !waiting_.empty() && open_ < options_.max_connections_per_endpoint) {
    std::shared_ptr<Call> next = std::move(waiting_.front());
    waiting_.pop_front();
    OpenFor(next);
  }
}

void Pool::Reconnect(const std::shared_ptr<Call>& call, std::shared_ptr<ClientConnection> failed) {
  failed->Close();  // its slot goes to the new connection
  call->Use(std::make_shared<ClientConnection>(executor_), /*fresh=*/true);
}

void Pool::Forget(Call& call) {
  if (call.previous != nullptr) {
    call.previous->next = call.next;
  } else if (active_ == &call) {
    active_ = call.next;
  }
  if (call.next != nullptr) call.next->previous = call.previous;
  call.previous = call.next = nullptr;
  // Rare (a call that timed out or was cancelled while waiting), and the queue is short.
  std::erase_if(waiting_, [&](const std::shared_ptr<Call>& each) { return each.get() == &call; });
}

void Pool::Shutdown() {
  shutting_down_ = true;
  while (active_ != nullptr) {
    std::shared_ptr<Call> call = active_->shared_from_this();
    call->Fail(Cancelled("the HTTP client is shutting down"), HttpClientError::kShutdown);
  }
  for (auto& connection : idle_) connection->Close();
  idle_.clear();
  boost::system::error_code ignored;
  sweep_.cancel(ignored);
}

void Pool::ArmSweep() {
  if (sweeping_ || idle_.empty()) return;
  sweeping_ = true;
  sweep_.expires_after(std::max<std::chrono::milliseconds>(options_.idle_connection_timeout / 2,
                                                           std::chrono::milliseconds(10)));
  sweep_.async_wait([this](const boost::system::error_code& error) {
    sweeping_ = false;
    if (error || shutting_down_) return;
    RunLoggingExceptions("sweeping idle HTTP client connections", [&] { Sweep(); });
  });
}

// Closes idle connections past the idle timeout, and those the server has closed meanwhile.
void Pool::Sweep() {
  const SteadyTime too_old = std::chrono::steady_clock::now() - options_.idle_connection_timeout;
  std::erase_if(idle_, [&](const std::shared_ptr<ClientConnection>& connection) {
    if (connection->idle_since > too_old && connection->LooksAlive()) return false;
    connection->Close();
    --open_;
    return true;
  });
  ArmSweep();
}

}  // namespace client

namespace {

using client::asio::io_context;

bool IsToken(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    const bool alphanumeric =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alphanumeric && std::string_view("!#$%&'*+-.^_`|~").find(c) == std::string_view::npos) {
      return false;
    }
  }
  return true;
}

bool IsFieldValue(std::string_view text) {
  return text.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
}

bool NamedAs(std::string_view name, std::string_view lower) {
  if (name.size() != lower.size()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i] >= 'A' && name[i] <= 'Z' ? static_cast<char>(name[i] + 32) : name[i];
    if (c != lower[i]) return false;
  }
  return true;
}

// Formats `request`'s head for `endpoint` (whose pool is `pool`: endpoints differing only in
// their path prefix share one) into `head`. Errors: InvalidArgument.
Status FormatRequest(const Endpoint& endpoint, const client::Pool& pool,
                     const HttpClientRequest& request, std::string& head) {
  if (!IsToken(request.method)) return InvalidArgument("invalid method '{}'", request.method);
  if (request.target.empty() || request.target.front() != '/') {
    return InvalidArgument("the target '{}' must start with '/'", request.target);
  }
  for (char c : request.target) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) {
      return InvalidArgument("the target may not hold spaces or control characters");
    }
  }
  const HttpHeaders& headers = request.headers;
  for (size_t i = 0; i < headers.size(); ++i) {
    const std::string_view name = headers.name(i);
    if (!IsToken(name) || !IsFieldValue(headers.value(i))) {
      return InvalidArgument("invalid header field '{}'", name);
    }
    if (NamedAs(name, "content-length") || NamedAs(name, "transfer-encoding")) {
      return InvalidArgument("the client sets {} itself", name);
    }
  }
  const std::string& prefix = endpoint.path_prefix;
  head.reserve(64 + prefix.size() + request.target.size() + pool.host_header().size() +
               headers.size() * 32);
  head.append(request.method).append(" ").append(prefix).append(request.target);
  head.append(" HTTP/1.1\r\n");
  if (!headers.Has("host")) head.append("Host: ").append(pool.host_header()).append("\r\n");
  for (size_t i = 0; i < headers.size(); ++i) {
    head.append(headers.name(i)).append(": ").append(headers.value(i)).append("\r\n");
  }
  const std::string_view method = request.method;
  if (!request.body.empty() || method == "POST" || method == "PUT" || method == "PATCH") {
    fmt::format_to(std::back_inserter(head), "Content-Length: {}\r\n", request.body.size());
  }
  head.append("\r\n");
  return Status::Ok();
}

// The client side of TLS 1.2+. Errors: InvalidArgument naming the file.
Result<std::unique_ptr<client::ssl::context>> MakeClientTlsContext(
    const HttpClientTlsOptions& options) {
  namespace ssl = client::ssl;
  if (options.cert_file.empty() != options.key_file.empty()) {
    return InvalidArgument("a TLS client certificate needs its key, and a key its certificate");
  }
  auto context = std::make_unique<ssl::context>(ssl::context::tls_client);
  boost::system::error_code error;
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                           ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                           ssl::context::no_tlsv1_1,
                       error);
  if (error) return InvalidArgument("TLS options: {}", error.message());
  if (options.ca_file.empty()) {
    context->set_default_verify_paths(error);
    if (error) return InvalidArgument("the system's TLS trust store: {}", error.message());
  } else {
    context->load_verify_file(options.ca_file, error);
    if (error) return InvalidArgument("TLS CA file '{}': {}", options.ca_file, error.message());
  }
  if (!options.cert_file.empty()) {
    context->use_certificate_chain_file(options.cert_file, error);
    if (error) {
      return InvalidArgument("TLS client certificate '{}': {}", options.cert_file, error.message());
    }
    context->use_private_key_file(options.key_file, ssl::context::pem, error);
    if (error) return InvalidArgument("TLS client key '{}': {}", options.key_file, error.message());
  }
  return context;
}

// A sink that throws the response away: stands in for a null one.
class DiscardingSink final : public HttpResponseSink {
 public:
  void OnHead(const HttpClientResponseHead&) override {}
  bool OnBody(std::string_view) override { return true; }
  void OnComplete(const Status&, HttpClientError) override {}
};

// Collects a whole response for Fetch.
class FetchSink final : public HttpResponseSink {
 public:
  explicit FetchSink(UniqueFunction<void(HttpFetchResult)> on_done)
      : on_done_(std::move(on_done)) {}

  void OnHead(const HttpClientResponseHead& head) override {
    result_.response.status = head.status;
    result_.response.headers = head.headers;
    if (auto length = head.headers.Get("content-length")) {
      // A declared length (already bounded by max_response_bytes) is reserved at once, up to
      // 1 MiB; past that the body grows as it arrives.
      uint64_t bytes = 0;
      for (char c : *length) bytes = c >= '0' && c <= '9' ? bytes * 10 + (c - '0') : bytes;
      result_.response.body.reserve(std::min<uint64_t>(bytes, 1 << 20));
    }
  }
  bool OnBody(std::string_view piece) override {
    result_.response.body.append(piece);
    return true;
  }
  void OnComplete(const Status& status, HttpClientError error) override {
    result_.status = status;
    result_.error = error;
    on_done_(std::move(result_));
  }

 private:
  UniqueFunction<void(HttpFetchResult)> on_done_;
  HttpFetchResult result_;
};

}  // namespace

class HttpClient::Impl {
 public:
  Impl(const HttpClientOptions& options, std::unique_ptr<client::ssl::context> tls)
      : options_(options), tls_(std::move(tls)) {
    for (int i = 0; i < options_.threads; ++i) {
      contexts_.push_back(std::make_unique<io_context>(1));
      guards_.emplace_back(client::asio::make_work_guard(*contexts_.back()));
    }
    for (int i = 0; i < options_.threads; ++i) {
      threads_.emplace_back([this, i] {
        NameThisThread(fmt::format("{}-io-{}", options_.name, i));
        // An exception a handler let through leaves run(); the loop goes on with the rest.
        while (!RunLoggingExceptions("an HTTP client thread", [&] { contexts_[i]->run(); })) {
        }
      });
    }
  }

  ~Impl() {
    // From here calls sent (by a sink told of the shutdown, say) end at once (kShutdown).
    stats_.closing = true;
    std::vector<client::Pool*> pools;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& [key, pool] : pools_) pools.push_back(pool.get());
    }
    std::vector<std::future<void>> done;
    for (client::Pool* pool : pools) {
      auto shut = std::make_shared<std::promise<void>>();
      done.push_back(shut->get_future());
      client::asio::post(pool->executor(), [pool, shut] {
        RunLoggingExceptions("shutting an HTTP client pool down", [&] { pool->Shutdown(); });
        shut->set_value();
      });
    }
    for (auto& each : done) each.wait();
    // The threads run what is left (handlers of operations the shutdown ended) and return.
    guards_.clear();
    for (auto& thread : threads_) thread.join();
    pools_.clear();
  }

  client::Pool& PoolFor(const Endpoint& endpoint) {
    // The key is formatted on the stack: a call costs no allocation for it.
    fmt::memory_buffer key_text;
    const bool ipv6 = endpoint.host.find(':') != std::string::npos;
    fmt::format_to(std::back_inserter(key_text), "{}://{}{}{}:{}", endpoint.tls ? "https" : "http",
                   ipv6 ? "[" : "", endpoint.host, ipv6 ? "]" : "", endpoint.port);
    const std::string_view key(key_text.data(), key_text.size());
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = pools_.find(key);
    if (found != pools_.end()) return *found->second;
    io_context& context = *contexts_[next_thread_];
    next_thread_ = (next_thread_ + 1) % contexts_.size();
    auto pool = std::make_unique<client::Pool>(endpoint, context, options_, tls_.get(), stats_);
    return *pools_.emplace(std::string(key), std::move(pool)).first->second;
  }

  client::ClientShared& stats() { return stats_; }

 private:
  const HttpClientOptions options_;
  std::unique_ptr<client::ssl::context> tls_;
  client::ClientShared stats_;
  std::vector<std::unique_ptr<io_context>> contexts_;
  std::vector<client::asio::executor_work_guard<io_context::executor_type>> guards_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;  // guards pools_ and next_thread_
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(std::string_view key) const { return std::hash<std::string_view>()(key); }
  };
  std::unordered_map<std::string, std::unique_ptr<client::Pool>, KeyHash, std::equal_to<>> pools_;
  size_t next_thread_ = 0;
};

Result<std::unique_ptr<HttpClient>> HttpClient::Create(const HttpClientOptions& options) {
  if (options.threads < 1) return InvalidArgument("an HTTP client needs at least one thread");
  ASSIGN_OR_RETURN(std::unique_ptr<client::ssl::context> tls, MakeClientTlsContext(options.tls));
  return std::unique_ptr<HttpClient>(
      new HttpClient(std::make_unique<Impl>(options, std::move(tls))));
}

HttpClient::HttpClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpClient::~HttpClient() = default;

HttpCall HttpClient::Send(const Endpoint& endpoint, HttpClientRequest request,
                          std::shared_ptr<HttpResponseSink> sink) {
  if (sink == nullptr) sink = std::make_shared<DiscardingSink>();
  client::Pool& pool = impl_->PoolFor(endpoint);
  std::string head;
  Status invalid = FormatRequest(endpoint, pool, request, head);
  auto call = std::make_shared<client::Call>(pool, std::move(sink), std::move(head),
                                             std::move(request), std::move(invalid));
  client::asio::post(pool.executor(), [&pool, call] {
    RunLoggingExceptions("starting an HTTP client call", [&] { pool.Start(call); });
  });
  return HttpCall(call);
}

HttpCall HttpClient::Fetch(const Endpoint& endpoint, HttpClientRequest request,
                           UniqueFunction<void(HttpFetchResult)> on_done) {
  return Send(endpoint, std::move(request), std::make_shared<FetchSink>(std::move(on_done)));
}

HttpClient::Stats HttpClient::stats() const {
  const client::ClientShared& stats = impl_->stats();
  return {.connections_opened = stats.opened.load(),
          .connections_reused = stats.reused.load(),
          .connections_failed = stats.failed.load(),
          .retries = stats.retries.load(),
          .calls = stats.calls.load()};
}

void HttpCall::Cancel() const {
  if (std::shared_ptr<State> state = state_.lock()) {
    client::asio::post(state->executor(), [state] { state->Cancel(); });
  }
}

void HttpCall::Resume() const {
  if (std::shared_ptr<State> state = state_.lock()) {
    client::asio::post(state->executor(), [state] { state->Resume(); });
  }
}

}  // namespace rampart::net
