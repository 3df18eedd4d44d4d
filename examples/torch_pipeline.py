"""Perseus in a PyTorch pipeline-parallel training loop (CPU, gloo, simulated GPUs). Run:
PYTHONPATH=build/python /usr/bin/python3 examples/torch_pipeline.py --stages 4  (starts `perseus serve`)
On GPUs: backend="nvml", device=f"cuda:{local_rank}" (CUDA sync at clock changes is automatic)."""
import argparse, os, pathlib, socket, tempfile
import torch, torch.distributed as dist, torch.multiprocessing as mp, torch.nn as nn
import perseus, perseus.torch as pt
from perseus.server import LocalServer

D, V, S, MB, N = 32, 32, 8, 4, 6  # width, vocab, sequence, microbatch size, microbatches


def one_f_one_b(stage, stages):  # w warm-up forwards, then forward w+b / backward b pairs
    w = min(stages - stage - 1, N)
    return [("forward", m) for m in range(w)] + [
        x for b in range(N) for x in ([("forward", w + b)] if w + b < N else []) + [("backward", b)]]


def recv(shape, src, tag):
    t = torch.empty(shape)
    dist.recv(t, src, tag=tag)
    return t


def worker(rank, P, url, token, profile, iters, port):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=P)
    job = pt.create_job(url, token=token, pp=P, microbatches=N, profile_csv=pathlib.Path(profile).read_text(),
                        p2p_power_w=83.64)  # rank 0 creates the job, waits for its frontier; all get the id
    rt = pt.PipelineRuntime(url, job, token=token, dp_rank=0, pp_rank=rank, device="cpu", backend="simulated",
                            profile_path=profile, sim_time_scale=0.01, simulate_compute=True)
    torch.manual_seed(rank)
    top, shown = perseus.load_profile(profile).max_freq_mhz(), None  # the all-max clock, MHz
    model = nn.Sequential(*([nn.Embedding(V, D)] if rank == 0 else []), nn.TransformerEncoderLayer(
        D, 2, 2 * D, 0.0, batch_first=True), *([nn.Linear(D, V)] if rank == P - 1 else []))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    data = torch.randint(0, V, (N, MB, S), generator=torch.Generator().manual_seed(0))
    for it in range(iters):
        acts, sends, loss_sum = {}, [], 0.0
        with rt.step():
            for kind, m in one_f_one_b(rank, P):
                if kind == "forward":
                    x = data[m] if rank == 0 else recv((MB, S, D), rank - 1, m).requires_grad_()
                    with rt.forward():
                        y = model(x)
                        if rank == P - 1:
                            y = nn.functional.cross_entropy(y.flatten(0, 1), ((data[m] * 5 + 3) % V).flatten()) / N
                            loss_sum += y.item()
                    acts[m] = (x, y)
                    if rank < P - 1:
                        sends.append(dist.isend(y.detach(), rank + 1, tag=m))
                else:
                    x, y = acts.pop(m)
                    g = recv(y.shape, rank + 1, 1000 + m) if rank < P - 1 else None
                    with rt.backward():
                        y.backward(g)
                    if rank > 0:
                        sends.append(dist.isend(x.grad, rank - 1, tag=1000 + m))
            for s in sends:
                s.wait()
            opt.step()
            opt.zero_grad()
        if rank == P - 1:
            print(f"iteration {it}: loss {loss_sum:.3f}", flush=True)
        clocks = rt.planned_frequencies_mhz()  # show the ranks where Perseus lowers a clock, when it changes
        if clocks != shown and min(clocks, default=top) < top:
            print(f"  rank {rank}: {sum(f < top for f in clocks)}/{len(clocks)} below {top} MHz: {clocks}", flush=True)
            shown = clocks
    rt.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--stages", type=int, default=4)
    ap.add_argument("--iterations", type=int, default=10)
    a = ap.parse_args()
    full = perseus.load_profile(os.path.join(os.path.dirname(__file__), "stage_profile_gpt3-175b_a100_sxm.csv"))
    if not 1 <= a.stages <= full.num_stages or a.iterations < 1:
        ap.error(f"--stages must be in 1..{full.num_stages} (the bundled profile's stages), --iterations >= 1")
    tmp = tempfile.TemporaryDirectory(prefix="perseus-example-")  # removed at exit
    path = os.path.join(tmp.name, "profile.csv")  # first --stages stages
    pathlib.Path(path).write_text(perseus.profile_rows_to_csv(r for r in full.rows() if r["stage"] < a.stages))
    s = perseus.optimize(path, a.stages, N, p2p_power_w=83.64, plans="none")["summary"]
    print(f"frontier: {s['num_plans']} plans, T_min {s['t_min_s']:.3f} s, {s['intrinsic_saving_pct']:.1f}% below all-max")
    with socket.socket() as sock:  # a free port for torch.distributed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with LocalServer() as server:
        mp.spawn(worker, args=(a.stages, server.url, server.token, path, a.iterations, port), nprocs=a.stages)
