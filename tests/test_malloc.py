"""glibc's allocator in a process hosting the core (cone/_malloc.py): the arenas are
limited from cone's own entry, whatever started it, and trimming gives memory back.
A real glibc in a real subprocess (skipped elsewhere)."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import textwrap

import pytest

from cone import _malloc

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only"
)

# Eight threads allocate at once (each would get an arena of its own); then glibc's own
# report (malloc_info) is read back: how many arenas ("heaps") the process has.
_PROBE = textwrap.dedent(
    """
    import asyncio, ctypes, json, os, re, sys, tempfile, threading
    from cone._command import run_loop

    def arenas() -> int:
        libc = ctypes.CDLL(None)
        libc.fopen.restype = ctypes.c_void_p
        libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
        libc.fclose.argtypes = [ctypes.c_void_p]
        fd, path = tempfile.mkstemp()
        os.close(fd)
        out = libc.fopen(path.encode(), b"w")
        libc.malloc_info(0, out)
        libc.fclose(out)
        with open(path) as f:
            report = f.read()
        os.unlink(path)
        return len(re.findall(r"<heap nr=", report))

    async def main() -> None:
        start = threading.Barrier(8)
        held = []

        def work() -> None:
            start.wait()  # all at once: no thread finds another's arena free
            held.append([bytearray(4096) for _ in range(200)])

        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(json.dumps({"arenas": arenas()}))

    run_loop(main(), hosting=sys.argv[1] == "hosting")
    """
)


def _arenas(mode: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    arenas: int = json.loads(done.stdout)["arenas"]
    return arenas


def test_a_process_hosting_the_core_limits_its_malloc_arenas() -> None:
    # The same threads in a process that only relays (plain asyncio) make their own.
    assert _arenas("relaying") > _malloc.ARENAS
    assert _arenas("hosting") <= _malloc.ARENAS


def test_trimming_gives_freed_memory_back() -> None:
    probe = textwrap.dedent(
        """
        import ctypes, json
        from cone import _malloc

        class Info(ctypes.Structure):
            _fields_ = [(n, ctypes.c_size_t) for n in (
                "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                "uordblks", "fordblks", "keepcost")]

        libc = ctypes.CDLL(None)
        libc.mallinfo2.restype = Info

        def resident_kib() -> int:
            for line in open("/proc/self/status"):
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
            raise AssertionError("no RssAnon")

        # 64 MiB in small blocks, seven of each eight freed and the last one kept:
        # nothing at the heap's top to give back on its own, 56 MiB of holes inside it.
        blocks = [bytearray(2000) for _ in range(32_000)]
        keep = blocks[7::8]
        del blocks
        before = resident_kib()
        _malloc.trim()
        print(json.dumps({"before": before, "after": resident_kib(), "kept": len(keep)}))
        """
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["before"] - got["after"] > 16 * 1024, got
