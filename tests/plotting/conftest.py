"""Fixtures for the plotting tests: a PNG decoder and a headless-Chromium probe of HTML files."""

from __future__ import annotations

import html as html_lib
import json
import re
import shutil
import struct
import subprocess
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--enable-unsafe-swiftshader",  # software WebGL, needed by 3D scenes without a GPU
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
)

# Injected first into <head>: collects JS errors, then writes what it saw into the DOM.
_PROBE = """<script>
window.__pgErrors = [];
window.addEventListener('error', function (e) { window.__pgErrors.push('error: ' + e.message); });
window.addEventListener('unhandledrejection', function (e) { window.__pgErrors.push('rejection: ' + e.reason); });
(function () { var ce = console.error; console.error = function () {
  window.__pgErrors.push('console.error: ' + Array.prototype.join.call(arguments, ' ')); ce.apply(console, arguments); }; })();
window.addEventListener('load', function () { setTimeout(function () {
  var action;
  try { action = Promise.resolve(eval(__ACTION__)); } catch (e) { action = Promise.resolve('action failed: ' + e); }
  action.then(function (v) { return v; }, function (e) { return 'action failed: ' + e; }).then(function (v) {
    var r = { errors: window.__pgErrors, action: v === undefined ? null : v,
      roots: document.querySelectorAll('.js-plotly-plot').length,
      main_svg: document.querySelectorAll('.main-svg').length,
      canvases: document.querySelectorAll('canvas').length,
      text: document.body.innerText };
    var pre = document.createElement('pre'); pre.id = 'pg-probe'; pre.textContent = JSON.stringify(r);
    document.body.appendChild(pre); }); }, 1500); });
</script>"""


def decode_png(data: bytes) -> np.ndarray:
    """Decode an 8-bit non-interlaced RGB/RGBA/grey PNG into ``(height, width, channels)`` uint8."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, ihdr = 8, [], None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", data[pos + 8 : pos + 21])
        elif kind == b"IDAT":
            idat.append(data[pos + 8 : pos + 8 + n])
        pos += 12 + n
    assert ihdr is not None
    width, height, depth, ctype, _, _, interlace = ihdr
    assert depth == 8 and interlace == 0, f"unsupported PNG: depth={depth} interlace={interlace}"
    bpp = {0: 1, 2: 3, 4: 2, 6: 4}[ctype]
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), np.uint8).reshape(height, 1 + width * bpp)
    out = np.zeros((height, width * bpp), np.uint8)
    prev = np.zeros(width * bpp, np.int64)
    for y in range(height):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int64)
        if f == 0:
            cur = line
        elif f == 1:  # Sub: running sum of each channel along the row
            cur = np.cumsum(line.reshape(width, bpp), axis=0).reshape(-1) % 256
        elif f == 2:  # Up
            cur = (line + prev) % 256
        else:  # Average (3) / Paeth (4): sequential along the row
            cur = np.zeros_like(line)
            for i in range(line.size):
                a = cur[i - bpp] if i >= bpp else 0
                b, c = prev[i], prev[i - bpp] if i >= bpp else 0
                if f == 3:
                    cur[i] = (line[i] + (a + b) // 2) % 256
                else:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                    cur[i] = (line[i] + pred) % 256
        out[y] = cur
        prev = cur
    return out.reshape(height, width, bpp)


@pytest.fixture(scope="session")
def png_pixels() -> Callable[[bytes], np.ndarray]:
    """The PNG decoder (no Pillow needed)."""
    return decode_png


def _find_chromium() -> str | None:
    if Path("/usr/bin/chromium").is_file():
        return "/usr/bin/chromium"
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="session")
def chromium() -> str:
    """Path of the Chromium executable; skips when there is none."""
    path = _find_chromium()
    if path is None:
        pytest.skip(
            "Chromium not installed (/usr/bin/chromium or `chromium` on PATH); `apt-get install -y chromium`"
        )
    return path


@pytest.fixture
def browser_probe(chromium: str, tmp_path: Path) -> Callable[..., dict]:
    """Open an HTML file in headless Chromium as a person would and report what rendered.

    Returns ``{"errors": [...], "roots": n, "main_svg": n, "canvases": n, "text": str,
    "action": value, "screenshot": (h, w, c) uint8 array}``. ``action`` is a JavaScript expression
    evaluated 1.5 s after load (a promise is awaited); its JSON value is reported.
    """

    def probe(
        html_path: Path, *, width: int = 900, height: int = 700, action: str = "null", screenshot: bool = True
    ) -> dict:
        page = Path(html_path).read_text(encoding="utf-8")
        probed = tmp_path / f"probe-{Path(html_path).name}"
        probe_js = _PROBE.replace("__ACTION__", json.dumps(action))
        probed.write_text(page.replace("<head>", "<head>" + probe_js, 1), encoding="utf-8")
        common = [chromium, *CHROMIUM_FLAGS, "--virtual-time-budget=6000", f"--window-size={width},{height}"]
        dom = subprocess.run(
            [*common, f"--user-data-dir={tmp_path / 'profile-dom'}", "--dump-dom", probed.as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
        match = re.search(r'<pre id="pg-probe">(.*?)</pre>', dom, re.S)
        assert match, "the probe never reported: the page did not finish loading"
        report = json.loads(html_lib.unescape(match.group(1)))
        if not screenshot:
            return report
        shot = tmp_path / f"shot-{Path(html_path).stem}.png"
        subprocess.run(
            [
                *common,
                f"--user-data-dir={tmp_path / 'profile-shot'}",
                f"--screenshot={shot}",
                Path(html_path).as_uri(),
            ],
            capture_output=True,
            timeout=120,
            check=True,
        )
        report["screenshot"] = decode_png(shot.read_bytes())
        report["screenshot_path"] = shot
        return report

    return probe


PERIOD = 32.0


def periodic_table(
    n: int = 160, d: int = 12, period: float = PERIOD, noise: float = 0.05, seed: int = 0
) -> np.ndarray:
    """Every column a sinusoid of one known ``period`` (random phase and amplitude) plus noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=np.float64)[:, None]
    amp, phase = rng.uniform(0.5, 2.0, d), rng.uniform(0, 2 * np.pi, d)
    return (amp * np.cos(2 * np.pi * t / period + phase) + noise * rng.normal(size=(n, d))).astype(np.float32)


@pytest.fixture(scope="session")
def periodic_embedding():
    """A ``PositionalEmbedding`` of :func:`periodic_table` with a named provenance."""
    import torch

    from pos_geometry.embedding import PositionalEmbedding, Provenance

    return PositionalEmbedding(
        torch.from_numpy(periodic_table()), Provenance("toy-periodic", "learned", "synthetic", revision="v1")
    )


@pytest.fixture(scope="session")
def periodic_result(periodic_embedding):
    """``periodicity`` of :func:`periodic_table` (99 surrogates, α = 0.05: five cycles of one period stand
    above smooth GP curves of the table's length scale at p = 0.02–0.05, which 39 surrogates cannot resolve)."""
    from pos_geometry.analysis.periodicity import periodicity

    return periodicity(periodic_embedding, n_surrogates=99, alpha=0.05)
