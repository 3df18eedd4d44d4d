// A vendor library opened with dlopen (shared_library.hpp).
#include "shared_library.hpp"

#include <dlfcn.h>

#include <cstdlib>

namespace perseus::runtime::detail {

std::string library_path(const std::string& requested, const char* env_var, const char* fallback) {
  if (!requested.empty()) return requested;
  const char* env = std::getenv(env_var);
  return env != nullptr && *env != '\0' ? env : fallback;
}

SharedLibrary::SharedLibrary(const std::vector<std::string>& paths) {
  for (const std::string& p : paths) {
    handle_ = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ != nullptr) {
      path_ = p;
      return;
    }
    if (path_.empty()) {  // the first path's failure is the one to report
      path_ = p;
      const char* err = dlerror();
      error_ = err != nullptr ? err : "unknown error";
      if (error_.rfind(p + ": ", 0) == 0) error_.erase(0, p.size() + 2);  // dlerror() names the file too
    }
  }
}

SharedLibrary::~SharedLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

void* SharedLibrary::symbol(const char* name) const { return handle_ != nullptr ? dlsym(handle_, name) : nullptr; }

}  // namespace perseus::runtime::detail
