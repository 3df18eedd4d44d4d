"""End to end with real PyTorch: 4 processes (gloo, CPU) train a small transformer split into
4 pipeline stages with a hand-written 1F1B schedule, with perseus.torch hooks, against
`perseus serve` on loopback and simulated GPUs running a 4-stage GPT-3 profile."""
import os
import unittest

import perseus

from common import GPT3_PROFILE, applied_by_iteration, run_workers, runtime_missing, temp_dir, write_first_stages

ITERATIONS, MICROBATCHES, PP = 12, 6, 4


class TorchPipelineTest(unittest.TestCase):
    def setUp(self):
        why = runtime_missing()
        if why:
            self.skipTest(why)

    def test_four_stage_1f1b(self):
        from perseus.server import LocalServer
        out = temp_dir(self)
        profile = write_first_stages(PP, out)
        with LocalServer(os.environ.get("PERSEUS_BINARY")) as server:
            results = run_workers(self, server, out, dp=1, pp=PP, profile=profile, iterations=ITERATIONS,
                                  microbatches=MICROBATCHES)
            job = server.api.get_job(results[0]["job_id"])
        self.assertEqual(len({r["job_id"] for r in results}), 1, "every rank must get rank 0's job id")

        # 1. Real training: the loss goes down.
        losses = results[-1]["losses"]
        self.assertEqual(len(losses), ITERATIONS)
        self.assertLess(sum(losses[-3:]) / 3, 0.8 * sum(losses[:3]) / 3, "loss did not decrease: %s" % losses)

        # The hand-written 1F1B equals Perseus' 1F1B, which the plans follow.
        sched = perseus.schedule("1f1b", PP, MICROBATCHES)
        frontier = perseus.optimize(perseus.load_profile(profile), PP, MICROBATCHES, p2p_power_w=83.64,
                                    unit_time_s=0.002, plans="fastest")
        fastest = frontier["plans"][0]
        for r in results:
            with self.subTest(rank=r["rank"]):
                self.assertEqual([tuple(x) for x in r["order"]],
                                 [(i["instruction"], i["microbatch"]) for i in sched["ranks"][r["pp_rank"]]])
                # 2. The rank ran one plan version (the job was ready before training) and every
                # computation's clock request and applied clock equal that plan.
                versions = {h["plan_version"] for h in r["history"]}
                self.assertEqual(len(versions), 1, versions)
                plan = r["plans"][str(versions.pop())]
                planned = [i["freq_mhz"] for i in plan["instructions"]]
                self.assertEqual(len(planned), 2 * MICROBATCHES)
                self.assertEqual([i["instruction"] for i in plan["instructions"]], [x[0] for x in r["order"]])
                # The server serves the T_min plan, which equals what the planner computes locally.
                self.assertEqual(planned, [i["frequency_mhz"] for i in fastest["ranks"][r["pp_rank"]]["instructions"]])
                applied = applied_by_iteration(r["freq_log"])
                self.assertEqual(sorted(applied), list(range(ITERATIONS)))
                for it, entries in applied.items():
                    self.assertEqual([e[0] for e in entries], list(range(2 * MICROBATCHES)))
                    self.assertEqual([e[1] for e in entries], planned, "iteration %d requests" % it)
                    self.assertEqual([e[2] for e in entries], planned, "iteration %d applied clocks" % it)
                    self.assertTrue(all(e[3] in ("applied", "redundant") for e in entries))
                # Synchronisation points are exactly the clock changes (no-ops on CPU).
                changes = sum(1 for a, b in zip(planned, planned[1:]) if a != b)
                wrap = 1 if planned[0] != planned[-1] else 0
                self.assertEqual(r["clock_change_syncs"], changes * ITERATIONS + wrap * (ITERATIONS - 1))
                # 3. Measurements reached the server.
                self.assertEqual(r["stats"]["reports_sent"], ITERATIONS)
                self.assertEqual(r["stats"]["reports_dropped"], 0)
        self.assertEqual(job["measurements"]["count"], PP * ITERATIONS)
        self.assertGreater(job["measurements"]["mean_iteration_energy_j"], 0)
        print("losses: %s; train time per rank: %s s" % (["%.3f" % x for x in losses],
                                                          ["%.1f" % r["train_s"] for r in results]))


class TorchHelpersTest(unittest.TestCase):
    """perseus.torch error paths in a 1-process gloo group (fast)."""

    def setUp(self):
        why = runtime_missing()
        if why:
            self.skipTest(why)

    def test_a_rank_or_gpu_that_cannot_be_known_is_refused(self):
        """Session 22's trial: without torch.distributed every PipelineRuntime registered as rank 0,
        a CPU device with the nvml backend silently drove GPU 0 on every rank, and device_index
        collided with the one PipelineRuntime passes (a raw TypeError)."""
        from unittest import mock
        import perseus.torch as pt
        from perseus.server import API
        url = "http://127.0.0.1:9"  # never contacted: each refusal comes first
        with mock.patch.dict(os.environ):
            for name in ("RANK", "LOCAL_RANK"):
                os.environ.pop(name, None)
            with self.assertRaises(ValueError) as cm:
                pt.PipelineRuntime(url, "job-x", dp_rank=0, pp_rank=1, device="cpu", backend="dry-run")
            self.assertIn("rank", str(cm.exception))
            with self.assertRaises(ValueError) as cm:
                pt.PipelineRuntime(url, "job-x", rank=1, dp_rank=0, pp_rank=1, device="cpu", backend="nvml")
            self.assertIn("device_index", str(cm.exception))
            with self.assertRaises(ValueError) as cm:
                pt.PipelineRuntime(url, "job-x", rank=1, dp_rank=0, pp_rank=1, device="cuda:1", backend="nvml",
                                   device_index=0)
            self.assertIn("disagrees", str(cm.exception))
            for bad, error in ((-1, ValueError), (True, TypeError), ("0", TypeError), (1.0, TypeError)):
                with self.subTest(device_index=bad), self.assertRaises(error):
                    pt.PipelineRuntime(url, "job-x", rank=1, dp_rank=0, pp_rank=1, device="cpu", backend="nvml",
                                       device_index=bad)
            # Session 32's trial: a bad $RANK / $LOCAL_RANK is named; device="cuda" on a torch
            # without CUDA is a ValueError, not torch's AssertionError.
            for name, value in (("RANK", "abc"), ("RANK", "-1"), ("LOCAL_RANK", "x")):
                with self.subTest(env=name), mock.patch.dict(os.environ, {name: value}):
                    with self.assertRaises(ValueError) as cm:
                        if name == "RANK":
                            pt.PipelineRuntime(url, "job-x", dp_rank=0, pp_rank=1, device="cpu", backend="dry-run")
                        else:
                            pt._device_index(pt.torch.device("cpu"), "nvml", None)
                    self.assertIn("$%s must be a non-negative integer" % name, str(cm.exception))
            if not pt.torch.cuda.is_available():
                with self.assertRaises(ValueError) as cm:
                    pt._device_index(pt.torch.device("cuda"), "nvml", None)
                self.assertIn("no CUDA device", str(cm.exception))
        self.assertEqual(pt._device_index(None, "nvml", 3), 3)
        try:
            import numpy
            self.assertEqual(pt._device_index(None, "nvml", numpy.int64(2)), 2)  # as Client takes it
        except ImportError:
            pass
        with mock.patch.dict(os.environ, {"LOCAL_RANK": "2"}):
            self.assertEqual(pt._device_index(pt.torch.device("cpu"), "nvml", None), 2)
        for bad in (None, -1, float("nan"), "5"):
            with self.subTest(timeout_s=bad), self.assertRaises(ValueError) as cm:
                API(url).wait_ready("job-x", timeout_s=bad)
            self.assertIn("timeout_s", str(cm.exception))

    def test_create_job_failure_and_non_strict_mismatch(self):
        import warnings
        import torch.distributed as dist
        import perseus.torch as pt
        from perseus.server import API, APIError, LocalServer
        from common import free_port
        out = temp_dir(self)
        profile = write_first_stages(1, out)
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % free_port(), rank=0, world_size=1)
        self.addCleanup(dist.destroy_process_group)
        with LocalServer(os.environ.get("PERSEUS_BINARY")) as server, open(profile) as f:
            csv = f.read()
            with self.assertRaises(APIError) as cm:
                pt.create_job(server.url, token=server.token, pp=0, microbatches=2, profile_csv=csv, p2p_power_w=80.0)
            # Rank src raises the server's own error (it said 0 / job_creation_failed for every cause).
            self.assertEqual((cm.exception.http_status, cm.exception.code), (422, "invalid_field"))
            self.assertIn("pp", str(cm.exception))
            with self.assertRaises(APIError) as cm:
                pt.create_job(server.url, token="y" * 32, pp=1, microbatches=2, profile_csv=csv, p2p_power_w=80.0)
            self.assertEqual((cm.exception.http_status, cm.exception.code), (401, "unauthorized"))
            api = API(server.url, server.token)
            before = len(api.request("GET", "/v1/jobs")["jobs"])
            with open(GPT3_PROFILE) as g:  # a solve of minutes: 8 stages, 256 microbatches, a 1 us quantum
                long_solve = dict(pp=8, microbatches=256, profile_csv=g.read(), p2p_power_w=83.64, unit_time_s=1e-6)
            with self.assertRaises(TimeoutError):
                pt.create_job(server.url, token=server.token, timeout_s=0, **long_solve)
            self.assertEqual(len(api.request("GET", "/v1/jobs")["jobs"]), before,
                             "the job that was not ready in time is deleted")
            job = pt.create_job(server.url, token=server.token, pp=1, microbatches=2, profile_csv=csv, p2p_power_w=80.0)
            with pt.PipelineRuntime(server.url, job, token=server.token, dp_rank=0, pp_rank=0, device="cpu",
                                    backend="simulated", profile_path=profile, strict=False) as rt:
                self.assertEqual(len(rt.planned_frequencies_mhz()), 0)  # fetched at the first step
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    with rt.step():
                        with rt.backward():  # the plan starts with a forward
                            pass
                self.assertTrue(any("plan" in str(w.message) for w in caught), [str(w.message) for w in caught])
                self.assertEqual(len(rt.planned_frequencies_mhz()), 4)
                strict = pt.PipelineRuntime(server.url, job, token=server.token, dp_rank=0, pp_rank=0,
                                            backend="simulated", profile_path=profile)
                self.addCleanup(strict.close)
                with self.assertRaises(perseus.PlanMismatchError):
                    with strict.step():
                        with strict.backward():
                            pass
            with self.assertRaises(ValueError):
                pt.PipelineRuntime(server.url, job, dp_rank=0, pp_rank=0, sync="sometimes")


if __name__ == "__main__":
    unittest.main()
