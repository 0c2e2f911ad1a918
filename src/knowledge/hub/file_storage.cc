#include "knowledge/hub/file_storage.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

namespace rampart::knowledge::hub {
namespace {

Status Errno(std::string_view what, const std::string& path) {
  return Internal("{} {}: {}", what, path, std::strerror(errno));
}

Status WriteAll(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return Errno("cannot write", path);
    }
    bytes.remove_prefix(static_cast<size_t>(written));
  }
  return Status::Ok();
}

// Reads exactly `size` bytes; false at a clean end of file before the first byte.
Result<bool> ReadExactly(int fd, size_t size, std::string& out, const std::string& path) {
  out.resize(size);
  size_t have = 0;
  while (have < size) {
    const ssize_t got = ::read(fd, out.data() + have, size - have);
    if (got < 0) {
      if (errno == EINTR) continue;
      return Errno("cannot read", path);
    }
    if (got == 0) {
      if (have == 0) return false;
      return InvalidArgument("file {} is truncated", path);
    }
    have += static_cast<size_t>(got);
  }
  return true;
}

std::string RecordClass(const std::string& id, uint64_t index, bool last) {
  return fmt::format("file:{}:{}{}", id, index, last ? ":last" : "");
}

class DiskWriter final : public FileWriter {
 public:
  DiskWriter(int fd, std::string dir, std::string id, std::string tenant,
             const crypto::Envelope* envelope, std::string key_name)
      : fd_(fd),
        dir_(std::move(dir)),
        id_(std::move(id)),
        tenant_(std::move(tenant)),
        part_path_(dir_ + "/" + id_ + ".part"),
        envelope_(envelope),
        key_name_(std::move(key_name)) {}
  ~DiskWriter() override {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(part_path_.c_str());
  }

  Status Write(std::string_view bytes) override {
    bytes_ += bytes.size();
    if (envelope_ == nullptr) return WriteAll(fd_, bytes, part_path_);
    while (!bytes.empty()) {
      const size_t take = std::min(bytes.size(), FileStorage::kRecordBytes - record_.size());
      record_.append(bytes.substr(0, take));
      bytes.remove_prefix(take);
      // A full record is sealed once more content follows (only then is it known not last).
      if (record_.size() == FileStorage::kRecordBytes && !bytes.empty()) {
        RETURN_IF_ERROR(SealRecord(/*last=*/false));
      }
    }
    return Status::Ok();
  }

  Status Commit() override {
    if (envelope_ != nullptr) RETURN_IF_ERROR(SealRecord(/*last=*/true));
    if (::fsync(fd_) != 0) return Errno("cannot fsync", part_path_);
    ::close(fd_);
    fd_ = -1;
    const std::string path = dir_ + "/" + id_;
    if (::rename(part_path_.c_str(), path.c_str()) != 0) return Errno("cannot rename", part_path_);
    committed_ = true;
    const int directory = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (directory < 0) return Errno("cannot open", dir_);
    const int synced = ::fsync(directory);
    ::close(directory);
    if (synced != 0) return Errno("cannot fsync", dir_);
    return Status::Ok();
  }

  uint64_t bytes() const override { return bytes_; }

 private:
  // Seals the record held, even an empty one when it is the last (an empty file has one).
  Status SealRecord(bool last) {
    // Held until the next write tells whether it is the last: a full record waits.
    const std::string data_class = RecordClass(id_, index_, last);
    ASSIGN_OR_RETURN(const std::string sealed,
                     envelope_->Seal(key_name_, record_,
                                     {.tenant = tenant_, .region = "", .data_class = data_class}));
    const uint32_t length = static_cast<uint32_t>(sealed.size());
    const char prefix[4] = {static_cast<char>(length >> 24), static_cast<char>(length >> 16),
                            static_cast<char>(length >> 8), static_cast<char>(length)};
    RETURN_IF_ERROR(WriteAll(fd_, std::string_view(prefix, 4), part_path_));
    RETURN_IF_ERROR(WriteAll(fd_, sealed, part_path_));
    record_.clear();
    ++index_;
    return Status::Ok();
  }

  int fd_;
  const std::string dir_;
  const std::string id_;
  const std::string tenant_;
  const std::string part_path_;
  const crypto::Envelope* envelope_;
  const std::string key_name_;
  std::string record_;  // content not sealed yet
  uint64_t index_ = 0;
  uint64_t bytes_ = 0;
  bool committed_ = false;
};

class DiskReader final : public FileReader {
 public:
  DiskReader(int fd, std::string path, std::string id, std::string tenant,
             const crypto::Envelope* envelope)
      : fd_(fd),
        path_(std::move(path)),
        id_(std::move(id)),
        tenant_(std::move(tenant)),
        envelope_(envelope) {}
  ~DiskReader() override { ::close(fd_); }

  Result<std::string> Next() override {
    if (ended_) return std::string();
    if (envelope_ == nullptr) {
      std::string piece;
      piece.resize(256 * 1024);
      while (true) {
        const ssize_t got = ::read(fd_, piece.data(), piece.size());
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return Errno("cannot read", path_);
        piece.resize(static_cast<size_t>(got));
        if (got == 0) ended_ = true;
        return piece;
      }
    }
    while (true) {
      std::string prefix;
      ASSIGN_OR_RETURN(const bool more, ReadExactly(fd_, 4, prefix, path_));
      if (!more) {
        if (!saw_last_) return InvalidArgument("sealed file {} is truncated", id_);
        ended_ = true;
        return std::string();
      }
      if (saw_last_) return InvalidArgument("sealed file {} has records after its last", id_);
      const uint32_t length = (uint32_t{static_cast<unsigned char>(prefix[0])} << 24) |
                              (uint32_t{static_cast<unsigned char>(prefix[1])} << 16) |
                              (uint32_t{static_cast<unsigned char>(prefix[2])} << 8) |
                              uint32_t{static_cast<unsigned char>(prefix[3])};
      if (length > 2 * FileStorage::kRecordBytes) {
        return InvalidArgument("sealed file {} has a malformed record", id_);
      }
      std::string sealed;
      ASSIGN_OR_RETURN(const bool whole, ReadExactly(fd_, length, sealed, path_));
      if (!whole) return InvalidArgument("sealed file {} is truncated", id_);
      // Not the last (the usual case), else the last: the associated data says which.
      Result<std::string> opened = envelope_->Open(
          sealed, {.tenant = tenant_, .region = "", .data_class = RecordClass(id_, index_, false)});
      if (!opened.ok()) {
        opened = envelope_->Open(
            sealed,
            {.tenant = tenant_, .region = "", .data_class = RecordClass(id_, index_, true)});
        if (!opened.ok()) return opened.status();
        saw_last_ = true;
      }
      ++index_;
      if (!opened->empty()) return std::move(opened).value();
    }
  }

 private:
  int fd_;
  const std::string path_;
  const std::string id_;
  const std::string tenant_;
  const crypto::Envelope* envelope_;
  uint64_t index_ = 0;
  bool saw_last_ = false;
  bool ended_ = false;
};

}  // namespace

FileStorage::FileStorage(std::string dir, const crypto::Envelope* envelope, std::string key_name)
    : dir_(std::move(dir)), envelope_(envelope), key_name_(std::move(key_name)) {}

Status FileStorage::Prepare() {
  std::error_code error;
  std::filesystem::create_directories(dir_, error);
  if (error) return Internal("cannot create {}: {}", dir_, error.message());
  for (const auto& entry : std::filesystem::directory_iterator(dir_, error)) {
    if (entry.path().extension() == ".part") std::filesystem::remove(entry.path(), error);
  }
  if (error) return Internal("cannot clean {}: {}", dir_, error.message());
  return Status::Ok();
}

Result<std::unique_ptr<FileWriter>> FileStorage::Create(const std::string& tenant,
                                                        const std::string& id) {
  const std::string part = dir_ + "/" + id + ".part";
  const int fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("cannot create", part);
  return std::unique_ptr<FileWriter>(
      std::make_unique<DiskWriter>(fd, dir_, id, tenant, envelope_, key_name_));
}

Result<std::unique_ptr<FileReader>> FileStorage::Open(const std::string& tenant,
                                                      const std::string& id,
                                                      const std::string& sealing) {
  const std::string path = dir_ + "/" + id;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound("the bytes of file {} are missing", id);
    return Errno("cannot open", path);
  }
  if (!sealing.empty() && envelope_ == nullptr) {
    ::close(fd);
    return FailedPrecondition("file {} is sealed and no keyring is open", id);
  }
  return std::unique_ptr<FileReader>(
      std::make_unique<DiskReader>(fd, path, id, tenant, sealing.empty() ? nullptr : envelope_));
}

Status FileStorage::Remove(const std::string& id) {
  const std::string path = dir_ + "/" + id;
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Errno("cannot remove", path);
  return Status::Ok();
}

}  // namespace rampart::knowledge::hub
