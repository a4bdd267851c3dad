"""Data-parallel training over several processes: ``torchrun`` or ``accelerate launch``
start one process per GPU (or CPU slot), and PyTorch's ``DistributedDataParallel`` averages
the gradients of every step across them (Li et al. 2020, "PyTorch Distributed").

A process learns its place from the environment that both launchers set (``WORLD_SIZE``,
``RANK``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``); with no such environment, or a
world of one, nothing here starts a process group and training runs as before. GPUs use the
NCCL backend, each process its own ``cuda:LOCAL_RANK``; the CPU uses Gloo (which makes the
multi-process path testable on any machine).

Every process reads the same data and builds the same global batch of ``size x batch``
documents with the same seed; each then trains on its own contiguous share of the rows
(:meth:`World.share`). Only the main process (rank 0) writes files and prints.

``accelerate launch`` starts several processes through ``torchrun`` (its multi-GPU launcher,
``--multi_gpu``, chosen by itself on a machine with several GPUs), which sets the variables
above. Its other launchers are refused by :func:`check_launcher` rather than followed in part:
its CPU launcher starts one process unless MPI starts them (``mpirun``: ``PMI_SIZE``,
``OMPI_COMM_WORLD_SIZE``), and the settings it passes as ``ACCELERATE_*`` variables for its own
``Accelerator`` (mixed precision, ``torch.compile``, FSDP, DeepSpeed, Megatron-LM) are not
what this loop does (fp32 DistributedDataParallel).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .._core.errors import InputError


@dataclass(frozen=True)
class World:
    """This process's place among the processes of one data-parallel run."""
    rank: int = 0
    size: int = 1
    local_rank: int = 0
    backend: str | None = None
    started_here: bool = False
    device: str = "cpu"  # where this process's tensors live (NCCL reduces CUDA tensors only)

    @property
    def main(self) -> bool:
        """True in the process that writes files and prints (rank 0)."""
        return self.rank == 0

    def share(self, n_rows: int) -> tuple[slice, float]:
        """``(rows, weight)``: this process's contiguous rows of a global batch of ``n_rows``.

        A process left without rows (a last batch smaller than the world) gets the first row
        with weight 0, so that it still takes part in the gradient average.
        """
        start = n_rows * self.rank // self.size
        stop = n_rows * (self.rank + 1) // self.size
        return (slice(start, stop), 1.0) if stop > start else (slice(0, 1), 0.0)

    def mean(self, value: float) -> float:
        """The mean of ``value`` over the processes (``value`` itself in a world of one)."""
        if self.size == 1:
            return value
        import torch
        import torch.distributed as dist

        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return float(t[0]) / self.size

    def gather(self, value) -> list:
        """``value`` of every process, by rank (``[value]`` in a world of one); a picklable
        value, sent once (not for tensors of a step)."""
        if self.size == 1:
            return [value]
        import torch.distributed as dist

        values = [None] * self.size
        dist.all_gather_object(values, value)
        return values

    def barrier(self) -> None:
        """Wait until every process gets here (nothing in a world of one)."""
        if self.size > 1:
            import torch.distributed as dist

            dist.barrier()

    def wrap(self, module, device: str, unused: bool = False):
        """``module`` wrapped in ``DistributedDataParallel`` (itself in a world of one).

        Parameters that need no gradient when it is wrapped are left out of the average (wrap
        again after unfreezing); ``unused``: the forward leaves some parameters out (a pooler
        the loss never reads), which costs a search of the graph every step.
        """
        if self.size == 1:
            return module
        from torch.nn.parallel import DistributedDataParallel

        ids = [self.local_rank] if device.startswith("cuda") else None
        return DistributedDataParallel(module, device_ids=ids, find_unused_parameters=unused)

    def describe(self) -> dict:
        """What the record says about the processes."""
        return {"world_size": self.size, "backend": self.backend}


#: accelerate launch's settings, as the variables it sets, that the loop does not follow:
#: (variable, the values that mean "not asked for", accelerate's option)
ACCELERATE_SETTINGS = (
    ("ACCELERATE_MIXED_PRECISION", ("", "no"), "--mixed_precision"),
    ("ACCELERATE_DYNAMO_BACKEND", ("", "no"), "--dynamo_backend"),
    ("ACCELERATE_USE_FSDP", ("", "false"), "--use_fsdp"),
    ("ACCELERATE_USE_DEEPSPEED", ("", "false"), "--use_deepspeed"),
    ("ACCELERATE_USE_MEGATRON_LM", ("", "false"), "--use_megatron_lm"),
)
#: the process counts MPI launchers set (Intel MPI / MPICH, Open MPI, MVAPICH)
MPI_SIZES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")
FIX = ("start the processes with torchrun --nproc_per_node N or accelerate launch --multi_gpu "
       "--num_processes N (torchrun underneath; with {device} cpu they train on the CPU)")


def check_launcher(device: str = "auto", env=None) -> None:
    """Refuse a launch whose settings the training loop would not follow (before any work).

    ``accelerate launch --mixed_precision bf16`` and the other settings in
    :data:`ACCELERATE_SETTINGS` are for accelerate's ``Accelerator``, which this loop does not
    use: training stays fp32 (pretrain has no precision setting of its own), so such a launch
    is refused rather than run otherwise than asked. Several processes asked for but one
    started (accelerate's CPU launcher without MPI sets ``MASTER_ADDR`` but no ``WORLD_SIZE``),
    or processes started by MPI, which sets no ``WORLD_SIZE``, are refused too. So is a
    ``device`` that several processes cannot share: one GPU named (``cuda:N``: each process
    takes ``cuda:LOCAL_RANK``), or ``mps`` (no backend supports it).

    Args:
        device: the device asked for (``auto``, ``cpu``, ``cuda``, ``cuda:N``, ``mps``).
        env: the environment (default ``os.environ``).

    Raises:
        InputError: naming the variable, the launcher's option and the fix; or ``device``.
    """
    env = os.environ if env is None else env
    size = world_size(env)
    d = (device or "auto").lower()
    if size > 1 and d.startswith("cuda:"):
        raise InputError(f"{{device}} {d} names one GPU, but each of the {size} processes "
                         "takes its own (cuda:LOCAL_RANK); pass {device} cuda or auto",
                         params=["device"])
    if size > 1 and d == "mps":
        raise InputError("{device} mps cannot be shared by several processes; run one process "
                         "or use {device} cpu", params=["device"])
    for name, unset, option in ACCELERATE_SETTINGS:
        value = env.get(name, "")
        if value.lower() not in unset:
            raise InputError(
                f"accelerate launch {option} {value.lower()} ({name}={value}) is a setting of "
                "accelerate's Accelerator, which pretrain does not use: it trains in fp32 with "
                f"PyTorch's DistributedDataParallel; launch without {option}")
    if "WORLD_SIZE" in env:
        return
    mpi = [f"{k}={env[k]}" for k in MPI_SIZES if env.get(k, "1") not in ("", "0", "1")]
    if mpi:
        raise InputError(f"started by MPI ({mpi[0]}) without WORLD_SIZE and RANK, so each "
                         f"process would train alone; {FIX}", params=["device"])
    if "ACCELERATE_USE_CPU" in env and env.get("MASTER_ADDR"):
        raise InputError(
            "accelerate launch was asked for several processes (it set MASTER_ADDR) but started "
            "one (no WORLD_SIZE): without a GPU per process its launcher starts several only "
            f"through MPI (--mpirun_hostfile); {FIX}", params=["device"])


def world_size(env=None) -> int:
    """The number of processes the launcher started (``WORLD_SIZE`` in ``env``, default
    ``os.environ``; 1 without a launcher)."""
    try:
        return max(1, int((os.environ if env is None else env).get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def is_main_process() -> bool:
    """True unless a launcher started this process with a rank other than 0."""
    return os.environ.get("RANK", "0") in ("", "0")


def join(device: str) -> tuple[World, str]:
    """Join the process group the launcher prepared; returns the world and this process's
    device (``cuda:LOCAL_RANK`` for a CUDA device).

    Args:
        device: the resolved device of the run (``cpu``, ``cuda``, ``cuda:N``, ``mps``).

    Raises:
        InputError: as :func:`check_launcher` (which callers run before any work); a
            ``LOCAL_RANK`` without a GPU of its own (more processes than GPUs on a machine).
    """
    check_launcher(device)
    size = world_size()
    if size == 1:
        return World(), device
    import torch
    import torch.distributed as dist

    local = int(os.environ.get("LOCAL_RANK", "0"))
    if device.startswith("cuda") and local >= torch.cuda.device_count():
        raise InputError(f"this machine has {torch.cuda.device_count()} GPU(s) and this "
                         f"process is number {local + 1} on it (LOCAL_RANK {local}): start at "
                         "most one process per GPU (torchrun --nproc_per_node, accelerate "
                         "launch --num_processes), or use {device} cpu", params=["device"])
    if device.startswith("cuda"):
        device = f"cuda:{local}"
        torch.cuda.set_device(local)
    started = not dist.is_initialized()
    if started:
        dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
    world = World(rank=dist.get_rank(), size=dist.get_world_size(), local_rank=local,
                  backend=str(dist.get_backend()), started_here=started, device=device)
    return world, device


def leave(world: World) -> None:
    """Close the process group if :func:`join` started it."""
    if world.started_here:
        import torch.distributed as dist

        dist.destroy_process_group()
