"""The explorers in JupyterLab, in a real (headless) browser.

This test starts JupyterLab on a free local port (with a token) over a scratch copy of
``notebooks/``, ``results/`` and ``figures/`` (as ``make test``'s nbval step does, so the working
tree is left as it was), opens notebooks 04 and 05 in headless Chromium driven by the
``playwright`` Python package, runs all their cells from the Run menu, waits for the kernel to
finish, then

* 04: drags the masking explorer's slider from the opening m = 15 to m = 25 (a stored mask size),
* 05: chooses "parameters" in the Pareto explorer's cost dropdown,

and checks that the explorer's plot images, its text, and the static image shown under the
widget change, that the static image is the file the explorer wrote into the scratch ``figures/``,
and that no "Error displaying widget" appears anywhere on the page.

Chromium is the system browser (Debian package ``chromium``, ``/usr/bin/chromium``; the
environment variable ``GPED_CHROMIUM`` names another binary); playwright's own browser download is
never used. The test skips, saying why, when playwright, chromium or JupyterLab is missing. The
kernel is a temporary "Python (gped-kit)" kernel spec that runs this interpreter (``sys.executable``)
with ``GPED_PROGRESS=lines`` and without ``MPLBACKEND`` (inline figures). On failure, screenshots,
the page HTML and the JupyterLab log are saved to ``<the test's tmp_path>/browser-artifacts`` and
the path is printed (``GPED_BROWSER_ARTIFACTS=<folder>`` saves them from a passing run too). Run it
alone with ``.venv/bin/python -m pytest tests/test_browser.py``.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from importlib.util import find_spec
from pathlib import Path

import pytest

from gped_kit.plotting.save import same_image

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ("04_figure3_masking.ipynb", "05_experiment3_search.ipynb")
KERNEL_NAME = "gped-kit"  # the notebooks' kernel spec (registered by `make venv`); replaced here by a temporary one
SERVER_START_S = 120
RUN_ALL_S = 600  # one notebook's "Run All Cells" (05 may recompute its searches: ~1 min on 2 slow cores)
UI_S = 90  # any single UI state change (a widget redraw goes through the kernel)
ERROR_TEXT = "Error displaying widget"

pytestmark = pytest.mark.slow


def chromium_path() -> str | None:
    for candidate in (os.environ.get("GPED_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                      shutil.which("chromium-browser")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ----------------------------------------------------------------------------- JupyterLab
@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server over a scratch copy of notebooks/, results/ and figures/: yields a dict
    with its url, token, scratch root and log path; stopped (and its kernels) afterwards."""
    if find_spec("playwright") is None:
        pytest.skip("the playwright package is not installed (pip install playwright; `make venv` installs it)")
    if chromium_path() is None:
        pytest.skip("no Chromium binary: install the Debian package `chromium` (`make venv` does so as root) "
                    "or set GPED_CHROMIUM")
    if find_spec("jupyterlab") is None or find_spec("ipykernel") is None:
        pytest.skip("jupyterlab or ipykernel is not installed")
    base = tmp_path_factory.mktemp("browser")
    scratch = base / "tree"
    scratch.mkdir()
    for name in ("notebooks", "results", "figures"):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, scratch / name, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        else:
            (scratch / name).mkdir()
    # Kernel spec "gped-kit" running this very interpreter; JUPYTER_PATH comes first in the search path.
    jupyter_path = base / "jupyter"
    spec_dir = jupyter_path / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python (gped-kit)", "language": "python",
        "env": {"GPED_PROGRESS": "lines"},
    }))
    # User settings: no news / update pop-ups over the notebook.
    settings = base / "lab-settings"
    (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    env = {k: v for k, v in os.environ.items() if k not in ("MPLBACKEND", "JUPYTER_PATH")}
    env.update(JUPYTER_PATH=str(jupyter_path), JUPYTER_CONFIG_DIR=str(base / "config"),
               JUPYTERLAB_SETTINGS_DIR=str(settings), JUPYTERLAB_WORKSPACES_DIR=str(base / "workspaces"),
               JUPYTER_RUNTIME_DIR=str(base / "runtime"), GPED_PROGRESS="lines", PYTHONUNBUFFERED="1")
    port, token = free_port(), secrets.token_hex(16)
    log_path = base / "jupyterlab.log"
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
               "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={scratch}",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    with open(log_path, "w") as log:
        proc = subprocess.Popen(command, cwd=scratch, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"JupyterLab exited with status {proc.returncode}; log:\n{log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                log_tail = log_path.read_text()[-3000:]
                pytest.fail(f"JupyterLab did not answer within {SERVER_START_S} s; log:\n{log_tail}")
            time.sleep(0.5)
        yield {"url": url, "token": token, "root": scratch, "log": log_path}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        shutil.rmtree(scratch, ignore_errors=True)  # the copy of results/ is large; the log is kept


@pytest.fixture(scope="module")
def browser(lab):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=chromium_path(), headless=True,
                                      args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"])
        try:
            yield chromium
        finally:
            chromium.close()


def save_artifacts(pages: dict, folder: Path, lab: dict) -> Path:
    """Screenshots and HTML of ``pages`` and the JupyterLab log, into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, page in pages.items():
        try:
            page.screenshot(path=str(folder / f"{name}.png"), full_page=True)
            (folder / f"{name}.html").write_text(page.content())
        except Exception as exc:  # the page may be gone; keep what can be kept
            (folder / f"{name}.error.txt").write_text(repr(exc))
    shutil.copy(lab["log"], folder / "jupyterlab.log")
    return folder


# ----------------------------------------------------------------------------- page helpers
# the visible notebook panel (JupyterLab keeps hidden tabs in the DOM)
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"

RUN_STATE_JS = """(panel) => {
  const root = document.querySelector(panel);
  if (!root) return null;
  const indicator = root.querySelector('.jp-Notebook-ExecutionIndicator');
  const prompts = [...root.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].map(e => e.textContent.trim());
  return {status: indicator ? indicator.dataset.status : null, prompts};
}"""


def open_notebook(page, lab: dict, name: str) -> None:
    page.goto(f"{lab['url']}/lab/tree/notebooks/{name}?token={lab['token']}", timeout=UI_S * 1000)
    page.wait_for_selector(f"{PANEL} .jp-Notebook .jp-CodeCell", timeout=UI_S * 1000)
    # the notebook's kernel ("Python (gped-kit)") connected and idle
    page.wait_for_selector(f"{PANEL} .jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=UI_S * 1000)
    page.locator(f"{PANEL} .jp-Toolbar").get_by_text("Python (gped-kit)").wait_for(timeout=UI_S * 1000)


def menu(page, menu_name: str, command: str) -> None:
    page.locator(".lm-MenuBar-item", has_text=menu_name).first.click()
    page.locator(f".lm-Menu-item[data-command='{command}']").click()


def run_all(page, name: str) -> float:
    """Clear every output, run all cells from the Run menu and wait until every code cell has run
    and the kernel is idle; returns the seconds taken. Fails with the notebook's error output if a
    cell raised."""
    menu(page, "Edit", "editmenu:clear-all")
    page.wait_for_function(f"(js) => {{ const s = ({RUN_STATE_JS})(js); "
                           "return s && s.prompts.every(p => !/\\d/.test(p)); }", arg=PANEL, timeout=UI_S * 1000)
    start = time.monotonic()
    menu(page, "Run", "runmenu:run-all")
    state = None
    deadline = start + RUN_ALL_S
    while time.monotonic() < deadline:
        state = page.evaluate(RUN_STATE_JS, PANEL)
        running = any("*" in p for p in state["prompts"])
        if state["status"] == "idle" and not running and any(re.search(r"\d", p) for p in state["prompts"]):
            break
        page.wait_for_timeout(500)  # polling the DOM state above, not a fixed wait
    else:
        pytest.fail(f"{name}: cells still running after {RUN_ALL_S} s: {state}")
    errors = page.locator(f"{PANEL} .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']",
                          has_text="Traceback")
    if errors.count():
        pytest.fail(f"{name}: a cell raised:\n{errors.first.inner_text()[-3000:]}")
    assert all(re.fullmatch(r"\[\d+\]:", p) for p in state["prompts"]), f"{name}: not every cell ran: {state}"
    return time.monotonic() - start


def explorer_cell(page, marker: str):
    cell = page.locator(f"{PANEL} .jp-CodeCell", has_text=marker)
    assert cell.count() == 1, f"expected one cell containing {marker!r}, found {cell.count()}"
    cell.scroll_into_view_if_needed()
    cell.locator(".widget-vbox").first.wait_for(state="visible", timeout=UI_S * 1000)
    return cell


def static_image(cell):
    """The plain image/png output under the widget (not inside it)."""
    return cell.locator(".jp-Cell-outputArea > .jp-OutputArea-child"
                        " > .jp-RenderedImage[data-mime-type='image/png'] img")


def widget_images(cell):
    return cell.locator(".widget-vbox .widget-output img")


def png_of(img) -> bytes:
    src = img.get_attribute("src")
    assert src and src.startswith("data:image/png;base64,"), f"not an inline PNG: {str(src)[:80]}"
    return base64.b64decode(src.split(",", 1)[1])


def save_view_and_check(cell, figure: Path) -> None:
    """Exploring wrote nothing: the figure file still holds the opening view; the widget's *save this view*
    button then writes the view shown."""
    opening = figure.read_bytes()
    assert opening != png_of(static_image(cell)), "exploring rewrote the figure file: only saving a view may"
    cell.get_by_role("button", name="save this view").click()
    deadline = time.monotonic() + UI_S
    while figure.read_bytes() == opening and time.monotonic() < deadline:
        time.sleep(0.2)
    assert figure.read_bytes() == png_of(static_image(cell)), "the saved file is not the view shown"


def assert_no_widget_errors(page) -> None:
    from playwright.sync_api import expect

    expect(page.get_by_text(ERROR_TEXT)).to_have_count(0)
    assert ERROR_TEXT not in page.content()


# ----------------------------------------------------------------------------- the test
def open_and_run(context, lab: dict, name: str, marker: str, artifacts: dict, timings: dict):
    """Open notebook ``name`` in a new page, run all its cells, check for widget errors; the page
    and the cell holding the explorer built by ``marker``. The page is kept for the failure
    artifacts under the notebook's two-digit prefix, its run time in ``timings``."""
    page = context.new_page()
    artifacts[name[:2]] = page
    open_notebook(page, lab, name)
    timings[f"{name[:2]} run all"] = run_all(page, name)
    assert_no_widget_errors(page)
    return page, explorer_cell(page, marker)


def test_explorers_in_jupyterlab(lab, browser, tmp_path):
    from playwright.sync_api import expect

    started = time.monotonic()
    context = browser.new_context(viewport={"width": 1500, "height": 1100})
    context.set_default_timeout(UI_S * 1000)
    timings = {}
    artifacts: dict = {}  # pages saved if the test fails
    try:
        # ---------------------------------------------------------------- 04: the masking explorer
        page, cell = open_and_run(context, lab, NOTEBOOKS[0], "MaskingExplorer.from_store", artifacts, timings)
        slider = cell.locator(".widget-slider")
        readout = slider.locator(".widget-readout")
        expect(readout).to_have_text("15")  # opens on a stored run (Experiment 2: m = 0, 15, 20, 25)
        rate = cell.locator(".widget-label", has_text="masking rate")
        metrics = cell.locator(".widget-html-content", has_text="teacher test NLL")
        expect(widget_images(cell)).to_have_count(2)  # the masked digits and the curves
        expect(static_image(cell)).to_have_count(1)
        before = dict(rate=rate.inner_text(), metrics=metrics.inner_text(),
                      digits=widget_images(cell).nth(0).get_attribute("src"),
                      curves=widget_images(cell).nth(1).get_attribute("src"),
                      static=static_image(cell).get_attribute("src"))
        figure = lab["root"] / "figures" / "explorer_masking_default.png"
        assert same_image(png_of(static_image(cell)), figure), "the static image is not the saved figure"

        # drag the slider's handle to m = 25, a stored mask size of the default grid (the track spans m = 0 .. 28)
        handle = slider.locator(".noUi-handle")
        track = slider.locator(".noUi-base").bounding_box()
        box = handle.bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.mouse.down()
        page.mouse.move(track["x"] + track["width"] * 25 / 28, box["y"] + box["height"] / 2, steps=8)
        page.mouse.up()
        expect(readout).to_have_text("25")
        expect(rate).to_contain_text("m = 25")
        expect(rate).not_to_have_text(before["rate"])
        expect(metrics).not_to_have_text(before["metrics"])
        expect(metrics).to_contain_text("0.797")  # the stored cell at m = 25: r = 625/784
        expect(widget_images(cell).nth(0)).not_to_have_attribute("src", before["digits"])
        expect(widget_images(cell).nth(1)).not_to_have_attribute("src", before["curves"])  # the ring moved
        expect(static_image(cell)).not_to_have_attribute("src", before["static"])
        save_view_and_check(cell, figure)
        assert_no_widget_errors(page)

        # ---------------------------------------------------------------- 05: the Pareto explorer
        page, cell = open_and_run(context, lab, NOTEBOOKS[1], "explorer = ParetoExplorer.from_store", artifacts,
                                  timings)
        details = cell.locator(".widget-html-content", has_text="cost axis")
        cost = cell.locator(".widget-dropdown", has=page.locator("label", has_text=re.compile(r"^cost$"))).locator(
            "select")
        expect(widget_images(cell)).to_have_count(1)  # the Pareto plot
        expect(static_image(cell)).to_have_count(1)
        expect(details).to_contain_text("FLOPs")
        before = dict(details=details.inner_text(), plot=widget_images(cell).first.get_attribute("src"),
                      static=static_image(cell).get_attribute("src"))
        model = cell.locator(".widget-dropdown", has=page.locator("label", has_text=re.compile(r"^model$"))).locator(
            "select").input_value()
        figure = lab["root"] / "figures" / f"explorer_pareto_{model}_default.png"
        assert same_image(png_of(static_image(cell)), figure), "the static image is not the saved figure"

        cost.select_option(label="parameters")
        expect(details).to_contain_text("cost axis: parameters")
        expect(details).not_to_have_text(before["details"])
        expect(widget_images(cell).first).not_to_have_attribute("src", before["plot"])
        expect(static_image(cell)).not_to_have_attribute("src", before["static"])
        save_view_and_check(cell, figure)
        assert_no_widget_errors(page)
        artifacts["04"].bring_to_front()
        assert_no_widget_errors(artifacts["04"])
        if os.environ.get("GPED_BROWSER_ARTIFACTS"):  # keep screenshots of a passing run too
            folder = save_artifacts(artifacts, Path(os.environ["GPED_BROWSER_ARTIFACTS"]), lab)
            print(f"\nbrowser test screenshots: {folder}")
    except BaseException:
        folder = save_artifacts(artifacts, tmp_path / "browser-artifacts", lab)
        print(f"\nbrowser test artifacts (screenshots, page HTML, JupyterLab log): {folder}")
        raise
    finally:
        timings["total"] = time.monotonic() - started
        print("browser test timings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))
        context.close()
