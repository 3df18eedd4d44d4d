// Helpers shared by the client tests.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace perseus::testing {

/// A fresh empty directory under the build tree's temp area, removed by the destructor.
class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("perseus_client_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string path() const { return path_.string(); }

 private:
  static int& counter() {
    static int c = 0;
    return c;
  }
  std::filesystem::path path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The non-empty lines of `text`.
inline std::vector<std::string> nonempty_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (!l.empty()) out.push_back(l);
  }
  return out;
}

/// Writes to `path` the header and the rows of stages 0..stages-1 of the profile CSV at
/// `source` (e.g. a 4-stage profile from the bundled 8-stage GPT-3 one).
inline void write_first_stages(const std::string& source, int stages, const std::string& path) {
  std::ofstream out(path);
  for (const auto& l : nonempty_lines(read_file(source))) {
    if (l.rfind("stage", 0) == 0 || std::stoi(l.substr(0, l.find(','))) < stages) out << l << "\n";
  }
}

/// Polls `cond` every 10 ms for at most timeout_s; returns its last value.
inline bool wait_for(const std::function<bool()>& cond, double timeout_s = 10.0) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

}  // namespace perseus::testing

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <map>
#include <vector>

extern char** environ;

namespace perseus::testing {

/// Starts argv[0] with argv and the current environment plus/overridden by `env`.
/// stdout/stderr go to `output_path` when given. Returns the pid (throws on failure).
inline pid_t spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {},
                   const std::string& output_path = "") {
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    if (env.count(kv.substr(0, kv.find('='))) == 0) envs.push_back(kv);
  }
  for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
  std::vector<char*> cargv, cenv;
  for (const auto& s : argv) cargv.push_back(const_cast<char*>(s.c_str()));
  cargv.push_back(nullptr);
  for (const auto& s : envs) cenv.push_back(const_cast<char*>(s.c_str()));
  cenv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (!output_path.empty()) {
    posix_spawn_file_actions_addopen(&fa, 1, output_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
  }
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("cannot spawn " + argv[0]);
  return pid;
}

/// Waits at most timeout_s for pid; returns its wait status, or -1 on timeout (then kills it).
inline int wait_exit(pid_t pid, double timeout_s = 30.0) {
  int status = 0;
  const bool done = wait_for([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, timeout_s);
  if (!done) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return -1;
  }
  return status;
}

}  // namespace perseus::testing
