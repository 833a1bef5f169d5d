#!/usr/bin/env python3
"""Automating a run with `squall.Client`: load a profile, start, watch live stats, step up
the rate, stop, and check that the run was clean (exit status 0 only then).

Start a daemon first, then run this script against it:

    squall daemon --listen 127.0.0.1:4501 &            # or: --unix /tmp/squall.sock
    PYTHONPATH=python python3 examples/automation/automation.py   # --unix /tmp/squall.sock, --profile ..., --mult ...

The profile (.py or .json) is compiled on the client side and sent as JSON IR, so the
daemon may run from another directory.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from squall import Client, ProfileLoadError


def main() -> int:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=4501)
    ap.add_argument("--unix", help="unix socket of the daemon (instead of TCP)")
    ap.add_argument("--profile", default=os.path.join(here, "w1-astf-http.py"))
    ap.add_argument("--mult", type=float, default=100.0, help="initial rate multiplier")
    ap.add_argument("--steps", type=int, default=3, help="rate steps (x2 each)")
    ap.add_argument("--step-sec", type=float, default=2.0)
    args = ap.parse_args()

    c = Client(server=args.server, port=args.port, unix=args.unix)
    c.connect()
    try:
        try:
            info = c.load_profile(args.profile)
        except ProfileLoadError as e:
            print(f"profile refused:\n{e}", file=sys.stderr)
            return 2
        print(f"loaded {args.profile}: {info['templates']} template(s)")
        c.start(mult=args.mult, duration=-1)
        mult = args.mult
        for step in range(args.steps):
            time.sleep(args.step_sec)
            live = c.get_stats()["live"]
            print(f"mult {mult:>8g}: {live['cps']:>9.0f} CPS  {live['active_flows']:>6} active  "
                  f"{live['wire_gbps']:.3f} Gbit/s  {live['errors']} errors")
            if step + 1 < args.steps:
                mult *= 2
                c.update(mult)
        c.stop(block=True, timeout=60)
        st = c.get_stats()
        print(f"done: {st['client']['flows']['started']} flows, {st['rates']['cps']:.0f} CPS on average, "
              f"{st['errors']} errors")
        for g in st["groups"]:
            lat = g["latency_us"]["connect"]
            if lat["count"]:
                print(f"  {g['name']}: connect p50 {lat['p50']} us, p99 {lat['p99']} us")
        warnings = c.get_warnings()
        for w in warnings:
            print(f"WARNING: {w}", file=sys.stderr)
        return 0 if st["clean"] and not warnings else 1
    finally:
        c.disconnect()


if __name__ == "__main__":
    sys.exit(main())
