#include "store/sql_runner.h"

#include <charconv>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "store/postgres_connection.h"
#include "store/sqlite_connection.h"

namespace rampart::store::internal {
namespace {

// The PostgreSQL spelling of a statement and its prepared name, made once per SQL text and kept
// for the process (PgQuery holds pointers).
struct PgStatement {
  std::string name;
  std::string sql;
  PgQuery query;
};

const PgQuery& PgQueryFor(std::string_view sql) {
  static std::mutex mutex;
  static auto* const statements = new std::unordered_map<std::string, std::unique_ptr<PgStatement>>;
  std::lock_guard lock(mutex);
  auto& slot = (*statements)[std::string(sql)];
  if (slot == nullptr) {
    slot = std::make_unique<PgStatement>();
    slot->name = fmt::format("rampart_sql_{:016x}", std::hash<std::string_view>()(sql));
    for (const char c : sql) slot->sql.push_back(c == '?' ? '$' : c);
    slot->query = PgQuery{slot->name.c_str(), slot->sql.c_str()};
  }
  return slot->query;
}

}  // namespace

int64_t ToInt(std::string_view text) {
  int64_t number = 0;
  std::from_chars(text.data(), text.data() + text.size(), number);
  return number;
}

Result<SqlRows> SqliteRunner::Run(std::string_view sql, const std::vector<Value>& parameters) {
  ASSIGN_OR_RETURN(auto statement, connection_.Prepare(sql));
  for (size_t i = 0; i < parameters.size(); ++i) {
    const int index = static_cast<int>(i + 1);
    if (const auto* number = std::get_if<int64_t>(&parameters[i])) {
      statement->Bind(index, *number);
    } else {
      statement->Bind(index, std::string_view(std::get<std::string>(parameters[i])));
    }
  }
  SqlRows result;
  while (true) {
    ASSIGN_OR_RETURN(const bool row, statement->Step());
    if (!row) break;
    std::vector<std::string>& columns = result.rows.emplace_back();
    for (int c = 0; c < statement->columns(); ++c) columns.push_back(statement->Text(c));
  }
  result.affected = connection_.Changes();
  return result;
}

Result<SqlRows> PgRunner::Run(std::string_view sql, const std::vector<Value>& parameters) {
  std::vector<std::string> texts;
  texts.reserve(parameters.size());
  for (const Value& parameter : parameters) {
    if (const auto* number = std::get_if<int64_t>(&parameter)) {
      texts.push_back(std::to_string(*number));
    } else {
      texts.push_back(std::get<std::string>(parameter));
    }
  }
  ASSIGN_OR_RETURN(const PgResult answer, connection_.Run(PgQueryFor(sql), texts));
  SqlRows result;
  for (int r = 0; r < answer.rows(); ++r) {
    std::vector<std::string>& columns = result.rows.emplace_back();
    for (int c = 0; c < answer.columns(); ++c) columns.push_back(answer.Text(r, c));
  }
  result.affected = answer.affected();
  return result;
}

}  // namespace rampart::store::internal
