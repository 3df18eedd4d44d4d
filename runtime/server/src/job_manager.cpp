// JobManager: job lifecycle (create, list, get, delete, load, expiry), planner pool, metrics.
#include "perseus/server/job_manager.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <set>

#include <fmt/core.h>

#include "job.hpp"
#include "perseus/error.hpp"
#include "perseus/plan.hpp"
#include "perseus/server/api_error.hpp"

namespace perseus::server {

using nlohmann::json;

namespace {

/// Copy of a model without the (possibly large) explicit plan table.
JobModel shallow(const JobModel& m) {
  JobModel out;
  out.schedule = m.schedule;
  out.dag = m.dag;
  out.profile = m.profile;
  out.points = m.points;
  out.partial_reason = m.partial_reason;
  out.partial_detail = m.partial_detail;
  out.warnings = m.warnings;
  return out;
}

json number_or_null(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

std::string points_json(const std::vector<PlanPoint>& pts) {
  json a = json::array();
  for (const auto& p : pts) a.push_back({number_or_null(p.time_s), number_or_null(p.energy_j)});
  return a.dump();
}

std::vector<PlanPoint> parse_points(const std::string& text) {
  std::vector<PlanPoint> out;
  for (const auto& p : json::parse(text)) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    out.push_back({p[0].is_null() ? nan : p[0].get<double>(), p[1].is_null() ? nan : p[1].get<double>()});
  }
  return out;
}

PlanPoint all_max_point(const JobModel& m, const JobSpec& spec, const std::vector<int>& freq) {
  const FrequencyPlan p = evaluate_plan(*m.dag, *m.profile, freq, spec.p_block_w);
  return {p.timeline.time_s, p.total_energy_j()};
}

}  // namespace

bool ByteQuota::try_reserve(std::int64_t bytes) {
  std::int64_t used = used_.load();
  do {
    if (used + bytes > limit_) return false;
  } while (!used_.compare_exchange_weak(used, used + bytes));
  return true;
}

JobManager::JobManager(Store& store, ManagerOptions options) : store_(store), opt_(std::move(options)) {
  for (int i = 0; i < std::max(1, opt_.planner_threads); ++i) workers_.emplace_back([this] { worker_loop(); });
}

JobManager::~JobManager() {
  begin_shutdown();
  for (auto& t : workers_) t.join();
}

void JobManager::begin_shutdown() {
  shutting_down_ = true;  // running solves stop at their next cancellation check
  {
    std::lock_guard lock(q_mu_);
    stopping_ = true;
    queue_.clear();
  }
  q_cv_.notify_all();
  idle_cv_.notify_all();
}

JobManager::PlannerState JobManager::planner_state() const {
  std::lock_guard lock(q_mu_);
  return {queue_.size(), running_, solves_started_};
}

void JobManager::enqueue(std::function<void()> task) {
  {
    std::lock_guard lock(q_mu_);
    queue_.push_back(std::move(task));
  }
  q_cv_.notify_one();
}

void JobManager::worker_loop() {
  while (true) {
    std::function<void()> task;
    {
      std::unique_lock lock(q_mu_);
      q_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    try {
      task();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "perseus serve: planner task failed: %s\n", e.what());
    }
    task = nullptr;  // what the solve held is freed here, before the trim
    release_freed_memory();
    {
      std::lock_guard lock(q_mu_);
      --running_;
    }
    idle_cv_.notify_all();
  }
}

bool JobManager::wait_idle(double timeout_s) {
  std::unique_lock lock(q_mu_);
  return idle_cv_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                           [&] { return queue_.empty() && running_ == 0; });
}

std::shared_ptr<Job> JobManager::find(const std::string& job_id) const {
  std::shared_lock lock(mu_);
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : it->second;
}

std::shared_ptr<Job> JobManager::find_or_404(const std::string& job_id) const {
  auto j = find(job_id);
  if (!j) throw ApiError(404, "unknown_job", fmt::format("no job \"{}\"", job_id.substr(0, 64)));
  j->touch(now_s());
  return j;
}

std::shared_ptr<Job> JobManager::find_zeus_or_404(const std::string& job_id) const {
  auto j = find(job_id);
  if (!j || j->auth.origin == kOriginV1)  // the same answer for both: no job ids leak to Zeus callers
    throw ApiError(404, "unknown_job",
                   fmt::format("no Zeus job \"{}\" (Zeus routes reach only jobs made by POST /register_job)",
                               job_id.substr(0, 64)));
  j->touch(now_s());
  return j;
}

std::optional<std::string> JobManager::job_of_token(std::string_view token) const {
  if (token.empty()) return std::nullopt;
  const std::string digest = token_sha256(token);
  std::shared_lock lock(mu_);
  auto it = token_jobs_.find(digest);  // a hash lookup on the digest: leaks nothing about the token
  if (it == token_jobs_.end()) return std::nullopt;
  return it->second;
}

void JobManager::check_anonymous_quota(std::int64_t world_size) const {
  std::size_t jobs = 0;
  std::int64_t ranks = 0;
  {
    std::shared_lock lock(mu_);
    for (const auto& [id, j] : jobs_)
      if (j->auth.origin == kOriginZeusAnonymous) {
        ++jobs;
        ranks += j->spec.world_size();
      }
  }
  if (jobs + 1 > opt_.anonymous_max_jobs)
    throw ApiError(403, "quota_exceeded",
                   fmt::format("jobs made without a token are limited to {} (--zeus-no-auth-max-jobs); {} exist; "
                               "delete one or register with the admin token",
                               opt_.anonymous_max_jobs, jobs));
  if (ranks + world_size > opt_.anonymous_max_ranks)
    throw ApiError(403, "quota_exceeded",
                   fmt::format("jobs made without a token are limited to {} ranks in total (--zeus-no-auth-max-ranks); "
                               "{} are taken and this job has {}",
                               opt_.anonymous_max_ranks, ranks, world_size));
  if (anonymous_bytes_.used() >= anonymous_bytes_.limit())
    throw ApiError(403, "quota_exceeded",
                   fmt::format("jobs made without a token have stored {} bytes of measurements, the limit "
                               "(--zeus-no-auth-max-mb)", anonymous_bytes_.used()));
}

std::string JobManager::insert_new_job(const std::shared_ptr<Job>& job) {
  const std::string spec_json = job->spec.to_json().dump();
  // The job row, its assignments and the plans they name are one transaction: a reload never
  // finds a job whose assigned plan is missing.
  Store::Transaction tx(store_);
  for (int attempt = 0;; ++attempt) {
    job->id = new_job_id();
    if (store_.insert_job(job->id, job->created_s, job->auth, spec_json, job->status, job->version_counter,
                          stored_assignments(*job)))
      break;
    if (attempt > 8) throw std::runtime_error("could not allocate a unique job id");
  }
  for (const auto& [idx, plan] : job->plans)
    if (idx != kSweepPlanIndex && job->model.explicit_plans.empty())  // sweep steps are re-derived
      store_.put_plan(job->id, idx, freqs_json(plan->freq_mhz));
  tx.commit();
  std::unique_lock lock(mu_);
  jobs_[job->id] = job;
  if (!job->auth.token_sha256.empty()) token_jobs_[job->auth.token_sha256] = job->id;
  return job->id;
}

Reply JobManager::create_job(const json& body) {
  reject_unknown_fields(body, JobSpec::request_fields(), "");  // a typo ("unit_time") must not fall back to a default
  return create_job_as(body, kOriginV1);
}

Reply JobManager::create_job_as(const json& body, const std::string& origin) {
  JobSpec spec = JobSpec::from_json(body);
  {
    // A slot is reserved under the lock and released once the job is inserted (or refused), so
    // concurrent creations never exceed --max-jobs together.
    std::unique_lock lock(mu_);
    if (jobs_.size() + reserved_jobs_ >= opt_.max_jobs)
      throw ApiError(503, "too_many_jobs",
                     fmt::format("the server holds {} jobs, its limit (--max-jobs {}); delete some, or restart it "
                                 "with a higher --max-jobs", jobs_.size() + reserved_jobs_, opt_.max_jobs));
    ++reserved_jobs_;
  }
  struct Release {
    JobManager& m;
    ~Release() {
      std::unique_lock lock(m.mu_);
      --m.reserved_jobs_;
    }
  } release{*this};
  auto job = std::make_shared<Job>();
  job->spec = spec;
  job->auth.origin = origin;
  std::string token;  // only /v1 jobs get their own token: the Zeus wire format has no field to hand it out
  if (origin == kOriginV1) {
    token = new_job_token();
    job->auth.token_sha256 = token_sha256(token);
  }
  job->created_s = now_s();
  job->touch(job->created_s);
  try {
    job->model = prepare_model(spec);
  } catch (const InputError& e) {
    throw ApiError(422, "invalid_job", e.phrased(json_field_name));
  }
  job->pipelines.resize(spec.dp);
  job->version_counter = 1;
  std::shared_ptr<const ServedPlan> plan;
  int idx = 0;
  try {
    switch (spec.source) {
      case PlanSource::kProfile:
        plan = quick_plan(job->model, spec);  // served at once; the frontier is solved in the background
        idx = kQuickPlanIndex;
        job->status = kStatusPlanning;
        break;
      case PlanSource::kPlans:
      case PlanSource::kZeusPlans:
        idx = job->model.fastest_index();
        plan = render_plan(*job->model.dag, idx, job->model.points[idx], job->model.explicit_plans[idx]);
        job->status = kStatusReady;
        break;
      case PlanSource::kProfiling:
        idx = kSweepPlanIndex;
        job->sweep = make_sweep(*job);
        if (job->sweep) plan = render_sweep_plan(*job, *job->sweep);
        job->status = kStatusProfiling;
        break;
    }
  } catch (const InputError& e) {
    throw ApiError(422, "invalid_job", e.phrased(json_field_name));
  }
  if (plan) job->plans[idx] = plan;
  for (auto& a : job->pipelines) a = {idx, 1, plan};
  const std::string id = insert_new_job(job);
  counters_.jobs_created++;
  json out = {{"job_id", id},
              {"status", job->status},
              {"world_size", spec.world_size()},
              {"num_ops", job->model.dag->num_ops()},
              {"num_plans", job->model.points.size()},
              {"plan_index", idx},
              {"spec", spec.summary_json()},
              {"warnings", job->model.warnings}};
  if (!token.empty()) out["job_token"] = token;
  if (spec.source == PlanSource::kProfile) start_solve(job, true);  // after reading the status
  return {201, out.dump()};
}

void JobManager::start_solve(const std::shared_ptr<Job>& job, bool assign_when_done) {
  std::weak_ptr<Job> weak = job;
  enqueue([this, weak, assign_when_done] {
    auto j = weak.lock();
    if (!j) return;
    JobModel model;
    JobSpec spec;
    {
      std::shared_lock lock(j->mu);
      if (j->deleted || j->frontier) return;
      model = shallow(j->model);
      spec = j->spec;
    }
    std::lock_guard solve_lock(j->solve_mu);
    // Cancelled by DELETE or by server shutdown (SIGTERM); the job's planning budget bounds the
    // solve inside the planner, which then returns the frontier found so far (partial).
    auto cancelled = [this, &j] { return shutting_down_.load() || j->deleted_flag.load(); };
    {
      std::lock_guard lock(q_mu_);
      ++solves_started_;
    }
    try {
      auto fr = solve_model_frontier(model, spec, cancelled);
      auto pts = frontier_points(*fr);
      if (pts.empty()) throw InputError("the planner returned an empty frontier");
      // A complete frontier is re-derived deterministically after a restart, so only the served
      // plan is stored; a partial one (stopped by the wall clock) is not reproducible, so every
      // plan of it is stored with it: replayed in one pass, before the job's lock is taken.
      std::vector<std::string> partial_plans;
      if (fr->partial() && assign_when_done) {
        std::vector<std::size_t> all(pts.size());
        for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
        partial_plans.resize(all.size());
        fr->for_each_plan(all, [&](std::size_t i, const FrequencyPlan& p) { partial_plans[i] = freqs_json(p.freq_mhz); });
      }
      std::unique_lock lock(j->mu);
      if (j->deleted) return;
      if (!assign_when_done) {
        if (pts.size() != j->model.points.size()) {
          std::fprintf(stderr, "perseus serve: job %s: re-derived frontier has %zu points, stored %zu; not used\n",
                       j->id.c_str(), pts.size(), j->model.points.size());
          return;
        }
        j->frontier = fr;
        return;
      }
      JobModel solved = model;
      solved.points = pts;
      const int idx = solved.fastest_index();
      auto plan = render_plan(*model.dag, idx, pts[idx], fr->plan(idx).freq_mhz);
      const std::int64_t version = j->version_counter + 1;
      std::vector<StoredAssignment> next;
      for (int d = 0; d < static_cast<int>(j->pipelines.size()); ++d) next.push_back({d, idx, version});
      std::vector<std::pair<int, std::string>> stored_plans;
      std::string partial_json;
      if (fr->partial()) {
        partial_json = json{{"reason", to_string(fr->stop_reason)}, {"detail", fr->partial_detail}}.dump();
        stored_plans.reserve(partial_plans.size());
        for (std::size_t i = 0; i < partial_plans.size(); ++i)
          stored_plans.emplace_back(static_cast<int>(i), std::move(partial_plans[i]));
      } else {
        stored_plans.emplace_back(idx, freqs_json(plan->freq_mhz));
      }
      // Stored first, in one transaction, then applied.
      if (opt_.before_frontier_stored) opt_.before_frontier_stored(j->id);
      try {
        Store::Transaction tx(store_);
        store_.set_frontier(j->id, points_json(pts), partial_json, stored_plans);
        store_.update_assignments(j->id, version, next);
        store_.set_status(j->id, kStatusReady, "");
        tx.commit();
      } catch (const std::exception& e) {
        throw std::runtime_error(fmt::format("{} ({})", kFrontierNotStored, e.what()));
      }
      counters_.plans_solved++;
      if (fr->partial()) counters_.frontiers_partial++;
      j->frontier = fr;
      j->model.points = pts;
      j->model.partial_reason = fr->partial() ? to_string(fr->stop_reason) : "";
      j->model.partial_detail = fr->partial_detail;
      j->plans[idx] = plan;
      j->version_counter = version;
      for (auto& a : j->pipelines) a = {idx, version, plan};
      j->status = kStatusReady;
      j->error.clear();
    } catch (const PlanningCancelled&) {
      return;  // deleted or shutting down: nothing to record (reload re-plans)
    } catch (const std::exception& e) {
      std::unique_lock lock(j->mu);
      if (j->deleted || !assign_when_done) return;
      // Failed in memory whatever the database does: a job left "planning" with no solve
      // queued waited forever (a full disk refused the frontier and then this status too).
      std::string error = fmt::format("planning failed: {}", e.what());
      try {
        store_.set_status(j->id, kStatusFailed, error);
      } catch (const std::exception& store_error) {
        // Still "planning" in the database: a restart plans the job again.
        error += fmt::format("; this status could not be stored either ({}), so a server restart plans the job again",
                             store_error.what());
        std::fprintf(stderr, "perseus serve: job %s: %s\n", j->id.c_str(), error.c_str());
      }
      j->status = kStatusFailed;
      j->error = error;
    }
  });
}

void JobManager::ensure_materialized(const std::shared_ptr<Job>& j, int idx) {
  JobModel model;
  JobSpec spec;
  std::shared_ptr<const Frontier> fr;
  std::vector<int> freq;
  {
    std::shared_lock lock(j->mu);
    if (j->plans.count(idx)) return;
    if (idx < 0 || idx >= static_cast<int>(j->model.points.size()))
      throw std::out_of_range(fmt::format("plan index {} out of range", idx));
    model = shallow(j->model);
    spec = j->spec;
    fr = j->frontier;
    if (!j->model.explicit_plans.empty()) freq = j->model.explicit_plans[idx];
  }
  const bool explicit_plan = !freq.empty();
  bool from_store = false;
  if (!explicit_plan && !fr) {
    // After a restart: a plan stored before it (every plan of a partial frontier) is read here,
    // not at load(), so a reload holds only the assigned plans in memory.
    freq = stored_plan_freqs(j->id, idx, model.dag->num_ops());
    from_store = !freq.empty();
  }
  if (!explicit_plan && !from_store) {
    if (!fr) {
      // A partial frontier's plans are all stored (start_solve()); a missing one cannot be
      // re-derived (the wall-clock budget that cut the solve is not reproducible).
      if (!model.partial_reason.empty())
        throw std::runtime_error(fmt::format("plan {} of the partial frontier is not stored", idx));
      // After a restart: re-derived (deterministic, but seconds to minutes) on the planner pool,
      // so that no HTTP worker thread blocks on a solve.
      std::unique_lock lock(j->mu);
      if (!j->rederive_error.empty()) throw std::runtime_error(j->rederive_error);
      if (!j->frontier) {
        queue_rederive(j);
        throw ApiError(503, "frontier_not_ready",
                       "the job's frontier is being re-derived after a server restart (GET /v1/jobs/{id}: "
                       "\"frontier\".\"rederiving\"); retry shortly",
                       1);
      }
      fr = j->frontier;
    }
    freq = fr->plan(idx).freq_mhz;
  }
  auto plan = render_plan(*model.dag, idx, model.points[idx], std::move(freq));
  std::unique_lock lock(j->mu);
  if (j->deleted || j->plans.count(idx)) return;
  j->plans[idx] = plan;
  if (!explicit_plan && !from_store) store_.put_plan(j->id, idx, freqs_json(plan->freq_mhz));
}

std::vector<int> JobManager::stored_plan_freqs(const std::string& job_id, int idx, int num_ops) {
  const auto text = store_.plan(job_id, idx);
  if (!text) return {};
  try {
    auto freq = json::parse(*text).get<std::vector<int>>();
    if (static_cast<int>(freq.size()) == num_ops) return freq;
  } catch (const json::exception&) {
  }
  return {};  // unreadable: treated as not stored (re-derived, or refused for a partial frontier)
}

void JobManager::queue_rederive(const std::shared_ptr<Job>& job) {
  if (job->rederiving || job->frontier || job->deleted) return;
  job->rederiving = true;
  std::weak_ptr<Job> weak = job;
  enqueue([this, weak] {
    auto j = weak.lock();
    if (!j) return;
    JobModel model;
    JobSpec spec;
    {
      std::shared_lock lock(j->mu);
      model = shallow(j->model);
      spec = j->spec;
    }
    std::shared_ptr<const Frontier> fr;
    std::string error;
    {
      std::lock_guard lock(q_mu_);
      ++solves_started_;
    }
    try {
      fr = solve_model_frontier(
          model, spec, [this, &j] { return shutting_down_.load() || j->deleted_flag.load(); }, false);
      if (fr->size() != model.points.size())
        error = fmt::format("the re-derived frontier has {} plans, the stored one {}", fr->size(), model.points.size());
    } catch (const PlanningCancelled&) {
      fr.reset();  // deleted or shutting down: nothing to record
    } catch (const std::exception& e) {
      error = fmt::format("re-deriving the frontier failed: {}", e.what());
    }
    std::unique_lock lock(j->mu);
    if (fr && error.empty()) j->frontier = fr;
    if (!error.empty()) std::fprintf(stderr, "perseus serve: job %s: %s\n", j->id.c_str(), error.c_str());
    j->rederive_error = error;
    j->rederiving = false;
  });
}

namespace {
json job_summary(const Job& j) {
  return {{"job_id", j.id},         {"name", j.spec.name},       {"status", j.status},
          {"created_s", j.created_s}, {"world_size", j.spec.world_size()}, {"ranks_registered", j.ranks.size()},
          {"last_activity_s", j.last_activity_s.load()}};
}
}  // namespace

Reply JobManager::list_jobs() {
  std::vector<std::shared_ptr<Job>> all;
  {
    std::shared_lock lock(mu_);
    for (const auto& [id, j] : jobs_) all.push_back(j);
  }
  json arr = json::array();
  for (const auto& j : all) {
    std::shared_lock lock(j->mu);
    arr.push_back(job_summary(*j));
  }
  return {200, json{{"jobs", arr}}.dump()};
}

Reply JobManager::get_job(const std::string& job_id, std::int64_t pipelines_from, std::int64_t pipelines_count) {
  auto j = find_or_404(job_id);
  if (pipelines_count < 1 || pipelines_count > kMaxPipelinesPerPage)
    throw ApiError(400, "invalid_query",
                   fmt::format("query parameter \"pipelines_count\" must be in [1, {}], got {}", kMaxPipelinesPerPage,
                               pipelines_count));
  std::shared_lock lock(j->mu);
  const auto num_pipelines = static_cast<std::int64_t>(j->pipelines.size());
  if (pipelines_from < 0 || pipelines_from > num_pipelines)
    throw ApiError(400, "invalid_query",
                   fmt::format("query parameter \"pipelines_from\" must be in [0, {}] (the job has {} pipelines), got {}",
                               num_pipelines, num_pipelines, pipelines_from));
  const int page_begin = static_cast<int>(pipelines_from);
  const int page_end = static_cast<int>(std::min(num_pipelines, pipelines_from + pipelines_count));
  json out = job_summary(*j);
  out["error"] = j->error;
  out["spec"] = j->spec.summary_json();
  out["version"] = j->version_counter;
  json fr = {{"num_points", j->model.points.size()},
             {"fastest_index", j->model.fastest_index()},
             {"partial", !j->model.partial_reason.empty()},
             {"partial_reason", j->model.partial_reason},
             {"partial_detail", j->model.partial_detail},
             {"rederiving", j->rederiving}};
  if (!j->model.points.empty() && j->model.points.size() <= 20000) {
    json pts = json::array();
    for (const auto& p : j->model.points) pts.push_back({number_or_null(p.time_s), number_or_null(p.energy_j)});
    fr["points"] = pts;  // [time_s, energy_j] per plan index
  }
  out["frontier"] = fr;
  json pipes = json::array();
  for (int d = page_begin; d < page_end; ++d) {
    const auto& a = j->pipelines[d];
    pipes.push_back({{"pipeline", d}, {"plan_index", a.plan_index}, {"version", a.version},
                     {"iteration_time_s", a.plan ? number_or_null(a.plan->point.time_s) : json(nullptr)},
                     {"straggler", j->stragglers.count(d) > 0}});
  }
  out["pipelines_from"] = page_begin;
  out["pipelines_total"] = num_pipelines;
  out["pipelines"] = pipes;
  json strag = json::array();
  for (const auto& [d, s] : j->stragglers)
    strag.push_back({{"pipeline", d}, {"target_time_s", s.target_time_s}, {"slowdown", s.slowdown},
                     {"created_s", s.created_s}, {"origin", straggler_origin(s.origin)}});
  out["stragglers"] = strag;
  out["decisions"] = json(std::vector<json>(j->decisions.begin(), j->decisions.end()));
  out["decisions_total"] = j->decisions_total;
  out["warnings"] = j->model.warnings;
  {
    // In-memory closed-loop state (restarts with the server; stored stragglers reload with their origin).
    std::lock_guard loop_lock(j->loop.mu);
    json lp = json::array();
    for (int d = page_begin; d < page_end; ++d) {
      json p = j->loop.pipeline_json(d);
      p["pipeline"] = d;
      if (j->stragglers.count(d) && p["straggler_origin"].is_null()) p["straggler_origin"] = "declared";
      lp.push_back(std::move(p));
    }
    out["straggler_loop"] = {{"options", j->spec.straggler.to_json()},
                             {"measurements_processed", j->loop.measurements_processed.load()},
                             {"pipelines", lp}};
  }
  if (j->sweep) out["profiling"] = j->sweep->progress_json();
  {
    std::lock_guard s(j->stats_mu);
    out["measurements"] = {{"count", j->num_measurements},
                           {"mean_iteration_time_s", j->num_measurements ? json(j->sum_time_s / j->num_measurements) : json(nullptr)},
                           {"mean_iteration_energy_j", j->num_energy_known ? json(j->sum_energy_j / j->num_energy_known) : json(nullptr)},
                           {"energy_unknown", j->num_measurements - j->num_energy_known}};
  }
  return {200, out.dump()};
}

Reply JobManager::delete_job(const std::string& job_id) {
  auto j = find(job_id);
  if (!j) throw ApiError(404, "unknown_job", fmt::format("no job \"{}\"", job_id.substr(0, 64)));
  {
    // Under the job's own lock, which every writer holds while it checks `deleted` and commits:
    // no write of this job lands after the delete's commit (no orphan rows), and of concurrent
    // DELETEs exactly one finds the job. The map lock is taken after this one is released
    // (metrics_text() takes the map's, then a job's).
    std::unique_lock lock(j->mu);
    if (j->deleted) throw ApiError(404, "unknown_job", fmt::format("no job \"{}\"", job_id.substr(0, 64)));
    store_.delete_job(job_id);  // committed first: a failed delete leaves the job as it was
    j->deleted = true;
    j->deleted_flag = true;  // a running solve of this job stops at its next step
  }
  {
    std::unique_lock lock(mu_);
    if (auto it = jobs_.find(job_id); it != jobs_.end() && it->second == j) {
      jobs_.erase(it);
      if (!j->auth.token_sha256.empty()) token_jobs_.erase(j->auth.token_sha256);
      if (j->auth.origin == kOriginZeusAnonymous) {
        std::lock_guard s(j->stats_mu);
        anonymous_bytes_.release(j->measurement_bytes);
      }
    }
  }
  j.reset();  // the job's memory is freed here unless a request or its solve still holds it
  release_freed_memory();
  return {200, json{{"job_id", job_id}, {"deleted", true}}.dump()};
}

std::vector<std::string> JobManager::expire_idle(double now_monotonic_s) {
  std::vector<std::shared_ptr<Job>> all;
  {
    std::shared_lock lock(mu_);
    for (const auto& [id, j] : jobs_) all.push_back(j);
  }
  std::vector<std::string> expired;
  for (const auto& j : all) {
    // On the monotonic clock: a wall clock stepped forward (NTP correcting a wrong start, a
    // resumed VM) deleted jobs idle for seconds (session 21's trial).
    if (opt_.job_idle_ttl_s > 0 && now_monotonic_s - j->last_activity_mono_s.load() > opt_.job_idle_ttl_s) {
      try {
        delete_job(j->id);
        expired.push_back(j->id);
        counters_.jobs_expired++;
      } catch (const ApiError&) {
      }
      continue;
    }
    if (j->activity_dirty.exchange(false)) store_.set_last_activity(j->id, j->last_activity_s.load());
  }
  return expired;
}

std::size_t JobManager::load() {
  std::size_t n = 0;
  for (auto& sj : store_.load_all(opt_.max_decisions_kept)) {
    auto j = std::make_shared<Job>();
    j->id = sj.job_id;
    j->auth = sj.auth;
    j->measurement_bytes = sj.measurement_bytes;
    if (j->auth.origin == kOriginZeusAnonymous) anonymous_bytes_.add(sj.measurement_bytes);
    j->created_s = sj.created_s;
    // The last activity is written by the expiry sweep, so a kill -9 can lose the latest: the
    // restart counts as activity, and no job is expired for requests the store did not see.
    j->touch(std::max(sj.last_activity_s, now_s()));
    j->status = sj.status;
    j->error = sj.error;
    j->version_counter = sj.version_counter;
    j->num_measurements = sj.num_measurements;
    j->sum_time_s = sj.sum_time_s;
    j->sum_energy_j = sj.sum_energy_j;
    j->num_energy_known = sj.num_energy_known;
    j->zeus_next_iteration = sj.max_iteration + 1;
    bool solve = false;
    try {
      j->spec = JobSpec::from_json(json::parse(sj.spec_json), /*stored=*/true);
      j->pipelines.resize(j->spec.dp);
      for (const auto& r : sj.ranks) {
        j->ranks[r.rank] = r;
        j->slots[{r.dp_rank, r.pp_rank, r.tp_rank}] = r.rank;
      }
      for (const auto& s : sj.stragglers) j->stragglers[s.pipeline] = s;
      if (!j->stragglers.empty()) {
        // Each straggler keeps its origin: a detected one is still cleared by the loop when its
        // pipeline recovers (it reloaded as declared, which only DELETE clears: the other
        // pipelines stayed on the slow plan, session 18's trial). The detector starts with it
        // as a straggler, as apply_stragglers() leaves a declared one.
        std::lock_guard loop_lock(j->loop.mu);
        j->loop.init(j->spec);
        for (const auto& [d, s] : j->stragglers) {
          if (d < 0 || d >= j->spec.dp) continue;
          j->loop.origin[d] = straggler_origin(s.origin);
          j->loop.detector->set_state(d, true);
        }
      }
      // The newest that fit record_decision()'s bounds (a store written with other bounds may hold more).
      std::size_t bytes = 0, first = sj.decisions.size();
      while (first > 0 && sj.decisions.size() - first < opt_.max_decisions_kept &&
             (first == sj.decisions.size() || bytes + sj.decisions[first - 1].size() <= opt_.max_decision_bytes)) {
        bytes += sj.decisions[--first].size();
      }
      for (std::size_t k = first; k < sj.decisions.size(); ++k) {
        j->decisions.push_back(json::parse(sj.decisions[k]));
        j->decision_bytes.push_back(sj.decisions[k].size());
      }
      // The store keeps only the newest decisions (update_assignments prunes): the newest one's
      // id is the count of every decision the job ever took.
      j->decisions_total = sj.decision_rows;
      if (!j->decisions.empty()) {  // the newest is always kept
        const json& id = j->decisions.back()["id"];
        if (id.is_number_integer()) j->decisions_total = std::max(j->decisions_total, id.get<std::int64_t>());
      }
      j->model = prepare_model(j->spec, sj.built_profile_csv);
      if (!sj.points_json.empty()) j->model.points = parse_points(sj.points_json);
      if (!sj.frontier_partial_json.empty()) {
        const json partial = json::parse(sj.frontier_partial_json);
        j->model.partial_reason = partial.at("reason").get<std::string>();
        j->model.partial_detail = partial.at("detail").get<std::string>();
      }
      for (const auto& [idx, text] : sj.plans) {
        auto freq = json::parse(text).get<std::vector<int>>();
        if (static_cast<int>(freq.size()) != j->model.dag->num_ops()) continue;
        PlanPoint pt{std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN()};
        if (idx >= 0 && idx < static_cast<int>(j->model.points.size())) pt = j->model.points[idx];
        else if ((idx == kAllMaxPlanIndex || idx == kQuickPlanIndex) && j->model.profile)
          pt = all_max_point(j->model, j->spec, freq);  // evaluates any per-op clocks
        j->plans[idx] = render_plan(*j->model.dag, idx, pt, std::move(freq));
      }
      for (const auto& a : sj.assignments) {
        if (a.pipeline < 0 || a.pipeline >= j->spec.dp) continue;
        auto& p = j->pipelines[a.pipeline];
        p.plan_index = a.plan_index;
        p.version = std::max(p.version, a.version);
      }
      const bool sweeping = j->spec.source == PlanSource::kProfiling && sj.built_profile_csv.empty();
      if (sweeping) {
        j->sweep = make_sweep(*j);
        if (j->sweep) {
          for (const auto& m : store_.measurements(j->id)) {
            auto r = j->ranks.find(m.rank);
            if (r != j->ranks.end()) feed_sweep(*j->sweep, *j, r->second, json::parse(m.body_json));
          }
          // A database written before each report and the step it completes were one
          // transaction may hold the report without the step's version: fix it up.
          const std::int64_t expected = 1 + j->sweep->step();
          if (j->version_counter < expected) j->version_counter = expected;
          for (auto& a : j->pipelines) a.version = std::max(a.version, expected);
          j->plans[kSweepPlanIndex] = render_sweep_plan(*j, *j->sweep);
          store_.update_assignments(j->id, j->version_counter, stored_assignments(*j));
        }
      }
      for (auto& p : j->pipelines) {
        if (!j->plans.count(p.plan_index) && p.plan_index >= 0 && !j->model.explicit_plans.empty() &&
            p.plan_index < static_cast<int>(j->model.explicit_plans.size()))
          j->plans[p.plan_index] = render_plan(*j->model.dag, p.plan_index, j->model.points[p.plan_index],
                                               j->model.explicit_plans[p.plan_index]);
        auto it = j->plans.find(p.plan_index);
        p.plan = it == j->plans.end() ? nullptr : it->second;
        if (!p.plan && !(sweeping && !j->sweep))
          throw std::runtime_error(fmt::format("stored plan {} is missing", p.plan_index));
      }
      if (sweeping && j->sweep && j->sweep->done()) {
        // The crash came between the last step and storing the profile.
        Store::Transaction tx(store_);
        auto apply = finish_profiling(j, *j->sweep);
        tx.commit();
        apply();
      } else if (j->status == kStatusPlanning) {
        solve = true;
      } else if (j->status == kStatusFailed && j->error.find(kFrontierNotStored) != std::string::npos) {
        // Planning worked; storing its frontier did not (a full disk that had room for the failed
        // status): a restart plans it again, as when that status could not be stored either,
        // instead of a job failed for good (session 21's trial). The database keeps "failed"
        // until the new frontier is stored, so a crash meanwhile replans once more.
        j->status = kStatusPlanning;
        j->error.clear();
        solve = true;
      }
    } catch (const std::exception& e) {
      j->status = kStatusFailed;
      j->error = fmt::format("could not reload the job: {}", e.what());
      if (j->pipelines.size() != static_cast<std::size_t>(j->spec.dp)) j->pipelines.resize(j->spec.dp);
    }
    {
      std::unique_lock lock(mu_);
      jobs_[j->id] = j;
      if (!j->auth.token_sha256.empty()) token_jobs_[j->auth.token_sha256] = j->id;
    }
    if (solve) start_solve(j, true);
    ++n;
  }
  return n;
}

std::string JobManager::metrics_text() const {
  std::map<std::string, int> by_status;
  std::size_t ranks = 0, jobs = 0;
  std::map<std::string, std::string> straggler_families;  // per-job straggler loop gauges
  {
    std::shared_lock lock(mu_);
    for (const auto& [id, j] : jobs_) {
      std::shared_lock jl(j->mu);
      by_status[j->status]++;
      ranks += j->ranks.size();
      ++jobs;
      std::set<int> stragglers;
      for (const auto& [d, s] : j->stragglers) stragglers.insert(d);
      std::lock_guard loop_lock(j->loop.mu);
      j->loop.append_metrics(j->id, j->spec.dp, stragglers, straggler_families);
    }
  }
  std::string out;
  auto counter = [&](const char* name, const char* help, std::uint64_t v) {
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, v);
  };
  counter("perseus_http_requests_total", "HTTP requests handled.", counters_.requests.load());
  counter("perseus_http_client_errors_total", "Requests answered with 4xx.", counters_.errors_4xx.load());
  counter("perseus_http_server_errors_total", "Requests answered with 5xx.", counters_.errors_5xx.load());
  counter("perseus_http_rate_limited_total", "Requests refused with 429.", counters_.rate_limited.load());
  counter("perseus_plan_fetches_total", "Plan fetches answered 200.", counters_.plan_fetches.load());
  counter("perseus_plan_not_modified_total", "Plan fetches answered 304.", counters_.plan_not_modified.load());
  counter("perseus_measurements_total", "Measurements accepted.", counters_.measurements.load());
  counter("perseus_measurement_duplicates_total", "Repeated measurements ignored.", counters_.measurement_duplicates.load());
  counter("perseus_measurements_rejected_total", "Measurement reports refused (422): alone, or as items of a batch.",
          counters_.measurements_rejected.load());
  counter("perseus_straggler_decisions_total", "Straggler decisions taken (every action, verifications included).", counters_.straggler_decisions.load());
  counter("perseus_jobs_created_total", "Jobs created.", counters_.jobs_created.load());
  counter("perseus_jobs_expired_total", "Jobs deleted for idleness.", counters_.jobs_expired.load());
  counter("perseus_frontiers_solved_total", "Frontiers solved.", counters_.plans_solved.load());
  counter("perseus_frontiers_partial_total", "Frontiers solved partially (the job's planning_budget_s was reached).",
          counters_.frontiers_partial.load());
  const Store::WriteHealth storage = store_.write_health();
  counter("perseus_store_write_failures_total", "Database writes that failed (disk full, I/O error, locked).",
          storage.write_failures);
  out += fmt::format("# HELP perseus_store_writable 1 when the latest database write succeeded, else 0.\n"
                     "# TYPE perseus_store_writable gauge\nperseus_store_writable {}\n", storage.ok ? 1 : 0);
  const PlannerState planner = planner_state();
  counter("perseus_planner_solves_started_total", "Frontier solves started.", planner.solves_started);
  out += fmt::format("# HELP perseus_planner_queued Frontier solves waiting for a planner thread.\n"
                     "# TYPE perseus_planner_queued gauge\nperseus_planner_queued {}\n"
                     "# HELP perseus_planner_running Frontier solves running.\n"
                     "# TYPE perseus_planner_running gauge\nperseus_planner_running {}\n",
                     planner.queued, planner.running);
  out += "# HELP perseus_jobs Jobs held, by status.\n# TYPE perseus_jobs gauge\n";
  for (const char* s : {kStatusPlanning, kStatusProfiling, kStatusReady, kStatusFailed})
    out += fmt::format("perseus_jobs{{status=\"{}\"}} {}\n", s, by_status[s]);
  out += fmt::format("# HELP perseus_ranks_registered Ranks registered over all jobs.\n"
                     "# TYPE perseus_ranks_registered gauge\nperseus_ranks_registered {}\n", ranks);
  for (const auto& [name, help] : StragglerLoop::metric_families()) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help.first, name, help.second);
    out += straggler_families[name];
  }
  (void)jobs;
  return out;
}

}  // namespace perseus::server
