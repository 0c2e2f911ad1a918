#pragma once

// File helpers for the durable layer: POSIX calls with errors that name the path, and the
// write-temp/fsync/rename/fsync-folder sequence that makes a file appear whole or not at all.

#include <string>
#include <string_view>

#include "core/status.h"

namespace rampart::knowledge {

// Unavailable "<what> '<path>': <strerror>" (the errno of the failed call).
Status ErrnoStatus(std::string_view what, const std::string& path);

// fsync of a folder, so that a rename or a new file in it survives a crash.
Status SyncDirectory(const std::string& directory);
// Writes `contents` to `path` + ".tmp", fsyncs it, renames it over `path`, fsyncs the folder.
Status WriteFileAtomically(const std::string& path, std::string_view contents);
// The whole file; NotFound when absent, Unavailable on other errors.
Result<std::string> ReadWholeFile(const std::string& path);

// Writes all of `bytes` to `fd` (retrying short writes and EINTR).
Status WriteAll(int fd, std::string_view bytes, const std::string& path);

}  // namespace rampart::knowledge
