"""The notebooks: stored clean (every notebook in notebooks/), executable with papermill, and runnable through a
real JupyterLab server (REST API + the kernel's websocket channel), as a user opening them in the browser would."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
ALL_NOTEBOOKS = sorted(NOTEBOOKS.glob("*.ipynb"))
SERVER_START_S = 90
CELL_TIMEOUT_S = 90


# --------------------------------------------------------------------------------------------------
# Stored without outputs, with a first markdown cell and a parameters cell


def executed_notebooks() -> set[str]:
    """Every notebook the code executes (stems): the analysis notebooks and the reference comparison of a grid,
    the walkthrough of each backbone x task, the sequential study's."""
    from typhoon.runner import notebooks
    from typhoon.studies.sequential import decisive

    named = (*notebooks.ANALYSIS_NOTEBOOKS, notebooks.REFERENCE_NOTEBOOK, notebooks.PAIR_NOTEBOOK)
    return {Path(nb.name).stem for nb in named} | {Path(decisive.NOTEBOOK).stem}


def test_every_notebook_the_code_executes_exists():
    executed = executed_notebooks()
    assert executed <= {p.stem for p in ALL_NOTEBOOKS}, \
        f"notebooks/ holds {[p.name for p in ALL_NOTEBOOKS]}, the code executes {sorted(executed)}"


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stored_clean(path):
    import nbformat
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.cells and nb.cells[0].cell_type == "markdown" and nb.cells[0].source.strip().startswith("#"), \
        f"{path.name}: the first cell must be markdown saying what the notebook shows"
    parameters = [i for i, c in enumerate(nb.cells)
                  if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]
    assert len(parameters) == 1, f"{path.name}: needs exactly one code cell tagged 'parameters', found {parameters}"
    assert nb.cells[parameters[0]].source.strip(), f"{path.name}: the parameters cell is empty"
    with_outputs = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.outputs]
    with_counts = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.execution_count is not None]
    assert not with_outputs, f"{path.name}: cells {with_outputs} are stored with outputs"
    assert not with_counts, f"{path.name}: cells {with_counts} are stored with execution counts"
    executed = [i for i, c in enumerate(nb.cells)
                if {"papermill", "execution"} & set(c.metadata) or "injected-parameters" in c.metadata.get("tags", [])]
    assert "papermill" not in nb.metadata and not executed, f"{path.name}: stored from an executed copy"


def assert_validates_without_warnings(path: Path) -> None:
    """``path`` reads and validates with nbformat with no warning at all (a warning is raised as an error here,
    so the failure names it), and, read as plain JSON, every cell has an id of its own. The ids are checked in the
    JSON as well because nbformat fills a missing id in as it reads (warning once, MissingIDFieldWarning): every
    run that executes the notebook, and every test that reads it, would print that warning on stderr."""
    import warnings

    import nbformat
    raw = json.loads(path.read_text(encoding="utf-8"))
    ids = [cell.get("id") for cell in raw["cells"]]
    without = [i for i, cell_id in enumerate(ids) if not cell_id]
    assert not without, f"{path.name}: cells {without} have no id"
    repeated = sorted({cell_id for cell_id in ids if ids.count(cell_id) > 1})
    assert not repeated, f"{path.name}: ids {repeated} are used by more than one cell"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nbformat.validate(nbformat.read(path, as_version=nbformat.NO_CONVERT))


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_validates_without_warnings(path):
    assert_validates_without_warnings(path)


def test_the_validation_sees_a_cell_without_an_id(tmp_path):
    """The check above fails on the warning nbformat gives a cell without an id (notebook 01 had two)."""
    raw = json.loads((NOTEBOOKS / "00_setup.ipynb").read_text(encoding="utf-8"))
    del raw["cells"][1]["id"]
    path = tmp_path / "no_id.ipynb"
    path.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(AssertionError, match=r"cells \[1\] have no id"):
        assert_validates_without_warnings(path)
    raw["cells"][1]["id"] = raw["cells"][0]["id"]
    path.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(AssertionError, match="used by more than one cell"):
        assert_validates_without_warnings(path)


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=lambda p: p.stem)
def test_every_figure_is_shown_with_its_caption_as_alt_text(path):
    """A figure shown as an image output (``IPython.display.Image``, a plotted figure) reaches nbconvert's HTML
    without alt text (issue 52: "nbconvert warns that 4 images have no alt text"); ``show_figure`` shows it as
    an ``<img>`` whose alt is the caption ``save_figure`` stored in the PNG."""
    import nbformat
    code = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
    assert "Image(" not in code and "plt.show" not in code, \
        f"{path.name}: show figures with typhoon.report.display.show_figure, not IPython.display.Image / plt.show"


COMMITTED = sorted((REPO / "results").glob("*/notebooks/*.ipynb"))  # the executed copies the studies committed


@pytest.mark.results
def test_every_committed_notebook_validates_without_warnings():
    """The executed copies under results/ (the runs' notebooks under notebooks/runs/ too) are read by the
    results tier and by the report: each validates as the stored notebooks do (one test, naming each that fails)."""
    committed = sorted((REPO / "results").glob("*/notebooks/**/*.ipynb"))
    assert committed, "no committed notebooks found"
    failing = []
    for path in committed:
        try:
            assert_validates_without_warnings(path)
        except Exception as err:  # an AssertionError, or the warning raised as an error
            failing.append(f"{path.relative_to(REPO)}: {type(err).__name__}: {err}")
    assert not failing, "\n".join(failing)


@pytest.mark.results
@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: f"{p.parents[1].name}/{p.stem}")
def test_every_committed_figure_has_alt_text(path):
    """nbconvert's HTML of a committed notebook warns of no image without alt text: no output whose shown form
    (nbconvert's display priority: HTML before images) is a bare image, no <img> without alt. The per-cell
    notebooks under notebooks/runs/ of the sequential studies, from the engine before worker processes, are
    not rerun (each shows its cell's curve as a bare image)."""
    import re

    import nbformat
    bare = []
    for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "text/html" in data:
                bare += [i for tag in re.findall(r"<img\b[^>]*>", data["text/html"]) if " alt=" not in tag]
            elif any(mime.startswith("image/") for mime in data):
                bare.append(i)
    assert not bare, f"{path.relative_to(REPO)}: cells {bare} show a figure without alt text (reanalyse the folder)"


# --------------------------------------------------------------------------------------------------
# Papermill


@pytest.fixture()
def one_thread(monkeypatch):
    """Kernels inherit the environment: keep them on one thread on the shared machine."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(var, "1")


@pytest.mark.slow
@pytest.mark.parametrize("name, extra", [("00_setup", {}), ("01_masking_walkthrough", {"num_threads": 1})])
def test_walkthrough_notebook_executes_quickly(name, extra, tmp_path, one_thread):
    import papermill

    out = tmp_path / "outputs"
    nb = papermill.execute_notebook(
        str(NOTEBOOKS / f"{name}.ipynb"), str(tmp_path / f"{name}.ipynb"),
        parameters={"quick": True, "out_dir": str(out), **extra}, kernel_name="python3", cwd=str(tmp_path),
        progress_bar=False, execution_timeout=CELL_TIMEOUT_S,
    )
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code)
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    html = "".join(o.get("data", {}).get("text/html", "") for c in code for o in c.outputs)
    if name == "00_setup":
        assert {p.name for p in (out / "setup").iterdir()} == {"environment.csv", "data.csv", "backbones.csv"}
        assert "word_id" in html and "[CLS]" in html
    else:
        figures = {p.name for p in (out / "figures" / "walkthrough").iterdir()}
        assert {"rates_vs_budget_mrpc.png", "saliency_tiny-random_mrpc_0.png"} <= figures
        assert 'data-selected="1"' in html and "kl_to_uniform" in html


# --------------------------------------------------------------------------------------------------
# A real JupyterLab server on localhost


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """A running ``jupyter lab`` and a tiny REST client for it."""

    def __init__(self, port: int, token: str, log: Path):
        self.port, self.token, self.log = port, token, log
        self.base = f"http://127.0.0.1:{port}"

    def request(self, method: str, path: str, body: dict | None = None, timeout: float = 30):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Authorization": f"token {self.token}",
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
            return resp.status, (json.loads(raw) if raw and "json" in resp.headers.get("Content-Type", "") else raw)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("jupyterlab")
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "JUPYTER_CONFIG_DIR": str(tmp / "config"), "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
           "JUPYTERLAB_SETTINGS_DIR": str(tmp / "settings"), "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces")}
    log = open(tmp / "server.log", "wb")  # closed in the finally below
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={NOTEBOOKS}", "--LabApp.extension_manager=readonly",  # no PyPI queries
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # containers and CI often run as root
        cmd.append("--allow-root")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp, start_new_session=True)
    server = Lab(port, token, tmp / "server.log")
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited with {proc.returncode}:\n{_tail(server.log)}")
            try:
                if server.request("GET", "/api/status", timeout=5)[0] == 200:
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"jupyter lab did not answer /api/status in {SERVER_START_S} s:\n{_tail(server.log)}")
            time.sleep(0.5)
        yield server
    finally:
        proc.terminate()  # the server shuts its kernels down on SIGTERM
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the group this fixture started (server and its kernels)
            proc.wait(timeout=10)
        log.close()


def _tail(path: Path, n: int = 3000) -> str:
    return path.read_text(errors="replace")[-n:] if path.exists() else "(no log)"


def _execute_request(code: str, session: str) -> tuple[str, dict]:
    msg_id = uuid.uuid4().hex
    header = {"msg_id": msg_id, "msg_type": "execute_request", "username": "pytest", "session": session,
              "date": datetime.now(UTC).isoformat(), "version": "5.3"}
    content = {"code": code, "silent": False, "store_history": True, "user_expressions": {},
               "allow_stdin": False, "stop_on_error": True}
    return msg_id, {"header": header, "parent_header": {}, "metadata": {}, "content": content,
                    "channel": "shell", "buffers": []}


async def _run_cells(lab: Lab, kernel_id: str, cells: list[str]) -> list[dict]:
    """Execute each cell over the kernel's websocket; per cell: reply status, error, number of rich outputs."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    session = uuid.uuid4().hex
    url = f"ws://127.0.0.1:{lab.port}/api/kernels/{kernel_id}/channels?session_id={session}"
    ws = await asyncio.wait_for(websocket_connect(HTTPRequest(url, headers={"Authorization": f"token {lab.token}"})),
                                timeout=30)
    results = []
    try:
        for code in cells:
            msg_id, msg = _execute_request(code, session)
            await ws.write_message(json.dumps(msg))
            result = {"status": None, "idle": False, "error": None, "rich": 0}
            while result["status"] is None or not result["idle"]:
                raw = await asyncio.wait_for(ws.read_message(), timeout=CELL_TIMEOUT_S)
                if raw is None:
                    raise ConnectionError("the kernel websocket closed")
                if isinstance(raw, bytes):  # binary frames only carry buffers (widgets), none here
                    continue
                reply = json.loads(raw)
                if reply.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                kind, content = reply["header"]["msg_type"], reply["content"]
                if reply["channel"] == "shell" and kind == "execute_reply":
                    result["status"] = content["status"]
                elif kind == "status" and content["execution_state"] == "idle":
                    result["idle"] = True
                elif kind == "error":
                    result["error"] = f"{content['ename']}: {content['evalue']}"
                elif kind in ("display_data", "execute_result"):
                    result["rich"] += 1
            results.append(result)
            if result["status"] != "ok":
                break
    finally:
        ws.close()
    return results


@pytest.mark.slow
def test_jupyterlab_serves_and_runs_the_setup_notebook(lab, tmp_path):
    import nbformat
    status, _ = lab.request("GET", "/api/status")
    assert status == 200
    status, page = lab.request("GET", "/lab")
    assert status == 200 and b"JupyterLab" in page
    _, listing = lab.request("GET", "/api/contents")
    assert executed_notebooks() <= {Path(item["name"]).stem for item in listing["content"] if item["type"] == "notebook"}
    _, specs = lab.request("GET", "/api/kernelspecs")
    assert "python3" in specs["kernelspecs"]

    # Open 00_setup as JupyterLab does: the notebook through the contents API, a session (and kernel) for it.
    _, model = lab.request("GET", "/api/contents/00_setup.ipynb?content=1")
    nb = nbformat.from_dict(model["content"])
    status, session = lab.request("POST", "/api/sessions", {"path": "00_setup.ipynb", "name": "00_setup.ipynb",
                                                           "type": "notebook", "kernel": {"name": "python3"}})
    assert status == 201
    try:
        cells = []
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            cells.append(cell.source)
            if "parameters" in cell.metadata.get("tags", []):  # what papermill would inject
                cells.append(f"quick = True\nout_dir = {str(tmp_path / 'outputs')!r}")
        results = asyncio.run(asyncio.wait_for(_run_cells(lab, session["kernel"]["id"], cells), timeout=240))
        failed = [(i, r) for i, r in enumerate(results) if r["status"] != "ok"]
        assert not failed and len(results) == len(cells), f"{failed}\n{_tail(lab.log)}"
        assert sum(r["rich"] for r in results) >= 4  # the three reports and at least one token table
        assert (tmp_path / "outputs" / "setup" / "environment.csv").is_file()
        _, kernel = lab.request("GET", f"/api/kernels/{session['kernel']['id']}")
        assert kernel["execution_state"] in ("idle", "busy")
    finally:
        lab.request("DELETE", f"/api/sessions/{session['id']}")  # shuts the kernel down
    _, sessions = lab.request("GET", "/api/sessions")
    assert session["id"] not in {s["id"] for s in sessions}
