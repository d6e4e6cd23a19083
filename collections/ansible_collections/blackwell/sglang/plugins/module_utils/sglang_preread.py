# SPDX-License-Identifier: Apache-2.0
"""Pre-read of a model checkpoint into the page cache (blackwell.sglang.weights_preread): which files, how much of
them is resident, whether the rest fits in memory, and the parallel read itself.

Nothing here touches a GPU, locks memory or writes a file: it opens weight files read-only, asks the kernel which of
their pages are cached (``mincore(2)`` on a ``PROT_READ`` mapping, which faults nothing in) and reads the pages that
are not, so that the server's own read after a restart finds them in memory.

The memory rule (:func:`decide`), in ``auto`` mode::

    to_read = total - resident                      # the checkpoint's pages not in the page cache (measured)
    budget  = MemAvailable - resident - margin      # memory the read may fill without evicting the checkpoint itself
    read when 0 < to_read <= budget

MemAvailable (``/proc/meminfo``) counts clean page cache as available, the checkpoint's resident pages included, so
they are taken off: a read larger than the rest of the available memory would evict the checkpoint's own pages and
gain nothing. The margin (:func:`margin_bytes`) is what the host must keep beyond the checkpoint: the starting
server's own host memory (torch, a CUDA context and pinned buffers per rank) and the rest of the host's working set.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fnmatch
import json
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

GIB = 1 << 30
# What SGLang's default loader reads from a model directory: the first pattern that names a file wins, and
# safetensors files are kept only when model.safetensors.index.json (if any) maps a weight to them.
DEFAULT_PATTERNS = ("*.safetensors", "*.bin", "*.pt")
SAFETENSORS_INDEX = "model.safetensors.index.json"
MODES = ("auto", "always", "never")
# Residency is measured, and files are read, in windows of this many bytes (a multiple of any page size).
CHUNK = 64 << 20
# Bytes per read system call of a reader thread (one buffer per thread).
READ_BUFFER = 8 << 20


class PrereadError(Exception):
    """An option the module refuses (the message names it) or a file it cannot measure."""


@dataclass(frozen=True)
class Chunk:
    """One window of a weight file: ``length`` bytes at ``offset``, ``resident`` of them in the page cache."""

    path: str
    offset: int
    length: int
    resident: int


@dataclass
class WeightFile:
    """A weight file of a model directory, with its residency per chunk (empty until measured)."""

    path: str
    size: int
    model: str
    chunks: list[Chunk] = field(default_factory=list)

    @property
    def resident(self) -> int:
        return sum(c.resident for c in self.chunks)


@dataclass(frozen=True)
class Decision:
    """The memory rule's verdict: read or not, why not, and the figures behind it (bytes)."""

    read: bool
    reason: str | None
    to_read: int
    budget: int


def gib(value: int | float) -> str:
    """``value`` bytes as GiB with two decimals, e.g. ``'3.50 GiB'``."""
    return f"{value / GIB:.2f} GiB"


# --- memory ---------------------------------------------------------------------------------------------------------

def meminfo(text: str) -> dict[str, int]:
    """``/proc/meminfo``'s text as bytes per field (``kB`` fields multiplied by 1024; others as they are)."""
    fields: dict[str, int] = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        parts = rest.split()
        if not sep or not parts or not parts[0].isdigit():
            continue
        fields[name.strip()] = int(parts[0]) * (1024 if parts[1:2] == ["kB"] else 1)
    return fields


def margin_bytes(mem_total: int, margin_gib: float, margin_percent: float) -> int:
    """The memory kept free of the checkpoint: ``margin_gib`` GiB or ``margin_percent`` % of MemTotal, the larger."""
    if margin_gib < 0 or not 0 <= margin_percent <= 100:
        raise PrereadError("margin_gib must be >= 0 and margin_percent between 0 and 100")
    return max(int(margin_gib * GIB), int(mem_total * margin_percent / 100))


def decide(mode: str, total: int, resident: int, mem_available: int, margin: int) -> Decision:
    """Whether to read the ``total - resident`` bytes of a checkpoint not in the page cache (the module's docs).

    ``never`` reads nothing, ``always`` reads whatever is not resident, ``auto`` reads it when it fits in
    MemAvailable minus the checkpoint's resident bytes (MemAvailable counts them) minus ``margin``.
    """
    if mode not in MODES:
        raise PrereadError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if not 0 <= resident <= total:
        raise PrereadError(f"resident bytes ({resident}) must be between 0 and the total ({total})")
    to_read = total - resident
    budget = mem_available - resident - margin
    if mode == "never":
        return Decision(False, "mode is never", to_read, budget)
    if total == 0:
        return Decision(False, "no weight files", 0, budget)
    if to_read == 0:
        return Decision(False, f"already resident: all {gib(total)} in the page cache", 0, budget)
    if mode == "always" or to_read <= budget:
        return Decision(True, None, to_read, budget)
    reason = (f"does not fit: needs {gib(to_read)}, MemAvailable {gib(mem_available)} minus {gib(resident)} already "
              f"resident minus margin {gib(margin)}")
    return Decision(False, reason, to_read, budget)


# --- which files ----------------------------------------------------------------------------------------------------

def check_directory(option: str, path: str) -> str:
    """The real path of a model directory given in ``option``; refuses a relative path, ``..`` or a non-directory."""
    if not isinstance(path, str) or not path or "\0" in path:
        raise PrereadError(f"{option}: {path!r} is not a path")
    if not os.path.isabs(path):
        raise PrereadError(f"{option}: {path} is not an absolute path")
    if ".." in path.split("/"):
        raise PrereadError(f"{option}: {path} has a '..' component")
    real = os.path.realpath(path)
    if not os.path.isdir(real):
        raise PrereadError(f"{option}: {path} is not a directory")
    return real


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _indexed(directory: str, names: list[str]) -> list[str]:
    """SGLang's filter_duplicate_safetensors_files: with an index, only the safetensors files it maps weights to."""
    try:
        with open(os.path.join(directory, SAFETENSORS_INDEX), encoding="utf-8") as handle:
            weight_map = json.load(handle).get("weight_map")
    except (OSError, ValueError, AttributeError):
        return names
    if not isinstance(weight_map, dict):
        return names
    mapped = set(str(v) for v in weight_map.values())
    return [n for n in names if not n.endswith(".safetensors") or n in mapped]


def weight_files(option: str, directory: str, patterns: Iterable[str] = DEFAULT_PATTERNS) -> list[WeightFile]:
    """The weight files SGLang would read from ``directory`` (top level; the first pattern that names a file wins).

    A name that is a symbolic link is followed only within the directory: one whose target lies outside it is
    refused (naming ``option``); a target that is not a regular file is left out.
    """
    real = check_directory(option, directory)
    try:
        entries = sorted(os.listdir(real))
    except OSError as exc:
        raise PrereadError(f"{option}: cannot list {directory}: {exc.strerror}") from exc
    chosen: list[str] = []
    for pattern in patterns:
        chosen = [n for n in entries if fnmatch.fnmatchcase(n, pattern)]
        if chosen:
            break
    found = []
    for name in _indexed(real, chosen):
        target = os.path.realpath(os.path.join(real, name))
        if not _inside(target, real):
            raise PrereadError(f"{option}: {directory}/{name} leads outside the directory (to {target})")
        try:
            info = os.stat(target)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            found.append(WeightFile(target, info.st_size, real))
    return found


def model_dirs(option: str, paths: Iterable[str]) -> list[str]:
    """The real paths of the model directories ``paths`` (entry k checked as ``option[k]``), each once, in order."""
    dirs: list[str] = []
    for index, path in enumerate(paths):
        real = check_directory(f"{option}[{index}]", path)
        if real not in dirs:
            dirs.append(real)
    return dirs


def checkpoint(option: str, paths: Iterable[str], patterns: Iterable[str] = DEFAULT_PATTERNS) -> list[WeightFile]:
    """Every weight file of the model directories ``paths``, each file once.

    Several instances of one model give its directory several times (or through links): it is counted once, and a
    file reached twice (a hard link, two directories sharing files) too.
    """
    patterns = list(patterns)
    dirs: set[str] = set()
    seen: set[tuple[int, int]] = set()
    files: list[WeightFile] = []
    for index, path in enumerate(paths):
        label = f"{option}[{index}]"
        real = check_directory(label, path)
        if real in dirs:
            continue
        dirs.add(real)
        for item in weight_files(label, real, patterns):
            info = os.stat(item.path)
            if (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                files.append(item)
    return files


# --- residency ------------------------------------------------------------------------------------------------------

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_PROT_READ, _MAP_SHARED = 0x1, 0x01
_LOW_BIT = bytes(i & 1 for i in range(256))
_LIBC = None


def _libc() -> ctypes.CDLL:
    global _LIBC  # pylint: disable=global-statement
    if _LIBC is None:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        lib.mmap.restype = ctypes.c_void_p
        lib.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                             ctypes.c_int64]
        lib.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        lib.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
        _LIBC = lib
    return _LIBC


def _open(path: str) -> int:
    """A read-only descriptor of a regular file, not following a link in its last component."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise PrereadError(f"{path} is not a regular file")
    return fd


def _resident_in(fd: int, offset: int, length: int) -> int:
    """Bytes of ``length`` at ``offset`` (page aligned) of ``fd`` that are in the page cache, by mincore(2)."""
    libc = _libc()
    addr = libc.mmap(None, length, _PROT_READ, _MAP_SHARED, fd, offset)
    if addr in (None, ctypes.c_void_p(-1).value):
        err = ctypes.get_errno()
        raise OSError(err, "mmap: " + os.strerror(err))
    try:
        pages = (length + PAGE - 1) // PAGE
        vec = ctypes.create_string_buffer(pages)
        if libc.mincore(addr, length, vec) != 0:
            err = ctypes.get_errno()
            raise OSError(err, "mincore: " + os.strerror(err))
        flags = vec.raw
    finally:
        libc.munmap(addr, length)
    full = flags[:-1].translate(_LOW_BIT).count(1) * PAGE  # bit 0: resident; the other bits are reserved
    last = length - (pages - 1) * PAGE
    return full + (last if flags[-1] & 1 else 0)


def residency(path: str, chunk: int = CHUNK) -> list[Chunk]:
    """The file's chunks of ``chunk`` bytes with their bytes in the page cache (measured; nothing is read)."""
    if chunk <= 0 or chunk % PAGE:
        raise PrereadError(f"chunk must be a positive multiple of the page size ({PAGE})")
    fd = _open(path)
    try:
        size = os.fstat(fd).st_size
        return [Chunk(path, off, min(chunk, size - off), _resident_in(fd, off, min(chunk, size - off)))
                for off in range(0, size, chunk)]
    finally:
        os.close(fd)


def measure(files: list[WeightFile], chunk: int = CHUNK) -> int:
    """Measure every file's residency (into its ``chunks``); the checkpoint's resident bytes."""
    for item in files:
        item.chunks = residency(item.path, chunk)
        item.size = sum(c.length for c in item.chunks)
    return sum(item.resident for item in files)


# --- the read -------------------------------------------------------------------------------------------------------

@dataclass
class ReadResult:
    """What :func:`read` did: bytes read, chunks read, seconds, and whether the deadline stopped it."""

    bytes_read: int = 0
    chunks_read: int = 0
    seconds: float = 0.0
    timed_out: bool = False
    errors: list[str] = field(default_factory=list)


def _hint(fd: int, offset: int, length: int, advice_name: str) -> None:
    advice = getattr(os, advice_name, None)
    if advice is not None and hasattr(os, "posix_fadvise"):
        try:
            os.posix_fadvise(fd, offset, length, advice)
        except OSError:
            pass  # a hint only


def _read_chunk(item: Chunk, buf: bytearray) -> int:
    fd = _open(item.path)
    try:
        _hint(fd, 0, 0, "POSIX_FADV_SEQUENTIAL")  # a larger readahead window on this descriptor
        _hint(fd, item.offset, item.length, "POSIX_FADV_WILLNEED")  # start reading the whole chunk now
        done, view = 0, memoryview(buf)
        while done < item.length:
            want = min(len(buf), item.length - done)
            got = os.preadv(fd, [view[:want]], item.offset + done)
            if got <= 0:  # the file shrank: nothing more to read
                break
            done += got
        return done
    finally:
        os.close(fd)


def pending(files: list[WeightFile]) -> list[Chunk]:
    """The measured chunks not wholly resident, in file order (each file front to back)."""
    return [c for item in files for c in item.chunks if c.resident < c.length]


def read(chunks: list[Chunk], parallelism: int, timeout: float = 0,
         clock: Callable[[], float] = time.monotonic) -> ReadResult:
    """Read ``chunks`` into the page cache with ``parallelism`` threads; stop taking chunks after ``timeout`` s (0: none).

    Threads take chunks in order, so each file is read front to back and several files at once. The data is read into
    a per-thread buffer and dropped: only the page cache keeps it.
    """
    if parallelism < 1:
        raise PrereadError("parallelism must be at least 1")
    result = ReadResult()
    lock = threading.Lock()
    queue = list(reversed(chunks))
    start = clock()

    def worker() -> None:
        buf = bytearray(READ_BUFFER)
        while True:
            with lock:
                if not queue:
                    return
                if timeout and clock() - start >= timeout:
                    result.timed_out = True
                    return
                item = queue.pop()
            try:
                got = _read_chunk(item, buf)
            except (OSError, PrereadError) as exc:
                with lock:
                    result.errors.append(f"{item.path}: {exc}")
                continue
            with lock:
                result.bytes_read += got
                result.chunks_read += 1

    threads = [threading.Thread(target=worker, name=f"preread-{k}", daemon=True)
               for k in range(min(parallelism, max(len(chunks), 1)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result.seconds = clock() - start
    return result


def evict(path: str) -> None:
    """Drop a file's clean pages from the page cache (``posix_fadvise(DONTNEED)``): the benchmarks' cold start."""
    fd = _open(path)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


MEMINFO = "/proc/meminfo"
# The options of the pre-read (blackwell.sglang.weights_preread's, and server_preflight's ``preread`` suboptions).
PREREAD_SPEC: dict = {
    "paths": {"type": "list", "elements": "str", "required": True},
    "mode": {"type": "str", "choices": list(MODES), "default": "auto"},
    "margin_gib": {"type": "float", "default": 8},
    "margin_percent": {"type": "float", "default": 10},
    "parallelism": {"type": "int", "default": 8},
    "patterns": {"type": "list", "elements": "str", "default": list(DEFAULT_PATTERNS)},
    "timeout": {"type": "float", "default": 0},
}


def percent(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 2) if whole else 100.0


def run(params: dict, check_mode: bool, meminfo_text: str) -> dict:
    """The pre-read on validated ``params`` (:data:`PREREAD_SPEC`), as blackwell.sglang.weights_preread and
    blackwell.sglang.server_preflight's ``preread`` option return it; raises PrereadError for a refused option."""
    started = time.monotonic()
    if params["parallelism"] < 1:
        raise PrereadError("parallelism: must be at least 1")
    if params["timeout"] < 0:
        raise PrereadError("timeout: must be 0 (no limit) or more")
    if not params["patterns"]:
        raise PrereadError("patterns: must name at least one pattern")
    memory = meminfo(meminfo_text)
    if "MemAvailable" not in memory or "MemTotal" not in memory:
        raise PrereadError(f"{MEMINFO} has no MemAvailable or MemTotal line")
    dirs = model_dirs("paths", params["paths"])
    files = checkpoint("paths", params["paths"], params["patterns"])
    try:
        margin = margin_bytes(memory["MemTotal"], params["margin_gib"], params["margin_percent"])
    except PrereadError as exc:
        raise PrereadError(f"margin_gib/margin_percent: {exc}") from exc
    resident = measure(files)
    measured = time.monotonic()
    total = sum(item.size for item in files)
    decision = decide(params["mode"], total, resident, memory["MemAvailable"], margin)
    result = {
        "changed": False, "paths": dirs, "mode": params["mode"],
        "files": len(files), "bytes_total": total, "bytes_resident_before": resident,
        "bytes_to_read": total - resident, "bytes_read": 0, "bytes_resident_after": resident,
        "resident_percent_before": percent(resident, total), "resident_percent_after": percent(resident, total),
        "preread": decision.read, "skip_reason": decision.reason, "mem_available": memory["MemAvailable"],
        "mem_total": memory["MemTotal"], "margin": margin, "measure_seconds": round(measured - started, 3),
        "read_seconds": 0.0, "timed_out": False, "errors": [],
    }
    if decision.read and not check_mode:
        done = read(pending(files), params["parallelism"], params["timeout"])
        after = measure(files)
        result.update({"bytes_read": done.bytes_read, "read_seconds": round(done.seconds, 3),
                       "timed_out": done.timed_out, "errors": done.errors, "bytes_resident_after": after,
                       "resident_percent_after": percent(after, total)})
    result["seconds"] = round(time.monotonic() - started, 3)
    return result
