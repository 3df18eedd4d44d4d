// Plans a profile through the installed library's public API (perseus/optimize.hpp).
// Usage: plan_gpt3 PROFILE STAGES MICROBATCHES P_BLOCK_W. Prints "plans N t_min_s T saving_pct S".
#include <cstdlib>
#include <iostream>

#include "perseus/error.hpp"
#include "perseus/optimize.hpp"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: plan_gpt3 PROFILE STAGES MICROBATCHES P_BLOCK_W\n";
    return 2;
  }
  perseus::OptimizeConfig config;
  config.profile_path = argv[1];
  config.problem.num_ranks = std::atoi(argv[2]);
  config.problem.microbatches = std::atoi(argv[3]);
  config.problem.p_block_w = std::atof(argv[4]);
  try {
    const perseus::OptimizeResult r = perseus::optimize(config);
    std::cout << "plans " << r.summary.num_plans << " t_min_s " << r.summary.t_min_s << " saving_pct "
              << r.summary.intrinsic_saving_pct << "\n";
  } catch (const perseus::InputError& e) {
    std::cerr << "input error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
