"""What the Slurm forms share on N nodes (Enroot with Pyxis, Apptainer under srun): the allocation's shape
and the rendezvous at its first node.

- `srun --nodes=N --ntasks-per-node=1`: one task per node, which is torchrun, starting one process per device
  (srun(1): "--nodes", "--ntasks-per-node"; slurm.schedmd.com/srun.html; V).
- The devices of each node: `--gpus-per-node=P` where the vendor's GRES is `gpu` (srun(1): "--gpus-per-node=
  [type:]<number> Specify the number of GPUs required for the job on each node"; V), else `--gres=NAME:P`
  (a GRES count is per node: Slurm gres.html; V). P is the host description's count of the vendor's devices,
  never a fixed one; 1 where it counts none, as the notes say.
- The first node of the allocation hosts the rendezvous: `scontrol show hostnames "$SLURM_JOB_NODELIST" | head
  -n1` (scontrol(1), "show hostnames": one host name per line; V), read by the shell that runs srun inside the
  allocation (sbatch's script, or salloc's shell); `--rdzv-id "$SLURM_JOB_ID"`, the job's own id, so two jobs
  never join each other's rendezvous (torchrun's --rdzv-id: "User-defined group id"; V).
"""

from __future__ import annotations

from accel_images.host.launch import Launch
from accel_images.host.runtimes import ShellWord
from accel_images.host.runtimes.nodes import accelerated, cluster_of, processes_per_node, torchrun

SRUN_DOCS = "https://slurm.schedmd.com/srun.html"
MASTER_LINE = 'export MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)"'


def allocation_flags(launch: Launch) -> list[str]:
    """`--nodes=N --ntasks-per-node=1` and the node's devices, `--gpus-per-node=P` or `--gres=NAME:P`."""
    cluster = cluster_of(launch)
    flags = [f"--nodes={cluster.nodes}", "--ntasks-per-node=1"]
    gres, per_node = launch.devices.slurm_gres, processes_per_node(launch)
    if gres == "gpu":
        flags.append(f"--gpus-per-node={per_node}")
    elif gres:
        flags.append(f"--gres={gres}:{per_node}")
    return flags


def rendezvous(launch: Launch) -> list[str]:
    """torchrun meeting at the allocation's first node, under the job's id: shell references, expanded by the shell
    that runs srun (MASTER_LINE sets the address)."""
    port = cluster_of(launch).port
    return torchrun(launch, ShellWord(f'"$MASTER_ADDR:{port}"'), "--rdzv-id", ShellWord('"$SLURM_JOB_ID"'))


def header(launch: Launch) -> str:
    """The lines before srun: where they run, and the first node's address."""
    nodes = cluster_of(launch).nodes
    return (f"# inside an allocation of {nodes} nodes (an sbatch script, or the shell of salloc --nodes={nodes});"
            " the first node hosts the rendezvous\n" + MASTER_LINE + "\n")


def fabric_note(launch: Launch) -> list[str]:
    """Under srun the fabric is the node's: nothing to pass, and one limit the site sets."""
    if not accelerated(launch):
        return []
    return ["RDMA needs nothing passed here: the job sees the node's /dev/infiniband and network; its memlock limit is"
            " the one Slurm gives it (unlimited is what RDMA wants)"]
