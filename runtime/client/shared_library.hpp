// Internal: a vendor library (NVML, ROCm SMI) opened with dlopen at run time, never linked.
#pragma once

#include <string>
#include <vector>

namespace perseus::runtime::detail {

/// The library to open: `requested` when given, else the environment variable `env_var` when
/// set and not empty, else `fallback` (a soname the dynamic loader finds).
std::string library_path(const std::string& requested, const char* env_var, const char* fallback);

/// A shared library opened with dlopen(RTLD_NOW | RTLD_LOCAL) and closed when destroyed (dlopen
/// is reference-counted: one per backend object is fine). Not copyable.
class SharedLibrary {
 public:
  /// Opens the first of `paths` that loads. When none does, path() is the first one and
  /// error() dlerror()'s text for it without its leading "PATH: "; loaded() is false.
  explicit SharedLibrary(const std::vector<std::string>& paths);
  ~SharedLibrary();
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;

  bool loaded() const { return handle_ != nullptr; }
  const std::string& path() const { return path_; }
  const std::string& error() const { return error_; }

  /// Points `fn` at the symbol `name`; false (and fn null) when the library lacks it.
  template <typename Fn>
  bool find(Fn& fn, const char* name) const {
    fn = reinterpret_cast<Fn>(symbol(name));
    return fn != nullptr;
  }

 private:
  void* symbol(const char* name) const;
  void* handle_ = nullptr;
  std::string path_, error_;
};

}  // namespace perseus::runtime::detail
