#include "testing/postgres_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

extern char** environ;

namespace rampart::testing {
namespace {

constexpr const char* kBinDir = "/usr/lib/postgresql/15/bin";
constexpr const char* kUser = "rampart";  // the superuser initdb makes

std::mutex shared_mutex;
std::unique_ptr<PostgresServer> shared_server;  // guarded by shared_mutex
Status shared_error;                            // guarded by shared_mutex

// Runs `argv` (as the postgres user when we are root), its output appended to `log`; the exit
// status, or -1 when it could not be started.
int RunProgram(std::vector<std::string> argv, const std::string& log) {
  if (geteuid() == 0) argv.insert(argv.begin(), {"runuser", "-u", "postgres", "--"});
  std::vector<char*> args;
  for (std::string& arg : argv) args.push_back(arg.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A port nobody listens on now (the kernel's pick for port 0); Start retries if another process
// takes it before the server binds it.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  close(fd);
  return port;
}

std::string Conninfo(int port, const std::string& database) {
  return "host=127.0.0.1 port=" + std::to_string(port) + " user=" + kUser + " dbname=" + database +
         " connect_timeout=10";
}

using Connection = std::unique_ptr<PGconn, decltype(&PQfinish)>;
using ResultPtr = std::unique_ptr<PGresult, decltype(&PQclear)>;

Result<Connection> Connect(const std::string& conninfo) {
  Connection connection(PQconnectdb(conninfo.c_str()), &PQfinish);
  if (PQstatus(connection.get()) != CONNECTION_OK) {
    return Unavailable("cannot connect to the test PostgreSQL: {}",
                       PQerrorMessage(connection.get()));
  }
  return connection;
}

}  // namespace

Result<PostgresServer*> PostgresServer::Shared() {
  std::lock_guard lock(shared_mutex);
  if (shared_server != nullptr) return shared_server.get();
  if (!shared_error.ok()) return shared_error;
  std::unique_ptr<PostgresServer> server(new PostgresServer());
  shared_error = server->Start();
  if (!shared_error.ok()) return shared_error;
  shared_server = std::move(server);
  return shared_server.get();
}

void PostgresServer::StopShared() {
  std::lock_guard lock(shared_mutex);
  shared_server.reset();
}

Status PostgresServer::Start() {
  const std::string initdb = std::string(kBinDir) + "/initdb";
  const std::string pg_ctl = std::string(kBinDir) + "/pg_ctl";
  if (access(initdb.c_str(), X_OK) != 0 || access(pg_ctl.c_str(), X_OK) != 0) {
    return FailedPrecondition(
        "PostgreSQL 15 is not installed ({} is missing): these tests need a real server; install "
        "Debian's postgresql package (tools/install_deps.sh does)",
        initdb);
  }
  char pattern[] = "/tmp/rampart-pg-XXXXXX";
  if (mkdtemp(pattern) == nullptr) return Internal("mkdtemp: {}", std::strerror(errno));
  dir_ = pattern;
  if (geteuid() == 0) {
    const passwd* postgres = getpwnam("postgres");
    if (postgres == nullptr) {
      return FailedPrecondition(
          "running as root, but there is no `postgres` user to run "
          "PostgreSQL as (Debian's postgresql package creates it)");
    }
    if (chown(dir_.c_str(), postgres->pw_uid, postgres->pw_gid) != 0) {
      return Internal("chown {}: {}", dir_, std::strerror(errno));
    }
  }
  const std::string data = dir_ + "/data";
  const std::string log = dir_ + "/server.log";
  // The server writes its log itself (as postgres); our programs' output goes to tools.log.
  const std::string tools_log = dir_ + "/tools.log";
  if (RunProgram({initdb, "-D", data, "-U", kUser, "-A", "trust", "-E", "UTF8", "--no-sync",
                  "--no-instructions"},
                 tools_log) != 0) {
    return Internal("initdb failed: {}", ReadFile(tools_log));
  }
  // A port taken between FreePort and the server's bind makes pg_ctl fail: try a few.
  for (int attempt = 0; attempt < 5 && !running_; ++attempt) {
    port_ = FreePort();
    const std::string options = "-c listen_addresses=127.0.0.1 -p " + std::to_string(port_) +
                                " -k " + dir_ + " -c fsync=off -c max_connections=200";
    // pg_ctl -w polls the server's pid file until it accepts connections or the deadline.
    running_ = RunProgram({pg_ctl, "-D", data, "-l", log, "-o", options, "-w", "-t", "60", "start"},
                          tools_log) == 0;
  }
  if (!running_) return Internal("pg_ctl start failed: {}\n{}", ReadFile(tools_log), ReadFile(log));
  // And libpq agrees, within a deadline.
  const std::string ping = Conninfo(port_, "postgres");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (PQping(ping.c_str()) != PQPING_OK) {
    if (std::chrono::steady_clock::now() > deadline) {
      return Unavailable("PostgreSQL did not accept connections within 30 s: {}", ReadFile(log));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling, not synchronisation
  }
  return Status::Ok();
}

PostgresServer::~PostgresServer() {
  if (running_) {
    (void)RunProgram(
        {std::string(kBinDir) + "/pg_ctl", "-D", dir_ + "/data", "-m", "immediate", "-w", "stop"},
        dir_ + "/tools.log");
  }
  if (!dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

Result<std::string> PostgresServer::CreateDatabase() {
  const std::string name = "test_" + std::to_string(databases_.fetch_add(1));
  RETURN_IF_ERROR(Execute(Conninfo(port_, "postgres"), "CREATE DATABASE " + name));
  return Conninfo(port_, name);
}

Status PostgresServer::Execute(const std::string& conninfo, const std::string& sql) {
  ASSIGN_OR_RETURN(Connection connection, Connect(conninfo));
  ResultPtr result(PQexec(connection.get(), sql.c_str()), &PQclear);
  const ExecStatusType status = PQresultStatus(result.get());
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    return Internal("'{}' failed: {}", sql, PQerrorMessage(connection.get()));
  }
  return Status::Ok();
}

Result<std::string> PostgresServer::QueryText(const std::string& conninfo, const std::string& sql) {
  ASSIGN_OR_RETURN(Connection connection, Connect(conninfo));
  ResultPtr result(PQexec(connection.get(), sql.c_str()), &PQclear);
  if (PQresultStatus(result.get()) != PGRES_TUPLES_OK || PQntuples(result.get()) < 1) {
    return Internal("'{}' answered no row: {}", sql, PQerrorMessage(connection.get()));
  }
  return std::string(PQgetvalue(result.get(), 0, 0));
}

}  // namespace rampart::testing
