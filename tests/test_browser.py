"""The widgets in a real JupyterLab, driven by headless Chromium through Playwright.

A JupyterLab server (from this Python's environment) serves a temporary copy of a fixture notebook
on a free localhost port, with a token. Chromium opens it, runs all cells from the Run menu, waits
for the Amdahl calculator and the benchmark panel to render, types a new speed-up into a slider's
readout and reads the calculator's answer back from the page.

Needs /usr/bin/chromium (Debian's package; .ci/run installs it) and the playwright package (dev
extras). Set COURSE_BROWSER_SCREENSHOT=/tmp/some.png to keep a screenshot of the final page.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "widgets_demo.ipynb"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SERVER_START_S = 90  # a slow 2-core CI machine
KERNEL_START_MS = 120_000
CELLS_RUN_MS = 120_000

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is missing (apt-get install chromium)"),
    pytest.mark.timeout(300),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_server(url: str, token: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with {server.returncode}:\n{log.read_text()[-3000:]}")
        try:
            request = urllib.request.Request(f"{url}/api/status", headers={"Authorization": f"token {token}"})
            with urllib.request.urlopen(request, timeout=5) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"JupyterLab did not answer within {SERVER_START_S} s:\n{log.read_text()[-3000:]}")


def _wait_for_kernel(url: str, token: str) -> None:
    """Until the server holds a started, idle kernel with the page connected to it."""
    deadline = time.monotonic() + KERNEL_START_MS / 1000
    kernels, last_error = [], None
    while time.monotonic() < deadline:
        request = urllib.request.Request(f"{url}/api/kernels", headers={"Authorization": f"token {token}"})
        try:
            with urllib.request.urlopen(request, timeout=5) as reply:
                kernels = json.load(reply)
        except OSError as e:  # HTTPError 500 included: the server can fail a listing while a kernel starts
            last_error = e
            time.sleep(0.5)
            continue
        if any(k.get("execution_state") == "idle" and k.get("connections", 0) > 0 for k in kernels):
            return
        time.sleep(0.5)
    raise RuntimeError(
        f"no connected idle kernel within {KERNEL_START_MS / 1000:.0f} s: {kernels} (last error: {last_error})"
    )


def _stop(server: subprocess.Popen) -> None:
    """End the server and its kernels: they share the process group the server leads."""
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)
    try:  # kernels that outlived their server
        os.killpg(server.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@contextmanager
def serve(tmp_path: Path):
    """(base url, token) of a JupyterLab serving a copy of the fixture notebook; stopped afterwards."""
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(FIXTURE, root / FIXTURE.name)
    settings = tmp_path / "lab-settings"
    notification = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    notification.parent.mkdir(parents=True)
    notification.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    tracker = settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text(json.dumps({"autoStartDefaultKernel": True}))  # no "Select Kernel" dialog
    env = dict(
        os.environ,
        COURSE_MODE="cpu",
        COURSE_PROGRESS=str(tmp_path / "progress.json"),
        JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "jupyter-runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(settings),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "lab-workspaces"),
        MPLBACKEND="Agg",
    )
    port, token = _free_port(), secrets.token_hex(16)
    log = tmp_path / "jupyterlab.log"
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--ServerApp.terminals_enabled=False",
        "--LabApp.extension_manager=readonly",  # no PyPI look-ups from the extension manager
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")  # CI containers run as root
    with open(log, "w") as out:
        server = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_for_server(url, token, server, log)
        yield url, token
    finally:
        _stop(server)


@pytest.fixture
def lab(tmp_path):
    with serve(tmp_path) as found:
        yield found


def test_amdahl_calculator_in_jupyterlab(lab, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (dev extras)")
    url, token = lab
    screenshot = Path(os.environ.get("COURSE_BROWSER_SCREENSHOT") or tmp_path / "jupyterlab.png")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1600})
        try:
            page.goto(f"{url}/lab/tree/{FIXTURE.name}?token={token}&reset", timeout=KERNEL_START_MS)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=KERNEL_START_MS)
            _wait_for_kernel(url, token)  # the server's word, then the page's
            page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=KERNEL_START_MS)

            page.get_by_role("menuitem", name="Run", exact=True).click()
            page.get_by_role("menuitem", name="Run All Cells", exact=True).click()

            outputs = page.locator(".jp-OutputArea-output")
            answer = outputs.filter(has_text="the request takes 70.0 ms instead of 100.0 ms")
            answer.first.wait_for(timeout=CELLS_RUN_MS)
            slider = page.locator(".jupyter-widgets.widget-slider").filter(has_text="the part's speed-up (x)")
            assert slider.count() == 1

            # move the slider: type into its readout, as a learner can
            readout = slider.locator(".widget-readout")
            readout.click()
            page.keyboard.press("ControlOrMeta+a")
            page.keyboard.type("8")
            page.keyboard.press("Enter")
            outputs.filter(has_text="the request takes 65.0 ms").first.wait_for(timeout=30_000)
            assert "8.0" in readout.inner_text()

            # then with the keyboard on the handle: one step of 0.5 up
            slider.locator(".noUi-handle").focus()
            page.keyboard.press("ArrowRight")
            outputs.filter(has_text="Made 8.5x faster").first.wait_for(timeout=30_000)

            # the benchmark panel rendered its CPU-mode sections, with a plot
            panel = outputs.filter(has_text="(b) Memory traffic counted in the interpreter")
            panel.first.wait_for(timeout=CELLS_RUN_MS)
            text = panel.first.inner_text()
            assert "(a) Roofline model" in text and "(c) Recorded GPU results" in text
            assert "efficiency 100%" in text
            assert panel.first.locator("img").count() >= 1
            assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
            errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.error']")
            assert errors.count() == 0, errors.first.inner_text()
            page.screenshot(path=str(screenshot), full_page=True)
        except Exception:
            page.screenshot(path=str(screenshot), full_page=True)
            print(f"screenshot of the page: {screenshot}")
            raise
        finally:
            browser.close()
