#include "store/postgres_connection.h"

#include <charconv>

namespace rampart::store::internal {
namespace {

// SQLSTATE classes that mean "try again later": connection exceptions (08), insufficient
// resources (53), operator intervention such as a shutdown (57), serialization failures and
// deadlocks (40).
bool IsTransient(std::string_view sqlstate) {
  return sqlstate.starts_with("08") || sqlstate.starts_with("53") || sqlstate.starts_with("57") ||
         sqlstate.starts_with("40");
}

std::string TrimMessage(const char* message) {
  std::string text = message != nullptr ? message : "";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

void IgnoreNotice(void*, const char*) {}  // "relation already exists, skipping" and the like

}  // namespace

std::string PgResult::Text(int row, int column) const {
  const char* value = PQgetvalue(result_.get(), row, column);
  return std::string(value, static_cast<size_t>(PQgetlength(result_.get(), row, column)));
}

int64_t PgResult::Int(int row, int column) const {
  const char* value = PQgetvalue(result_.get(), row, column);
  const char* end = value + PQgetlength(result_.get(), row, column);
  int64_t number = 0;
  std::from_chars(value, end, number);
  return number;
}

int64_t PgResult::affected() const {
  const char* text = PQcmdTuples(result_.get());
  int64_t number = 0;
  std::from_chars(text, text + std::char_traits<char>::length(text), number);
  return number;
}

Result<std::unique_ptr<PgConnection>> PgConnection::Connect(const std::string& conninfo) {
  // Keywords before "dbname" are defaults that the caller's string overrides.
  const char* keywords[] = {"connect_timeout", "application_name", "dbname", nullptr};
  const char* values[] = {"10", "rampart", conninfo.c_str(), nullptr};
  PGconn* raw = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  if (raw == nullptr) return Unavailable("cannot connect to PostgreSQL: out of memory");
  std::unique_ptr<PgConnection> connection(new PgConnection(raw));
  if (PQstatus(raw) != CONNECTION_OK) {
    return Unavailable("cannot connect to PostgreSQL: {}", TrimMessage(PQerrorMessage(raw)));
  }
  PQsetNoticeProcessor(raw, IgnoreNotice, nullptr);
  auto configured = connection->Execute("SET search_path TO rampart");
  if (!configured.ok()) return configured.status();
  return connection;
}

PgConnection::~PgConnection() { PQfinish(connection_); }

Result<PgResult> PgConnection::Check(PGresult* result, std::string* sqlstate) {
  const ExecStatusType status = PQresultStatus(result);
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return PgResult(result);
  const char* state = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  const std::string code = state != nullptr ? state : "";
  const std::string message = result != nullptr ? TrimMessage(PQresultErrorMessage(result))
                                                : TrimMessage(PQerrorMessage(connection_));
  PQclear(result);
  if (sqlstate != nullptr) *sqlstate = code;
  if (broken() || code.empty() || IsTransient(code)) {
    return Unavailable("PostgreSQL: {}", message);
  }
  return Internal("PostgreSQL ({}): {}", code, message);
}

Result<PgResult> PgConnection::Run(const PgQuery& query, const std::vector<std::string>& parameters,
                                   std::string* sqlstate) {
  if (!prepared_.contains(query.name)) {
    auto prepared = Check(PQprepare(connection_, query.name, query.sql, 0, nullptr), sqlstate);
    if (!prepared.ok()) return prepared.status();
    prepared_.insert(query.name);
  }
  std::vector<const char*> values;
  values.reserve(parameters.size());
  for (const std::string& parameter : parameters) values.push_back(parameter.c_str());
  return Check(PQexecPrepared(connection_, query.name, static_cast<int>(values.size()),
                              values.data(), nullptr, nullptr, /*resultFormat=*/0),
               sqlstate);
}

Result<PgResult> PgConnection::Execute(std::string_view sql, std::string* sqlstate) {
  const std::string text(sql);
  return Check(PQexec(connection_, text.c_str()), sqlstate);
}

Result<PgPool::Lease> PgPool::Acquire() {
  std::unique_lock lock(mutex_);
  released_.wait(lock, [&] { return !idle_.empty() || open_ < size_; });
  if (!idle_.empty()) {
    std::unique_ptr<PgConnection> connection = std::move(idle_.back());
    idle_.pop_back();
    return Lease(this, std::move(connection));
  }
  ++open_;
  lock.unlock();  // connecting takes a round trip or more: not under the lock
  auto connection = PgConnection::Connect(conninfo_);
  if (!connection.ok()) {
    lock.lock();
    --open_;
    released_.notify_one();
    return connection.status();
  }
  return Lease(this, std::move(*connection));
}

void PgPool::Release(std::unique_ptr<PgConnection> connection) {
  std::lock_guard lock(mutex_);
  if (connection->broken()) {
    --open_;  // a lost connection is dropped; the next Acquire makes a new one
  } else {
    idle_.push_back(std::move(connection));
  }
  released_.notify_one();
}

void PgPool::DropIdle() {
  std::vector<std::unique_ptr<PgConnection>> dropped;
  {
    std::lock_guard lock(mutex_);
    open_ -= idle_.size();
    dropped.swap(idle_);
    released_.notify_all();
  }
  // PQfinish may block on the network: outside the lock.
}

std::optional<std::string> DescribeConninfo(const std::string& conninfo) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  if (options == nullptr) {
    PQfreemem(error);  // may quote the string, password included: never shown
    return std::nullopt;
  }
  std::string user, host, port, dbname;
  for (PQconninfoOption* option = options; option->keyword != nullptr; ++option) {
    if (option->val == nullptr) continue;
    const std::string_view keyword = option->keyword;
    if (keyword == "user") user = option->val;
    if (keyword == "host" || (keyword == "hostaddr" && host.empty())) host = option->val;
    if (keyword == "port") port = option->val;
    if (keyword == "dbname") dbname = option->val;
  }
  PQconninfoFree(options);
  std::string text = "postgresql://";
  if (!user.empty()) text += user + "@";
  text += host;
  if (!port.empty()) text += ":" + port;
  if (!dbname.empty()) text += "/" + dbname;
  return text;
}

}  // namespace rampart::store::internal
