"""A Hugging Face Hub-compatible HTTP server on 127.0.0.1, for tests.

It serves repos built from files on disk and implements exactly the endpoints
huggingface_hub 2.4 calls for what pos_geometry uses:

* ``GET /api/models/{org}/{name}/revision/{rev}``  -> ``{"id", "sha", "siblings": [{"rfilename"}]}``
  (``HfApi.model_info``);
* ``GET /api/models/{org}/{name}/refs``            -> ``{"branches", "tags", "converts"}``
  (``HfApi.list_repo_refs``);
* ``GET /api/models/{org}/{name}/tree/{rev}``       -> ``[{"type": "file", "path", "size", "oid"}]``
  (``HfApi.list_repo_tree``, used by transformers to fetch shards);
* ``HEAD`` / ``GET /{org}/{name}/resolve/{rev}/{filename}`` with ``X-Repo-Commit``, ``ETag``,
  ``Content-Length``, ``Accept-Ranges`` and ``Range`` support (206 + ``Content-Range``; 416 when
  unsatisfiable) — ``get_hf_file_metadata``, ``hf_hub_download`` and range reads;
* optionally (``lfs_redirect``) ``/resolve`` of a weight file answers ``302`` to ``/cdn/{etag}``
  with ``X-Linked-Size``/``X-Linked-Etag``, as the Hub does for large (LFS) files;
* errors: 404 with ``X-Error-Code: RepoNotFound`` / ``RevisionNotFound`` / ``EntryNotFound``,
  which ``hf_raise_for_status`` turns into the matching huggingface_hub exceptions.

Every request is logged with the bytes written to the socket (status line, headers and
body), so tests measure the real transfer independently of the client's own counters.
``ignore_range = True`` makes it behave like a server that ignores ``Range`` (200 + whole body).
``validators`` sets which version headers a ranged file answer carries: ``"all"`` (ETag, X-Repo-Commit,
X-Linked-Etag), ``"none"``, ``"first"`` (the first answer only) or ``"lastmod"`` (only Last-Modified, from
the served file's mtime). ``latency_s`` delays every answer (a distant server); ``LoggedRequest.client_port`` tells the client's
keep-alive connections apart.

Faults: set ``server.fault = Fault(kind, ...)``. Range faults hit ranged ``GET``s of a file
(from the ``after + 1``-th on): ``"drop"`` (the connection closes mid-body), ``"short"`` (a
well-framed body shorter than the range), ``"ignore_range"``, ``"status"`` (``status``: 500,
429, 404...), ``"trickle"`` (one byte every ``trickle_s`` seconds), ``"changed"`` (the bytes
and ETag of the file ``other``), ``"alternate"`` (``other`` at every second matching answer: a server that
keeps changing the file), ``"redirect_loop"``, ``"bad_gzip"`` (a body that claims gzip
and is not). API faults hit the model listing: ``"non_json"``, ``"no_rfilename"``,
``"gated"``, ``"api_status"`` (``status``), ``"endless"`` (a listing that never ends), ``"gzip_bomb"`` (40 MiB of
listing in 40 KiB of gzip), ``"deep_json"`` (arrays nested 200,000 deep). Request faults hit any request whose path contains
``fault.path`` (every request when empty): ``"slow_headers"`` (the status line and headers one byte every
``trickle_s`` seconds, then a 503; the rest at once when the fault is cleared) and ``"retry_after"`` (503 with ``Retry-After: retry_after_s``).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

_CHUNK = 64 * 1024
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


@dataclass
class LoggedRequest:
    """One request as the server saw it."""

    method: str
    path: str
    status: int = 0
    range: str | None = None
    bytes_sent: int = 0  # everything written to the socket for this request (headers + body)
    body_bytes: int = 0
    aborted: bool = False  # the client closed the connection before the body was fully sent
    client_port: int = 0  # the client's end of the TCP connection (one per keep-alive connection)


RANGE_FAULTS = (
    "drop",
    "short",
    "ignore_range",
    "status",
    "trickle",
    "changed",
    "alternate",
    "redirect_loop",
    "bad_gzip",
)
API_FAULTS = ("non_json", "no_rfilename", "gated", "api_status", "endless", "gzip_bomb", "deep_json")
REQUEST_FAULTS = ("slow_headers", "retry_after")


@dataclass
class Fault:
    """A misbehaviour of the server (see the module docstring)."""

    kind: str
    status: int = 500
    after: int = 0  # matching requests answered correctly before the fault starts
    trickle_s: float = 0.25
    other: Path | None = None  # "changed": the file served instead, with its own ETag
    path: str = ""  # request faults: only requests whose path contains this
    retry_after_s: int = 30
    seen: int = 0

    def __post_init__(self) -> None:
        assert self.kind in RANGE_FAULTS + API_FAULTS + REQUEST_FAULTS, self.kind

    def applies(self, api: bool) -> bool:
        """Count one matching request; True once more than ``after`` have been seen."""
        if self.kind in REQUEST_FAULTS or (self.kind in API_FAULTS) != api:
            return False
        self.seen += 1
        return self.seen > self.after


@dataclass
class _Repo:
    refs: dict[str, str] = field(default_factory=dict)  # branch/tag -> commit
    commits: dict[str, dict[str, Path]] = field(default_factory=dict)  # commit -> filename -> file


def _etag(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class _CountingWriter:
    """Counts what is written, into ``count`` and the current request's ``bytes_sent``, BEFORE the bytes
    leave (and takes them back if the write fails): a client that has read a whole response finds it
    counted in the log, however fast it looks."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.count = 0
        self.entry: LoggedRequest | None = None

    def write(self, data: bytes) -> int:
        entry, n = self.entry, len(data)
        self.count += n
        if entry is not None:
            entry.bytes_sent += n
        try:
            return self.inner.write(data)
        except BaseException:
            self.count -= n
            if entry is not None:
                entry.bytes_sent -= n
            raise

    def flush(self) -> None:
        self.inner.flush()

    def __getattr__(self, name: str):  # closed, close, fileno, ...
        return getattr(self.inner, name)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        """A client hanging up (as a range reader does on a 200) is expected, not an error."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class HubServer:
    """Start with :meth:`start` (or use as a context manager); ``url`` is the endpoint for HF_ENDPOINT."""

    def __init__(self) -> None:
        self.repos: dict[str, _Repo] = {}
        self.log: list[LoggedRequest] = []
        self.ignore_range = False
        self.lfs_redirect = False
        self.fault: Fault | None = None
        self.latency_s = 0.0
        self.validators = "all"  # "all", "none", "first" (then dropped), "lastmod" (Last-Modified only)
        self.file_answers = 0  # ranged GET answers of a file so far
        self.answer_sha: str | None = None  # the model listing names this commit instead of the right one
        self._etags: dict[Path, str] = {}
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    # -- content --------------------------------------------------------------------------------
    def add_revision(self, repo_id: str, files: dict[str, Path], *, refs: tuple[str, ...] = ("main",)) -> str:
        """Serve ``files`` (repo-relative name -> path) as a new commit of ``repo_id``; returns its hash.

        ``refs`` are the branch names pointing to it.
        """
        repo = self.repos.setdefault(repo_id, _Repo())
        files = {name: Path(p) for name, p in files.items()}
        for p in files.values():
            if p not in self._etags:
                self._etags[p] = _etag(p)
        listing = json.dumps([*sorted((n, self._etags[p]) for n, p in files.items()), repo_id, *refs])
        commit = hashlib.sha1(listing.encode()).hexdigest()
        repo.commits[commit] = files
        for ref in refs:
            repo.refs[ref] = commit
        return commit

    # -- log ------------------------------------------------------------------------------------
    def clear_log(self) -> None:
        with self._lock:
            self.log.clear()

    @property
    def bytes_sent(self) -> int:
        with self._lock:
            return sum(r.bytes_sent for r in self.log)

    def requests(self) -> list[LoggedRequest]:
        with self._lock:
            return list(self.log)

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> HubServer:
        server = self

        class Handler(_Handler):
            hub = server

        self._httpd = _QuietServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- resolution -----------------------------------------------------------------------------
    def _resolve(self, repo_id: str, rev: str) -> tuple[_Repo | None, str | None]:
        repo = self.repos.get(repo_id)
        if repo is None:
            return None, None
        commit = rev if rev in repo.commits else repo.refs.get(rev)
        return repo, commit


class _Handler(BaseHTTPRequestHandler):
    hub: HubServer
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as production servers (nginx, CDNs) set it: the headers and a small body are two
    # writes, and with Nagle's algorithm the second waits for the client's delayed ACK (~40 ms per
    # small response on loopback), a stall the Hub does not have.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: object) -> None:  # silence stderr
        pass

    def setup(self) -> None:
        super().setup()
        self.wfile = _CountingWriter(self.wfile)  # type: ignore[assignment]

    # -- plumbing -------------------------------------------------------------------------------
    def _begin(self) -> LoggedRequest:
        entry = LoggedRequest(
            self.command, self.path, range=self.headers.get("Range"), client_port=self.client_address[1]
        )
        if self.hub.latency_s:
            time.sleep(self.hub.latency_s)  # a far-away server: every request waits this long
        self._entry, self._start = entry, self.wfile.count  # type: ignore[attr-defined]
        self.wfile.entry = entry  # type: ignore[attr-defined]
        with self.hub._lock:
            self.hub.log.append(entry)
        return entry

    def _finish(self) -> None:
        self._entry.bytes_sent = self.wfile.count - self._start  # type: ignore[attr-defined]
        self.wfile.entry = None  # type: ignore[attr-defined]

    def _body(self, data: bytes) -> None:
        """Write body bytes, counted in ``body_bytes`` before they leave (see :class:`_CountingWriter`)."""
        self._entry.body_bytes += len(data)
        try:
            self.wfile.write(data)
        except BaseException:
            self._entry.body_bytes -= len(data)
            raise

    def _reply(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self._entry.status = status
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and body:
            self._body(body)

    def _error(self, code: str, commit: str | None = None) -> None:
        headers = {"X-Error-Code": code, "X-Error-Message": code, "Content-Type": "application/json"}
        if commit:
            headers["X-Repo-Commit"] = commit
        self._reply(404, json.dumps({"error": code}).encode(), headers)

    def _json(self, data: object) -> None:
        self._reply(200, json.dumps(data).encode(), {"Content-Type": "application/json"})

    # -- routes ---------------------------------------------------------------------------------
    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        self._begin()
        fault = self.hub.fault
        try:
            if fault is not None and fault.kind in REQUEST_FAULTS and fault.path in self.path:
                fault.seen += 1
                if fault.seen > fault.after:
                    return self._request_fault(fault)
            self._route(unquote(urlsplit(self.path).path))
        except (BrokenPipeError, ConnectionResetError):
            self._entry.aborted = True
            self.close_connection = True
        finally:
            self._finish()

    def _route(self, path: str) -> None:
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"] and len(parts) >= 5:
            repo_id = "/".join(parts[2:4])
            if parts[4] == "refs":
                return self._refs(repo_id)
            if parts[4] == "revision" and len(parts) >= 6:
                return self._model_info(repo_id, "/".join(parts[5:]))
            if parts[4] == "tree" and len(parts) >= 6:
                return self._tree(repo_id, parts[5])
        if len(parts) >= 5 and parts[2] == "resolve":
            return self._resolve_file("/".join(parts[:2]), parts[3], "/".join(parts[4:]))
        if len(parts) == 2 and parts[0] == "cdn":
            for repo in self.hub.repos.values():
                for files in repo.commits.values():
                    for p in files.values():
                        if self.hub._etags[p] == parts[1]:
                            return self._send_file(p, {"ETag": f'"{parts[1]}"'})
        return self._reply(404, b"not found")

    def _refs(self, repo_id: str) -> None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            return self._error("RepoNotFound")
        branches = [
            {"name": n, "ref": f"refs/heads/{n}", "targetCommit": c} for n, c in sorted(repo.refs.items())
        ]
        return self._json({"branches": branches, "tags": [], "converts": []})

    def _model_info(self, repo_id: str, rev: str) -> None:
        found = self._commit_files(repo_id, rev)
        if found is None:
            return None
        commit, files = found
        fault = self.hub.fault
        if fault is not None and fault.applies(api=True):
            if fault.kind == "non_json":
                return self._reply(
                    200, b"<html>Service Unavailable</html>", {"Content-Type": "application/json"}
                )
            if fault.kind == "gated":
                headers = {
                    "X-Error-Code": "GatedRepo",
                    "X-Error-Message": "Access to this model is restricted",
                }
                return self._reply(403, b"{}", headers)
            if fault.kind == "api_status":
                return self._reply(fault.status, b"server error")
            if fault.kind == "gzip_bomb":
                body = b'{"sha": "%s", "siblings": [' % commit.encode() + b" " * (40 * 2**20) + b"]}"
                headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
                return self._reply(200, gzip.compress(body, 9), headers)
            if fault.kind == "deep_json":
                return self._reply(200, b"[" * 200_000 + b"]" * 200_000, {"Content-Type": "application/json"})
            if fault.kind == "endless":
                self._entry.status = 200
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                self._body(b'{"sha": "%s", "siblings": [' % commit.encode())
                block = b'{"rfilename": "x"}, ' * 4096
                for _ in range(4096):  # 320 MiB at most, until the client hangs up
                    self._body(block)
                return None
            bad = [{"name": name} for name in sorted(files)]  # no_rfilename
            return self._json({"id": repo_id, "sha": commit, "siblings": bad})
        siblings = [{"rfilename": name} for name in sorted(files)]
        sha = self.hub.answer_sha or commit
        return self._json({"id": repo_id, "modelId": repo_id, "sha": sha, "siblings": siblings})

    def _tree(self, repo_id: str, rev: str) -> None:
        """The recursive file listing (``HfApi.list_repo_tree``, which transformers uses for shards)."""
        found = self._commit_files(repo_id, rev)
        if found is None:
            return None
        listing = [
            {"type": "file", "path": name, "size": p.stat().st_size, "oid": self.hub._etags[p][:40]}
            for name, p in sorted(found[1].items())
        ]
        return self._json(listing)

    def _commit_files(self, repo_id: str, rev: str) -> tuple[str, dict[str, Path]] | None:
        """``(commit, files)`` of ``repo_id`` at ``rev``, or None after answering the 404."""
        repo, commit = self.hub._resolve(repo_id, rev)
        if repo is None:
            self._error("RepoNotFound")
            return None
        if commit is None:
            self._error("RevisionNotFound")
            return None
        return commit, repo.commits[commit]

    def _resolve_file(self, repo_id: str, rev: str, filename: str) -> None:
        repo, commit = self.hub._resolve(repo_id, rev)
        if repo is None:
            return self._error("RepoNotFound")
        if commit is None:
            return self._error("RevisionNotFound")
        path = repo.commits[commit].get(filename)
        if path is None:
            return self._error("EntryNotFound", commit)
        etag = self.hub._etags[path]
        headers = {"X-Repo-Commit": commit, "ETag": f'"{etag}"'}
        if self.hub.lfs_redirect and filename.endswith((".safetensors", ".bin")):  # LFS files only
            headers |= {"Location": f"/cdn/{etag}", "X-Linked-Size": str(path.stat().st_size)}
            headers["X-Linked-Etag"] = f'"{etag}"'
            return self._reply(302, b"", headers)
        return self._send_file(path, headers)

    def _send_file(self, path: Path, headers: dict[str, str]) -> None:
        requested = self.headers.get("Range")
        fault = self.hub.fault
        if not (requested and self.command == "GET" and fault is not None and fault.applies(api=False)):
            fault = None
        elif fault.kind == "changed" or (fault.kind == "alternate" and fault.seen % 2 == 0):
            path, headers = fault.other, {**headers, "ETag": f'"{_etag(fault.other)}"'}
        elif fault.kind == "status":
            return self._reply(
                fault.status, b"", {"X-Error-Code": "EntryNotFound"} if fault.status == 404 else {}
            )
        elif fault.kind == "redirect_loop":
            return self._reply(302, b"", {"Location": self.path})
        if requested and self.command == "GET":
            self.hub.file_answers += 1
            mode = self.hub.validators
            if mode != "all" and not (mode == "first" and self.hub.file_answers == 1):
                headers = {
                    k: v for k, v in headers.items() if k not in ("ETag", "X-Repo-Commit", "X-Linked-Etag")
                }
            if mode == "lastmod":
                headers["Last-Modified"] = formatdate(path.stat().st_mtime, usegmt=True)
        size = path.stat().st_size
        start, end, status = 0, size - 1, 200
        headers = {**headers, "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
        if fault is not None and fault.kind == "bad_gzip":
            headers["Content-Encoding"] = "gzip"
        ignore = self.hub.ignore_range or (fault is not None and fault.kind == "ignore_range")
        if requested and not ignore:
            match = _RANGE.match(requested.strip())
            if match is None or (match[1] == "" and match[2] == ""):
                return self._reply(416, b"", {"Content-Range": f"bytes */{size}"})
            if match[1] == "":  # suffix range: the last N bytes
                start, end = max(0, size - int(match[2])), size - 1
            else:
                start, end = int(match[1]), min(int(match[2]) if match[2] else size - 1, size - 1)
            if start >= size or start > end:
                return self._reply(416, b"", {"Content-Range": f"bytes */{size}"})
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        self._entry.status = status
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        kind = fault.kind if fault is not None else None
        length = end - start + 1
        self.send_header("Content-Length", str(length // 2 if kind == "short" else length))
        self.end_headers()
        if self.command == "HEAD":
            return
        if kind in ("drop", "short", "trickle", "bad_gzip"):
            return self._misbehave(kind, path, start, length, fault.trickle_s)
        with path.open("rb") as fh:
            fh.seek(start)
            remaining = end - start + 1
            while remaining > 0:
                block = fh.read(min(_CHUNK, remaining))
                self._body(block)
                remaining -= len(block)

    def _request_fault(self, fault: Fault) -> None:
        self._entry.status = 503
        if fault.kind == "retry_after":
            return self._reply(503, b"busy", {"Retry-After": str(fault.retry_after_s)})
        head = (
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n"
            + b"X-Pad: "
            + b"." * 300
            + b"\r\n\r\n"
        )
        self.close_connection = True
        for i in range(len(head)):  # slow_headers: until the client hangs up, or the fault is cleared
            if self.hub.fault is not fault:  # the rest at once: a client still reading ends now
                self.wfile.write(head[i:])
                break
            self.wfile.write(head[i : i + 1])
            self.wfile.flush()
            time.sleep(fault.trickle_s)

    def _misbehave(self, kind: str, path: Path, start: int, length: int, trickle_s: float) -> None:
        with path.open("rb") as fh:
            fh.seek(start)
            body = fh.read(length)
        if kind == "bad_gzip":
            prefix = b"\x1f\x8b not gzip at all"
            self.wfile.write((prefix + body)[:length])
        elif kind == "short":
            self.wfile.write(body[: length // 2])
        elif kind == "drop":
            self.wfile.write(body[: length // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        else:  # trickle, until the client hangs up
            for i in range(length):
                self.wfile.write(body[i : i + 1])
                self.wfile.flush()
                time.sleep(trickle_s)


def point_hub_at(monkeypatch, server: HubServer, tmp_path: Path) -> None:
    """Point huggingface_hub at ``server`` with private caches under ``tmp_path``.

    huggingface_hub reads HF_ENDPOINT / HF_HUB_CACHE / HF_HUB_OFFLINE into
    ``huggingface_hub.constants`` at import time, so the constants are patched (the env vars too,
    for anything that reads them later).
    """
    from huggingface_hub import constants

    hf_home = tmp_path / "hf_home"
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.setenv("HF_HUB_CACHE", str(hf_home / "hub"))
    monkeypatch.setenv("POS_GEOMETRY_CACHE", str(tmp_path / "pos_geometry_cache"))
    # the tables this machine keeps beside the checkout would answer before the server: out of sight
    monkeypatch.setenv("POS_GEOMETRY_DATA", str(tmp_path / "no_real_tables"))
    monkeypatch.setenv("POS_GEOMETRY_TABLES", str(tmp_path / "no_exported_tables"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("POS_GEOMETRY_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(constants, "ENDPOINT", server.url)
    monkeypatch.setattr(
        constants, "HUGGINGFACE_CO_URL_TEMPLATE", server.url + "/{repo_id}/resolve/{revision}/{filename}"
    )
    monkeypatch.setattr(constants, "HF_HOME", str(hf_home))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hf_home / "hub"))
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(hf_home / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(hf_home / "stored_tokens"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    monkeypatch.setattr(constants, "AGENT_HARNESSES_PATH", str(hf_home / ".agent_harnesses.json"))
    # huggingface_hub fetches an "agent harness" registry once per process on its first request;
    # that is its own traffic, not the loader's: give it an empty registry so logs hold only ours.
    from huggingface_hub.utils import _detect_agent

    monkeypatch.setattr(_detect_agent, "_registry", _detect_agent._EMPTY_REGISTRY)
    # Clients made once per process keep the endpoint they were made with: huggingface_hub's module-level
    # HfApi, and the one transformers makes on first use (AutoTokenizer lists a repo's chat templates through
    # it). Made during an earlier test, they would call that test's server, closed by now, and retry it with
    # backoff (a comparison test waited 140 s so).
    import sys

    from huggingface_hub import hf_api

    monkeypatch.setattr(hf_api.api, "endpoint", server.url)
    if "transformers.utils.hub" in sys.modules:
        monkeypatch.setattr(sys.modules["transformers.utils.hub"], "_hf_api", None)


def go_offline(monkeypatch) -> None:
    """``HF_HUB_OFFLINE=1`` as huggingface_hub sees it."""
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
