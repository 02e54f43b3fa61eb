"""The anchor for bench/kernel: ipykernel driven through jupyter_client, as
a notebook front end drives it. Commands on stdin, one per line, so the
benchmark can interleave them with Berth's and both see the same machine:
"start" (re)starts the kernel and prints the seconds it took; "rounds N"
runs "1+1" N times and prints the seconds of each as a JSON list; "quit"."""
import json
import os
import sys
import time

from jupyter_client.manager import start_new_kernel

km = kc = None


def hook(msg):
    if msg["msg_type"] == "execute_result" and msg["content"]["data"]["text/plain"] != "2":
        raise SystemExit("1+1 gave %r" % (msg["content"]["data"],))


for line in sys.stdin:
    cmd = line.split()
    if cmd[0] == "start":
        if kc is not None:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
        t0 = time.perf_counter()
        km, kc = start_new_kernel(kernel_name="python3")
        print(json.dumps(time.perf_counter() - t0), flush=True)
    elif cmd[0] == "rounds":
        times = []
        for _ in range(int(cmd[1])):
            t0 = time.perf_counter()
            kc.execute_interactive("1+1", timeout=30, output_hook=hook)
            times.append(time.perf_counter() - t0)
        print(json.dumps(times), flush=True)
    elif cmd[0] == "quit":
        break
if kc is not None:
    kc.stop_channels()
    km.shutdown_kernel(now=True)
# Skip interpreter teardown, where jupyter_client's destructors log into a
# half-dismantled logging module.
os._exit(0)
