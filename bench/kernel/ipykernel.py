"""The anchor for bench/kernel: ipykernel driven through jupyter_client, as
a notebook front end drives it. Prints one JSON object: start times and
round-trip times in seconds."""
import json
import os
import sys
import time

from jupyter_client.manager import start_new_kernel

starts, rounds = int(sys.argv[1]), int(sys.argv[2])
start_times = []
km = kc = None
for i in range(starts):
    t0 = time.perf_counter()
    km, kc = start_new_kernel(kernel_name="python3")
    start_times.append(time.perf_counter() - t0)
    if i < starts - 1:
        kc.stop_channels()
        km.shutdown_kernel(now=True)

results = []


def hook(msg):
    if msg["msg_type"] == "execute_result":
        results.append(msg["content"]["data"]["text/plain"])


kc.execute_interactive("1+1", timeout=30, output_hook=hook)  # warm up
round_times = []
for _ in range(rounds):
    t0 = time.perf_counter()
    kc.execute_interactive("1+1", timeout=30, output_hook=hook)
    round_times.append(time.perf_counter() - t0)
kc.stop_channels()
km.shutdown_kernel(now=True)
assert results and all(r == "2" for r in results), results
print(json.dumps({"start": start_times, "round": round_times}), flush=True)
# Skip interpreter teardown, where jupyter_client's destructors log into a
# half-dismantled logging module.
os._exit(0)
