// Runtime client bindings over the C ABI (perseus/client.h): perseus.Client and its exceptions.
// Every call releases the GIL; failures become Python exceptions carrying the C status name.
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <fmt/core.h>
#include <pybind11/stl.h>

#include "bindings.hpp"

#ifdef PERSEUS_PY_HAVE_CLIENT
#include "perseus/client.h"
#include "perseus/profile.hpp"                 // to_string(InstructionKind)
#include "perseus/runtime/client.hpp"         // kMaxBufferedReports, kMaxClientDurationS
#include "perseus/runtime/simulated_gpu.hpp"  // kMaxSimTimeScale
#endif

namespace perseus::python {

#ifdef PERSEUS_PY_HAVE_CLIENT
namespace {

struct ErrorTypes {
  py::object base, invalid_argument, server, plan_mismatch, gpu, state, unsupported;
};
ErrorTypes& errors() {
  static ErrorTypes* e = new ErrorTypes();  // leaked on purpose: lives as long as the interpreter
  return *e;
}

py::object new_exception(py::module_& m, const char* name, const char* doc, PyObject* base) {
  const std::string qual = std::string("perseus.") + name;
  py::object t = py::reinterpret_steal<py::object>(PyErr_NewExceptionWithDoc(qual.c_str(), doc, base, nullptr));
  if (!t) throw py::error_already_set();
  m.attr(name) = t;
  return t;
}

/// Raises the Python exception for `status` (GIL held).
[[noreturn]] void raise_status(perseus_status status, const std::string& message);

/// A rank (or device index) keyword: a Python int or a numpy integer (anything with
/// __index__, never a bool) in [0, 2^31 - 1]; else ClientConfigError naming the keyword, the
/// range and the value (a TypeError, naming the type, for a non-integer).
int rank_arg(const py::object& value, const char* name) {
  constexpr long long kMax = 2147483647;
  py::object index;
  if (!is_bool_like(value.ptr()) && PyIndex_Check(value.ptr()))
    index = py::reinterpret_steal<py::object>(PyNumber_Index(value.ptr()));
  if (!index) {
    PyErr_Clear();
    throw py::type_error(fmt::format("{} must be an int in [0, {}], got {} of type {}", name, kMax,
                                     py::repr(value).cast<std::string>().substr(0, 64),
                                     Py_TYPE(value.ptr())->tp_name));
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0 || v < 0 || v > kMax) {
    raise_status(PERSEUS_ERR_INVALID_ARGUMENT, fmt::format("{} must be an integer in [0, {}], got {}", name, kMax,
                                                           py::str(value).cast<std::string>().substr(0, 64)));
  }
  return static_cast<int>(v);
}

[[noreturn]] void raise_status(perseus_status status, const std::string& message) {
  auto& e = errors();
  py::object type = e.base;
  switch (status) {
    case PERSEUS_ERR_INVALID_ARGUMENT: type = e.invalid_argument; break;
    case PERSEUS_ERR_SERVER: type = e.server; break;
    case PERSEUS_ERR_PLAN_MISMATCH: type = e.plan_mismatch; break;
    case PERSEUS_ERR_GPU: type = e.gpu; break;
    case PERSEUS_ERR_STATE: type = e.state; break;
    case PERSEUS_ERR_UNSUPPORTED: type = e.unsupported; break;
    default: break;
  }
  py::object exc = type(message);
  exc.attr("status") = perseus_status_string(status);
  PyErr_SetObject(type.ptr(), exc.ptr());
  throw py::error_already_set();
}

/// One rank's client. Holds the C handle; a mutex keeps hooks and close() from overlapping.
class PyClient {
 public:
  struct Options {
    std::string server_url, job_id, backend = "nvml";
    std::optional<std::string> token, nvml_library_path, profile_path, dry_run_log_path, freq_log_path, watchdog_path;
    std::optional<std::string> device_uuid, device_pci_bus_id, gpud_socket_path, rocm_smi_library_path;
    int rank = 0, dp_rank = 0, pp_rank = 0, tp_rank = 0, device_index = 0;
    double sim_time_scale = 1.0, sim_blocking_power_w = 0.0, request_timeout_s = 5.0, startup_timeout_s = 10.0;
    double plan_poll_interval_s = 1.0;
    unsigned max_buffered_reports = 4096;
    bool enable_watchdog = true, handle_signals = true, coalesce_clock_requests = true;
    long long first_iteration = 0;
  };

  /// Refuses a string option holding a NUL (ValueError naming the keyword) before anything is
  /// sent or opened: the C config takes C strings, which would end at the NUL.
  static void check_strings(const Options& o) {
    c_string_arg(o.server_url, "server_url");
    c_string_arg(o.job_id, "job_id");
    c_string_arg(o.backend, "backend");
    const std::pair<const std::optional<std::string>*, const char*> optional[] = {
        {&o.token, "token"},
        {&o.nvml_library_path, "nvml_library_path"},
        {&o.profile_path, "profile_path"},
        {&o.dry_run_log_path, "dry_run_log_path"},
        {&o.freq_log_path, "freq_log_path"},
        {&o.watchdog_path, "watchdog_path"},
        {&o.device_uuid, "device_uuid"},
        {&o.device_pci_bus_id, "device_pci_bus_id"},
        {&o.gpud_socket_path, "gpud_socket_path"},
        {&o.rocm_smi_library_path, "rocm_smi_library_path"}};
    for (const auto& [value, name] : optional)
      if (*value) c_string_arg(**value, name);
  }

  explicit PyClient(const Options& o) : backend_(o.backend) {
    check_strings(o);
    perseus_client_config cfg;
    perseus_client_config_init(&cfg);
    cfg.server_url = o.server_url.c_str();
    cfg.job_id = o.job_id.c_str();
    cfg.token = o.token ? o.token->c_str() : nullptr;
    cfg.rank = o.rank;
    cfg.dp_rank = o.dp_rank;
    cfg.pp_rank = o.pp_rank;
    cfg.tp_rank = o.tp_rank;
    cfg.device_index = o.device_index;
    cfg.device_uuid = o.device_uuid ? o.device_uuid->c_str() : nullptr;
    cfg.device_pci_bus_id = o.device_pci_bus_id ? o.device_pci_bus_id->c_str() : nullptr;
    cfg.backend = o.backend.c_str();
    cfg.nvml_library_path = o.nvml_library_path ? o.nvml_library_path->c_str() : nullptr;
    cfg.gpud_socket_path = o.gpud_socket_path ? o.gpud_socket_path->c_str() : nullptr;
    cfg.rocm_smi_library_path = o.rocm_smi_library_path ? o.rocm_smi_library_path->c_str() : nullptr;
    cfg.profile_path = o.profile_path ? o.profile_path->c_str() : nullptr;
    cfg.sim_time_scale = o.sim_time_scale;
    cfg.sim_blocking_power_w = o.sim_blocking_power_w;
    cfg.dry_run_log_path = o.dry_run_log_path ? o.dry_run_log_path->c_str() : nullptr;
    cfg.freq_log_path = o.freq_log_path ? o.freq_log_path->c_str() : nullptr;
    cfg.request_timeout_s = o.request_timeout_s;
    cfg.startup_timeout_s = o.startup_timeout_s;
    cfg.plan_poll_interval_s = o.plan_poll_interval_s;
    cfg.max_buffered_reports = o.max_buffered_reports;
    cfg.enable_watchdog = o.enable_watchdog ? 1 : 0;
    cfg.watchdog_path = o.watchdog_path ? o.watchdog_path->c_str() : nullptr;
    cfg.handle_signals = o.handle_signals ? 1 : 0;
    cfg.first_iteration = o.first_iteration;
    cfg.coalesce_clock_requests = o.coalesce_clock_requests ? 1 : 0;
    // Ctrl-C while create() waits for the server (startup_timeout_s) ends it: re-raised below.
    bool interrupted = false;
    std::function<bool()> poll = python_signal_poll(interrupted);
    cfg.startup_cancelled = [](void* user) { return (*static_cast<std::function<bool()>*>(user))() ? 1 : 0; };
    cfg.startup_cancelled_user = &poll;
    perseus_status st;
    std::string msg;
    input_read_interrupted() = false;
    {
      GilRelease release;
      st = perseus_client_create(&cfg, &handle_);
      if (st != PERSEUS_OK) msg = perseus_last_error();
    }
    if (interrupted) throw py::error_already_set();  // the handler's exception (KeyboardInterrupt)
    if (std::exchange(input_read_interrupted(), false) && st != PERSEUS_OK) {
      PyErr_SetNone(PyExc_KeyboardInterrupt);  // Ctrl-C while the simulated backend read its profile
      throw py::error_already_set();
    }
    if (st != PERSEUS_OK) raise_status(st, msg);
  }
  ~PyClient() {
    if (handle_) {
      GilRelease release;
      perseus_client_destroy(handle_);
    }
  }

  /// Runs fn(handle) without the GIL; raises on a non-OK status.
  template <typename Fn>
  void call(Fn&& fn) {
    perseus_status st;
    std::string msg;
    {
      GilRelease release;
      std::lock_guard lock(mu_);
      if (!handle_) {
        st = PERSEUS_ERR_STATE;
        msg = "the client is closed";
      } else {
        st = fn(handle_);
        if (st != PERSEUS_OK) msg = perseus_last_error();
      }
    }
    if (st != PERSEUS_OK) raise_status(st, msg);
  }

  void close() {
    GilRelease release;
    std::lock_guard lock(mu_);
    if (handle_) perseus_client_destroy(handle_);
    handle_ = nullptr;
  }
  bool closed() const { return handle_ == nullptr; }
  const std::string& backend() const { return backend_; }

 private:
  std::mutex mu_;
  perseus_client* handle_ = nullptr;
  std::string backend_;
};

}  // namespace

void bind_client(py::module_& m) {
  m.attr("HAVE_CLIENT") = true;
  m.attr("CLIENT_ABI_VERSION") = perseus_client_abi_version();
  auto& e = errors();
  e.base = new_exception(m, "ClientError",
                         "A runtime client call failed. .status is the C status name (e.g. "
                         "'PERSEUS_ERR_SERVER'); the message says what happened. Raised as this base class "
                         "itself for PERSEUS_ERR_INTERNAL and any status without a subclass.",
                         PyExc_RuntimeError);
  e.invalid_argument = new_exception(m, "ClientConfigError", "Bad client option (PERSEUS_ERR_INVALID_ARGUMENT).",
                                     e.base.ptr());
  e.server = new_exception(m, "ServerRefusedError",
                           "The server refused for good: bad token, unknown job or rank (PERSEUS_ERR_SERVER).",
                           e.base.ptr());
  e.plan_mismatch = new_exception(m, "PlanMismatchError",
                                  "The training loop's instruction order differs from the plan "
                                  "(PERSEUS_ERR_PLAN_MISMATCH); the rest of the step runs without clock changes.",
                                  e.base.ptr());
  e.gpu = new_exception(m, "GpuError", "GPU backend failure: NVML missing, no permission (PERSEUS_ERR_GPU).",
                        e.base.ptr());
  e.state = new_exception(m, "HookOrderError",
                          "Hooks called out of order, or the client is closed (PERSEUS_ERR_STATE).", e.base.ptr());
  e.unsupported = new_exception(m, "UnsupportedError", "Not available with this backend (PERSEUS_ERR_UNSUPPORTED).",
                                e.base.ptr());

  py::class_<PyClient>(m, "Client", R"doc(
The in-training runtime client of one rank (GPU), over the C ABI of perseus/client.h.

Creating it registers the rank with `perseus serve` and fetches the rank's frequency plan
(waiting at most startup_timeout_s while the server is unreachable). Then, every iteration:

    c.on_step_begin()
    for each forward/backward computation:
        c.on_instruction_begin("forward")   # requests the planned SM clock (non-blocking)
        ... compute ...
        c.on_instruction_end("forward")     # records time (s) and energy (J)
    c.on_step_end()                         # queues the iteration report (asynchronous)

close() (or leaving a `with` block) flushes reports and resets the GPU clocks.
Errors raise subclasses of perseus.ClientError: ClientConfigError, ServerRefusedError,
PlanMismatchError, GpuError, HookOrderError, UnsupportedError.

Arguments (all but server_url and job_id are keyword-only; rank is required):
  server_url: "http://host:port" of `perseus serve`. job_id: from POST /v1/jobs.
  rank (global), dp_rank (pipeline id), pp_rank (stage), tp_rank: ints >= 0 (default 0).
  token: the bearer token, or None.
  device_index: the CUDA device ordinal (cuda:N), mapped to the NVML device through
    CUDA_VISIBLE_DEVICES (default 0); device_uuid ("GPU-...", e.g.
    torch.cuda.get_device_properties(i).uuid) or device_pci_bus_id ("0000:41:00.0") name the
    GPU exactly and win over device_index.
  backend: "nvml" (default), "rocm-smi" (AMD; device_index is ROCm SMI's index), "gpud"
    (clocks through the privileged `perseus gpud` helper: the trainer needs no privilege),
    "simulated" or "dry-run".
  nvml_library_path: nvml: library to dlopen; None = $PERSEUS_NVML_LIBRARY, else
    "libnvidia-ml.so.1". rocm_smi_library_path: rocm-smi: None = $PERSEUS_ROCM_SMI_LIBRARY,
    else "librocm_smi64.so". gpud_socket_path: gpud: None = $PERSEUS_GPUD_SOCKET, else
    /run/perseus/gpud.sock.
  profile_path: simulated: profile CSV (required; the GPU runs stage pp_rank);
    sim_time_scale: real s slept per simulated s, in [1e-6, 1e6] (default 1);
    sim_blocking_power_w: idle power, W, in [0, 1e5] (default 0).
  dry_run_log_path: dry-run: call log file (None = stderr).
  freq_log_path: clock log written at close (.json or .csv; None = none).
  request_timeout_s (default 5), startup_timeout_s (default 10; <= 0: no waiting),
    plan_poll_interval_s (default 1): s, at most 1e6; request_timeout_s must be > 0 and
    plan_poll_interval_s >= 1e-3.
  max_buffered_reports: unsent iteration reports kept, an int in [1, 2^20] (default 4096).
  enable_watchdog (bool, default True): spawn perseus-watchdog, which resets the clocks if the
    trainer dies (nvml, rocm-smi and dry-run backends); watchdog_path: its executable (None =
    $PERSEUS_WATCHDOG, else searched).
  handle_signals (bool, default True): reset the clocks on SIGTERM/SIGINT with the default
    disposition.
  first_iteration: number of the first step, an int (default 0; set it when resuming a job).
  coalesce_clock_requests (bool, default True): False applies every clock request in order
    (exact logs, for tests).
Paths (the *_path arguments) are str, bytes or os.PathLike. Bad values raise ClientConfigError; a
wrong type raises TypeError, a string holding a NUL character ValueError. Creation also raises ServerRefusedError when the server refuses for good
(e.g. 401 bad token, 404 unknown job, 409 rank registered with other coordinates), GpuError when
the backend does not load or another live client holds the GPU's lock, and KeyboardInterrupt on
Ctrl-C during the wait for the server.)doc")
      .def(py::init([](const std::string& server_url, const std::string& job_id, const py::object& rank,
                       const py::object& dp_rank, const py::object& pp_rank, const py::object& tp_rank,
                       std::optional<std::string> token, const py::object& device_index, const std::string& backend,
                       const std::optional<py::object>& profile_path, Real sim_time_scale, Real sim_blocking_power_w,
                       const std::optional<py::object>& nvml_library_path,
                       const std::optional<py::object>& dry_run_log_path, const std::optional<py::object>& freq_log_path,
                       Real request_timeout_s, Real startup_timeout_s, Real plan_poll_interval_s,
                       Strict<long long> max_buffered_reports, bool enable_watchdog,
                       const std::optional<py::object>& watchdog_path, bool handle_signals,
                       Strict<long long> first_iteration, bool coalesce_clock_requests,
                       std::optional<std::string> device_uuid, std::optional<std::string> device_pci_bus_id,
                       const std::optional<py::object>& gpud_socket_path,
                       const std::optional<py::object>& rocm_smi_library_path) {
             // Paths are str, bytes or os.PathLike, as everywhere in perseus (a pathlib.Path was a
             // TypeError listing the whole signature, session 32's trial).
             const auto path = [](const std::optional<py::object>& v, const char* name) -> std::optional<std::string> {
               if (!v || v->is_none()) return std::nullopt;
               return fs_path_bytes(*v, name);  // a NUL is refused by check_strings(), as for every C string
             };
             PyClient::Options o;
             o.server_url = server_url;
             o.job_id = job_id;
             o.rank = rank_arg(rank, "rank");
             o.dp_rank = rank_arg(dp_rank, "dp_rank");
             o.pp_rank = rank_arg(pp_rank, "pp_rank");
             o.tp_rank = rank_arg(tp_rank, "tp_rank");
             o.token = token;
             o.device_index = rank_arg(device_index, "device_index");
             o.backend = backend;
             o.profile_path = path(profile_path, "profile_path");
             // Python's defaults are explicit, so 0 is not "the default" (as in the C config)
             // but a mistake: refused by name, like a negative, NaN or too large value (with
             // Python's range: the C config's message would call 0 the default).
             using perseus::runtime::kMaxClientDurationS;
             using perseus::runtime::kMaxSimTimeScale;
             for (const auto& [name, v, hi] :
                  {std::tuple{"sim_time_scale", sim_time_scale.value, kMaxSimTimeScale},
                   std::tuple{"request_timeout_s", request_timeout_s.value, kMaxClientDurationS},
                   std::tuple{"plan_poll_interval_s", plan_poll_interval_s.value, kMaxClientDurationS}}) {
               if (!(v > 0) || !(v <= hi)) {
                 raise_status(PERSEUS_ERR_INVALID_ARGUMENT,
                              fmt::format("{} must be a number in (0, {:g}], got {}", name, hi, v));
               }
             }
             if (max_buffered_reports.value < 1 ||
                 max_buffered_reports.value > static_cast<long long>(perseus::runtime::kMaxBufferedReports)) {
               raise_status(PERSEUS_ERR_INVALID_ARGUMENT,
                            fmt::format("max_buffered_reports must be an integer in [1, {}], got {}",
                                        perseus::runtime::kMaxBufferedReports, max_buffered_reports.value));
             }
             o.sim_time_scale = sim_time_scale.value;
             o.sim_blocking_power_w = sim_blocking_power_w.value;
             o.nvml_library_path = path(nvml_library_path, "nvml_library_path");
             o.dry_run_log_path = path(dry_run_log_path, "dry_run_log_path");
             o.freq_log_path = path(freq_log_path, "freq_log_path");
             o.request_timeout_s = request_timeout_s.value;
             o.startup_timeout_s = startup_timeout_s.value;
             o.plan_poll_interval_s = plan_poll_interval_s.value;
             o.max_buffered_reports = static_cast<unsigned>(max_buffered_reports.value);
             o.enable_watchdog = enable_watchdog;
             o.watchdog_path = path(watchdog_path, "watchdog_path");
             o.handle_signals = handle_signals;
             o.first_iteration = first_iteration.value;
             o.coalesce_clock_requests = coalesce_clock_requests;
             o.device_uuid = device_uuid;
             o.device_pci_bus_id = device_pci_bus_id;
             o.gpud_socket_path = path(gpud_socket_path, "gpud_socket_path");
             o.rocm_smi_library_path = path(rocm_smi_library_path, "rocm_smi_library_path");
             return std::make_unique<PyClient>(o);
           }),
           py::arg("server_url"), py::arg("job_id"), py::kw_only(), py::arg("rank"), py::arg("dp_rank") = 0,
           py::arg("pp_rank") = 0, py::arg("tp_rank") = 0, py::arg("token") = py::none(), py::arg("device_index") = 0,
           py::arg("backend") = "nvml", py::arg("profile_path") = py::none(), py::arg("sim_time_scale") = Real{1.0},
           py::arg("sim_blocking_power_w") = Real{0.0}, py::arg("nvml_library_path") = py::none(),
           py::arg("dry_run_log_path") = py::none(), py::arg("freq_log_path") = py::none(),
           py::arg("request_timeout_s") = Real{5.0}, py::arg("startup_timeout_s") = Real{10.0},
           py::arg("plan_poll_interval_s") = Real{1.0}, py::arg("max_buffered_reports") = Strict<long long>{4096},
           py::arg("enable_watchdog").noconvert() = true, py::arg("watchdog_path") = py::none(), py::arg("handle_signals").noconvert() = true,
           py::arg("first_iteration") = Strict<long long>{0}, py::arg("coalesce_clock_requests").noconvert() = true,
           py::arg("device_uuid") = py::none(), py::arg("device_pci_bus_id") = py::none(),
           py::arg("gpud_socket_path") = py::none(), py::arg("rocm_smi_library_path") = py::none())
      .def("on_step_begin", [](PyClient& c) { c.call([](perseus_client* h) { return perseus_client_step_begin(h); }); },
           "Starts an iteration; switches in a newer plan if one was fetched. Raises HookOrderError, and "
           "ServerRefusedError at every step once the server refused this rank's registration for good (e.g. "
           "409: its slot is registered with other coordinates; the clocks are then never touched).")
      .def("on_step_end", [](PyClient& c) { c.call([](perseus_client* h) { return perseus_client_step_end(h); }); },
           "Ends the iteration and queues its report. Raises HookOrderError, PlanMismatchError (fewer "
           "computations than planned; the report is still queued).")
      .def(
          "on_instruction_begin",
          [](PyClient& c, const std::string& name) {
            c_string_arg(name, "name");
            c.call([&](perseus_client* h) { return perseus_client_instruction_begin(h, name.c_str()); });
          },
          py::arg("name"),
          "A computation ('forward', 'backward', 'backward_input', 'backward_weight') starts: checks it "
          "against the plan and requests its clock (non-blocking). Raises PlanMismatchError, HookOrderError.")
      .def(
          "on_instruction_end",
          [](PyClient& c, const std::string& name) {
            c_string_arg(name, "name");
            c.call([&](perseus_client* h) { return perseus_client_instruction_end(h, name.c_str()); });
          },
          py::arg("name"), "The computation ended: records its time (s) and energy (J). Raises HookOrderError.")
      .def(
          "simulate_compute",
          [](PyClient& c) {
            double t = 0;
            c.call([&](perseus_client* h) { return perseus_client_simulate_compute(h, &t); });
            return t;
          },
          "Simulated backend only: runs the current computation on the simulated GPU (sleeps its profile "
          "time x sim_time_scale). Returns the simulated duration, s. Raises UnsupportedError, HookOrderError, "
          "ClientConfigError (the running computation's name is not a computation kind), GpuError (the profile "
          "has no points for it).")
      .def(
          "flush",
          [](PyClient& c, double timeout_s) {
            c.call([&](perseus_client* h) { return perseus_client_flush(h, timeout_s); });
          },
          py::arg("timeout_s") = 5.0,
          "Waits up to timeout_s (s) in all until every queued clock request is applied and every queued "
          "report is accepted. Raises ClientConfigError when timeout_s is negative, NaN or > 1e6, GpuError when "
          "a clock request is still running (the GPU backend does not answer), ServerRefusedError when some "
          "reports are still pending.")
      .def(
          "stats",
          [](PyClient& c) {
            perseus_client_stats s{};
            s.struct_size = sizeof(s);
            c.call([&](perseus_client* h) { return perseus_client_get_stats(h, &s); });
            py::dict d;
            d["iterations"] = s.iterations;
            d["plan_version"] = s.plan_version;
            d["plan_updates"] = s.plan_updates;
            d["reports_sent"] = s.reports_sent;
            d["reports_pending"] = s.reports_pending;
            d["reports_dropped"] = s.reports_dropped;
            d["server_failures"] = s.server_failures;
            d["gpu_failures"] = s.gpu_failures;
            d["applied_mhz"] = s.applied_mhz;
            d["latest_plan_version"] = s.latest_plan_version;
            d["plans_refused"] = s.plans_refused;
            d["clocks_snapped"] = s.clocks_snapped;
            d["energy_unknown"] = s.energy_unknown;
            d["reports_rejected"] = s.reports_rejected;
            d["reports_foreign_duplicates"] = s.reports_foreign_duplicates;
            return d;
          },
          "Counters: {'iterations', 'plan_version' (-1: none yet), 'latest_plan_version' (newest fetched, "
          "switched in at the next step), 'plan_updates', 'reports_sent', 'reports_pending', 'reports_dropped', "
          "'reports_rejected', 'server_failures', 'gpu_failures', 'applied_mhz' (MHz, 0 = unlocked), "
          "'plans_refused' (plans not used: bad clocks, bad shape, malformed; each warned on stderr), "
          "'clocks_snapped', 'energy_unknown', 'reports_foreign_duplicates' (first posts the server already had: "
          "another process running as this rank?)}.")
      .def(
          "plan",
          [](PyClient& c) -> py::object {
            perseus_plan_info info{};
            info.struct_size = sizeof(info);
            info.instruction_size = sizeof(perseus_plan_instruction);
            std::vector<perseus_plan_instruction> instrs;
            // Count, then copy; a plan switched in between grows the count: ask again.
            do {
              instrs.resize(static_cast<std::size_t>(info.num_instructions));
              c.call([&](perseus_client* h) {
                return perseus_client_get_plan(h, &info, instrs.empty() ? nullptr : instrs.data(), instrs.size());
              });
            } while (info.num_instructions > instrs.size());
            if (info.version < 0) return py::none();
            py::list list;
            for (std::size_t k = 0; k < static_cast<std::size_t>(info.num_instructions); ++k) {
              const perseus_plan_instruction& i = instrs[k];
              py::dict d;
              d["instruction"] = i.kind >= 0 && i.kind < kNumInstructionKinds
                                     ? std::string(to_string(static_cast<InstructionKind>(i.kind)))
                                     : std::string("unknown");
              d["stage"] = i.stage;
              d["microbatch"] = i.microbatch;
              d["freq_mhz"] = i.freq_mhz;
              d["planned_freq_mhz"] = i.planned_freq_mhz;
              list.append(std::move(d));
            }
            py::dict out;
            out["version"] = info.version;
            out["iteration_time_s"] = info.iteration_time_s;
            out["energy_j"] = info.energy_j;
            out["instructions"] = std::move(list);
            return out;
          },
          "The plan in use (switched in at the last on_step_begin, or the first plan before any step), as "
          "the client checked it: {'version', 'iteration_time_s' (s, 0 = unknown), 'energy_j' (the pipeline's "
          "predicted iteration energy, J, 0 = unknown), 'instructions': [{'instruction', 'stage', 'microbatch', "
          "'freq_mhz' (the clock applied, MHz), 'planned_freq_mhz' (the server's when snapped, else 0)}] in "
          "execution order}; None before the first plan. No network or driver call.")
      .def(
          "write_freq_log",
          [](PyClient& c, const py::object& path_obj) {
            const std::string path = c_string_arg(fs_path_bytes(path_obj, "path"), "path");  // str, bytes or os.PathLike
            c.call([&](perseus_client* h) { return perseus_client_write_freq_log(h, path.c_str()); });
          },
          py::arg("path"),
          "Waits for pending clock requests, then writes the clock log (CSV, or JSON when path ends in "
          "'.json'; rows request_time_s, done_time_s, iteration, index, requested_mhz, applied_mhz, outcome, "
          "error). Raises ClientConfigError when the file cannot be written.")
      .def("close", &PyClient::close, "Flushes reports, resets the GPU clocks, stops the threads. Idempotent.")
      .def_property_readonly("closed", &PyClient::closed, "True after close().")
      .def_property_readonly("backend", &PyClient::backend, "GPU backend name given at creation.")
      .def("__enter__",
           [](py::object self) {
             // `with c:` on a closed client would hand out an object every hook refuses.
             if (self.cast<PyClient&>().closed()) raise_status(PERSEUS_ERR_STATE, "the client is closed");
             return self;
           },
           "Returns the client itself. Raises HookOrderError when the client is closed.")
      .def("__exit__", [](PyClient& c, py::args) {
        c.close();
        return false;
      }, "Calls close(); returns False (exceptions propagate).");
  own_new_only(m.attr("Client"), true);  // Client.__new__(Client) would skip __init__
}

#else

void bind_client(py::module_& m) {
  m.attr("HAVE_CLIENT") = false;
}

#endif

}  // namespace perseus::python
