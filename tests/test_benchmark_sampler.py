"""The word-count benchmark's process sampler (``benchmarks/wordcount_vs_plain.py``):
the CPU seconds it reports are the whole process tree's, children included, as the
figures in docs/performance.md say."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.wordcount_vs_plain import PeakMemory  # noqa: E402

#: A parent that starts a child; each burns ``BURN`` CPU seconds, then idles for a
#: second before it exits (so that a poll sees its whole CPU time even on a busy machine).
TREE = """
import subprocess, sys, time
def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
burn(float(sys.argv[2]))
child.wait()
time.sleep(1.0)
"""
BURN = 0.6
CHILD = f"""
import time
end = time.process_time() + {BURN}
while time.process_time() < end:
    pass
time.sleep(1.0)
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the sampler reads /proc (Linux)")
def test_the_sampler_counts_the_cpu_of_the_whole_process_tree() -> None:
    process = subprocess.Popen([sys.executable, "-c", TREE, CHILD, str(BURN)])
    with PeakMemory(process.pid) as sampler:
        assert process.wait(timeout=60) == 0
    cpu = sampler.cpu_seconds()
    # Two processes each burned BURN seconds; start-up adds a little.
    assert 2 * BURN <= cpu["all"] <= 2 * BURN + 1.0, cpu
    assert len(sampler.cpu) >= 2, sampler.cpu  # the child was seen, not only the parent
    assert cpu["jit"] == 0.0  # no JVM in this tree
    assert sampler.mib()["driver"] > 0


#: A JVM with hot code (a loop the JIT compiles), then a second's idle before it exits.
HOT = """
public class Hot {
    public static void main(String[] args) throws Exception {
        long sum = 0;
        for (int round = 0; round < 50; round++)
            for (int i = 0; i < 1_000_000; i++) sum += Integer.toString(i ^ round).hashCode();
        System.out.println(sum);
        Thread.sleep(1000);
    }
}
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the sampler reads /proc (Linux)")
def test_the_sampler_counts_the_jvms_jit_compiler_threads_apart(tmp_path: Path) -> None:
    """A JVM's compiler threads are counted as JIT time, and within the tree's total.
    (Java 17, which Spark needs, runs a source file itself.)"""
    source = tmp_path / "Hot.java"
    source.write_text(HOT, encoding="utf-8")
    process = subprocess.Popen(["java", str(source)], stdout=subprocess.DEVNULL)
    with PeakMemory(process.pid) as sampler:
        assert process.wait(timeout=120) == 0
    cpu = sampler.cpu_seconds()
    assert 0.0 < cpu["jit"] < cpu["all"], cpu
    assert sampler.mib()["jvm"] > 0
