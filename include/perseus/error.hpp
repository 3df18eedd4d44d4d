// Error types shared by the Perseus library.
#pragma once

#include <stdexcept>
#include <string>

namespace perseus {

/// Raised for bad user input: a malformed profile or schedule file, an impossible
/// configuration (e.g. 0 stages), an unknown schedule name. The message is meant for
/// the user as is: it names the file, line and field where there is one, and what was
/// expected. CLI commands print it and exit with status 1 (2 for bad arguments).
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace perseus
