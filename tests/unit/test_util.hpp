// Helpers shared by unit tests.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

#include "perseus/error.hpp"
#include "perseus/profile.hpp"

namespace perseus::testing {

inline std::string test_data(const std::string& rel) { return std::string(PERSEUS_TEST_DATA) + "/" + rel; }
inline std::string example(const std::string& rel) { return std::string(PERSEUS_EXAMPLES_DIR) + "/" + rel; }

/// The whole file ("" when it cannot be read).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// How often `what` occurs in `text` (occurrences may overlap).
inline std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

/// A fresh temporary folder per test, removed at destruction.
class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("perseus-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }
  std::string write(const std::string& name, const std::string& text) const {
    const auto p = path_ / name;
    std::ofstream(p) << text;
    return p.string();
  }

 private:
  static int& counter() {
    static int c = 0;
    return c;
  }
  std::filesystem::path path_;
};

/// A profile with the given (freq, time, energy) points for forward and backward of every stage.
inline Profile uniform_profile(int stages, const std::vector<OperatingPoint>& fwd, const std::vector<OperatingPoint>& bwd) {
  Profile p;
  p.source = "test";
  for (int s = 0; s < stages; ++s) {
    for (const auto& o : fwd) p.add(s, InstructionKind::kForward, o);
    for (const auto& o : bwd) p.add(s, InstructionKind::kBackward, o);
  }
  return p;
}

/// Exit status and combined stdout+stderr of `perseus ARGS` (the binary under test).
struct Result {
  int status;
  std::string output;
};

inline Result run(const std::string& args) {
  const std::string cmd = std::string(PERSEUS_BINARY) + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p)) out += buf.data();
  const int rc = ::pclose(p);
  return {WEXITSTATUS(rc), out};
}

/// The message of the InputError `f` throws, or "(no error)" when it throws none.
inline std::string input_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace perseus::testing
