"""The operating-system boundary around a worker that runs someone else's code: bubblewrap.

The worker process runs the learner's file, so it may run anything. Inside this boundary it sees:

* the Python environment and the installed packages (torch, triton, numpy), and course_lib's own
  folder, all read-only; nothing else of the course's folder (no solutions/, no exercises/);
* its own copy of the task file, read-only, in a folder of its own;
* its cases' shared-memory files, by descriptor only (they have no name anywhere);
* a private, size-limited /tmp (its HOME and Triton cache) and /dev/shm, everything else read-only; a
  fresh /proc of a PID namespace of its own (no other process), the host's settings in it read-only; no
  network; a minimal /dev, and in GPU mode the GPU's device nodes;
* an environment made here (nothing of the grader's: no COURSE_HIDDEN_CASES, no paths).

Everything else of the machine (the room, other learners, the grader's caches, the hidden-cases
file, the gradebook) does not exist there. bubblewrap (``bwrap``, Debian and Ubuntu package
``bubblewrap``) needs no daemon and no root where the kernel allows unprivileged user namespaces;
run as root, every capability is dropped inside.

Why bubblewrap: it is small, has no daemon, ships in every Linux distribution, and is what Flatpak
uses for the same job. A container engine needs a daemon and root; firejail is setuid-root and
larger; seccomp alone hides no files. On macOS and in containers without user namespaces there is
no such tool: ``available()`` says why, and the grader says what that means (``isolation``).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent  # course_lib's own folder, bound read-only
TMP_BYTES = 1 << 30  # the worker's /tmp (Triton's cache, HOME): RAM-backed, so capped
SHM_BYTES = 64 << 20  # the worker's /dev/shm, RAM-backed too; the rest of its / and /dev is read-only
# procfs entries that write the host's kernel settings (sysctls, the magic SysRq key, IRQ affinities,
# PCI configuration): read-only in the sandbox, which bwrap does not always see to itself
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs", "acpi", "mtrr")
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: sudo apt install bubblewrap; Fedora: sudo dnf install bubblewrap) "
    "on a Linux machine that allows unprivileged user namespaces (or run the grader as root)"
)


@dataclass(frozen=True)
class Availability:
    ok: bool
    tool: str  # "bubblewrap 0.8.0", or "" when there is none
    reason: str  # why not, when not ok

    def describe(self) -> str:
        if self.ok:
            return f"sandboxed: each learner's code runs in {self.tool} (own files only, no network, no peers)"
        return f"not sandboxed: {self.reason}"


def _bwrap() -> str | None:
    return os.environ.get("COURSE_BWRAP") or shutil.which("bwrap")


@functools.cache
def _options(bwrap: str) -> frozenset[str]:
    """The options this bwrap knows (older releases lack --size, --disable-userns)."""
    try:
        text = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(word for word in text.split() if word.startswith("--"))


def known_unavailable() -> str | None:
    """Why no sandbox can be made here, where that is known without a trial sandbox (whose torch import
    costs a second or two): not Linux, no bwrap, or a trial already made that failed. None otherwise."""
    if available.cache_info().currsize:
        found = available()
        return None if found.ok else found.reason
    if not sys.platform.startswith("linux"):
        return f"no sandbox on {sys.platform}: the grader's sandbox is Linux's bubblewrap"
    if not _bwrap():
        return f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}"
    return None


@functools.cache
def available() -> Availability:
    """Whether a sandbox can be made here: bwrap exists, and a trial sandbox with the worker's view
    imports the worker's code (course_lib, torch, triton) as a worker would."""
    if not sys.platform.startswith("linux"):
        return Availability(False, "", f"no sandbox on {sys.platform}: the grader's sandbox is Linux's bubblewrap")
    bwrap = _bwrap()
    if not bwrap:
        return Availability(False, "", f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}")
    from .. import runtime

    with tempfile.TemporaryDirectory(prefix="course-sandbox-trial-") as empty:
        view = View(task_dir=Path(empty), hidden=[runtime.course_root()], allowed=[Path(sys.prefix)])
        code = f"import sys; sys.path[:] = {worker_sys_path()!r}; import course_lib.grader.worker"
        try:
            version = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
            trial = subprocess.run(
                command(view, [sys.executable, "-I", "-c", code]), capture_output=True, text=True, timeout=120
            )
        except (OSError, subprocess.SubprocessError) as e:
            return Availability(False, "", f"bubblewrap did not run ({e}): {INSTALL_HINT}")
    if trial.returncode != 0:
        said = (trial.stderr or trial.stdout).strip().splitlines()
        why = said[-1] if said else f"exit code {trial.returncode}"
        if "bwrap" in why or "namespace" in why or "Operation not permitted" in why:
            why += "; this usually means user namespaces are disabled (kernel.unprivileged_userns_clone=0, or a " \
                   "container that forbids them)"  # fmt: skip
        return Availability(False, "", f"bubblewrap is installed but a trial sandbox failed ({why})")
    return Availability(True, version or "bubblewrap", "")


def _base_args(bwrap: str) -> list[str]:
    known = _options(bwrap)
    args = ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if "--disable-userns" in known:
        args += ["--unshare-user", "--disable-userns"]  # no namespaces of its own inside
    return args


# What of /etc a worker's Python, torch, Triton (its C compiler, ldconfig) and CUDA read. Not the rest:
# a grader run as root would otherwise let a submission read /etc/shadow and the like.
ETC_ENTRIES = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "passwd", "group", "nsswitch.conf",
    "localtime", "os-release", "hosts", "protocols", "services", "mime.types",
)  # fmt: skip
ETC_PATTERNS = ("python3*", "nvidia*", "OpenCL", "vulkan", "glvnd")


def _etc_binds() -> list[str]:
    args = []
    found = [Path("/etc") / name for name in ETC_ENTRIES]
    for pattern in ETC_PATTERNS:
        found += sorted(Path("/etc").glob(pattern))
    for path in found:
        if path.exists():
            args += ["--ro-bind", str(path), str(path)]
    return args


def _system_binds(tmp_bytes: int | None = None) -> list[str]:
    """/usr, the parts of /etc a worker reads, and the top-level links or folders of a merged-/usr
    system; /proc, /dev, a /tmp of its own (of ``tmp_bytes`` where bwrap can size it)."""
    args = ["--ro-bind", "/usr", "/usr"] if os.path.isdir("/usr") else []
    args += _etc_binds()
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    args += ["--proc", "/proc"]
    for entry in PROC_READ_ONLY:  # the host's settings: root in the sandbox could change them otherwise
        args += ["--ro-bind-try", f"/proc/{entry}", f"/proc/{entry}"]
    args += ["--dev", "/dev", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm"]
    if tmp_bytes:
        args += ["--size", str(tmp_bytes)]
    args += ["--tmpfs", "/tmp"]
    return args


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


@dataclass
class View:
    """What one sandboxed worker may see, besides the system and the Python environment."""

    task_dir: Path  # the task file's private copy (read-only inside)
    gpu: bool = False  # bind the GPU's device nodes
    env: dict = field(default_factory=dict)  # the worker's whole environment (besides HOME, TMPDIR, PATH)
    # folders and files that must not be visible even where they lie inside a folder that is bound
    # (the course's folder, the room, the caches, the hidden-cases file)
    hidden: list[Path] = field(default_factory=list)
    # folders to bind even inside a hidden one (course_lib's package folder, the virtual environment)
    allowed: list[Path] = field(default_factory=list)


def python_folders() -> list[Path]:
    """The folders the worker's Python needs, read-only: its prefixes (the standard library, the
    virtual environment), the site-packages folders, the folders torch, triton and numpy live in, and
    course_lib's own. Never a folder that is on sys.path only because the grader was started there
    (the current folder, a script's folder: a home, a room, /tmp)."""
    import site

    found = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix), Path(sys.base_exec_prefix)]
    found.append(Path(os.path.realpath(sys.executable)).parent)
    found += [Path(p) for p in site.getsitepackages() if os.path.isdir(p)]
    user_site = site.getusersitepackages()
    if isinstance(user_site, str) and os.path.isdir(user_site):
        found.append(Path(user_site))
    found += _package_folders()
    for var in ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "TRITON_LIBCUDA_PATH"):
        found += [Path(p) for p in os.environ.get(var, "").split(os.pathsep) if p and os.path.isdir(p)]
    never = {Path(p).resolve() for p in ("/", "/tmp", "/var/tmp", "/dev/shm", tempfile.gettempdir(), Path.home())}
    resolved = []
    for path in found:
        real = Path(os.path.realpath(path))
        if real not in resolved and real not in never:
            resolved.append(real)
    return resolved


def _package_folders() -> list[Path]:
    """The folders torch, triton, numpy and course_lib are imported from: bound even where they lie
    inside a hidden folder (a Triton installed into the course's folder, course_lib itself)."""
    import numpy
    import torch
    import triton

    return [Path(m.__file__).resolve().parent.parent for m in (torch, triton, numpy)] + [PACKAGE]


def worker_sys_path() -> list[str]:
    """The worker's sys.path: the grader's, less what the sandbox does not bind (the folder the grader
    was started in, /tmp) and less the course's own folder but for course_lib's parent."""
    folders = python_folders()
    package_parent = PACKAGE.parent  # import course_lib from there
    keep = []
    for entry in sys.path:
        if not entry or not os.path.isabs(entry):
            continue
        real = Path(os.path.realpath(entry))
        if real == package_parent or any(_inside(real, f) for f in folders):
            keep.append(entry)
    return keep


def _outermost(paths: list[Path]) -> list[Path]:
    paths = sorted(set(paths), key=lambda p: len(p.parts))
    return [p for p in paths if not any(q != p and _inside(p, q) for q in paths)]


def _binds(view: View) -> list[str]:
    """The Python folders, read-only; then whatever hidden path lies inside one of them covered (an
    empty folder, or /dev/null for a file); then, inside a covered one, the folders the worker needs
    after all (course_lib's own, the virtual environment): the course's folder shows only those."""
    hidden = [Path(os.path.realpath(p)) for p in view.hidden]
    needed = [Path(os.path.realpath(p)) for p in [*view.allowed, *_package_folders()]]
    system = [Path("/usr")]
    folders = []
    for path in python_folders():
        if any(_inside(path, s) for s in system):
            continue
        if any(_inside(path, h) for h in hidden) and not any(_inside(path, a) for a in needed):
            continue  # e.g. the course's own folder on sys.path: only course_lib is bound, below
        folders.append(path)
    bound = _outermost([p for p in folders if not any(_inside(p, h) for h in hidden)])
    args = []
    for path in bound:
        args += ["--ro-bind", str(path), str(path)]
    covered = []
    for h in _outermost(hidden):
        if not any(_inside(h, b) for b in [*system, *bound]):
            continue  # not in the sandbox at all
        if h.is_dir():
            args += ["--tmpfs", str(h)]
            covered.append(h)
        elif h.exists():
            args += ["--ro-bind", "/dev/null", str(h)]
    for path in _outermost([p for p in folders if any(_inside(p, h) for h in hidden)]):
        args += ["--ro-bind", str(path), str(path)]  # over the cover, or into a folder not bound
    return args


def _gpu_binds() -> list[str]:
    args = []
    for entry in sorted(Path("/dev").glob("nvidia*")):
        args += ["--dev-bind", str(entry), str(entry)]
    if os.path.isdir("/dev/dri"):
        args += ["--dev-bind", "/dev/dri", "/dev/dri"]
    return args


def command(view: View, argv: list[str]) -> list[str]:
    """The bwrap command line that runs ``argv`` inside ``view``."""
    bwrap = _bwrap()
    if not bwrap:
        raise RuntimeError(f"bubblewrap is not installed: {INSTALL_HINT}")
    sized = TMP_BYTES if "--size" in _options(bwrap) else None
    args = [bwrap, *_base_args(bwrap), *_system_binds(sized)]
    if os.path.isdir("/sys"):
        args += ["--ro-bind", "/sys", "/sys"]  # CPU counts, NUMA nodes, the GPU's PCI facts
    args += _binds(view)
    args += ["--ro-bind", str(view.task_dir), str(view.task_dir)]
    if view.gpu:
        args += _gpu_binds()
    args += ["--remount-ro", "/dev", "--remount-ro", "/"]  # the mounts made, nothing more can be written there
    env = {
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "TRITON_CACHE_DIR": "/tmp/triton-cache",
        "TRITON_HOME": "/tmp",
        "PYTHONDONTWRITEBYTECODE": "1",
        **view.env,
    }
    args += ["--clearenv"]
    for key, value in sorted(env.items()):
        args += ["--setenv", key, str(value)]
    args += ["--chdir", "/tmp", "--", *argv]
    return args


def start(view: View, argv: list[str], pass_fds: tuple = (), **popen_kwargs) -> subprocess.Popen:
    """Start ``argv`` in the sandbox. bwrap's options (paths, the worker's environment) go to it
    through a pipe (``--args``), not its command line, and bwrap itself starts with an empty
    environment: the sandbox's first process is visible inside it (/proc/1), and it shows nothing of
    the grader's paths or environment."""
    bwrap, *args = command(view, argv)
    options = args[: args.index("--")]  # the command itself stays on the command line, as bwrap wants
    if "--args" not in _options(bwrap):  # bwrap before 0.3: on the command line after all
        return subprocess.Popen([bwrap, *args], pass_fds=pass_fds, env={}, **popen_kwargs)
    read_end, write_end = os.pipe()
    try:
        payload = b"".join(a.encode() + b"\0" for a in options)
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(payload)  # a few KB: the pipe holds it before bwrap reads
        return subprocess.Popen(
            [bwrap, "--args", str(read_end), "--", *argv], pass_fds=(*pass_fds, read_end), env={}, **popen_kwargs
        )
    finally:
        os.close(read_end)


# the variables of the grader's environment a worker gets, by name or prefix: how Triton, CUDA and
# torch behave, never where the grader keeps anything
PASSED_VARIABLES = ("COURSE_MODE", "COURSE_PERF", "TRITON_INTERPRET", "TRITON_DEFAULT_FP_FUSION")
PASSED_PREFIXES = ("CUDA_", "NVIDIA_", "NCCL_", "OMP_", "MKL_", "LD_LIBRARY_PATH", "TORCH_", "PYTORCH_")
_NEVER = ("CACHE", "DIR", "PATH_", "HOME", "DUMP", "OVERRIDE")


def worker_environment(extra: dict) -> dict:
    """The environment a sandboxed worker starts with: the grader's settings that change how kernels
    run, never a path of the grader's (caches, dumps, the hidden cases)."""
    env = {}
    for key, value in os.environ.items():
        if key.startswith("COURSE_HIDDEN"):
            continue
        if key in PASSED_VARIABLES or key.startswith(PASSED_PREFIXES):
            if key != "LD_LIBRARY_PATH" and any(word in key for word in _NEVER):
                continue
            env[key] = value
    env.update({k: v for k, v in extra.items() if v is not None})
    return env
