// One COIN-OR CBC branch and bound from inside the library (private): the driver shared by the
// polish stage's MILPs (window_search.cpp, window_search_hull.cpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

class OsiClpSolverInterface;

namespace perseus::detail {

/// Runs CBC's standard solver (CbcMain1, as the `cbc` program runs it) on `solver`'s problem
/// with command-line style `options` (e.g. {"-maxNodes", "100"}; "-log 0", "-solve" and "-quit"
/// are added). `stop` (may be empty) is polled between nodes: true ends the search with the best
/// solution so far. Returns CBC's best solution (one value per column), or an empty vector when it
/// found none. CBC's driver parses its arguments through globals, so solves are serialized
/// process-wide (a mutex): callers on several threads are safe but do not solve in parallel.
std::vector<double> solve_with_cbc(const OsiClpSolverInterface& solver, const std::vector<std::string>& options,
                                   const std::function<bool()>& stop);

}  // namespace perseus::detail
