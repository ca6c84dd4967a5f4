"""`evalkit data --corpus`: download the full-corpus file, abstracts-preds.zip (figshare 14796339).

The file is ~800k abstracts; a connection that drops mid-way must not cost the whole
download. So the bytes go to ``abstracts-preds.zip.part`` and every new attempt (in the
same command after a dropped connection, or a later command after an interrupt) asks
for the rest with an HTTP ``Range`` request. The finished file is checked against the md5
figshare publishes for it (`manifests/csfcube_corpus.yaml` says where that comes from and
pins it once known); a mismatch deletes the partial file and fails in one line. The
file's sha256 is recorded beside it (``abstracts-preds.zip.json``), and the full protocol
uses the downloaded file when no ``--corpus`` / ``CORPUS`` is given (`downloaded`, read through
CSFCube's `evalkit.datasets.scheme.FullCorpus` declaration by `evalkit.datasets.full_corpus`).

``EVALKIT_FIGSHARE_API`` names another API root (a mirror; the tests' loopback server).

What the metadata may point at is bounded: the download URL must be https on figshare's
download hosts (``download_hosts`` in the manifest), or on the mirror's own scheme and host
when a mirror is named (`check_download_url`); the metadata is read at most 16 MiB and within
`METADATA_DEADLINE_S` in all (each read within `TIMEOUT_S`), so a server sending a byte every
few seconds ends in one line; the download stops at the published size, whatever the server sends.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml

from evalkit.core import progress
from evalkit.core.errors import DataError, MissingPrerequisite
from evalkit.core.hashing import file_sha256, update_with_file
from evalkit.core.workspace import cache_root
from evalkit.data.runs import write_atomic

MANIFEST = Path(__file__).resolve().parents[1] / "manifests" / "csfcube_corpus.yaml"
API_ENV = "EVALKIT_FIGSHARE_API"
BLOCK = 1 << 20
ATTEMPTS = 6  # requests per download (each resumes where the last one stopped)
TIMEOUT_S = 60  # seconds per connection and per read
MAX_METADATA = 16 << 20  # bytes of figshare's article metadata read at most
METADATA_DEADLINE_S = 300.0  # seconds for the whole metadata answer (a few kB): a trickle ends there


@dataclass(frozen=True)
class Published:
    """What figshare's file metadata says about the file."""

    url: str
    size: int
    md5: str
    api: str


def manifest() -> dict:
    return yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))


def default_path() -> Path:
    """Where `download` puts the file: the kit's cache folder (``$EVALKIT_CACHE``)."""
    return cache_root() / "csfcube-corpus" / manifest()["file"]


def record_path(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def complete(path: Path) -> bool:
    """Whether `path` is a finished download: its record written and the file of the recorded size."""
    try:
        record = json.loads(record_path(path).read_text(encoding="utf-8"))
        return path.stat().st_size == record["size"]
    except (OSError, ValueError, KeyError, TypeError):
        return False


def downloaded() -> Path | None:
    """The downloaded file at `default_path`, when complete."""
    path = default_path()
    return path if complete(path) else None


def _get_json(url: str) -> dict:
    """figshare's article metadata: at most `MAX_METADATA` bytes within `METADATA_DEADLINE_S`, a JSON object."""
    deadline = time.monotonic() + METADATA_DEADLINE_S
    try:
        with urllib.request.urlopen(url, timeout=min(TIMEOUT_S, METADATA_DEADLINE_S)) as resp:
            body = _read_within(resp, deadline)
        data = json.loads(body)
    except (OSError, http.client.HTTPException, ValueError, RecursionError) as exc:
        raise MissingPrerequisite(f"cannot read figshare's file list {url} ({exc})", f"check the network or set "
                                  f"{API_ENV}") from None
    if not isinstance(data, dict):
        raise DataError(url, f"figshare's answer is a JSON {type(data).__name__}, not the article's metadata "
                        f"(an object with 'files'); check {API_ENV} points at figshare's API")
    return data


def _read_within(resp, deadline: float) -> bytes:
    """The body of `resp`, read as it comes, at most `MAX_METADATA` bytes and until `deadline`
    (`time.monotonic`; past it by one read's `TIMEOUT_S` at most): ValueError or TimeoutError past either."""
    parts, size = [], 0
    while True:
        if time.monotonic() >= deadline:  # checked between reads; each read is within TIMEOUT_S
            raise TimeoutError(f"the answer took over {METADATA_DEADLINE_S:g} s in all")
        block = resp.read1(1 << 16)
        if not block:
            return b"".join(parts)
        size += len(block)
        if size > MAX_METADATA:
            raise ValueError(f"an answer over {MAX_METADATA} bytes")
        parts.append(block)


def check_download_url(url: str, api: str, pinned_api: str) -> str:
    """`url` when it is where the file may come from: an https URL on one of the manifest's
    ``download_hosts`` (figshare's), or, for a mirror named by ``EVALKIT_FIGSHARE_API``, on the
    mirror's own scheme and host; anything else (``file://``, another host) is refused."""
    parts, mirror = urllib.parse.urlsplit(url), urllib.parse.urlsplit(api)
    official = api.rstrip("/") == pinned_api.rstrip("/")
    if official:
        allowed = parts.scheme == "https" and parts.hostname in manifest()["download_hosts"] and not parts.username
    else:
        allowed = (parts.scheme, parts.netloc) == (mirror.scheme, mirror.netloc) and parts.scheme in ("http", "https")
    if not allowed:
        hosts = ", ".join(manifest()["download_hosts"]) if official else f"the mirror {mirror.scheme}://{mirror.netloc}"
        raise DataError(api, f"the download_url {url[:200]!r} is not an https URL of {hosts}; refusing to download "
                        "it (check the article's metadata or the mirror)")
    return url


def published(api: str | None = None) -> Published:
    """The file's download URL, size and md5 from figshare's article metadata."""
    pinned = manifest()
    api = (api or os.environ.get(API_ENV) or pinned["api"]).rstrip("/")
    url = f"{api}/articles/{pinned['article']}"
    files = _get_json(url).get("files")
    if not isinstance(files, list):
        raise DataError(url, f"figshare's metadata has no list of files; check the article (figshare "
                        f"{pinned['article']})")
    entry = next((f for f in files or [] if isinstance(f, dict) and f.get("name") == pinned["file"]), None)
    if entry is None:
        raise DataError(url, f"lists no file {pinned['file']}; check the article (figshare {pinned['article']})")
    md5 = entry.get("computed_md5") or entry.get("supplied_md5")
    if not isinstance(md5, str) or len(md5) != 32 or not isinstance(entry.get("size"), int) \
            or not isinstance(entry.get("download_url"), str):
        raise DataError(url, f"the entry of {pinned['file']} lacks download_url, size or md5; cannot check it")
    if pinned.get("md5") and pinned["md5"] != md5:
        raise DataError(url, f"publishes md5 {md5} for {pinned['file']}, not the pinned {pinned['md5']} "
                        f"({MANIFEST.name}); the file changed upstream: check it before updating the pin")
    if entry["size"] < 0:
        raise DataError(url, f"the entry of {pinned['file']} has size {entry['size']}; cannot check it")
    return Published(check_download_url(entry["download_url"], api, pinned["api"]), entry["size"], md5.lower(), url)


def _attempt(url: str, part: Path, size: int, bar) -> None:
    """One request for the bytes `part` lacks, appended as they arrive (a drop keeps them)."""
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as resp:
        if have and resp.status != 206:  # the server ignored the range: start again
            have = 0
            bar.reset(total=size)
        with open(part, "ab" if have else "wb") as fh:
            while have < size:  # never past the published size, whatever the server sends
                block = resp.read(min(BLOCK, size - have))
                if not block:
                    break
                fh.write(block)
                have += len(block)
                bar.update(len(block))


def _fetch(url: str, part: Path, size: int) -> None:
    part.parent.mkdir(parents=True, exist_ok=True)
    last = "no attempt"
    with progress.bar(total=size, desc=f"download {part.name.removesuffix('.part')}", unit="B",
                      unit_scale=True) as bar:
        bar.update(part.stat().st_size if part.exists() else 0)
        for attempt in range(ATTEMPTS):
            have = part.stat().st_size if part.exists() else 0
            if have == size:
                return
            if have > size:
                part.unlink()
                bar.reset(total=size)
            try:
                _attempt(url, part, size, bar)
                continue
            except urllib.error.HTTPError as exc:
                if exc.code == 416:  # nothing left to send from there: the partial file is wrong
                    part.unlink(missing_ok=True)
                    bar.reset(total=size)
                elif exc.code != 429 and exc.code < 500:
                    raise MissingPrerequisite(f"{url} answered HTTP {exc.code}", "check the download URL") from None
                last = f"HTTP {exc.code}"
            except (OSError, http.client.HTTPException) as exc:
                last = f"{type(exc).__name__}: {exc}"
            time.sleep(min(0.2 * 2 ** attempt, 10.0))
    if not part.exists() or part.stat().st_size != size:
        raise MissingPrerequisite(f"{url}: download incomplete after {ATTEMPTS} attempts (last: {last})",
                                  f"run the command again to resume from {part}")


def _md5(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    update_with_file(digest, path)
    return digest.hexdigest()


def download(target: Path | None = None, api: str | None = None) -> Path:
    """The corpus file at `target` (default `default_path`): downloaded (resuming a partial file),
    checked against the published md5, its sha256 recorded; an already complete file is kept."""
    target = Path(target) if target else default_path()
    if complete(target):
        return target
    info = published(api)
    part = target.with_name(target.name + ".part")
    _fetch(info.url, part, info.size)
    md5 = _md5(part)
    if md5 != info.md5:
        part.unlink()
        raise DataError(info.url, f"the downloaded file's md5 {md5} differs from the published {info.md5} "
                        f"({info.api}); deleted it, run the command again")
    write_atomic(record_path(target), json.dumps({"file": target.name, "size": info.size, "md5": md5,
                                     "sha256": file_sha256(part), "download_url": info.url,
                                     "metadata": info.api}, indent=1) + "\n")
    os.replace(part, target)
    return target
