"""The benchmark panel: a size sweep against torch on a GPU; in CPU mode the roofline model, the
interpreter's traffic count and the recorded GPU results."""

from __future__ import annotations

from .. import results, roofline, runtime
from . import gpu_sweep
from ._common import CPU_NO_TIME, _dtype_name, _heading, _image, _own_if_withheld, _pre, _spec
from .gpu_sweep import sweep_figure, sweep_table
from .model import default_sizes, metric_for, model_peaks, model_plot, model_rows, model_table
from .traffic_count import count_traffic, traffic_text


def _recorded_text(task_name: str) -> str:
    if results.records(task_name):
        return results.table(task_name)
    return (
        f"No recorded GPU results for {task_name} in {results.results_dir()} yet. On a GPU, "
        f"`python -m course_lib bench {task_name} --record results/<gpu>.json` records them."
    )


def benchmark_panel(task, sizes=None, source: str = "solutions", run: bool = True):
    """A size sweep of a task's solution against torch (GPU), or the model, traffic and records (CPU)."""
    import ipywidgets as w

    spec = _spec(task)
    source = _own_if_withheld(spec, source)  # a released copy: the learner's own kernel
    title = w.HTML(_heading(f"{spec.name}: {spec.title}", runtime.describe_mode()))
    try:
        sizes = [tuple(s) if isinstance(s, (tuple, list)) else (int(s),) for s in (sizes or default_sizes(spec))]
    except ValueError as e:  # a task that is no kernel (a cost-model exercise, say)
        return w.VBox([title, w.HTML(_pre(str(e)))])
    if runtime.is_cpu():
        return w.VBox([title, *_cpu_sections(spec, sizes, source)])

    status = w.HTML()
    progress_out = w.Output()
    figure_box = w.VBox()
    table = w.HTML()
    button = w.Button(description="Run the sweep again" if run else "Run the sweep", icon="play")

    def go(_=None):
        from tqdm.auto import tqdm

        button.disabled = True
        progress_out.clear_output()
        status.value = _pre(f"timing {len(sizes)} sizes: the solution, torch eager and torch.compile ...")
        try:
            with progress_out:
                bar = tqdm(total=len(sizes), desc=f"{spec.name} sweep", unit="size")
                rows = gpu_sweep.sweep(spec, sizes, source, progress=lambda _: bar.update(1))
                bar.close()
            peaks = roofline.gpu_peaks()
            last = rows[-1] if rows else {"bytes": 0, "flops": 0, "dtype": "float32"}
            metric = metric_for(last["bytes"], last["flops"], last["dtype"], peaks)
            gpu = runtime.gpu_info().name
            fig = sweep_figure(rows, peaks, metric, f"{spec.name} {last['dtype']} on {gpu}, measured now")
            figure_box.children = [_image(fig)]
            table.value = _pre(
                f"measured now on {gpu} (timing.bench: median of CUDA-event timings, L2 flushed):\n"
                + sweep_table(rows, metric)
            )
            timed = {tuple(r["shape"]) for r in rows}
            wrong = [shape for shape in sizes if shape not in timed]
            status.value = (
                _pre(
                    f"not timed at {', '.join(map(str, wrong))}: the solution disagrees with the reference there "
                    f"(python -m course_lib check {spec.name} says where)."
                )
                if wrong
                else ""
            )
        except Exception as e:  # a panel reports; it does not crash the notebook
            status.value = _pre(f"the sweep stopped: {type(e).__name__}: {e}")
        finally:
            button.disabled = False

    button.on_click(go)
    recorded = w.HTML(_heading("Recorded GPU results, for comparison") + _pre(_recorded_text(spec.name)))
    if run:
        go()
    return w.VBox([title, button, status, progress_out, figure_box, table, recorded])


def _cpu_sections(spec, sizes, source: str) -> list:
    import ipywidgets as w

    peaks = model_peaks()
    rows = model_rows(spec, sizes, peaks)
    metric = metric_for(rows[-1]["bytes"], rows[-1]["flops"], rows[-1]["dtype"], peaks) if rows else "GB/s"
    recorded = results.records(spec.name)
    fig = model_plot(spec, rows, peaks, recorded, metric)
    model = [
        w.HTML(
            _heading(
                f"(a) Roofline model on {peaks.gpu}: the best {metric} any kernel could reach",
                f"peaks: {peaks.source}. A model from counted bytes and FLOPs, not a measurement.",
            )
        ),
        _image(fig),
        w.HTML(_pre(model_table(rows, peaks))),
    ]
    try:
        rec, case = count_traffic(spec, source=source)
        counted = _pre(traffic_text(rec))
        what = f"{source}/{spec.name}.py on shape {tuple(case.shape)} {_dtype_name(case.dtype)}"
    except Exception as e:  # an unfinished exercise, say: show why and go on
        counted = _pre(f"could not count: {type(e).__name__}: {e}")
        what = f"{source}/{spec.name}.py"
    counted_note = (
        "32-byte sectors touched per warp of 32 lanes against the fewest that hold the data. "
        "Counted, not timed. " + CPU_NO_TIME
    )
    traffic_section = [w.HTML(_heading(f"(b) Memory traffic counted in the interpreter: {what}", counted_note))]
    traffic_section.append(w.HTML(counted))
    recorded_section = [
        w.HTML(_heading("(c) Recorded GPU results", "measured on a GPU by `python -m course_lib bench`")),
        w.HTML(_pre(_recorded_text(spec.name))),
    ]
    return model + traffic_section + recorded_section
