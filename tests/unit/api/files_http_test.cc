// The OpenAI Files API over a real server and a SQLite store: upload (streamed, multipart),
// list with paging, retrieve, content, delete, 404s, the 400s for missing or bad fields, 413 over
// the limit, a client gone mid-upload leaving nothing behind; plain and sealed at rest.

#include "api/files_http.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>

#include "crypto/keyring.h"
#include "json/reader.h"
#include "net/http_test_support.h"
#include "store/keyring_storage.h"
#include "testing/eventually.h"

namespace rampart::api {
namespace {

namespace http = boost::beast::http;

constexpr uint64_t kMaxBytes = 3 << 20;

std::string Multipart(std::string_view boundary, std::string_view purpose,
                      std::string_view filename, std::string_view content) {
  std::string body;
  if (!purpose.empty()) {
    body += fmt::format("--{}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\n{}\r\n",
                        boundary, purpose);
  }
  if (!filename.empty()) {
    body += fmt::format(
        "--{}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{}\"\r\n"
        "Content-Type: application/octet-stream\r\n\r\n",
        boundary, filename);
    body += content;
    body += "\r\n";
  }
  body += fmt::format("--{}--\r\n", boundary);
  return body;
}

// Content with every byte value and lines that look like delimiters.
std::string Content(size_t size) {
  std::string content;
  content.reserve(size);
  for (size_t i = 0; content.size() < size; ++i) {
    content += i % 97 == 0 ? std::string("\r\n--boundary") : std::string(1, static_cast<char>(i));
  }
  content.resize(size);
  return content;
}

class FilesHttpTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/rampart-files-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    auto store = store::OpenSqliteStore(dir_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    FilesOptions options{.dir = dir_ + "/files", .max_bytes = kMaxBytes};
    options.on_deleted = [this](const std::string& tenant, const std::string& id) {
      std::lock_guard lock(deleted_mutex_);
      deleted_.push_back(tenant + "/" + id);
    };
    if (GetParam()) {
      const std::string path = dir_ + "/master.key";
      std::ofstream(path) << std::string(64, '7');
      std::filesystem::permissions(path, std::filesystem::perms::owner_read);
      auto master = crypto::MasterKeyFromFile(path);
      ASSERT_TRUE(master.ok()) << master.status().ToString();
      keyring_storage_ = std::make_unique<store::StoreKeyringStorage>(*store_);
      auto keyring = crypto::Keyring::Open(*keyring_storage_, std::move(*master));
      ASSERT_TRUE(keyring.ok()) << keyring.status().ToString();
      keyring_ = std::move(*keyring);
      ASSERT_TRUE(keyring_->Ensure("files", crypto::KeyPurpose::kWrapping, "aes-256-gcm").ok());
      envelope_ = std::make_unique<crypto::Envelope>(*keyring_);
      options.envelope = envelope_.get();
      options.seal_key = "files";
    }
    auto files = FilesHttp::Create(*store_, options);
    ASSERT_TRUE(files.ok()) << files.status().ToString();
    files_ = std::move(*files);
    net::HttpServerOptions server_options;
    server_options.address = "127.0.0.1";
    server_options.port = 0;
    server_options.threads = 2;
    server_options.max_body_bytes = 1 << 20;  // smaller than an upload may be
    server_options.streamed_body = [this](const net::HttpRequest& head) {
      return files_->StreamedBodyLimit(head);
    };
    auto server = net::HttpServer::Start(
        server_options, [this](net::HttpRequest&& request, net::Responder responder) {
          files_->Handle(std::move(request), std::move(responder));
        });
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::seconds(5));
    if (files_) files_->Shutdown();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  http::response<http::string_body> Send(http::verb verb, const std::string& target,
                                         std::string body = "", std::string content_type = "") {
    net::asio::io_context context;
    net::beast::tcp_stream stream(context);
    stream.connect(
        net::asio::ip::tcp::endpoint(net::asio::ip::make_address("127.0.0.1"), server_->port()));
    http::request<http::string_body> request(verb, target, 11);
    request.set(http::field::host, "127.0.0.1");
    if (!content_type.empty()) request.set(http::field::content_type, content_type);
    request.body() = std::move(body);
    request.prepare_payload();
    http::write(stream, request);
    net::beast::flat_buffer buffer;
    http::response<http::string_body> response;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 << 20);
    http::read(stream, buffer, parser);
    return parser.release();
  }

  http::response<http::string_body> Upload(std::string_view purpose, std::string_view filename,
                                           std::string_view content) {
    return Send(http::verb::post, "/v1/files", Multipart("XyZ", purpose, filename, content),
                "multipart/form-data; boundary=XyZ");
  }

  static std::string Field(const std::string& json, std::string_view key) {
    json::Parser parser;
    auto document = parser.Parse(json);
    if (!document.ok()) return "<not json>";
    auto value = document->Find(key);
    if (!value) return "<absent>";
    switch (value->kind()) {
      case json::Kind::kString: return std::string(*value->GetString(key));
      case json::Kind::kBool: return *value->GetBool(key) ? "true" : "false";
      case json::Kind::kNumber: return std::to_string(*value->GetInt64(key));
      case json::Kind::kNull: return "null";
      default: return "<other>";
    }
  }

  std::vector<std::string> FilesOnDisk() {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(dir_ + "/files")) {
      names.push_back(entry.path().filename().string());
    }
    return names;
  }

  std::string dir_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<store::StoreKeyringStorage> keyring_storage_;
  std::unique_ptr<crypto::Keyring> keyring_;
  std::unique_ptr<crypto::Envelope> envelope_;
  std::unique_ptr<FilesHttp> files_;
  std::mutex deleted_mutex_;
  std::vector<std::string> deleted_;  // tenant/id, as on_deleted was told
  std::unique_ptr<net::HttpServer> server_;
};

TEST_P(FilesHttpTest, UploadListRetrieveContentDelete) {
  const std::string content = Content((2 << 20) + 12345);  // over the server's whole-body limit
  auto uploaded = Upload("assistants", "report.bin", content);
  ASSERT_EQ(uploaded.result_int(), 200) << uploaded.body();
  const std::string id = Field(uploaded.body(), "id");
  EXPECT_EQ(id.substr(0, 5), "file-");
  EXPECT_EQ(Field(uploaded.body(), "object"), "file");
  EXPECT_EQ(Field(uploaded.body(), "bytes"), std::to_string(content.size()));
  EXPECT_EQ(Field(uploaded.body(), "filename"), "report.bin");
  EXPECT_EQ(Field(uploaded.body(), "purpose"), "assistants");
  EXPECT_EQ(Field(uploaded.body(), "status"), "processed");
  EXPECT_EQ(FilesOnDisk(), std::vector<std::string>{id});
  // Sealed at rest: the bytes on disk are not the content.
  const auto on_disk = std::filesystem::file_size(dir_ + "/files/" + id);
  if (GetParam()) {
    EXPECT_GT(on_disk, content.size());
  } else {
    EXPECT_EQ(on_disk, content.size());
  }

  auto second = Upload("user_data", "empty.txt", "");
  ASSERT_EQ(second.result_int(), 200) << second.body();
  const std::string id2 = Field(second.body(), "id");
  EXPECT_EQ(Field(second.body(), "bytes"), "0");

  auto listed = Send(http::verb::get, "/v1/files");
  ASSERT_EQ(listed.result_int(), 200) << listed.body();
  EXPECT_EQ(Field(listed.body(), "object"), "list");
  EXPECT_EQ(Field(listed.body(), "has_more"), "false");
  EXPECT_NE(listed.body().find(id), std::string::npos);
  EXPECT_NE(listed.body().find(id2), std::string::npos);
  auto paged = Send(http::verb::get, "/v1/files?limit=1&order=asc");
  EXPECT_EQ(Field(paged.body(), "has_more"), "true") << paged.body();
  const std::string first = Field(paged.body(), "first_id");
  EXPECT_EQ(Field(paged.body(), "last_id"), first);
  auto next = Send(http::verb::get, "/v1/files?limit=1&order=asc&after=" + first);
  EXPECT_EQ(Field(next.body(), "has_more"), "false") << next.body();
  EXPECT_NE(Field(next.body(), "first_id"), first);
  auto by_purpose = Send(http::verb::get, "/v1/files?purpose=user_data");
  EXPECT_EQ(Field(by_purpose.body(), "first_id"), id2) << by_purpose.body();
  EXPECT_EQ(Send(http::verb::get, "/v1/files?limit=0").result_int(), 400);
  EXPECT_EQ(Send(http::verb::get, "/v1/files?order=sideways").result_int(), 400);

  auto retrieved = Send(http::verb::get, "/v1/files/" + id);
  ASSERT_EQ(retrieved.result_int(), 200) << retrieved.body();
  EXPECT_EQ(Field(retrieved.body(), "filename"), "report.bin");

  auto bytes = Send(http::verb::get, "/v1/files/" + id + "/content");
  ASSERT_EQ(bytes.result_int(), 200);
  EXPECT_EQ(bytes[http::field::content_type], "application/octet-stream");
  EXPECT_TRUE(bytes.body() == content) << bytes.body().size() << " vs " << content.size();
  auto empty = Send(http::verb::get, "/v1/files/" + id2 + "/content");
  ASSERT_EQ(empty.result_int(), 200);
  EXPECT_EQ(empty.body(), "");

  auto deleted = Send(http::verb::delete_, "/v1/files/" + id);
  ASSERT_EQ(deleted.result_int(), 200) << deleted.body();
  EXPECT_EQ(Field(deleted.body(), "id"), id);
  EXPECT_EQ(Field(deleted.body(), "object"), "file");
  EXPECT_EQ(Field(deleted.body(), "deleted"), "true");
  EXPECT_EQ(FilesOnDisk(), std::vector<std::string>{id2});
  {
    std::lock_guard lock(deleted_mutex_);
    EXPECT_EQ(deleted_, std::vector<std::string>{"default/" + id}) << "on_deleted is told";
  }

  for (const std::string& gone : {"/v1/files/" + id, "/v1/files/" + id + "/content"}) {
    auto missing = Send(http::verb::get, gone);
    EXPECT_EQ(missing.result_int(), 404) << gone;
    EXPECT_NE(missing.body().find("No such File object"), std::string::npos) << missing.body();
    EXPECT_NE(missing.body().find("\"type\":\"invalid_request_error\""), std::string::npos)
        << missing.body();
  }
  EXPECT_EQ(Send(http::verb::delete_, "/v1/files/" + id).result_int(), 404);
  EXPECT_EQ(Send(http::verb::get, "/v1/files/file-nonesuch").result_int(), 404);
}

TEST_P(FilesHttpTest, MissingOrBadFieldsAre400AndLeaveNothing) {
  auto no_file = Upload("assistants", "", "");
  EXPECT_EQ(no_file.result_int(), 400) << no_file.body();
  EXPECT_NE(no_file.body().find("\"param\":\"file\""), std::string::npos) << no_file.body();
  auto no_purpose = Upload("", "a.txt", "hello");
  EXPECT_EQ(no_purpose.result_int(), 400) << no_purpose.body();
  EXPECT_NE(no_purpose.body().find("\"param\":\"purpose\""), std::string::npos);
  auto bad_purpose = Upload("world-domination", "a.txt", "hello");
  EXPECT_EQ(bad_purpose.result_int(), 400) << bad_purpose.body();
  auto not_multipart = Send(http::verb::post, "/v1/files", "{}", "application/json");
  EXPECT_EQ(not_multipart.result_int(), 400) << not_multipart.body();
  auto truncated = Send(http::verb::post, "/v1/files",
                        "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; "
                        "filename=\"a\"\r\n\r\nhello",
                        "multipart/form-data; boundary=XyZ");
  EXPECT_EQ(truncated.result_int(), 400) << truncated.body();
  EXPECT_TRUE(FilesOnDisk().empty());
  auto listed = Send(http::verb::get, "/v1/files");
  EXPECT_EQ(Field(listed.body(), "first_id"), "null");
}

TEST_P(FilesHttpTest, AFileOverTheLimitIs413AndLeavesNothing) {
  auto over = Upload("assistants", "big.bin", std::string(kMaxBytes + 1, 'x'));
  EXPECT_EQ(over.result_int(), 413) << over.body();
  EXPECT_TRUE(FilesOnDisk().empty());
  auto at = Upload("assistants", "big.bin", std::string(kMaxBytes, 'x'));
  EXPECT_EQ(at.result_int(), 200) << at.body();
}

TEST_P(FilesHttpTest, AClientGoneMidUploadLeavesNoFile) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(server_->port());
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  const std::string body = Multipart("XyZ", "assistants", "a.bin", std::string(1 << 20, 'q'));
  const std::string head =
      "POST /v1/files HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=XyZ\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n";
  const std::string sent = head + body.substr(0, body.size() / 2);
  ASSERT_EQ(::send(fd, sent.data(), sent.size(), MSG_NOSIGNAL), static_cast<ssize_t>(sent.size()));
  // The part file appears while the upload runs, and goes once the client does.
  ASSERT_TRUE(testing::Eventually([&] { return !FilesOnDisk().empty(); }));
  ::close(fd);
  ASSERT_TRUE(testing::Eventually([&] { return FilesOnDisk().empty(); }));
  auto listed = Send(http::verb::get, "/v1/files");
  EXPECT_EQ(Field(listed.body(), "first_id"), "null");
}

// Sealed records bind the tenant, the file and their place: another tenant's context, a record
// dropped from the end, or records swapped between files fail to open.
TEST_P(FilesHttpTest, SealedFilesDoNotOpenElsewhereOrCutShort) {
  if (!GetParam()) GTEST_SKIP() << "plain files are not sealed";
  FileStorage storage(dir_ + "/files", envelope_.get(), "files");
  const std::string content = Content(FileStorage::kRecordBytes * 2 + 100);  // three records
  const auto write = [&](const std::string& id) {
    auto writer = storage.Create("acme", id);
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    ASSERT_TRUE((*writer)->Write(content).ok());
    ASSERT_TRUE((*writer)->Commit().ok());
  };
  const auto read = [&](const std::string& tenant, const std::string& id) -> Result<std::string> {
    ASSIGN_OR_RETURN(auto reader, storage.Open(tenant, id, "envelope"));
    std::string all;
    while (true) {
      ASSIGN_OR_RETURN(std::string piece, reader->Next());
      if (piece.empty()) return all;
      all += piece;
    }
  };
  const std::string a = "file-aaaaaaaaaaaaaaaaaaaaaaaa";
  const std::string b = "file-bbbbbbbbbbbbbbbbbbbbbbbb";
  write(a);
  write(b);
  auto whole = read("acme", a);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_TRUE(*whole == content);
  EXPECT_FALSE(read("beta", a).ok());
  // b's bytes under a's name: their records name b.
  std::filesystem::copy_file(dir_ + "/files/" + b, dir_ + "/files/" + a,
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_FALSE(read("acme", a).ok());
  // b without its last record: cut short.
  const std::string path = dir_ + "/files/" + b;
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  size_t at = 0;
  size_t last = 0;
  while (at < bytes.size()) {
    last = at;
    const uint32_t length = (uint32_t{static_cast<unsigned char>(bytes[at])} << 24) |
                            (uint32_t{static_cast<unsigned char>(bytes[at + 1])} << 16) |
                            (uint32_t{static_cast<unsigned char>(bytes[at + 2])} << 8) |
                            uint32_t{static_cast<unsigned char>(bytes[at + 3])};
    at += 4 + length;
  }
  std::filesystem::resize_file(path, last);
  const Result<std::string> cut = read("acme", b);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("truncated"), std::string::npos) << cut.status().ToString();
}

INSTANTIATE_TEST_SUITE_P(AtRest, FilesHttpTest, ::testing::Bool(),
                         [](const auto& test) { return test.param ? "Sealed" : "Plain"; });

}  // namespace
}  // namespace rampart::api
