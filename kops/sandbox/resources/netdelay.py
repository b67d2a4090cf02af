"""Delay packets by a fixed time: the part of ``tc qdisc ... netem delay`` that kops' sandbox
needs, for kernels built without sch_netem.

Runs inside a sandbox container (python3 + fnfqueue, CAP_NET_ADMIN). iptables sends the
packets to delay to NFQUEUE ``QUEUE``; this process holds each one for ``DELAY_MS`` and then
accepts it, in arrival order (a constant delay keeps the order, as netem does). The queue is
fail-open: if more packets wait than it holds, the extra ones pass undelayed instead of
being dropped (loss is configured separately, with iptables' statistic match).

    python3 netdelay.py QUEUE DELAY_MS
"""

import collections
import sys
import threading
import time

import fnfqueue


def main(argv):
    queue, delay = int(argv[1]), float(argv[2]) / 1000.0
    conn = fnfqueue.Connection(packet_size=512)  # metadata only: the payload stays in the kernel
    q = conn.bind(queue)
    q.set_mode(0, fnfqueue.COPY_META)
    q.set_maxlen(65536)
    q.fail_open = True
    held = collections.deque()
    cv = threading.Condition()

    def release():
        while True:
            with cv:
                while not held:
                    cv.wait()
                due, packet = held[0]
                wait = due - time.monotonic()
                if wait > 0:
                    cv.wait(wait)
                    continue
                held.popleft()
            packet.accept()

    threading.Thread(target=release, daemon=True).start()
    print(f"netdelay: queue {queue}, {delay * 1000:.0f} ms", flush=True)
    while True:
        try:
            for packet in conn:
                with cv:
                    held.append((time.monotonic() + delay, packet))
                    cv.notify()
        except fnfqueue.BufferOverflowException:
            conn.reset()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
