"""`evalkit data --corpus` against a loopback figshare: a small zip in the release's format,
served with Range support, a dropped connection, a server ignoring Range, a wrong checksum."""

from __future__ import annotations

import hashlib
import io
import json
import threading
import time
import zipfile

import pytest

from evalkit import cli
from evalkit.core.errors import KitError
from evalkit.datasets import csfcube_corpus, csfcube_download
from evalkit.study import params
from tests.loopback import Loopback

ARTICLE = "/v2/articles/14796339"


def release_zip(papers: int = 300) -> bytes:
    """A zip holding one .jsonl file, one paper per line, as abstracts-preds.zip."""
    lines = [json.dumps({"paper_id": str(10_000 + i), "title": f"Paper {i}",
                         "abstract": [f"We study problem {i}.", f"Our method {i} works."],
                         "pred_labels": ["background_label", "method_label"]}) for i in range(papers)]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("abstracts-preds.jsonl", "\n".join(lines) + "\n")
    return buffer.getvalue()


class Figshare(Loopback):
    """The article's metadata and the file; `drops` cuts the first responses after that many bytes;
    `ignore_range` answers every request with the whole file (200)."""

    def __init__(self, blob: bytes, md5: str | None = None, drops: tuple[int, ...] = (), ignore_range=False):
        super().__init__()
        self.blob, self.md5 = blob, md5 or hashlib.md5(blob).hexdigest()
        self.drops, self.ignore_range = list(drops), ignore_range
        self.ranges: list[str | None] = []

    def respond_get(self, path, headers):
        if path == ARTICLE:
            return 200, {"id": 14796339, "files": [
                {"id": 1, "name": "README.txt", "size": 3, "computed_md5": "0" * 32, "download_url": "x"},
                {"id": 2, "name": "abstracts-preds.zip", "size": len(self.blob), "computed_md5": self.md5,
                 "supplied_md5": self.md5, "download_url": f"{self.root}/files/2"}]}
        if path != "/files/2":
            return 404, {"message": "not found"}
        with self.lock:
            self.ranges.append(headers.get("Range"))
            drop = self.drops.pop(0) if self.drops else None
        start = 0
        if headers.get("Range") and not self.ignore_range:
            start = int(headers["Range"].removeprefix("bytes=").split("-")[0])
        if start >= len(self.blob):
            return 416, b""
        body = self.blob[start:]
        status = 206 if start else 200
        extra = {"Content-Length": str(len(body)), "Accept-Ranges": "bytes"}
        if start:
            extra["Content-Range"] = f"bytes {start}-{len(self.blob) - 1}/{len(self.blob)}"
        return status, [body[:drop]] if drop is not None else [body], extra


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("EVALKIT_PROGRESS", "off")
    monkeypatch.setattr(csfcube_download.time, "sleep", lambda s: None)
    return tmp_path / "cache"


def test_dropped_connection_resumes_with_range_and_records_sha256(cache, monkeypatch):
    blob = release_zip()
    with Figshare(blob, drops=(1000, 5000)) as server:
        monkeypatch.setenv(csfcube_download.API_ENV, server.root + "/v2")
        path = csfcube_download.download()
        assert server.ranges == [None, "bytes=1000-", "bytes=6000-"]  # each attempt resumes where the last stopped
        assert path.read_bytes() == blob
        assert not path.with_name(path.name + ".part").exists()
        record = json.loads(csfcube_download.record_path(path).read_text())
        assert record["sha256"] == hashlib.sha256(blob).hexdigest()
        assert record["md5"] == hashlib.md5(blob).hexdigest() and record["size"] == len(blob)
        assert csfcube_download.download() == path and len(server.ranges) == 3  # complete: no new request
    papers = list(csfcube_corpus.iter_corpus(path))
    assert len(papers) == 300 and papers[0].doc_id == "10000" and papers[0].sentences[1].label == "method"


def test_an_interrupted_download_resumes_in_a_later_command(cache, monkeypatch):
    blob = release_zip()
    part = csfcube_download.default_path().with_name("abstracts-preds.zip.part")
    part.parent.mkdir(parents=True)
    part.write_bytes(blob[:4321])  # what a killed command left
    with Figshare(blob) as server:
        monkeypatch.setenv(csfcube_download.API_ENV, server.root + "/v2")
        assert csfcube_download.download().read_bytes() == blob
        assert server.ranges == ["bytes=4321-"]


def test_a_server_that_ignores_range_restarts_the_file(cache, monkeypatch):
    blob = release_zip()
    with Figshare(blob, drops=(2000,), ignore_range=True) as server:
        monkeypatch.setenv(csfcube_download.API_ENV, server.root + "/v2")
        assert csfcube_download.download().read_bytes() == blob  # not the first 2000 bytes twice
        assert server.ranges == [None, "bytes=2000-"]


def test_a_wrong_checksum_deletes_the_file_and_fails_in_one_line(cache, monkeypatch):
    with Figshare(release_zip(), md5="0" * 32) as server:
        monkeypatch.setenv(csfcube_download.API_ENV, server.root + "/v2")
        with pytest.raises(KitError, match="md5 .* differs from the published 0{32}"):
            csfcube_download.download()
    folder = csfcube_download.default_path().parent
    assert sorted(p.name for p in folder.iterdir()) == []  # neither the file nor a partial one
    assert csfcube_download.downloaded() is None


def test_a_pinned_md5_refuses_a_changed_upstream_file(cache, monkeypatch):
    pinned = {**csfcube_download.manifest(), "md5": "f" * 32}
    monkeypatch.setattr(csfcube_download, "manifest", lambda: pinned)
    with Figshare(release_zip()) as server:
        monkeypatch.setenv(csfcube_download.API_ENV, server.root + "/v2")
        with pytest.raises(KitError, match="not the pinned f{32}"):
            csfcube_download.download()
        assert server.ranges == []  # refused before downloading


def test_give_up_after_every_attempt_drops(cache, monkeypatch):
    with Figshare(release_zip(), drops=(10,) * csfcube_download.ATTEMPTS) as server:
        monkeypatch.setenv(csfcube_download.API_ENV, server.root + "/v2")
        with pytest.raises(KitError, match="download incomplete after .* run the command again to resume"):
            csfcube_download.download()
    assert csfcube_download.default_path().with_name("abstracts-preds.zip.part").stat().st_size == 60


def test_cli_downloads_and_the_full_protocol_finds_the_file(cache, monkeypatch, capsys):
    blob = release_zip()
    with pytest.raises(KitError, match=r"PROTOCOL=full: needs CORPUS, abstracts-preds.zip.*evalkit data --corpus"):
        params.check("relevance", PROFILE="offline", PROTOCOL="full", CORPUS="")
    with Figshare(blob, drops=(777,)) as server:
        monkeypatch.setenv(csfcube_download.API_ENV, server.root + "/v2")
        assert cli.main(["data", "--corpus"]) == 0
    out = capsys.readouterr().out
    assert f"sha256 {hashlib.sha256(blob).hexdigest()}" in out and f"md5 {hashlib.md5(blob).hexdigest()}" in out
    study = params.check("relevance", PROFILE="offline", PROTOCOL="full", CORPUS="")
    assert study.corpus == str(csfcube_download.default_path())
    assert cli.main(["data", "--corpus", "--path"]) == 0  # complete: printed without a server
    assert capsys.readouterr().out.strip() == study.corpus


def test_cli_unreachable_api_is_one_line(cache, monkeypatch, capsys):
    with Figshare(b"") as server:
        root = server.root
    monkeypatch.setenv(csfcube_download.API_ENV, root + "/v2")  # the server is gone
    assert cli.main(["data", "--corpus"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot read figshare's file list" in err


# --- what the metadata may point at, and how much is read --------------------------------------------------


class Hostile(Figshare):
    """Figshare metadata or a file body chosen by the test: `article` replaces the metadata answer,
    `endless` sends the file and then bytes without end (no Content-Length)."""

    def __init__(self, blob: bytes, article=None, endless=False, url=None):
        super().__init__(blob)
        self.article, self.endless, self.url_override = article, endless, url

    def respond_get(self, path, headers):
        if path == ARTICLE and self.article is not None:
            return 200, self.article
        if path == ARTICLE and self.url_override is not None:
            status, body = super().respond_get(path, headers)[:2]
            body["files"][1]["download_url"] = self.url_override
            return status, body
        if path == "/files/2" and self.endless:
            def body():
                yield self.blob
                while True:
                    yield b"\0" * (1 << 16)
            return 200, body()
        return super().respond_get(path, headers)


@pytest.mark.parametrize("url", ["file:///etc/passwd", "http://example.org/files/2", "ftp://127.0.0.1/x"])
def test_a_download_url_off_the_mirror_is_refused(cache, monkeypatch, capsys, url):
    with Hostile(release_zip(), url=url) as server:
        monkeypatch.setenv(csfcube_download.API_ENV, server.root + "/v2")
        assert cli.main(["data", "--corpus"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "refusing to download" in err and url[:20] in err
    assert not list(cache.rglob("abstracts-preds.zip*"))


def test_the_official_api_accepts_only_https_on_figshares_hosts():
    pinned = csfcube_download.manifest()["api"]
    good = "https://ndownloader.figshare.com/files/123"
    assert csfcube_download.check_download_url(good, pinned, pinned) == good
    for bad in ("file:///etc/passwd", "http://ndownloader.figshare.com/files/1", "https://evil.example/files/1",
                "https://user@ndownloader.figshare.com/files/1"):
        with pytest.raises(KitError, match="refusing to download"):
            csfcube_download.check_download_url(bad, pinned, pinned)


def test_a_body_without_end_stops_at_the_published_size(cache, monkeypatch):
    blob = release_zip(50)
    with Hostile(blob, endless=True) as server:
        monkeypatch.setenv(csfcube_download.API_ENV, server.root + "/v2")
        path = csfcube_download.download()
    assert path.read_bytes() == blob


@pytest.mark.parametrize("article, fragment", [(b"[1, 2]", "a JSON list, not the article's metadata"),
                                               ({"files": "x"}, "no list of files"),
                                               (b'"' + b"x" * (17 << 20) + b'"', "over 16777216 bytes")])
def test_odd_figshare_metadata_is_one_line(cache, monkeypatch, capsys, article, fragment):
    with Hostile(release_zip(10), article=article) as server:
        monkeypatch.setenv(csfcube_download.API_ENV, server.root + "/v2")
        assert cli.main(["data", "--corpus"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and fragment in err, err


class Trickle(Figshare):
    """The article's metadata sent one byte every `every` seconds (each read succeeds in time)."""

    def __init__(self, blob: bytes, every: float = 0.2):
        super().__init__(blob)
        self.every = every

    def respond_get(self, path, headers):
        if path != ARTICLE:
            return super().respond_get(path, headers)
        body = json.dumps(super().respond_get(path, headers)[1]).encode()

        def trickle():
            pause = threading.Event()  # not time.sleep: the cache fixture makes that a no-op
            for i in range(len(body)):
                pause.wait(self.every)
                yield body[i:i + 1]
        return 200, trickle(), {"Content-Length": str(len(body))}


def test_a_trickled_metadata_answer_ends_at_the_total_deadline(cache, monkeypatch, capsys):
    # old code: each read met its timeout, so a byte every 0.2 s (every 2 s upstream) never ended
    monkeypatch.setattr(csfcube_download, "METADATA_DEADLINE_S", 1.0)
    with Trickle(release_zip(10)) as server:
        monkeypatch.setenv(csfcube_download.API_ENV, server.root + "/v2")
        started = time.monotonic()
        assert cli.main(["data", "--corpus"]) == 2
        took = time.monotonic() - started
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "cannot read figshare's file list" in err and "over 1 s in all" in err, err
    assert took < 5, took
    assert not list(cache.rglob("abstracts-preds.zip*"))
