"""The watchdog word: a core reading it while its firmware beats never sees a torn value.

``struct.pack_into`` zero-fills its target before writing, so a core polling the word in
another process read a beat of 0 about once in 25 reads under load, judged the firmware
"silent for <uptime> s" and killed it (seen in a 10^6-message fuzz run)."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from dsp_side.watchdog import WatchdogWord

ROOT = Path(__file__).resolve().parents[2]
BEATER = """
import sys, time
from dsp_side.watchdog import WatchdogWord
word = WatchdogWord(sys.argv[1])
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    word.beat()
    word.task_begin(7)
    word.task_end()
"""


def test_a_reader_in_another_process_never_sees_a_torn_beat(tmp_path):
    path = str(tmp_path / "vdsp0.watchdog")
    word = WatchdogWord(path, create=True)
    child = subprocess.Popen([sys.executable, "-c", BEATER, path, "2.0"], cwd=ROOT)
    try:
        reads, last, zeros, backwards = 0, 0, 0, 0
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            beat, msg_id, start = word.read()
            reads += 1
            zeros += beat == 0
            backwards += beat < last
            last = max(last, beat)
            assert msg_id in (0, 7)
    finally:
        child.wait(10)
        word.close()
    assert reads > 10000
    assert (zeros, backwards) == (0, 0), f"{zeros} zero and {backwards} backward beats in {reads} reads"


def test_the_word_reads_back_what_was_written(tmp_path):
    word = WatchdogWord(str(tmp_path / "w"), create=True)
    beat, msg_id, start = word.read()
    assert abs(beat - time.monotonic_ns()) < 5e9 and (msg_id, start) == (0, 0)
    word.task_begin(42)
    assert word.read()[1] == 42 and word.read()[2] > 0
    word.task_end()
    assert word.read()[1:] == (0, 0)
    word.close()
