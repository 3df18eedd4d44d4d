"""One rank of the end-to-end tests: a small transformer split into `pp` pipeline stages (and
`dp` data-parallel replicas) trained on CPU with gloo and a hand-written 1F1B schedule, with
the Perseus hooks of perseus.torch around every forward/backward computation.

Run by test_torch_pipeline.py / test_torch_straggler.py as `world` processes; writes
<out>/rank<R>.json with the losses, the per-step plan versions and instructions, the plans
seen (per version) and the client counters, and the client's clock log <out>/freq<R>.json.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import perseus.torch as pt
from perseus.server import API

VOCAB, DIM, HEADS, SEQ, MB_SIZE, LAYERS = 32, 32, 2, 8, 4, 4


def one_f_one_b(stage, stages, microbatches):
    """Synchronous 1F1B (PipeDream-Flush): warm-up forwards, then one forward / one backward,
    then cool-down backwards. Returns [("forward"|"backward", microbatch)]."""
    warmup = min(stages - stage - 1, microbatches)
    order = [("forward", m) for m in range(warmup)]
    f, b = warmup, 0
    while b < microbatches:
        if f < microbatches:
            order.append(("forward", f))
            f += 1
        order.append(("backward", b))
        b += 1
    return order


class Stage(nn.Module):
    """Layers [first, last) of the model; stage 0 embeds tokens, the last stage has the LM head."""

    def __init__(self, stage, stages):
        super().__init__()
        per = LAYERS // stages
        self.first, self.last = stage == 0, stage == stages - 1
        if self.first:
            self.embed = nn.Embedding(VOCAB, DIM)
            self.pos = nn.Parameter(torch.randn(SEQ, DIM) * 0.02)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(DIM, HEADS, dim_feedforward=2 * DIM, dropout=0.0, batch_first=True)
            for _ in range(per))
        if self.last:
            self.norm = nn.LayerNorm(DIM)
            self.head = nn.Linear(DIM, VOCAB)

    def forward(self, x):
        if self.first:
            x = self.embed(x) + self.pos
        for layer in self.layers:
            x = layer(x)
        if self.last:
            x = self.head(self.norm(x))
        return x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--dp", type=int, default=1)
    ap.add_argument("--pp", type=int, default=4)
    ap.add_argument("--master-port", type=int, required=True)
    ap.add_argument("--server-url", required=True)
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--profile", required=True)
    ap.add_argument("--microbatches", type=int, default=6)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--straggler-at", type=int, default=-1, help="iteration before which rank 0 reports pipeline 0")
    ap.add_argument("--straggler-slowdown", type=float, default=1.3)
    ap.add_argument("--p2p-power", type=float, default=83.64)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    world = a.dp * a.pp
    dp_rank, pp_rank = divmod(a.rank, a.pp)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % a.master_port, rank=a.rank,
                            world_size=world)
    with open(a.token_file) as f:
        token = f.read().strip()
    with open(a.profile) as f:
        profile_csv = f.read()

    # Rank 0 creates the job (and waits for its frontier); everybody gets the id.
    job_id = pt.create_job(a.server_url, token=token, pp=a.pp, dp=a.dp, microbatches=a.microbatches,
                           profile_csv=profile_csv, p2p_power_w=a.p2p_power, unit_time_s=0.002,
                           name="pytest-e2e",
                           # These runs test the declared-straggler path; their iteration times are
                           # this machine's noise, so the closed loop (docs/stragglers.md) is off.
                           straggler_detection={"enabled": False, "verify": False})
    rt = pt.PipelineRuntime(a.server_url, job_id, token=token, dp_rank=dp_rank, pp_rank=pp_rank,
                            device="cpu", backend="simulated", profile_path=a.profile, sim_time_scale=0.01,
                            simulate_compute=True, coalesce_clock_requests=False, plan_poll_interval_s=0.05,
                            freq_log_path=os.path.join(a.out, "freq%d.json" % a.rank))

    torch.manual_seed(100 + pp_rank)  # same weights in every replica of a stage
    model = Stage(pp_rank, a.pp)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(7 + dp_rank)  # each pipeline its own (fixed) data
    tokens = torch.randint(0, VOCAB, (a.microbatches, MB_SIZE, SEQ), generator=gen)
    targets = (tokens * 5 + 3) % VOCAB  # a learnable token-wise mapping
    dp_groups = [dist.new_group([d * a.pp + s for d in range(a.dp)]) for s in range(a.pp)]
    prev_rank = a.rank - 1 if pp_rank > 0 else None
    next_rank = a.rank + 1 if pp_rank < a.pp - 1 else None
    order = one_f_one_b(pp_rank, a.pp, a.microbatches)
    api = API(a.server_url, token)

    losses, plans = [], {}
    t0 = time.monotonic()
    for it in range(a.iterations):
        if it == a.straggler_at:
            dist.barrier()
            in_use = rt.stats()["plan_version"]
            if a.rank == 0:
                decision = api.report_straggler(job_id, 0, slowdown=a.straggler_slowdown)["decision"]
                print("straggler decision: %s" % json.dumps(decision), flush=True)
            dist.barrier()
            # Order, not timing: the other pipeline's clients fetch the new plan before anyone
            # goes on, so it is switched in exactly at this step boundary.
            if dp_rank != 0:
                deadline = time.monotonic() + 600  # only stops a hang
                while rt.stats()["latest_plan_version"] == in_use:
                    if time.monotonic() > deadline:
                        raise SystemExit("rank %d: no new plan after the straggler report" % a.rank)
                    time.sleep(0.01)
            dist.barrier()
        pending, saved, loss_sum = [], {}, 0.0
        with rt.step():
            for kind, mb in order:
                if kind == "forward":
                    if prev_rank is None:
                        x = tokens[mb]
                    else:
                        x = torch.empty(MB_SIZE, SEQ, DIM)
                        dist.recv(x, src=prev_rank, tag=mb)
                        x.requires_grad_()
                    with rt.forward():
                        y = model(x)
                        if next_rank is None:
                            y = nn.functional.cross_entropy(y.reshape(-1, VOCAB), targets[mb].reshape(-1)) / a.microbatches
                            loss_sum += y.item()
                    saved[mb] = (x, y)
                    if next_rank is not None:
                        out = y.detach()
                        pending.append((dist.isend(out, dst=next_rank, tag=mb), out))
                else:
                    x, y = saved.pop(mb)
                    grad = None
                    if next_rank is not None:
                        grad = torch.empty_like(y)
                        dist.recv(grad, src=next_rank, tag=10000 + mb)
                    with rt.backward():
                        y.backward(grad)
                    if prev_rank is not None:
                        g = x.grad.detach()
                        pending.append((dist.isend(g, dst=prev_rank, tag=10000 + mb), g))
            for work, _ in pending:
                work.wait()
            if a.dp > 1:
                for p in model.parameters():
                    dist.all_reduce(p.grad, group=dp_groups[pp_rank])
                    p.grad /= a.dp
            opt.step()
            opt.zero_grad()
        if rt.plan is not None:
            plans[str(rt.history[-1]["plan_version"])] = rt.plan
        if next_rank is None:
            losses.append(loss_sum)
    train_s = time.monotonic() - t0
    rt.client.flush(10.0)
    stats = rt.stats()
    rt.close()
    result = dict(rank=a.rank, dp_rank=dp_rank, pp_rank=pp_rank, job_id=job_id, losses=losses, history=rt.history,
                  plans=plans, stats=stats, order=order, clock_change_syncs=rt.clock_change_syncs, train_s=train_s)
    with open(os.path.join(a.out, "rank%d.json" % a.rank), "w") as f:
        json.dump(result, f)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
