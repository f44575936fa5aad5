# An NBD export whose reads take a fixed time, one of a set of three that disturb each other:
# the one named `after` slows whatever is served right after it (a server still busy, a
# cache left cold), for issue 40's end-to-end carry-over test (tests/carry_e2e.rs).
#
#   nbdkit python carry.py name=NAME state=FILE after=NAME [delay=MS] [carry=MS] [for=MS]
#
# Every instance reads `delay` ms per request. The instance whose name is `after` touches
# `state` on every request; the others add `carry` ms to a request made less than `for` ms
# after its last one. Reads return zeros; writes are taken and dropped.
import os
import time

import nbdkit

API_VERSION = 2
size = 8 << 20
name = ""
state = None
after = None
delay = 0.010
carry = 0.0
carry_for = 1.0


def config(key, value):
    global size, name, state, after, delay, carry, carry_for
    if key == "size":
        size = nbdkit.parse_size(value)
    elif key == "name":
        name = value
    elif key == "state":
        state = value
    elif key == "after":
        after = value
    elif key == "delay":
        delay = float(value) / 1000.0
    elif key == "carry":
        carry = float(value) / 1000.0
    elif key == "for":
        carry_for = float(value) / 1000.0
    else:
        raise Exception("unknown parameter " + key)


def thread_model():
    return nbdkit.THREAD_MODEL_PARALLEL


def open(readonly):
    return 1


def get_size(h):
    return size


def can_flush(h):
    return True


def flush(h, flags):
    pass


def wait():
    d = delay
    if name == after:
        os.utime(state)
    else:
        try:
            if time.time() - os.stat(state).st_mtime < carry_for:
                d += carry
        except FileNotFoundError:
            pass
    time.sleep(d)


def pread(h, buf, offset, flags):
    wait()
    buf[:] = bytes(len(buf))


def pwrite(h, buf, offset, flags):
    wait()
