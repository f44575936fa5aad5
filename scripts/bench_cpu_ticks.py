#!/usr/bin/env python3
"""Host busy time two ways: the busy ticks of /proc/stat against the window less idle.

A burner thread is busy BURST µs at the start of every PERIOD µs for --secs, pinned to CPU 0,
sleeping in between (the shape of I/O at low queue depth and of an open loop). Around it
/proc/stat is read with the time, and the script prints, per burst shape and repetition:

  burner    the burner's own CPU time (time.thread_time: the kernel's exact runtime)
  ticks     busy ticks: user + nice + system + irq + softirq over the window (what sanbench
            counted before stop 36)
  window    the window less idle: wall × cores − idle − iowait − steal (what it counts now)

On a tickless kernel the tick stops while a core idles and idle is measured exactly, so the
busy ticks miss or multiply short bursts by their phase against the tick; the window less idle
holds the burner's time (plus whatever else ran). docs/MEASURE.md, CPU.

Usage: scripts/bench_cpu_ticks.py [--secs 5] [--reps 2] [--shapes 100/500,100/1000,300/700]
"""
import argparse, os, threading, time


def stat():
    f = open("/proc/stat").readline().split()[1:]
    v = [int(x) for x in f]
    return time.monotonic(), v


def burn(burst_s, period_s, secs, out):
    os.sched_setaffinity(0, {0})
    c0, t0 = time.thread_time(), time.monotonic()
    nxt = t0
    while time.monotonic() - t0 < secs:
        s = time.monotonic()
        while time.monotonic() - s < burst_s:
            pass
        nxt += period_s
        d = nxt - time.monotonic()
        if d > 0:
            time.sleep(d)
    out.append(time.thread_time() - c0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--secs", type=float, default=5)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--shapes", default="100/500,100/1000,300/700")
    a = ap.parse_args()
    hz = os.sysconf("SC_CLK_TCK")
    cores = os.cpu_count()
    print(f"{cores} cores, USER_HZ {hz}; CPU-seconds over each window")
    print(f"{'burst/period µs':>16} {'burner':>8} {'ticks':>8} {'window':>8}")
    for shape in a.shapes.split(","):
        b, p = (float(x) for x in shape.split("/"))
        for _ in range(a.reps):
            out = []
            t0, s0 = stat()
            th = threading.Thread(target=burn, args=(b / 1e6, p / 1e6, a.secs, out))
            th.start()
            th.join()
            t1, s1 = stat()
            d = [y - x for x, y in zip(s0, s1)]
            idle, iowait, steal = d[3], d[4], d[7] if len(d) > 7 else 0
            busy_ticks = (d[0] + d[1] + d[2] + d[5] + d[6]) / hz
            window = (t1 - t0) * cores - (idle + iowait + steal) / hz
            print(f"{shape:>16} {out[0]:8.2f} {busy_ticks:8.2f} {window:8.2f}")


if __name__ == "__main__":
    main()
