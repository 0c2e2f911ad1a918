#pragma once

// FileStorage: the bytes of uploaded files (the OpenAI Files API, files_http.h), one file each
// under a directory (<data-dir>/files/<id>). A file is written to <id>.part, fsynced, renamed
// into place and the directory fsynced, so a file is either whole under its name or absent; a
// writer dropped before Commit (an upload that failed or whose client went away) removes its
// part file, and Prepare removes those a crash left.
//
// Sealed at rest when an envelope is given: the content is cut into records of kRecordBytes,
// each sealed as its own envelope (crypto/envelope.h) whose associated data binds the tenant and
// the record's place ("file:<id>:<index>", ":last" on the last one), so records cannot be moved
// between files or tenants, reordered or cut off unnoticed. On disk each record is its length
// (4 bytes, big-endian) and the envelope. Neither writing nor reading holds more than one record.
//
// Threads: the storage is thread-safe; a writer or reader is used by one thread at a time. Every
// call blocks on the disk: never on an I/O thread.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "crypto/envelope.h"

namespace rampart::knowledge::hub {

class FileWriter {
 public:
  virtual ~FileWriter() = default;  // uncommitted: the part file is removed
  virtual Status Write(std::string_view bytes) = 0;
  // Seals the last record, fsyncs, renames into place and fsyncs the directory.
  virtual Status Commit() = 0;
  virtual uint64_t bytes() const = 0;  // content bytes written so far
};

class FileReader {
 public:
  virtual ~FileReader() = default;
  // The next piece of the content; empty at its end. InvalidArgument when a sealed file fails
  // to open (tampered, truncated, another tenant's), Internal on a read error.
  virtual Result<std::string> Next() = 0;
};

class FileStorage {
 public:
  static constexpr size_t kRecordBytes = 1 << 20;

  // `envelope` null: files are kept plain. Else sealed under the keyring's `key_name`.
  FileStorage(std::string dir, const crypto::Envelope* envelope, std::string key_name);

  // Creates the directory and removes part files left by a crash.
  Status Prepare();
  // "envelope" when new files are sealed, else "" (store::StoredFile::sealing).
  std::string sealing() const { return envelope_ != nullptr ? "envelope" : ""; }

  Result<std::unique_ptr<FileWriter>> Create(const std::string& tenant, const std::string& id);
  // `sealing` as recorded with the file. NotFound when its bytes are absent.
  Result<std::unique_ptr<FileReader>> Open(const std::string& tenant, const std::string& id,
                                           const std::string& sealing);
  // Removes a file's bytes (absent already: OK).
  Status Remove(const std::string& id);

  const std::string& dir() const { return dir_; }

 private:
  const std::string dir_;
  const crypto::Envelope* envelope_;
  const std::string key_name_;
};

}  // namespace rampart::knowledge::hub
