"""Notebook panels: a benchmark sweep, a tuner, a comparison chart, an Amdahl calculator and a
pipeline timeline.

    from course_lib import widgets
    widgets.amdahl_calculator()
    widgets.benchmark_panel("vector_add")

Every panel is an ipywidgets container. What they compute lives in plain functions beside them
(``amdahl``, ``model_rows``, ``count_traffic``, ``sweep``, ``run_config``, ``comparison_rows``...),
so the tests check the numbers without a browser. Text goes into HTML widgets and plots into Image
widgets (PNG), so a panel reads the same in JupyterLab, in a test and in a saved notebook.

GPU mode times with ``course_lib.timing`` only. CPU mode times nothing: interpreter wall time says
nothing about a GPU (it even runs backwards, small blocks looking slow). There the panels show the
roofline model on the reference GPU, the interpreter's memory-traffic count, and the recorded GPU
results from ``results/`` with their provenance.

ipywidgets and matplotlib are imported inside the functions: ``import course_lib`` and the command
line never need them.

One module per panel; every name is used from here, as ``course_lib.widgets.NAME``:

- ``_common``: constants, HTML/text/PNG helpers, ``shown_text`` and ``shown_images``, ``picture`` (a figure a
  notebook shows as a PNG);
- ``amdahls_law``: ``amdahl``, ``amdahl_text``, ``amdahl_calculator``;
- ``model``: the roofline model of a task (``model_peaks``, ``default_sizes``, ``model_rows``...);
- ``traffic_count``: memory traffic counted in the interpreter (``count_traffic``, ``traffic_text``);
- ``gpu_sweep``: ``sweep``, ``sweep_figure``, ``sweep_table``;
- ``panels``: ``benchmark_panel``;
- ``tuning``: ``ConfigRun``, ``run_config``, ``format_run``, ``tuner``;
- ``charts``: ``comparison_rows``, ``comparison_figure``, ``comparison_chart``;
- ``pipeline``: ``timeline_text``, ``timeline_figure``, ``pipeline_timeline`` (over ``course_lib.pipeline_sim``).
- ``gluon_trace``: ``run_traced``, ``trace_text``, ``trace_figure``: a Gluon kernel's run on the CPU
  (``course_lib.gluon_cpu``), who waited on which barrier and for how many steps.

(No module is named after a function it holds: ``course_lib.widgets.sweep`` is the function.)
"""

from __future__ import annotations

# the course modules widgets.py exposed as attributes when it was one file
from .. import results, roofline, runtime, timing, traffic
from ._common import CPU_NO_TIME, VARIANT_ORDER, Picture, picture, shown_images, shown_text
from .amdahls_law import amdahl, amdahl_calculator, amdahl_text
from .charts import comparison_chart, comparison_figure, comparison_rows
from .gluon_trace import run_traced, trace_figure, trace_text
from .gpu_sweep import sweep, sweep_figure, sweep_table
from .model import (
    base_case,
    default_sizes,
    metric_for,
    model_figure,
    model_peaks,
    model_plot,
    model_rows,
    model_table,
)
from .panels import benchmark_panel
from .pipeline import pipeline_timeline, timeline_figure, timeline_text
from .traffic_count import TRAFFIC_ELEMENTS, count_traffic, traffic_shape, traffic_text
from .tuning import DEFAULT_TUNER_PARAMS, ConfigRun, format_run, run_config, tuner

__all__ = [
    "CPU_NO_TIME",
    "DEFAULT_TUNER_PARAMS",
    "TRAFFIC_ELEMENTS",
    "VARIANT_ORDER",
    "ConfigRun",
    "Picture",
    "amdahl",
    "amdahl_calculator",
    "amdahl_text",
    "base_case",
    "benchmark_panel",
    "comparison_chart",
    "comparison_figure",
    "comparison_rows",
    "count_traffic",
    "default_sizes",
    "format_run",
    "metric_for",
    "model_figure",
    "model_peaks",
    "model_plot",
    "model_rows",
    "model_table",
    "picture",
    "pipeline_timeline",
    "results",
    "roofline",
    "run_config",
    "run_traced",
    "runtime",
    "shown_images",
    "shown_text",
    "sweep",
    "sweep_figure",
    "trace_figure",
    "trace_text",
    "sweep_table",
    "timeline_figure",
    "timeline_text",
    "timing",
    "traffic",
    "traffic_shape",
    "traffic_text",
    "tuner",
]
