"""What grading one task gives: a status, a one-line summary and the report's lines."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

PASS, FAIL, TODO, TIMEOUT, CRASH = "pass", "fail", "todo", "timeout", "crash"
# A task whose cases need hardware this machine lacks (a Hopper GPU for a Gluon kernel): its
# structural checks ran (compiled for sm_90, no GPU needed) and passed; its cases did not run.
NEEDS_GPU = "needs_gpu"
STATUSES = (PASS, FAIL, TODO, TIMEOUT, CRASH, NEEDS_GPU)


@dataclass
class TaskResult:
    task: str
    status: str  # pass, fail, todo, timeout, crash, needs_gpu
    summary: str  # one line
    details: list[str] = field(default_factory=list)
    source: str = ""
    seed: int = 0
    cases_passed: int = 0
    cases_total: int = 0
    seconds: float = 0.0
    output: str = ""  # what the learner's code printed (device_print, print)
    learner: str = ""  # in a room: the learner's folder name
    file_sha256: str = ""  # of the graded file's bytes
    # what failed: "values" (a case's output is wrong), "raised" (the code raised or did not compile),
    # "checks" (every case passed, the task's structural checks did not). In GPU mode the interpreter's
    # run of a passing task fails the GPU result on "values" and "checks" (its CPU-mode cases and its
    # checks that watch the kernel run); "raised" may be what the interpreter lacks (inline PTX).
    failed: str = ""
    # whether the learner's code ran inside the operating-system sandbox (``grader.sandbox``)
    sandboxed: bool = False
    # GPU mode, a passing kernel task: its speed tier ("works", "fast", "expert"; ``grader.tiers``), its
    # time per call on the timed case by the grader's clock, and that time's fraction of the roofline
    tier: str = ""
    speed_us: float | None = None
    roofline_fraction: float | None = None

    @property
    def passed(self) -> bool:
        return self.status == PASS

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TaskResult:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
