"""Facts about this machine: cores, memory, the C++ compilers, the CPU's
Stockfish ARCH name. Probed once at start; blocking (runs child processes).
"""

import hashlib
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

Version = tuple[int, int, int]

# g++ older than this cannot build today's Stockfish (reference 2.1, point 4).
MIN_GCC: Version = (9, 3, 0)
MIN_CLANG: Version = (11, 0, 0)
PROBE_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class Machine:
    cpus: int
    memory_mib: int
    machine_id: str  # stable per machine; feeds the hardware-derived uuid prefix


@dataclass(frozen=True, slots=True)
class Compiler:
    name: str  # "g++" or "clang++", as worker_info names it
    version: Version

    @property
    def comp(self) -> str:
        """The COMP value of Stockfish's Makefile."""
        return "clang" if self.name == "clang++" else "gcc"


def this_machine() -> Machine:
    return Machine(cpu_count(), memory_mib(), machine_id())


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def memory_mib() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    except (ValueError, OSError, AttributeError):
        return 4096  # unknown: a modest machine


def machine_id() -> str:
    for candidate in (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id")):
        try:
            text = candidate.read_text().strip()
        except OSError:
            continue
        if text:
            return text
    return platform.node()


def uname() -> str:
    return f"{platform.system()} {platform.release()}"


def hardware_prefix(seed: int, machine: str, data_dir: Path) -> str:
    """8 hex digits from a stored random seed, the machine id and the worker's
    directory: stable across restarts, different for two workers on one box."""
    value = seed
    for text in (machine, str(data_dir.resolve())):
        value ^= int.from_bytes(hashlib.md5(text.encode()).digest()[:4], "big")  # noqa: S324 - an id
    return f"{value & 0xFFFFFFFF:08x}"


# ---------------------------------------------------------------- compilers


def find_compiler(preferred: str = "") -> Compiler | None:
    """The compiler to build with: `preferred` if given, else g++, else clang++.

    None when none is usable; a worker can still play engines whose build
    needs no compiler (a repo's own build file), so that is not fatal here.
    """
    names = [preferred] if preferred else ["g++", "clang++"]
    for name in names:
        version = compiler_version(name)
        minimum = MIN_CLANG if name == "clang++" else MIN_GCC
        if version is not None and version >= minimum:
            return Compiler(name, version)
    return None


def compiler_version(name: str) -> Version | None:
    path = shutil.which(name)
    if path is None:
        return None
    try:
        done = subprocess.run(  # noqa: S603 - a compiler found on PATH, fixed arguments
            [path, "--version"], capture_output=True, text=True, timeout=PROBE_SECONDS, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = done.stdout.splitlines()[0] if done.stdout else ""
    if name == "g++" and "clang" in done.stdout.lower():
        return None  # macOS's g++ is clang in disguise; the build flags differ
    return parse_version(first)


def parse_version(text: str) -> Version | None:
    """The last x.y[.z] on a `--version` line (after any vendor text in brackets)."""
    found = re.findall(r"(?<![\w.])(\d+)\.(\d+)(?:\.(\d+))?", re.sub(r"\(.*?\)", "", text))
    if not found:
        return None
    major, minor, patch = found[-1]
    return int(major), int(minor), int(patch or 0)


# ---------------------------------------------------------------- CPU features


def worker_arch() -> str:
    """The Stockfish ARCH this CPU runs best, from its feature flags; "unknown"
    when we cannot tell (the server then only gives runs without arch filter)."""
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        return x86_arch(cpu_flags())
    if machine in ("aarch64", "arm64"):
        flags = cpu_flags()
        if platform.system() == "Darwin":
            return "apple-silicon"
        return "armv8-dotprod" if "asimddp" in flags else "armv8"
    if machine == "riscv64":
        return "riscv64"
    if machine.startswith("ppc64"):
        return "ppc-64"
    return "unknown"


def cpu_flags() -> frozenset[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def x86_arch(flags: frozenset[str]) -> str:
    """The most capable x86-64 ARCH whose instructions are all present."""
    ladder = (
        ("x86-64-avx512icl", {"avx512f", "avx512bw", "avx512_vnni", "avx512vbmi", "avx512ifma"}),
        ("x86-64-vnni512", {"avx512f", "avx512bw", "avx512_vnni"}),
        ("x86-64-avx512", {"avx512f", "avx512bw"}),
        ("x86-64-avxvnni", {"avx_vnni", "avx2", "bmi2"}),
        ("x86-64-bmi2", {"avx2", "bmi2"}),
        ("x86-64-avx2", {"avx2"}),
        ("x86-64-sse41-popcnt", {"sse4_1", "popcnt"}),
        ("x86-64-ssse3", {"ssse3"}),
        ("x86-64-sse3-popcnt", {"pni", "popcnt"}),
    )
    for name, needed in ladder:
        if needed <= flags:
            return name
    return "x86-64"
