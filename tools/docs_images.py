"""Make the documentation site's pictures from a real run: plots the product wrote, and
screenshots of the MLflow UI and of the built site taken in headless Chromium.

Usage (from the repository root, after ``make venv``; Chromium from Debian's ``chromium``,
driven by Playwright: ``.venv/bin/pip install -e '.[docs-images]'``)::

    .venv/bin/python tools/docs_images.py plots        # runs `sia demo` first if out/demo is missing
    .venv/bin/python tools/docs_images.py mlflow       # the MLflow UI over out/mlflow.db
    .venv/bin/python tools/docs_images.py site OUTDIR  # every page of site/ at 1366x768

``plots`` copies the demo's figures (speedup CDF, slowdown boxes, the predictors'
precision-recall and reliability plots) and, when their runs are under ``out/``, the
regions and Figure 16 studies' plots into ``docs/img/``. ``mlflow`` serves the demo's
tracking store on a loopback port and takes the pages a user compares runs on (the
predictors' runs, a training run, the evaluation's per-policy runs side by side, the
registered models). ``site`` serves ``site/`` and takes every page: a look at the built
site at a laptop width before a release. Nothing here is drawn by hand.

The studies whose plots ``plots`` copies, run first (each page of docs/results/ names its
command; these are the runs the pictures in docs/img/ come from)::

    sia figure16 experiments/locality/figure16.yaml --out out/figure16 --workers 1
    sia figure5 experiments/figure5.yaml --out out/figure5
    sia evaluate experiments/regions_philly.yaml --out out/docs-regions --no-mlflow \\
        --set name=docs_regions --set replay.end_day=70 \\
        --set 'policies=[fcfs,{name: sia-perfect, label: home, regions: home},
                         {name: sia-perfect, label: global-history, regions: history}]'
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
IMG = ROOT / "docs" / "img"
OUT = Path(os.environ.get("SIA_OUTPUT", ROOT / "out"))
BIN = Path(sys.executable).parent
CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars")


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout_s: float = 120.0) -> None:
    """Wait until ``url`` answers (a server we started), or fail after ``timeout_s``."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(1.0)
    raise SystemExit(f"error: {url} did not answer within {timeout_s:.0f} s")


@contextlib.contextmanager
def serving(cmd: list[str], url: str):
    """Run a local server for the duration of the block; stop it after."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_http(url)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


#: What the MLflow UI (3.x) remembers in the browser: the classic "Model training" view, with
#: the assistant panel closed (its GenAI view and the panel otherwise cover the runs).
MLFLOW_STORAGE = {"mlflow.workflowType_v1": '"machine_learning"',
                  "mlflow.assistant.panelOpen_v1": "false",
                  "mlflow.assistant.fab.autoOpenedOnFirstLoad_v1": "true"}


def screenshots(pages: dict[Path, str | tuple[str, Any]], width: int = 1366, height: int = 768,
                wait_ms: int = 3000, storage: dict[str, str] | None = None) -> None:
    """Take each url of ``pages`` in headless Chromium (Playwright driving Debian's
    ``/usr/bin/chromium``) at ``width`` x ``height`` into its PNG path. A page given as
    (url, act) runs ``act(page)`` (clicks, typing) before the screenshot. ``storage``: the
    browser's localStorage, set before each page's scripts run."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("error: no chromium on PATH (Debian: apt-get install chromium)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=list(CHROMIUM_FLAGS[1:]))
        page = browser.new_page(viewport={"width": width, "height": height})
        if storage:
            page.add_init_script("".join(
                f"window.localStorage.setItem({json.dumps(k)}, {json.dumps(v)});"
                for k, v in storage.items()))
        for dest, target in pages.items():
            url, act = target if isinstance(target, tuple) else (target, None)
            dest.parent.mkdir(parents=True, exist_ok=True)
            page.goto(url, wait_until="load")
            page.wait_for_timeout(wait_ms)
            if act is not None:
                act(page)
                page.wait_for_timeout(wait_ms)
            page.screenshot(path=str(dest))
            print(f"wrote {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        browser.close()


# ----------------------------------------------------------------------------- plots
def _copy(src: Path, name: str) -> None:
    if src.exists():
        IMG.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, IMG / name)
        print(f"copied {src.relative_to(ROOT) if src.is_relative_to(ROOT) else src} -> "
              f"docs/img/{name}")
    else:
        print(f"skipped {name}: {src} not found (run its study first)")


def plots() -> None:
    """Copy the figures the product wrote into docs/img/."""
    demo = OUT / "demo"
    if not (demo / "summary.md").exists():
        subprocess.run([str(BIN / "sia"), "demo", "--out", str(demo)], check=True)
    _copy(demo / "exp-000" / "plots" / "speedup_cdf.png", "demo_speedup_cdf.png")
    _copy(demo / "exp-000" / "plots" / "slowdown_box.png", "demo_slowdown_box.png")
    _copy(demo / "exp-000" / "plots" / "per_pool_table.png", "demo_per_pool_table.png")
    run = json.loads((demo / "predictors.json").read_text()).get("run_id")
    artifacts = _artifacts_of(run) if run else None
    if artifacts is not None:
        _copy(artifacts / "precision_recall.png", "train_precision_recall.png")
        _copy(artifacts / "job_duration_reliability.png", "train_job_duration_reliability.png")
    _copy(OUT / "docs-regions" / "exp-000" / "plots" / "demand_to_supply.png", "regions_demand_to_supply.png")
    for png in sorted((OUT / "figure16").glob("*.png")):
        _copy(png, f"figure16_{png.name}")
    for png in sorted((OUT / "figure5").glob("*.png")):
        _copy(png, f"figure5_{png.name}")


def _artifacts_of(run_id: str) -> Path | None:
    """The local artifact folder of an MLflow run of the demo's store."""
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{OUT / 'mlflow.db'}")
    uri = mlflow.get_run(run_id).info.artifact_uri
    path = Path(uri.removeprefix("file://"))
    return path if path.exists() else None


# ----------------------------------------------------------------------------- MLflow
def _expand_parents(page: Any, child: str) -> None:
    """MLflow's runs table: open the sweep's parent run to list its per-policy runs, unless
    they show already (the UI remembers an opened parent across pages). ``child``: the name
    of one per-policy run."""
    button = page.locator('button[data-component-id*="runnamecellrenderer"]').first
    button.wait_for(state="visible", timeout=60_000)
    if not page.get_by_text(child, exact=True).first.is_visible():
        button.click()


def _close_dialog(page: Any) -> None:
    """Close a dialog the UI opens on its own (the model registry announces its new UI)."""
    dialog = page.get_by_role("dialog")
    if dialog.count() and dialog.first.is_visible():
        page.keyboard.press("Escape")


def _policy_charts(page: Any, child: str) -> None:
    """MLflow's runs page: switch to the chart view, open the parent run, show the speedups."""
    page.locator('svg:has(path[d^="m15.03 5.03"])').first.click()  # the chart view's icon
    page.wait_for_timeout(3000)
    _expand_parents(page, child)
    page.wait_for_timeout(3000)
    page.get_by_placeholder("Search metric charts").fill("speedup/")


def mlflow_pages(port: int) -> dict[str, str | tuple[str, Any]]:
    """The MLflow UI pages to take, by image name, from the demo's runs."""
    import mlflow
    from mlflow import MlflowClient

    mlflow.set_tracking_uri(f"sqlite:///{OUT / 'mlflow.db'}")
    client = MlflowClient()
    base = f"http://127.0.0.1:{port}/#"
    pages: dict[str, str | tuple[str, Any]] = {
        "mlflow_models.png": (f"{base}/models", _close_dialog)}
    pred = client.get_experiment_by_name("sia-predictors")
    if pred is not None:
        pages["mlflow_predictor_runs.png"] = f"{base}/experiments/{pred.experiment_id}"
        runs = client.search_runs([pred.experiment_id], order_by=["attributes.start_time DESC"],
                                  max_results=1)
        if runs:
            pages["mlflow_training_run.png"] = (
                f"{base}/experiments/{pred.experiment_id}/runs/{runs[0].info.run_id}")
    ev = client.get_experiment_by_name("sia-evaluations")
    if ev is not None:
        policies = f"{base}/experiments/{ev.experiment_id}/runs?searchFilter=" + \
            urllib.parse.quote_plus("params.policy LIKE '%'")
        policy_runs = client.search_runs([ev.experiment_id], "params.policy LIKE '%'",
                                         order_by=["attributes.start_time DESC"], max_results=5)
        if policy_runs:
            child = policy_runs[0].info.run_name
            pages["mlflow_evaluation_runs.png"] = (policies, lambda p: _expand_parents(p, child))
            pages["mlflow_policy_charts.png"] = (policies, lambda p: _policy_charts(p, child))
            ids = json.dumps([r.info.run_id for r in policy_runs], separators=(",", ":"))
            pages["mlflow_compare_policies.png"] = (
                f"{base}/compare-runs?runs={ids}&experiments=[\"{ev.experiment_id}\"]")
    return pages


def mlflow_screens() -> None:
    """Serve the demo's MLflow store on loopback and take the pages of mlflow_pages()."""
    db = OUT / "mlflow.db"
    if not db.exists():
        raise SystemExit(f"error: {db} not found: run `make demo` first")
    port = free_port()
    cmd = [str(BIN / "mlflow"), "ui", "--backend-store-uri", f"sqlite:///{db}",
           "--host", "127.0.0.1", "--port", str(port)]
    with serving(cmd, f"http://127.0.0.1:{port}/"):
        pages = {IMG / name: url for name, url in mlflow_pages(port).items()}
        screenshots(pages, height=800, wait_ms=8000, storage=MLFLOW_STORAGE)


# ----------------------------------------------------------------------------- the site
def site_screens(dest: Path) -> None:
    """Serve site/ on loopback and take every page at 1366x768."""
    site = ROOT / "site"
    if not (site / "index.html").exists():
        raise SystemExit("error: site/ not built: run `make docs` first")
    port = free_port()
    cmd = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
           "--directory", str(site)]
    pages = {}
    for page in sorted(site.rglob("index.html")):
        rel = page.parent.relative_to(site)
        name = "home" if str(rel) == "." else str(rel).replace("/", "_")
        pages[dest / f"{name}.png"] = f"http://127.0.0.1:{port}/{rel}/"
    with serving(cmd, f"http://127.0.0.1:{port}/"):
        screenshots(pages, wait_ms=500)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["plots", "mlflow", "site"])
    parser.add_argument("dest", nargs="?", default=str(ROOT / "out" / "site-shots"),
                        help="site: the folder for the page screenshots")
    args = parser.parse_args()
    if args.what == "plots":
        plots()
    elif args.what == "mlflow":
        mlflow_screens()
    else:
        site_screens(Path(args.dest))


if __name__ == "__main__":
    main()
