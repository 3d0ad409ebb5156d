"""A one-node SLURM on this machine for scripts/slurm_check.py: Debian's slurm-wlm and munge (installed as root if
missing), a ``slurm.conf`` with node ``localhost`` on 127.0.0.1 and its state, spool and logs under one folder, and
munged, slurmctld and slurmd started and stopped around a check."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path


class SetupError(RuntimeError):
    """SLURM cannot be set up on this machine (the check is skipped, not failed)."""


def say(text: str) -> None:
    print(f"[slurm-check {time.strftime('%H:%M:%S')}] {text}", flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def install_slurm() -> None:
    """Debian's slurm-wlm and munge, if slurmctld / munged are not on PATH (needs root and apt)."""
    if all(shutil.which(tool) for tool in ("slurmctld", "slurmd", "munged", "sbatch")):
        return
    if os.geteuid() != 0:
        raise SetupError("slurm-wlm and munge are not installed, and installing them needs root")
    if not shutil.which("apt-get"):
        raise SetupError("slurm-wlm and munge are not installed, and there is no apt-get to install them")
    say("installing slurm-wlm and munge from Debian's packages")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"],
                    ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "slurm-wlm", "munge"]):
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SetupError(f"{' '.join(command)} failed: {(done.stderr or done.stdout).strip()[-500:]}")


SLURM_CONF = """\
# A one-node SLURM for scripts/slurm_check.py: everything on localhost, under {root}
ClusterName=typhoon-check
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={root}/munge/munge.socket
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
KillWait=5
MinJobAge=30
InactiveLimit=0
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN
PartitionName=check Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""


class OneNodeSlurm:
    """munged, slurmctld and slurmd on localhost, configured under ``root``; ``env`` points the SLURM
    commands (sbatch, squeue, scancel: dask-jobqueue's too) at it."""

    def __init__(self, root: Path, cpus: int = 2, memory_mb: int = 4000):
        self.root, self.daemons = root, []
        for sub in ("munge", "state", "spool", "log", "jobs"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        self.conf = root / "slurm.conf"
        self.conf.write_text(SLURM_CONF.format(root=root, ctld_port=free_port(), slurmd_port=free_port(), cpus=cpus,
                                               memory_mb=memory_mb))
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}

    def start(self) -> None:
        if os.geteuid() != 0:
            raise SetupError("starting munged, slurmctld and slurmd as configured here needs root")
        munge = self.root / "munge"
        os.chmod(munge, 0o700)
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        self._daemon(["munged", "--foreground", "--force", f"--key-file={key}", f"--socket={munge}/munge.socket",
                      f"--pid-file={munge}/munged.pid", f"--log-file={self.root}/log/munged.log",
                      f"--seed-file={munge}/munge.seed"], "munged")
        self._wait(lambda: (munge / "munge.socket").exists(), "munged", 20)
        self._daemon(["slurmctld", "-D", "-i", "-f", str(self.conf)], "slurmctld")
        self._wait(lambda: self._run(["scontrol", "ping"]).stdout.count("UP") > 0, "slurmctld", 40)
        self._daemon(["slurmd", "-D", "-f", str(self.conf), "-N", "localhost"], "slurmd")
        self._wait(lambda: self._run(["sinfo", "-h", "-o", "%T"]).stdout.strip() in ("idle", "mixed"), "slurmd", 60)
        say("SLURM up: " + self._run(["sinfo", "-h", "-o", "%P %D %T %c CPUs"]).stdout.strip())

    def _daemon(self, command: list[str], name: str) -> None:
        log = open(self.root / "log" / f"{name}.stdout", "w")  # noqa: SIM115 - open while the daemon runs
        try:
            self.daemons.append((name, subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT)))
        except OSError as err:
            raise SetupError(f"{name} could not start: {err}") from err

    def _run(self, command: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=30)

    def _wait(self, ready, name: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            process = dict(self.daemons).get(name)
            if process is not None and process.poll() is not None:
                break
            try:
                if ready():
                    return
            except (OSError, subprocess.SubprocessError):
                pass
            time.sleep(0.5)
        raise SetupError(f"{name} did not start within {timeout_s:.0f} s; its log:\n{self.log_tail(name)}")

    def log_tail(self, name: str, lines: int = 15) -> str:
        text = ""
        for path in (self.root / "log" / f"{name}.log", self.root / "log" / f"{name}.stdout"):
            if path.is_file():
                text += "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) + "\n"
        return text

    def jobs(self, state: str = "RUNNING") -> list[str]:
        out = self._run(["squeue", "-h", "-t", state, "-n", "typhoon-cell", "-o", "%i"]).stdout
        return out.split()

    def stop(self) -> None:
        if shutil.which("scancel"):
            subprocess.run(["scancel", "-n", "typhoon-cell"], env=self.env, capture_output=True)
        for _, process in reversed(self.daemons):
            process.terminate()
        for _, process in reversed(self.daemons):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
