# An NBD export with one injected fault, for sanbench's integrity tests (nbdkit python plugin).
#
#   nbdkit python faulty.py size=1M fault=FAULT at=OFFSET [dest=OFFSET]
#
# The fault hits the 4 KiB block at `at`; every write to it after the first (the first is the
# preconditioning fill) is affected, and reads of it for flip/stale:
#   none       a correct RAM disk
#   flip       a read of the block returns one byte flipped (at + 100); the disk is intact
#   drop       later writes to the block are dropped (it keeps the first write's data)
#   misdirect  later writes of the block land at `dest` instead
#   tear       later writes of the block land only in its first half
#   stale      reads of the block return what its first write put there (a stale cache)
#   trimjunk   a trim over the block fills it with 0xee bytes (anything else a trim zeroes)
#
# Trims and write-zeroes zero their range (a trim that keeps the data would be as correct).
import nbdkit

API_VERSION = 2
BLOCK = 4096
size = 1 << 20
fault = "none"
at = 0
dest = None
disk = None
writes_at = 0
first = None


def thread_model():
    return nbdkit.THREAD_MODEL_SERIALIZE_ALL_REQUESTS


def config(key, value):
    global size, fault, at, dest
    if key == "size":
        size = nbdkit.parse_size(value)
    elif key == "fault":
        fault = value
    elif key == "at":
        at = nbdkit.parse_size(value)
    elif key == "dest":
        dest = nbdkit.parse_size(value)
    else:
        raise Exception("unknown parameter " + key)


def config_complete():
    global disk, dest
    disk = bytearray(size)
    if dest is None:
        dest = (at + 16 * BLOCK) % size


def open(readonly):
    return 1


def get_size(h):
    return size


def can_flush(h):
    return True


def flush(h, flags):
    pass


def can_trim(h):
    return True


def can_zero(h):
    return True


def trim(h, count, offset, flags):
    disk[offset:offset + count] = bytes(count)
    if fault == "trimjunk" and offset <= at and at + BLOCK <= offset + count:
        disk[at:at + BLOCK] = b"\xee" * BLOCK


def zero(h, count, offset, flags):
    disk[offset:offset + count] = bytes(count)


def pwrite(h, buf, offset, flags):
    global writes_at, first
    data = bytearray(buf)
    end = offset + len(data)
    if offset <= at and at + BLOCK <= end:
        writes_at += 1
        i = at - offset
        block = bytes(data[i:i + BLOCK])
        if first is None:
            first = block
        if writes_at > 1:
            if fault == "drop":
                data[i:i + BLOCK] = disk[at:at + BLOCK]
            elif fault == "misdirect":
                disk[dest:dest + BLOCK] = block
                data[i:i + BLOCK] = disk[at:at + BLOCK]
            elif fault == "tear":
                data[i + BLOCK // 2:i + BLOCK] = disk[at + BLOCK // 2:at + BLOCK]
    disk[offset:end] = data


def pread(h, buf, offset, flags):
    n = len(buf)
    buf[:] = disk[offset:offset + n]
    if offset <= at and at + BLOCK <= offset + n:
        i = at - offset
        if fault == "flip":
            buf[i + 100] ^= 0xFF
        elif fault == "stale" and first is not None:
            buf[i:i + BLOCK] = first
