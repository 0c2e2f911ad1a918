// Time to the first byte, the first server-sent event and the whole answer of POSTs sent one
// after another over one keep-alive HTTP/1.1 connection (bench/gateway_bench.sh measures
// streamed chat completions with it, which wrk cannot: wrk times whole responses only).
//
// Each request is the same: POST --path with the body read from --body-file, as JSON, with
// `Accept: text/event-stream` when --accept-sse is given. The answer is read to its end
// (Content-Length or chunked), timing from just before the request is written to
//   first byte:  the first byte of the answer (status line),
//   first event: the first `data:` of the body (absent from answers without one),
//   whole:       the answer's last byte.
// Answers that are not 200 are counted as errors; a broken connection ends the probe with
// status 1. Requests run for --seconds after --warmup-seconds of unrecorded ones.
//
//   first_event_probe --port P --path /v1/chat/completions --body-file F [--host 127.0.0.1]
//                     [--accept-sse] [--seconds 3] [--warmup-seconds 0.5]
//
// Prints key=value lines: requests, errors, and `<measure>_p50_us`, `<measure>_p99_us`,
// `<measure>_mean_us` for measure first_byte, first_event (when every answer had an event) and
// whole.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace {

using Clock = std::chrono::steady_clock;

struct Timing {
  int64_t first_byte_ns = 0;
  int64_t first_event_ns = -1;  // -1: the answer had no event
  int64_t whole_ns = 0;
  bool ok = false;  // status 200
};

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// Where the answer at the start of `buffer` ends (one past its last byte), once it is complete;
// nullopt while more is needed. Sets `failed` on an answer it cannot frame.
std::optional<size_t> AnswerEnd(std::string_view buffer, bool& failed) {
  const size_t head_end = buffer.find("\r\n\r\n");
  if (head_end == std::string_view::npos) return std::nullopt;
  const std::string_view head = buffer.substr(0, head_end + 2);
  std::optional<size_t> content_length;
  bool chunked = false;
  size_t line_start = head.find("\r\n") + 2;
  while (line_start < head.size()) {
    const size_t line_end = head.find("\r\n", line_start);
    const std::string_view line = head.substr(line_start, line_end - line_start);
    line_start = line_end + 2;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, colon);
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (EqualsIgnoringCase(name, "content-length")) {
      content_length = std::stoull(std::string(value));
    } else if (EqualsIgnoringCase(name, "transfer-encoding")) {
      chunked = EqualsIgnoringCase(value, "chunked");
    }
  }
  size_t at = head_end + 4;
  if (!chunked) {
    if (!content_length) {
      failed = true;  // an answer ended by closing the connection cannot be reused
      return std::nullopt;
    }
    return buffer.size() >= at + *content_length ? std::optional(at + *content_length)
                                                 : std::nullopt;
  }
  while (true) {
    const size_t size_end = buffer.find("\r\n", at);
    if (size_end == std::string_view::npos) return std::nullopt;
    size_t size = 0;
    const std::string_view digits = buffer.substr(at, size_end - at);
    for (char c : digits) {
      if (c == ';') break;
      const int digit = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                        : (c >= 'a' && c <= 'f')                    ? c - 'a' + 10
                        : (c >= 'A' && c <= 'F')                    ? c - 'A' + 10
                                                                    : -1;
      if (digit < 0) {
        failed = true;
        return std::nullopt;
      }
      size = size * 16 + static_cast<size_t>(digit);
    }
    at = size_end + 2;
    if (size == 0) {
      // No trailers expected: the last chunk is followed by an empty line.
      return buffer.size() >= at + 2 ? std::optional(at + 2) : std::nullopt;
    }
    if (buffer.size() < at + size + 2) return std::nullopt;
    at += size + 2;
  }
}

int Connect(const std::string& host, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return -1;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

// Sends `request` on `fd` and reads one answer; false when the connection fails.
bool Exchange(int fd, std::string_view request, std::string& buffer, Timing& timing) {
  const Clock::time_point start = Clock::now();
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  buffer.clear();
  const auto since_start = [start] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
  };
  char chunk[16384];
  size_t head_end = std::string_view::npos;
  while (true) {
    const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n <= 0) return false;
    const int64_t now_ns = since_start();
    if (buffer.empty()) timing.first_byte_ns = now_ns;
    buffer.append(chunk, static_cast<size_t>(n));
    if (head_end == std::string_view::npos) head_end = buffer.find("\r\n\r\n");
    if (timing.first_event_ns < 0 && head_end != std::string_view::npos &&
        buffer.find("data:", head_end) != std::string::npos) {
      timing.first_event_ns = now_ns;
    }
    bool failed = false;
    const std::optional<size_t> end = AnswerEnd(buffer, failed);
    if (failed) return false;
    if (end) {
      if (*end != buffer.size()) return false;  // nothing was asked beyond this answer
      timing.whole_ns = now_ns;
      timing.ok = buffer.compare(0, 12, "HTTP/1.1 200") == 0;
      return true;
    }
  }
}

double Percentile(std::vector<int64_t> values, double fraction) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t index = std::min(values.size() - 1,
                                static_cast<size_t>(fraction * static_cast<double>(values.size())));
  return static_cast<double>(values[index]) / 1e3;
}

void Print(std::string_view name, const std::vector<int64_t>& values) {
  double sum = 0;
  for (int64_t value : values) sum += static_cast<double>(value);
  std::printf("%.*s_p50_us=%.1f\n", static_cast<int>(name.size()), name.data(),
              Percentile(values, 0.50));
  std::printf("%.*s_p99_us=%.1f\n", static_cast<int>(name.size()), name.data(),
              Percentile(values, 0.99));
  std::printf("%.*s_mean_us=%.1f\n", static_cast<int>(name.size()), name.data(),
              values.empty() ? 0 : sum / static_cast<double>(values.size()) / 1e3);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Time to first byte, first event and whole answer of sequential POSTs"};
  std::string host = "127.0.0.1";
  int port = 0;
  std::string path;
  std::string body_file;
  bool accept_sse = false;
  double seconds = 3;
  double warmup_seconds = 0.5;
  app.add_option("--host", host, "IPv4 address of the server")->capture_default_str();
  app.add_option("--port", port, "Port of the server")->required()->check(CLI::Range(1, 65535));
  app.add_option("--path", path, "Request target, e.g. /v1/chat/completions")->required();
  app.add_option("--body-file", body_file, "JSON request body")->required();
  app.add_flag("--accept-sse", accept_sse, "Send Accept: text/event-stream");
  app.add_option("--seconds", seconds, "Measured time")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--warmup-seconds", warmup_seconds, "Unrecorded requests first, this long")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  CLI11_PARSE(app, argc, argv);

  const std::optional<std::string> body = ReadFile(body_file);
  if (!body) {
    std::fprintf(stderr, "cannot read --body-file '%s'\n", body_file.c_str());
    return 1;
  }
  const std::string request =
      "POST " + path + " HTTP/1.1\r\nHost: " + host + ":" + std::to_string(port) +
      "\r\nContent-Type: application/json\r\nAccept: " +
      (accept_sse ? "text/event-stream" : "application/json") +
      "\r\nContent-Length: " + std::to_string(body->size()) + "\r\n\r\n" + *body;

  const int fd = Connect(host, port);
  if (fd < 0) {
    std::fprintf(stderr, "cannot connect to %s:%d: %s\n", host.c_str(), port, std::strerror(errno));
    return 1;
  }
  const auto after = [](double duration) {
    return Clock::now() +
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(duration));
  };
  std::string buffer;
  std::vector<int64_t> first_byte, first_event, whole;
  int64_t errors = 0;
  bool every_answer_had_event = true;
  for (const bool measured : {false, true}) {
    const Clock::time_point end = after(measured ? seconds : warmup_seconds);
    while (Clock::now() < end) {
      Timing timing;
      if (!Exchange(fd, request, buffer, timing)) {
        std::fprintf(stderr, "the connection failed or an answer could not be framed\n");
        ::close(fd);
        return 1;
      }
      if (!measured) continue;
      if (!timing.ok) {
        ++errors;
        continue;
      }
      first_byte.push_back(timing.first_byte_ns);
      whole.push_back(timing.whole_ns);
      if (timing.first_event_ns >= 0) {
        first_event.push_back(timing.first_event_ns);
      } else {
        every_answer_had_event = false;
      }
    }
  }
  ::close(fd);
  std::printf("requests=%zu\nerrors=%ld\n", whole.size() + static_cast<size_t>(errors),
              static_cast<long>(errors));
  Print("first_byte", first_byte);
  if (every_answer_had_event && !first_event.empty()) Print("first_event", first_event);
  Print("whole", whole);
  return 0;
}
