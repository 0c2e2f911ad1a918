#include "knowledge/index/durable_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rampart::knowledge {

Status ErrnoStatus(std::string_view what, const std::string& path) {
  const int error = errno;
  if (error == ENOENT) return NotFound("{} '{}': {}", what, path, std::strerror(error));
  return Unavailable("{} '{}': {}", what, path, std::strerror(error));
}

Status SyncDirectory(const std::string& directory) {
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open folder", directory);
  const int result = ::fsync(fd);
  Status status = result == 0 ? Status::Ok() : ErrnoStatus("cannot fsync folder", directory);
  ::close(fd);
  return status;
}

Status WriteAll(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("cannot write", path);
    }
    bytes.remove_prefix(static_cast<size_t>(written));
  }
  return Status::Ok();
}

Status WriteFileAtomically(const std::string& path, std::string_view contents) {
  const std::string temporary = path + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus("cannot create", temporary);
  Status status = WriteAll(fd, contents, temporary);
  if (status.ok() && ::fsync(fd) != 0) status = ErrnoStatus("cannot fsync", temporary);
  ::close(fd);
  if (status.ok() && ::rename(temporary.c_str(), path.c_str()) != 0) {
    status = ErrnoStatus("cannot rename into", path);
  }
  if (!status.ok()) {
    ::unlink(temporary.c_str());
    return status;
  }
  const size_t slash = path.rfind('/');
  return SyncDirectory(slash == std::string::npos ? "." : path.substr(0, slash));
}

Result<std::string> ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open", path);
  std::string contents;
  struct stat info {};
  if (::fstat(fd, &info) == 0 && info.st_size > 0) contents.reserve(info.st_size);
  char buffer[1 << 16];
  while (true) {
    const ssize_t count = ::read(fd, buffer, sizeof(buffer));
    if (count < 0) {
      if (errno == EINTR) continue;
      Status status = ErrnoStatus("cannot read", path);
      ::close(fd);
      return status;
    }
    if (count == 0) break;
    contents.append(buffer, static_cast<size_t>(count));
  }
  ::close(fd);
  return contents;
}

}  // namespace rampart::knowledge
