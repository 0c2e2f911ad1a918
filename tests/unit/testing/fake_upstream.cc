// FakeUpstream: blocking I/O, a thread per connection (see fake_upstream.h).

#include "testing/fake_upstream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <utility>  // before Boost.Asio 1.74, whose awaitable.hpp needs std::exchange

#include <fmt/core.h>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace rampart::testing {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

constexpr char kModels[] =
    R"({"object":"list","data":[{"id":"fake-model","object":"model","owned_by":"fake"}]})";
constexpr char kEmbeddings[] =
    R"({"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2,0.3]}],)"
    R"("model":"fake-model","usage":{"prompt_tokens":1,"total_tokens":1}})";
constexpr char kCompletion[] =
    R"({"id":"chatcmpl-fake","object":"chat.completion","created":0,"model":"fake-model",)"
    R"("choices":[{"index":0,"message":{"role":"assistant","content":"Hello from the fake )"
    R"(upstream."},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":6,)"
    R"("total_tokens":7}})";

std::string Head(int status, std::string_view content_type, std::string_view framing,
                 std::string_view extra = {}) {
  return fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\n{}{}\r\n", status,
                     std::string(http::obsolete_reason(static_cast<http::status>(status))),
                     content_type, framing, extra);
}

std::string Answer(int status, std::string_view body, std::string_view extra = {}) {
  return Head(status, "application/json", fmt::format("Content-Length: {}\r\n", body.size()),
              extra) +
         std::string(body);
}

std::string Chunk(std::string_view data) {
  return fmt::format("{:x}\r\n{}\r\n", data.size(), data);
}

std::string StreamEvent(int i) {
  return fmt::format(
      "data: {{\"id\":\"chatcmpl-fake\",\"object\":\"chat.completion.chunk\",\"created\":0,"
      "\"model\":\"fake-model\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"tok{} "
      "\"}},\"finish_reason\":null}}]}}\n\n",
      i);
}

bool AsksToStream(const std::string& body) {
  std::string compact = body;
  std::erase_if(compact, [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; });
  return compact.find("\"stream\":true") != std::string::npos;
}

}  // namespace

struct FakeUpstream::Io {
  asio::io_context context;  // owns the sockets' descriptors only: all I/O is blocking
  std::optional<ssl::context> tls;
};

// One accepted connection, served on its own thread.
class FakeUpstream::Connection {
 public:
  Connection(FakeUpstream& fake, tcp::socket socket) : fake_(fake), socket_(std::move(socket)) {}

  void Serve() {
    if (fake_.io_->tls) {
      tls_.emplace(socket_, *fake_.io_->tls);
      error_code error;
      tls_->handshake(ssl::stream_base::server, error);
      if (error) return;
    }
    while (!fake_.stopping()) {
      // The behaviour is chosen when the request's first byte is there (a test sets it before
      // sending), so that a kept-alive connection does not take it before the test has set it.
      // (Over TLS the request may have been read with the handshake: no waiting there.)
      if (!tls_ && buffer_.size() == 0 && !WaitReadable()) return;
      const UpstreamBehaviour behaviour = fake_.Take();
      if (behaviour.fault == UpstreamFault::kStopReading) {
        Hold(/*read_nothing=*/true);
        return;
      }
      http::request_parser<http::string_body> parser;
      parser.body_limit(1ull << 30);
      error_code error;
      if (behaviour.fault == UpstreamFault::kReadSlowly) {
        beast::flat_buffer small(4096);
        while (!error && !parser.is_done()) {
          http::read_some(*this, small, parser, error);
          if (!fake_.stopping()) Wait(behaviour.delay);
        }
      } else {
        http::read(*this, buffer_, parser, error);
      }
      if (error) {
        if (!fake_.stopping()) {  // the client closed the connection (or sent garbage)
          ++fake_.closed_;
          fake_.Notify();
        }
        return;
      }
      const http::request<http::string_body>& request = parser.get();
      const std::string path(request.target().substr(0, request.target().find('?')));
      {
        std::lock_guard<std::mutex> lock(fake_.mutex_);
        ++fake_.requests_[path];
        fake_.last_body_ = request.body();
        fake_.last_headers_.clear();
        for (const auto& field : request) {
          std::string name(field.name_string());
          std::transform(name.begin(), name.end(), name.begin(), ::tolower);
          fake_.last_headers_[name] = std::string(field.value());
        }
      }
      fake_.Notify();
      if (!Respond(behaviour, request.method_string() == "POST" ? request.body() : "", path)) {
        return;
      }
    }
  }

  // For Beast's http::read: the stream, plain or TLS.
  template <typename Buffers>
  size_t read_some(const Buffers& buffers, error_code& error) {
    return tls_ ? tls_->read_some(buffers, error) : socket_.read_some(buffers, error);
  }
  template <typename Buffers>
  size_t read_some(const Buffers& buffers) {
    return tls_ ? tls_->read_some(buffers) : socket_.read_some(buffers);
  }
  template <typename Buffers>
  size_t write_some(const Buffers& buffers, error_code& error) {
    return tls_ ? tls_->write_some(buffers, error) : socket_.write_some(buffers, error);
  }
  template <typename Buffers>
  size_t write_some(const Buffers& buffers) {
    return tls_ ? tls_->write_some(buffers) : socket_.write_some(buffers);
  }
  auto get_executor() { return socket_.get_executor(); }

  void Close() {
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

 private:
  // Answers one request; false when the connection is to end.
  bool Respond(const UpstreamBehaviour& behaviour, const std::string& body,
               const std::string& path) {
    switch (behaviour.fault) {
      case UpstreamFault::kDelayFirstByte: Wait(behaviour.delay); break;
      case UpstreamFault::kStatus:
        return Send(Answer(behaviour.status, R"({"error":{"message":"injected failure"}})"));
      case UpstreamFault::kTooManyRequests:
        return Send(Answer(429, R"({"error":{"message":"slow down"}})",
                           fmt::format("Retry-After: {}\r\n", behaviour.retry_after)));
      case UpstreamFault::kInvalidJson:
        return Send(Answer(200, R"({"choices": [ {"message": oops)"));
      case UpstreamFault::kHugeBody: return SendHuge(behaviour.huge_bytes);
      case UpstreamFault::kHang: Hold(); return false;
      case UpstreamFault::kCloseMidResponse: {
        const std::string answer = Answer(200, kCompletion);
        Send(answer.substr(0, answer.size() - sizeof(kCompletion) / 2));
        return false;
      }
      case UpstreamFault::kRaw: Send(behaviour.raw); return false;
      case UpstreamFault::kCloseUnanswered: return false;
      default: break;
    }
    bool sent = true;
    if (path == "/health") {
      sent = Send(Head(200, "text/plain", "Content-Length: 2\r\n") + "ok");
    } else if (path == "/v1/models") {
      sent = Send(Answer(200, kModels));
    } else if (path == "/v1/embeddings") {
      sent = Send(Answer(200, kEmbeddings));
    } else if (path == "/v1/chat/completions" && AsksToStream(body)) {
      return SendStream(behaviour);
    } else if (path == "/v1/chat/completions") {
      sent = Send(Answer(200, kCompletion));
    } else {
      sent = Send(Answer(404, R"({"error":{"message":"not found"}})"));
    }
    return sent && behaviour.fault != UpstreamFault::kCloseAfterAnswer;
  }

  bool SendStream(const UpstreamBehaviour& behaviour) {
    if (!Send(Head(200, "text/event-stream", "Transfer-Encoding: chunked\r\n",
                   "Cache-Control: no-cache\r\n"))) {
      return false;
    }
    const bool cut = behaviour.fault == UpstreamFault::kCutStream;
    const bool stall = behaviour.fault == UpstreamFault::kStallStream;
    for (int i = 0; i < fake_.options_.stream_chunks; ++i) {
      if ((cut || stall) && i == behaviour.chunks) break;
      if (!Send(Chunk(StreamEvent(i)))) return false;
    }
    if (cut) return false;
    if (stall) {
      Hold();
      return false;
    }
    return Send(Chunk("data: [DONE]\n\n") + "0\r\n\r\n");
  }

  bool SendHuge(uint64_t bytes) {
    if (!Send(
            Head(200, "application/octet-stream", fmt::format("Content-Length: {}\r\n", bytes)))) {
      return false;
    }
    const std::string piece(64 * 1024, 'x');
    while (bytes > 0) {
      const size_t size = std::min<uint64_t>(bytes, piece.size());
      if (!Send(std::string_view(piece).substr(0, size), /*count=*/true)) return false;
      bytes -= size;
    }
    return true;
  }

  // Writes `data` whole. Plain writes wait for the socket in 100 ms polls, counting each that
  // finds it still full as a stall.
  bool Send(std::string_view data, bool count = false) {
    if (tls_) {
      error_code error;
      asio::write(*tls_, asio::buffer(data), error);
      if (!error && count) fake_.body_bytes_sent_ += data.size();
      return !error;
    }
    const int fd = socket_.native_handle();
    while (!data.empty()) {
      if (fake_.stopping()) return false;
      pollfd wanted{.fd = fd, .events = POLLOUT, .revents = 0};
      const int ready = ::poll(&wanted, 1, 100);
      if (ready == 0) {
        ++fake_.stalls_;
        fake_.Notify();
        continue;
      }
      const ssize_t sent = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (sent <= 0) return false;
      data.remove_prefix(static_cast<size_t>(sent));
      if (count) {
        fake_.body_bytes_sent_ += static_cast<uint64_t>(sent);
        fake_.Notify();
      }
    }
    return true;
  }

  // Sends nothing until the client closes the connection (counted) or the fake stops; reads
  // and drops what the client sends meanwhile unless `read_nothing`.
  void Hold(bool read_nothing = false) {
    const int fd = socket_.native_handle();
    while (!fake_.stopping()) {
      pollfd wanted{.fd = fd,
                    .events = static_cast<short>(read_nothing ? POLLRDHUP : POLLIN | POLLRDHUP),
                    .revents = 0};
      if (::poll(&wanted, 1, 10) <= 0) continue;
      if (wanted.revents & (POLLRDHUP | POLLHUP | POLLERR)) {
        ++fake_.closed_;
        fake_.Notify();
        return;
      }
      char byte;
      const ssize_t peeked = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (peeked == 0 || (peeked < 0 && errno != EAGAIN)) {
        ++fake_.closed_;
        fake_.Notify();
        return;
      }
      if (peeked > 0) {
        char discard[4096];
        if (::recv(fd, discard, sizeof(discard), MSG_DONTWAIT) <= 0) continue;
      }
    }
  }

  // Waits until the socket has input (or its end); false if the fake stops first.
  bool WaitReadable() {
    while (!fake_.stopping()) {
      pollfd wanted{.fd = socket_.native_handle(), .events = POLLIN | POLLRDHUP, .revents = 0};
      if (::poll(&wanted, 1, 10) > 0) return true;
    }
    return false;
  }

  // Waits `delay`, or less if the fake stops.
  void Wait(std::chrono::milliseconds delay) {
    std::unique_lock<std::mutex> lock(fake_.mutex_);
    fake_.changed_.wait_for(lock, delay, [&] { return fake_.stopping(); });
  }

  FakeUpstream& fake_;
  tcp::socket socket_;
  std::optional<ssl::stream<tcp::socket&>> tls_;
  beast::flat_buffer buffer_;
};

FakeUpstream::FakeUpstream(FakeUpstreamOptions options) : options_(std::move(options)) {
  io_ = std::make_unique<Io>();
  if (!options_.tls_cert_pem.empty()) {
    ssl::context& context = io_->tls.emplace(ssl::context::tls_server);
    context.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                        ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    context.use_certificate_chain(asio::buffer(options_.tls_cert_pem));
    context.use_private_key(asio::buffer(options_.tls_key_pem), ssl::context::pem);
    if (!options_.client_ca_pem.empty()) {
      context.add_certificate_authority(asio::buffer(options_.client_ca_pem));
      context.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
    }
  }
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(listen_fd_, 128) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw std::runtime_error("FakeUpstream cannot listen on loopback");
  }
  port_ = ntohs(address.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

FakeUpstream::~FakeUpstream() { Stop(); }

std::string FakeUpstream::url() const {
  return fmt::format("{}://127.0.0.1:{}", io_->tls ? "https" : "http", port_);
}

void FakeUpstream::AcceptLoop() {
  while (!stopping()) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;
    }
    ++accepted_;
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping()) {
      ::close(fd);
      return;
    }
    open_fds_.insert(fd);
    auto connection = std::make_shared<Connection>(*this, tcp::socket(io_->context, tcp::v4(), fd));
    connections_.emplace_back([this, connection, fd] {
      try {
        connection->Serve();
      } catch (const std::exception&) {  // a TLS failure mid-write: the connection just ends
      }
      {
        std::lock_guard<std::mutex> erase_lock(mutex_);
        open_fds_.erase(fd);
      }
      connection->Close();
      ++ended_;
      Notify();
    });
    changed_.notify_all();
  }
}

UpstreamBehaviour FakeUpstream::Take() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (once_.empty()) return behaviour_;
  UpstreamBehaviour next = std::move(once_.front());
  once_.pop_front();
  return next;
}

void FakeUpstream::SetBehaviour(UpstreamBehaviour behaviour) {
  std::lock_guard<std::mutex> lock(mutex_);
  behaviour_ = std::move(behaviour);
}

void FakeUpstream::PushOnce(UpstreamBehaviour behaviour) {
  std::lock_guard<std::mutex> lock(mutex_);
  once_.push_back(std::move(behaviour));
}

int FakeUpstream::requests(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = requests_.find(path);
  return found == requests_.end() ? 0 : found->second;
}

int FakeUpstream::total_requests() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int total = 0;
  for (const auto& [path, count] : requests_) total += count;
  return total;
}

std::string FakeUpstream::last_body() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_body_;
}

std::optional<std::string> FakeUpstream::last_header(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = last_headers_.find(name);
  if (found == last_headers_.end()) return std::nullopt;
  return found->second;
}

void FakeUpstream::Notify() {
  std::lock_guard<std::mutex> lock(mutex_);
  changed_.notify_all();
}

bool FakeUpstream::WaitFor(const std::function<bool()>& condition,
                           std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    lock.unlock();
    const bool holds = condition();
    lock.lock();
    if (holds) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    // Counts change under the lock and notify; the timeout covers the client's own state.
    changed_.wait_for(lock, std::chrono::milliseconds(10));
  }
}

void FakeUpstream::Stop() {
  if (stopping_.exchange(true)) return;
  ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
  if (acceptor_.joinable()) acceptor_.join();
  ::close(listen_fd_);
  std::vector<std::thread> connections;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);  // wakes blocked reads and writes
    connections.swap(connections_);
    changed_.notify_all();
  }
  for (auto& thread : connections) thread.join();
}

}  // namespace rampart::testing
