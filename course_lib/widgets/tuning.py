"""The tuner: one run of a kernel per meta-parameter configuration (timed on a GPU, counted in the
interpreter on the CPU), its text, and the sliders-and-Run panel."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .. import roofline, runtime, timing, traffic
from ._common import CPU_NO_TIME, _heading, _pre, _si
from .model import _peaks_label, model_peaks

DEFAULT_TUNER_PARAMS = {
    "BLOCK_SIZE": [128, 256, 512, 1024, 2048, 4096],
    "num_warps": [1, 2, 4, 8],
    "num_stages": [1, 2, 3, 4],
}
_PREFERRED = {"BLOCK_SIZE": 1024, "num_warps": 4, "num_stages": 3}  # the first choice when offered


@dataclass
class ConfigRun:
    """What one Run of the tuner found for one configuration."""

    meta: dict
    error: str = ""
    check: str = ""  # "", "output matches", or what went wrong
    first_call_s: float | None = None  # GPU: compile (or cache load) + one run, synchronized
    second_call_s: float | None = None
    measured: timing.Timing | None = None  # GPU: timing.bench
    gbs: float | None = None
    tflops: float | None = None
    fraction: float | None = None  # of the roofline
    traffic: dict | None = None  # CPU: traffic.Recorder.summary()
    traffic_table: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.meta.items())


def _run_check(check) -> str:
    if check is None:
        return ""
    try:
        ok = check()  # True, or None from an assert-style check such as torch.testing.assert_close
    except Exception as e:
        return f"output is WRONG: {type(e).__name__}: {str(e).strip()[:300]}"
    return "output matches" if ok is None or bool(ok) else "output is WRONG"


def run_config(
    launch: Callable[..., Callable[[], object]],
    meta: dict,
    n_bytes: int | None = None,
    n_flops: int | None = None,
    dtype: str = "float32",
    check: Callable[[], object] | None = None,
    compiled_before: bool = False,
    peaks: roofline.Peaks | None = None,
) -> ConfigRun:
    """Build the launch for ``meta`` and run it: timed on a GPU, once with a traffic count on the CPU."""
    out = ConfigRun(dict(meta))
    try:
        fn = launch(**meta)
        if runtime.is_gpu():
            out.first_call_s, out.second_call_s = timing.compile_and_run_seconds(fn)
            out.check = _run_check(check)
            out.measured = timing.bench(fn)
            if n_bytes or n_flops:
                seconds = out.measured.median_ms * 1e-3
                out.gbs = (n_bytes or 0) / seconds / 1e9
                out.tflops = (n_flops or 0) / seconds / 1e12
                peaks = peaks or roofline.gpu_peaks()
                out.fraction = roofline.fraction_of_roofline(
                    out.measured.median_ms, n_bytes or 0, n_flops or 0, peaks, dtype
                )
            if compiled_before:
                out.notes.append("this configuration ran before in this session, so the first call did not compile")
        else:
            with traffic.record() as rec:
                fn()
            out.check = _run_check(check)
            out.traffic = rec.summary()
            out.traffic_table = rec.table()
    except Exception as e:  # too many registers, too much shared memory, a bad block size...
        out.error = f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}"
    return out


def format_run(run: ConfigRun, n_bytes: int | None = None, peaks: roofline.Peaks | None = None) -> str:
    if run.error:
        return f"{run.label}\nthis configuration failed: {run.error}"
    lines = [run.label]
    if run.measured is not None:
        lines.append(
            f"compile: first call {run.first_call_s:.3f} s (compiles this configuration, or loads it from "
            f"Triton's cache), against {run.second_call_s * 1e3:.2f} ms for a second call"
        )
        rate = ""
        if run.gbs is not None:
            rate = f"  ->  {run.gbs:,.0f} GB/s"
            if run.tflops:
                rate += f", {run.tflops:.2f} TFLOP/s"
            if run.fraction is not None:
                rate += f", {run.fraction:.0%} of the roofline"
        lines.append(f"run:     {run.measured} ({run.measured.method}){rate}")
    else:
        lines.append("ran once in Triton's interpreter: the kernel works with this configuration.")
        lines.append(run.traffic_table)
        lines.append(CPU_NO_TIME)
        lines.append(
            "num_warps and num_stages change nothing in the interpreter; BLOCK_SIZE changes how many "
            "programs run and which addresses each warp touches."
        )
        if n_bytes and peaks is not None:
            fl = roofline.floor(n_bytes, 0, peaks)
            lines.append(
                f"roofline model: on {peaks.gpu} no configuration can beat {fl.ms * 1e3:.3g} us for these "
                f"{_si(n_bytes, 'B')} ({_peaks_label(peaks)}; a launch's few microseconds not counted)."
            )
    if run.check:
        lines.append(f"check: {run.check}")
    lines += run.notes
    return "\n".join(lines)


def _history_line(run: ConfigRun) -> str:
    if run.error:
        return f"  {run.label:<44} failed: {run.error[:60]}"
    if run.measured is not None:
        rate = f"{run.gbs:>9,.0f} GB/s" if run.gbs is not None else ""
        return (
            f"  {run.label:<44} first call {run.first_call_s:6.3f} s  run {run.measured.median_ms * 1e3:9.1f} us{rate}"
        )
    t = run.traffic or {}
    return (
        f"  {run.label:<44} {t.get('sectors', 0):>8} sectors, {t.get('efficiency', 1):.0%} of the bytes fetched used"
        f"{'  ' + run.check if run.check else ''}"
    )


def _default_choice(name: str, options: list):
    if _PREFERRED.get(name) in options:
        return _PREFERRED[name]
    return options[len(options) // 2]


def tuner(
    launch: Callable[..., Callable[[], object]],
    params: dict | None = None,
    n_bytes: int | None = None,
    n_flops: int | None = None,
    dtype: str = "float32",
    check: Callable[[], object] | None = None,
    defaults: dict | None = None,
    title: str = "tuner",
):
    """Sliders for meta-parameters and a Run button that recompiles and runs the kernel.

    ``launch(**meta)`` returns a zero-argument callable that launches the kernel once with those
    meta-parameters, e.g.::

        def launch(BLOCK_SIZE, num_warps, num_stages):
            grid = (triton.cdiv(n, BLOCK_SIZE),)
            return lambda: add_kernel[grid](x, y, out, n, BLOCK_SIZE=BLOCK_SIZE,
                                            num_warps=num_warps, num_stages=num_stages)

        widgets.tuner(launch, n_bytes=3 * n * 4, check=lambda: torch.allclose(out, x + y))

    GPU: the first call's time (compile, or a load from Triton's cache) and the run time
    (``timing.bench``) are shown apart, with GB/s against the roofline when ``n_bytes`` is given.
    CPU: the kernel runs once in the interpreter (does it still work?) with its traffic count.
    ``check()``, if given, runs after the launch: True or None means the output is right.
    """
    import ipywidgets as w

    params = dict(params or DEFAULT_TUNER_PARAMS)
    defaults = defaults or {}
    sliders = {
        name: w.SelectionSlider(
            options=list(options),
            value=defaults.get(name, _default_choice(name, list(options))),
            description=name,
            continuous_update=False,
            style={"description_width": "110px"},
            layout=w.Layout(width="460px"),
        )
        for name, options in params.items()
    }
    button = w.Button(description="Run", icon="play", button_style="primary")
    result = w.HTML()
    history = w.HTML()
    runs: list[ConfigRun] = []
    seen: set[tuple] = set()
    peaks = model_peaks() if runtime.is_cpu() else None

    def go(_=None):
        meta = {name: s.value for name, s in sliders.items()}
        key = tuple(sorted(meta.items()))
        button.disabled = True
        result.value = _pre(f"running {', '.join(f'{k}={v}' for k, v in meta.items())} ...")
        try:
            run = run_config(launch, meta, n_bytes, n_flops, dtype, check, compiled_before=key in seen)
        finally:
            button.disabled = False
        if not run.error:
            seen.add(key)
        runs.append(run)
        result.value = _pre(format_run(run, n_bytes, peaks))
        timed = [r for r in runs if r.measured is not None]
        fastest = min(timed, key=lambda r: r.measured.median_ms) if len(timed) > 1 else None
        lines = [_history_line(r) + ("  <- fastest" if r is fastest else "") for r in runs]
        history.value = _heading("runs so far") + _pre("\n".join(lines))

    button.on_click(go)
    note = (
        "Run recompiles the kernel with these meta-parameters and times it."
        if runtime.is_gpu()
        else "CPU mode: Run checks the kernel in the interpreter and counts its memory traffic; it times nothing."
    )
    box = w.VBox([w.HTML(_heading(title, note)), *sliders.values(), button, result, history])
    box.run = go  # so a notebook or a test can press Run without a mouse
    return box
