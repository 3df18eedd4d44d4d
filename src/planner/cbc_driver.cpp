// CBC's standard solver, serialized and stoppable (see cbc_driver.hpp).
#include "cbc_driver.hpp"

#include <mutex>

#include <CbcEventHandler.hpp>
#include <CbcModel.hpp>
#include <CbcSolver.hpp>
#include <OsiClpSolverInterface.hpp>

namespace perseus::detail {

namespace {

/// Ends CBC's search at the next node once `stop` returns true.
class StopHandler final : public CbcEventHandler {
 public:
  explicit StopHandler(const std::function<bool()>* stop) : stop_(stop) {}
  CbcAction event(CbcEvent which) override {
    // Only between nodes (CbcEventHandler's documented stopping point), not inside a node's
    // cuts or heuristics.
    if (which == node && stop_ && *stop_ && (*stop_)()) return CbcEventHandler::stop;
    return noAction;
  }
  CbcEventHandler* clone() const override { return new StopHandler(*this); }

 private:
  const std::function<bool()>* stop_;
};

int no_callback(CbcModel*, int) { return 0; }

/// CbcMain0/CbcMain1 parse their arguments through globals (CbcOrClpRead_mode and friends):
/// one solve at a time in the process.
std::mutex& cbc_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

std::vector<double> solve_with_cbc(const OsiClpSolverInterface& solver, const std::vector<std::string>& options,
                                   const std::function<bool()>& stop) {
  std::vector<const char*> argv{"perseus", "-log", "0"};
  for (const auto& o : options) argv.push_back(o.c_str());
  argv.push_back("-solve");
  argv.push_back("-quit");
  const int cols = solver.getNumCols();
  const std::lock_guard<std::mutex> lock(cbc_mutex());
  CbcModel model(solver);
  StopHandler handler(&stop);
  model.passInEventHandler(&handler);
  model.messageHandler()->setLogLevel(0);
  CbcSolverUsefulData data;
  data.noPrinting_ = true;
  data.useSignalHandler_ = false;
  CbcMain0(model, data);
  CbcMain1(static_cast<int>(argv.size()), argv.data(), model, no_callback, data);
  // CBC may leave the solution of a problem its preprocessing solved without counting it
  // (getSolutionCount() 0): any x it returns is the caller's to judge.
  const double* best = model.bestSolution();
  if (best == nullptr || model.getNumCols() != cols) return {};
  return {best, best + cols};
}

}  // namespace perseus::detail
