#!/usr/bin/env python3
"""Memory flat for a trace of any length (issue 42): a fio v3 iolog of GIB GiB (default 10)
replayed as fast as possible on null: from a FIFO, so that the trace is never on disk. The
writer writes it twice, once for the replay's scan and once for its stream (waiting for the
scan to close the FIFO first); the format is given, as a third reader would be needed to
tell it. Lines of 190 bytes (a long file name, as fio's iolog allows), 5,000 distinct I/Os
repeated: reads, writes and trims of 4-16 KiB, all at time 0 (an AFAP replay ignores times).
Prints sanbench's peak RSS (the document's `peak_rss_bytes`) and the wall time.

Usage: scripts/bench_replay_big.py SANBENCH [GIB]
"""
import json, os, subprocess, sys, tempfile, threading, time
sb = sys.argv[1]
total = int(float(sys.argv[2]) * (1 << 30)) if len(sys.argv) > 2 else 10 << 30
name = "/dev/disk/by-id/" + "x" * 150
lines = []
for i in range(5000):
    op = ["read", "write", "read", "trim"][i % 4]
    lines.append(f"0 {name} {op} {(i * 2654435761 % 262144) * 4096} {4096 << (i % 3)}\n")
block = "".join(lines).encode()
head = f"fio version 3 iolog\n0 {name} add\n".encode()
reps = (total - len(head)) // len(block)
size = len(head) + reps * len(block)
tmp = tempfile.mkdtemp()
fifo = os.path.join(tmp, "trace.fifo")
os.mkfifo(fifo)
child = None
def holds_fifo(pid):
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == fifo for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False
def writer():
    for k in range(2):
        if k:
            # The scan must have closed the FIFO before the stream's pass opens it: a writer
            # opening while the scan still reads would run both passes together.
            while holds_fifo(child.pid):
                time.sleep(0.01)
        with open(fifo, "wb", buffering=0) as f:
            f.write(head)
            for _ in range(reps):
                f.write(block)
t0 = time.time()
child = subprocess.Popen([sb, "replay", fifo, "null:", "--afap", "--format", "fio", "--qd", "32", "--json", "-", "-q"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
t = threading.Thread(target=writer, daemon=True)
t.start()
out, err = child.communicate()
wall = time.time() - t0
if child.returncode != 0:
    os.remove(fifo)
    os.rmdir(tmp)
    print(err)
    sys.exit(1)
d = json.loads(out)
r = d["results"][0]["replay"]
n = sum(r["replayed_ops"].values())
print(f"trace {size / (1 << 30):.2f} GiB, {n} I/Os ({size / n:.0f} B a line), complete {r['complete']}, "
      f"peak RSS {d['peak_rss_bytes'] / (1 << 20):.1f} MiB, wall {wall:.0f} s (scan and replay), "
      f"replay {r['replay_seconds']:.0f} s at {r['achieved_iops']:.0f} IOPS, load {os.getloadavg()[0]:.1f}")
os.remove(fifo)
os.rmdir(tmp)
