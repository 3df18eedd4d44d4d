"""End to end with real PyTorch, 2 x 2 (DP x PP): after a straggler report for pipeline 0, the
server moves the other pipeline to a slower, lower-energy frontier plan (Perseus §3.2); the
clients switch to it at a step boundary and apply its clocks."""
import os
import unittest

from common import applied_by_iteration, run_workers, runtime_missing, temp_dir, write_first_stages

ITERATIONS, MICROBATCHES, DP, PP, STRAGGLER_AT = 12, 4, 2, 2, 4


class TorchStragglerTest(unittest.TestCase):
    def setUp(self):
        why = runtime_missing()
        if why:
            self.skipTest(why)

    def test_non_straggler_pipeline_slows_down(self):
        from perseus.server import LocalServer
        out = temp_dir(self)
        profile = write_first_stages(PP, out)
        with LocalServer(os.environ.get("PERSEUS_BINARY")) as server:
            results = run_workers(self, server, out, dp=DP, pp=PP, profile=profile, iterations=ITERATIONS,
                                  microbatches=MICROBATCHES,
                                  extra=["--straggler-at", str(STRAGGLER_AT), "--straggler-slowdown", "1.3"])
            job = server.api.get_job(results[0]["job_id"])
        self.assertEqual(job["decisions_total"], 1)
        self.assertEqual([p["straggler"] for p in job["pipelines"]], [True, False])
        for d in range(DP):  # both pipelines train
            losses = results[d * PP + PP - 1]["losses"]
            self.assertLess(losses[-1], losses[0], "pipeline %d loss did not decrease: %s" % (d, losses))

        for r in results:
            with self.subTest(rank=r["rank"]):
                versions = [h["plan_version"] for h in r["history"]]
                first = r["plans"][str(versions[0])]
                last = r["plans"][str(versions[-1])]
                freqs = lambda p: [i["freq_mhz"] for i in p["instructions"]]  # noqa: E731
                for v, plan in r["plans"].items():
                    self.assertEqual(plan["version"], int(v))
                if r["dp_rank"] == 0:
                    # The straggler pipeline keeps its plan (the fastest).
                    self.assertEqual(len(set(versions)), 1, versions)
                else:
                    # The other pipeline switches once, at the step boundary right after the
                    # report (its client fetched the plan before the step began), to a slower
                    # cheaper plan.
                    switch = next(i for i, v in enumerate(versions) if v != versions[0])
                    self.assertEqual(switch, STRAGGLER_AT, versions)
                    self.assertEqual(len(set(versions[switch:])), 1)
                    self.assertNotEqual(freqs(first), freqs(last))
                    self.assertGreater(last["iteration_time_s"], first["iteration_time_s"])
                    self.assertLess(last["energy_j"], first["energy_j"])
                    self.assertGreaterEqual(r["stats"]["plan_updates"], 1)
                # Every iteration applied exactly the plan version it ran.
                applied = applied_by_iteration(r["freq_log"])
                self.assertEqual(sorted(applied), list(range(ITERATIONS)))
                for h in r["history"]:
                    planned = freqs(r["plans"][str(h["plan_version"])])
                    got = applied[h["iteration"]]
                    self.assertEqual([e[1] for e in got], planned, "iteration %d" % h["iteration"])
                    self.assertEqual([e[2] for e in got], planned, "iteration %d" % h["iteration"])
                self.assertEqual(r["stats"]["reports_sent"], ITERATIONS)
        self.assertEqual(job["measurements"]["count"], DP * PP * ITERATIONS)


if __name__ == "__main__":
    unittest.main()
