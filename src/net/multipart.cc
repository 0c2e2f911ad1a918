#include "net/multipart.h"

#include <algorithm>
#include <cctype>

namespace rampart::net {
namespace {

std::string Lower(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// Splits `a=1; b="x;y"` style parameters after the first ';' of a header value; calls `take`
// with each lower-cased name and its unquoted value. False when a quoted value never ends.
bool ForEachParameter(std::string_view value,
                      const std::function<void(const std::string&, std::string)>& take) {
  size_t at = value.find(';');
  while (at != std::string_view::npos && at < value.size()) {
    ++at;  // past ';'
    const size_t equals = value.find('=', at);
    if (equals == std::string_view::npos) return true;
    const std::string name = Lower(Trim(value.substr(at, equals - at)));
    size_t position = equals + 1;
    while (position < value.size() && (value[position] == ' ' || value[position] == '\t')) {
      ++position;
    }
    std::string parameter;
    if (position < value.size() && value[position] == '"') {
      ++position;
      bool closed = false;
      while (position < value.size()) {
        const char c = value[position++];
        if (c == '\\' && position < value.size()) {
          parameter += value[position++];
        } else if (c == '"') {
          closed = true;
          break;
        } else {
          parameter += c;
        }
      }
      if (!closed) return false;
      at = value.find(';', position);
    } else {
      const size_t end = value.find(';', position);
      parameter = std::string(Trim(value.substr(position, end - position)));
      at = end;
    }
    take(name, std::move(parameter));
  }
  return true;
}

}  // namespace

Result<std::string> MultipartParser::BoundaryOf(std::string_view content_type) {
  const std::string_view type = Trim(content_type.substr(0, content_type.find(';')));
  if (Lower(type) != "multipart/form-data") {
    return InvalidArgument("expected a multipart/form-data body, not '{}'", type);
  }
  std::string boundary;
  if (!ForEachParameter(content_type, [&](const std::string& name, std::string value) {
        if (name == "boundary") boundary = std::move(value);
      })) {
    return InvalidArgument("malformed Content-Type parameters");
  }
  if (boundary.empty() || boundary.size() > 70) {
    return InvalidArgument("multipart/form-data without a boundary of 1 to 70 characters");
  }
  return boundary;
}

MultipartParser::MultipartParser(std::string_view boundary, MultipartSink& sink)
    : sink_(sink), delimiter_("\r\n--" + std::string(boundary)) {
  // The first delimiter may open the body, without the line break before it.
  buffer_ = "\r\n";
}

Status MultipartParser::Fail(Status error) {
  state_ = State::kFailed;
  error_ = error;
  buffer_.clear();
  return error;
}

Status MultipartParser::Feed(std::string_view bytes) {
  if (state_ == State::kFailed) return error_;
  if (state_ == State::kEpilogue) return Status::Ok();  // what follows the end is ignored
  buffer_.append(bytes);
  return Run();
}

Status MultipartParser::Finish() {
  if (state_ == State::kFailed) return error_;
  if (state_ != State::kEpilogue) {
    return Fail(InvalidArgument("the multipart body ended before its closing boundary"));
  }
  return Status::Ok();
}

Status MultipartParser::Run() {
  size_t at = 0;  // parsed bytes of buffer_, dropped at the end
  while (true) {
    const std::string_view rest = std::string_view(buffer_).substr(at);
    if (state_ == State::kPreamble || state_ == State::kContent) {
      const size_t found = rest.find(delimiter_);
      const size_t data_end =
          found != std::string_view::npos
              ? found
              : (rest.size() >= delimiter_.size() ? rest.size() - (delimiter_.size() - 1) : 0);
      if (state_ == State::kContent && data_end > 0) {
        if (Status status = sink_.OnData(rest.substr(0, data_end)); !status.ok()) {
          return Fail(status);
        }
      }
      at += data_end;
      if (found == std::string_view::npos) break;  // the rest may begin a delimiter
      if (state_ == State::kContent) {
        if (Status status = sink_.OnPartEnd(); !status.ok()) return Fail(status);
      }
      at += delimiter_.size();
      state_ = State::kAfterDelimiter;
    } else if (state_ == State::kAfterDelimiter) {
      // "--" ends the body; else optional whitespace, then CRLF, then a part's head.
      if (rest.size() < 2) break;
      if (rest.substr(0, 2) == "--") {
        state_ = State::kEpilogue;
        buffer_.clear();
        return Status::Ok();
      }
      size_t position = 0;
      while (position < rest.size() && (rest[position] == ' ' || rest[position] == '\t')) {
        ++position;
      }
      if (position > 64) return Fail(InvalidArgument("malformed multipart boundary line"));
      if (rest.size() - position < 2) break;
      if (rest.substr(position, 2) != "\r\n") {
        return Fail(InvalidArgument("malformed multipart boundary line"));
      }
      at += position + 2;
      state_ = State::kHead;
    } else if (state_ == State::kHead) {
      const size_t end = rest.find("\r\n\r\n");
      // A part with no header lines at all: its blank line follows at once.
      if (rest.substr(0, 2) == "\r\n") {
        if (Status status = ParseHead(""); !status.ok()) return Fail(status);
        at += 2;
      } else if (end == std::string_view::npos) {
        if (rest.size() > kMaxHeadBytes) {
          return Fail(InvalidArgument("a multipart part's head is over {} bytes", kMaxHeadBytes));
        }
        break;
      } else {
        if (end > kMaxHeadBytes) {
          return Fail(InvalidArgument("a multipart part's head is over {} bytes", kMaxHeadBytes));
        }
        if (Status status = ParseHead(rest.substr(0, end)); !status.ok()) return Fail(status);
        at += end + 4;
      }
      // The content starts here: its first delimiter has no CRLF of its own before it, so the
      // search keeps the line break that ends the content.
      state_ = State::kContent;
    } else {
      break;
    }
  }
  buffer_.erase(0, at);
  return Status::Ok();
}

Status MultipartParser::ParseHead(std::string_view head) {
  if (++parts_ > kMaxParts) return InvalidArgument("more than {} multipart parts", kMaxParts);
  MultipartPartHead part;
  bool form_data = false;
  while (!head.empty()) {
    const size_t end = head.find("\r\n");
    const std::string_view line = head.substr(0, end);
    head = end == std::string_view::npos ? std::string_view() : head.substr(end + 2);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      return InvalidArgument("malformed multipart header line");
    }
    const std::string name = Lower(Trim(line.substr(0, colon)));
    const std::string_view value = Trim(line.substr(colon + 1));
    if (name == "content-disposition") {
      if (Lower(Trim(value.substr(0, value.find(';')))) != "form-data") {
        return InvalidArgument("a multipart part is not form-data");
      }
      form_data = true;
      if (!ForEachParameter(value, [&](const std::string& key, std::string text) {
            if (key == "name") part.name = std::move(text);
            if (key == "filename") {
              part.filename = std::move(text);
              part.has_filename = true;
            }
          })) {
        return InvalidArgument("malformed Content-Disposition");
      }
    } else if (name == "content-type") {
      part.content_type = std::string(value);
    }
  }
  if (!form_data || part.name.empty()) {
    return InvalidArgument("a multipart part without Content-Disposition: form-data; name=...");
  }
  return sink_.OnPart(part);
}

}  // namespace rampart::net
